//! The engine's entry point: [`run`] spawns the pinned workers, splits connections and `-n`
//! among them, ends the run (deadline, quota or Ctrl-C), and merges what they measured.
//!
//! Exactness of `-n`: each worker gets a fixed quota up front (the shares of its connections)
//! and takes tickets from a local counter, so N attempts are made, no more, with no shared
//! counter. The k-th attempt of a worker goes to URL `(base + k) % urls`, `base` being the
//! attempts of the workers before it: together the workers walk one round-robin sequence, so
//! every URL gets its exact share.
//!
//! `-d`: at the deadline no new attempt starts and the attempts in flight are abandoned
//! (wrk's semantics: neither completed nor failed; counted as `abandoned`). The same happens
//! on Ctrl-C. A `-n` run without `-d` lets every attempt finish (or time out).
//!
//! `--warmup`: attempts started during the warm-up are never counted, even when they complete
//! after it; the figures start from zero when it ends and `-n` counts from there.

use crate::conn::{self, micros, Cut, Entry, Guarded, Response, Slot};
use crate::plan::{build_requests, split, Request, Schedule};
use crate::srcaddr::{self, Rotation};
use crate::stats::{
    record, Counts, Histograms, LiveCounters, LoadMode, Measurements, RunResult, UrlResult,
    UrlStats,
};
use crate::{LoadError, RunOptions};
use shared::http::head::RequestMethod;
use shared::http::Limits;
use shared::runtime::{select_driver, spawn_workers, WorkerCtx};
use shared::shutdown::{Shutdown, ShutdownFlag};
use std::cell::{Cell, RefCell};
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

/// How an attempt ended without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    Connect,
    Read,
    Write,
    Timeout,
    Parse,
    /// In flight when the run ended (deadline or Ctrl-C): not a failure, not counted.
    Abandoned,
}

impl Fail {
    /// A distinct bit per kind (for [`Engine::log_first`]).
    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The right to make one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// Index of its URL.
    pub url: usize,
    /// Counted in the figures (false during --warmup).
    pub measured: bool,
}

/// One worker's engine state, shared by its connection slots (single thread: Cell/RefCell).
pub struct Engine {
    /// Request bytes per URL: this worker's own copy.
    pub requests: Vec<Vec<u8>>,
    pub methods: Vec<RequestMethod>,
    pub max_request_len: usize,
    /// Read buffer size per connection.
    pub read_buf: usize,
    /// Requests in flight per connection.
    pub depth: usize,
    pub close: bool,
    pub timeout: Duration,
    pub limits: Limits,
    plan: Arc<Vec<Request>>,
    stats: RefCell<Measurements>,
    live: Arc<LiveCounters>,
    quota: Option<u64>,
    base: u64,
    issued: Cell<u64>,
    warm_issued: Cell<u64>,
    stopped: Cell<bool>,
    measuring: Cell<bool>,
    rate: bool,
    accept_variable_length: bool,
    /// First body length per URL, cached from the plan's shared value.
    doc_len: Vec<Cell<Option<u64>>>,
    server_seen: Vec<Cell<bool>>,
    sources: Vec<IpAddr>,
    /// Per URL: connects are spread over `sources`.
    spread: Vec<bool>,
    rotation: RefCell<Rotation>,
    /// Failure kinds (bits of [`Fail::bit`]) whose first occurrence this worker has logged.
    logged: Cell<u8>,
}

impl Engine {
    #[inline]
    pub fn is_stopped(&self) -> bool {
        self.stopped.get()
    }

    /// The next attempt, or None when the quota is spent or the run is ending.
    #[inline]
    pub fn take_ticket(&self) -> Option<Ticket> {
        if self.stopped.get() {
            return None;
        }
        let n = self.requests.len() as u64;
        if self.measuring.get() {
            let i = self.issued.get();
            if self.quota.is_some_and(|q| i >= q) {
                return None;
            }
            self.issued.set(i + 1);
            let url = ((self.base + i) % n) as usize;
            self.stats.borrow_mut().urls[url].counts.attempts += 1;
            Some(Ticket {
                url,
                measured: true,
            })
        } else {
            let i = self.warm_issued.get();
            self.warm_issued.set(i + 1);
            Some(Ticket {
                url: ((self.base + i) % n) as usize,
                measured: false,
            })
        }
    }

