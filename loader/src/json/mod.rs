//! `--json FILE`: the run document, as one set of serde types ([`RunDoc`] and its parts)
//! that the run writes and `loader merge` reads back: every figure of the report, the full
//! percentile spectrum, the histograms encoded so results can be merged exactly later, and the
//! run's context ([`SysInfo`]).
//!
//! Histograms are HdrHistogram's "V2 + DEFLATE" encoding in base64 (see `histcodec`), values
//! in microseconds. [`decode_histogram`] reads them back; adding decoded histograms gives the
//! exact merged distribution, which stored percentiles cannot.
//!
//! `"shard"` (with `--shard`: index, count and the totals split) and the URLs' exact
//! `"latency_us"` let `loader merge` add runs exactly (see `merge`).
//!
//! The document is versioned by `"schema"`; keys are only ever added, so a reader takes a
//! missing key as its default (the few it cannot do without are required). Documents are
//! written through `serde_json::Value`, whose objects keep their keys sorted.

mod parts;

pub use parts::*;

use crate::figures::{achieved_rate, percent_label, Derived, TimeRow, Times, PERCENTILES};
pub use crate::histcodec::{decode_histogram, encode_histogram};
use crate::shard::MAX_SHARDS;
use crate::stats::{Drain, LatencySummary, LoadMode, RunResult, TlsCounts};
use crate::sysinfo::SysInfo;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::runtime::DriverKind;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The value of the `"schema"` key of a run document.
pub const SCHEMA: &str = "loader-run/1";

/// Ticks per half distance of the percentile spectrum (HdrHistogram's `outputPercentileDistribution`
/// default: 5).
const SPECTRUM_TICKS: u32 = 5;

fn ms(us: f64) -> f64 {
    us / 1000.0
}

/// A finite f64 (NaN and infinities become 0 so the document stays valid JSON).
fn num(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// Percentiles in ms keyed "50", "99.9", "100".
pub type PercentilesMs = BTreeMap<String, f64>;

/// ab's percentiles (and 100) in ms, keyed "50", "99.9", "100", of a histogram alone.
pub fn percentiles_ms(h: &Histogram<u64>) -> PercentilesMs {
    times_percentiles_ms(Times::new(h, &LatencySummary::default()))
}

/// [`percentiles_ms`] of a series of times, "100" its exact maximum.
pub fn times_percentiles_ms(t: Times<'_>) -> PercentilesMs {
    let mut m = PercentilesMs::new();
    for &p in PERCENTILES {
        let key = percent_label(p).trim_end_matches('%').to_string();
        m.insert(key, num(ms(t.percentile_us(p) as f64)));
    }
    m.insert("100".into(), num(ms(t.max_us() as f64)));
    m
}

/// One step of the percentile spectrum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpectrumPoint {
    /// 0..100.
    pub percentile: f64,
    /// The highest value at that percentile.
    pub value_ms: f64,
    /// Requests since the previous entry.
    pub count: u64,
}

/// The full percentile spectrum (HdrHistogram's percentile distribution).
pub fn spectrum(h: &Histogram<u64>) -> Vec<SpectrumPoint> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_quantiles(SPECTRUM_TICKS)
        .map(|v| SpectrumPoint {
            percentile: num(v.quantile_iterated_to() * 100.0),
            value_ms: num(ms(h.highest_equivalent(v.value_iterated_to()) as f64)),
            count: v.count_since_last_iteration(),
        })
        .collect()
}

fn time_row(h: &Histogram<u64>, sums: &LatencySummary) -> TimeRow {
    let r = TimeRow::of(Times::new(h, sums));
    TimeRow {
        min: num(r.min),
        mean: num(r.mean),
        sd: num(r.sd),
        median: num(r.median),
        max: num(r.max),
    }
}

/// http_load's min/mean/max lines, in ms (`null` when nothing was measured).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MinMeanMax {
    pub mean: f64,
    pub max: f64,
    pub min: f64,
}

fn min_mean_max(h: &Histogram<u64>, sums: &LatencySummary) -> Option<MinMeanMax> {
    let t = Times::new(h, sums);
    (!t.is_empty()).then(|| MinMeanMax {
        mean: num(ms(t.mean_us())),
        max: num(ms(t.max_us() as f64)),
        min: num(ms(t.min_us() as f64)),
    })
}

