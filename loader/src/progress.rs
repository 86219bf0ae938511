//! The live progress line: once a second on stderr, `elapsed, req/s over the last second,
//! total, errors`, rewritten in place; shown only when stdout is a terminal and `-q` was not
//! given (a report piped to a file or a script stays clean, and so does its stderr).
//!
//! It reads the workers' [`LiveCounters`] (single-writer counters: a plain load, no lock, no
//! contended atomic), from the thread that called `run_with_progress`, through its `tick`.

use crate::stats::LiveCounters;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// Whether to show the line: stdout is a terminal and not `-q`.
pub fn enabled(quiet: bool) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    !quiet && unsafe { libc::isatty(libc::STDOUT_FILENO) } == 1
}

/// Sum of the workers' counters: (completed, errors).
pub fn totals(live: &[Arc<LiveCounters>]) -> (u64, u64) {
    live.iter().fold((0, 0), |(c, e), l| {
        (c + l.completed.get(), e + l.errors.get())
    })
}

/// State between ticks.
#[derive(Debug, Default)]
pub struct Progress {
    enabled: bool,
    last_elapsed: Duration,
    last_completed: u64,
    shown: bool,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            ..Progress::default()
        }
    }

    /// Call about once a second; prints the line when enabled.
    pub fn tick(&mut self, elapsed: Duration, live: &[Arc<LiveCounters>]) {
        if !self.enabled {
            return;
        }
        let line = self.line(elapsed, totals(live));
        let mut err = std::io::stderr().lock();
        // \r and "erase to end of line": the line is rewritten in place.
        let _ = write!(err, "\r{line}\x1b[K");
        let _ = err.flush();
        self.shown = true;
    }

    /// The text of the line for these totals; updates the per-second baseline.
    pub fn line(&mut self, elapsed: Duration, (completed, errors): (u64, u64)) -> String {
        let dt = elapsed.saturating_sub(self.last_elapsed).as_secs_f64();
        let rate = if dt > 0.0 {
            completed.saturating_sub(self.last_completed) as f64 / dt
        } else {
            0.0
        };
        self.last_elapsed = elapsed;
        self.last_completed = completed;
        format!(
            "{:>7.1}s  {:>10.0} req/s  {:>12} total  {:>8} errors",
            elapsed.as_secs_f64(),
            rate,
            completed,
            errors
        )
    }

    /// Erase the line before the report is printed.
    pub fn finish(&mut self) {
        if self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_over_the_last_interval() {
        let mut p = Progress::new(false);
        let l1 = p.line(Duration::from_secs(1), (1000, 0));
        assert!(
            l1.contains("1000 req/s") && l1.contains("1000 total"),
            "{l1}"
        );
        let l2 = p.line(Duration::from_secs(2), (3500, 7));
        assert!(
            l2.contains("2500 req/s") && l2.contains("3500 total") && l2.contains("7 errors"),
            "{l2}"
        );
        assert!(l2.trim_start().starts_with("2.0s"), "{l2}");
    }

    #[test]
    fn totals_sum_workers() {
        let a = Arc::new(LiveCounters::default());
        let b = Arc::new(LiveCounters::default());
        a.completed.add(3);
        b.completed.add(4);
        b.errors.add(1);
        assert_eq!(totals(&[a, b]), (7, 1));
    }

    #[test]
    fn disabled_prints_nothing() {
        let mut p = Progress::new(false);
        p.tick(Duration::from_secs(1), &[]);
        assert!(!p.shown);
    }
}
