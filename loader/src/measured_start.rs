//! The measured run's start, one for all workers ([`MeasuredStart`]).
//!
//! Without `--warmup` it is the run's start. With one, each worker's warm-up ends when its last
//! request in flight at the warm-up's planned end has ended (its stragglers); the measured run
//! starts when the last worker's has, for every worker at once: `-d`, the `--rate` schedule,
//! the interval logs and Time taken all count from that one instant, so the workers measure
//! the same window.
//!
//! Nothing here is on the request path: a worker reports its warm-up's end once, and polls for
//! the published start (every millisecond) only between its warm-up and its measured run.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// How often a worker whose warm-up has ended looks for the common start.
const POLL: Duration = Duration::from_millis(1);

/// The measured start shared by the workers, published once.
#[derive(Debug)]
pub struct MeasuredStart {
    /// The warm-up's planned end (the run's start without one), and the wall clock then.
    planned: Instant,
    planned_wall: SystemTime,
    /// Workers whose warm-up has not ended yet.
    waiting: AtomicUsize,
    /// The latest warm-up end reported so far, in nanoseconds after `planned`.
    latest_ns: AtomicU64,
    at: OnceLock<Instant>,
}

impl MeasuredStart {
    /// For `workers` workers, planned at `planned` (`planned_wall` on the wall clock). Without
    /// a warm-up the start is `planned`, published at once.
    pub fn new(
        planned: Instant,
        planned_wall: SystemTime,
        workers: usize,
        warmup: bool,
    ) -> MeasuredStart {
        let s = MeasuredStart {
            planned,
            planned_wall,
            waiting: AtomicUsize::new(workers),
            latest_ns: AtomicU64::new(0),
            at: OnceLock::new(),
        };
        if !warmup {
            let _ = s.at.set(planned);
        }
        s
    }

    /// A worker's warm-up ended at `at` (once per worker). The last worker's report publishes
    /// the start: the latest of them all.
    pub fn warmed(&self, at: Instant) {
        let ns = at.saturating_duration_since(self.planned).as_nanos();
        self.latest_ns
            .fetch_max(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::SeqCst);
        if self.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            let latest = Duration::from_nanos(self.latest_ns.load(Ordering::SeqCst));
            let _ = self.at.set(crate::plan::later(self.planned, latest));
        }
    }

    /// The start, once published.
    pub fn get(&self) -> Option<Instant> {
        self.at.get().copied()
    }

    /// The start, or the planned one when none was published (the run stopped during its
    /// warm-up): what the run's figures count from.
    pub fn or_planned(&self) -> Instant {
        self.get().unwrap_or(self.planned)
    }

    /// [`MeasuredStart::or_planned`] on the wall clock.
    pub fn wall(&self) -> SystemTime {
        self.planned_wall + self.or_planned().saturating_duration_since(self.planned)
    }

    /// Wait for the start (`spin`: `--spin`, whose worker fires no timer); `None` when
    /// `stopped` says the run ended first.
    pub async fn wait(&self, spin: bool, stopped: impl Fn() -> bool) -> Option<Instant> {
        loop {
            if let Some(at) = self.get() {
                return Some(at);
            }
            if stopped() {
                return None;
            }
            crate::pace::pause_until(Instant::now() + POLL, spin).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_the_last_workers_warm_up_end() {
        let t0 = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let s = MeasuredStart::new(t0, wall, 3, true);
        assert_eq!(s.get(), None);
        assert_eq!(s.or_planned(), t0);
        s.warmed(t0 + Duration::from_millis(300));
        s.warmed(t0 + Duration::from_millis(100));
        assert_eq!(s.get(), None, "a worker is still warming up");
        s.warmed(t0 + Duration::from_millis(200));
        assert_eq!(s.get(), Some(t0 + Duration::from_millis(300)));
        assert_eq!(s.wall(), wall + Duration::from_millis(300));
        let none = MeasuredStart::new(t0, wall, 2, false);
        assert_eq!((none.get(), none.wall()), (Some(t0), wall));
    }
}
