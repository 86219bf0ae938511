//! The whole run: [`run`] spawns the pinned workers (each a `worker`), splits connections and
//! `-n` among them, ends the run (deadline, quota or Ctrl-C), and merges what they measured.
//!
//! Exactness of `-n`: each worker gets a fixed quota up front (the shares of its connections)
//! and takes tickets from a local counter, so N attempts are made, no more, with no shared
//! counter. The k-th attempt of a worker goes to URL `(base + k) % urls`, `base` being the
//! attempts of the workers before it: together the workers walk one round-robin sequence, so
//! every URL gets its exact share. With `--shard`, `base` starts at the shard's first request
//! in the whole load (the parts of the shards before it): the shards' walks are one too.
//!
//! `-d`: at the deadline no new attempt starts, and the attempts in flight are drained: each
//! worker waits up to `--timeout` for their answers (less when nothing is left in flight),
//! counts and records them like any other, and counts what is still unanswered then as failed
//! ("unanswered at end"). wrk abandons them instead, which drops exactly the requests that
//! waited longest (the tail goes missing) and leaves its counts below the server's. Ctrl-C
//! stops the same way (a second Ctrl-C exits at once). The load period, which the rates are
//! computed over, ends at the stop; the drain is reported apart. A `-n` run lets every
//! attempt finish (or time out).
//!
//! `--warmup`: attempts started during the warm-up are never counted, even when they complete
//! after it. When its time is over no warm-up attempt starts, and the measured run starts when
//! the last warm-up attempt of every worker has ended (a slow server's stragglers are not
//! charged to it), at one instant for all workers ([`MeasuredStart`]): the figures
//! start from zero then, `-n` counts from there, `-d` and the `--rate` schedule run from there.

mod sum;

use crate::conn::{self, Cut, Guarded, Slot};
use crate::measured_start::MeasuredStart;
use crate::pace;
use crate::plan::{build_requests, split, Request, Schedule};
use crate::srcaddr;
use crate::stats::{Drain, LiveCounters, Measurements, RunResult};
use crate::tls::WorkerTls;
use crate::worker::{Engine, Fail, Tickets};
use crate::{LoadError, RunOptions};
use shared::runtime::{select_driver, spawn_workers, DriverKind, WorkerCtx};
use shared::shutdown::{Shutdown, ShutdownFlag};
use shared::tls::ClientTls;
use std::cell::Cell;
use std::net::IpAddr;
use std::ops::Range;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};
use sum::{merge, sum_workers, RunFacts};

/// One worker's part of the run: its connections and its share of `-n`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Share {
    /// Global indices of this worker's connections.
    slots: Range<usize>,
    /// Measured attempts it makes (`-n`); `None`: until the run ends.
    quota: Option<u64>,
    /// The quotas of the workers before it: where its walk over the URLs starts.
    base: u64,
}

/// Connections split among `workers`, then `-n` split per connection and summed per worker,
/// so every connection does its even part and the workers' quotas add up to `requests`. The
/// workers' walks over the URLs follow each other from `start` (a shard's place in the whole
/// load's walk: [`crate::shard::Shard::first_request`]; 0 unsharded).
fn shares(connections: usize, workers: usize, requests: Option<u64>, start: u64) -> Vec<Share> {
    let per_conn = requests.map(|n| split(n, connections));
    let mut out = Vec::with_capacity(workers);
    let (mut first, mut base) = (0usize, start);
    for c in split(connections as u64, workers) {
        let slots = first..first + c as usize;
        let quota = per_conn
            .as_ref()
            .map(|q| q[slots.clone()].iter().sum::<u64>());
        first = slots.end;
        out.push(Share { slots, quota, base });
        base += quota.unwrap_or(0);
    }
    out
}

/// What the main thread hands each worker.
struct WorkerPlan {
    share: Share,
    /// `https://`: the worker's own TLS client (own session store).
    tls: Option<WorkerTls>,
    live: Arc<LiveCounters>,
    tx: mpsc::Sender<WorkerDone>,
    common: Arc<Common>,
}