    /// Count an attempt that ended without a response.
    pub fn fail(&self, e: &Entry, why: Fail) {
        if why != Fail::Abandoned {
            self.live.errors.incr();
        }
        if !e.measured {
            return;
        }
        let mut st = self.stats.borrow_mut();
        let c = &mut st.urls[e.url].counts;
        match why {
            Fail::Connect => c.failures.connect += 1,
            Fail::Read => c.failures.read += 1,
            Fail::Write => c.failures.write += 1,
            Fail::Timeout => c.failures.timeout += 1,
            Fail::Parse => c.failures.parse += 1,
            Fail::Abandoned => c.abandoned += 1,
        }
    }

    /// Count a complete response. `t_first`: arrival of its first byte; `t_done`: of its last.
    #[inline]
    pub fn complete(
        &self,
        e: &Entry,
        resp: &Response,
        connect_us: u64,
        t_first: Instant,
        t_done: Instant,
    ) {
        self.live.completed.incr();
        let doc = match self.doc_len[e.url].get() {
            Some(d) => d,
            None => {
                let d = *self.plan[e.url]
                    .document_length
                    .get_or_init(|| resp.body_len);
                self.doc_len[e.url].set(Some(d));
                d
            }
        };
        if !e.measured {
            return;
        }
        let total_us = micros(t_done.saturating_duration_since(e.intended));
        let mut st = self.stats.borrow_mut();
        let st = &mut *st;
        record(&mut st.hist.total, total_us);
        if self.rate {
            record(
                &mut st.hist.uncorrected,
                micros(t_done.saturating_duration_since(e.start)),
            );
        }
        record(&mut st.hist.connect, connect_us);
        record(&mut st.hist.processing, total_us.saturating_sub(connect_us));
        record(
            &mut st.hist.waiting,
            micros(t_first.saturating_duration_since(e.sent)),
        );
        let u = &mut st.urls[e.url];
        u.latency.record(total_us);
        let c = &mut u.counts;
        c.completed += 1;
        c.count_status(resp.status);
        if !(200..300).contains(&resp.status) {
            c.non_2xx += 1;
        }
        // ab's "Keep-Alive requests": responses after which the connection stayed open for
        // the next request (the first response on each connection included), not reuses.
        if resp.keep_alive && !self.close {
            c.keep_alive += 1;
        }
        c.bytes_received += resp.wire_len;
        c.body_bytes += resp.body_len;
        if doc != resp.body_len && !self.accept_variable_length {
            c.failures.length += 1;
        }
    }

