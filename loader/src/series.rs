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
//! Shared-nothing, as `hdrlog`: each worker counts its current second in its own
//! [`SecondCounts`] and hands it to the writer thread at each boundary (once a second, never
//! per request); the writer adds the workers' seconds and writes a line when every worker has
//! reported that second (or has ended before it).

use crate::stats::SecondCounts;
use crate::worker::Engine;
use crate::LoadError;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

/// One worker's counts of one second.
struct Snapshot {
    worker: usize,
    index: u64,
    counts: SecondCounts,
    end: Instant,
    last: bool,
}

/// Where the workers' seconds go.
#[derive(Clone)]
pub struct Sink {
    tx: mpsc::Sender<Snapshot>,
    start: Instant,
}

/// The writer thread and the sink the workers clone.
pub struct Series {
    sink: Sink,
    thread: JoinHandle<std::io::Result<u64>>,
}

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

impl Series {
    /// Create the file (the CSV header first) and start the writer for `workers` workers;
    /// measurement starts at `start`.
    pub fn start(path: &PathBuf, workers: usize, start: Instant) -> Result<Series, LoadError> {
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
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("series".into())
            .spawn(move || write_seconds(rx, out, workers, start, format))
            .map_err(file_err)?;
        Ok(Series {
            sink: Sink { tx, start },
            thread,
        })
    }

    pub fn sink(&self) -> Sink {
        self.sink.clone()
    }

    /// Wait for the writer once every worker has ended; the number of lines written.
    pub fn finish(self, path: &Path) -> Result<u64, String> {
        drop(self.sink);
        match self.thread.join() {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(format!("--series {}: {e}", path.display())),
            Err(_) => Err(format!("--series {}: the writer failed", path.display())),
        }
    }
}

/// One second's line: `length` is how long the second really lasted (1 s but for the last).
pub fn line(format: Format, end: Duration, length: Duration, c: &SecondCounts) -> String {
    let ms = |us: u64| us as f64 / 1000.0;
    let q = |h: &hdrhistogram::Histogram<u64>, q: f64| {
        if h.is_empty() {
            0.0
        } else {
            ms(h.value_at_quantile(q))
        }
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

/// Seconds received from some workers, not yet written.
struct Pending {
    counts: SecondCounts,
    reports: usize,
    end: Instant,
}

/// The writer thread: add the workers' seconds, write each once every worker has reported it
/// or ended before it; at the end write what is left.
fn write_seconds(
    rx: mpsc::Receiver<Snapshot>,
    mut out: BufWriter<std::fs::File>,
    workers: usize,
    start: Instant,
    format: Format,
) -> std::io::Result<u64> {
    let mut pending: BTreeMap<u64, Pending> = BTreeMap::new();
    let mut last: Vec<Option<u64>> = vec![None; workers];
    let mut written = 0u64;
    let mut write = |k: u64, p: &Pending| -> std::io::Result<()> {
        let from = Duration::from_secs(k);
        let end = p.end.saturating_duration_since(start).max(from);
        out.write_all(line(format, end, end - from, &p.counts).as_bytes())?;
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
        match pending.get_mut(&s.index) {
            Some(p) => {
                p.counts.add(&s.counts);
                p.reports += 1;
                p.end = p.end.max(s.end);
            }
            None => {
                let p = Pending {
                    counts: s.counts,
                    reports: 1,
                    end: s.end,
                };
                pending.insert(s.index, p);
            }
        }
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

/// One worker's handle: its sender, dropped by [`WorkerSeries::last`].
pub struct WorkerSeries {
    tx: RefCell<Option<mpsc::Sender<Snapshot>>>,
    worker: usize,
    next: Cell<u64>,
    start: Instant,
}

impl Sink {
    pub fn for_worker(&self, worker: usize) -> Rc<WorkerSeries> {
        Rc::new(WorkerSeries {
            tx: RefCell::new(Some(self.tx.clone())),
            worker,
            next: Cell::new(0),
            start: self.start,
        })
    }
}

impl WorkerSeries {
    fn send(&self, s: Snapshot) -> bool {
        match &*self.tx.borrow() {
            Some(tx) => tx.send(s).is_ok(),
            None => false,
        }
    }

    /// The worker's second clock: at each boundary, hand this worker's second to the writer,
    /// until [`WorkerSeries::last`] has been called.
    pub async fn tick(self: Rc<Self>, w: Rc<Engine>) {
        loop {
            let k = self.next.get();
            let at = self.start + Duration::from_secs(k + 1);
            crate::pace::pause_until(at, w.spin).await;
            if self.tx.borrow().is_none() {
                return;
            }
            let Some(counts) = w.take_second() else {
                return;
            };
            self.next.set(k + 1);
            let snap = Snapshot {
                worker: self.worker,
                index: k,
                counts,
                end: at,
                last: false,
            };
            if !self.send(snap) {
                return;
            }
        }
    }

    /// The worker has ended: its last, partial second; the sender is dropped.
    pub fn last(&self, w: &Engine) {
        if let Some(counts) = w.take_second() {
            self.send(Snapshot {
                worker: self.worker,
                index: self.next.get(),
                counts,
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
}
