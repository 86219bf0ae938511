//! The command line, the top layer: the clap types, their validation into the plain
//! options of the layers below ([`RunOptions`], `ceiling::SearchOptions`,
//! `compare::ComparePlan`), and the dispatch to the runners ([`run_command`], in `run`).
//! Nothing below imports it.
//!
//! `loader [OPTIONS] URL...` runs a load; `loader origin ...` serves the built-in origin;
//! `loader compare URL_A URL_B [OPTIONS]` runs A and B interleaved; `loader merge` and
//! `loader ceiling` are described with their modules. Flags follow ab and wrk
//! (`-c -n -d -k -H -T -i -l -q`), durations and sizes as in the proxy (`500ms`, `32KiB`).

mod compat;
mod run;
#[cfg(test)]
mod tests;

pub use compat::{CompatArgs, CompatOutput};

pub use crate::options::{
    parse_header, RunOptions, DEFAULT_CONNECTIONS, DEFAULT_DURATION, DEFAULT_TIMEOUT,
};
pub use run::run_command;

use crate::ceiling::{Objective, SearchOptions};
use crate::options::HdrLogOptions;
use crate::shard::{ShardRun, ShardSpec};
use crate::target::{read_url_file, Target};
use crate::LoadError;
use bytes::Bytes;
use clap::{Args, Parser, Subcommand};
use shared::runtime::{RuntimeArgs, RuntimeConfig};
use shared::units::{parse_duration, parse_size};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "loader",
    version,
    about = "HTTP/1.1 load generator: thread-per-core, io_uring, ab/wrk/http_load figures",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// URL(s) to load, used round-robin (http:// or https://)
    #[arg(value_name = "URL", required_unless_present_any = ["url_file", "targets"])]
    pub urls: Vec<String>,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Print the completion script for SHELL (bash, zsh, fish, elvish, powershell) and exit
    #[arg(long, value_name = "SHELL", exclusive = true)]
    pub completions: Option<clap_complete::Shell>,
    /// wrk's, wrk2's and ab's flags that are not ours under the same name.
    #[command(flatten)]
    pub compat: CompatArgs,
}

// Parsed once; the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the built-in origin (for measuring ceilings without a third-party server)
    Origin(OriginArgs),
    /// Run URL_A and URL_B interleaved (A B A B...) and compare them
    Compare(CompareArgs),
    /// Merge the --json results of several runs (shards) into one report, histograms exactly
    Merge(MergeArgs),
    /// Find the highest rate each URL sustains within a latency objective
    Ceiling(CeilingArgs),
}