/// A run document. Required when read back: `options`, the times, `totals` and
/// `histograms` (and `"schema"`, checked first: see [`check_schema`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub started_unix: f64,
    pub ended_unix: f64,
    #[serde(default)]
    pub interrupted: bool,
    pub warmup_s: Option<f64>,
    pub options: OptionsDoc,
    pub server_software: Option<String>,
    pub server_hostname: Option<String>,
    pub server_port: Option<u16>,
    pub document_path: Option<String>,
    pub document_length: Option<u64>,
    #[serde(default)]
    pub concurrency_level: usize,
    #[serde(default)]
    pub time_taken_s: f64,
    /// The end of a timed run: requests in flight at the stop, and the drain after it.
    pub drain: Option<DrainDoc>,
    #[serde(default)]
    pub complete_requests: u64,
    #[serde(default)]
    pub failed_requests: u64,
    pub totals: CountsDoc,
    #[serde(default)]
    pub requests_per_second: f64,
    #[serde(default)]
    pub time_per_request_ms: f64,
    #[serde(default)]
    pub time_per_request_all_ms: f64,
    #[serde(default)]
    pub transfer_rate_kbytes_per_sec: f64,
    /// ab's "Total body sent" (request heads and bodies), with or without a body.
    #[serde(default)]
    pub total_sent_bytes: u64,
    #[serde(default)]
    pub transfer_rate_sent_kbytes_per_sec: f64,
    #[serde(default)]
    pub connection_times_ms: ConnectionTimesDoc,
    #[serde(default)]
    pub percentiles_ms: PercentilesMs,
    #[serde(default)]
    pub percentile_spectrum: Vec<SpectrumPoint>,
    /// http_load's msecs/connect, split in two: the TCP connect, then the TLS handshake.
    pub msecs_connect: Option<MinMeanMax>,
    pub tls: Option<TlsDoc>,
    pub msecs_first_response: Option<MinMeanMax>,
    #[serde(default)]
    pub bad_byte_counts: u64,
    #[serde(default)]
    pub socket_errors: SocketErrorsDoc,
    pub rate: Option<RateDoc>,
    #[serde(default)]
    pub connections_opened: u64,
    #[serde(default)]
    pub source_addresses: usize,
    #[serde(default)]
    pub urls: Vec<UrlDoc>,
    pub histograms: HistogramsDoc,
    #[serde(default)]
    pub sends_body: bool,
    pub shard: Option<ShardDoc>,
    /// The machine's context ([`SysInfo`]), written by a run with `--json`; not read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// `loader merge --json`: the files, the per-run rows, the warnings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergedDoc>,
}

fn unix_secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn rate_doc(r: &RunResult, target: f64) -> RateDoc {
    RateDoc {
        target: num(target),
        achieved: num(achieved_rate(r)),
        reached: r.rate_reached(),
        uncorrected_percentiles_ms: times_percentiles_ms(Times::new(
            &r.hist.uncorrected,
            &r.hist.sums.uncorrected,
        )),
        uncorrected_spectrum: spectrum(&r.hist.uncorrected),
        spin: r.spin,
        send_lateness_count: r.hist.send_lateness.len(),
        send_lateness_percentiles_ms: times_percentiles_ms(Times::new(
            &r.hist.send_lateness,
            &r.hist.sums.send_lateness,
        )),
        sent_late_warning_ms: crate::figures::late_sender(r).map(|us| num(ms(us as f64))),
    }
}

