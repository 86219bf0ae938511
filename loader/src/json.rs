//! `--json FILE`: every figure of the report, the full percentile spectrum, the histograms
//! encoded so results can be merged exactly later, and the run's context ([`SysInfo`]).
//!
//! Histograms are HdrHistogram's "V2 + DEFLATE" encoding in base64 (the form HdrHistogram's
//! interval logs use; `HISTF...`), values in microseconds. [`decode_histogram`] reads them back;
//! adding decoded histograms gives the exact merged distribution, which stored percentiles
//! cannot.
//!
//! `"shard"` (with `--shard`: index, count and the totals split) and the URLs' exact
//! `"latency_us"` let `loader merge` add runs exactly (see `merge`).
//!
//! The document is versioned by `"schema"`; keys are only ever added.

use crate::report::{achieved_rate, Derived, TimeRow, PERCENTILES};
use crate::stats::{Counts, Histograms, LoadMode, RunResult, UrlResult};
use crate::sysinfo::SysInfo;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::time::UNIX_EPOCH;

/// The value of the `"schema"` key of a run document.
pub const SCHEMA: &str = "loader-run/1";

/// Ticks per half distance of the percentile spectrum (HdrHistogram's `outputPercentileDistribution`
/// default: 5).
const SPECTRUM_TICKS: u32 = 5;

fn ms(us: f64) -> f64 {
    us / 1000.0
}

/// A finite f64 (NaN and infinities become 0 so the document stays valid JSON).
fn num(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        json!(0.0)
    }
}

/// Encode a histogram: V2 + DEFLATE, base64.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2DeflateSerializer::new().serialize(h, &mut buf) {
        Ok(_) => shared::base64::encode(&buf),
        // Serializing into a Vec cannot fail for a histogram of u64 counts; keep the document
        // valid anyway.
        Err(_) => String::new(),
    }
}

/// Decode what [`encode_histogram`] wrote.
pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, String> {
    let bytes = shared::base64::decode(s).ok_or_else(|| "invalid base64".to_string())?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("invalid histogram: {e:?}"))
}

/// ab's percentiles (and 100) in ms, keyed "50", "99.9", "100".
pub fn percentiles_ms(h: &Histogram<u64>) -> Value {
    let mut m = Map::new();
    for &p in PERCENTILES {
        let key = crate::report::percent_label(p)
            .trim_end_matches('%')
            .to_string();
        m.insert(key, num(ms(h.value_at_percentile(p) as f64)));
    }
    m.insert("100".into(), num(ms(h.max() as f64)));
    Value::Object(m)
}

/// The full percentile spectrum (HdrHistogram's percentile distribution): one entry per step,
/// `percentile` (0..100), `value_ms` (the highest value at that percentile), `count` (requests
/// since the previous entry).
pub fn spectrum(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!([]);
    }
    let points: Vec<Value> = h
        .iter_quantiles(SPECTRUM_TICKS)
        .map(|v| {
            json!({
                "percentile": num(v.quantile_iterated_to() * 100.0),
                "value_ms": num(ms(h.highest_equivalent(v.value_iterated_to()) as f64)),
                "count": v.count_since_last_iteration(),
            })
        })
        .collect();
    Value::Array(points)
}

fn time_row(h: &Histogram<u64>) -> Value {
    let r = TimeRow::of(h);
    json!({ "min": num(r.min), "mean": num(r.mean), "sd": num(r.sd), "median": num(r.median), "max": num(r.max) })
}

fn min_mean_max(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return Value::Null;
    }
    json!({ "mean": num(ms(h.mean())), "max": num(ms(h.max() as f64)), "min": num(ms(h.min() as f64)) })
}

