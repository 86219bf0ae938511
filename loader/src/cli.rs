//! The command line (clap derive) and the validated, immutable [`RunOptions`] it becomes.
//!
//! `loader [OPTIONS] URL...` runs a load; `loader origin ...` serves the built-in origin;
//! `loader compare URL_A URL_B [OPTIONS]` runs A and B interleaved. Flags follow ab and wrk
//! (`-c -n -d -k -H -T -i -l -q`), durations and sizes as in the proxy (`500ms`, `32KiB`).

use crate::plan::{read_url_file, Target};
use crate::LoadError;
use bytes::Bytes;
use clap::{Args, Parser, Subcommand};
use shared::net::reuseport_group;
use shared::origin::{serve, OriginConfig, OriginStats};
use shared::runtime::{select_driver, spawn_workers};
use shared::runtime::{RuntimeArgs, RuntimeConfig};
use shared::shutdown::{install_signal_handler, ShutdownFlag};
use shared::units::{parse_duration, parse_size};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Run time when neither `-n` nor `-d` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

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
    #[arg(value_name = "URL", required_unless_present = "url_file")]
    pub urls: Vec<String>,
    #[command(flatten)]
    pub load: LoadArgs,
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
    Merge(crate::merge::MergeArgs),
    /// Find the highest rate each URL sustains within a latency objective
    Ceiling(crate::ceiling::CeilingArgs),
}

/// The load options, shared by a plain run and `compare`.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Connections to keep open (ab's concurrency)
    #[arg(short = 'c', long = "connections", value_name = "N", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
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
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_positive_duration)]
    pub timeout: Duration,
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
    /// Content-Type of the body
    #[arg(short = 'T', long = "content-type", value_name = "TYPE")]
    pub content_type: Option<String>,
    /// File with one URL a line, used round-robin (with a per-URL breakdown)
    #[arg(long = "urls", value_name = "FILE")]
    pub url_file: Option<PathBuf>,
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
    /// Open loop at this total rate (req/s), latency measured from the intended send time
    #[arg(long, value_name = "REQ_PER_SEC", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// With --rate: busy-poll the clock until each intended send time instead of sleeping
    /// (exact pacing for a full core per worker; see the README). Checked against --rate in
    /// `RunOptions::validate`, not by clap: `loader ceiling` takes it without --rate.
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
    pub shard: Option<crate::shard::ShardSpec>,
    /// Start the load at this wall-clock time: RFC 3339 (2026-12-01T10:00:00Z) or a Unix
    /// timestamp, so that the shards' rates add up
    #[arg(long, value_name = "TIME", value_parser = crate::shard::parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Write interval latency histograms to FILE in HdrHistogram's interval log format (µs)
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Length of one --hdr-log interval
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_positive_duration)]
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

pub(crate) fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be more than zero".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "invalid rate '{s}': expected requests per second, more than 0"
        )),
    }
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

/// Everything a run needs, validated. Immutable once built; workers share it read-only.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// At least one; used round-robin per connection (request k of a connection goes to URL
    /// `(connection + k) % urls.len()`, so every URL gets its exact share of `-n`).
    pub urls: Vec<Target>,
    /// `-c`.
    pub connections: usize,
    /// `-n`: exact attempts.
    pub requests: Option<u64>,
    /// `-d`. When both are None the run lasts [`DEFAULT_DURATION`]; see `deadline()`.
    pub duration: Option<Duration>,
    pub runtime: RuntimeConfig,
    /// Per-request timeout.
    pub timeout: Duration,
    pub method: String,
    /// Extra headers, in order (a Host, Connection, User-Agent or Accept here replaces ours).
    pub headers: Vec<(String, String)>,
    pub body: Option<Bytes>,
    pub content_type: Option<String>,
    /// A new connection for every request, sending `Connection: close`.
    pub close: bool,
    pub http10: bool,
    /// Requests in flight per connection (1: no pipelining). Responses come back in order;
    /// when the server closes the connection (`Connection: close`, EOF) the requests still
    /// queued behind the last response are counted as read failures. With `--rate`, requests
    /// that fall due while the pipe is not empty are sent after the next response.
    pub pipeline: usize,
    /// Open loop at this total rate (req/s).
    pub rate: Option<f64>,
    /// `--spin` (with `rate`): wait for each send time by polling the clock, never sleeping.
    pub spin: bool,
    pub warmup: Option<Duration>,
    pub quiet: bool,
    /// `-l`: no length failures.
    pub accept_variable_length: bool,
    pub json: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    /// With --close to a loopback target: spread connects over this many source addresses
    /// (127.0.0.1 ..); 0 leaves the source to the kernel.
    pub source_addresses: usize,
    /// `--shard`: this run's place among N and the totals it took its part of.
    pub shard: Option<crate::shard::ShardRun>,
    /// `--start-at`: the wall-clock time the load starts (waited for before the run).
    pub start_at: Option<std::time::SystemTime>,
    /// `--hdr-log`: where interval histograms go, and the interval.
    pub hdr_log: Option<crate::hdrlog::HdrLogOptions>,
    /// `https://`: `--cacert` or `--insecure`, and resumption (off with `--no-resume`).
    pub tls: shared::tls::ClientTlsOptions,
}

