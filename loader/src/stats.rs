//! What a run measured: per-worker figures (plain owned structs, written by their worker only)
//! and the merged [`RunResult`] the reports read.
//!
//! Invariants:
//! - `attempts == completed + failures.not_completed()`: every attempt ends as a completed
//!   response or as exactly one counted failure (connect, read, write, timeout, parse).
//! - A length failure (ab's "Length") is a *completed* response whose body length differs from
//!   the first response to the same URL: it is counted in `completed` and in `failures.length`,
//!   as ab counts it in both "Complete requests" and "Failed requests". With `-l` it is not
//!   counted at all. http_load's "bad byte counts" is the same figure.
//! - Non-2xx responses are completed responses (counted in `non_2xx` and per status).
//! - At the end of a timed run (`-d`, or Ctrl-C) no new request starts and the requests in
//!   flight are drained: answered within `--timeout`, they are completed (and recorded) like
//!   any other; still unanswered then, they fail as `unanswered` ("unanswered at end"). No
//!   attempt is dropped, so the slowest requests, which are the ones in flight at the end,
//!   stay in the percentiles, and the counts match the server's.
//! - Histograms are in microseconds, 3 significant digits, 1 µs .. 1 h (larger values saturate).
//!
//! Live progress reads [`LiveCounters`] (single-writer `Counter`s) while the run goes; the
//! rest is handed back once, when the worker ends, and merged after the workers join.

use hdrhistogram::Histogram;
use shared::counter::Counter;
use shared::runtime::DriverKind;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Highest latency a histogram tracks without saturating: one hour, in µs.
pub const HIST_MAX_US: u64 = 3_600_000_000;
/// HdrHistogram precision.
pub const HIST_SIGFIG: u8 = 3;

/// A fresh latency histogram (µs, 1 µs .. 1 h, 3 significant digits): allocated once, never
/// resized on the request path.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, HIST_SIGFIG)
        .expect("constant histogram bounds are valid")
}

/// Record a value in µs, saturating at the histogram's top (never fails, never allocates).
#[inline]
pub fn record(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us);
}

/// Failed attempts, ab's breakdown and wrk's socket errors from the same counts.
///
/// ab: Connect = `connect`, Receive = `read + parse`, Length = `length`, Exceptions = `timeout`;
/// "Write errors" = `write`. wrk: connect `connect`, read `read + parse`, write `write`,
/// timeout `timeout`. Where they differ from ab's (a cut response is a `read` failure, not a
/// complete one with a Length failure; ab's Exceptions are poll errors): docs/LOADER.md.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Failures {
    /// The TCP connect failed (refused, unreachable, out of ports...).
    pub connect: u64,
    /// Reading the response failed: reset, or the peer closed before the response was complete.
    pub read: u64,
    /// Writing the request failed (EPIPE, reset).
    pub write: u64,
    /// No complete response within `--timeout` (the connection is closed and reopened).
    pub timeout: u64,
    /// The response was malformed (the codec rejected it).
    pub parse: u64,
    /// Completed responses whose body length differed from the URL's first response (0 with -l).
    pub length: u64,
    /// In flight when the run ended and still unanswered when the drain ended (`--timeout`
    /// after the deadline or Ctrl-C).
    pub unanswered: u64,
}

impl Failures {
    /// ab's "Failed requests": connect + receive + length + exceptions (write errors apart),
    /// and the requests left unanswered at the end of the drain (ab has no such end).
    pub fn ab_failed(&self) -> u64 {
        self.connect + self.receive() + self.length + self.exceptions() + self.unanswered
    }
    /// ab's "Receive" column: read errors and malformed responses.
    pub fn receive(&self) -> u64 {
        self.read + self.parse
    }
    /// ab's "Exceptions" column: timeouts.
    pub fn exceptions(&self) -> u64 {
        self.timeout
    }
    /// Attempts that ended without a complete response.
    pub fn not_completed(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.parse + self.unanswered
    }
    /// Every failure counted, length failures included.
    pub fn total(&self) -> u64 {
        self.not_completed() + self.length
    }
    pub fn add(&mut self, o: &Failures) {
        self.each_pair(o, &mut |a, b, _| *a += b);
    }

