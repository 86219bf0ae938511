//! One worker (one thread, one runtime): the engine state its connection slots share, the
//! tickets (`-n` exactly, round-robin over the URLs), what is counted per attempt ([`Entry`],
//! [`Fail`]), and where to connect. The whole run, all workers, is `run`.
//!
//! Invariant: single-threaded (Cell/RefCell); nothing here allocates per request.

use crate::plan::Request;
use crate::srcaddr::{self, Rotation};
use crate::stats::{record, record_exact, LiveCounters, Measurements, RequestTimes};
pub use crate::tickets::{Ticket, Tickets};
use crate::tls::{server_name, HandshakeKind, WorkerTls};
use crate::RunOptions;
use rustls::pki_types::ServerName;
use shared::http::head::RequestMethod;
use shared::http::response::READER_MAX_HEADERS;
use shared::http::{HeadMemo, Limits, Response};
use std::cell::{Cell, RefCell};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Read buffer per connection (wrk uses 8 KiB; a bigger one halves the reads of a 32 KiB page).
pub const READ_BUF: usize = 16 * 1024;
/// Read buffer per connection when a worker has more than [`MANY_CONNECTIONS`]: memory stays
/// bounded (10k connections × 4 KiB = 40 MiB); a longer head grows its buffer.
pub const SMALL_READ_BUF: usize = 4 * 1024;
pub const MANY_CONNECTIONS: usize = 1024;
/// Header fields a response may have: the codec's documented limit (the shared reader's
/// stack storage).
pub const MAX_RESPONSE_HEADERS: usize = READER_MAX_HEADERS;

/// One attempt, from its ticket to its outcome.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Index of its URL.
    pub url: usize,
    /// Counted in the figures (false during --warmup).
    pub measured: bool,
    /// Where latency is measured from: the scheduled send time with --rate, else `start`.
    pub intended: Instant,
    /// When the attempt actually started (before its connect, if it opened one).
    pub start: Instant,
    /// When its bytes were handed to the socket (after the connect): ab's "Waiting" starts here.
    pub sent: Instant,
    /// It opened its connection: ab's "Connect" time is charged to it.
    pub opened: bool,
}

/// How an attempt ended without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    Connect,
    Read,
    Write,
    Timeout,
    Parse,
    /// In flight when the run stopped (deadline or Ctrl-C) and still unanswered when the
    /// drain ended.
    Unanswered,
}

impl Fail {
    /// Count one failure of this kind in `f`.
    #[inline]
    fn count(self, f: &mut crate::stats::Failures) {
        match self {
            Fail::Connect => f.connect += 1,
            Fail::Read => f.read += 1,
            Fail::Write => f.write += 1,
            Fail::Timeout => f.timeout += 1,
            Fail::Parse => f.parse += 1,
            Fail::Unanswered => f.unanswered += 1,
        }
    }

