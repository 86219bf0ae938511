//! The parts of a run document: counts, URLs, histograms, options, the drain, TLS, the
//! rate, the shard and `loader merge`'s rows; each with its conversion from the run's figures
//! and, where `loader merge` needs it, back.

use super::{
    bounded, ms, num, rate, seconds, times_percentiles_ms, MinMeanMax, PercentilesMs,
    SpectrumPoint, MAX_COUNT,
};
use crate::figures::TimeRow;
use crate::histcodec::{decode_histogram, encode_histogram};
use crate::shard::{Shard, ShardRun, MAX_SHARDS};
use crate::stats::{
    new_url_histogram, Counts, Failures, Histograms, LatencySummary, Sums, UrlResult,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// ab's failure breakdown and the counts it is made of.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FailuresDoc {
    pub connect: u64,
    pub receive: u64,
    pub length: u64,
    pub exceptions: u64,
    pub read: u64,
    pub parse: u64,
    pub write: u64,
    pub timeout: u64,
    pub unanswered: u64,
}

/// A run's `"totals"` or a URL's `"counts"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CountsDoc {
    pub attempts: u64,
    pub completed: u64,
    /// ab's "Failed requests" (`failures` gives its breakdown).
    pub failed: u64,
    pub failures: FailuresDoc,
    pub write_errors: u64,
    pub non_2xx: u64,
    pub keep_alive: u64,
    pub bytes_received: u64,
    pub body_bytes: u64,
    pub bytes_sent: u64,
    /// Requests sent again on a new connection (the server closed before taking them).
    pub retried: u64,
    /// Bytes after a complete response that no request asked for (connections closed).
    pub protocol_errors: u64,
    pub unanswered: u64,
    /// The old name of `unanswered`: requests in flight at the end are drained, never dropped.
    pub abandoned: u64,
    /// Completed responses per status code.
    pub status: BTreeMap<String, u64>,
}

impl CountsDoc {
    pub fn of(c: &Counts) -> CountsDoc {
        let f = &c.failures;
        CountsDoc {
            attempts: c.attempts,
            completed: c.completed,
            failed: f.ab_failed(),
            failures: FailuresDoc {
                connect: f.connect,
                receive: f.receive(),
                length: f.length,
                exceptions: f.exceptions(),
                read: f.read,
                parse: f.parse,
                write: f.write,
                timeout: f.timeout,
                unanswered: f.unanswered,
            },
            write_errors: f.write,
            non_2xx: c.non_2xx,
            keep_alive: c.keep_alive,
            bytes_received: c.bytes_received,
            body_bytes: c.body_bytes,
            bytes_sent: c.bytes_sent,
            retried: c.retried,
            protocol_errors: c.protocol_errors,
            unanswered: f.unanswered,
            abandoned: f.unanswered,
            status: c
                .status_map()
                .into_iter()
                .map(|(code, n)| (code.to_string(), n))
                .collect(),
        }
    }

    /// The counts back (the derived figures are computed again from them), each at most
    /// [`MAX_COUNT`]; `at` is where they are in the document ("totals", "urls[0].counts"),
    /// for the error.
    pub fn to_counts(&self, at: &str) -> Result<Counts, String> {
        let f = &self.failures;
        let mut status = Vec::with_capacity(self.status.len());
        for (k, &n) in &self.status {
            let code: u16 = k
                .parse()
                .map_err(|_| format!("'{at}.status': '{k}' is not a status code"))?;
            status.push((code, bounded(n, MAX_COUNT, &format!("{at}.status"))?));
        }
        status.sort_unstable();
        let counts = Counts {
            attempts: self.attempts,
            completed: self.completed,
            failures: Failures {
                connect: f.connect,
                read: f.read,
                write: f.write,
                timeout: f.timeout,
                parse: f.parse,
                length: f.length,
                unanswered: f.unanswered,
            },
            non_2xx: self.non_2xx,
            keep_alive: self.keep_alive,
            bytes_received: self.bytes_received,
            body_bytes: self.body_bytes,
            bytes_sent: self.bytes_sent,
            retried: self.retried,
            protocol_errors: self.protocol_errors,
            status,
        };
        // The names of the counts are the document's: check them through the same list.
        let mut over = None;
        counts.each_count(&mut |v, name| {
            if v > MAX_COUNT && over.is_none() {
                over = Some(format!("'{at}.{name}' is {v}: above {MAX_COUNT}"));
            }
        });
        match over {
            Some(e) => Err(e),
            None => Ok(counts),
        }
    }
}

/// A URL's latency summary in ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencyMsDoc {
    pub count: u64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// A URL's exact latency summary in µs, for `loader merge`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencyUsDoc {
    pub count: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
}

/// One URL of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UrlDoc {
    pub url: String,
    pub host: String,
    pub port: u16,
    pub path: String,
    pub document_length: Option<u64>,
    pub server_software: Option<String>,
    pub counts: CountsDoc,
    pub latency_ms: LatencyMsDoc,
    pub percentiles_ms: PercentilesMs,
    /// Required when read back: the URL's exact distribution.
    pub histogram: Option<String>,
    pub latency_us: LatencyUsDoc,
}