impl RunDoc {
    /// Every figure of one run (no schema, no machine context: see [`document`]).
    pub fn of(r: &RunResult) -> RunDoc {
        let d = Derived::of(r);
        let first = r.urls.first();
        let t = &r.totals;
        let f = &t.failures;
        let (h, e) = (&r.hist, &r.hist.sums);
        RunDoc {
            schema: None,
            started_unix: num(unix_secs(r.started)),
            ended_unix: num(unix_secs(r.ended)),
            interrupted: r.interrupted,
            warmup_s: r.warmup.map(|w| w.as_secs_f64()),
            options: OptionsDoc {
                connections: r.concurrency,
                pipeline: r.pipeline,
                keep_alive: r.keep_alive,
                http10: r.http10,
                method: r.method.clone(),
                mode: match r.mode {
                    LoadMode::ClosedLoop => "closed-loop",
                    LoadMode::Rate { .. } => "rate",
                }
                .into(),
                workers: r.workers,
                driver: r.driver.to_string(),
                pinning: r.pinning.clone(),
                accept_variable_length: r.accept_variable_length,
            },
            server_software: r.server_software.clone(),
            server_hostname: first.map(|u| u.host.clone()),
            server_port: first.map(|u| u.port),
            document_path: first.map(|u| u.path.clone()),
            document_length: (!r.accept_variable_length)
                .then(|| r.document_length())
                .flatten(),
            concurrency_level: d.concurrency,
            time_taken_s: num(r.elapsed.as_secs_f64()),
            drain: r.drain.map(|d| DrainDoc {
                in_flight_at_stop: d.in_flight,
                drain_s: num(d.took.as_secs_f64()),
                unanswered: f.unanswered,
            }),
            complete_requests: t.completed,
            failed_requests: f.ab_failed(),
            totals: CountsDoc::of(t),
            requests_per_second: num(d.requests_per_second),
            time_per_request_ms: num(d.time_per_request_ms),
            time_per_request_all_ms: num(d.time_per_request_all_ms),
            transfer_rate_kbytes_per_sec: num(d.transfer_rate_kbytes),
            total_sent_bytes: t.bytes_sent,
            transfer_rate_sent_kbytes_per_sec: num(d.sent_rate_kbytes),
            connection_times_ms: ConnectionTimesDoc {
                connect: time_row(&h.connect, &e.connect),
                processing: time_row(&h.processing, &e.processing),
                waiting: time_row(&h.waiting, &e.waiting),
                total: time_row(&h.total, &e.total),
            },
            percentiles_ms: times_percentiles_ms(Times::new(&h.total, &e.total)),
            percentile_spectrum: spectrum(&r.hist.total),
            msecs_connect: min_mean_max(&h.connect_per_connection, &e.connect_per_connection),
            tls: r.tls.map(|t| TlsDoc {
                full_handshakes: t.full,
                resumed_handshakes: t.resumed,
                protocol: r.tls_protocol.clone(),
                msecs_handshake: min_mean_max(&h.tls_handshake, &e.tls_handshake),
            }),
            msecs_first_response: min_mean_max(&h.waiting, &e.waiting),
            bad_byte_counts: r.bad_byte_counts(),
            socket_errors: SocketErrorsDoc {
                connect: f.connect,
                read: f.receive(),
                write: f.write,
                timeout: f.timeout,
            },
            rate: r.target_rate().map(|target| rate_doc(r, target)),
            connections_opened: r.connections_opened,
            source_addresses: r.source_addresses,
            urls: r.urls.iter().map(UrlDoc::of).collect(),
            histograms: HistogramsDoc::of(&r.hist),
            sends_body: r.sends_body,
            shard: r.shard.as_ref().map(ShardDoc::of),
            context: None,
            merged: None,
        }
    }

