//! What a run is asked to do, as plain validated data ([`RunOptions`]): built by the command
//! line (`cli`) or by a program, and read by the run and the commands built on it. No clap.

use crate::target::Target;
use crate::LoadError;
use bytes::Bytes;
use shared::runtime::RuntimeConfig;
use std::path::PathBuf;
use std::time::Duration;

/// Run time when neither `-n` nor `-d` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// `-c` when not given (an ab or wrk command line takes its tool's: see `cli::compat`).
pub const DEFAULT_CONNECTIONS: usize = 50;

/// `--timeout` when not given: ab's `-s` default (a wrk command line takes wrk's 2 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything a run needs, validated. Immutable once built; workers share it read-only.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// At least one; used round-robin per connection (request k of a connection goes to URL
    /// `(connection + k) % urls.len()`, so every URL gets its exact share of `-n`).
    pub urls: Vec<Target>,
    /// `-c`. More than `requests` leaves connections without a request, counted all the
    /// same in ab's figures: see [`RunOptions::cap_connections`].
    pub connections: usize,
    /// `-n`: exact attempts.
    pub requests: Option<u64>,
    /// `-d`. When both are None the run lasts [`DEFAULT_DURATION`]; see `deadline()`.
    pub duration: Option<Duration>,
    pub runtime: RuntimeConfig,
    /// Per-request timeout.
    pub timeout: Duration,
    pub method: String,
    /// Extra headers, in order (a Host, Connection, User-Agent or Accept here replaces ours;
    /// a name given again replaces the earlier value, Cookies are joined: `plan::merged_fields`).
    pub headers: Vec<(String, String)>,
    pub body: Option<Bytes>,
    pub content_type: Option<String>,
    /// A new connection for every request, sending `Connection: close`.
    pub close: bool,
    pub http10: bool,
    /// Requests in flight per connection (1: no pipelining); with more, every URL must be
    /// servable by one connection (`validate`: address, scheme, TLS name). Responses come back in order;
    /// when the server closes the connection cleanly (`Connection: close`, or EOF before any
    /// byte of the next answer on a connection that answered before) the requests still
    /// queued behind the last response are sent again on a new connection (RFC 9112 9.3.2);
    /// an EOF or reset in the middle of an answer fails them as read failures. With `--rate`,
    /// requests that fall due while the pipe is not empty are sent after the next response.
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
    pub hdr_log: Option<HdrLogOptions>,
    /// `https://`: `--cacert` or `--insecure`, and resumption (off with `--no-resume`).
    pub tls: shared::tls::ClientTlsOptions,
    /// ab's `-g`: keep up to this many completed requests' times per worker (reserved
    /// before the run).
    pub record_requests: Option<usize>,
    /// `--series FILE`: a line per second (CSV, or JSON lines when it ends in `.jsonl`).
    pub series: Option<PathBuf>,
    /// `--stages`: (length, target rate) per stage; the open-loop rate ramps linearly from 0
    /// through the targets. `rate` is then the stages' mean and `duration` their sum.
    pub stages: Option<Vec<(Duration, f64)>>,
    /// `--targets`: each URL's own method, headers and body (parallel to `urls`).
    pub per_url: Option<Vec<crate::targets::RequestSpec>>,
    /// `--targets-order`: round-robin (exact shares) or random.
    pub targets_order: crate::targets::TargetsOrder,
}

/// The lowest `--rate` (req/s): the unit `--shard` splits rates in. A far lower one staggers
/// the connections' first sends (c/R apart) beyond what the clock can hold.
pub const MIN_RATE: f64 = 0.001;

/// The shortest `--hdr-log-interval`.
pub const MIN_HDR_LOG_INTERVAL: Duration = Duration::from_millis(1);

/// Source addresses used for `--close` against loopback.
pub const DEFAULT_SOURCE_ADDRESSES: usize = 64;

