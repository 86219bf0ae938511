//! `max_rate`: the origin answers at most N requests per second per worker and queues the
//! rest, so a ceiling search has a known answer.
//!
//! A token bucket in its virtual-scheduling form (GCRA): one request costs `1/N` of virtual
//! time; the bucket holds [`BURST`] worth of tokens, so timer jitter in the client's pacing is
//! absorbed while a sustained excess over N queues without bound (each request waits for its
//! slot, in arrival order). Sans-IO: [`Pacer::reserve`] takes `now` and returns when the
//! request may be answered; the connection sleeps until then.

use std::time::{Duration, Instant};

/// Tokens the bucket holds, as time at the configured rate: small, so a rate a few percent
/// over N exhausts it within a fraction of a second and the excess queues.
pub const BURST: Duration = Duration::from_millis(20);

/// One worker's bucket.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Virtual time one request costs (1/N).
    interval: Duration,
    /// How far ahead of the strict schedule a request may go (the bucket's depth, at least
    /// one interval's worth less than [`BURST`]).
    tolerance: Duration,
    /// Theoretical arrival time of the next request: the end of the last reserved slot.
    tat: Option<Instant>,
}

impl Pacer {
    /// `None` for a rate that is not a positive finite number.
    pub fn new(per_second: f64) -> Option<Pacer> {
        if !(per_second.is_finite() && per_second > 0.0) {
            return None;
        }
        let interval = Duration::from_secs_f64(1.0 / per_second);
        Some(Pacer {
            interval,
            tolerance: BURST.saturating_sub(interval),
            tat: None,
        })
    }

    /// Reserve the next slot for a request arriving at `now`: the instant it may be answered
    /// (`now` when a token is free).
    pub fn reserve(&mut self, now: Instant) -> Instant {
        let tat = self.tat.map_or(now, |t| t.max(now)) + self.interval;
        self.tat = Some(tat);
        let earliest = tat
            .checked_sub(self.interval + self.tolerance)
            .unwrap_or(now);
        earliest.max(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_rates() {
        assert!(Pacer::new(0.0).is_none());
        assert!(Pacer::new(-1.0).is_none());
        assert!(Pacer::new(f64::NAN).is_none());
    }

    #[test]
    fn a_burst_passes_then_the_rest_queue_at_the_rate() {
        // 1000/s: 1 ms per request, 19 ms of tolerance: 20 go at once, then one a millisecond.
        let mut p = Pacer::new(1000.0).unwrap();
        let t0 = Instant::now();
        let at: Vec<Duration> = (0..24).map(|_| p.reserve(t0) - t0).collect();
        for (i, d) in at.iter().enumerate() {
            let want = Duration::from_millis(i.saturating_sub(19) as u64);
            assert!(
                d.abs_diff(want) < Duration::from_micros(5),
                "request {i}: {d:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn requests_under_the_rate_never_wait() {
        let mut p = Pacer::new(100.0).unwrap();
        let t0 = Instant::now();
        for i in 0..100u64 {
            // 50/s, jittered by up to 5 ms.
            let now = t0 + Duration::from_millis(20 * i + (i * 7) % 5);
            assert_eq!(p.reserve(now), now, "request {i}");
        }
    }

    #[test]
    fn a_sustained_excess_queues_without_bound() {
        // 110/s offered against 100/s for 10 s: the last waits ~0.9 s.
        let mut p = Pacer::new(100.0).unwrap();
        let t0 = Instant::now();
        let mut last = Duration::ZERO;
        for i in 0..1100u64 {
            let now = t0 + Duration::from_secs_f64(i as f64 / 110.0);
            last = p.reserve(now) - now;
        }
        assert!(
            last > Duration::from_millis(850) && last < Duration::from_millis(1000),
            "{last:?}"
        );
    }
}
