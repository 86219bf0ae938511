//! The ring of `balance = "hash"`: consistent hashing as ketama does it (libmemcached, nginx
//! `hash ... consistent`, HAProxy `hash-type consistent`). Each server owns
//! [`POINTS_PER_WEIGHT`] points per unit of weight on a ring of `u32` hashes, placed by
//! hashing its name with the point's number; a key goes to the owner of the first point at or
//! after the key's hash, wrapping around. Adding or removing one of N servers moves only the
//! keys whose first point was (or becomes) one of its points, about 1/N of them; every
//! other key stays where it was.
//!
//! Points depend on the server's name only (never on its position in the group), so every
//! worker builds the same ring, and a reload or a re-resolution that keeps a server keeps
//! its points. Built once per generation (`Balancer::new`); a lookup is a binary search, a
//! walk past unusable servers reads the ring in order: no allocation per request.
//!
//! The hash is FNV-1a 64 (a few lines, well known) followed by the MurmurHash3 64-bit
//! finaliser: FNV alone spreads short, similar strings (`app-1`, `app-2`; `/a?id=1`,
//! `/a?id=2`) poorly over the high bits the ring uses; the finaliser avalanches them.

use crate::config::ServerId;

/// Points per unit of weight (ketama's 160: 40 MD5 digests of 4 points each).
pub const POINTS_PER_WEIGHT: u32 = 160;

/// The most points a group's ring holds, beyond one per server (6 MiB at 24 bytes a point,
/// per worker and generation): 1,638 servers of weight 1 at the full 160 each. A heavier
/// group has its points scaled down alike, so the weights' proportions hold; the spread
/// stays even with a few hundred points per server, and no weight or number of servers can
/// make a worker allocate without bound (the ring is built on the workers, after validation:
/// a failed allocation there would abort the process, a reload's included).
pub const MAX_POINTS: usize = 1 << 18;

/// Servers' points in hash order.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    /// (point, owner), sorted; ties broken by the owner's name hash, so the order is the same
    /// whatever order the servers came in.
    points: Vec<(u32, u64, ServerId)>,
}

impl Ring {
    /// The ring of `servers`: each one's id, name and weight (0 counts as 1).
    pub fn new<'a>(servers: impl Iterator<Item = (ServerId, &'a str, u32)>) -> Ring {
        let servers: Vec<_> = servers.map(|(id, n, w)| (id, n, w.max(1))).collect();
        let total: u64 = servers.iter().map(|&(_, _, w)| u64::from(w)).sum();
        let mut points = Vec::with_capacity(ring_size(total).saturating_add(servers.len()));
        for (id, name, weight) in servers {
            let base = fnv1a(FNV_OFFSET, name.as_bytes());
            // Numbered from 0: a server whose count changes (the group's sum crossed the
            // bound) keeps its first points, and the keys on them.
            let n = points_of(weight, total);
            for i in 0..n {
                let h = fmix64(fnv1a(base, &i.to_le_bytes()));
                points.push(((h >> 32) as u32, base, id));
            }
        }
        points.sort_unstable_by_key(|&(p, tie, _)| (p, tie));
        Ring { points }
    }

    /// Every point's owner, from the first point at or after `key`'s place around the whole
    /// ring once: the key's server first, then the next distinct ones in ring order (a
    /// server appears many times; callers skip what they cannot use).
    pub fn walk(&self, key: u64) -> impl Iterator<Item = ServerId> + '_ {
        let at = key_point(key);
        let start = self.points.partition_point(|&(p, _, _)| p < at);
        let (before, from) = self.points.split_at(start);
        from.iter().chain(before).map(|&(_, _, id)| id)
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// The points of a ring whose weights sum to `total`, one per server aside.
fn ring_size(total: u64) -> usize {
    let full = total.saturating_mul(u64::from(POINTS_PER_WEIGHT));
    usize::try_from(full).map_or(MAX_POINTS, |n| n.min(MAX_POINTS))
}

/// A server's points for `weight` of `total`: 160 a unit while the ring fits in
/// [`MAX_POINTS`], else its share of them (at least one, so it keeps some keys).
fn points_of(weight: u32, total: u64) -> u32 {
    let full = u64::from(POINTS_PER_WEIGHT) * u64::from(weight);
    let n = if total.saturating_mul(u64::from(POINTS_PER_WEIGHT)) <= MAX_POINTS as u64 {
        full
    } else {
        // No overflow: a weight (32 bits) times the bound (18 bits).
        u64::from(weight) * MAX_POINTS as u64 / total.max(1)
    };
    n.clamp(1, MAX_POINTS as u64) as u32
}