    /// A distinct bit per kind (for [`Engine::log_first`]).
    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// One worker's engine state, shared by its connection slots (single thread: Cell/RefCell).
pub struct Engine {
    /// Request bytes per URL: this worker's own copy.
    pub requests: Vec<Vec<u8>>,
    pub methods: Vec<RequestMethod>,
    /// Per URL: its method is idempotent (RFC 9110 9.2.2), so a request the server closed
    /// on before answering may be sent again.
    pub idempotent: Vec<bool>,
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
    tickets: Cell<Tickets>,
    /// Fired when the last measured ticket of `-n` is taken: a connection waiting for a send
    /// time then waits for nothing.
    spent: shared::shutdown::Shutdown,
    stopped: Cell<bool>,
    /// `-d`'s stop, once known (after the warm-up): a send due then or later is not made.
    stop_at: Cell<Option<Instant>>,
    measuring: Cell<bool>,
    /// `--warmup`: the warm-up's requests still in flight, and whether its time is over.
    warm: WarmUp,
    rate: bool,
    /// `--spin`: wait for send times by polling the clock (see [`crate::pace::pause_until`]).
    pub spin: bool,
    /// `--stages`: the ramp every connection's schedule follows.
    pub ramp: Option<crate::plan::Ramp>,
    accept_variable_length: bool,
    /// First body length per URL, cached from the plan's shared value.
    doc_len: Vec<Cell<Option<u64>>>,
    server_seen: Vec<Cell<bool>>,
    /// Per URL: the last response head read, so its repeats are read without a parse (per
    /// URL, so a head parsed for one URL has been shown to `note_server` for it).
    pub head_memos: Vec<RefCell<HeadMemo>>,
    sources: Vec<IpAddr>,
    /// Per URL: connects are spread over `sources`.
    spread: Vec<bool>,
    rotation: RefCell<Rotation>,
    /// Failure kinds (bits of [`Fail::bit`]) whose first occurrence this worker has logged.
    logged: Cell<u8>,
    /// `https://`: this worker's TLS client (set by [`Engine::with_tls`]).
    pub tls: Option<WorkerTls>,
    /// Per URL: the TLS server name (`None` for `http://`).
    names: Vec<Option<ServerName<'static>>>,
    /// An instant and the wall-clock time then: ab's `-g` start times without a clock read.
    wall_anchor: (Instant, std::time::SystemTime),
}

impl Engine {
    /// A worker's engine for `n_slots` connections, its own copy of the request bytes.
    pub fn new(
        opts: &RunOptions,
        plan: Arc<Vec<Request>>,
        sources: Vec<IpAddr>,
        n_slots: usize,
        tickets: Tickets,
        live: Arc<LiveCounters>,
        worker_id: usize,
    ) -> Engine {
        let n_urls = plan.len();
        let requests: Vec<Vec<u8>> = plan.iter().map(|r| r.bytes.to_vec()).collect();
        // Checked by `RunOptions::validate`: a name that does not parse is never connected to.
        let names = plan
            .iter()
            .map(|r| r.target.tls.then(|| server_name(&r.target.host).ok())?)
            .collect();
        let mut stats = Measurements::new(n_urls, sources.len());
        if opts.hdr_log.is_some() {
            stats.interval = Some(crate::stats::new_histogram());
        }
        stats.requests = opts.record_requests.map(Vec::with_capacity);
        if opts.series.is_some() {
            stats.second = Some(crate::stats::SecondCounts::default());
        }
        Engine {
            max_request_len: requests.iter().map(Vec::len).max().unwrap_or(0),
            read_buf: if n_slots > MANY_CONNECTIONS {
                SMALL_READ_BUF
            } else {
                READ_BUF
            },
            methods: plan.iter().map(|r| r.method).collect(),
            idempotent: plan.iter().map(|r| r.idempotent).collect(),
            requests,
            depth: opts.pipeline,
            close: opts.close,
            timeout: opts.timeout,
            limits: Limits {
                max_headers: MAX_RESPONSE_HEADERS,
                ..Limits::default()
            },
            spread: plan
                .iter()
                .map(|r| !srcaddr::source_addresses(r.target.addr, 1).is_empty())
                .collect(),
            plan,
            stats: RefCell::new(stats),
            live,
            tickets: Cell::new(tickets),
            spent: shared::shutdown::Shutdown::new(),
            stopped: Cell::new(false),
            stop_at: Cell::new(None),
            measuring: Cell::new(opts.warmup.is_none()),
            warm: WarmUp::default(),
            rate: opts.rate.is_some(),
            spin: opts.spin,
            // The whole ramp: a shard sends its own requests of it (see `run::spawn_slots`).
            ramp: opts.stages.as_ref().map(|s| crate::plan::Ramp::new(s, 1.0)),
            accept_variable_length: opts.accept_variable_length,
            doc_len: (0..n_urls).map(|_| Cell::new(None)).collect(),
            server_seen: (0..n_urls).map(|_| Cell::new(false)).collect(),
            head_memos: (0..n_urls).map(|_| RefCell::default()).collect(),
            rotation: RefCell::new(Rotation::new(sources.len(), worker_id)),
            names,
            sources,
            logged: Cell::new(0),
            tls: None,
            wall_anchor: (Instant::now(), std::time::SystemTime::now()),
        }
    }

    /// The worker's TLS client, for `https://` URLs.
    pub fn with_tls(mut self, tls: Option<WorkerTls>) -> Engine {
        self.tls = tls;
        self
    }

    /// The TLS client and server name for `url`; `None` for `http://`.
    pub fn tls_for(&self, url: usize) -> Option<(&WorkerTls, ServerName<'static>)> {
        let name = self.names[url].as_ref()?;
        Some((self.tls.as_ref()?, name.clone()))
    }

    /// Whether a connection opened for URL `a` serves URL `b`: same address and scheme, and
    /// for TLS the same server name (the certificate was checked for it).
    #[inline]
    pub fn same_connection(&self, a: usize, b: usize) -> bool {
        a == b
            || (self.plan[a].target.addr == self.plan[b].target.addr
                && self.names[a] == self.names[b])
    }

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
        let mut tickets = self.tickets.get();
        let ticket = tickets.take(self.measuring.get())?;
        self.tickets.set(tickets);
        if ticket.measured {
            if tickets.spent() {
                self.spent.fire();
            }
            let mut st = self.stats.borrow_mut();
            st.urls[ticket.url].counts.attempts += 1;
            if let Some(s) = &mut st.second {
                s.sent += 1;
            }
        } else {
            self.warm.in_flight.set(self.warm.in_flight.get() + 1);
        }
        Some(ticket)
    }