/// Source addresses used for `--close` against loopback.
pub const DEFAULT_SOURCE_ADDRESSES: usize = 64;

impl RunOptions {
    /// Defaults for a run against `urls` (as the CLI would with no flags), for tests and
    /// programmatic use. One worker, unpinned.
    pub fn new(urls: Vec<Target>) -> RunOptions {
        RunOptions {
            urls,
            connections: 50,
            requests: None,
            duration: None,
            runtime: RuntimeConfig {
                workers: 1,
                pin: false,
                ..RuntimeConfig::default()
            },
            timeout: Duration::from_secs(30),
            method: "GET".into(),
            headers: Vec::new(),
            body: None,
            content_type: None,
            close: false,
            http10: false,
            pipeline: 1,
            rate: None,
            spin: false,
            warmup: None,
            quiet: true,
            accept_variable_length: false,
            json: None,
            plot: None,
            source_addresses: DEFAULT_SOURCE_ADDRESSES,
            shard: None,
            start_at: None,
            hdr_log: None,
            tls: shared::tls::ClientTlsOptions::default(),
        }
    }

    /// Parse the URL(s) and build defaults: `RunOptions::for_urls(&["http://127.0.0.1:8080/"])`.
    pub fn for_urls<S: AsRef<str>>(urls: &[S]) -> Result<RunOptions, LoadError> {
        let targets = urls
            .iter()
            .map(|u| Target::parse(u.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RunOptions::new(targets))
    }

    /// How long to issue requests: `-d`, or the default when neither `-n` nor `-d` is given.
    pub fn deadline(&self) -> Option<Duration> {
        match (self.duration, self.requests) {
            (Some(d), _) => Some(d),
            (None, None) => Some(DEFAULT_DURATION),
            (None, Some(_)) => None,
        }
    }

    /// Check the combination (called by `run`, so programmatic callers get it too).
    pub fn validate(&self) -> Result<(), LoadError> {
        let invalid = |m: &str| Err(LoadError::Invalid(m.to_string()));
        if self.urls.is_empty() {
            return invalid("no URL given");
        }
        if self.connections == 0 {
            return invalid("-c must be at least 1");
        }
        if self.requests == Some(0) {
            return invalid("-n must be at least 1");
        }
        if self.pipeline == 0 {
            return invalid("--pipeline must be at least 1");
        }
        if self.close && self.pipeline > 1 {
            return invalid("--pipeline needs keep-alive: it cannot be used with --close");
        }
        if self.pipeline > 1 && self.urls.iter().any(|u| u.addr != self.urls[0].addr) {
            return invalid("--pipeline needs every URL on the same server (host and port)");
        }
        if self.runtime.workers == 0 {
            return invalid("--workers must be at least 1");
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return invalid("--rate must be more than 0");
            }
        }
        if self.spin && self.rate.is_none() {
            return invalid("--spin paces sends: it needs --rate");
        }
        for u in self.urls.iter().filter(|u| u.tls) {
            crate::tls::server_name(&u.host).map_err(LoadError::Invalid)?;
        }
        self.validate_body_headers()?;
        if !valid_token(&self.method) {
            return Err(LoadError::Invalid(format!(
                "invalid method '{}': expected a token such as GET or POST",
                self.method
            )));
        }
        Ok(())
    }
}