/// Read-only, the same for all workers.
struct Common {
    opts: RunOptions,
    plan: Arc<Vec<Request>>,
    /// The warm-up's planned end (the run's start without one).
    warmup_end: Instant,
    /// The measured run's start, one for all workers.
    start: Arc<MeasuredStart>,
    /// `-d`: from the measured start.
    duration: Option<Duration>,
    sources: Vec<IpAddr>,
    /// Ctrl-C, read directly by a `--spin` worker (whose timers, and so the runtime's own
    /// watch of this flag, never fire).
    stop: Arc<ShutdownFlag>,
    /// `--hdr-log`: where each worker's interval histograms go.
    hdr: Option<crate::intervals::Sink<hdrhistogram::Histogram<u64>>>,
    /// `--series`: where each worker's seconds go.
    series: Option<crate::intervals::Sink<crate::stats::SecondCounts>>,
}

struct WorkerDone {
    stats: Measurements,
    /// The end of the load period: the stop, or the last response of a `-n` run.
    ended: Instant,
    /// The drain after a stop.
    drain: Option<Drain>,
}

/// Run the load described by `opts` (blocking). `stop` ends it early (Ctrl-C): the result
/// then covers what was done.
pub fn run(opts: &RunOptions, stop: Arc<ShutdownFlag>) -> Result<RunResult, LoadError> {
    run_with_progress(opts, stop, |_, _| {})
}