/// The load options, shared by a plain run and `compare`.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Connections to keep open (ab's concurrency); above -n, -n (a note says so) [default:
    /// 50; on a command line only ab would write (-k, -p, -u, -C, -A, -e, -g, -t or -s
    /// without -d) ab's 1, on one only wrk would (-t with -d, --latency) wrk's 10]
    #[arg(short = 'c', long = "connections", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: Option<u32>,
    /// Total requests (attempts), exactly [default: run for -d]
    #[arg(short = 'n', long = "requests", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Run time (10s when neither -n nor -d is given; with both, whichever ends first)
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = parse_positive_duration)]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Per-request timeout: the connection is closed and the attempt counted as a timeout
    /// [default: 30s, as ab's; on a command line only wrk would write (-t with -d,
    /// --latency) wrk's 2s]
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,
    /// Request method
    #[arg(
        short = 'm',
        long = "method",
        value_name = "METHOD",
        conflicts_with = "head"
    )]
    pub method: Option<String>,
    /// Send HEAD requests
    #[arg(short = 'i', long = "head")]
    pub head: bool,
    /// Extra request header "Name: value" (repeatable)
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Send this file as the request body (the method defaults to POST)
    #[arg(long = "body", value_name = "FILE")]
    pub body: Option<PathBuf>,
    /// Content-Type of the body [default: application/octet-stream; with ab's -p and -u, text/plain]
    #[arg(short = 'T', long = "content-type", value_name = "TYPE")]
    pub content_type: Option<String>,
    /// File with one URL a line, used round-robin (with a per-URL breakdown)
    #[arg(long = "urls", value_name = "FILE")]
    pub url_file: Option<PathBuf>,
    /// File of requests in vegeta's HTTP format (METHOD URL, header lines, @BODY-FILE, a
    /// blank line between requests)
    #[arg(long, value_name = "FILE", conflicts_with = "url_file")]
    pub targets: Option<PathBuf>,
    /// How --targets (or several URLs) are taken: in order, over and over (exact shares of
    /// -n), or at random
    #[arg(long, value_name = "ORDER", value_enum, default_value_t = crate::targets::TargetsOrder::RoundRobin)]
    pub targets_order: crate::targets::TargetsOrder,
    /// Load run first and not counted in the figures
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// No progress line
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// A new connection for every request (like ab without -k, and http_load)
    #[arg(long)]
    pub close: bool,
    /// Keep-alive (the default; accepted for ab compatibility)
    #[arg(short = 'k', long = "keepalive", conflicts_with = "close")]
    pub keepalive: bool,
    /// Send HTTP/1.0 requests (as ab does)
    #[arg(long = "http1.0")]
    pub http10: bool,
    /// https://: trust the certificates in this PEM file instead of the system store (a
    /// server certificate found in it is trusted as is, name and dates checked, as curl does)
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// https://: do not verify the server's certificate (labs only)
    #[arg(long)]
    pub insecure: bool,
    /// https://: no session resumption: every connection makes a full handshake (with --close,
    /// measures handshake capacity)
    #[arg(long = "no-resume")]
    pub no_resume: bool,
    /// Requests in flight per connection
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub pipeline: u32,
    /// Open loop at this total rate (req/s; 2k = 2000), latency measured from the intended
    /// send time (wrk2's -R)
    #[arg(short = 'R', long, value_name = "REQ_PER_SEC", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Open loop ramping linearly from 0 through each stage's target rate (k6's stages):
    /// 30s:1000,60s:5000,30s:0; the run lasts their sum
    #[arg(long, value_name = "LENGTH:RATE,...", value_parser = parse_stages,
          conflicts_with_all = ["rate", "duration"])]
    pub stages: Option<StageList>,
    /// With --rate: busy-poll the clock until each intended send time instead of sleeping
    /// (exact pacing for a full core per worker; see docs/LOADER.md)
    // Checked against --rate in `RunOptions::validate`, not by clap: `loader ceiling` takes it
    // without --rate.
    #[arg(long)]
    pub spin: bool,
    /// Accept variable document lengths (no length failures)
    #[arg(short = 'l', long = "accept-variable-length")]
    pub accept_variable_length: bool,
    /// Write every figure as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the latency-by-percentile curve as SVG to FILE
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub dist: DistArgs,
}

/// Load from many machines: shards, an aligned start, interval histogram logs.
#[derive(Debug, Clone, Args)]
pub struct DistArgs {
    /// This generator is shard I of N: it sends its exact part of -n and --rate (-c is per
    /// shard); auto/N takes I = JOB_COMPLETION_INDEX + 1 (Kubernetes Indexed Jobs)
    #[arg(long, value_name = "I/N", value_parser = crate::shard::parse_shard)]
    pub shard: Option<ShardSpec>,
    /// Start the load at this wall-clock time: RFC 3339 (2026-12-01T10:00:00Z) or a Unix
    /// timestamp, so that the shards' rates add up
    #[arg(long, value_name = "TIME", value_parser = crate::shard::parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Write interval latency histograms to FILE in HdrHistogram's interval log format (µs)
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Write the run second by second to FILE: CSV, or JSON lines when it ends in .jsonl
    /// (counts, rate, p50/p90/p99 and the send lateness p99 of each second)
    #[arg(long, value_name = "FILE")]
    pub series: Option<PathBuf>,
    /// Length of one --hdr-log interval (at least 1ms)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_hdr_interval,
          requires = "hdr_log")]
    pub hdr_log_interval: Duration,
}

