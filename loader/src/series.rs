//! `--series FILE`: the run second by second, a line per second: CSV with a header, or JSON
//! lines when the name ends in `.jsonl`.
//!
//! ```text
//! elapsed_s,sent,completed,failed,connect,read,write,timeout,parse,unanswered,length,rate,p50_ms,p90_ms,p99_ms,send_lateness_p99_ms
//! 1.000,200,200,0,0,0,0,0,0,0,0,200.0,0.512,0.733,1.250,0.071
//! ```
//!
//! Invariants:
//! - second k covers `[k, k+1)` seconds from the start of measurement; `elapsed_s` is its end
//!   (the last, partial second's real end, after the drain of a timed run);
//! - `sent` counts the attempts started in the second, `completed` and the failures those that
//!   ended in it (`failed` is every attempt that ended without a response; `length` counts
//!   completed responses of another length, as the report does): summed over the lines, they
//!   are the report's attempts, Complete and failures exactly;
//! - `rate` is `completed` over the second's length; the percentiles are of that second's
//!   completed requests (from the intended send time with `--rate`), the send lateness p99 of
//!   its sends that waited for their time (0 without `--rate`).
//!
//! Shared-nothing (`intervals.rs`): each worker counts its current second in its own
//! [`SecondCounts`], handed to the writer thread at each boundary (once a second, never per
//! request); a second's line is written when every worker has reported it (or has ended
//! before it).

use crate::intervals::{Counts, Log};
use crate::measured_start::MeasuredStart;
use crate::stats::SecondCounts;
use crate::LoadError;
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The CSV header (and the JSON lines' keys, in order).
pub const COLUMNS: [&str; 16] = [
    "elapsed_s",
    "sent",
    "completed",
    "failed",
    "connect",
    "read",
    "write",
    "timeout",
    "parse",
    "unanswered",
    "length",
    "rate",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "send_lateness_p99_ms",
];

/// One line's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    JsonLines,
}

impl Format {
    /// JSON lines when the name ends in `.jsonl`, CSV otherwise.
    pub fn of(path: &Path) -> Format {
        if path.extension().is_some_and(|e| e == "jsonl") {
            Format::JsonLines
        } else {
            Format::Csv
        }
    }
}

impl Counts for SecondCounts {
    fn add(&mut self, other: &Self) {
        SecondCounts::add(self, other);
    }
}

/// The writer of `--series`: its sink takes each worker's seconds
/// (`Engine::take_second`).
pub type Series = Log<SecondCounts>;

/// Create the file (the CSV header first) and start the writer for `workers` workers;
/// measurement starts at `start`.
pub fn start(
    path: &PathBuf,
    workers: usize,
    start: Arc<MeasuredStart>,
) -> Result<Series, LoadError> {
    let file_err = |source| LoadError::File {
        flag: "--series",
        path: path.display().to_string(),
        source,
    };
    let format = Format::of(path);
    let mut out = BufWriter::new(std::fs::File::create(path).map_err(file_err)?);
    if format == Format::Csv {
        writeln!(out, "{}", COLUMNS.join(","))
            .and_then(|_| out.flush())
            .map_err(file_err)?;
    }
    let second = Duration::from_secs(1);
    Log::start("--series", (workers, start, second), move |span, counts| {
        // The last second ends when the run did (after its drain).
        let end = span.end.max(span.from);
        out.write_all(line(format, end, end - span.from, counts).as_bytes())?;
        out.flush()
    })
    .map_err(file_err)
}

/// One second's line: `length` is how long the second really lasted (1 s but for the last).
pub fn line(format: Format, end: Duration, length: Duration, c: &SecondCounts) -> String {
    let ms = |us: u64| us as f64 / 1000.0;
    let none = crate::stats::LatencySummary::default();
    let q = |h: &hdrhistogram::Histogram<u64>, q: f64| {
        ms(crate::figures::Times::new(h, &none).percentile_us(q * 100.0))
    };
    let f = &c.failures;
    let secs = length.as_secs_f64();
    let rate = if secs > 0.0 {
        c.completed as f64 / secs
    } else {
        0.0
    };
    let ints = [
        c.sent,
        c.completed,
        f.not_completed(),
        f.connect,
        f.read,
        f.write,
        f.timeout,
        f.parse,
        f.unanswered,
        f.length,
    ];
    let mut values = vec![format!("{:.3}", end.as_secs_f64())];
    values.extend(ints.iter().map(u64::to_string));
    values.push(format!("{rate:.1}"));
    for v in [
        q(&c.latency, 0.5),
        q(&c.latency, 0.9),
        q(&c.latency, 0.99),
        q(&c.lateness, 0.99),
    ] {
        values.push(format!("{v:.3}"));
    }
    match format {
        Format::Csv => values.join(",") + "\n",
        Format::JsonLines => {
            let mut s = String::from("{");
            for (i, (k, v)) in COLUMNS.iter().zip(&values).enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(s, "{sep}\"{k}\":{v}");
            }
            s + "}\n"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_in_both_formats() {
        let mut c = SecondCounts {
            sent: 10,
            completed: 9,
            ..SecondCounts::default()
        };
        c.failures.read = 1;
        c.latency.record(2_000).unwrap();
        let csv = line(
            Format::Csv,
            Duration::from_secs(3),
            Duration::from_secs(1),
            &c,
        );
        assert_eq!(
            csv,
            "3.000,10,9,1,0,1,0,0,0,0,0,9.0,2.000,2.000,2.000,0.000\n"
        );
        let json = line(
            Format::JsonLines,
            Duration::from_millis(3500),
            Duration::from_millis(500),
            &c,
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["elapsed_s"], 3.5);
        assert_eq!(v["rate"], 18.0);
        assert_eq!(v["read"], 1);
        assert_eq!(Format::of(Path::new("a.jsonl")), Format::JsonLines);
        assert_eq!(Format::of(Path::new("a.csv")), Format::Csv);
    }

    /// The report's rank (ab's and wrk's): of ten latencies of 100 .. 1000 µs, p50 is the
    /// 6th and p90 the 10th.
    #[test]
    fn percentiles_take_the_reports_rank() {
        let mut c = SecondCounts::default();
        for k in 1..=10 {
            c.latency.record(k * 100).unwrap();
        }
        let csv = line(
            Format::Csv,
            Duration::from_secs(1),
            Duration::from_secs(1),
            &c,
        );
        assert!(csv.ends_with(",0.600,1.000,1.000,0.000\n"), "{csv}");
    }
}
