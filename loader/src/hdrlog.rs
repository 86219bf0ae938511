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
//! Shared-nothing: each worker records into its own interval histogram and, at each interval
//! boundary, hands a copy to the writer thread over a channel (once per interval, never per
//! request); the writer adds the workers' copies and writes a line when every worker has
//! reported that interval (or has ended before it).

use crate::worker::Engine;
use crate::LoadError;
use hdrhistogram::Histogram;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::rc::Rc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use crate::options::HdrLogOptions;

/// The legend line HdrHistogram's writers put before the intervals.
pub const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

/// One worker's histogram of one interval.
#[derive(Debug)]
pub struct Snapshot {
    worker: usize,
    index: u64,
    hist: Histogram<u64>,
    /// When recording into it stopped: the interval's boundary, or the worker's end.
    end: Instant,
    /// The worker's last snapshot: it reports no later interval.
    last: bool,
}

/// A handle on the log: where snapshots go and when intervals fall.
#[derive(Debug, Clone)]
pub struct Sink {
    tx: mpsc::Sender<Snapshot>,
    start: Instant,
    interval: Duration,
}

/// One worker's handle: its sender, dropped by [`WorkerSink::last`] so that the writer sees
/// the end even though the worker's interval clock task is never polled again.
#[derive(Debug)]
pub struct WorkerSink {
    tx: RefCell<Option<mpsc::Sender<Snapshot>>>,
    worker: usize,
    /// The index of the interval being recorded.
    next: Cell<u64>,
    start: Instant,
    interval: Duration,
}

/// The writer thread and the sink the workers clone.
pub struct HdrLog {
    sink: Sink,
    thread: JoinHandle<std::io::Result<u64>>,
}

impl HdrLog {
    /// Create the file, write the header and start the writer for `workers` workers.
    /// Measurement starts at `start` (wall clock `started`).
    pub fn start(
        opts: &HdrLogOptions,
        workers: usize,
        start: Instant,
        started: SystemTime,
    ) -> Result<HdrLog, LoadError> {
        let file_err = |source| LoadError::File {
            flag: "--hdr-log",
            path: opts.path.display().to_string(),
            source,
        };
        let file = std::fs::File::create(&opts.path).map_err(file_err)?;
        let mut out = BufWriter::new(file);
        out.write_all(header(started, opts.interval).as_bytes())
            .and_then(|_| out.flush())
            .map_err(file_err)?;
        let (tx, rx) = mpsc::channel();
        let interval = opts.interval;
        let thread = std::thread::Builder::new()
            .name("hdr-log".into())
            .spawn(move || write_intervals(rx, out, workers, start, interval))
            .map_err(file_err)?;
        Ok(HdrLog {
            sink: Sink {
                tx,
                start,
                interval: opts.interval,
            },
            thread,
        })
    }

    pub fn sink(&self) -> Sink {
        self.sink.clone()
    }