/// [`run`], calling `tick(elapsed, live)` on this thread about once a second while the
/// workers run, with one [`LiveCounters`] per worker (for the live progress line). `elapsed`
/// counts from the start of the load (warm-up included).
pub fn run_with_progress(
    opts: &RunOptions,
    stop: Arc<ShutdownFlag>,
    tick: impl FnMut(Duration, &[Arc<LiveCounters>]),
) -> Result<RunResult, LoadError> {
    opts.validate()?;
    let nofile = shared::net::raise_nofile_limit();
    let n_workers = opts.runtime.workers.min(opts.connections).max(1);
    let mut cfg = opts.runtime.clone();
    cfg.workers = n_workers;
    if opts.spin {
        // io_uring's fast setup posts completions when the thread enters the kernel to wait
        // for them, which a spinning thread never does: its connects would never complete.
        // epoll is polled (without waiting) on every turn of the runtime.
        cfg.driver = shared::runtime::DriverChoice::Epoll;
    }
    let driver = select_driver(&cfg)?;
    let mut reqs = build_requests(opts);
    crate::plan::settle_addresses(&mut reqs);
    let plan = Arc::new(reqs);
    let sources = if opts.close {
        plan.iter()
            .map(|r| srcaddr::source_addresses(r.target.addr, opts.source_addresses))
            .find(|s| !s.is_empty())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let t_start = Instant::now();
    let warmup = opts.warmup.unwrap_or_default();
    let measure_start = t_start + warmup;
    let started = SystemTime::now() + warmup;
    let measured = Arc::new(MeasuredStart::new(
        measure_start,
        started,
        n_workers,
        opts.warmup.is_some(),
    ));
    let hdr = opts
        .hdr_log
        .as_ref()
        .map(|h| crate::hdrlog::start(h, n_workers, measured.clone()))
        .transpose()?;
    let series = opts
        .series
        .as_ref()
        .map(|p| crate::series::start(p, n_workers, measured.clone()))
        .transpose()?;
    let common = Arc::new(Common {
        opts: opts.clone(),
        plan: plan.clone(),
        warmup_end: measure_start,
        start: measured.clone(),
        duration: opts.deadline(),
        sources,
        stop: stop.clone(),
        hdr: hdr.as_ref().map(|h| h.sink()),
        series: series.as_ref().map(|s| s.sink()),
    });
    let (tx, rx) = mpsc::channel();
    let lives: Vec<Arc<LiveCounters>> = (0..n_workers).map(|_| Arc::default()).collect();
    let mut tls = worker_tls(opts, n_workers)?.into_iter();
    let start = opts
        .shard
        .map_or(0, |s| s.shard.first_request(s.requests_total));
    let items: Vec<WorkerPlan> = shares(opts.connections, n_workers, opts.requests, start)
        .into_iter()
        .zip(&lives)
        .map(|(share, live)| WorkerPlan {
            share,
            tls: tls.next().flatten(),
            live: live.clone(),
            tx: tx.clone(),
            common: common.clone(),
        })
        .collect();
    drop(tx);
    let workers = spawn_workers(&cfg, driver, stop.clone(), "loader", items, run_worker)?;
    let pinning = workers.describe_pinning();
    announce(opts, (&pinning, &workers.pin_why), driver, nofile);
    let done = collect(&rx, n_workers, t_start, &lives, tick);
    workers.join()?;
    // The warm-up's stragglers moved the measured run's start, every worker's alike.
    let measure_start = measured.or_planned();
    let facts = RunFacts {
        measure_start,
        started: measured.wall(),
        driver,
        workers: n_workers,
        pinning,
        interrupted: stop.is_set(),
    };
    let summed = sum_workers(&done, plan.len(), common.sources.len(), measure_start);
    drop(common);
    if let (Some(h), Some(o)) = (hdr, &opts.hdr_log) {
        // A log that could not be written in full does not cost the run's report.
        if let Err(e) = h.finish(&o.path) {
            eprintln!("loader: error: {e}: the interval log is incomplete");
        }
    }
    if let (Some(s), Some(path)) = (series, &opts.series) {
        if let Err(e) = s.finish(path) {
            eprintln!("loader: error: {e}: the series is incomplete");
        }
    }
    Ok(merge(opts, &plan, summed, facts))
}

/// `https://` in the run: the trust roots loaded once (a bad `--cacert` stops the run here),
/// then one TLS client per worker. `None` for each worker when every URL is `http://`.
fn worker_tls(opts: &RunOptions, n_workers: usize) -> Result<Vec<Option<WorkerTls>>, LoadError> {
    if !opts.urls.iter().any(|u| u.tls) {
        return Ok((0..n_workers).map(|_| None).collect());
    }
    let tls = ClientTls::new(&opts.tls)?;
    (0..n_workers)
        .map(|_| Ok(Some(WorkerTls::new(&tls)?)))
        .collect()
}

/// The start-up line, and a warning when `-c` is near the open-files limit.
fn announce(opts: &RunOptions, pinning: (&str, &str), driver: DriverKind, nofile: u64) {
    if !opts.quiet {
        let (pinning, why) = pinning;
        eprintln!(
            "loader: {pinning}, driver {driver}, open files {nofile}; {} connections, {}; {why}",
            opts.connections,
            describe_load(opts)
        );
    }
    let any_tls = opts.urls.iter().any(|u| u.tls);
    if opts.tls.trust == shared::tls::Trust::Insecure && any_tls {
        eprintln!("loader: warning: --insecure: server certificates are not verified");
    }
    if opts.tls.trust != shared::tls::Trust::System && !any_tls {
        eprintln!(
            "loader: warning: --cacert and --insecure apply to https:// URLs, and every URL \
             here is http:// (a TLS server is reached with https://)"
        );
    }
    // Every connection is a descriptor; a few more are the runtime's own.
    if nofile > 0 && opts.connections as u64 + 64 > nofile {
        eprintln!(
            "loader: warning: -c {} is close to or above the open-files limit {nofile}: \
             connects beyond it fail (counted as connect failures); raise `ulimit -Hn`",
            opts.connections
        );
    }
}

/// Wait for the workers' results, calling `tick` about once a second meanwhile.
fn collect(
    rx: &mpsc::Receiver<WorkerDone>,
    n_workers: usize,
    t_start: Instant,
    lives: &[Arc<LiveCounters>],
    mut tick: impl FnMut(Duration, &[Arc<LiveCounters>]),
) -> Vec<WorkerDone> {
    let mut done: Vec<WorkerDone> = Vec::with_capacity(n_workers);
    let mut next_tick = t_start + Duration::from_secs(1);
    while done.len() < n_workers {
        let wait = next_tick
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200));
        match rx.recv_timeout(wait) {
            Ok(d) => done.push(d),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if Instant::now() >= next_tick {
            tick(t_start.elapsed(), lives);
            next_tick += Duration::from_secs(1);
        }
    }
    done
}

