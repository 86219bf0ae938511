//! The scriptable origin server: the far end of the proxy's tests, the ceiling in benchmarks,
//! and the engine of `loader origin`. Written once, on the same monoio runtime and codec.
//!
//! Behaviour comes from an [`OriginConfig`] and can be overridden per request by query
//! parameters (see [`script`]), so one origin serves many behaviours:
//! `/x?status=404&size=100`, `/x?chunk=10&chunk_delay=50`, `/x?abort_after=5`, `/x?hang=1`.
//!
//! # Layout
//! - [`script`]: what one response does: the config merged with the query overrides.
//! - [`conn`]: one client connection: keep-alive, pipelining, bodies, the scripted response.
//! - [`pace`]: `max_rate`, the token bucket that gives the origin a known ceiling.
//! - [`pattern`]: the deterministic body bytes tests verify.
//! - [`switch`]: a status a test changes while the origin runs, for one path.
//! - [`websocket`]: the 101 handshake's Sec-WebSocket-Accept (SHA-1 and base64).
//!
//! Counters are per worker and single-writer ([`OriginStats`]); [`Origin`] sums them.

pub mod conn;
pub mod pace;
pub mod pattern;
pub mod script;
pub mod switch;
pub mod websocket;

pub use pattern::{expected_body, PATTERN};