    /// Every count with its counterpart in `o` and its name in a run document: the one list
    /// that [`Failures::add`] and [`Counts::checked_add`] both go through.
    fn each_pair(&mut self, o: &Failures, f: &mut impl FnMut(&mut u64, u64, &'static str)) {
        f(&mut self.connect, o.connect, "failures.connect");
        f(&mut self.read, o.read, "failures.read");
        f(&mut self.write, o.write, "failures.write");
        f(&mut self.timeout, o.timeout, "failures.timeout");
        f(&mut self.parse, o.parse, "failures.parse");
        f(&mut self.length, o.length, "failures.length");
        f(&mut self.unanswered, o.unanswered, "failures.unanswered");
    }
}

/// `a + b` when it is at most `max`.
pub fn sum_within(a: u64, b: u64, max: u64) -> Option<u64> {
    a.checked_add(b).filter(|s| *s <= max)
}

/// Counts kept per URL (and summed for the run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests started (each ends completed or failed, exactly once).
    pub attempts: u64,
    /// Complete responses, whatever their status (length failures included, as in ab).
    pub completed: u64,
    pub failures: Failures,
    /// Completed responses with a status outside 200..=299.
    pub non_2xx: u64,
    /// Completed responses that left their connection open for the next request (ab's
    /// "Keep-Alive requests": ab counts every response that said keep-alive, each
    /// connection's first included; 0 with --close).
    pub keep_alive: u64,
    /// Every byte read from the server: heads, bodies, chunk framing.
    pub bytes_received: u64,
    /// Body payload bytes (ab's "HTML transferred"; chunk framing excluded).
    pub body_bytes: u64,
    /// Request bytes written.
    pub bytes_sent: u64,
    /// Requests sent again on a new connection because the server closed before taking them
    /// (RFC 9112 9.3.2): after a response saying `Connection: close`, or a reused connection
    /// closed before any byte of the answer. Not attempts of their own.
    pub retried: u64,
    /// Bytes after a complete response that no request asked for (a 204 or 304 with a body,
    /// an extra response): the connection is closed and this counts it.
    pub protocol_errors: u64,
    /// Completed responses per status code; small (usually one entry), searched linearly.
    pub status: Vec<(u16, u64)>,
}

impl Counts {
    #[inline]
    pub fn count_status(&mut self, status: u16) {
        for e in self.status.iter_mut() {
            if e.0 == status {
                e.1 += 1;
                return;
            }
        }
        self.status.push((status, 1));
    }

    pub fn add(&mut self, o: &Counts) {
        self.each_pair(o, &mut |a, b, _| *a += b);
    }

    /// [`Counts::add`] when no sum passes `max` (`loader merge`: documents' counts, which
    /// can be anything); else the name of the first that would, and `self` as it was.
    pub fn checked_add(&mut self, o: &Counts, max: u64) -> Result<(), &'static str> {
        let mut sum = self.clone();
        let mut over = None;
        sum.each_pair(o, &mut |a, b, name| match sum_within(*a, b, max) {
            Some(s) => *a = s,
            None => {
                over.get_or_insert(name);
            }
        });
        match over {
            Some(name) => Err(name),
            None => {
                *self = sum;
                Ok(())
            }
        }
    }

    /// Every count with its name in a run document, the statuses apart (through the list
    /// of [`Counts::each_pair`], so that no count is left out).
    pub fn each_count(&self, f: &mut impl FnMut(u64, &'static str)) {
        let mut copy = Counts {
            status: Vec::new(),
            ..self.clone()
        };
        copy.each_pair(&Counts::default(), &mut |a, _, name| f(*a, name));
    }

    /// Every count with its counterpart in `o` and its name in a run document (the
    /// statuses last, each as "status"), the statuses `o` has and `self` lacks added first.
    fn each_pair(&mut self, o: &Counts, f: &mut impl FnMut(&mut u64, u64, &'static str)) {
        f(&mut self.attempts, o.attempts, "attempts");
        f(&mut self.completed, o.completed, "completed");
        self.failures.each_pair(&o.failures, f);
        f(&mut self.non_2xx, o.non_2xx, "non_2xx");
        f(&mut self.keep_alive, o.keep_alive, "keep_alive");
        f(&mut self.bytes_received, o.bytes_received, "bytes_received");
        f(&mut self.body_bytes, o.body_bytes, "body_bytes");
        f(&mut self.bytes_sent, o.bytes_sent, "bytes_sent");
        f(&mut self.retried, o.retried, "retried");
        f(
            &mut self.protocol_errors,
            o.protocol_errors,
            "protocol_errors",
        );
        for &(s, n) in &o.status {
            let i = match self.status.iter().position(|e| e.0 == s) {
                Some(i) => i,
                None => {
                    self.status.push((s, 0));
                    self.status.len() - 1
                }
            };
            f(&mut self.status[i].1, n, "status");
        }
        self.status.sort_unstable();
    }

    /// Status counts as a sorted map.
    pub fn status_map(&self) -> BTreeMap<u16, u64> {
        self.status.iter().copied().collect()
    }
}

/// The exact running figures of a series of times (µs), kept beside its histogram: the
/// histogram rounds each value to its bucket (at 2.5 s a bucket is 2 ms wide), so min, mean,
/// sd and max come from here and only percentiles from the histogram. Integer sums, so
/// workers' and shards' summaries add up exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub sum_us: u64,
    pub min_us: u64,
    pub max_us: u64,
    /// The sum of the squares (a u128: one hour squared is near u64's top), for ab's sd.
    #[serde(default, with = "u128_text")]
    pub sum_sq_us: u128,
}