    /// Wait for the writer once every worker has ended (and dropped its sink); the number
    /// of interval lines written.
    pub fn finish(self, path: &std::path::Path) -> Result<u64, String> {
        drop(self.sink);
        match self.thread.join() {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(format!("--hdr-log {}: {e}", path.display())),
            Err(_) => Err(format!("--hdr-log {}: the writer failed", path.display())),
        }
    }
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

/// Intervals received from some workers, not yet written.
struct Pending {
    hist: Histogram<u64>,
    reports: usize,
    end: Instant,
}

/// The writer thread: add the workers' snapshots per interval, write each interval once
/// every worker has reported it or ended before it; at the end write what is left.
fn write_intervals(
    rx: mpsc::Receiver<Snapshot>,
    mut out: BufWriter<std::fs::File>,
    workers: usize,
    start: Instant,
    interval: Duration,
) -> std::io::Result<u64> {
    let mut pending: BTreeMap<u64, Pending> = BTreeMap::new();
    // Per worker: the index of its last snapshot, once it has sent it.
    let mut last: Vec<Option<u64>> = vec![None; workers];
    let mut written = 0u64;
    let mut write = |k: u64, p: &Pending| -> std::io::Result<()> {
        let from = interval * (k as u32);
        let length = p.end.saturating_duration_since(start).saturating_sub(from);
        out.write_all(interval_line(from, length, &p.hist).as_bytes())?;
        out.flush()?;
        written += 1;
        Ok(())
    };
    while let Ok(s) = rx.recv() {
        if s.last {
            if let Some(l) = last.get_mut(s.worker) {
                *l = Some(s.index);
            }
        }
        let p = pending.entry(s.index).or_insert_with(|| Pending {
            hist: crate::stats::new_histogram(),
            reports: 0,
            end: s.end,
        });
        // Same bounds everywhere: add cannot fail.
        let _ = p.hist.add(&s.hist);
        p.reports += 1;
        p.end = p.end.max(s.end);
        while let Some(entry) = pending.first_entry() {
            let k = *entry.key();
            let gone = last.iter().filter(|l| l.is_some_and(|l| l < k)).count();
            if entry.get().reports + gone < workers {
                break;
            }
            write(k, &entry.remove())?;
        }
    }
    for (k, p) in std::mem::take(&mut pending) {
        write(k, &p)?;
    }
    out.flush()?;
    Ok(written)
}

impl Sink {
    /// Worker `worker`'s handle.
    pub fn for_worker(&self, worker: usize) -> Rc<WorkerSink> {
        Rc::new(WorkerSink {
            tx: RefCell::new(Some(self.tx.clone())),
            worker,
            next: Cell::new(0),
            start: self.start,
            interval: self.interval,
        })
    }
}

impl WorkerSink {
    /// The boundary after interval `k`.
    fn boundary(&self, k: u64) -> Instant {
        self.start + self.interval * (k as u32 + 1)
    }

    fn send(&self, s: Snapshot) -> bool {
        match &*self.tx.borrow() {
            Some(tx) => tx.send(s).is_ok(),
            None => false,
        }
    }

    /// A worker's interval clock: at each boundary, hand this worker's histogram of the
    /// interval to the writer, until [`WorkerSink::last`] has been called.
    pub async fn tick(self: Rc<Self>, w: Rc<Engine>) {
        loop {
            let k = self.next.get();
            let at = self.boundary(k);
            // With --spin no timer of the worker fires: the wait spins too.
            crate::pace::pause_until(at, w.spin).await;
            if self.tx.borrow().is_none() {
                return;
            }
            let Some(hist) = w.take_interval() else {
                return;
            };
            self.next.set(k + 1);
            let snap = Snapshot {
                worker: self.worker,
                index: k,
                hist,
                end: at,
                last: false,
            };
            if !self.send(snap) {
                return;
            }
        }
    }

    /// The worker has ended: its last, partial interval; the sender is dropped.
    pub fn last(&self, w: &Engine) {
        if let Some(hist) = w.take_interval() {
            self.send(Snapshot {
                worker: self.worker,
                index: self.next.get(),
                hist,
                end: Instant::now(),
                last: true,
            });
        }
        self.tx.borrow_mut().take();
    }
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
        let path = std::env::temp_dir().join(format!("hdrlog-unit-{}", std::process::id()));
        let out = BufWriter::new(std::fs::File::create(&path).unwrap());
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        let sec = Duration::from_secs(1);
        let snap = |worker, index, values: &[u64], end, last| Snapshot {
            worker,
            index,
            hist: hist(values),
            end,
            last,
        };
        // Worker 1 ends during interval 1; worker 0 goes on into interval 2.
        tx.send(snap(0, 0, &[100, 200], start + sec, false))
            .unwrap();
        tx.send(snap(1, 0, &[300], start + sec, false)).unwrap();
        tx.send(snap(1, 1, &[400], start + sec + sec / 2, true))
            .unwrap();
        tx.send(snap(0, 1, &[500], start + 2 * sec, false)).unwrap();
        tx.send(snap(0, 2, &[1500], start + 2 * sec + sec / 4, true))
            .unwrap();
        drop(tx);
        assert_eq!(write_intervals(rx, out, 2, start, sec).unwrap(), 3);
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
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