impl UrlDoc {
    pub fn of(u: &UrlResult) -> UrlDoc {
        let l = &u.latency;
        UrlDoc {
            url: u.url.clone(),
            host: u.host.clone(),
            port: u.port,
            path: u.path.clone(),
            document_length: u.document_length,
            server_software: u.server_software.clone(),
            counts: CountsDoc::of(&u.counts),
            latency_ms: LatencyMsDoc {
                count: l.count,
                mean: num(ms(l.mean_us())),
                min: num(ms(l.min() as f64)),
                max: num(ms(l.max_us as f64)),
            },
            percentiles_ms: times_percentiles_ms(crate::figures::Times::new(&u.hist, l)),
            histogram: Some(encode_histogram(&u.hist)),
            latency_us: LatencyUsDoc {
                count: l.count,
                sum: l.sum_us,
                min: l.min(),
                max: l.max_us,
            },
        }
    }

    /// The URL's figures back (the `i`-th of the document's), its histogram in the per-URL
    /// precision whatever the document's (the merged one adds them exactly).
    pub fn to_result(&self, i: usize) -> Result<UrlResult, String> {
        let url = &self.url;
        let encoded = self
            .histogram
            .as_deref()
            .ok_or_else(|| format!("URL {url}: no 'histogram'"))?;
        let decoded =
            decode_histogram(encoded).map_err(|e| format!("URL {url}: histogram: {e}"))?;
        let mut hist = new_url_histogram();
        hist.add(&decoded)
            .map_err(|e| format!("URL {url}: histogram: {e:?}"))?;
        let l = &self.latency_us;
        let at = format!("urls[{i}]");
        bounded(l.count, MAX_COUNT, &format!("{at}.latency_us.count"))?;
        bounded(l.sum, MAX_COUNT, &format!("{at}.latency_us.sum"))?;
        Ok(UrlResult {
            url: url.clone(),
            host: self.host.clone(),
            port: self.port,
            path: self.path.clone(),
            document_length: self.document_length,
            server_software: self.server_software.clone(),
            counts: self.counts.to_counts(&format!("{at}.counts"))?,
            latency: LatencySummary {
                count: l.count,
                sum_us: l.sum,
                min_us: if l.count == 0 { u64::MAX } else { l.min },
                max_us: l.max,
                // Not written: per URL only the min, mean and max are reported.
                sum_sq_us: 0,
            },
            hist,
        })
    }
}

/// The run's histograms, encoded (every one is required when read back, but `tls_handshake`,
/// which versions without TLS did not write).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistogramsDoc {
    pub encoding: String,
    pub unit: String,
    pub total: Option<String>,
    pub uncorrected: Option<String>,
    pub connect: Option<String>,
    pub processing: Option<String>,
    pub waiting: Option<String>,
    pub connect_per_connection: Option<String>,
    pub tls_handshake: Option<String>,
    pub send_lateness: Option<String>,
    /// Each histogram's exact summary (count, sum, sum of squares as a string, min, max),
    /// for the exact min, mean, sd and max; absent from older documents, whose figures then
    /// come from the histograms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sums_us: Option<Sums>,
}

/// A document's exact sums as a run makes them: a count within the bound, a sum no smaller
/// than the count's minimums would make, the minimum no larger than the maximum (the report
/// clamps percentiles between the two).
fn check_sums(sums: &Sums) -> Result<(), String> {
    for (name, s) in sums.named() {
        let field = |what: &str| format!("'histograms.sums_us.{name}': {what}");
        if s.count > MAX_COUNT {
            return Err(field(&format!("count {} beyond {MAX_COUNT}", s.count)));
        }
        if s.count > 0 && s.min_us > s.max_us {
            return Err(field(&format!("min {} above max {}", s.min_us, s.max_us)));
        }
    }
    Ok(())
}

impl HistogramsDoc {
    pub fn of(h: &Histograms) -> HistogramsDoc {
        let e = |h| Some(encode_histogram(h));
        HistogramsDoc {
            encoding: "HdrHistogram V2+DEFLATE, base64".into(),
            unit: "us".into(),
            total: e(&h.total),
            uncorrected: e(&h.uncorrected),
            connect: e(&h.connect),
            processing: e(&h.processing),
            waiting: e(&h.waiting),
            connect_per_connection: e(&h.connect_per_connection),
            tls_handshake: e(&h.tls_handshake),
            send_lateness: e(&h.send_lateness),
            sums_us: Some(h.sums.clone()),
        }
    }

