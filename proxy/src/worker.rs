//! One worker's state and life: everything here belongs to one thread.
//!
//! State is in `Rc`/`RefCell`/`Cell`; no borrow is ever held across an `.await` (every
//! `borrow_mut()` below is a statement-long call). Counters are single-writer `Counter`s that
//! other threads may read.

use crate::config::Config;
use crate::generation::Generation;
use bytes::BytesMut;
use shared::counter::Counter;
use shared::net::RateLimitedLog;
use shared::runtime::WorkerCtx;
use shared::shutdown::Shutdown;
use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// Size of the buffers that carry response bodies (and request bodies being streamed).
pub const RELAY_BUF: usize = 64 * 1024;
/// Initial size of a client connection's read buffer (grows up to the head limit when needed).
pub const CLIENT_BUF: usize = 8 * 1024;
/// Relay buffers kept for reuse per worker.
const BUF_POOL_MAX: usize = 1024;
/// Initial size of a connection's head-building buffers.
pub const HEAD_BUF: usize = 1024;
/// Connection buffer sets kept for reuse per worker (a connection per request must not pay
/// three allocations).
const CONN_POOL_MAX: usize = 4096;

/// A client connection's own buffers: what it read, and the two heads it builds.
#[derive(Default)]
pub struct ConnBufs {
    pub cin: BytesMut,
    pub uout: BytesMut,
    pub cout: BytesMut,
}

/// Per-worker counters, readable from other threads. Aligned so two workers' counters never
/// share a cache line (separate allocations alone can sit side by side). The per-request ones
/// (requests, client and upstream errors, cache statuses) are fed from each request's record
/// when it ends (`ProxyWorker::tally`), nowhere else.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ProxyCounters {
    pub connections: Counter,
    pub requests: Counter,
    pub upstream_connects: Counter,
    pub accept_errors: Counter,
    pub upstream_errors: Counter,
    pub client_errors: Counter,
    /// Responses of cached routes, by `X-Cache` (collapsed requests that streamed a filling
    /// entry count as hits).
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub cache_bypasses: Counter,
    pub cache_stale: Counter,
    /// Stored entries validated with a 304 from the origin and served (`X-Cache: REVALIDATED`).
    pub cache_revalidated: Counter,
    /// Entries evicted to make room (LRU), and fills dropped (over max_object, or no room).
    pub cache_evicted: Counter,
    pub cache_dropped: Counter,
    /// Purges and invalidations received from other workers (and carried out).
    pub cache_purges_received: Counter,
    /// Health state changes applied on this worker (from its own checks or another
    /// worker's): every worker's count moves together.
    pub health_changes: Counter,
    /// TLS client handshakes completed, and how many of them resumed a session.
    pub tls_handshakes: Counter,
    pub tls_resumed: Counter,
    /// TLS client connections closed without a handshake: it failed, timed out (the header
    /// timeout), or the client spoke plain HTTP (also counted in `tls_plain_http`).
    pub tls_failed: Counter,
    pub tls_plain_http: Counter,
}

/// What one worker asks of another through the workers' inbox (`shared::inbox`).
pub enum WorkerMsg {
    /// Remove a key from this worker's response stores (a PURGE or an invalidating request
    /// on another worker).
    Purge(crate::cache::OwnedKey),
    /// A scrape (`admin`): this worker's counters and state, now.
    Snapshot(shared::inbox::Reply<crate::metrics::WorkerSnapshot>),
    /// SIGUSR1: reopen the access log file (logrotate moved it).
    ReopenLog,
    /// A server's state by active health checks changed (the checking worker tells the
    /// others, `crate::health`).
    Health(crate::health::HealthChange),
    /// A new process took the listening sockets over (`takeover.rs`): stop accepting and
    /// drain; answered once this worker is draining.
    HandOver(shared::inbox::Reply<()>),
    /// A reload: build generation `number` from `cfg` (resolved once, on the signal thread),
    /// make it current, and answer with what it carried over.
    Reload {
        number: u64,
        cfg: Arc<Config>,
        reply: shared::inbox::Reply<crate::generation::Carried>,
    },
}