/// "-n 1000 to http://...", "10s at 200 req/s to 3 URLs" (for the start-up line).
fn describe_load(opts: &RunOptions) -> String {
    let mut what = Vec::new();
    if let Some(n) = opts.requests {
        what.push(format!("{n} requests"));
    }
    if let Some(d) = opts.deadline() {
        what.push(shared::units::format_duration(d));
    }
    let mut s = what.join(" or ");
    if let Some(r) = opts.rate {
        s += &format!(" at {r} req/s");
    }
    if let Some(w) = opts.warmup {
        s += &format!(" after {} of warm-up", shared::units::format_duration(w));
    }
    match opts.urls.as_slice() {
        [one] => s + &format!(" to {}", one.url),
        many => s + &format!(" to {} URLs", many.len()),
    }
}

/// A worker thread's run: its engine, the end and warm-up watchers, one task per
/// connection slot and the timeout monitor; the figures go back on `tx` when all end.
async fn run_worker(ctx: WorkerCtx, item: WorkerPlan) {
    let WorkerPlan {
        share,
        tls,
        live,
        tx,
        common,
    } = item;
    let opts = &common.opts;
    let mut tickets = Tickets::new(share.quota, share.base, common.plan.len());
    if opts.targets_order == crate::targets::TargetsOrder::Random {
        // A generator of its own for every worker of every shard: shards seeded alike drew
        // the same URLs in step.
        let shard = opts.shard.map_or(0, |s| u64::from(s.shard.index - 1));
        tickets = tickets.random((shard << 32) + ctx.id as u64 + 1);
    }
    let w = Rc::new(
        Engine::new(
            opts,
            common.plan.clone(),
            common.sources.clone(),
            share.slots.len(),
            tickets,
            live,
            ctx.id,
        )
        .with_tls(tls),
    );
    let end = Shutdown::new();
    if w.spin {
        monoio::spawn(pace::spin_ticker());
    }
    let hdr = common
        .hdr
        .as_ref()
        .map(|s| s.for_worker(ctx.id, Engine::take_interval));
    if let Some(h) = &hdr {
        monoio::spawn(h.clone().tick(w.clone()));
    }
    let series = common
        .series
        .as_ref()
        .map(|s| s.for_worker(ctx.id, Engine::take_second));
    if let Some(s) = &series {
        monoio::spawn(s.clone().tick(w.clone()));
    }
    let (handles, all) = spawn_slots(&w, &end, opts, share.slots);
    let all = Rc::new(all);
    if opts.warmup.is_some() {
        monoio::spawn(warm_up(w.clone(), end.clone(), common.clone(), all.clone()));
    }
    if share.quota.is_some() && opts.rate.is_some() {
        monoio::spawn(nudge_when_spent(w.clone(), end.clone(), all.clone()));
    }
    let stopped = watch_end(&w, &end, &ctx, &common, all.clone());
    monoio::spawn(conn::monitor(
        all,
        end.clone(),
        conn::monitor_tick(opts.timeout),
        w.spin,
    ));
    for h in handles {
        h.await;
    }
    let now = Instant::now();
    let (ended, drain) = match stopped.get() {
        Some(stop) => (
            stop.at,
            Some(Drain {
                in_flight: stop.in_flight,
                took: now.saturating_duration_since(stop.at),
            }),
        ),
        None => (now, None),
    };
    // After the drain: the last interval holds the drained responses too, so the log's
    // intervals add up to the run's complete requests.
    if let Some(h) = &hdr {
        h.last(&w);
    }
    if let Some(s) = &series {
        s.last(&w);
    }
    let stats = w.take_measurements();
    let _ = tx.send(WorkerDone {
        stats,
        ended,
        drain,
    });
}