    /// The run this document describes, for `loader merge`: the figures that are derived
    /// (rates, percentiles, ab's breakdown) are computed again from the counts and
    /// histograms.
    pub fn to_result(&self) -> Result<RunResult, String> {
        let started = time_of(self.started_unix, "started_unix")?;
        let ended = time_of(self.ended_unix, "ended_unix")?.max(started);
        let o = &self.options;
        let drain = |d: &DrainDoc| -> Result<Drain, String> {
            Ok(Drain {
                in_flight: bounded(d.in_flight_at_stop, MAX_COUNT, "drain.in_flight_at_stop")?,
                took: seconds(d.drain_s, "drain.drain_s")?,
            })
        };
        let tls = |t: &TlsDoc| -> Result<TlsCounts, String> {
            Ok(TlsCounts {
                full: bounded(t.full_handshakes, MAX_COUNT, "tls.full_handshakes")?,
                resumed: bounded(t.resumed_handshakes, MAX_COUNT, "tls.resumed_handshakes")?,
            })
        };
        let size = |v: usize, max: u64, key: &str| bounded(v as u64, max, key).map(|v| v as usize);
        Ok(RunResult {
            started,
            ended,
            elapsed: ended.duration_since(started).unwrap_or_default(),
            drain: self.drain.as_ref().map(drain).transpose()?,
            warmup: self.warmup_s.map(|s| seconds(s, "warmup_s")).transpose()?,
            requests: Vec::new(),
            interrupted: self.interrupted,
            concurrency: size(o.connections, MAX_CONNECTIONS, "options.connections")?,
            pipeline: size(o.pipeline, MAX_PIPELINE, "options.pipeline")?.max(1),
            keep_alive: o.keep_alive,
            http10: o.http10,
            method: if o.method.is_empty() {
                "GET".into()
            } else {
                o.method.clone()
            },
            mode: match &self.rate {
                Some(r) => LoadMode::Rate {
                    target: rate(r.target, "rate.target")?,
                },
                None => LoadMode::ClosedLoop,
            },
            workers: size(o.workers, MAX_WORKERS, "options.workers")?,
            driver: parse_driver(&o.driver),
            pinning: o.pinning.clone(),
            urls: self
                .urls
                .iter()
                .enumerate()
                .map(|(i, u)| u.to_result(i))
                .collect::<Result<_, _>>()?,
            totals: self.totals.to_counts("totals")?,
            hist: self.histograms.to_histograms()?,
            connections_opened: bounded(self.connections_opened, MAX_COUNT, "connections_opened")?,
            tls: self.tls.as_ref().map(tls).transpose()?,
            tls_protocol: self.tls.as_ref().and_then(|t| t.protocol.clone()),
            source_addresses: self.source_addresses,
            server_software: self.server_software.clone(),
            accept_variable_length: o.accept_variable_length,
            sends_body: self.sends_body,
            spin: self.rate.as_ref().is_some_and(|r| r.spin),
            shard: self
                .shard
                .as_ref()
                .map(ShardDoc::to_shard_run)
                .transpose()?,
        })
    }
}

/// The largest count a document may give, and a merge may add up to: 2^60 (a billion
/// requests a second for 36 years; an exbibyte), so that the few counts ab's figures add
/// together cannot overflow, and a sum that would is refused instead of wrapping.
pub const MAX_COUNT: u64 = 1 << 60;
/// Connections: `-c`'s bound (1,000,000) times the shards of one load.
pub const MAX_CONNECTIONS: u64 = 1_000_000 * MAX_SHARDS as u64;
/// Workers: `--workers`' bound (1024) times the shards of one load.
pub const MAX_WORKERS: u64 = 1024 * MAX_SHARDS as u64;
/// `--pipeline`'s bound.
pub const MAX_PIPELINE: u64 = 4096;
/// The highest rate (req/s) a document may give: a thousand times any generator's.
pub const MAX_RATE: f64 = 1e12;

