//! One worker's state and life: everything here belongs to one thread.
//!
//! State is in `Rc`/`RefCell`/`Cell`; no borrow is ever held across an `.await` (every
//! `borrow_mut()` below is a statement-long call). Counters are single-writer `Counter`s that
//! other threads may read.

use crate::config::{Config, GroupId, RouteId, ServerId, Table};
use crate::generation::Generation;
use shared::counter::Counter;
use shared::shutdown::Shutdown;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

mod buffers;
mod observe;
mod slots;

pub use buffers::{BufferPools, ConnBufs, RELAY_BUF};
pub use observe::{Observability, SharedLog};
use slots::ConnSlots;

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
    /// Connection tasks ended by a panic (caught: the worker and its other connections
    /// run on; `shared::contain`).
    pub panics: Counter,
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
    /// Response bodies moved with splice(2) (`splice.rs`).
    pub spliced: Counter,
    /// Connections closed at accept: their client had `[client_limits] connections` open.
    pub limited_connections: Counter,
    /// PROXY protocol listeners' connections closed without a valid header: not a header,
    /// cut short (its end or the header timeout), or nothing at all.
    pub proxy_protocol: [Counter; 3],
}

impl ProxyCounters {
    /// A PROXY protocol listener's connection closed without a valid header.
    pub fn proxy_protocol_failed(&self, fail: crate::proxy_header::Fail) {
        use crate::proxy_header::Fail;
        let i = match fail {
            Fail::Invalid(_) => 0,
            Fail::Truncated => 1,
            Fail::Nothing => 2,
        };
        self.proxy_protocol[i].incr();
    }
}