#[derive(Debug, Clone, Args)]
pub struct OriginArgs {
    /// Address to listen on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Response body size
    #[arg(long, value_name = "BYTES", default_value = "32KiB", value_parser = parse_size)]
    pub body_size: u64,
    /// Delay before each response (a bare number is milliseconds)
    #[arg(long, value_name = "MS", value_parser = parse_delay)]
    pub delay: Option<Duration>,
    /// Answer at most this many requests per second per worker and queue the rest (a token
    /// bucket): a target whose ceiling is known
    #[arg(long, value_name = "REQ_PER_SEC", value_parser = parse_rate)]
    pub max_rate: Option<f64>,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, RSA or EC)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Baseline URL
    pub url_a: String,
    /// URL compared with it
    pub url_b: String,
    /// Rounds: A B A B... (each -n/-d applies to each round); at least 3, so a median and a
    /// spread mean something on a noisy machine
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub rounds: u32,
    /// Process whose CPU time per request is reported (repeatable)
    #[arg(long = "watch-pid", value_name = "PID")]
    pub watch_pid: Vec<u32>,
    #[command(flatten)]
    pub load: LoadArgs,
}

impl CompareArgs {
    /// Combinations clap cannot check; the message names the flag.
    pub fn validate(&self) -> Result<(), LoadError> {
        // Both sides take the same load flags: a file of URLs or requests would be sent from
        // A and from B alike, neither side being the URL the table names.
        let files = [
            ("--urls", self.load.url_file.is_some()),
            ("--targets", self.load.targets.is_some()),
        ];
        if let Some((flag, _)) = files.iter().find(|(_, given)| *given) {
            return Err(LoadError::Invalid(format!(
                "{flag}: compare runs URL_A against URL_B, give them on the command line"
            )));
        }
        self.load.dist.only_for_runs("compare")
    }
}

/// `loader merge FILE... [--json FILE]`.
#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// `--json` results of the runs to merge
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Write the merged figures as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

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
    /// Failed requests a step may have and still pass (an answer outside 2xx and 3xx is one)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_errors: u64,
    /// Stop the search before a step that could end past this (each step counted at its longest:
    /// warm-up, -d and twice --timeout); what was found so far is reported
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
        let first = match (self.from, self.upper) {
            (Some(f), _) => Some(("--from", f)),
            (None, Some(u)) => Some(("--upper", u)),
            (None, None) => None,
        };
        let step = self.load.duration.unwrap_or(crate::ceiling::DEFAULT_STEP);
        self.check_max_time(step)?;
        if let Some((flag, rate)) = first {
            if rate * step.as_secs_f64() < 1.0 {
                return Err(format!(
                    "{flag} {} req/s: a step of -d {} holds less than one request at that \
                     rate; give a longer -d (at least {}) or a higher rate",
                    crate::ceiling::report::rate_text(rate),
                    shared::units::format_duration(step),
                    shared::units::format_duration(Duration::from_secs_f64(1.0 / rate)),
                ));
            }
        }
        if self.load.url_file.is_some() {
            return Err("--urls: give the URL(s) searched on the command line".into());
        }
        if self.load.stages.is_some() {
            return Err("--stages: the search chooses the rates (use --from and --upper)".into());
        }
        self.load
            .dist
            .only_for_runs("ceiling")
            .map_err(|e| e.to_string())
    }
}

impl CeilingArgs {
    /// `--max-time` must hold each URL's probe (without `--from`) and a first step of each at
    /// their longest, or the search would stop before it says anything about every URL.
    fn check_max_time(&self, step: Duration) -> Result<(), String> {
        use crate::ceiling::{probe_bound, step_bound, warmup_of};
        let urls = 1 + u32::from(self.url_b.is_some());
        let warmup = warmup_of(step, self.load.warmup);
        let timeout = self.load.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let probe = match self.from {
            None => probe_bound(step, timeout),
            Some(_) => Duration::ZERO,
        };
        let needed = (probe + step_bound(step, warmup, timeout)) * urls;
        if self.max_time >= needed {
            return Ok(());
        }
        let what = match self.from {
            None => "the closed-loop probe and a first step",
            Some(_) => "a first step",
        };
        let f = shared::units::format_duration;
        Err(format!(
            "--max-time {}: {what}{} can take up to {:.1}s (a step: its warm-up, -d, and \
             --timeout {} twice, for the warm-up's last requests and the drain); give a longer \
             --max-time or a shorter --timeout",
            f(self.max_time),
            if urls > 1 { " of each URL" } else { "" },
            needed.as_secs_f64(),
            f(timeout),
        ))
    }