/// `--warmup`: at its planned end no warm-up request starts (a connection waiting for a
/// warm-up send time stops waiting: with `--stages` it may be far off); once this worker's
/// last one has ended, it says so, and its measured run starts when every worker's has (one
/// start for all).
async fn warm_up(w: Rc<Engine>, end: Shutdown, common: Arc<Common>, slots: Rc<Vec<Rc<Slot>>>) {
    let planned = common.warmup_end;
    monoio::select! {
        _ = pace::pause_until(planned, w.spin) => w.end_warmup(),
        _ = end.wait() => return,
    }
    nudge_idle(&slots);
    monoio::select! {
        _ = w.warm_settled() => common.start.warmed(Instant::now()),
        _ = end.wait() => return,
    }
    if let Some(at) = common.start.wait(w.spin, || w.is_stopped()).await {
        w.start_measuring(at);
    }
}

/// `-n` with `--rate`: once the last ticket is taken, the connections waiting for their next
/// send time stop waiting (and end), so the run ends with its last answer, not a connection's
/// send interval later.
async fn nudge_when_spent(w: Rc<Engine>, end: Shutdown, slots: Rc<Vec<Rc<Slot>>>) {
    monoio::select! {
        _ = w.quota_spent_wait() => {},
        _ = end.wait() => return,
    }
    nudge_idle(&slots);
}

/// Wake the connections waiting for a send time (nothing in flight): the run's state changed.
fn nudge_idle(slots: &[Rc<Slot>]) {
    for s in slots.iter().filter(|s| s.inflight.borrow().is_empty()) {
        s.nudge();
    }
}

/// When and how a worker stopped sending.
#[derive(Debug, Clone, Copy)]
struct Stopped {
    /// The deadline (when it ended the run; the timer fires a little after it) or Ctrl-C.
    at: Instant,
    /// Measured attempts in flight then.
    in_flight: u64,
}

/// The end of the run: the deadline or Ctrl-C stops the tickets, counts what is in flight
/// and cuts the slots with nothing in flight (waiting for a send time); `--timeout` later
/// (the drain) fires `end`, which cuts the rest. The cell says when it stopped.
fn watch_end(
    w: &Rc<Engine>,
    end: &Shutdown,
    ctx: &WorkerCtx,
    common: &Common,
    slots: Rc<Vec<Rc<Slot>>>,
) -> Rc<Cell<Option<Stopped>>> {
    let stopped = Rc::new(Cell::new(None));
    let (w, end, sd, cell) = (
        w.clone(),
        end.clone(),
        ctx.shutdown.clone(),
        stopped.clone(),
    );
    let (duration, flag) = (common.duration, common.stop.clone());
    let timeout = common.opts.timeout;
    let warmup = common.opts.warmup.is_some();
    let start = common.start.get();
    monoio::spawn(async move {
        // After a warm-up, `-d` counts from the measured run's start, every worker's.
        let start = if warmup {
            monoio::select! {
                _ = w.measuring_started() => w.measure_started_at(),
                _ = sd.wait() => None,
            }
        } else {
            start
        };
        let deadline = duration.zip(start).map(|(d, s)| crate::plan::later(s, d));
        if let Some(d) = deadline {
            w.set_stop_at(d);
        }
        let by_deadline = if w.spin {
            spin_until_end(deadline, &flag).await
        } else {
            match deadline {
                Some(d) => monoio::select! {
                    _ = monoio::time::sleep_until(d.into()) => true,
                    _ = sd.wait() => false,
                },
                None => {
                    sd.wait().await;
                    false
                }
            }
        };
        let now = Instant::now();
        let at = match deadline {
            Some(d) if by_deadline => now.min(d),
            _ => now,
        };
        w.stop();
        let in_flight = slots.iter().map(|s| s.measured_in_flight()).sum();
        cell.set(Some(Stopped { at, in_flight }));
        for s in slots.iter() {
            if s.inflight.borrow().is_empty() {
                s.cut(Cut::End);
            }
        }
        pace::pause_until(now + timeout, w.spin).await;
        end.fire();
    });
    stopped
}

/// [`watch_end`]'s wait with `--spin`: the deadline by the clock, Ctrl-C by its flag (checked
/// every few milliseconds). Returns whether the deadline came first.
async fn spin_until_end(deadline: Option<Instant>, flag: &ShutdownFlag) -> bool {
    const CHECK: Duration = Duration::from_millis(5);
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return true;
        }
        if flag.is_set() {
            return false;
        }
        let next = deadline.map_or(now + CHECK, |d| d.min(now + CHECK));
        pace::pause_until(next, true).await;
    }
}

