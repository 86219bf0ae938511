//! A worker's tickets ([`Tickets`]): the right to make one attempt each, its share of `-n`
//! exactly, and its walk over the URLs (round-robin, or at random with `--targets-order`).
//! Plain data: nothing here allocates; a ticket is a few integer operations.

/// The right to make one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// Index of its URL.
    pub url: usize,
    /// Counted in the figures (false during --warmup).
    pub measured: bool,
}

/// A worker's tickets: its share of `-n` and its place in the round-robin over the URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tickets {
    /// Measured attempts this worker may make (`-n`); `None`: until the run ends.
    quota: Option<u64>,
    /// Measured attempts of the workers before this one: where its walk over the URLs starts.
    base: u64,
    n_urls: u64,
    issued: u64,
    warm_issued: u64,
    /// `--targets-order random`: a xorshift64 state (never 0); 0 walks the URLs in order.
    rng: u64,
}

impl Tickets {
    pub fn new(quota: Option<u64>, base: u64, n_urls: usize) -> Tickets {
        Tickets {
            quota,
            base,
            n_urls: n_urls.max(1) as u64,
            issued: 0,
            warm_issued: 0,
            rng: 0,
        }
    }

    /// Take the URLs at random (each worker its own seed) instead of in order.
    pub fn random(mut self, seed: u64) -> Tickets {
        // splitmix64's finalizer: every bit of the seed reaches the low bits the first draws
        // are taken from (a product alone left seeds that differ in their high half, another
        // shard's, drawing the same URLs).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.rng = (z ^ (z >> 31)) | 1;
        self
    }

    /// Every measured ticket of the quota has been taken (never without a quota).
    #[inline]
    pub fn spent(&self) -> bool {
        self.quota.is_some_and(|q| self.issued >= q)
    }

    /// The next ticket: measured ones up to the quota, warm-up ones without limit (they are
    /// never counted).
    pub fn take(&mut self, measuring: bool) -> Option<Ticket> {
        let count = if measuring {
            if self.spent() {
                return None;
            }
            &mut self.issued
        } else {
            &mut self.warm_issued
        };
        let url = if self.rng != 0 {
            // xorshift64: a few instructions, no state beyond this word.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            (self.rng % self.n_urls) as usize
        } else {
            ((self.base + *count) % self.n_urls) as usize
        };
        *count += 1;
        Some(Ticket {
            url,
            measured: measuring,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(t: &mut Tickets, measuring: bool, n: usize) -> Vec<Option<usize>> {
        (0..n).map(|_| t.take(measuring).map(|t| t.url)).collect()
    }

    #[test]
    fn tickets_stop_at_the_quota_and_walk_the_urls_from_the_base() {
        let mut t = Tickets::new(Some(4), 5, 3);
        assert_eq!(
            walk(&mut t, true, 6),
            [Some(2), Some(0), Some(1), Some(2), None, None]
        );
        // Warm-up tickets are never limited and never counted against the quota.
        let mut t = Tickets::new(Some(1), 0, 2);
        assert_eq!(walk(&mut t, false, 3), [Some(0), Some(1), Some(0)]);
        assert!(t.take(false).is_some_and(|t| !t.measured));
        assert_eq!(
            t.take(true),
            Some(Ticket {
                url: 0,
                measured: true
            })
        );
        assert_eq!(t.take(true), None);
        // Without a quota: until the run ends.
        let mut t = Tickets::new(None, 0, 1);
        assert!(walk(&mut t, true, 1000).iter().all(|u| *u == Some(0)));
        assert_eq!(Tickets::new(Some(0), 0, 1).take(true), None);
    }

    #[test]
    fn random_tickets_keep_the_quota_and_reach_every_url() {
        let mut t = Tickets::new(Some(300), 0, 3).random(1);
        let mut per_url = [0u32; 3];
        while let Some(ticket) = t.take(true) {
            per_url[ticket.url] += 1;
        }
        assert_eq!(per_url.iter().sum::<u32>(), 300);
        assert!(per_url.iter().all(|&n| n > 50), "{per_url:?}");
        // Seeds that differ only in their high half (another shard's) draw other URLs too.
        let first = |seed| {
            Tickets::new(None, 0, 64)
                .random(seed)
                .take(true)
                .unwrap()
                .url
        };
        let firsts: Vec<usize> = (0..4u64).map(|shard| first((shard << 32) + 1)).collect();
        let mut distinct = firsts.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 1, "{firsts:?}");
        // Another worker's seed walks another sequence.
        let mut a = Tickets::new(None, 0, 1000).random(1);
        let mut b = Tickets::new(None, 0, 1000).random(2);
        let differ = (0..10).any(|_| a.take(true) != b.take(true));
        assert!(differ);
    }

    #[test]
    fn the_workers_walks_make_one_round_robin() {
        // Two workers, quotas 3 and 4, bases 0 and 3, over 3 URLs: each URL gets its share.
        let mut per_url = [0u32; 3];
        for (quota, base) in [(3, 0), (4, 3)] {
            let mut t = Tickets::new(Some(quota), base, 3);
            while let Some(ticket) = t.take(true) {
                per_url[ticket.url] += 1;
            }
        }
        assert_eq!(per_url, [3, 2, 2]);
    }
}