    /// The search asked for, once [`CeilingArgs::validate`] has passed.
    pub fn search_options(&self) -> Result<SearchOptions, String> {
        self.validate()?;
        let objective = self
            .objective()
            .ok_or("give one objective: --p99, --p999 or --p50")?;
        Ok(SearchOptions {
            objective,
            from: self.from,
            upper: self.upper,
            precision: self.precision,
            max_errors: self.max_errors,
            max_time: self.max_time,
            watch_pids: self.watch_pid.clone(),
            step: self.load.duration,
            warmup: self.load.warmup,
        })
    }
}

pub(crate) fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be more than zero".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

/// `--hdr-log-interval`: at least [`crate::options::MIN_HDR_LOG_INTERVAL`] (a writer of
/// microsecond intervals falls behind for ever).
fn parse_hdr_interval(s: &str) -> Result<Duration, String> {
    let d = parse_positive_duration(s)?;
    if d < crate::options::MIN_HDR_LOG_INTERVAL {
        return Err("must be at least 1ms".into());
    }
    Ok(d)
}

pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    // wrk2 reads `-R 2k` as 2000.
    let (num, scale) = match s.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1e3),
        None => match s.strip_suffix('M') {
            Some(n) => (n, 1e6),
            None => (s, 1.0),
        },
    };
    match num.parse::<f64>().map(|r| r * scale) {
        Ok(r) if r.is_finite() && r >= crate::options::MIN_RATE => Ok(r),
        _ => Err(format!(
            "invalid rate '{s}': expected requests per second, at least 0.001"
        )),
    }
}

/// `--stages`: (length, target rate) per stage, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct StageList(pub Vec<(Duration, f64)>);

/// `--stages 30s:1000,60s:5000,30s:0`: (length, target rate) per stage.
fn parse_stages(s: &str) -> Result<StageList, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let bad = || format!("invalid stage '{part}': expected LENGTH:RATE such as 30s:1000");
        let (d, r) = part.split_once(':').ok_or_else(bad)?;
        let d = parse_positive_duration(d.trim()).map_err(|e| format!("{}: {e}", bad()))?;
        let r: f64 = r.trim().parse().map_err(|_| bad())?;
        if !(r.is_finite() && (r == 0.0 || r >= crate::options::MIN_RATE)) {
            return Err(format!("{}: the rate is 0 or at least 0.001", bad()));
        }
        out.push((d, r));
    }
    if out.iter().all(|&(_, r)| r == 0.0) {
        return Err("every stage's rate is 0: nothing would be sent".into());
    }
    Ok(StageList(out))
}

/// `--delay`: a bare number is milliseconds; `1s`, `250us` are read as durations.
fn parse_delay(s: &str) -> Result<Duration, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| e.to_string());
    }
    parse_duration(s).map_err(|e| e.to_string())
}