/// A number of a document as an error shows it: 1e300 in short, not its 301 digits.
fn shown(v: f64) -> String {
    if v.abs() >= 1e15 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `v` when at most `max`, else an error naming the field.
pub(crate) fn bounded(v: u64, max: u64, field: &str) -> Result<u64, String> {
    if v > max {
        return Err(format!("'{field}' is {v}: above {max}"));
    }
    Ok(v)
}

/// A duration in seconds: not negative, and no longer than the span of times a document
/// may give.
pub(crate) fn seconds(v: f64, field: &str) -> Result<Duration, String> {
    if !(0.0..=LATEST_UNIX).contains(&v) {
        return Err(format!(
            "'{field}' is {}: not a duration from 0 to {LATEST_UNIX} s",
            shown(v)
        ));
    }
    Duration::try_from_secs_f64(v).map_err(|_| format!("'{field}' is {}: not a duration", shown(v)))
}

/// A rate in req/s: not negative, at most [`MAX_RATE`].
pub(crate) fn rate(v: f64, field: &str) -> Result<f64, String> {
    if !(0.0..=MAX_RATE).contains(&v) {
        return Err(format!(
            "'{field}' is {}: not a rate from 0 to {MAX_RATE:e} req/s",
            shown(v)
        ));
    }
    Ok(v)
}

/// The latest time a document may give: 9999-12-31T23:59:59Z. A time no run can have had,
/// and far below what `SystemTime` can hold, so that the spans computed from it cannot
/// overflow (1e19 panicked in the addition).
const LATEST_UNIX: f64 = 253_402_300_799.0;

fn time_of(secs: f64, key: &str) -> Result<SystemTime, String> {
    if !(0.0..=LATEST_UNIX).contains(&secs) {
        return Err(format!(
            "'{key}' is {}: not a time from 1970 to 9999 in Unix seconds",
            shown(secs)
        ));
    }
    Duration::try_from_secs_f64(secs)
        .ok()
        .and_then(|d| UNIX_EPOCH.checked_add(d))
        .ok_or_else(|| format!("'{key}' is {}: not a time", shown(secs)))
}

fn parse_driver(s: &str) -> DriverKind {
    [DriverKind::UringFast, DriverKind::Uring, DriverKind::Epoll]
        .into_iter()
        .find(|d| d.to_string() == s)
        .unwrap_or(DriverKind::Epoll)
}

/// Only the `"schema"` of a document, read before the rest so that any other JSON is
/// refused as what it is.
#[derive(Deserialize)]
struct SchemaOnly {
    schema: Option<String>,
}

fn not_a_run() -> String {
    format!("not a loader --json result (no \"schema\": \"{SCHEMA}\")")
}

/// `Ok` when `v` is a run document (`"schema": "loader-run/1"`).
pub fn check_schema(v: &Value) -> Result<(), String> {
    let s = SchemaOnly::deserialize(v).map(|s| s.schema).unwrap_or(None);
    if s.as_deref() != Some(SCHEMA) {
        return Err(not_a_run());
    }
    Ok(())
}

/// A typed field that did not read, named by its path in the document ("'totals.completed':
/// invalid type: floating point `1.5`, expected u64", with the line and column when read
/// from text).
fn field_error(e: serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = e.path().to_string();
    if path == "." {
        e.into_inner().to_string()
    } else {
        format!("'{path}': {}", e.into_inner())
    }
}

/// Read a run document (the schema first, then every field typed).
pub fn read_run(v: &Value) -> Result<RunDoc, String> {
    check_schema(v)?;
    serde_path_to_error::deserialize(v).map_err(field_error)
}

/// Read a run document from its text: every field typed, an error naming the field, its line
/// and column; JSON that is not a run document is refused as what it is.
pub fn read_run_text(text: &str) -> Result<RunDoc, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, RunDoc>(&mut de) {
        Ok(doc) if doc.schema.as_deref() == Some(SCHEMA) => {
            de.end().map_err(|e| format!("invalid JSON: {e}"))?;
            Ok(doc)
        }
        Ok(_) => Err(not_a_run()),
        Err(e) if e.inner().is_syntax() || e.inner().is_eof() => {
            Err(format!("invalid JSON: {}", e.into_inner()))
        }
        Err(e) => {
            // A field that does not read in JSON that is no run document at all: say that.
            let schema = serde_json::from_str::<SchemaOnly>(text)
                .ok()
                .and_then(|s| s.schema);
            if schema.as_deref() == Some(SCHEMA) {
                Err(field_error(e))
            } else {
                Err(not_a_run())
            }
        }
    }
}

/// Every figure of one run as JSON (no machine context: see [`document`]).
pub fn run_value(r: &RunResult) -> Value {
    to_value(&RunDoc::of(r))
}

/// The `--json` document of a run: the figures and the machine's context.
pub fn document(r: &RunResult, sys: &SysInfo) -> Value {
    let mut doc = RunDoc::of(r);
    doc.schema = Some(SCHEMA.into());
    doc.context = Some(to_value(sys));
    to_value(&doc)
}

/// A document as a JSON value (`null` for the impossible: our types always serialize).
pub fn to_value<T: Serialize + ?Sized>(doc: &T) -> Value {
    serde_json::to_value(doc).unwrap_or(Value::Null)
}

/// Write a document to `path`, pretty-printed, keys sorted.
pub fn write<T: Serialize + ?Sized>(path: &std::path::Path, doc: &T) -> std::io::Result<()> {
    let v = serde_json::to_value(doc).map_err(std::io::Error::other)?;
    let mut text = serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?;
    text.push('\n');
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spectrum_ends_at_100() {
        let mut h = crate::stats::new_histogram();
        for v in 1..=1000 {
            h.record(v).unwrap();
        }
        let s = to_value(&spectrum(&h));
        let last = s.as_array().unwrap().last().unwrap();
        assert_eq!(last["percentile"], json!(100.0));
        assert_eq!(last["value_ms"], json!(1.0));
        let total: u64 = s
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["count"].as_u64().unwrap())
            .sum();
        assert_eq!(total, 1000);
    }
}
