//! `--hdr-log FILE`: interval latency histograms in HdrHistogram's interval log format
//! (`HistogramLogWriter` 1.3), readable by HdrHistogram's own tools (Java
//! `HistogramLogProcessor`, Python `HistogramLogReader`, the Rust crate's
//! `IntervalLogIterator`).
//!
//! ```text
//! #[Histogram log format version 1.3]
//! #[StartTime: 1764525123.456 (seconds since epoch)]
//! #[BaseTime: 1764525123.456 (seconds since epoch)]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! 0.000,1.000,0.512,HISTFAAAA...
//! ```
//!
//! Invariants:
//! - values are microseconds (said in the header), the total latency of each completed
//!   request as the report's percentile table counts it (from the intended send time with
//!   `--rate`); `Interval_Max` is in milliseconds (said in the header too);
//! - timestamps are seconds since the start of measurement (StartTime = BaseTime = that
//!   instant, after any warm-up); interval k covers `[k, k+1)` intervals from it;
//! - every interval up to the end is written, the last, partial one too (its length is how
//!   long it really lasted), so a run shorter than one interval still has a histogram line;
//!   the end is after the drain of a timed run, so the intervals' counts add up to the run's
//!   complete requests exactly, the drained ones included;
//! - the interval clock waits as the worker's sends do: on the timer, or spinning with
//!   `--spin` (a spinning worker fires no timer).
//!
//! Shared-nothing (`intervals.rs`): each worker records into its own interval histogram and,
//! at each interval boundary, hands a copy to the writer thread (once per interval, never per
//! request); the writer adds the workers' copies and writes a line when every worker has
//! reported that interval (or has ended before it).

use crate::intervals::Log;
use crate::measured_start::MeasuredStart;
use crate::LoadError;
use hdrhistogram::Histogram;
use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use crate::options::HdrLogOptions;

/// The legend line HdrHistogram's writers put before the intervals.
pub const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// The writer of `--hdr-log`: its sink takes each worker's interval histograms
/// (`Engine::take_interval`).
pub type HdrLog = Log<Histogram<u64>>;

/// Create the file and start the writer for `workers` workers; measurement starts at
/// `start`. The header goes first, written with the first interval: its StartTime is the
/// measured start, known only once the warm-up's stragglers have ended.
pub fn start(
    opts: &HdrLogOptions,
    workers: usize,
    start: Arc<MeasuredStart>,
) -> Result<HdrLog, LoadError> {
    let file_err = |source| LoadError::File {
        flag: "--hdr-log",
        path: opts.path.display().to_string(),
        source,
    };
    let file = std::fs::File::create(&opts.path).map_err(file_err)?;
    let mut out = BufWriter::new(file);
    let interval = opts.interval;
    let mut headed = false;
    let timing = (workers, start.clone(), interval);
    Log::start("--hdr-log", timing, move |span, hist| {
        // Every worker reports its last interval, so there is a first one: the start is
        // published by then (a worker reports after it measured), else the run stopped
        // during its warm-up and the planned start is all there is.
        if !std::mem::replace(&mut headed, true) {
            out.write_all(header(start.wall(), interval).as_bytes())?;
        }
        // The last interval lasted until the run ended (after its drain).
        let length = span.end.saturating_sub(span.from);
        out.write_all(interval_line(span.from, length, hist).as_bytes())?;
        out.flush()
    })
    .map_err(file_err)
}

/// The header: format version, what the values are, StartTime and BaseTime, the legend.
pub fn header(started: SystemTime, interval: Duration) -> String {
    let t = started
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    format!(
        "#[Histogram log format version 1.3]\n\
         #[loader interval log: latency of each complete request (from the intended send time \
         with --rate), {} intervals]\n\
         #[Values in microseconds (us); Interval_Max in milliseconds (HistogramLogProcessor: \
         -outputValueUnitRatio 1000)]\n\
         #[StartTime: {t:.3} (seconds since epoch)]\n\
         #[BaseTime: {t:.3} (seconds since epoch)]\n\
         {LEGEND}\n",
        shared::units::format_duration(interval),
    )
}

/// One interval line: start and length in seconds, max in ms, the histogram.
pub fn interval_line(start: Duration, length: Duration, h: &Histogram<u64>) -> String {
    format!(
        "{:.3},{:.3},{:.3},{}\n",
        start.as_secs_f64(),
        length.as_secs_f64(),
        h.max() as f64 / 1000.0,
        crate::histcodec::encode_histogram(h)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = crate::stats::new_histogram();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn intervals_are_written_in_order_once_every_worker_reported_or_ended() {
        use crate::intervals::{merge, Snapshot};
        let (tx, rx) = std::sync::mpsc::channel();
        let sec = Duration::from_secs(1);
        let snap = |worker, index, values: &[u64], end, last| Snapshot {
            worker,
            index,
            counts: hist(values),
            end,
            last,
        };
        // Worker 1 ends during interval 1; worker 0 goes on into interval 2.
        tx.send(snap(0, 0, &[100, 200], sec, false)).unwrap();
        tx.send(snap(1, 0, &[300], sec, false)).unwrap();
        tx.send(snap(1, 1, &[400], sec + sec / 2, true)).unwrap();
        tx.send(snap(0, 1, &[500], 2 * sec, false)).unwrap();
        tx.send(snap(0, 2, &[1500], 2 * sec + sec / 4, true))
            .unwrap();
        drop(tx);
        let mut text = String::new();
        let written = merge(rx, 2, sec, |span, h| {
            let length = span.end.saturating_sub(span.from);
            text.push_str(&interval_line(span.from, length, h));
            Ok(())
        });
        assert_eq!(written.unwrap(), 3);
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
        let head: Vec<[&str; 3]> = lines.iter().map(|l| [l[0], l[1], l[2]]).collect();
        assert_eq!(
            head,
            [
                ["0.000", "1.000", "0.300"],
                ["1.000", "1.000", "0.500"],
                ["2.000", "0.250", "1.500"]
            ]
        );
        let counts: Vec<u64> = lines
            .iter()
            .map(|l| crate::histcodec::decode_histogram(l[3]).unwrap().len())
            .collect();
        assert_eq!(counts, [3, 2, 1]);
    }

    #[test]
    fn the_header_says_the_unit_and_the_start() {
        let t = UNIX_EPOCH + Duration::from_millis(1_764_525_123_456);
        let h = header(t, Duration::from_secs(1));
        assert!(
            h.starts_with("#[Histogram log format version 1.3]\n"),
            "{h}"
        );
        assert!(
            h.contains("#[StartTime: 1764525123.456 (seconds since epoch)]\n"),
            "{h}"
        );
        assert!(
            h.contains("#[BaseTime: 1764525123.456 (seconds since epoch)]\n"),
            "{h}"
        );
        assert!(h.contains("Values in microseconds"), "{h}");
        assert!(h.ends_with(&format!("{LEGEND}\n")), "{h}");
    }
}