/// A u128 as a decimal string: JSON numbers written through `serde_json::Value` stop at u64.
mod u128_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Default for LatencySummary {
    fn default() -> Self {
        LatencySummary {
            count: 0,
            sum_us: 0,
            min_us: u64::MAX,
            max_us: 0,
            sum_sq_us: 0,
        }
    }
}

impl LatencySummary {
    #[inline]
    pub fn record(&mut self, us: u64) {
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.sum_sq_us = self
            .sum_sq_us
            .saturating_add(u128::from(us) * u128::from(us));
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
    }
    pub fn add(&mut self, o: &LatencySummary) {
        self.count = self.count.saturating_add(o.count);
        self.sum_us = self.sum_us.saturating_add(o.sum_us);
        self.sum_sq_us = self.sum_sq_us.saturating_add(o.sum_sq_us);
        self.min_us = self.min_us.min(o.min_us);
        self.max_us = self.max_us.max(o.max_us);
    }
    /// [`LatencySummary::add`] when neither sum passes `max`; else the name of the one that
    /// would (in a run document), and `self` as it was.
    pub fn checked_add(&mut self, o: &LatencySummary, max: u64) -> Result<(), &'static str> {
        let count = sum_within(self.count, o.count, max).ok_or("latency_us.count")?;
        let sum_us = sum_within(self.sum_us, o.sum_us, max).ok_or("latency_us.sum")?;
        *self = LatencySummary {
            count,
            sum_us,
            min_us: self.min_us.min(o.min_us),
            max_us: self.max_us.max(o.max_us),
            sum_sq_us: self.sum_sq_us.saturating_add(o.sum_sq_us),
        };
        Ok(())
    }
    /// ab's sd, in µs: the sample standard deviation (n - 1; 0 below two values), from the
    /// exact integer n·Σx² - (Σx)² where it fits (it does up to ~10^9 values of an hour).
    pub fn sd_us(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = u128::from(self.count);
        let sum = u128::from(self.sum_us);
        let var_n2 = match (n.checked_mul(self.sum_sq_us), sum.checked_mul(sum)) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64,
            _ => {
                let mean = self.mean_us();
                return ((self.sum_sq_us as f64 - mean * self.sum_us as f64).max(0.0)
                    / (self.count - 1) as f64)
                    .sqrt();
            }
        };
        (var_n2 / (self.count as f64 * (self.count - 1) as f64)).sqrt()
    }
    /// Mean in µs (0 when empty).
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_us as f64 / self.count as f64
        }
    }
    /// Minimum in µs (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min_us
        }
    }
}

/// Precision of the per-URL histograms: 2 significant digits (values within 1 %), so one
/// is ~26 KiB where the run's 3-digit ones are ~190 KiB: a `--urls` file of a thousand URLs
/// costs 26 MiB per worker, not 190.
pub const URL_HIST_SIGFIG: u8 = 2;

/// A per-URL latency histogram (µs, 1 µs .. 1 h, [`URL_HIST_SIGFIG`] digits).
pub fn new_url_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, URL_HIST_SIGFIG)
        .expect("constant histogram bounds are valid")
}