impl LoadArgs {
    /// Validate the flags against `urls` (and the `--urls` file) into [`RunOptions`].
    pub fn to_options(&self, urls: &[String]) -> Result<RunOptions, LoadError> {
        let mut all = urls
            .iter()
            .map(|u| Target::parse(u))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(f) = &self.url_file {
            let from_file = read_url_file(f)?;
            if from_file.is_empty() {
                return Err(LoadError::Invalid(format!(
                    "--urls {}: no URL in the file",
                    f.display()
                )));
            }
            all.extend(from_file);
        }
        let mut specs = None;
        if let Some(f) = &self.targets {
            if !all.is_empty() {
                return Err(LoadError::Invalid(
                    "--targets: give the requests in the file, not on the command line".into(),
                ));
            }
            let read = crate::targets::read_targets_file(f)?;
            if read.is_empty() {
                return Err(LoadError::Invalid(format!(
                    "--targets {}: no request in the file",
                    f.display()
                )));
            }
            let (targets, s): (Vec<_>, Vec<_>) = read.into_iter().unzip();
            all = targets;
            specs = Some(s);
        }
        let mut o = RunOptions::new(all);
        o.per_url = specs;
        o.targets_order = self.targets_order;
        o.connections = self.connections.map_or(DEFAULT_CONNECTIONS, |c| c as usize);
        o.requests = self.requests;
        o.duration = self.duration;
        o.runtime = RuntimeConfig::from_args(&self.runtime);
        o.timeout = self.timeout.unwrap_or(DEFAULT_TIMEOUT);
        o.headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<_, _>>()?;
        if let Some(path) = &self.body {
            let data = crate::input::read_body(path).map_err(|source| LoadError::File {
                flag: "--body",
                path: path.display().to_string(),
                source,
            })?;
            o.body = Some(Bytes::from(data));
        }
        o.method = match (&self.method, self.head, &o.body) {
            (None, true, Some(_)) => {
                return Err(LoadError::Invalid(
                    "-i sends HEAD requests, which have no body: --body cannot go with it".into(),
                ))
            }
            (Some(m), _, _) => m.clone(),
            (None, true, _) => "HEAD".into(),
            (None, false, Some(_)) => "POST".into(),
            (None, false, None) => "GET".into(),
        };
        o.content_type = self.content_type.clone();
        o.close = self.close;
        o.http10 = self.http10;
        o.pipeline = self.pipeline as usize;
        o.rate = self.rate;
        if let Some(StageList(stages)) = &self.stages {
            let ramp = crate::plan::Ramp::new(stages, 1.0);
            let secs = ramp.length().as_secs_f64();
            o.duration = Some(ramp.length());
            o.rate = Some(ramp.requests() / secs);
            o.stages = Some(stages.clone());
        }
        o.spin = self.spin;
        o.warmup = self.warmup;
        o.quiet = self.quiet;
        o.accept_variable_length = self.accept_variable_length;
        o.json = self.json.clone();
        o.plot = self.plot.clone();
        o.tls = self.tls_options();
        // `-H "Connection: close"`: the server is asked to close after each response, so
        // the connection is never reused, whatever the server does.
        o.close |= o.asks_to_close();
        self.dist.apply(&mut o, |k| std::env::var(k).ok())?;
        o.validate()?;
        // The run's own command says so (a note after the run).
        o.cap_connections();
        Ok(o)
    }
}

impl LoadArgs {
    /// `--insecure` wins over `--cacert` (as with curl's `-k`).
    fn tls_options(&self) -> shared::tls::ClientTlsOptions {
        use shared::tls::Trust;
        let trust = match (&self.cacert, self.insecure) {
            (_, true) => Trust::Insecure,
            (Some(f), false) => Trust::CaFile(f.clone()),
            (None, false) => Trust::System,
        };
        shared::tls::ClientTlsOptions {
            trust,
            resumption: !self.no_resume,
        }
    }
}

impl DistArgs {
    /// Apply `--shard`, `--start-at` and `--hdr-log` to options built from the other flags
    /// (`-n` and `--rate` become this shard's part). `env` reads the environment.
    pub fn apply(
        &self,
        o: &mut RunOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(), LoadError> {
        if let Some(spec) = self.shard {
            let shard = spec.resolve(env)?;
            o.shard = Some(ShardRun {
                shard,
                requests_total: o.requests,
                rate_total: o.rate,
                duration: o.duration,
            });
            if let Some(n) = o.requests {
                o.requests = Some(shard.requests(n)?);
            }
            if let Some(r) = o.rate {
                o.rate = Some(shard.rate(r)?);
            }
        }
        o.start_at = self.start_at;
        o.series = self.series.clone();
        o.hdr_log = self.hdr_log.as_ref().map(|path| HdrLogOptions {
            path: path.clone(),
            interval: self.hdr_log_interval,
        });
        Ok(())
    }
}

impl DistArgs {
    /// The flags given that only a plain run honours: `compare` and `ceiling` run many loads
    /// on one machine, where a shard of the load, a start time, and an interval log or series
    /// (rewritten by every round or step) have no meaning. One list for both commands.
    fn run_only_given(&self) -> Vec<&'static str> {
        [
            ("--shard", self.shard.is_some()),
            ("--start-at", self.start_at.is_some()),
            ("--hdr-log", self.hdr_log.is_some()),
            ("--series", self.series.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }

    /// Refuse the run-only flags given to `command` ("compare", "ceiling"), naming the first.
    pub fn only_for_runs(&self, command: &str) -> Result<(), LoadError> {
        match self.run_only_given().first() {
            None => Ok(()),
            Some(flag) => Err(LoadError::Invalid(format!(
                "{flag} applies to a plain run, not to {command} (--shard, --start-at, \
                 --hdr-log and --series are a plain run's)"
            ))),
        }
    }
}
