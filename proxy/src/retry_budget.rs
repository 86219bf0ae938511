//! A worker's retry budget (Envoy's `retry_budget`, as a count over a window): retries may add
//! at most [`PERCENT`] % to the requests a worker sent upstream over the last
//! [`WINDOW`], plus [`MIN_RETRIES`] per window so that a worker with little traffic can still
//! retry. When the budget is spent, a failure that would have been retried goes to the client
//! as it is: an origin in trouble gets at most 1.2x its load (plus the minimum), never
//! `tries`x.
//!
//! The window slides in two halves: the counts of the current half and of the one before it
//! are summed; a half older than that is forgotten. Sans-IO: the time is given.

use std::time::{Duration, Instant};

/// Retries may add this share of the requests, in percent.
pub const PERCENT: u64 = 20;
/// Retries always allowed per window, whatever the traffic.
pub const MIN_RETRIES: u64 = 3;
/// How far back requests and retries are counted (the last two halves of it).
pub const WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    requests: u64,
    retries: u64,
}

/// One worker's budget.
#[derive(Debug)]
pub struct RetryBudget {
    /// When the current half started.
    half_start: Option<Instant>,
    current: Counts,
    previous: Counts,
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget::new()
    }
}

impl RetryBudget {
    pub const fn new() -> RetryBudget {
        RetryBudget {
            half_start: None,
            current: Counts {
                requests: 0,
                retries: 0,
            },
            previous: Counts {
                requests: 0,
                retries: 0,
            },
        }
    }

    fn advance(&mut self, now: Instant) {
        let half = WINDOW / 2;
        let start = *self.half_start.get_or_insert(now);
        let since = now.saturating_duration_since(start);
        if since < half {
            return;
        }
        self.previous = if since < 2 * half {
            self.current
        } else {
            Counts::default()
        };
        self.current = Counts::default();
        self.half_start = Some(now);
    }

    /// A request goes upstream (its first attempt).
    pub fn request(&mut self, now: Instant) {
        self.advance(now);
        self.current.requests += 1;
    }

    /// Whether one more retry fits, now.
    pub fn allows(&mut self, now: Instant) -> bool {
        self.advance(now);
        let requests = self.current.requests + self.previous.requests;
        let retries = self.current.retries + self.previous.retries;
        100 * (retries + 1) <= PERCENT * requests + 100 * MIN_RETRIES
    }

    /// Spend one retry (after [`Self::allows`] said it fits).
    pub fn spend(&mut self) {
        self.current.retries += 1;
    }
}

/// How many of `n` requests, each failing once where a retry would help, are retried
/// within one window: what the budget lets through (for tests and the documentation).
pub fn retried_of(n: u64) -> u64 {
    let mut b = RetryBudget::new();
    let now = Instant::now();
    let mut retried = 0;
    for _ in 0..n {
        b.request(now);
        if b.allows(now) {
            b.spend();
            retried += 1;
        }
    }
    retried
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_add_at_most_a_fifth_plus_the_minimum() {
        assert_eq!(retried_of(1), 1);
        assert_eq!(retried_of(3), 3);
        assert_eq!(retried_of(4), 3);
        assert_eq!(retried_of(5), 4);
        assert_eq!(retried_of(50), 13);
        assert_eq!(retried_of(1000), 203);
        for n in 0..300 {
            assert!(retried_of(n) <= n * PERCENT / 100 + MIN_RETRIES, "{n}");
        }
    }

    #[test]
    fn the_window_slides_in_halves() {
        let t0 = Instant::now();
        let mut b = RetryBudget::new();
        for _ in 0..3 {
            b.request(t0);
            assert!(b.allows(t0));
            b.spend();
        }
        b.request(t0);
        assert!(!b.allows(t0), "spent");
        // Half a window on, the spent retries still count.
        let t1 = t0 + WINDOW / 2;
        assert!(!b.allows(t1));
        // A whole window on, they are forgotten.
        let t2 = t1 + WINDOW / 2;
        assert!(b.allows(t2));
        // And after a long quiet time, at once.
        let mut b = RetryBudget::new();
        b.request(t0);
        for _ in 0..3 {
            b.spend();
        }
        assert!(!b.allows(t0));
        assert!(b.allows(t0 + 5 * WINDOW));
    }
}
