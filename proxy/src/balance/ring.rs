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
        let mut points = Vec::new();
        for (id, name, weight) in servers {
            let base = fnv1a(FNV_OFFSET, name.as_bytes());
            let n = POINTS_PER_WEIGHT.saturating_mul(weight.max(1));
            points.reserve(n as usize);
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