fn counts(c: &Counts) -> Value {
    let f = &c.failures;
    let status: Map<String, Value> = c
        .status_map()
        .into_iter()
        .map(|(code, n)| (code.to_string(), json!(n)))
        .collect();
    json!({
        "attempts": c.attempts,
        "completed": c.completed,
        // ab's "Failed requests" and its breakdown.
        "failed": f.ab_failed(),
        "failures": {
            "connect": f.connect,
            "receive": f.receive(),
            "length": f.length,
            "exceptions": f.exceptions(),
            "read": f.read,
            "parse": f.parse,
            "write": f.write,
            "timeout": f.timeout,
            "unanswered": f.unanswered,
        },
        "write_errors": f.write,
        "non_2xx": c.non_2xx,
        "keep_alive": c.keep_alive,
        "bytes_received": c.bytes_received,
        "body_bytes": c.body_bytes,
        "bytes_sent": c.bytes_sent,
        "unanswered": f.unanswered,
        // The old name: requests in flight at the end are now drained, never dropped.
        "abandoned": f.unanswered,
        "status": status,
    })
}

fn url(u: &UrlResult) -> Value {
    json!({
        "url": u.url,
        "host": u.host,
        "port": u.port,
        "path": u.path,
        "document_length": u.document_length,
        "server_software": u.server_software,
        "counts": counts(&u.counts),
        "latency_ms": {
            "count": u.latency.count,
            "mean": num(ms(u.latency.mean_us())),
            "min": num(ms(u.latency.min() as f64)),
            "max": num(ms(u.latency.max_us as f64)),
        },
        "percentiles_ms": percentiles_ms(&u.hist),
        "histogram": encode_histogram(&u.hist),
        // Exact, for `loader merge`.
        "latency_us": {
            "count": u.latency.count,
            "sum": u.latency.sum_us,
            "min": u.latency.min(),
            "max": u.latency.max_us,
        },
    })
}

fn histograms(h: &Histograms) -> Value {
    json!({
        "encoding": "HdrHistogram V2+DEFLATE, base64",
        "unit": "us",
        "total": encode_histogram(&h.total),
        "uncorrected": encode_histogram(&h.uncorrected),
        "connect": encode_histogram(&h.connect),
        "processing": encode_histogram(&h.processing),
        "waiting": encode_histogram(&h.waiting),
        "connect_per_connection": encode_histogram(&h.connect_per_connection),
        "tls_handshake": encode_histogram(&h.tls_handshake),
        "send_lateness": encode_histogram(&h.send_lateness),
    })
}

