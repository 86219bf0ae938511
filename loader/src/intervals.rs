//! The interval logs' machinery (`--series`, `--hdr-log`), shared-nothing: each worker counts
//! its current interval in a value of its own and hands it to a writer thread at each
//! boundary (once an interval, never per request); the writer adds the workers' values of an
//! interval and writes it once every worker has reported that interval or ended before it,
//! then, at the end, whatever is left. What is counted and how a line reads is the log's own
//! (`series.rs`, `hdrlog.rs`).
//!
//! Invariants:
//! - interval k covers `[k, k+1)` intervals from the start of measurement (the measured
//!   start every worker shares, after any warm-up: `measured_start`); intervals are written in
//!   order, each exactly once;
//! - a worker's last report (the partial interval it ended in, after its drain) is its last:
//!   later intervals do not wait for it.

use crate::measured_start::MeasuredStart;
use crate::worker::Engine;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a worker counts over an interval, added up across workers by the writer.
pub trait Counts: Send + 'static {
    fn add(&mut self, other: &Self);
}

impl Counts for hdrhistogram::Histogram<u64> {
    fn add(&mut self, other: &Self) {
        // Every histogram of the loader has the same bounds: adding cannot fail.
        let _ = hdrhistogram::Histogram::add(self, other);
    }
}

/// One worker's counts of one interval.
pub(crate) struct Snapshot<T> {
    pub(crate) worker: usize,
    pub(crate) index: u64,
    pub(crate) counts: T,
    /// When it ended, from the start of measurement.
    pub(crate) end: Duration,
    /// The worker ended in this interval.
    pub(crate) last: bool,
}

/// Where one interval goes when it is written, from the start of measurement: `from` its
/// start, `end` the latest end any worker reported for it (the run's real end for the last,
/// partial one).
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub from: Duration,
    pub end: Duration,
}

/// Where the workers' intervals go.
pub struct Sink<T> {
    tx: mpsc::Sender<Snapshot<T>>,
    start: Arc<MeasuredStart>,
    interval: Duration,
}

// Not derived: that would ask `T: Clone`.
impl<T> Clone for Sink<T> {
    fn clone(&self) -> Self {
        Sink {
            tx: self.tx.clone(),
            start: self.start.clone(),
            interval: self.interval,
        }
    }
}

/// The writer thread and the sink the workers clone.
pub struct Log<T> {
    sink: Sink<T>,
    thread: JoinHandle<std::io::Result<u64>>,
    flag: &'static str,
}

impl<T: Counts> Log<T> {
    /// Start the writer (thread named after `flag`) for `workers` workers whose measurement
    /// starts at `start` (known once the warm-up is over); `write` writes one interval.
    pub fn start(
        flag: &'static str,
        (workers, start, interval): (usize, Arc<MeasuredStart>, Duration),
        write: impl FnMut(Span, &T) -> std::io::Result<()> + Send + 'static,
    ) -> std::io::Result<Log<T>> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(flag.trim_start_matches('-').into())
            .spawn(move || merge(rx, workers, interval, write))?;
        Ok(Log {
            sink: Sink {
                tx,
                start,
                interval,
            },
            thread,
            flag,
        })
    }

    pub fn sink(&self) -> Sink<T> {
        self.sink.clone()
    }

    /// Wait for the writer once every worker has ended; the number of intervals written.
    pub fn finish(self, path: &std::path::Path) -> Result<u64, String> {
        drop(self.sink);
        let flag = self.flag;
        match self.thread.join() {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(format!("{flag} {}: {e}", path.display())),
            Err(_) => Err(format!("{flag} {}: the writer failed", path.display())),
        }
    }
}

/// Intervals received from some workers, not yet written.
struct Pending<T> {
    counts: T,
    reports: usize,
    end: Duration,
}

/// The writer: add the workers' intervals, write each once every worker has reported it or
/// ended before it; at the end write what is left. The number written.
pub(crate) fn merge<T: Counts>(
    rx: mpsc::Receiver<Snapshot<T>>,
    workers: usize,
    interval: Duration,
    mut write: impl FnMut(Span, &T) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    let mut pending: BTreeMap<u64, Pending<T>> = BTreeMap::new();
    // Per worker: the index of its last snapshot, once it has sent it.
    let mut last: Vec<Option<u64>> = vec![None; workers];
    let mut written = 0u64;
    let mut out = |k: u64, p: &Pending<T>| -> std::io::Result<()> {
        let from = interval * (k as u32);
        written += 1;
        write(Span { from, end: p.end }, &p.counts)
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
            out(k, &entry.remove())?;
        }
    }
    for (k, p) in std::mem::take(&mut pending) {
        out(k, &p)?;
    }
    Ok(written)
}

/// One worker's handle: its sender (dropped by [`WorkerSink::last`]) and how it takes its
/// current interval's counts from its engine.
pub struct WorkerSink<T> {
    tx: RefCell<Option<mpsc::Sender<Snapshot<T>>>>,
    worker: usize,
    next: Cell<u64>,
    start: Arc<MeasuredStart>,
    interval: Duration,
    take: fn(&Engine) -> Option<T>,
}

impl<T: Counts> Sink<T> {
    pub fn for_worker(&self, worker: usize, take: fn(&Engine) -> Option<T>) -> Rc<WorkerSink<T>> {
        Rc::new(WorkerSink {
            tx: RefCell::new(Some(self.tx.clone())),
            worker,
            next: Cell::new(0),
            start: self.start.clone(),
            interval: self.interval,
            take,
        })
    }
}

impl<T: Counts> WorkerSink<T> {
    fn send(&self, s: Snapshot<T>) -> bool {
        match &*self.tx.borrow() {
            Some(tx) => tx.send(s).is_ok(),
            None => false,
        }
    }

    /// The worker's interval clock: from the start of measurement, at each boundary, hand
    /// this worker's interval to the writer, until [`WorkerSink::last`] has been called.
    pub async fn tick(self: Rc<Self>, w: Rc<Engine>) {
        if !w.measuring() {
            w.measuring_started().await;
        }
        // `None`: the run stopped during its warm-up; `last` says what there is.
        let Some(start) = self.start.get() else {
            return;
        };
        loop {
            let k = self.next.get();
            let since = self.interval * (k as u32 + 1);
            let at = start + since;
            // With --spin no timer of the worker fires: the wait spins too.
            crate::pace::pause_until(at, w.spin).await;
            if self.tx.borrow().is_none() {
                return;
            }
            let Some(counts) = (self.take)(&w) else {
                return;
            };
            self.next.set(k + 1);
            let snap = Snapshot {
                worker: self.worker,
                index: k,
                counts,
                end: since,
                last: false,
            };
            if !self.send(snap) {
                return;
            }
        }
    }

    /// The worker has ended: its last, partial interval; the sender is dropped.
    pub fn last(&self, w: &Engine) {
        if let Some(counts) = (self.take)(w) {
            self.send(Snapshot {
                worker: self.worker,
                index: self.next.get(),
                counts,
                end: Instant::now().saturating_duration_since(self.start.or_planned()),
                last: true,
            });
        }
        self.tx.borrow_mut().take();
    }
}