/// One task per connection slot, first connects staggered.
fn spawn_slots(
    w: &Rc<Engine>,
    end: &Shutdown,
    opts: &RunOptions,
    slots: Range<usize>,
) -> (Vec<monoio::task::JoinHandle<()>>, Vec<Rc<Slot>>) {
    let now = Instant::now();
    let n = slots.len();
    // Stagger the first connects: up to 64 at once, more spread over up to 10 ms (the
    // timer's resolution is a millisecond).
    let spread_ms = if n <= 64 { 0 } else { n.div_ceil(64).min(10) };
    let rate_per_conn = opts.rate.map(|r| r / opts.connections as f64);
    let shard_offset = crate::shard::schedule_offset(opts.shard);
    let mut handles = Vec::with_capacity(n);
    let mut all = Vec::with_capacity(n);
    for (i, g) in slots.enumerate() {
        let schedule = opts.rate.zip(rate_per_conn).map(|(r, per)| {
            if opts.stages.is_some() {
                // The ramp's requests dealt out round-robin over the shards, then over each
                // shard's connections: together the shards send exactly the whole ramp.
                let (i, n) = opts.shard.map_or((0, 1), |s| {
                    (u64::from(s.shard.index - 1), u64::from(s.shard.count))
                });
                let c = opts.connections as u64;
                return Schedule::ramped(now, i + n * g as u64, n * c);
            }
            let offset = shard_offset.saturating_add(crate::plan::first_offset(g, r));
            Schedule::new(now, offset, per)
        });
        let delay = if opts.rate.is_some() {
            Duration::ZERO
        } else {
            Duration::from_millis((i * spread_ms / n) as u64)
        };
        let slot = Rc::new(Slot::new(g, opts.pipeline, now, schedule));
        slot.warm_schedule.set(opts.warmup.is_some());
        all.push(slot.clone());
        handles.push(monoio::spawn(run_slot(w.clone(), end.clone(), slot, delay)));
    }
    (handles, all)
}

async fn run_slot(w: Rc<Engine>, end: Shutdown, slot: Rc<Slot>, delay: Duration) {
    if !delay.is_zero() {
        monoio::select! {
            _ = pace::pause_until(Instant::now() + delay, w.spin) => {},
            _ = end.wait() => return,
        }
        slot.now.set(Instant::now());
    }
    loop {
        if w.is_stopped() && slot.inflight.borrow().is_empty() {
            return; // stopped while it waited to start or after a timeout: nothing to drain
        }
        let drive = conn::drive(&w, &slot);
        let drive = std::pin::pin!(drive);
        let cut = Guarded {
            fut: drive,
            slot: &slot,
        }
        .await;
        match cut {
            None => return,
            Some(Cut::Timeout) => {
                // The connection was dropped with `drive`; the next attempt opens a new one.
                let why = if slot.connecting.get() {
                    Fail::Connect
                } else {
                    Fail::Timeout
                };
                if slot.handshaking.get() {
                    handshake_timed_out(&w, &slot);
                }
                slot.fail_all(&w, why);
                slot.cut.set(None);
                slot.now.set(Instant::now());
            }
            Some(Cut::End) => {
                slot.fail_all(&w, Fail::Unanswered);
                return;
            }
        }
    }
}

/// The first-failure line of a TLS handshake cut by `--timeout`: a plain-HTTP server waiting
/// for the rest of a request head (a ClientHello has no blank line) is the usual cause, and
/// sends nothing rustls could call corrupt.
fn handshake_timed_out(w: &Engine, slot: &Slot) {
    let Some(url) = slot.inflight.borrow().front().map(|e| e.url) else {
        return;
    };
    let (dst, _) = w.connect_target(url);
    w.log_first(
        Fail::Connect,
        format_args!(
            "TLS handshake with {} ({dst}) failed: timed out after {:?} with no answer to the \
             ClientHello (is the server speaking plain HTTP? try http://)",
            w.host(url),
            w.timeout
        ),
    );
}

#[cfg(test)]
mod tests;
