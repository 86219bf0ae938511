//! `loader ceiling URL [URL_B]`: the highest rate a target sustains within a latency
//! objective, found by a search over open-loop rates (the `--rate` engine, coordinated
//! omission corrected).
//!
//! The search starts at `--from` (default: a short closed-loop probe's rate / 4), doubles the
//! rate until a step fails, then bisects between the highest pass and the lowest fail until
//! they are within `--precision`. Each step is a full run of `-d` after a warm-up. A step
//! fails when the objective's percentile exceeds it, when more than `--max-errors` requests
//! fail, or when the achieved rate (responses over the step and its drain) is below 97% of
//! the offered one (see [`search`] and [`run::achieved_in_step`]). A step whose send lateness
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

use crate::cli::{parse_positive_duration, parse_rate, LoadArgs};
use clap::Args;
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

#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("objective").required(true).args(["p99", "p999", "p50"])))]
pub struct CeilingArgs {
    /// URL searched (A)
    pub url_a: String,
    /// Second URL, searched in lockstep with A (B's ceiling is also given as % of A's)
    pub url_b: Option<String>,
    /// Objective: corrected p99 at most this
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub p99: Option<Duration>,
    /// Objective: corrected p99.9 at most this
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub p999: Option<Duration>,
    /// Objective: corrected median at most this
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub p50: Option<Duration>,
    /// First rate (req/s) [default: a closed-loop probe's rate / 4]
    #[arg(long, value_name = "REQ_PER_SEC", value_parser = parse_rate)]
    pub from: Option<f64>,
    /// Highest rate to try (req/s)
    #[arg(long, value_name = "REQ_PER_SEC", value_parser = parse_rate)]
    pub upper: Option<f64>,
    /// Stop bisecting when the lowest failing rate is within this of the highest passing one
    #[arg(long, value_name = "PERCENT", default_value = "2%", value_parser = parse_percent)]
    pub precision: f64,
    /// Failed requests a step may have and still pass
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_errors: u64,
    /// Stop the search after this long (what was found so far is reported)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_positive_duration)]
    pub max_time: Duration,
    /// Process whose CPU time per request is reported at every step (repeatable)
    #[arg(long = "watch-pid", value_name = "PID")]
    pub watch_pid: Vec<u32>,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// `2%`, `2` or `0.5%`: a share, more than 0 and below 100%.
fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("invalid percentage '{s}': expected e.g. 2%"))?;
    if v.is_finite() && v > 0.0 && v < 100.0 {
        Ok(v / 100.0)
    } else {
        Err(format!(
            "invalid percentage '{s}': expected more than 0 and below 100"
        ))
    }
}

impl CeilingArgs {
    /// The objective given (clap requires exactly one; [`CeilingArgs::validate`] checks it
    /// again for programmatic callers).
    pub fn objective(&self) -> Option<Objective> {
        let given = [(0.99, self.p99), (0.999, self.p999), (0.5, self.p50)];
        let (q, d) = given.into_iter().find_map(|(q, d)| Some((q, d?)))?;
        Some(Objective {
            quantile: q,
            limit_us: d.as_micros().min(u64::MAX as u128) as u64,
        })
    }

    /// Combinations clap cannot check; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        let given = [self.p99, self.p999, self.p50]
            .iter()
            .filter(|d| d.is_some())
            .count();
        if given != 1 {
            return Err("give one objective: --p99, --p999 or --p50".into());
        }
        if self.load.rate.is_some() {
            return Err("--rate: the search chooses the rates (use --from and --upper)".into());
        }
        if self.load.requests.is_some() {
            return Err("-n: every step runs for -d (a count would not measure a rate)".into());
        }
        if let (Some(f), Some(u)) = (self.from, self.upper) {
            if f > u {
                return Err(format!("--from {f} is above --upper {u}"));
            }
        }
        if self.load.url_file.is_some() {
            return Err("--urls: give the URL(s) searched on the command line".into());
        }
        Ok(())
    }
}

