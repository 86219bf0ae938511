//! `loader ceiling URL [URL_B]`: the highest rate a target sustains within a latency
//! objective, found by a search over open-loop rates (the `--rate` engine, coordinated
//! omission corrected).
//!
//! The search starts at `--from` (default: a short closed-loop probe's rate / 4), doubles the
//! rate until a step fails, then bisects between the highest pass and the lowest fail until
//! they are within `--precision`. Each step is a full run of `-d` after a warm-up. A step
//! fails when the objective's percentile exceeds it, when more than `--max-errors` requests
//! fail (answers outside 2xx and 3xx included, see [`run::error_status`]), or when the
//! achieved rate (responses over the step and the drain beyond one mean latency), or the rate
//! of the sends that went out on schedule, is below 97% of the offered one (see [`search`],
//! [`run::achieved_in_step`] and [`run::sent_on_time`]). A step whose send lateness
//! p99 exceeds a tenth of the objective, or that sent short of the schedule while its
//! connections were free, is marked generator-limited: the loader, not the target, may have
//! been the limit. Such a step that failed is run again (twice at most in a row) before its
//! verdict counts; a ceiling that still rests on one says so and exits 1.
//!
//! With two URLs the two searches run in lockstep, A B A B, so drift in the machine hits
//! both; `--watch-pid` adds the watched process's CPU µs per request to every step.
//!
//! # Layout
//! - [`search`]: the verdict on a step and the next rate (sans-IO, tested with figures).
//! - [`run`]: running the steps, the probe, `--max-time` and Ctrl-C.
//! - [`report`]: the table, the `Ceiling:` lines, `--json`.
//! - [`chart`]: `--plot`, latency percentiles against the offered rate (the hockey stick).

pub mod chart;
pub mod report;
pub mod run;
pub mod search;
#[cfg(test)]
mod tests;

use crate::RunOptions;
use shared::shutdown::ShutdownFlag;
use std::sync::Arc;
use std::time::Duration;

pub use run::{run_search, Ceiling, Step, Stopped};
pub use search::{Objective, Verdict};

/// `-d` of each step when none is given.
pub const DEFAULT_STEP: Duration = Duration::from_secs(5);
/// Warm-up before each step when `--warmup` is not given (capped at half the step).
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(1);
/// The closed-loop probe that picks the first rate.
pub const PROBE: Duration = Duration::from_secs(2);

/// The warm-up before each step: `--warmup`, else [`DEFAULT_WARMUP`] at most half the step.
pub fn warmup_of(step: Duration, warmup: Option<Duration>) -> Duration {
    warmup.unwrap_or(DEFAULT_WARMUP.min(step / 2))
}

/// The longest one `--timeout` can hold the run: the timeout and the monitor's check period.
fn one_timeout(timeout: Duration) -> Duration {
    timeout + crate::conn::monitor_tick(timeout)
}

/// The longest a step can take: its warm-up, the wait for the warm-up's last requests (the
/// measured run starts when they end), `-d`, and the drain; the last requests and the drain
/// each up to `--timeout` when the target does not answer. `--max-time` starts no step that
/// could end past it.
pub fn step_bound(step: Duration, warmup: Duration, timeout: Duration) -> Duration {
    warmup + step + 2 * one_timeout(timeout)
}

/// The longest the closed-loop probe can take: its run, then its drain.
pub fn probe_bound(step: Duration, timeout: Duration) -> Duration {
    PROBE.min(step) + one_timeout(timeout)
}

/// What `loader ceiling` searches for, as plain data (the command line builds it).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    pub objective: Objective,
    /// First rate (req/s); `None`: a closed-loop probe's rate / 4.
    pub from: Option<f64>,
    /// Highest rate to try (req/s).
    pub upper: Option<f64>,
    /// Stop bisecting when the lowest fail is within this share of the highest pass.
    pub precision: f64,
    /// Failed requests a step may have and still pass.
    pub max_errors: u64,
    /// Stop the search after this long.
    pub max_time: Duration,
    /// Processes whose CPU time per request is reported at every step.
    pub watch_pids: Vec<u32>,
    /// `-d` of each step ([`DEFAULT_STEP`] when `None`).
    pub step: Option<Duration>,
    /// Warm-up before each step ([`DEFAULT_WARMUP`], at most half the step, when `None`).
    pub warmup: Option<Duration>,
}

/// `loader ceiling`: search (one `RunOptions` per URL, `-q`, `--json` and `--plot` taken
/// from the first), print the table and the `Ceiling:` lines, write `--json` and `--plot`.
/// Exit status: 0 when every URL has a ceiling that the loader did not limit, 1 otherwise
/// (no ceiling, generator-limited, a runtime that would not start, an output file that
/// cannot be written).
pub fn run_ceiling(args: &SearchOptions, sides: &[RunOptions], stop: Arc<ShutdownFlag>) -> i32 {
    let quiet = sides[0].quiet;
    let outcome = match run_search(args, sides, stop, |line| {
        if !quiet {
            eprintln!("{line}");
        }
    }) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("loader: {e}");
            return 1;
        }
    };
    print!("{}", report::render(&outcome));
    let mut code = report::exit_code(&outcome);
    if let Some(path) = &sides[0].json {
        let driver = outcome.steps.first().map(|s| s.result.driver.to_string());
        let doc = report::search_doc(&outcome, &crate::sysinfo::SysInfo::collect(driver));
        if let Err(e) = crate::json::write(path, &doc) {
            eprintln!("loader: --json {}: {e}", path.display());
            code = code.max(1);
        }
    }
    if let Some(path) = &sides[0].plot {
        if let Err(e) = std::fs::write(path, chart::render(&outcome)) {
            eprintln!("loader: --plot {}: {e}", path.display());
            code = code.max(1);
        }
    }
    code
}