/// One worker's figures for one URL.
#[derive(Debug, Clone, Default)]
pub struct UrlStats {
    pub counts: Counts,
    pub latency: LatencySummary,
    /// Total time per request for this URL (as `Histograms::total`); allocated by the
    /// URL's first response, once per worker, so URLs never answered cost nothing.
    pub hist: Option<Histogram<u64>>,
}

impl UrlStats {
    /// Record one completed request's total time.
    #[inline]
    pub fn record(&mut self, us: u64) {
        self.latency.record(us);
        record(self.hist.get_or_insert_with(new_url_histogram), us);
    }

    pub fn add(&mut self, o: &UrlStats) {
        self.counts.add(&o.counts);
        self.latency.add(&o.latency);
        if let Some(h) = &o.hist {
            // Same bounds everywhere: add cannot fail.
            let _ = self.hist.get_or_insert_with(new_url_histogram).add(h);
        }
    }

    /// This URL's histogram (empty when it never completed).
    pub fn histogram(&self) -> Histogram<u64> {
        self.hist.clone().unwrap_or_else(new_url_histogram)
    }
}

/// ab's Connection Times and the latency histograms, per worker and merged.
#[derive(Debug, Clone)]
pub struct Histograms {
    /// Total time per request: from the (intended, with --rate) send time to the response's
    /// last byte; ab's "Total". Coordinated-omission corrected in --rate mode.
    pub total: Histogram<u64>,
    /// Total time from the actual send time (differs from `total` only with --rate).
    pub uncorrected: Histogram<u64>,
    /// ab's "Connect": connect time of the connection the request opened; 0 when reused.
    pub connect: Histogram<u64>,
    /// ab's "Processing": total minus connect.
    pub processing: Histogram<u64>,
    /// ab's "Waiting": from the request written to the response's first byte (time to first
    /// byte; also http_load's msecs/first-response).
    pub waiting: Histogram<u64>,
    /// One entry per connection opened: its TCP connect time (http_load's msecs/connect,
    /// without the TLS handshake, which is apart in `tls_handshake`).
    pub connect_per_connection: Histogram<u64>,
    /// `https://`: one entry per TLS connection, its handshake time (after the TCP connect).
    pub tls_handshake: Histogram<u64>,
    /// `--rate`: for each send that waited for its intended time, how late it went out
    /// (actual send time minus intended send time; 0 when early). The generator's own delay
    /// (timer and thread wake-up), which the corrected figures include: a send delayed by a
    /// busy connection (the server's slowness) is not in here.
    pub send_lateness: Histogram<u64>,
    /// The exact min, mean, sd and max of each histogram's values.
    pub sums: Sums,
}

/// [`Histograms`]' values summed exactly, one [`LatencySummary`] per histogram.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Sums {
    pub total: LatencySummary,
    pub uncorrected: LatencySummary,
    pub connect: LatencySummary,
    pub processing: LatencySummary,
    pub waiting: LatencySummary,
    pub connect_per_connection: LatencySummary,
    pub tls_handshake: LatencySummary,
    pub send_lateness: LatencySummary,
}

impl Sums {
    /// Each summary with its name in a run document.
    pub fn named(&self) -> [(&'static str, &LatencySummary); 8] {
        [
            ("total", &self.total),
            ("uncorrected", &self.uncorrected),
            ("connect", &self.connect),
            ("processing", &self.processing),
            ("waiting", &self.waiting),
            ("connect_per_connection", &self.connect_per_connection),
            ("tls_handshake", &self.tls_handshake),
            ("send_lateness", &self.send_lateness),
        ]
    }

    pub fn add(&mut self, o: &Sums) {
        self.total.add(&o.total);
        self.uncorrected.add(&o.uncorrected);
        self.connect.add(&o.connect);
        self.processing.add(&o.processing);
        self.waiting.add(&o.waiting);
        self.connect_per_connection.add(&o.connect_per_connection);
        self.tls_handshake.add(&o.tls_handshake);
        self.send_lateness.add(&o.send_lateness);
    }
}

/// Record a value in a histogram and in its exact summary.
#[inline]
pub fn record_exact(h: &mut Histogram<u64>, s: &mut LatencySummary, us: u64) {
    record(h, us);
    s.record(us);
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            total: new_histogram(),
            uncorrected: new_histogram(),
            connect: new_histogram(),
            processing: new_histogram(),
            waiting: new_histogram(),
            connect_per_connection: new_histogram(),
            tls_handshake: new_histogram(),
            send_lateness: new_histogram(),
            sums: Sums::default(),
        }
    }
}