/// `loader ceiling`: validate, search, print the table and the `Ceiling:` lines, write
/// `--json` and `--plot`. Exit status: 0 when every URL has a ceiling that the loader did
/// not limit, 1 otherwise (no ceiling, generator-limited, a runtime that would not start,
/// an output file that cannot be written), 2 for usage errors.
pub fn run_ceiling(args: &CeilingArgs, stop: Arc<ShutdownFlag>) -> i32 {
    let usage = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e}");
        2
    };
    if let Err(e) = args.validate() {
        return usage(&e);
    }
    for &pid in &args.watch_pid {
        if let Err(e) = crate::procstat::cpu_times(pid) {
            return usage(&format_args!(
                "--watch-pid {pid}: cannot read /proc/{pid}/stat: {e}"
            ));
        }
    }
    // --spin paces the steps' sends: the search sets their rates, so the flags are validated
    // without it and it is put back.
    let mut load = args.load.clone();
    load.spin = false;
    let mut sides = Vec::new();
    for url in std::iter::once(&args.url_a).chain(&args.url_b) {
        match load.to_options(std::slice::from_ref(url)) {
            Ok(mut o) => {
                o.spin = args.load.spin;
                sides.push(o);
            }
            Err(e) => return usage(&e),
        }
    }
    let quiet = args.load.quiet;
    let outcome = match run_search(args, &sides, stop, |line| {
        if !quiet {
            eprintln!("{line}");
        }
    }) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    print!("{}", report::render(&outcome));
    let mut code = report::exit_code(&outcome);
    if let Some(path) = &args.load.json {
        let driver = outcome.steps.first().map(|s| s.result.driver.to_string());
        let doc = report::document(&outcome, &crate::sysinfo::SysInfo::collect(driver));
        if let Err(e) = crate::json::write(path, &doc) {
            eprintln!("error: --json {}: {e}", path.display());
            code = code.max(1);
        }
    }
    if let Some(path) = &args.load.plot {
        if let Err(e) = std::fs::write(path, chart::render(&outcome)) {
            eprintln!("error: --plot {}: {e}", path.display());
            code = code.max(1);
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<crate::cli::Cli, clap::Error> {
        crate::cli::Cli::try_parse_from(
            ["loader", "ceiling"]
                .into_iter()
                .chain(args.iter().copied()),
        )
    }

    fn ceiling(args: &[&str]) -> CeilingArgs {
        match parse(args).unwrap().command {
            Some(crate::cli::Command::Ceiling(c)) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags() {
        let c = ceiling(&[
            "--p99",
            "10ms",
            "http://127.0.0.1:1/",
            "http://127.0.0.1:2/",
        ]);
        assert_eq!(c.url_b.as_deref(), Some("http://127.0.0.1:2/"));
        assert_eq!(
            c.objective(),
            Some(Objective {
                quantile: 0.99,
                limit_us: 10_000
            })
        );
        assert_eq!(c.precision, 0.02);
        assert_eq!(c.max_time, Duration::from_secs(300));
        assert!(c.validate().is_ok());
        let c = ceiling(&[
            "--p999",
            "1s",
            "--precision",
            "5",
            "--spin",
            "http://127.0.0.1:1/",
        ]);
        assert!(c.load.spin, "--spin is passed through to the steps");
        assert_eq!(c.objective().unwrap().quantile, 0.999);
        assert_eq!(c.precision, 0.05);
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&["http://127.0.0.1:1/"]).is_err(), "no objective");
        assert!(parse(&["--p99", "0ms", "http://127.0.0.1:1/"]).is_err());
        assert!(parse(&["--p99", "1ms", "--precision", "0", "http://x/"]).is_err());
        assert!(parse(&["--p99", "1ms", "--precision", "100%", "http://x/"]).is_err());
        let e = |a: &[&str]| ceiling(a).validate().unwrap_err();
        assert!(parse(&["--p99", "1ms", "--p50", "1ms", "http://x/"]).is_err());
        assert!(e(&["--p99", "1ms", "--rate", "10", "http://x/"]).starts_with("--rate"));
        assert!(e(&["--p99", "1ms", "-n", "10", "http://x/"]).starts_with("-n"));
        assert!(
            e(&["--p99", "1ms", "--from", "10", "--upper", "5", "http://x/"]).contains("above")
        );
    }
}