    /// `-d`: the run stops at `at`.
    pub fn set_stop_at(&self, at: Instant) {
        self.stop_at.set(Some(at));
    }

    /// A send due at `due` would be at or after `-d`'s stop: the measured window is
    /// `[start, start + d)`, so `--rate` sends rate × d (a send woken a timer tick early
    /// would go out before the stop's own timer fired).
    #[inline]
    pub fn stops_by(&self, due: Instant) -> bool {
        self.stop_at.get().is_some_and(|at| due >= at)
    }

    /// `-n`: every measured attempt has been started; no ticket is left to wait for.
    #[inline]
    pub fn quota_spent(&self) -> bool {
        self.spent.is_fired()
    }

    /// Completes when [`Engine::quota_spent`] becomes true.
    pub fn quota_spent_wait(&self) -> shared::shutdown::Wait {
        self.spent.wait()
    }

    /// Count an attempt that ended without a response.
    pub fn fail(&self, e: &Entry, why: Fail) {
        self.live.errors.incr();
        if !e.measured {
            self.warm_done();
            return;
        }
        let mut st = self.stats.borrow_mut();
        let st = &mut *st;
        why.count(&mut st.urls[e.url].counts.failures);
        if let Some(s) = &mut st.second {
            why.count(&mut s.failures);
        }
    }

    /// `e` is sent again on a new connection: the server closed before taking it.
    pub fn retried(&self, e: &Entry) {
        if e.measured {
            self.stats.borrow_mut().urls[e.url].counts.retried += 1;
        }
    }

    /// Bytes after a complete response that no request of `url`'s connection asked for.
    pub fn protocol_error(&self, url: usize) {
        if self.measuring.get() {
            self.stats.borrow_mut().urls[url].counts.protocol_errors += 1;
        }
    }

    /// `n` bytes read on a connection that no completed response counted (a failed one's,
    /// bytes nobody asked for): they were transferred all the same.
    pub fn received_unanswered(&self, url: usize, n: u64, measured: bool) {
        if measured {
            self.stats.borrow_mut().urls[url].counts.bytes_received += n;
        }
    }

    /// Whether attempts started now are counted (false during --warmup).
    pub fn measuring(&self) -> bool {
        self.measuring.get()
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
            self.warm_done();
            return;
        }
        let total_us = micros(t_done.saturating_duration_since(e.intended));
        let mut st = self.stats.borrow_mut();
        let st = &mut *st;
        let h = &mut st.hist;
        record_exact(&mut h.total, &mut h.sums.total, total_us);
        if let Some(h) = &mut st.interval {
            record(h, total_us);
        }
        if self.rate {
            let h = &mut st.hist;
            let us = micros(t_done.saturating_duration_since(e.start));
            record_exact(&mut h.uncorrected, &mut h.sums.uncorrected, us);
        }
        let h = &mut st.hist;
        record_exact(&mut h.connect, &mut h.sums.connect, connect_us);
        let processing_us = total_us.saturating_sub(connect_us);
        record_exact(&mut h.processing, &mut h.sums.processing, processing_us);
        let wait_us = micros(t_first.saturating_duration_since(e.sent));
        record_exact(&mut h.waiting, &mut h.sums.waiting, wait_us);
        if let Some(v) = &mut st.requests {
            if v.len() < v.capacity() {
                v.push(self.times_of(e, connect_us, total_us, wait_us));
            }
        }
        if let Some(s) = &mut st.second {
            s.completed += 1;
            record(&mut s.latency, total_us);
            if doc != resp.body_len && !self.accept_variable_length {
                s.failures.length += 1;
            }
        }
        let u = &mut st.urls[e.url];
        u.record(total_us);
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

    /// ab's `-g` row of a completed request.
    fn times_of(&self, e: &Entry, connect_us: u64, total_us: u64, wait_us: u64) -> RequestTimes {
        let (i0, s0) = self.wall_anchor;
        let wall = match e.start.checked_duration_since(i0) {
            Some(d) => s0 + d,
            None => s0 - i0.saturating_duration_since(e.start),
        };
        let start_unix_s = wall
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        RequestTimes {
            start_unix_s,
            connect_us,
            total_us,
            wait_us,
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
            shared::log!("loader: {what} (further such failures are counted, not logged)");
        }
    }

