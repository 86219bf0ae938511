//! A worker's retry budget (Envoy's `retry_budget`, as a count over a window): retries may add
//! at most [`PERCENT`] % to the requests the worker served over the last [`WINDOW`] (the
//! routed requests it finished, and the one in hand), plus [`MIN_RETRIES`] per window so that a
//! worker with little traffic can still retry. When the budget is spent, a failure that would have been retried goes to the client
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

/// One worker's budget. Requests are not counted here: the worker counts every routed
/// request it finishes anyway (`ProxyCounters::requests`), and the budget reads that total
/// only when a retry is considered, so a request that needs no retry costs it nothing.
#[derive(Debug, Default)]
pub struct RetryBudget {
    /// When the current half started (`None`: no retry was considered yet).
    half_start: Option<Instant>,
    /// The request total when the window (the previous half) and the current half began.
    window_base: u64,
    half_base: u64,
    /// Retries spent in the previous half and in this one.
    previous_retries: u64,
    current_retries: u64,
}

impl RetryBudget {
    pub const fn new() -> RetryBudget {
        RetryBudget {
            half_start: None,
            window_base: 0,
            half_base: 0,
            previous_retries: 0,
            current_retries: 0,
        }
    }

    /// Move the window to `now`; `total`: the requests counted so far.
    fn advance(&mut self, now: Instant, total: u64) {
        let half = WINDOW / 2;
        let since = self
            .half_start
            .map_or(WINDOW, |start| now.saturating_duration_since(start));
        if since < half {
            return;
        }
        if since < 2 * half {
            self.window_base = self.half_base;
            self.previous_retries = self.current_retries;
        } else {
            // The first retry considered, or one after a quiet time: when the requests before
            // it came is not known (they may be hours old), so the window starts with the
            // request in hand.
            self.window_base = total.saturating_sub(1);
            self.previous_retries = 0;
        }
        self.half_base = total.saturating_sub(1);
        self.current_retries = 0;
        self.half_start = Some(now);
    }

    /// Take one retry if it fits, now, with `total` requests counted so far (the one in hand
    /// included).
    pub fn take(&mut self, now: Instant, total: u64) -> bool {
        self.advance(now, total);
        let requests = total.saturating_sub(self.window_base);
        let retries = self.previous_retries + self.current_retries;
        let fits = 100 * (retries + 1) <= PERCENT * requests + 100 * MIN_RETRIES;
        self.current_retries += u64::from(fits);
        fits
    }
}

/// How many of `n` requests, one after another, each failing once where a retry would help,
/// are retried within one window: what the budget lets through (for tests and the
/// documentation).
pub fn retried_of(n: u64) -> u64 {
    let mut b = RetryBudget::new();
    let now = Instant::now();
    (1..=n).filter(|&total| b.take(now, total)).count() as u64
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
        for total in 1..=3 {
            assert!(b.take(t0, total));
        }
        assert!(!b.take(t0, 4), "spent");
        // Half a window on, the spent retries still count.
        let t1 = t0 + WINDOW / 2;
        assert!(!b.take(t1, 4));
        // A whole window on, they are forgotten.
        let t2 = t1 + WINDOW / 2;
        assert!(b.take(t2, 4));
        // After a quiet time the window starts anew: the minimum, then a fifth of what comes.
        let t3 = t2 + 5 * WINDOW;
        for _ in 0..3 {
            assert!(b.take(t3, 1000));
        }
        assert!(!b.take(t3, 1000));
        assert!(b.take(t3, 1005));
    }
}