impl RunOptions {
    /// Defaults for a run against `urls` (as the CLI would with no flags), for tests and
    /// programmatic use. One worker, unpinned.
    pub fn new(urls: Vec<Target>) -> RunOptions {
        RunOptions {
            urls,
            connections: DEFAULT_CONNECTIONS,
            requests: None,
            duration: None,
            runtime: RuntimeConfig {
                workers: 1,
                pin: false,
                ..RuntimeConfig::default()
            },
            timeout: DEFAULT_TIMEOUT,
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
            record_requests: None,
            series: None,
            stages: None,
            per_url: None,
            targets_order: crate::targets::TargetsOrder::RoundRobin,
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
            return invalid(
                "--pipeline needs keep-alive: it cannot be used with --close or \
                 -H 'Connection: close'",
            );
        }
        if self.pipeline > 1 {
            self.validate_one_connection()?;
        }
        if self.runtime.workers == 0 {
            return invalid("--workers must be at least 1");
        }
        if let Some(r) = self.rate {
            // With --stages the rate is the ramp's mean, which paces nothing (each stage's
            // target was checked against the floor): a long ramp to 0.001 and back is below it.
            let floor = if self.stages.is_some() { 0.0 } else { MIN_RATE };
            if !(r.is_finite() && r > 0.0 && r >= floor) {
                return invalid("--rate must be at least 0.001 req/s");
            }
        }
        if self.spin && self.rate.is_none() {
            return invalid("--spin paces sends: it needs --rate");
        }
        if self
            .hdr_log
            .as_ref()
            .is_some_and(|h| h.interval < MIN_HDR_LOG_INTERVAL)
        {
            return invalid("--hdr-log-interval must be at least 1ms");
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
    /// `--pipeline`: a slot's connection carries every URL's requests, queued behind each
    /// other, so all must be servable by one connection: one address, one scheme and, for
    /// https, one TLS name (the certificate was checked for that name and no other).
    fn validate_one_connection(&self) -> Result<(), LoadError> {
        let first = &self.urls[0];
        let name = |t: &Target| t.tls.then(|| crate::tls::server_name(&t.host).ok());
        for u in &self.urls[1..] {
            let why = if u.addr != first.addr {
                "are on different servers (host and port)"
            } else if u.tls != first.tls {
                "differ in scheme"
            } else if name(u) != name(first) {
                "differ in TLS name (the certificate is checked for one name)"
            } else {
                continue;
            };
            return Err(LoadError::Invalid(format!(
                "--pipeline needs every URL on one connection: {} and {} {why}",
                first.url, u.url
            )));
        }
        Ok(())
    }

    /// `-T` and a `Content-Length` given with `-H` against the body: the loader writes
    /// Content-Length itself (once) from the body; one given by hand must agree with it.
    fn validate_body_headers(&self) -> Result<(), LoadError> {
        for (name, value) in &self.headers {
            if name.eq_ignore_ascii_case("transfer-encoding") {
                // With a raw body after it, the request would carry both framings (the
                // request smuggling shape); without one, the server would wait for chunks.
                return Err(LoadError::Invalid(format!(
                    "-H '{name}: {value}': the loader frames the body itself (Content-Length \
                     from --body); Transfer-Encoding cannot be given"
                )));
            }
            if name.eq_ignore_ascii_case("content-length") {
                self.check_content_length(name, value)?;
            }
        }
        if self.content_type.is_some() && self.body.is_none() {
            return Err(LoadError::Invalid(
                "-T/--content-type needs --body (it is the body's type); to send the header \
                 without a body use -H 'Content-Type: ...'"
                    .into(),
            ));
        }
        // Sent as the Content-Type field's value: a CR in it would start another field.
        if let Some(t) = &self.content_type {
            shared::http::framing::check_field_value(t)
                .map_err(|why| LoadError::Invalid(format!("-T '{}': {why}", t.escape_debug())))?;
        }
        Ok(())
    }
}

impl RunOptions {
    /// A `-H` Content-Length against every request's body: the loader writes each request's
    /// Content-Length from its own body (a `--targets` request's `@FILE`, else `--body`), so a
    /// value that disagrees with any of them would frame that body wrongly (its bytes read as
    /// the next request: the request smuggling shape).
    fn check_content_length(&self, name: &str, value: &str) -> Result<(), LoadError> {
        // RFC 9110 8.6: 1*DIGIT. Rust's parse also takes a leading '+', which a server reads
        // as a framing error, or otherwise.
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(LoadError::Invalid(format!(
                "-H '{name}: {value}': a Content-Length is digits only (RFC 9110 8.6)"
            )));
        }
        let given = value.parse::<u64>().ok();
        let Some(specs) = &self.per_url else {
            let len = self.body.as_ref().map_or(0, |b| b.len() as u64);
            if given == Some(len) {
                return Ok(());
            }
            return Err(LoadError::Invalid(format!(
                "-H '{name}: {value}' disagrees with the body, which is {len} bytes{}",
                if self.body.is_some() {
                    " (--body sets Content-Length itself: leave it out)"
                } else {
                    " (no --body)"
                }
            )));
        };
        for (i, (spec, url)) in specs.iter().zip(&self.urls).enumerate() {
            let len = spec
                .body
                .as_ref()
                .or(self.body.as_ref())
                .map_or(0, |b| b.len() as u64);
            if given != Some(len) {
                return Err(LoadError::Invalid(format!(
                    "-H '{name}: {value}' disagrees with the body of --targets request {} ({} \
                     {}), which is {len} bytes (the loader sets each request's Content-Length \
                     from its body: leave it out)",
                    i + 1,
                    spec.method,
                    url.url
                )));
            }
        }
        Ok(())
    }

    /// Cap `connections` at `requests` (with `-n`): a connection without a request would
    /// only count in ab's Concurrency Level and Time per request, which must use the
    /// connections run. ab refuses instead; capping keeps `--shard`'s parts (some get fewer
    /// requests than `-c`) and `--rate` (each connection's share of the rate) sound.
    pub fn cap_connections(&mut self) {
        if let Some(n) = self.requests {
            self.connections = self
                .connections
                .min(usize::try_from(n).unwrap_or(usize::MAX));
        }
    }

    /// A `Connection` header given with `-H` names the `close` option (the last one given:
    /// it replaces the earlier ones on the wire).
    pub fn asks_to_close(&self) -> bool {
        self.headers
            .iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .is_some_and(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

fn valid_token(s: &str) -> bool {
    shared::http::framing::is_token(s.as_bytes())
}

/// Parse `Name: value`; the name must be a token, the value a field value
/// (`shared::http::framing::check_field_value`).
pub fn parse_header(h: &str) -> Result<(String, String), LoadError> {
    let shown = h.escape_debug();
    let bad = || LoadError::Invalid(format!("invalid header '{shown}': expected 'Name: value'"));
    let (name, value) = h.split_once(':').ok_or_else(bad)?;
    if !valid_token(name) {
        return Err(bad());
    }
    shared::http::framing::check_field_value(value)
        .map_err(|why| LoadError::Invalid(format!("invalid header '{shown}': {why}")))?;
    Ok((name.to_string(), value.trim().to_string()))
}

/// `--hdr-log FILE` and `--hdr-log-interval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HdrLogOptions {
    pub path: PathBuf,
    pub interval: Duration,
}