impl Histograms {
    pub fn add(&mut self, o: &Histograms) {
        // Same bounds everywhere: add cannot fail.
        let _ = self.total.add(&o.total);
        let _ = self.uncorrected.add(&o.uncorrected);
        let _ = self.connect.add(&o.connect);
        let _ = self.processing.add(&o.processing);
        let _ = self.waiting.add(&o.waiting);
        let _ = self.connect_per_connection.add(&o.connect_per_connection);
        let _ = self.tls_handshake.add(&o.tls_handshake);
        let _ = self.send_lateness.add(&o.send_lateness);
        self.sums.add(&o.sums);
    }

    pub fn reset(&mut self) {
        self.total.reset();
        self.uncorrected.reset();
        self.connect.reset();
        self.processing.reset();
        self.waiting.reset();
        self.connect_per_connection.reset();
        self.tls_handshake.reset();
        self.send_lateness.reset();
        self.sums = Sums::default();
    }
}

/// Everything one worker measured, handed back when it ends.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    /// Indexed like `RunOptions::urls`.
    pub urls: Vec<UrlStats>,
    pub hist: Histograms,
    pub connections_opened: u64,
    /// `https://`: handshakes completed, full and resumed.
    pub tls: TlsCounts,
    /// Which of the source addresses (indices into the plan's list) this worker used.
    pub sources_used: Vec<bool>,
    /// `--hdr-log`: the total latencies of the current interval (see `hdrlog`).
    pub interval: Option<Histogram<u64>>,
    /// ab's `-g`: every completed request's times, in storage reserved before the run (never
    /// grown on the request path: when it is full, later requests are not kept).
    pub requests: Option<Vec<RequestTimes>>,
    /// `--series`: the current second's counts (see `series`).
    pub second: Option<SecondCounts>,
}

/// `--series`: what one worker did in one second (attempts started, answers and failures by
/// the time they ended), added up across workers by the series writer.
#[derive(Debug, Clone)]
pub struct SecondCounts {
    /// Attempts started (tickets taken).
    pub sent: u64,
    pub completed: u64,
    pub failures: Failures,
    /// Total latency of the completed ones (µs).
    pub latency: Histogram<u64>,
    /// Send lateness of the sends that waited for their time (µs).
    pub lateness: Histogram<u64>,
}

impl Default for SecondCounts {
    fn default() -> Self {
        SecondCounts {
            sent: 0,
            completed: 0,
            failures: Failures::default(),
            latency: new_histogram(),
            lateness: new_histogram(),
        }
    }
}

impl SecondCounts {
    pub fn reset(&mut self) {
        self.sent = 0;
        self.completed = 0;
        self.failures = Failures::default();
        self.latency.reset();
        self.lateness.reset();
    }

    pub fn add(&mut self, o: &SecondCounts) {
        self.sent += o.sent;
        self.completed += o.completed;
        self.failures.add(&o.failures);
        // Same bounds everywhere: adding cannot fail.
        let _ = self.latency.add(&o.latency);
        let _ = self.lateness.add(&o.lateness);
    }
}

/// ab's `-g`: one completed request's times (ab's starttime, ctime, ttime and wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTimes {
    /// When it started, in whole seconds since the Unix epoch.
    pub start_unix_s: u64,
    /// Connect time charged to it (0 on a connection kept from an earlier request).
    pub connect_us: u64,
    /// Its latency.
    pub total_us: u64,
    /// From its bytes sent to the first byte of its answer.
    pub wait_us: u64,
}

impl Measurements {
    pub fn new(n_urls: usize, n_sources: usize) -> Self {
        Measurements {
            urls: vec![UrlStats::default(); n_urls],
            hist: Histograms::default(),
            connections_opened: 0,
            tls: TlsCounts::default(),
            sources_used: vec![false; n_sources],
            interval: None,
            requests: None,
            second: None,
        }
    }