use crate::accept::Acceptor;
use crate::counter::Counter;
use crate::http::Limits;
use crate::net::reuseport_group;
use crate::runtime::{select_driver, spawn_workers, DriverChoice, RuntimeConfig, Workers};
use crate::shutdown::{Shutdown, ShutdownFlag};
use monoio::net::TcpStream;
use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length` (the default).
    Length,
    /// `Transfer-Encoding: chunked`, `chunk_size` payload bytes per chunk (the last may be
    /// shorter). An HTTP/1.0 client gets a close-delimited body instead.
    Chunked { chunk_size: usize },
    /// No length: the body ends when the origin closes the connection.
    Close,
}

/// What the origin does for every request (each field overridable per request, see
/// [`script`]). `Default`: 200, 64 bytes of the pattern, Content-Length framing, keep-alive.
#[derive(Debug, Clone)]
pub struct OriginConfig {
    /// Response status.
    pub status: u16,
    /// Response body length (the pattern; or ignored with `echo`).
    pub body_size: usize,
    /// Extra response headers, written as given.
    pub headers: Vec<(String, String)>,
    pub framing: Framing,
    /// Pause before the response head.
    pub delay: Duration,
    /// Pause between two chunks (chunked framing), each chunk flushed before it.
    pub chunk_delay: Duration,
    /// Close the connection after this many body payload bytes (the head is sent). For a
    /// chunked body the chunk in progress is cut and the last chunk never comes.
    pub abort_after: Option<usize>,
    /// Read the request, never answer; keep the socket open until the client closes or the
    /// origin stops.
    pub hang: bool,
    /// Read the request, then close without answering.
    pub drop: bool,
    /// Where the origin closes abnormally (`drop`, `abort_after`), send RST instead of FIN.
    /// Alone: read the request, then reset the connection.
    pub reset: bool,
    /// Response body = the raw request as received (head and body, chunk framing included).
    pub echo: bool,
    /// Answer with `Connection: close` and close.
    pub close: bool,
    /// Record every raw request received (see [`Origin::captured`]). Test use only.
    pub capture: bool,
    /// Honour the query-parameter overrides (on by default).
    pub query_overrides: bool,
    /// Request parser limits.
    pub limits: Limits,
    /// Answer at most this many requests per second per worker, queueing the rest
    /// (a token bucket, see [`pace`]): a target with a known ceiling.
    pub max_rate: Option<f64>,
    /// One path whose status a test changes while the origin runs (a health endpoint); it
    /// wins over the config's status and the query's.
    pub switch: Option<switch::StatusSwitch>,
    /// HTTPS: every connection starts with a TLS handshake (`crate::tls::server`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig {
            status: 200,
            body_size: 64,
            headers: Vec::new(),
            framing: Framing::Length,
            delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            abort_after: None,
            hang: false,
            drop: false,
            reset: false,
            echo: false,
            close: false,
            capture: false,
            query_overrides: true,
            // Roomier than any proxy's defaults, so a test of the proxy's limits is never
            // a test of the origin's; a proxy adds a few headers to what its client sent.
            limits: Limits {
                max_request_line: 1 << 20,
                max_head: 1 << 20,
                max_headers: conn::MAX_HEADERS,
                ..Limits::default()
            },
            max_rate: None,
            switch: None,
            tls: None,
        }
    }
}

/// One worker's counters: written by that worker only, read by anyone.
/// Aligned so two workers' counters never share a cache line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct OriginStats {
    /// Connections accepted.
    pub connections: Counter,
    /// Connections open now (a gauge).
    pub open: Counter,
    /// Requests whose head was received complete and well-formed (answered or not).
    pub requests: Counter,
    /// Requests received in full, head and body (the ones the origin goes on to act on).
    pub complete: Counter,
    /// Request body payload bytes received (chunk framing excluded).
    pub body_bytes: Counter,
    /// Raw requests received, when `capture` is on (malformed and truncated ones included).
    pub captured: Mutex<Vec<Vec<u8>>>,
    /// TLS handshakes completed, and how many resumed a session.
    pub tls_handshakes: Counter,
    pub tls_resumed: Counter,
}

impl OriginStats {
    pub fn new() -> Arc<Self> {
        Arc::new(OriginStats::default())
    }
}

/// Per-worker state shared by the worker's connections.
pub(crate) struct OriginWorker {
    pub cfg: OriginConfig,
    pub stats: Arc<OriginStats>,
    pub shutdown: Shutdown,
    /// The whole default response (HTTP/1.1 keep-alive, GET), serialized once, when the
    /// config's default behaviour is a plain response.
    pub prepared: Option<bytes::Bytes>,
    live: Cell<u64>,
    log: RefCell<crate::net::RateLimitedLog>,
    /// `max_rate`'s bucket, shared by the worker's connections.
    pub pacer: Option<RefCell<pace::Pacer>>,
}

impl OriginWorker {
    /// One connection: the TLS handshake first on an HTTPS origin (a failed one just ends it).
    async fn serve(self: Rc<Self>, tcp: TcpStream) {
        let _ = tcp.set_nodelay(true);
        let stream = match &self.cfg.tls {
            None => crate::stream::Stream::Plain(tcp),
            Some(tls) => match crate::stream::accept(tcp, tls.clone()).await {
                Ok(t) => {
                    self.stats.tls_handshakes.incr();
                    if t.session().handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                        self.stats.tls_resumed.incr();
                    }
                    crate::stream::Stream::Tls(Box::new(t))
                }
                Err(_) => return,
            },
        };
        conn::Conn::new(stream, self).run().await
    }
}

/// The origin's side of the accept loop: every connection in a task of its own that ends
/// when the connection does or the origin stops, whichever comes first.
impl Acceptor for OriginWorker {
    fn accepted(self: &Rc<Self>, stream: TcpStream, _peer: SocketAddr) {
        self.stats.connections.incr();
        self.live.set(self.live.get() + 1);
        self.stats.open.set(self.live.get());
        let w = self.clone();
        monoio::spawn(async move {
            let stop = w.shutdown.clone();
            monoio::select! {
                _ = w.clone().serve(stream) => {},
                _ = stop.wait() => {},
            }
            w.live.set(w.live.get() - 1);
            w.stats.open.set(w.live.get());
        });
    }

    fn failed(&self, e: &io::Error) {
        self.log
            .borrow_mut()
            .log(|n| crate::log!("origin: accept failed: {e} ({n} more suppressed)"));
    }
}

/// Serve `listener` on the current monoio runtime until `shutdown` fires, then close every
/// connection (including ones left hanging) and return. Used by [`Origin`] and by
/// `loader origin` (one call per worker, each with its own `stats`).
pub async fn serve(
    listener: monoio::net::TcpListener,
    cfg: Arc<OriginConfig>,
    stats: Arc<OriginStats>,
    shutdown: Shutdown,
) {
    let mut cfg = (*cfg).clone();
    cfg.limits.max_headers = cfg.limits.max_headers.min(conn::MAX_HEADERS);
    let prepared = conn::prepare_default(&cfg);
    let pacer = cfg.max_rate.and_then(pace::Pacer::new).map(RefCell::new);
    let worker = Rc::new(OriginWorker {
        pacer,
        cfg,
        stats,
        shutdown: shutdown.clone(),
        prepared,
        live: Cell::new(0),
        log: RefCell::new(crate::net::RateLimitedLog::new(Duration::from_secs(5))),
    });
    crate::accept::run(&listener, &shutdown, &worker).await;
    // Let every connection task see the shutdown and drop its socket (bounded wait).
    for _ in 0..200 {
        if worker.live.get() == 0 {
            break;
        }
        monoio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The driver for [`Origin`]s, probed once per process (tests start many origins).
fn driver_for_tests(rt: &RuntimeConfig) -> io::Result<crate::runtime::DriverKind> {
    static DRIVER: std::sync::OnceLock<Result<crate::runtime::DriverKind, String>> =
        std::sync::OnceLock::new();
    DRIVER
        .get_or_init(|| select_driver(rt).map_err(|e| e.to_string()))
        .clone()
        .map_err(io::Error::other)
}

/// A running origin on its own thread(s). Stops on [`Origin::stop`] or drop.
pub struct Origin {
    addr: SocketAddr,
    stats: Vec<Arc<OriginStats>>,
    flag: Arc<ShutdownFlag>,
    workers: Option<Workers>,
}

impl Origin {
    /// On 127.0.0.1 with a free port, one unpinned worker. Returns once listening.
    pub fn start(cfg: OriginConfig) -> io::Result<Origin> {
        Origin::start_on(cfg, SocketAddr::from(([127, 0, 0, 1], 0)), 1)
    }

    /// On `listen` (port 0: a free port) with `workers` unpinned workers sharing the port
    /// through SO_REUSEPORT. Returns once listening.
    pub fn start_on(cfg: OriginConfig, listen: SocketAddr, workers: usize) -> io::Result<Origin> {
        let n = workers.max(1);
        let listeners = reuseport_group(listen, n, 1024)?;
        let addr = listeners[0].local_addr()?;
        let rt = RuntimeConfig {
            workers: n,
            pin: false,
            pin_forced: false,
            driver: DriverChoice::Auto,
            entries: 256,
            multishot: true,
        };
        let driver = driver_for_tests(&rt)?;
        let stats: Vec<Arc<OriginStats>> = (0..n).map(|_| OriginStats::new()).collect();
        let items: Vec<_> = listeners.into_iter().zip(stats.iter().cloned()).collect();
        let cfg = Arc::new(cfg);
        let flag = ShutdownFlag::new();
        let workers = spawn_workers(
            &rt,
            driver,
            flag.clone(),
            "origin",
            items,
            move |ctx, (l, st)| {
                let cfg = cfg.clone();
                async move {
                    match monoio::net::TcpListener::from_std(l) {
                        Ok(l) => serve(l, cfg, st, ctx.shutdown).await,
                        Err(e) => {
                            crate::log!("origin: worker {}: cannot use listener: {e}", ctx.id)
                        }
                    }
                }
            },
        )
        .map_err(io::Error::other)?;
        Ok(Origin {
            addr,
            stats,
            flag,
            workers: Some(workers),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/path` (`path` with or without its leading slash).
    pub fn url(&self, path: &str) -> String {
        let slash = if path.starts_with('/') { "" } else { "/" };
        format!("http://{}{slash}{path}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.stats.iter().map(|s| s.connections.get()).sum()
    }

    /// Connections open now.
    pub fn open_connections(&self) -> u64 {
        self.stats.iter().map(|s| s.open.get()).sum()
    }

    /// Well-formed request heads received so far (answered or not).
    pub fn requests(&self) -> u64 {
        self.stats.iter().map(|s| s.requests.get()).sum()
    }

    /// Requests received in full (head and body) so far.
    pub fn complete_requests(&self) -> u64 {
        self.stats.iter().map(|s| s.complete.get()).sum()
    }

    /// Request body payload bytes received so far.
    pub fn body_bytes(&self) -> u64 {
        self.stats.iter().map(|s| s.body_bytes.get()).sum()
    }

    /// Every raw request received (with `capture`), worker by worker, each in arrival order.
    pub fn captured(&self) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        for s in &self.stats {
            let c = s.captured.lock().unwrap_or_else(|p| p.into_inner());
            all.extend(c.iter().cloned());
        }
        all
    }

    /// Per-worker counters (e.g. to check how connections spread over workers).
    pub fn stats(&self) -> &[Arc<OriginStats>] {
        &self.stats
    }

    /// Stop the workers (within ~50 ms), closing every connection, and wait for them.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.flag.trigger();
        if let Some(w) = self.workers.take() {
            if let Err(e) = w.join() {
                crate::log!("origin: {e}");
            }
        }
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.shutdown();
    }
}