/// What one worker asks of another through the workers' inbox (`shared::inbox`).
pub enum WorkerMsg {
    /// Remove a key from this worker's response stores (a PURGE or an invalidating request
    /// on another worker).
    Purge(crate::cache::OwnedKey),
    /// A scrape (`admin`): this worker's counters and state, now.
    Snapshot(shared::inbox::Reply<crate::metrics::WorkerSnapshot>),
    /// SIGUSR1: go on in the access log's path opened again (logrotate moved the file).
    ReopenLog(crate::access_log::Reopened),
    /// A second stop signal: write out the access logs' buffers now (the process exits at
    /// once after), answered once written.
    FlushLogs(shared::inbox::Reply<()>),
    /// A server's state by active health checks changed (the checking worker tells the
    /// others, `crate::health`).
    Health(crate::balance::HealthChange),
    /// A new process took the listening sockets over (`takeover.rs`): stop accepting and
    /// drain; answered once this worker is draining.
    HandOver(shared::inbox::Reply<()>),
    /// A reload: build generation `number` from `cfg` (resolved once, on the signal thread),
    /// make it current, and answer with what it carried over. `log`: when `access_log`
    /// changed, this worker's file for it, opened by the reloader (opening is a blocking
    /// call, never made on a worker).
    Reload {
        number: u64,
        cfg: Arc<Config>,
        log: Option<std::fs::File>,
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

pub(crate) fn invalidate_here(w: &ProxyWorker, key: &crate::cache::OwnedKey) -> usize {
    w.generation()
        .stores()
        .map(|s| s.borrow_mut().invalidate(key.key()))
        .sum()
}

/// Makes random2 differ between workers (and stay the same across a worker's generations).
pub(crate) fn worker_seed(id: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15u64.wrapping_mul(id as u64 + 1)
}

/// How long a keep-alive client's frame waits for its next request before the connection
/// parks (`client::Parked`): longer than a request loop's round trip, far shorter than any
/// idle time that matters for memory. The wait takes one to two of these
/// ([`ProxyWorker::hot`], a `shared::linger::Linger`: no timer per request).
pub const HOT_WAIT: std::time::Duration = std::time::Duration::from_millis(5);

pub struct ProxyWorker {
    pub id: usize,
    /// The other workers' inboxes.
    pub post: Option<shared::inbox::Post<WorkerMsg>>,
    /// The current config generation (config, router, balancers, pools, stores): see
    /// `generation.rs`. Requests take it with `generation()`.
    generation: RefCell<Rc<Generation>>,
    /// Shutdown, handover, accept loops and check tasks: how the worker's life ends.
    pub life: Lifecycle,
    pub stats: Arc<ProxyCounters>,
    /// The error log, the metrics and the access log, and whether requests feed them.
    pub obs: Observability,
    /// `{random:A-B}` in `return` templates.
    pub rng: crate::answer::Rng,
    /// Buffers kept for reuse: relay buffers, client connections' sets, iovec pairs.
    pub buffers: BufferPools,
    /// How many more retries this worker may send upstream (`retry_budget`).
    pub retry_budget: RefCell<crate::retry_budget::RetryBudget>,
    /// Client connections open, under the connection limit, and accept loops waiting for one
    /// to close.
    slots: ConnSlots,
    /// Open connections per client address (`[client_limits] connections`).
    clients: crate::limit::ConnCounts,
    /// Keep-alive clients' short waits for their next request ([`HOT_WAIT`]): one ticker
    /// for all of them instead of a timer each.
    pub hot: shared::linger::Linger,
}

impl ProxyWorker {
    pub fn new(id: usize, cfg: Arc<Config>, shutdown: Shutdown, stats: Arc<ProxyCounters>) -> Self {
        Self::with_post(id, cfg, shutdown, stats, None, None)
    }

    /// `log`: this worker's access log file, opened by the thread that starts the workers.
    pub fn with_post(
        id: usize,
        cfg: Arc<Config>,
        shutdown: Shutdown,
        stats: Arc<ProxyCounters>,
        post: Option<shared::inbox::Post<WorkerMsg>>,
        log: Option<std::fs::File>,
    ) -> Self {
        let seed = worker_seed(id);
        let obs = Observability::new(&cfg);
        let mut first = Generation::new(1, cfg, seed);
        first.access_log = obs.open_log(&first.cfg, log);
        ProxyWorker {
            obs,
            id,
            post,
            generation: RefCell::new(Rc::new(first)),
            life: Lifecycle {
                shutdown,
                handover: Shutdown::new(),
                accepting: Cell::new(0),
                health: HealthTasks::default(),
            },
            stats,
            rng: crate::answer::Rng::from_entropy(id as u64),
            buffers: BufferPools::default(),
            retry_budget: RefCell::new(crate::retry_budget::RetryBudget::new()),
            slots: ConnSlots::default(),
            clients: crate::limit::ConnCounts::default(),
            hot: shared::linger::Linger::new(HOT_WAIT),
        }
    }

    /// The counts of server `s` of group `g` of `gen` (a request's generation): the same
    /// server by name in the current generation when a reload came in between.
    pub fn count_server(
        &self,
        gen: &Generation,
        (g, s): (GroupId, ServerId),
        f: impl FnOnce(&mut crate::metrics::ServerCounts),
    ) {
        if !self.obs.counting {
            return;
        }
        let at = self.keyed_now(&gen.cfg, (g, s), |old, new, (g, s)| {
            crate::metrics::same_server(old, new, g, s)
        });
        if let Some((g, s)) = at {
            if let Some(m) = self.obs.metrics.borrow_mut().server(g, s) {
                f(m);
            }
        }
    }

    /// One more attempt for a request of route `r` of `gen`, for `why` (see `count_server`).
    pub fn count_retry(
        &self,
        gen: &Generation,
        r: RouteId,
        why: crate::config::route_opts::RetryReason,
    ) {
        if !self.obs.counting {
            return;
        }
        if let Some(r) = self.keyed_now(&gen.cfg, r, crate::metrics::same_route) {
            if let Some(n) = self.obs.metrics.borrow_mut().retries.get_mut(r) {
                n[why.index()] += 1;
            }
        }
    }

    /// A failure answered as it was: the retry budget was spent.
    pub fn count_budget_exhausted(&self) {
        if self.obs.counting {
            self.obs.metrics.borrow_mut().retry_budget_exhausted += 1;
        }
    }

    /// One request ended: count it, and log it in its generation `g`'s log.
    pub fn finish(
        &self,
        g: &Generation,
        rec: &crate::record::Record,
        line: &crate::access_log::LogRequest,
    ) {
        self.tally(rec);
        if !self.timing(g) {
            return;
        }
        let now = shared::clock::loop_now();
        if self.obs.counting {
            self.count(&g.cfg, rec, now);
        }
        if let Some(log) = &g.access_log {
            self.obs.write_log(log, &g.cfg, rec, line, now);
        }
    }

    /// A WebSocket tunnel's request ended (closed, or cut at a stop): count it, and log it in
    /// `log`, the log of the generation its upgrade was served on (kept by the tunnel, not the
    /// generation). `held`: that generation's config and log, when it timed its requests.
    /// `received`: what the client sent past its request; the metrics count it, the log's
    /// `request_length` (nginx's `$request_length`) does not.
    pub fn finish_tunnel(
        &self,
        held: Option<&(Arc<Config>, Option<SharedLog>)>,
        rec: &crate::record::Record,
        line: &crate::access_log::LogRequest,
        received: u64,
    ) {
        self.tally(rec);
        let Some((cfg, log)) = held else {
            return;
        };
        let now = shared::clock::loop_now();
        if self.obs.counting {
            let mut counted = rec.counted();
            counted.bytes_in = counted.bytes_in.saturating_add(received);
            self.count(cfg, &counted, now);
        }
        if let Some(log) = log {
            self.obs.write_log(log, cfg, rec, line, now);
        }
    }

    /// Requests of generation `g` are timed (their record's start, duration and upstream
    /// times, from the event loop's time: `shared::clock::loop_now`): for the metrics or
    /// the access log.
    pub fn timing(&self, g: &Generation) -> bool {
        self.obs.counting || g.access_log.is_some()
    }

    /// The current generation logs its requests (a request about to start: it takes the
    /// current generation).
    pub fn logging(&self) -> bool {
        self.generation.borrow().access_log.is_some()
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
            self.obs.metrics.borrow_mut().record(rec, now);
        } else {
            let r = crate::metrics::same_record(cfg, &current.cfg, rec);
            self.obs.metrics.borrow_mut().record(&r, now);
        }
    }

    /// Ids `at` in `cfg` (a request's generation's config) in the config the metrics
    /// are keyed on now: the same when no reload came in between (no reference count
    /// touched), else what `same` finds under the same names (`None`: gone).
    fn keyed_now<T>(
        &self,
        cfg: &Config,
        at: T,
        same: impl FnOnce(&Config, &Config, T) -> Option<T>,
    ) -> Option<T> {
        let current = self.generation.borrow();
        if std::ptr::eq(cfg, &*current.cfg) {
            Some(at)
        } else {
            same(cfg, &current.cfg, at)
        }
    }

    /// This worker's counters and state, for a scrape.
    pub fn snapshot(&self) -> crate::metrics::WorkerSnapshot {
        use crate::metrics::{CacheState, ServerState};
        let now = Instant::now();
        let g = self.generation();
        let servers = g
            .balancers()
            .enumerate()
            .map(|(group, b)| {
                let b = b.borrow();
                g.pools(group)
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
        let queued = g.balancers().map(|b| b.borrow().waiting() as u64);
        let mut caches: Table<RouteId, Option<CacheState>> = g.cfg.routes.map(|_| None);
        let metrics = self.obs.metrics.borrow();
        for c in g.cached_routes() {
            let s = c.store.borrow();
            let st = s.stats();
            // What stores a reload replaced had counted goes on in the same counters.
            let ended = metrics
                .cache_ended
                .get(c.route)
                .copied()
                .unwrap_or_default();
            caches[c.route] = Some(CacheState {
                entries: s.len() as u64,
                bytes: s.bytes(),
                evicted: st.evicted + ended[0],
                dropped: st.dropped_too_large + st.dropped_no_room + ended[1],
                revalidation_errors: st.revalidation_errors + ended[2],
                revalidations_skipped: st.revalidations_skipped + ended[3],
            });
        }
        drop(metrics);
        crate::metrics::WorkerSnapshot {
            worker: self.id,
            generation: g.number,
            cfg: Some(g.cfg.clone()),
            metrics: self.obs.metrics.borrow().clone(),
            open: self.active() as u64,
            accepted: self.stats.connections.get(),
            accept_errors: self.stats.accept_errors.get(),
            panics: self.stats.panics.get(),
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
            spliced: self.stats.spliced.get(),
            limited_connections: self.stats.limited_connections.get(),
            proxy_protocol: self.stats.proxy_protocol.each_ref().map(|c| c.get()),
            servers,
            queued,
            caches,
            draining: self.life.shutdown.is_fired(),
            drained: false,
            access_log_dropped: self.obs.log_dropped.get(),
        }
    }

    /// The current generation; a request holds it until its exchange ends.
    pub fn generation(&self) -> Rc<Generation> {
        self.generation.borrow().clone()
    }

    /// Make `next` the current generation (a reload): requests in flight keep theirs.
    pub(crate) fn set_generation(&self, next: Generation) {
        *self.generation.borrow_mut() = Rc::new(next);
    }

    /// A reload's generation `number`, built from `cfg` after the current one, with its
    /// access log (`log`: see `WorkerMsg::Reload`); not yet current.
    pub(crate) fn next_generation(
        &self,
        number: u64,
        cfg: Arc<Config>,
        log: Option<std::fs::File>,
    ) -> (Generation, crate::generation::Carried) {
        let prev = self.generation();
        let (mut next, carried) = Generation::next(&prev, number, cfg, worker_seed(self.id));
        next.access_log = self.obs.log_for(&prev, &next.cfg, log);
        (next, carried)
    }

    /// Whether `g` is the current generation (no reference count touched).
    pub fn is_current(&self, g: &Rc<Generation>) -> bool {
        Rc::ptr_eq(g, &self.generation.borrow())
    }

    /// The current generation's connection limit for this worker.
    pub fn max_connections(&self) -> usize {
        self.generation.borrow().cfg.limits.max_connections.max(1)
    }

    pub fn active(&self) -> usize {
        self.slots.active()
    }

    /// Count a connection from `peer` in; the guard counts it out when dropped. `None`: the
    /// client has its `[client_limits] connections` open on this worker already (counted;
    /// the caller closes the connection without a byte, as HAProxy's `tcp-request
    /// connection reject`: an answer would cost more than the connection).
    pub fn enter(self: &Rc<Self>, peer: std::net::SocketAddr) -> Option<ConnGuard> {
        let client = self.admit(peer.ip())?;
        Some(self.guard(client))
    }

    /// A PROXY protocol listener's connection, counted in before its client is known: the
    /// TCP peer is the balancer, so the client's connection limit waits for the header
    /// ([`ProxyWorker::claim`]).
    pub fn enter_unnamed(self: &Rc<Self>) -> ConnGuard {
        self.guard(None)
    }

    /// The PROXY header named the connection's client: count it under the client's
    /// connection limit. `false`: over it (counted; the caller closes the connection).
    pub fn claim(&self, guard: &mut ConnGuard, ip: std::net::IpAddr) -> bool {
        match self.admit(ip) {
            Some(client) => {
                guard.client = client;
                true
            }
            None => false,
        }
    }

    /// `ip` under its connection limit: `Some(its key)` counted in (`Some(None)`: no limit),
    /// `None` when it has its connections open already (counted).
    fn admit(&self, ip: std::net::IpAddr) -> Option<Option<crate::limit::AddrKey>> {
        let g = self.generation.borrow();
        let Some(max) = crate::limit::connections_per_worker(&g.cfg) else {
            return Some(None);
        };
        // A `real_ip_from` peer is a balancer: its connections carry the requests of the
        // clients it names, none of them a client's own to count.
        if g.cfg.headers.real_ip_from.iter().any(|c| c.contains(ip)) {
            return Some(None);
        }
        let key = crate::limit::key_of(ip);
        if !self.clients.enter(key, max) {
            self.stats.limited_connections.incr();
            return None;
        }
        Some(Some(key))
    }

    fn guard(self: &Rc<Self>, client: Option<crate::limit::AddrKey>) -> ConnGuard {
        self.slots.enter();
        self.stats.connections.incr();
        ConnGuard {
            w: self.clone(),
            client,
        }
    }

    /// Completes once the worker is below its connection limit.
    pub async fn slot_free(&self) {
        self.slots.below(self.max_connections()).await
    }
}

/// How a worker's life ends: a shutdown (drain, then stop), or a handover to a new process.
pub struct Lifecycle {
    /// Fires when the proxy stops: accept loops end, connections drain.
    pub shutdown: Shutdown,
    /// Fires when a new process took the listeners over: accept loops end (after the accept
    /// in flight), connections close after their next response.
    pub handover: Shutdown,
    /// Accept loops still running.
    pub accepting: Cell<usize>,
    /// The active health checks this worker runs (`crate::health::start`).
    pub health: HealthTasks,
}

impl Lifecycle {
    /// Shutting down or handed over: responses close their connection (unless pipelined
    /// requests already wait behind them).
    pub fn draining(&self) -> bool {
        self.shutdown.is_fired() || self.handover.is_fired()
    }
}

/// A worker's running check tasks (those of its current generation, and one task that waits
/// for the previous generation's to end). The worker awaits them all before it ends: a check
/// left pending on a socket when the runtime is dropped could hold the worker thread (as the
/// inbox's read did).
#[derive(Default)]
pub struct HealthTasks {
    pub(crate) tasks: RefCell<Vec<monoio::task::JoinHandle<()>>>,
}

/// Counts one client connection; dropping it frees the slot and wakes a waiting accept loop
/// (and gives its client's connection back, when they are counted).
pub struct ConnGuard {
    w: Rc<ProxyWorker>,
    client: Option<crate::limit::AddrKey>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        if let Some(key) = self.client {
            self.w.clients.leave(key);
        }
        self.w.slots.leave();
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
            let g = w.generation();
            assert_eq!((w.obs.counting, w.timing(&g)), (admin, admin));
            let mut rec = Record::new(std::time::Instant::now());
            rec.route = Some(RouteId::new(0));
            rec.cache = Some(crate::cache::CacheStatus::Stale);
            rec.wrote(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
            rec.failed(ProxyError::UpstreamIo);
            w.finish(&g, &rec, &Default::default());
            // A request refused before routing, by the client's fault.
            let mut bad = Record::default();
            bad.failed(ProxyError::HeaderTimeout);
            w.finish(&g, &bad, &Default::default());
            let s = &w.stats;
            assert_eq!(s.requests.get(), 1, "{extra}");
            assert_eq!((s.upstream_errors.get(), s.client_errors.get()), (1, 1));
            assert_eq!((s.cache_stale.get(), s.cache_hits.get()), (1, 0));
            let m = w.obs.metrics.borrow();
            let counted: u64 = m.requests.iter().chain([&m.unrouted]).flatten().sum();
            assert_eq!(counted, if admin { 2 } else { 0 }, "{extra}");
            if admin {
                assert_eq!(m.requests[RouteId::new(0)][4], 1, "route 0, 5xx");
                assert_eq!(m.unrouted[3], 1, "refused before routing: 499 is 4xx");
            }
        }
    }

    /// A reload that changes the log: a request of the old generation that ends after it
    /// still writes to the old file, in the old format; the new generation's go to the new
    /// file; the old file gets its lines when its generation goes; an unchanged `access_log`
    /// keeps the log, and removing it leaves none to flush.
    #[test]
    fn each_generation_writes_to_its_own_log_and_the_old_one_closes_with_it() {
        let dir = std::env::temp_dir().join(format!("proxy-gen-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (al1, al2) = (dir.join("al1.log"), dir.join("al2.log"));
        let cfg = |log: Option<(&std::path::Path, &str)>| {
            let log = log.map_or(String::new(), |(p, f)| {
                format!(
                    "access_log = {{ path = \"{}\", format = \"{f}\" }}\n",
                    p.display()
                )
            });
            let text = format!(
                "{log}[[listen]]\naddr = \"127.0.0.1:8080\"\n[upstream.app]\nservers = [\"127.0.0.1:1\"]\n"
            );
            Arc::new(crate::config::from_toml("t.toml", &text).expect("config"))
        };
        let w = ProxyWorker::new(
            0,
            cfg(Some((&al1, "combined"))),
            Shutdown::new(),
            Arc::new(ProxyCounters::default()),
        );
        let ended = |g: &Generation, path: &str| {
            let mut rec = Record::new(std::time::Instant::now());
            rec.wrote(b"HTTP/1.1 200 OK\r\n\r\n");
            let mut line = crate::access_log::LogRequest::default();
            let ip = crate::request::IpText::new("10.0.0.1".parse().unwrap());
            line.capture(&ip, format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes());
            w.finish(g, &rec, &line);
        };
        let g1 = w.generation();
        let cfg2 = cfg(Some((&al2, "json")));
        let file = crate::access_log::open_file(cfg2.access_log.as_ref().unwrap()).unwrap();
        let (next, _) = w.next_generation(2, cfg2.clone(), Some(file));
        w.set_generation(next);
        let g2 = w.generation();
        ended(&g1, "/old");
        ended(&g2, "/new");
        let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
        assert_eq!(
            read(&al1),
            "",
            "the old log writes when its generation goes"
        );
        drop(g1);
        let old = read(&al1);
        assert!(
            old.ends_with("\"GET /old HTTP/1.1\" 200 0 \"-\" \"-\"\n"),
            "{old}"
        );
        assert_eq!(old.lines().count(), 1, "{old}");
        assert!(w.obs.flush_logs(g2.access_log.as_ref()));
        let new = read(&al2);
        let v: serde_json::Value = serde_json::from_str(new.trim_end()).expect("one JSON line");
        assert_eq!(v["request"], "GET /new HTTP/1.1");

        // The same `access_log`: the same log, no file opened.
        let (next, _) = w.next_generation(3, cfg2, None);
        let (a, b) = (next.access_log.as_ref(), g2.access_log.as_ref());
        assert!(Rc::ptr_eq(a.unwrap(), b.unwrap()));
        w.set_generation(next);
        // Removed: no log, and none left once the last request of a logging generation ends.
        let (next, _) = w.next_generation(4, cfg(None), None);
        assert!(next.access_log.is_none());
        w.set_generation(next);
        assert!(w.obs.flush_logs(None), "a request still holds generation 2");
        drop(g2);
        assert!(!w.obs.flush_logs(None));
        assert!(!w.logging());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