impl RunOptions {
    /// `-T` and a `Content-Length` given with `-H` against the body: the loader writes
    /// Content-Length itself (once) from the body; one given by hand must agree with it.
    fn validate_body_headers(&self) -> Result<(), LoadError> {
        let len = self.body.as_ref().map_or(0, |b| b.len() as u64);
        for (name, value) in &self.headers {
            if !name.eq_ignore_ascii_case("content-length") {
                continue;
            }
            if value.parse::<u64>().ok() != Some(len) {
                return Err(LoadError::Invalid(format!(
                    "-H '{name}: {value}' disagrees with the body, which is {len} bytes{}",
                    if self.body.is_some() {
                        " (--body sets Content-Length itself: leave it out)"
                    } else {
                        " (no --body)"
                    }
                )));
            }
        }
        if self.content_type.is_some() && self.body.is_none() {
            return Err(LoadError::Invalid(
                "-T/--content-type needs --body (it is the body's type); to send the header \
                 without a body use -H 'Content-Type: ...'"
                    .into(),
            ));
        }
        Ok(())
    }
}

fn valid_token(s: &str) -> bool {
    shared::http::framing::is_token(s.as_bytes())
}

/// Parse `Name: value`; the name must be a token, the value free of CR, LF and NUL.
pub fn parse_header(h: &str) -> Result<(String, String), LoadError> {
    let bad = || LoadError::Invalid(format!("invalid header '{h}': expected 'Name: value'"));
    let (name, value) = h.split_once(':').ok_or_else(bad)?;
    if !valid_token(name) || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(bad());
    }
    Ok((name.to_string(), value.trim().to_string()))
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
        let mut o = RunOptions::new(all);
        o.connections = self.connections as usize;
        o.requests = self.requests;
        o.duration = self.duration;
        o.runtime = RuntimeConfig::from_args(&self.runtime);
        o.timeout = self.timeout;
        o.headers = self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<_, _>>()?;
        if let Some(path) = &self.body {
            let data = std::fs::read(path).map_err(|source| LoadError::File {
                flag: "--body",
                path: path.display().to_string(),
                source,
            })?;
            o.body = Some(Bytes::from(data));
        }
        o.method = match (&self.method, self.head, &o.body) {
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
        o.spin = self.spin;
        o.warmup = self.warmup;
        o.quiet = self.quiet;
        o.accept_variable_length = self.accept_variable_length;
        o.json = self.json.clone();
        o.plot = self.plot.clone();
        o.tls = self.tls_options();
        self.dist.apply(&mut o, |k| std::env::var(k).ok())?;
        o.validate()?;
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

/// Dispatch a parsed command line; returns the exit status (0 done, 1 nothing succeeded,
/// 2 usage errors). Logs go to stderr, stdout carries only the report.
pub fn run_command(cli: Cli) -> i32 {
    let stop = ShutdownFlag::new();
    let flag = stop.clone();
    // A second Ctrl-C means "stop now", without the report.
    if let Err(e) = install_signal_handler(flag, |n| {
        if n >= 2 {
            std::process::exit(130);
        }
    }) {
        eprintln!("warning: cannot install the signal handler: {e}");
    }
    match cli.command {
        Some(Command::Origin(args)) => run_origin(&args, stop),
        Some(Command::Compare(args)) => crate::compare::run_compare(&args, stop),
        Some(Command::Merge(args)) => crate::merge::run_merge(&args),
        Some(Command::Ceiling(args)) => crate::ceiling::run_ceiling(&args, stop),
        None => run_load(&cli.urls, &cli.load, stop),
    }
}

fn run_load(urls: &[String], args: &LoadArgs, stop: Arc<ShutdownFlag>) -> i32 {
    let opts = match args.to_options(urls) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return e.exit_code();
        }
    };
    if let Some(code) = crate::shard::wait_for_start(&opts, &stop) {
        return code;
    }
    let mut progress = crate::progress::Progress::new(crate::progress::enabled(opts.quiet));
    let result =
        crate::run::run_with_progress(&opts, stop, |elapsed, live| progress.tick(elapsed, live));
    progress.finish();
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return match e {
                LoadError::Runtime(_) => 1,
                _ => e.exit_code(),
            };
        }
    };
    if let Err(e) = crate::report::output(&result, &opts) {
        eprintln!("error: {e}");
        return 1;
    }
    if result.nothing_succeeded() {
        1
    } else {
        0
    }
}