/// Remove `key` from this worker's stores and tell every other worker to do the same.
/// Returns how many entries went here.
pub fn invalidate_everywhere(w: &ProxyWorker, key: &crate::cache::OwnedKey) -> usize {
    let n = invalidate_here(w, key);
    if let Some(post) = &w.post {
        for to in (0..post.workers()).filter(|&to| to != w.id) {
            let _ = post.send(to, WorkerMsg::Purge(key.clone()));
        }
    }
    n
}

fn invalidate_here(w: &ProxyWorker, key: &crate::cache::OwnedKey) -> usize {
    w.generation()
        .caches
        .iter()
        .flatten()
        .map(|s| s.borrow_mut().invalidate(key.key()))
        .sum()
}

/// The worker's inbox task: messages from other workers, until the inbox closes, the worker is
/// gone or shutdown fires. It holds the worker weakly (a task must not keep the worker's state
/// alive), and it ends at shutdown so that `run` can wait for it: a read still pending on the
/// inbox's socket when the worker's runtime is dropped left that worker thread hanging (the
/// listeners of a draining proxy stayed open in 3 of 10 runs of tests/proxy_drain.rs under
/// load).
async fn inbox(
    w: std::rc::Weak<ProxyWorker>,
    mut inbox: shared::inbox::Inbox<WorkerMsg>,
    shutdown: Shutdown,
) {
    let mut stop = shutdown.wait();
    loop {
        let msg = monoio::select! {
            m = inbox.recv() => m,
            _ = &mut stop => return,
        };
        let (Some(msg), Some(w)) = (msg, w.upgrade()) else {
            return;
        };
        match msg {
            WorkerMsg::Purge(key) => {
                invalidate_here(&w, &key);
                w.stats.cache_purges_received.incr();
            }
            WorkerMsg::Snapshot(reply) => reply.send(w.snapshot()),
            WorkerMsg::ReopenLog => w.reopen_log(),
            WorkerMsg::Health(change) => crate::health::apply(&w, &change),
            WorkerMsg::HandOver(reply) => {
                w.handover.fire();
                reply.send(());
            }
            WorkerMsg::Reload { number, cfg, reply } => {
                let prev = w.generation();
                let (next, carried) = Generation::next(&prev, number, cfg, worker_seed(w.id));
                crate::health::carry_over(&prev, &next);
                w.metrics.borrow_mut().rekey(&prev.cfg, &next.cfg);
                *w.generation.borrow_mut() = Rc::new(next);
                // The previous generation's checks end at their next tick.
                crate::health::start(&w);
                reply.send(carried);
            }
        }
    }
}

/// Makes random2 differ between workers (and stay the same across a worker's generations).
fn worker_seed(id: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15u64.wrapping_mul(id as u64 + 1)
}

pub struct ProxyWorker {
    pub id: usize,
    /// The other workers' inboxes.
    pub post: Option<shared::inbox::Post<WorkerMsg>>,
    /// The current config generation (config, router, balancers, pools, stores): see
    /// `generation.rs`. Requests take it with `generation()`.
    generation: RefCell<Rc<Generation>>,
    pub shutdown: Shutdown,
    /// Fires when a new process took the listeners over: accept loops end (after the accept
    /// in flight), connections close after their next response.
    pub handover: Shutdown,
    /// Accept loops still running.
    pub accepting: Cell<usize>,
    pub stats: Arc<ProxyCounters>,
    /// The active health checks this worker runs (`crate::health::start`).
    pub health: crate::health::Checks,
    pub errlog: RefCell<RateLimitedLog>,
    /// What requests came to (fed once per request from its record, `client::requests`),
    /// when `counting`.
    pub metrics: RefCell<crate::metrics::Metrics>,
    /// Metrics are kept: an admin listener reads them. Fixed at start (a reload does not add
    /// or remove the admin listener): without one nothing is counted, and no request pays
    /// for it.
    pub counting: bool,
    /// Requests are timed (their record's start, duration and upstream times, from the event
    /// loop's time: `shared::clock::loop_now`): for the metrics or the access log.
    pub timing: bool,
    /// The access log, when configured.
    pub access_log: Option<RefCell<crate::access_log::AccessLog>>,
    /// `{random:A-B}` in `return` templates.
    pub rng: crate::answer::Rng,
    bufs: RefCell<Vec<BytesMut>>,
    conn_bufs: RefCell<Vec<ConnBufs>>,
    /// Boxed iovec pairs for cache hits written with one `writev` (reused: a hit allocates
    /// nothing).
    #[allow(clippy::vec_box)] // each pair is handed to the runtime: its address must not move
    iovecs: RefCell<Vec<Box<[libc::iovec; 2]>>>,
    active: Cell<usize>,
    slot_waiters: RefCell<Vec<Waker>>,
}