    /// Say on stderr why the first failure of this kind happened (the report only counts
    /// them: "Connect: 1422" does not tell "refused" from "too many open files"). Once per
    /// kind per process: a worker-local bit first, then a process-wide one (an atomic
    /// touched only on a worker's first failure of a kind, never on the request path).
    pub fn log_first(&self, why: Fail, what: std::fmt::Arguments<'_>) {
        static LOGGED: AtomicU8 = AtomicU8::new(0);
        let bit = why.bit();
        if self.logged.get() & bit != 0 {
            return;
        }
        self.logged.set(self.logged.get() | bit);
        if LOGGED.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            eprintln!("loader: {what} (further such failures are counted, not logged)");
        }
    }

    /// A connection was opened in `connect_us`.
    pub fn connected(&self, connect_us: u64) {
        if self.measuring.get() {
            let mut st = self.stats.borrow_mut();
            st.connections_opened += 1;
            record(&mut st.hist.connect_per_connection, connect_us);
        }
    }

    /// The request of `e` was written.
    #[inline]
    pub fn sent(&self, e: &Entry) {
        if e.measured {
            let n = self.requests[e.url].len() as u64;
            self.stats.borrow_mut().urls[e.url].counts.bytes_sent += n;
        }
    }

    /// Remember the first Server header seen for `url` (only the first response is looked at).
    pub fn note_server(&self, url: usize, headers: &[httparse::Header<'_>]) {
        if self.server_seen[url].replace(true) {
            return;
        }
        let slot = &self.plan[url].server;
        if slot.get().is_some() {
            return;
        }
        if let Some(h) = headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("server"))
        {
            let _ = slot.set(String::from_utf8_lossy(h.value).into_owned());
        }
    }

    /// The server of `url`.
    #[inline]
    pub fn plan_addr(&self, url: usize) -> SocketAddr {
        self.plan[url].target.addr
    }

    /// Where to connect for `url`, and from which source address.
    pub fn connect_target(&self, url: usize) -> (SocketAddr, Option<IpAddr>) {
        let dst = self.plan[url].target.addr;
        if !self.spread[url] {
            return (dst, None);
        }
        let Some(i) = self.rotation.borrow_mut().next_index() else {
            return (dst, None);
        };
        if self.measuring.get() {
            self.stats.borrow_mut().sources_used[i] = true;
        }
        (dst, Some(self.sources[i]))
    }

    fn start_measuring(&self) {
        if !self.stopped.get() {
            self.stats.borrow_mut().reset();
            self.measuring.set(true);
        }
    }
}

/// What the main thread hands each worker.
struct WorkerPlan {
    /// Global indices of this worker's connections.
    slots: std::ops::Range<usize>,
    quota: Option<u64>,
    base: u64,
    live: Arc<LiveCounters>,
    tx: mpsc::Sender<WorkerDone>,
    common: Arc<Common>,
}

/// Read-only, the same for all workers.
struct Common {
    opts: RunOptions,
    plan: Arc<Vec<Request>>,
    measure_start: Instant,
    deadline: Option<Instant>,
    sources: Vec<IpAddr>,
}