/// Every figure of one run (no machine context: see [`document`]).
pub fn run_value(r: &RunResult) -> Value {
    let d = Derived::of(r);
    let first = r.urls.first();
    let t = &r.totals;
    let f = &t.failures;
    let secs = |t: std::time::SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let rate = match r.mode {
        LoadMode::ClosedLoop => Value::Null,
        LoadMode::Rate { target } => json!({
            "target": num(target),
            "achieved": num(achieved_rate(r)),
            "reached": r.rate_reached(),
            "uncorrected_percentiles_ms": percentiles_ms(&r.hist.uncorrected),
            "uncorrected_spectrum": spectrum(&r.hist.uncorrected),
            "spin": r.spin,
            "send_lateness_count": r.hist.send_lateness.len(),
            "send_lateness_percentiles_ms": percentiles_ms(&r.hist.send_lateness),
            "sent_late_warning_ms": r.late_sender().map(|us| num(ms(us as f64))),
        }),
    };
    json!({
        "started_unix": num(secs(r.started)),
        "ended_unix": num(secs(r.ended)),
        "interrupted": r.interrupted,
        "warmup_s": r.warmup.map(|w| w.as_secs_f64()),
        "options": {
            "connections": r.concurrency,
            "pipeline": r.pipeline,
            "keep_alive": r.keep_alive,
            "http10": r.http10,
            "method": r.method,
            "mode": if matches!(r.mode, LoadMode::ClosedLoop) { "closed-loop" } else { "rate" },
            "workers": r.workers,
            "driver": r.driver.to_string(),
            "pinning": r.pinning,
            "accept_variable_length": r.accept_variable_length,
        },
        "server_software": r.server_software,
        "server_hostname": first.map(|u| u.host.clone()),
        "server_port": first.map(|u| u.port),
        "document_path": first.map(|u| u.path.clone()),
        "document_length": if r.accept_variable_length { Value::Null } else { json!(r.document_length()) },
        "concurrency_level": d.concurrency,
        "time_taken_s": num(r.elapsed.as_secs_f64()),
        // The end of a timed run: requests in flight at the stop, and the drain after it
        // (null for a run that -n ended).
        "drain": r.drain.map(|d| json!({
            "in_flight_at_stop": d.in_flight,
            "drain_s": num(d.took.as_secs_f64()),
            "unanswered": f.unanswered,
        })),
        "complete_requests": t.completed,
        "failed_requests": f.ab_failed(),
        "totals": counts(t),
        "requests_per_second": num(d.requests_per_second),
        "time_per_request_ms": num(d.time_per_request_ms),
        "time_per_request_all_ms": num(d.time_per_request_all_ms),
        "transfer_rate_kbytes_per_sec": num(d.transfer_rate_kbytes),
        // ab's "Total body sent" and "kb/s sent" (request heads and bodies), with or without a body.
        "total_sent_bytes": t.bytes_sent,
        "transfer_rate_sent_kbytes_per_sec": num(d.sent_rate_kbytes),
        "connection_times_ms": {
            "connect": time_row(&r.hist.connect),
            "processing": time_row(&r.hist.processing),
            "waiting": time_row(&r.hist.waiting),
            "total": time_row(&r.hist.total),
        },
        "percentiles_ms": percentiles_ms(&r.hist.total),
        "percentile_spectrum": spectrum(&r.hist.total),
        // http_load's msecs/connect, split in two: the TCP connect, then the TLS handshake.
        "msecs_connect": min_mean_max(&r.hist.connect_per_connection),
        "tls": r.tls.map(|t| json!({
            "full_handshakes": t.full,
            "resumed_handshakes": t.resumed,
            "protocol": r.tls_protocol,
            "msecs_handshake": min_mean_max(&r.hist.tls_handshake),
        })),
        "msecs_first_response": min_mean_max(&r.hist.waiting),
        "bad_byte_counts": r.bad_byte_counts(),
        "socket_errors": {
            "connect": f.connect,
            "read": f.receive(),
            "write": f.write,
            "timeout": f.timeout,
        },
        "rate": rate,
        "connections_opened": r.connections_opened,
        "source_addresses": r.source_addresses,
        "urls": r.urls.iter().map(url).collect::<Vec<_>>(),
        "histograms": histograms(&r.hist),
        "sends_body": r.sends_body,
        "shard": r.shard.as_ref().map(crate::merge::shard_value),
    })
}

/// The `--json` document of a run: the figures and the machine's context.
pub fn document(r: &RunResult, sys: &SysInfo) -> Value {
    let mut v = run_value(r);
    if let Value::Object(m) = &mut v {
        m.insert("schema".into(), json!(SCHEMA));
        m.insert(
            "context".into(),
            serde_json::to_value(sys).unwrap_or(Value::Null),
        );
    }
    v
}

/// Write a document to `path`, pretty-printed.
pub fn write(path: &std::path::Path, v: &Value) -> std::io::Result<()> {
    let mut text = serde_json::to_string_pretty(v).map_err(std::io::Error::other)?;
    text.push('\n');
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_round_trips() {
        let mut h = crate::stats::new_histogram();
        for v in [1, 10, 100, 1000, 10_000, 123_456] {
            h.record_n(v, 3).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        // Every recorded value with its count, not a summary of them.
        let recorded = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        };
        assert_eq!(recorded(&back), recorded(&h));
        assert_eq!(recorded(&h).len(), 6);
        assert_eq!(back.len(), h.len());
        assert!(decode_histogram("AAAA").is_err());
    }

    #[test]
    fn spectrum_ends_at_100() {
        let mut h = crate::stats::new_histogram();
        for v in 1..=1000 {
            h.record(v).unwrap();
        }
        let s = spectrum(&h);
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