impl ProxyWorker {
    pub fn new(id: usize, cfg: Arc<Config>, shutdown: Shutdown, stats: Arc<ProxyCounters>) -> Self {
        Self::with_post(id, cfg, shutdown, stats, None)
    }

    pub fn with_post(
        id: usize,
        cfg: Arc<Config>,
        shutdown: Shutdown,
        stats: Arc<ProxyCounters>,
        post: Option<shared::inbox::Post<WorkerMsg>>,
    ) -> Self {
        let seed = worker_seed(id);
        let counting = cfg.admin.is_some();
        ProxyWorker {
            counting,
            timing: counting || cfg.access_log.is_some(),
            id,
            post,
            metrics: RefCell::new(crate::metrics::Metrics::new(&cfg)),
            access_log: cfg
                .access_log
                .as_ref()
                .map(|l| RefCell::new(crate::access_log::AccessLog::open(l, id))),
            generation: RefCell::new(Rc::new(Generation::new(1, cfg, seed))),
            shutdown,
            handover: Shutdown::new(),
            accepting: Cell::new(0),
            stats,
            health: crate::health::Checks::default(),
            errlog: RefCell::new(RateLimitedLog::new(Duration::from_secs(5))),
            rng: crate::answer::Rng::from_entropy(id as u64),

            bufs: RefCell::new(Vec::new()),
            conn_bufs: RefCell::new(Vec::new()),
            iovecs: RefCell::new(Vec::new()),
            active: Cell::new(0),
            slot_waiters: RefCell::new(Vec::new()),
        }
    }