    pub fn to_histograms(&self) -> Result<Histograms, String> {
        if let Some(sums) = &self.sums_us {
            check_sums(sums)?;
        }
        let mut h = Histograms {
            sums: self.sums_us.clone().unwrap_or_default(),
            ..Histograms::default()
        };
        for (key, encoded, slot) in [
            ("total", &self.total, &mut h.total),
            ("uncorrected", &self.uncorrected, &mut h.uncorrected),
            ("connect", &self.connect, &mut h.connect),
            ("processing", &self.processing, &mut h.processing),
            ("waiting", &self.waiting, &mut h.waiting),
            (
                "connect_per_connection",
                &self.connect_per_connection,
                &mut h.connect_per_connection,
            ),
            ("tls_handshake", &self.tls_handshake, &mut h.tls_handshake),
            ("send_lateness", &self.send_lateness, &mut h.send_lateness),
        ] {
            let Some(s) = encoded else {
                if key == "tls_handshake" {
                    continue; // written by versions that had no TLS: no handshake
                }
                return Err(format!("no histogram '{key}'"));
            };
            let decoded = decode_histogram(s).map_err(|e| format!("histogram '{key}': {e}"))?;
            slot.add(&decoded)
                .map_err(|e| format!("histogram '{key}': {e:?}"))?;
        }
        Ok(h)
    }
}

/// What the run was asked to do, and on what (`loader merge` compares these between runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OptionsDoc {
    pub connections: usize,
    pub pipeline: usize,
    pub keep_alive: bool,
    pub http10: bool,
    pub method: String,
    /// "closed-loop" or "rate".
    pub mode: String,
    pub workers: usize,
    pub driver: String,
    pub pinning: String,
    pub accept_variable_length: bool,
}

/// The end of a timed run (null for a run that -n ended).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DrainDoc {
    pub in_flight_at_stop: u64,
    pub drain_s: f64,
    pub unanswered: u64,
}

/// ab's "Connection Times (ms)".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnectionTimesDoc {
    pub connect: TimeRow,
    pub processing: TimeRow,
    pub waiting: TimeRow,
    pub total: TimeRow,
}

/// `https://`: the handshakes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TlsDoc {
    pub full_handshakes: u64,
    pub resumed_handshakes: u64,
    pub protocol: Option<String>,
    pub msecs_handshake: Option<MinMeanMax>,
}

/// wrk's socket errors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SocketErrorsDoc {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
}

/// `--rate`: the target, what was achieved, the uncorrected figures and the send lateness.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RateDoc {
    pub target: f64,
    pub achieved: f64,
    pub reached: Option<bool>,
    pub uncorrected_percentiles_ms: PercentilesMs,
    pub uncorrected_spectrum: Vec<SpectrumPoint>,
    pub spin: bool,
    pub send_lateness_count: u64,
    pub send_lateness_percentiles_ms: PercentilesMs,
    pub sent_late_warning_ms: Option<f64>,
}

/// `--shard`: this run's place and the totals it took its part of.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardDoc {
    pub index: u32,
    pub count: u32,
    pub requests_total: Option<u64>,
    pub rate_total: Option<f64>,
    pub duration_s: Option<f64>,
}

impl ShardDoc {
    pub fn of(s: &ShardRun) -> ShardDoc {
        ShardDoc {
            index: s.shard.index,
            count: s.shard.count,
            requests_total: s.requests_total,
            rate_total: s.rate_total,
            duration_s: s.duration.map(|d| d.as_secs_f64()),
        }
    }

    /// The shard back; an index outside 1..=count or a count the command line would refuse
    /// is an error naming the field (a count of 2^32-1 had merge allocate per shard).
    pub fn to_shard_run(&self) -> Result<ShardRun, String> {
        if self.count == 0 || self.count > MAX_SHARDS {
            return Err(format!(
                "'shard.count' is {}: not from 1 to {MAX_SHARDS}",
                self.count
            ));
        }
        if self.index == 0 || self.index > self.count {
            return Err(format!(
                "'shard.index' is {}: not from 1 to the count, {}",
                self.index, self.count
            ));
        }
        Ok(ShardRun {
            shard: Shard {
                index: self.index,
                count: self.count,
            },
            requests_total: self
                .requests_total
                .map(|n| bounded(n, MAX_COUNT, "shard.requests_total"))
                .transpose()?,
            rate_total: self
                .rate_total
                .map(|r| rate(r, "shard.rate_total"))
                .transpose()?,
            duration: self
                .duration_s
                .map(|s| seconds(s, "shard.duration_s"))
                .transpose()?,
        })
    }
}

/// One run of `loader merge`'s per-run table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub file: String,
    /// "I/N", or null for a run without `--shard`.
    pub shard: Option<String>,
    pub start_offset_s: f64,
    pub time_taken_s: f64,
    pub complete_requests: u64,
    pub failed_requests: u64,
    pub requests_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub unanswered: u64,
    pub in_flight_at_stop: Option<u64>,
    pub drain_s: Option<f64>,
    pub send_lateness_p99_ms: Option<f64>,
}

/// `loader merge --json`: what was merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MergedDoc {
    pub files: Vec<String>,
    pub runs: Vec<RunRow>,
    pub warnings: Vec<String>,
}