/// A key's place on the ring: the high half of its hash.
fn key_point(key: u64) -> u32 {
    (key >> 32) as u32
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 over `bytes`, continuing from `h`.
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// MurmurHash3's 64-bit finaliser.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A request key's hash, as the ring reads it (the request model hashes the key it names:
/// `request::balance_key`).
pub fn hash_key(bytes: &[u8]) -> u64 {
    fmix64(fnv1a(FNV_OFFSET, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(names: &[String]) -> Ring {
        let servers = names.iter().enumerate();
        Ring::new(servers.map(|(i, n)| (ServerId::new(i), n.as_str(), 1)))
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("10.0.0.{}:8080", i + 1)).collect()
    }

    /// Each of 10,000 keys' server, by name.
    fn owners(r: &Ring, names: &[String]) -> Vec<String> {
        (0..10_000)
            .map(|k| {
                let key = hash_key(format!("/item?id={k}").as_bytes());
                let id = r.walk(key).next().expect("a server");
                names[id.index()].clone()
            })
            .collect()
    }

    #[test]
    fn fnv1a_is_the_published_function() {
        // The FNV-1a 64 test vectors (Fowler, Noll, Vo).
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn keys_spread_over_every_server_by_weight() {
        let names = names(4);
        let counts = |o: &[String]| -> Vec<usize> {
            names
                .iter()
                .map(|n| o.iter().filter(|x| *x == n).count())
                .collect()
        };
        let c = counts(&owners(&ring(&names), &names));
        // An even share is 2,500: within 20% with 160 points each.
        assert!(c.iter().all(|&n| (2_000..3_000).contains(&n)), "{c:?}");
        // Weight 3 against 1: about three times the keys.
        let weighted = Ring::new(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (ServerId::new(i), n.as_str(), if i == 0 { 3 } else { 1 })),
        );
        let c = counts(&owners(&weighted, &names));
        let share = c[0] as f64 / 10_000.0;
        assert!(
            (0.42..0.58).contains(&share),
            "{c:?}: weight 3 of 6 is half"
        );
    }

    /// Adding or removing one of N servers moves about 1/N of the keys, and only those.
    #[test]
    fn one_server_more_or_less_moves_about_one_nth_of_the_keys() {
        for n in [3, 5, 10] {
            let all = names(n);
            let before = owners(&ring(&all), &all);
            // Remove the middle one (its position must not matter: ids shift).
            let gone = all[n / 2].clone();
            let fewer: Vec<String> = all.iter().filter(|s| **s != gone).cloned().collect();
            let after = owners(&ring(&fewer), &fewer);
            let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
            let expect = 10_000.0 / n as f64;
            assert!(
                (0.5 * expect..1.5 * expect).contains(&(moved as f64)),
                "n={n}: {moved} moved, about {expect} expected"
            );
            for (a, b) in before.iter().zip(&after) {
                if *a != gone {
                    assert_eq!(a, b, "n={n}: a key not on the removed server moved");
                } else {
                    assert_ne!(b, &gone);
                }
            }
            // Adding one back (a new name): about 1/(n) of the keys go to it, none elsewhere.
            let mut more = fewer.clone();
            more.push("10.0.1.99:8080".into());
            let added = owners(&ring(&more), &more);
            let moved = after.iter().zip(&added).filter(|(a, b)| a != b).count();
            assert!(
                (0.5 * expect..1.5 * expect).contains(&(moved as f64)),
                "n={n}: {moved} moved to the new server, about {expect} expected"
            );
            for (a, b) in after.iter().zip(&added) {
                assert!(a == b || b == "10.0.1.99:8080", "n={n}: {a} -> {b}");
            }
        }
    }

    /// However many servers and however heavy: at most `MAX_POINTS` (and one per server),
    /// in the weights' proportions.
    #[test]
    fn the_ring_is_bounded_whatever_the_weights_and_keeps_their_proportions() {
        let names = names(10);
        let weighted = |w: &dyn Fn(usize) -> u32| {
            let servers = names.iter().enumerate();
            Ring::new(servers.map(|(i, n)| (ServerId::new(i), n.as_str(), w(i))))
        };
        let points_of = |r: &Ring, i: usize| {
            let id = ServerId::new(i);
            r.points.iter().filter(|&&(_, _, s)| s == id).count()
        };
        // 10 servers at weight 1,000: 1.6 million points at 160 a unit.
        let r = weighted(&|_| 1_000);
        assert!(r.points.len() <= MAX_POINTS, "{} points", r.points.len());
        assert!(
            r.points.len() > MAX_POINTS - 10,
            "{} points",
            r.points.len()
        );
        assert_eq!(points_of(&r, 0), points_of(&r, 9));
        // 3 to 1, scaled down alike.
        let r = weighted(&|i| if i == 0 { 3_000 } else { 1_000 });
        assert!(r.points.len() <= MAX_POINTS);
        let (heavy, light) = (points_of(&r, 0), points_of(&r, 1));
        assert!(heavy.abs_diff(3 * light) <= 3, "{heavy} against {light}");
        // The most a server may weigh, and more than the config allows: still bounded.
        let r = weighted(&|i| if i == 0 { u32::MAX } else { 1 });
        assert!(
            r.points.len() <= MAX_POINTS + 10,
            "{} points",
            r.points.len()
        );
        assert!(
            (1..10).all(|i| points_of(&r, i) >= 1),
            "every server has a point"
        );
        // Light groups keep ketama's 160 a unit, exactly.
        let r = weighted(&|i| i as u32 + 1);
        assert_eq!(points_of(&r, 4), 5 * POINTS_PER_WEIGHT as usize);
        assert_eq!(r.points.len(), 55 * POINTS_PER_WEIGHT as usize);
    }

    #[test]
    fn the_walk_visits_every_server_and_the_same_order_anywhere() {
        let all = names(5);
        let r = ring(&all);
        let key = hash_key(b"/x");
        let mut seen: Vec<ServerId> = Vec::new();
        for id in r.walk(key) {
            if !seen.contains(&id) {
                seen.push(id);
            }
        }
        assert_eq!(seen.len(), 5);
        assert_eq!(r.walk(key).count(), 5 * POINTS_PER_WEIGHT as usize);
        // The same servers listed in another order: the same owners by name.
        let mut rev = all.clone();
        rev.reverse();
        let r2 = ring(&rev);
        let first = |r: &Ring, names: &[String]| names[r.walk(key).next().unwrap().index()].clone();
        assert_eq!(first(&r, &all), first(&r2, &rev));
        assert!(Ring::default().walk(key).next().is_none());
    }
}