    /// A relay buffer with at least `RELAY_BUF` bytes of room.
    pub fn take_buf(&self) -> BytesMut {
        self.bufs
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| BytesMut::with_capacity(RELAY_BUF))
    }

    /// Give a relay buffer back for reuse.
    pub fn give_buf(&self, mut b: BytesMut) {
        b.clear();
        // Reclaims the consumed front in place (no allocation for a buffer we own alone).
        b.reserve(RELAY_BUF);
        let mut bufs = self.bufs.borrow_mut();
        if bufs.len() < BUF_POOL_MAX {
            bufs.push(b);
        }
    }

    /// Buffers for a new client connection.
    pub fn take_conn_bufs(&self) -> ConnBufs {
        self.conn_bufs
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| ConnBufs {
                cin: BytesMut::with_capacity(CLIENT_BUF),
                uout: BytesMut::with_capacity(HEAD_BUF),
                cout: BytesMut::with_capacity(HEAD_BUF),
            })
    }

    /// Give a finished connection's buffers back, unless one grew large (an upload or a
    /// re-chunked body): those are freed so idle memory stays small.
    pub fn give_conn_bufs(&self, mut b: ConnBufs) {
        if b.cin.capacity() == 0 && b.uout.capacity() == 0 && b.cout.capacity() == 0 {
            // A connection that ended waiting between requests: its set is in the pool.
            return;
        }
        let small = |x: &mut BytesMut, size: usize| {
            x.clear();
            x.reserve(size);
            x.capacity() <= 2 * size && x.capacity() >= size
        };
        if small(&mut b.cin, CLIENT_BUF)
            && small(&mut b.uout, HEAD_BUF)
            && small(&mut b.cout, HEAD_BUF)
        {
            let mut pool = self.conn_bufs.borrow_mut();
            if pool.len() < CONN_POOL_MAX {
                pool.push(b);
            }
        }
    }

    pub fn take_iovecs(&self) -> Box<[libc::iovec; 2]> {
        self.iovecs.borrow_mut().pop().unwrap_or_else(|| {
            let empty = libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            };
            Box::new([empty; 2])
        })
    }

    pub fn give_iovecs(&self, iov: Box<[libc::iovec; 2]>) {
        let mut pool = self.iovecs.borrow_mut();
        if pool.len() < CONN_POOL_MAX {
            pool.push(iov);
        }
    }

    /// Log an error line at most once per few seconds per worker (`shared::log!`: a stderr
    /// that cannot be written loses the line, it never panics the worker).
    pub fn log_error(&self, what: std::fmt::Arguments<'_>) {
        self.errlog.borrow_mut().log(|suppressed| {
            if suppressed > 0 {
                shared::log!("proxy: {what} ({suppressed} similar errors suppressed)")
            } else {
                shared::log!("proxy: {what}")
            }
        });
    }

    /// The counts of server `s` of group `g` of `gen` (a request's generation): the same
    /// server by name in the current generation when a reload came in between.
    pub fn count_server(
        &self,
        gen: &Generation,
        (g, s): (usize, usize),
        f: impl FnOnce(&mut crate::metrics::ServerCounts),
    ) {
        if !self.counting {
            return;
        }
        let at = {
            let current = self.generation.borrow();
            if Arc::ptr_eq(&gen.cfg, &current.cfg) {
                Some((g, s))
            } else {
                crate::metrics::same_server(&gen.cfg, &current.cfg, g, s)
            }
        };
        if let Some((g, s)) = at {
            if let Some(m) = self.metrics.borrow_mut().server(g, s) {
                f(m);
            }
        }
    }

    /// One more attempt for a request of group `g` of `gen` (see `count_server`).
    pub fn count_retry(&self, gen: &Generation, g: usize) {
        if !self.counting {
            return;
        }
        let at = {
            let current = self.generation.borrow();
            if Arc::ptr_eq(&gen.cfg, &current.cfg) {
                Some(g)
            } else {
                crate::metrics::same_group(&gen.cfg, &current.cfg, g)
            }
        };
        if let Some(g) = at {
            if let Some(n) = self.metrics.borrow_mut().retries.get_mut(g) {
                *n += 1;
            }
        }
    }

    /// One request ended: count it and log it.
    pub fn finish(
        &self,
        cfg: &Config,
        rec: &crate::record::Record,
        line: &crate::access_log::LogRequest,
    ) {
        self.tally(rec);
        if !self.timing {
            return;
        }
        let now = shared::clock::loop_now();
        if self.counting {
            self.count(cfg, rec, now);
        }
        if let Some(log) = &self.access_log {
            let mut log = log.borrow_mut();
            log.write(cfg, rec, line, now);
            if let Some(e) = log.take_error() {
                drop(log);
                self.log_error(format_args!("access log: lines lost: {e}"));
            }
        }
    }

    /// The worker's running totals (`stats`, read by `Running::stats`), from the record: no
    /// clock, a few single-writer counters.
    fn tally(&self, rec: &crate::record::Record) {
        use crate::cache::CacheStatus;
        let st = &self.stats;
        if rec.route.is_some() {
            st.requests.incr();
        }
        if let Some(e) = rec.fault {
            match e.fault() {
                crate::error::Fault::Client => st.client_errors.incr(),
                _ => st.upstream_errors.incr(),
            }
        }
        if let Some(s) = rec.cache {
            match s {
                CacheStatus::Hit => st.cache_hits.incr(),
                CacheStatus::Miss => st.cache_misses.incr(),
                CacheStatus::Bypass => st.cache_bypasses.incr(),
                CacheStatus::Stale => st.cache_stale.incr(),
                CacheStatus::Revalidated => st.cache_revalidated.incr(),
            }
        }
    }

    /// Count a finished request in the metrics.
    fn count(&self, cfg: &Config, rec: &crate::record::Record, now: Instant) {
        // Borrowed, not cloned: no reference count touched per request.
        let current = self.generation.borrow();
        if std::ptr::eq(cfg, &*current.cfg) {
            self.metrics.borrow_mut().record(rec, now);
        } else {
            // A request in flight across a reload: counted under the same names in the
            // generation the metrics are keyed on now.
            let mut r = *rec;
            r.route = rec
                .route
                .and_then(|i| crate::metrics::same_route(cfg, &current.cfg, i));
            r.upstream = rec.upstream.and_then(|u| {
                let (group, server) =
                    crate::metrics::same_server(cfg, &current.cfg, u.group, u.server)?;
                Some(crate::record::Served { group, server })
            });
            self.metrics.borrow_mut().record(&r, now);
        }
    }

    fn flush_log(&self) {
        if let Some(log) = &self.access_log {
            let mut log = log.borrow_mut();
            log.flush();
            if let Some(e) = log.take_error() {
                drop(log);
                self.log_error(format_args!("access log: lines lost: {e}"));
            }
        }
    }

    fn reopen_log(&self) {
        if let Some(log) = &self.access_log {
            if let Err(e) = log.borrow_mut().reopen() {
                self.log_error(format_args!("access log: {e}"));
            }
        }
    }

    /// This worker's counters and state, for a scrape.
    pub fn snapshot(&self) -> crate::metrics::WorkerSnapshot {
        use crate::metrics::{CacheState, ServerState};
        let now = Instant::now();
        let g = self.generation();
        let servers = g
            .pools
            .iter()
            .zip(&g.balancers)
            .map(|(pools, b)| {
                let b = b.borrow();
                pools
                    .iter()
                    .enumerate()
                    .map(|(s, p)| ServerState {
                        idle: p.borrow().idle() as u64,
                        busy: b.active(s),
                        up: !b.is_down(s, now),
                        health: b.health(s).name(),
                    })
                    .collect()
            })
            .collect();
        let caches = g
            .caches
            .iter()
            .map(|c| {
                c.as_ref().map(|s| {
                    let s = s.borrow();
                    let st = s.stats();
                    CacheState {
                        entries: s.len() as u64,
                        bytes: s.bytes(),
                        evicted: st.evicted,
                        dropped: st.dropped_too_large + st.dropped_no_room,
                    }
                })
            })
            .collect();
        crate::metrics::WorkerSnapshot {
            worker: self.id,
            generation: g.number,
            cfg: Some(g.cfg.clone()),
            metrics: self.metrics.borrow().clone(),
            open: self.active() as u64,
            accepted: self.stats.connections.get(),
            accept_errors: self.stats.accept_errors.get(),
            tls: {
                let st = &self.stats;
                let (all, resumed) = (st.tls_handshakes.get(), st.tls_resumed.get());
                let failed = st.tls_failed.get();
                let plain = st.tls_plain_http.get();
                // `tls_failed` counts plain HTTP too: each reason once here.
                [
                    all - resumed.min(all),
                    resumed,
                    failed - plain.min(failed),
                    plain,
                ]
            },
            servers,
            caches,
            draining: self.shutdown.is_fired(),
            access_log_dropped: self.access_log.as_ref().map_or(0, |l| l.borrow().dropped),
        }
    }

    /// The current generation; a request holds it until its exchange ends.
    pub fn generation(&self) -> Rc<Generation> {
        self.generation.borrow().clone()
    }

    /// Whether `g` is the current generation (no reference count touched).
    pub fn is_current(&self, g: &Rc<Generation>) -> bool {
        Rc::ptr_eq(g, &self.generation.borrow())
    }

    /// The current generation's connection limit for this worker.
    pub fn max_connections(&self) -> usize {
        self.generation.borrow().cfg.limits.max_connections.max(1)
    }

    /// Shutting down or handed over: responses close their connection (unless pipelined
    /// requests already wait behind them).
    pub fn draining(&self) -> bool {
        self.shutdown.is_fired() || self.handover.is_fired()
    }

    pub fn active(&self) -> usize {
        self.active.get()
    }

    /// Count a client connection in; the guard counts it out when dropped.
    pub fn enter(self: &Rc<Self>) -> ConnGuard {
        self.active.set(self.active.get() + 1);
        self.stats.connections.incr();
        ConnGuard(self.clone())
    }

    /// Completes once the worker is below its connection limit.
    pub async fn slot_free(&self) {
        let max = self.max_connections();
        poll_fn(|cx| {
            if self.active.get() < max {
                Poll::Ready(())
            } else {
                let mut w = self.slot_waiters.borrow_mut();
                if !w.iter().any(|x| x.will_wake(cx.waker())) {
                    w.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }
}

/// Counts one client connection; dropping it frees the slot and wakes a waiting accept loop.
pub struct ConnGuard(Rc<ProxyWorker>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let w = &self.0;
        w.active.set(w.active.get().saturating_sub(1));
        let waiters: Vec<Waker> = std::mem::take(&mut *w.slot_waiters.borrow_mut());
        for waker in waiters {
            waker.wake();
        }
    }
}

/// Run one worker: accept on its listeners until shutdown, then let in-flight connections
/// finish up to the shutdown deadline.
pub async fn run(
    ctx: WorkerCtx,
    cfg: Arc<Config>,
    listeners: Vec<(usize, std::net::TcpListener)>,
    stats: Arc<ProxyCounters>,
    post: shared::inbox::Post<WorkerMsg>,
) {
    let mailbox = post.inbox(ctx.id);
    let w = Rc::new(ProxyWorker::with_post(
        ctx.id,
        cfg.clone(),
        ctx.shutdown.clone(),
        stats,
        Some(post),
    ));
    // The inbox outlives shutdown until the drain ends: a scrape during the drain is
    // answered.
    let drained = Shutdown::new();
    let inbox_task = match mailbox {
        Ok(m) => Some(monoio::spawn(inbox(Rc::downgrade(&w), m, drained.clone()))),
        Err(e) => {
            shared::log!(
                "proxy: worker {}: no inbox (purges from other workers will not reach it): {e}",
                ctx.id
            );
            None
        }
    };
    let mut accepts = Vec::with_capacity(listeners.len());
    // Each with its index in `cfg.listeners` (after a takeover from a process with more
    // workers, a worker may have several sockets of one listener).
    for (i, l) in listeners {
        match monoio::net::TcpListener::from_std(l) {
            Ok(l) => {
                let tls = cfg.listeners.get(i).and_then(|l| l.tls.as_ref());
                let tls = tls.map(|t| (i, t.built.config.clone()));
                accepts.push(monoio::spawn(crate::accept::run(w.clone(), l, tls)))
            }
            Err(e) => shared::log!("proxy: worker {}: cannot use listener: {e}", ctx.id),
        }
    }
    w.accepting.set(accepts.len());
    monoio::spawn(sweep_pools(w.clone()));
    if w.access_log.is_some() {
        monoio::spawn(flush_log_tick(w.clone()));
    }
    crate::health::start(&w);
    let handed_over = monoio::select! {
        _ = ctx.shutdown.wait() => false,
        _ = w.handover.wait() => true,
    };
    if handed_over {
        drain_handed_over(&w, &ctx.shutdown).await;
    }
    for a in accepts {
        a.await;
    }
    crate::health::stopped(&w).await;
    // The accepts the loops dropped were cancelled: let the driver submit the cancels and
    // reap them before the ring goes. A pending accept left to the kernel's (asynchronous)
    // ring teardown can still take a connection after the process exited, and that
    // connection is lost; after a handover the socket lives on in the new process, so that
    // would be a client's connection.
    monoio::time::sleep(Duration::from_millis(2)).await;
    // Idle keep-alive connections close on their own when shutdown fires; the ones with a
    // request in flight get until the deadline.
    let deadline = Instant::now() + w.generation().cfg.timeouts.shutdown;
    while w.active() > 0 && Instant::now() < deadline {
        monoio::time::sleep(Duration::from_millis(5)).await;
    }
    w.flush_log();
    drained.fire();
    if let Some(t) = inbox_task {
        t.await;
    }
}

/// After a handover: wait until the accept loops ended (each after its accept in flight) and
/// every connection closed after its next response, or the shutdown timeout passed, or the
/// process is stopped; then fire the worker's shutdown, which closes what is left (idle
/// connections that sent nothing since, accepts still pending).
async fn drain_handed_over(w: &ProxyWorker, shutdown: &Shutdown) {
    let deadline = Instant::now() + w.generation().cfg.timeouts.shutdown;
    while (w.accepting.get() > 0 || w.active() > 0)
        && Instant::now() < deadline
        && !shutdown.is_fired()
    {
        monoio::time::sleep(Duration::from_millis(5)).await;
    }
    shutdown.fire();
}

/// Close idle pooled connections past their timeout, a few times per timeout (of the current
/// generation: a reload may shorten it), and expired open-file cache entries. Pools and
/// caches only an older generation still holds are dropped with it.
async fn sweep_pools(w: Rc<ProxyWorker>) {
    let mut stop = w.shutdown.wait();
    loop {
        let shortest = w
            .generation()
            .cfg
            .groups
            .iter()
            .map(|g| g.keepalive_timeout)
            .min()
            .unwrap_or(Duration::from_secs(30));
        let tick = (shortest / 4).clamp(Duration::from_millis(5), Duration::from_secs(1));
        monoio::select! {
            _ = monoio::time::sleep(tick) => {}
            _ = &mut stop => return,
        }
        let now = Instant::now();
        let g = w.generation();
        for group in &g.pools {
            for p in group {
                p.borrow_mut().sweep(now);
            }
        }
        g.statics.sweep(now);
    }
}

/// Flush the access log's buffer on a coarse tick, so a quiet proxy's lines reach the file
/// within a second (a busy one flushes by size).
async fn flush_log_tick(w: Rc<ProxyWorker>) {
    let mut stop = w.shutdown.wait();
    loop {
        monoio::select! {
            _ = monoio::time::sleep(crate::access_log::FLUSH_TICK) => {}
            _ = &mut stop => return,
        }
        w.flush_log();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ProxyError;
    use crate::record::Record;

    fn worker(extra: &str) -> ProxyWorker {
        let text = format!(
            "[[listen]]\naddr = \"127.0.0.1:8080\"\n[upstream.app]\nservers = [\"127.0.0.1:1\"]\n{extra}"
        );
        let cfg = Arc::new(crate::config::from_toml("t.toml", &text).expect("config"));
        ProxyWorker::new(0, cfg, Shutdown::new(), Arc::new(ProxyCounters::default()))
    }

    #[test]
    fn totals_come_from_the_record_and_metrics_only_with_an_admin_listener() {
        for (extra, admin) in [("", false), ("[admin]\naddr = \"127.0.0.1:9901\"\n", true)] {
            let w = worker(extra);
            assert_eq!((w.counting, w.timing), (admin, admin));
            let cfg = w.generation().cfg.clone();
            let mut rec = Record::new(std::time::Instant::now());
            rec.route = Some(0);
            rec.cache = Some(crate::cache::CacheStatus::Stale);
            rec.wrote(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
            rec.failed(ProxyError::UpstreamIo);
            w.finish(&cfg, &rec, &Default::default());
            // A request refused before routing, by the client's fault.
            let mut bad = Record::default();
            bad.failed(ProxyError::HeaderTimeout);
            w.finish(&cfg, &bad, &Default::default());
            let s = &w.stats;
            assert_eq!(s.requests.get(), 1, "{extra}");
            assert_eq!((s.upstream_errors.get(), s.client_errors.get()), (1, 1));
            assert_eq!((s.cache_stale.get(), s.cache_hits.get()), (1, 0));
            let m = w.metrics.borrow();
            let counted: u64 = m.requests.iter().flatten().sum();
            assert_eq!(counted, if admin { 2 } else { 0 }, "{extra}");
            if admin {
                assert_eq!(m.requests[1][4], 1, "route 0, 5xx");
                assert_eq!(m.requests[0][3], 1, "refused before routing: 499 is 4xx");
            }
        }
    }
}