    /// Forget everything measured so far (end of --warmup).
    pub fn reset(&mut self) {
        for u in self.urls.iter_mut() {
            u.counts = Counts::default();
            u.latency = LatencySummary::default();
            if let Some(h) = &mut u.hist {
                h.reset();
            }
        }
        self.hist.reset();
        self.connections_opened = 0;
        self.tls = TlsCounts::default();
        self.sources_used.iter_mut().for_each(|b| *b = false);
        if let Some(h) = &mut self.interval {
            h.reset();
        }
        if let Some(v) = &mut self.requests {
            v.clear();
        }
        if let Some(s) = &mut self.second {
            s.reset();
        }
    }
}

/// `https://`: TLS handshakes completed during measurement. A failed handshake is a connect
/// failure of its attempt and is not in here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TlsCounts {
    /// The server's certificate was sent and verified.
    pub full: u64,
    /// A session was resumed (no certificate).
    pub resumed: u64,
}

impl TlsCounts {
    pub fn add(&mut self, o: &TlsCounts) {
        self.full += o.full;
        self.resumed += o.resumed;
    }
    /// [`TlsCounts::add`] when neither sum passes `max`; else the name of the one that would
    /// (in a run document), and `self` as it was.
    pub fn checked_add(&mut self, o: &TlsCounts, max: u64) -> Result<(), &'static str> {
        *self = TlsCounts {
            full: sum_within(self.full, o.full, max).ok_or("tls.full_handshakes")?,
            resumed: sum_within(self.resumed, o.resumed, max).ok_or("tls.resumed_handshakes")?,
        };
        Ok(())
    }
}

/// Counters the live progress line reads while the run goes: written by one worker only.
/// Aligned to a cache line so two workers' counters never share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct LiveCounters {
    /// Completed responses (warm-up included).
    pub completed: Counter,
    /// Failed attempts (warm-up included).
    pub errors: Counter,
}

/// The merged figures for one URL.
#[derive(Debug, Clone)]
pub struct UrlResult {
    /// The URL as given.
    pub url: String,
    pub host: String,
    pub port: u16,
    /// Path and query (ab's "Document Path").
    pub path: String,
    /// Body length of the first response to this URL (ab's "Document Length").
    pub document_length: Option<u64>,
    /// The Server header of the first response to this URL that had one.
    pub server_software: Option<String>,
    pub counts: Counts,
    pub latency: LatencySummary,
    /// Total time per request for this URL ([`URL_HIST_SIGFIG`] digits).
    pub hist: Histogram<u64>,
}

/// The end of a timed run: how many requests were in flight when sending stopped, and how
/// long they took to drain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drain {
    /// Measured requests started and not yet answered when sending stopped (the deadline or
    /// Ctrl-C), a connect or a write of theirs possibly still to come.
    pub in_flight: u64,
    /// From the stop to the last answer (or to `--timeout`, when some stayed unanswered).
    pub took: Duration,
}

/// How the load was driven.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadMode {
    /// Closed loop: each connection sends its next request when a response arrives.
    ClosedLoop,
    /// Open loop at a target rate (req/s), wrk2's model.
    Rate { target: f64 },
}

/// Everything the reports need, after the workers joined.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Wall-clock time measurement started (after any warm-up) and ended.
    pub started: SystemTime,
    pub ended: SystemTime,
    /// The load period: from the start of measurement to the stop (the `-d` deadline or
    /// Ctrl-C), or to the last response of a `-n` run. The drain after a stop is not in it.
    pub elapsed: Duration,
    /// The drain after a stop (`None`: the run ended by `-n`, nothing was left to drain).
    pub drain: Option<Drain>,
    /// Warm-up load run before measuring (not in any figure).
    pub warmup: Option<Duration>,
    /// ab's `-g`: the completed requests' times (empty unless asked for).
    pub requests: Vec<RequestTimes>,
    /// The run was cut short by Ctrl-C.
    pub interrupted: bool,
    /// `-c`: connections (ab's "Concurrency Level").
    pub concurrency: usize,
    /// `--pipeline`: requests in flight per connection.
    pub pipeline: usize,
    /// Keep-alive (false with --close).
    pub keep_alive: bool,
    pub http10: bool,
    pub method: String,
    pub mode: LoadMode,
    pub workers: usize,
    pub driver: DriverKind,
    /// "2 workers pinned to cores 0,1".
    pub pinning: String,
    /// Per URL, in the order given.
    pub urls: Vec<UrlResult>,
    /// The sum over URLs.
    pub totals: Counts,
    pub hist: Histograms,
    /// TCP connections opened during measurement.
    pub connections_opened: u64,
    /// `https://` in the run: its handshakes (`None` for plain HTTP only).
    pub tls: Option<TlsCounts>,
    /// `https://`: the first handshake's protocol, cipher suite, key exchange and ALPN.
    pub tls_protocol: Option<String>,
    /// Distinct source addresses used (0: the kernel's choice, no spreading).
    pub source_addresses: usize,
    /// The Server header of the first response that had one.
    pub server_software: Option<String>,
    /// Length failures are not counted (-l).
    pub accept_variable_length: bool,
    /// The requests carried a body (`--body`): ab's "Total body sent" and sent rates apply.
    pub sends_body: bool,
    /// `--spin`: the workers busy-polled the clock instead of sleeping until each send.
    pub spin: bool,
    /// `--shard`: this run was one part of a larger load (`loader merge` adds the parts).
    pub shard: Option<crate::shard::ShardRun>,
}