    /// A connection was opened: its TCP connect took `connect_us`, then its TLS handshake
    /// (`https://`) `handshake_us`.
    pub fn connected(&self, connect_us: u64, tls: Option<(u64, HandshakeKind)>) {
        if self.measuring.get() {
            let mut st = self.stats.borrow_mut();
            st.connections_opened += 1;
            let h = &mut st.hist;
            record_exact(
                &mut h.connect_per_connection,
                &mut h.sums.connect_per_connection,
                connect_us,
            );
            if let Some((handshake_us, kind)) = tls {
                let h = &mut st.hist;
                record_exact(
                    &mut h.tls_handshake,
                    &mut h.sums.tls_handshake,
                    handshake_us,
                );
                match kind {
                    HandshakeKind::Full => st.tls.full += 1,
                    HandshakeKind::Resumed => st.tls.resumed += 1,
                }
            }
        }
    }

    /// A measured send that waited for its intended time went out `late_us` after it.
    #[inline]
    pub fn sent_late(&self, late_us: u64) {
        let mut st = self.stats.borrow_mut();
        let h = &mut st.hist;
        record_exact(&mut h.send_lateness, &mut h.sums.send_lateness, late_us);
        if let Some(s) = &mut st.second {
            record(&mut s.lateness, late_us);
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

    /// Remember the first TLS session's description for `url` (once per worker and URL).
    pub fn note_tls(&self, url: usize, stream: &shared::stream::Stream) {
        let slot = &self.plan[url].tls_session;
        if slot.get().is_some() {
            return;
        }
        if let shared::stream::Stream::Tls(t) = stream {
            let _ = slot.set(crate::tls::describe(t.session()));
        }
    }

    /// The host of `url` (for messages).
    pub fn host(&self, url: usize) -> &str {
        &self.plan[url].target.host
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

    /// The run is ending: no ticket is given out any more (and nothing waits for the
    /// warm-up's end).
    pub fn stop(&self) {
        self.stopped.set(true);
        self.warm.measuring_started.fire();
    }

    /// `--hdr-log`: the current interval's histogram, the recording going on in a fresh one.
    pub fn take_interval(&self) -> Option<hdrhistogram::Histogram<u64>> {
        let mut st = self.stats.borrow_mut();
        let h = st.interval.as_mut()?;
        let copy = h.clone();
        h.reset();
        Some(copy)
    }

    /// `--series`: the current second's counts, the counting going on from zero.
    pub fn take_second(&self) -> Option<crate::stats::SecondCounts> {
        let mut st = self.stats.borrow_mut();
        let s = st.second.as_mut()?;
        let copy = s.clone();
        s.reset();
        Some(copy)
    }

    /// What this worker measured, handed back when it ends.
    pub fn take_measurements(&self) -> Measurements {
        std::mem::take(&mut *self.stats.borrow_mut())
    }

    /// The warm-up's time is over: no warm-up request starts any more. Its end
    /// ([`Engine::warm_settled`]) is when the last one in flight has ended (at once when none
    /// is), so their wait is not charged to the measured run.
    pub fn end_warmup(&self) {
        self.warm.settling.set(true);
        if self.warm.in_flight.get() == 0 {
            self.warm.settled.fire();
        }
    }

    /// Between the warm-up's time and the measured run's start: no ticket is taken.
    #[inline]
    pub fn settling(&self) -> bool {
        self.warm.settling.get()
    }

    /// Completes when the warm-up's last request has ended after its time was over.
    pub fn warm_settled(&self) -> shared::shutdown::Wait {
        self.warm.settled.wait()
    }

    /// Completes when the measured run has started (or the run stopped).
    pub fn measuring_started(&self) -> shared::shutdown::Wait {
        self.warm.measuring_started.wait()
    }

    /// When the measured run started after a warm-up (`None` without one, or not yet).
    pub fn measure_started_at(&self) -> Option<Instant> {
        self.warm.started.get()
    }

    /// A warm-up request ended.
    fn warm_done(&self) {
        let left = self.warm.in_flight.get().saturating_sub(1);
        self.warm.in_flight.set(left);
        if left == 0 && self.warm.settling.get() {
            self.warm.settled.fire();
        }
    }

    /// The measured run starts, at `at` (every worker's: `measured_start`): the figures from
    /// zero.
    pub fn start_measuring(&self, at: Instant) {
        self.warm.settling.set(false);
        if !self.stopped.get() {
            self.stats.borrow_mut().reset();
            self.measuring.set(true);
            self.warm.started.set(Some(at));
        }
        self.warm.measuring_started.fire();
    }
}

/// `--warmup`'s end, per worker: its requests in flight at the end of its time end, then the
/// measured run starts when every worker's have.
#[derive(Default)]
struct WarmUp {
    in_flight: Cell<u64>,
    settling: Cell<bool>,
    started: Cell<Option<Instant>>,
    /// The last warm-up request in flight at the end of its time has ended.
    settled: shared::shutdown::Shutdown,
    measuring_started: shared::shutdown::Shutdown,
}

/// A duration in whole microseconds, saturating (the unit of every histogram).
#[inline]
pub fn micros(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}