/// `loader origin`: the built-in origin on the thread-per-core runtime until Ctrl-C.
fn run_origin(args: &OriginArgs, stop: Arc<ShutdownFlag>) -> i32 {
    let nofile = shared::net::raise_nofile_limit();
    let rt = RuntimeConfig::from_args(&args.runtime);
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e}");
        1
    };
    let driver = match select_driver(&rt) {
        Ok(d) => d,
        Err(e) => return fail(&e),
    };
    let listeners = match reuseport_group(args.listen, rt.workers, 4096) {
        Ok(l) => l,
        Err(e) => return fail(&format_args!("cannot listen on {}: {e}", args.listen)),
    };
    let addr = listeners[0].local_addr().unwrap_or(args.listen);
    let Ok(body_size) = usize::try_from(args.body_size) else {
        return fail(&"--body-size is too large");
    };
    let tls = match args.tls_cert.clone().zip(args.tls_key.clone()) {
        None => None,
        Some((cert, key)) => {
            let spec = shared::tls::server::ServerTlsSpec {
                default: shared::tls::server::CertFiles { cert, key },
                sni: Vec::new(),
            };
            match shared::tls::server::server_config(&spec) {
                Ok(t) => {
                    t.warnings.iter().for_each(|w| eprintln!("warning: {w}"));
                    Some(t.config)
                }
                Err(e) => return fail(&e),
            }
        }
    };
    let cfg = Arc::new(OriginConfig {
        body_size,
        delay: args.delay.unwrap_or_default(),
        max_rate: args.max_rate,
        tls,
        ..OriginConfig::default()
    });
    let items: Vec<_> = listeners
        .into_iter()
        .map(|l| (l, OriginStats::new()))
        .collect();
    let workers = spawn_workers(&rt, driver, stop, "origin", items, move |ctx, (l, st)| {
        let cfg = cfg.clone();
        async move {
            match monoio::net::TcpListener::from_std(l) {
                Ok(l) => serve(l, cfg, st, ctx.shutdown).await,
                Err(e) => shared::log!("origin: worker {}: cannot use the listener: {e}", ctx.id),
            }
        }
    });
    let workers = match workers {
        Ok(w) => w,
        Err(e) => return fail(&e),
    };
    eprintln!(
        "origin: {}, driver {}, open files {nofile}; {} byte bodies{}",
        workers.describe_pinning(),
        workers.driver,
        body_size,
        args.delay
            .map(|d| format!(", {} delay", shared::units::format_duration(d)))
            .unwrap_or_default()
            + &args
                .max_rate
                .map(|r| format!(", at most {r} req/s per worker (the rest queue)"))
                .unwrap_or_default()
    );
    println!("http://{addr}/");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    match workers.join() {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("loader").chain(args.iter().copied()))
    }

    #[test]
    fn plain_run_flags() {
        let c = parse(&[
            "-c",
            "8",
            "-n",
            "100",
            "--threads",
            "2",
            "-H",
            "X-A: b",
            "-k",
            "http://127.0.0.1:1/x",
        ])
        .unwrap();
        assert!(c.command.is_none());
        let o = c.load.to_options(&c.urls).unwrap();
        assert_eq!(
            (o.connections, o.requests, o.runtime.workers),
            (8, Some(100), 2)
        );
        assert_eq!(o.headers, vec![("X-A".to_string(), "b".to_string())]);
        assert_eq!(o.deadline(), None);
        assert_eq!(o.method, "GET");
        let c = parse(&["-i", "http://127.0.0.1:1/"]).unwrap();
        let o = c.load.to_options(&c.urls).unwrap();
        assert_eq!(
            (o.method.as_str(), o.deadline()),
            ("HEAD", Some(DEFAULT_DURATION))
        );
    }

    #[test]
    fn subcommands_parse() {
        let c = parse(&[
            "origin",
            "--listen",
            "127.0.0.1:0",
            "--delay",
            "5",
            "--workers",
            "1",
        ])
        .unwrap();
        match c.command {
            Some(Command::Origin(o)) => {
                assert_eq!(o.delay, Some(Duration::from_millis(5)));
                assert_eq!(o.body_size, 32 * 1024);
            }
            other => panic!("{other:?}"),
        }
        let c = parse(&[
            "compare",
            "http://127.0.0.1:1/",
            "http://127.0.0.1:2/",
            "-n",
            "10",
            "--watch-pid",
            "1",
            "--watch-pid",
            "2",
        ])
        .unwrap();
        match c.command {
            Some(Command::Compare(cmp)) => {
                assert_eq!(cmp.rounds, 3);
                assert_eq!(cmp.watch_pid, vec![1, 2]);
                assert_eq!(cmp.load.requests, Some(10));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["-c", "0", "http://x/"]).is_err());
        assert!(parse(&["-d", "0s", "http://x/"]).is_err());
        assert!(parse(&["--rate", "-1", "http://x/"]).is_err());
        assert!(parse(&["--close", "-k", "http://x/"]).is_err());
        let c = parse(&["https://127.0.0.1/"]).unwrap();
        let o = c.load.to_options(&c.urls).unwrap();
        assert_eq!((o.urls[0].port, o.tls.resumption), (443, true));
        assert_eq!(o.tls.trust, shared::tls::Trust::System);
        let c = parse(&["--cacert", "/x.pem", "--no-resume", "https://127.0.0.1/"]).unwrap();
        let o = c.load.to_options(&c.urls).unwrap();
        assert_eq!(o.tls.trust, shared::tls::Trust::CaFile("/x.pem".into()));
        assert!(!o.tls.resumption);
        let c = parse(&["--cacert", "/x.pem", "--insecure", "https://127.0.0.1/"]).unwrap();
        let o = c.load.to_options(&c.urls).unwrap();
        assert_eq!(o.tls.trust, shared::tls::Trust::Insecure);
        let c = parse(&["-H", "NoColon", "http://127.0.0.1:1/"]).unwrap();
        assert!(c.load.to_options(&c.urls).is_err());
        let c = parse(&["--close", "--pipeline", "4", "http://127.0.0.1:1/"]).unwrap();
        assert!(c.load.to_options(&c.urls).is_err());
    }

    #[test]
    fn body_file_content_type_and_repeated_headers() {
        let path = std::env::temp_dir().join(format!("loader-body-{}", std::process::id()));
        std::fs::write(&path, b"a=1&b=2").unwrap();
        let file = path.display().to_string();
        let c = parse(&[
            "--body",
            &file,
            "-T",
            "application/x-www-form-urlencoded",
            "-H",
            "X-One: 1",
            "-H",
            "X-Two:2",
            "http://127.0.0.1:1/",
        ])
        .unwrap();
        let o = c.load.to_options(&c.urls).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(o.body.as_deref(), Some(&b"a=1&b=2"[..]));
        assert_eq!(o.method, "POST", "a body makes it a POST, as ab -p does");
        assert_eq!(
            o.content_type.as_deref(),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(
            o.headers,
            [("X-One".into(), "1".into()), ("X-Two".into(), "2".into())]
        );
        let c = parse(&["-m", "PUT", "--body", "/dev/null", "http://127.0.0.1:1/"]).unwrap();
        assert_eq!(c.load.to_options(&c.urls).unwrap().method, "PUT");
    }

    #[test]
    fn file_errors_name_the_flag_the_file_and_the_line() {
        let err = |args: &[&str]| {
            let c = parse(args).unwrap();
            c.load.to_options(&c.urls).unwrap_err().to_string()
        };
        let e = err(&["--body", "/nonexistent/body", "http://127.0.0.1:1/"]);
        assert!(e.starts_with("--body /nonexistent/body: "), "{e}");
        let e = err(&["--urls", "/nonexistent/urls"]);
        assert!(e.starts_with("--urls /nonexistent/urls: "), "{e}");

        let path = std::env::temp_dir().join(format!("loader-urls-{}", std::process::id()));
        let file = path.display().to_string();
        std::fs::write(
            &path,
            "# two good, one bad\nhttp://127.0.0.1:1/a\n\nftp://x/\n",
        )
        .unwrap();
        let e = err(&["--urls", &file]);
        assert!(
            e.starts_with(&format!("--urls {file}:4: invalid URL 'ftp://x/'")),
            "{e}"
        );
        std::fs::write(
            &path,
            "http://127.0.0.1:1/a\n# c\nhttp://127.0.0.1:2/b?x=1\n",
        )
        .unwrap();
        let c = parse(&["--urls", &file, "-n", "4"]).unwrap();
        let o = c.load.to_options(&c.urls).unwrap();
        let paths: Vec<&str> = o.urls.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(paths, ["/a", "/b?x=1"]);
        std::fs::write(&path, "# nothing\n").unwrap();
        let e = err(&["--urls", &file]);
        assert!(e.ends_with("no URL in the file"), "{e}");
        let _ = std::fs::remove_file(&path);
    }
}