impl RunResult {
    /// Requests per second over the load period (drained requests included: they were sent
    /// in it).
    pub fn rate(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.totals.completed as f64 / s
        } else {
            0.0
        }
    }

    /// The target rate with --rate.
    pub fn target_rate(&self) -> Option<f64> {
        match self.mode {
            LoadMode::Rate { target } => Some(target),
            LoadMode::ClosedLoop => None,
        }
    }

    /// With --rate: whether the achieved rate (completed responses per second) came within
    /// 5 % of it.
    pub fn rate_reached(&self) -> Option<bool> {
        let target = self.target_rate()?;
        Some(self.per_second(self.totals.completed) >= target * 0.95)
    }

    /// With --rate: whether the requests went out at it (attempts per second within 5 %),
    /// whatever became of them: a rate not reached then is the requests' failures, not the
    /// sending.
    pub fn sent_at_rate(&self) -> Option<bool> {
        let target = self.target_rate()?;
        Some(self.per_second(self.totals.attempts) >= target * 0.95)
    }

    /// `n` over the load period.
    fn per_second(&self, n: u64) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            n as f64 / s
        } else {
            0.0
        }
    }

    /// http_load's "bad byte counts" (the length failures).
    pub fn bad_byte_counts(&self) -> u64 {
        self.totals.failures.length
    }

    /// Document length of the first URL (ab prints one).
    pub fn document_length(&self) -> Option<u64> {
        self.urls.first().and_then(|u| u.document_length)
    }

    /// No request succeeded (exit status 1).
    pub fn nothing_succeeded(&self) -> bool {
        self.totals.completed == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_merge_statuses_and_failures() {
        let mut a = Counts::default();
        a.count_status(200);
        a.count_status(200);
        a.count_status(404);
        a.failures.timeout = 2;
        let mut b = Counts::default();
        b.count_status(503);
        b.count_status(200);
        b.failures.read = 1;
        b.failures.parse = 1;
        b.failures.length = 4;
        a.add(&b);
        assert_eq!(a.status, vec![(200, 3), (404, 1), (503, 1)]);
        assert_eq!(a.failures.receive(), 2);
        assert_eq!(a.failures.ab_failed(), 2 + 2 + 4);
        assert_eq!(a.failures.not_completed(), 4);
    }

    #[test]
    fn summaries_give_the_exact_sample_sd_and_add_up() {
        let (mut a, mut b) = (LatencySummary::default(), LatencySummary::default());
        for us in [2, 4, 4, 4] {
            a.record(us);
        }
        for us in [5, 5, 7, 9] {
            b.record(us);
        }
        a.add(&b);
        assert_eq!((a.count, a.sum_us, a.min(), a.max_us), (8, 40, 2, 9));
        // Σ(x - 5)² = 32 over n - 1 = 7.
        assert!((a.sd_us() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        // Around an hour, where the squares outgrow u64: still exact.
        let mut big = LatencySummary::default();
        big.record(3_600_000_000);
        big.record(3_600_000_002);
        assert!((big.sd_us() - 2f64.sqrt()).abs() < 1e-9, "{}", big.sd_us());
    }

    #[test]
    fn histograms_saturate_instead_of_failing() {
        let mut h = Histograms::default();
        record(&mut h.total, 0);
        record(&mut h.total, u64::MAX);
        assert_eq!(h.total.len(), 2);
        let mut m = Histograms::default();
        m.add(&h);
        assert_eq!(m.total.len(), 2);
    }
}