struct WorkerDone {
    stats: Measurements,
    ended: Instant,
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
    mut tick: impl FnMut(Duration, &[Arc<LiveCounters>]),
) -> Result<RunResult, LoadError> {
    opts.validate()?;
    let nofile = shared::net::raise_nofile_limit();
    let n_workers = opts.runtime.workers.min(opts.connections).max(1);
    let mut cfg = opts.runtime.clone();
    cfg.workers = n_workers;
    let driver = select_driver(&cfg)?;
    let plan = Arc::new(build_requests(opts));
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
    let deadline = opts.deadline().map(|d| measure_start + d);
    let common = Arc::new(Common {
        opts: opts.clone(),
        plan: plan.clone(),
        measure_start,
        deadline,
        sources,
    });
    // Connections, then -n shares per connection, summed per worker.
    let conns = split(opts.connections as u64, n_workers);
    let per_conn = opts.requests.map(|n| split(n, opts.connections));
    let (tx, rx) = mpsc::channel();
    let mut lives = Vec::with_capacity(n_workers);
    let mut items = Vec::with_capacity(n_workers);
    let (mut first, mut base) = (0usize, 0u64);
    for &c in &conns {
        let slots = first..first + c as usize;
        let quota = per_conn
            .as_ref()
            .map(|q| q[slots.clone()].iter().sum::<u64>());
        let live = Arc::new(LiveCounters::default());
        lives.push(live.clone());
        items.push(WorkerPlan {
            slots: slots.clone(),
            quota,
            base,
            live,
            tx: tx.clone(),
            common: common.clone(),
        });
        first = slots.end;
        base += quota.unwrap_or(0);
    }
    drop(tx);
    let started = SystemTime::now() + warmup;
    let workers = spawn_workers(&cfg, driver, stop.clone(), "loader", items, |ctx, item| {
        run_worker(ctx, item)
    })?;
    let pinning = workers.describe_pinning();
    if !opts.quiet {
        eprintln!(
            "loader: {pinning}, driver {driver}, open files {nofile}; {} connections, {}",
            opts.connections,
            describe_load(opts)
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
            tick(t_start.elapsed(), &lives);
            next_tick += Duration::from_secs(1);
        }
    }
    workers.join()?;
    Ok(merge(
        opts,
        &plan,
        done,
        measure_start,
        started,
        driver,
        n_workers,
        pinning,
        &stop,
        common.sources.len(),
    ))
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

#[allow(clippy::too_many_arguments)]
fn merge(
    opts: &RunOptions,
    plan: &[Request],
    done: Vec<WorkerDone>,
    measure_start: Instant,
    started: SystemTime,
    driver: shared::runtime::DriverKind,
    workers: usize,
    pinning: String,
    stop: &ShutdownFlag,
    n_sources: usize,
) -> RunResult {
    let mut urls = vec![UrlStats::default(); plan.len()];
    let mut hist = Histograms::default();
    let mut connections_opened = 0;
    let mut sources_used = vec![false; n_sources];
    let mut ended = measure_start;
    for d in &done {
        for (acc, u) in urls.iter_mut().zip(&d.stats.urls) {
            acc.counts.add(&u.counts);
            acc.latency.add(&u.latency);
        }
        hist.add(&d.stats.hist);
        connections_opened += d.stats.connections_opened;
        for (a, &b) in sources_used.iter_mut().zip(&d.stats.sources_used) {
            *a |= b;
        }
        ended = ended.max(d.ended);
    }
    if opts.rate.is_none() {
        hist.uncorrected = hist.total.clone();
    }
    let elapsed = ended.saturating_duration_since(measure_start);
    let mut totals = Counts::default();
    let url_results: Vec<UrlResult> = plan
        .iter()
        .zip(urls)
        .map(|(r, u)| {
            totals.add(&u.counts);
            let mut counts = u.counts;
            counts.status.sort_unstable();
            UrlResult {
                url: r.target.url.clone(),
                host: r.target.host.clone(),
                port: r.target.port,
                path: r.target.path.clone(),
                document_length: r.document_length.get().copied(),
                server_software: r.server.get().cloned(),
                counts,
                latency: u.latency,
            }
        })
        .collect();
    RunResult {
        started,
        ended: started + elapsed,
        elapsed,
        warmup: opts.warmup,
        interrupted: stop.is_set(),
        concurrency: opts.connections,
        pipeline: opts.pipeline,
        keep_alive: !opts.close,
        http10: opts.http10,
        method: opts.method.clone(),
        mode: match opts.rate {
            Some(target) => LoadMode::Rate { target },
            None => LoadMode::ClosedLoop,
        },
        workers,
        driver,
        pinning,
        server_software: url_results.iter().find_map(|u| u.server_software.clone()),
        urls: url_results,
        totals,
        hist,
        connections_opened,
        source_addresses: sources_used.iter().filter(|&&b| b).count(),
        accept_variable_length: opts.accept_variable_length,
        sends_body: opts.body.is_some(),
    }
}

async fn run_worker(ctx: WorkerCtx, item: WorkerPlan) {
    let WorkerPlan {
        slots,
        quota,
        base,
        live,
        tx,
        common,
    } = item;
    let opts = &common.opts;
    let plan = common.plan.clone();
    let n_urls = plan.len();
    let requests: Vec<Vec<u8>> = plan.iter().map(|r| r.bytes.to_vec()).collect();
    let rotation = Rotation::new(common.sources.len(), ctx.id);
    let w = Rc::new(Engine {
        max_request_len: requests.iter().map(Vec::len).max().unwrap_or(0),
        read_buf: if slots.len() > conn::MANY_CONNECTIONS {
            conn::SMALL_READ_BUF
        } else {
            conn::READ_BUF
        },
        methods: plan.iter().map(|r| r.method).collect(),
        requests,
        depth: opts.pipeline,
        close: opts.close,
        timeout: opts.timeout,
        limits: Limits {
            max_headers: conn::MAX_RESPONSE_HEADERS,
            ..Limits::default()
        },
        spread: plan
            .iter()
            .map(|r| !srcaddr::source_addresses(r.target.addr, 1).is_empty())
            .collect(),
        plan,
        stats: RefCell::new(Measurements::new(n_urls, common.sources.len())),
        live,
        quota,
        base,
        issued: Cell::new(0),
        warm_issued: Cell::new(0),
        stopped: Cell::new(false),
        measuring: Cell::new(opts.warmup.is_none()),
        rate: opts.rate.is_some(),
        accept_variable_length: opts.accept_variable_length,
        doc_len: (0..n_urls).map(|_| Cell::new(None)).collect(),
        server_seen: (0..n_urls).map(|_| Cell::new(false)).collect(),
        sources: common.sources.clone(),
        rotation: RefCell::new(rotation),
        logged: Cell::new(0),
    });
    let end = Shutdown::new();
    // The end of the run: the deadline or Ctrl-C.
    let by_deadline = Rc::new(Cell::new(false));
    {
        let (w, end, sd, by_deadline) = (
            w.clone(),
            end.clone(),
            ctx.shutdown.clone(),
            by_deadline.clone(),
        );
        let deadline = common.deadline;
        monoio::spawn(async move {
            match deadline {
                Some(d) => monoio::select! {
                    _ = monoio::time::sleep_until(d.into()) => by_deadline.set(true),
                    _ = sd.wait() => {},
                },
                None => sd.wait().await,
            }
            w.stopped.set(true);
            end.fire();
        });
    }
    if opts.warmup.is_some() {
        let (w, end) = (w.clone(), end.clone());
        let at = common.measure_start;
        monoio::spawn(async move {
            monoio::select! {
                _ = monoio::time::sleep_until(at.into()) => w.start_measuring(),
                _ = end.wait() => {},
            }
        });
    }
    let now = Instant::now();
    let n = slots.len();
    // Stagger the first connects: up to 64 at once, more spread over up to 10 ms (the
    // timer's resolution is a millisecond).
    let spread_ms = if n <= 64 { 0 } else { n.div_ceil(64).min(10) };
    let rate_per_conn = opts.rate.map(|r| r / opts.connections as f64);
    let mut handles = Vec::with_capacity(n);
    let mut all = Vec::with_capacity(n);
    for (i, g) in slots.enumerate() {
        let schedule = opts.rate.zip(rate_per_conn).map(|(r, per)| {
            // wrk2: connection g's sends are offset by g/R so the total rate is smooth.
            Schedule::new(now + Duration::from_secs_f64(g as f64 / r), per)
        });
        let delay = if opts.rate.is_some() {
            Duration::ZERO
        } else {
            Duration::from_millis((i * spread_ms / n) as u64)
        };
        let slot = Rc::new(Slot::new(g, opts.pipeline, now, schedule));
        all.push(slot.clone());
        handles.push(monoio::spawn(run_slot(w.clone(), end.clone(), slot, delay)));
    }
    monoio::spawn(conn::monitor(
        Rc::new(all),
        end.clone(),
        conn::monitor_tick(opts.timeout),
    ));
    for h in handles {
        h.await;
    }
    let mut ended = Instant::now();
    if by_deadline.get() {
        if let Some(d) = common.deadline {
            ended = ended.min(d);
        }
    }
    let stats = std::mem::take(&mut *w.stats.borrow_mut());
    let _ = tx.send(WorkerDone { stats, ended });
}

async fn run_slot(w: Rc<Engine>, end: Shutdown, slot: Rc<Slot>, delay: Duration) {
    if !delay.is_zero() {
        monoio::select! {
            _ = monoio::time::sleep(delay) => {},
            _ = end.wait() => return,
        }
        slot.now.set(Instant::now());
    }
    loop {
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
                slot.fail_all(&w, why);
                slot.cut.set(None);
                slot.now.set(Instant::now());
            }
            Some(Cut::End) => {
                slot.fail_all(&w, Fail::Abandoned);
                return;
            }
        }
    }
}
