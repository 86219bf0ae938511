//! The admin listener (`--admin ADDR`, `[admin] addr`): `/metrics` (Prometheus text),
//! `/status` (JSON, per worker and totals), `/healthz` (200 while serving, 503 while
//! draining). Never on the public listeners.
//!
//! One plain thread, off the workers, with a small poll(2) loop over its connections: up to
//! [`MAX_CONNS`] at once (a new one past that drops the oldest), each given [`CLIENT_TIMEOUT`]
//! for its whole request and as long again for reading the answer, so no client, however
//! slowly it sends, keeps `/healthz` from answering the next one. After the answer comes a
//! lingering close, as on the public listeners (`crate::lingering`; `[timeouts]
//! lingering_time` and `lingering_timeout` as the thread started with them): a request's
//! bytes left unread (a body, a pipelined request) never reset the connection before the
//! client read the answer. Once the process stops (a graceful stop, a takeover's drain), a
//! lingering close goes on for [`STOPPING_LINGER`] at most, as the workers' do: the stop
//! waits for requests in flight, not for admin clients still sending. A request cut at its
//! deadline after part of it came gets a 408.
//! A scrape asks every worker for its snapshot through the workers' inbox (`Post::ask_all`,
//! bounded by [`ASK_TIMEOUT`]: the only wait that holds the loop): each worker answers
//! between two of its tasks, so the answer counts every request completed before the scrape. The listener keeps answering while the workers drain
//! (`/healthz` says 503 then): a worker whose drain is over is counted by the snapshot it
//! left (`metrics::Finals`). It stops when the workers have ended.

use crate::config::Config;
use crate::exposition;
use crate::lingering::{Lingering, STOPPING_LINGER};
use crate::metrics::{Finals, WorkerSnapshot};
use crate::worker::WorkerMsg;
use shared::inbox::Post;
use shared::shutdown::ShutdownFlag;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a scrape waits for the workers.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client gets to send its whole request, and then to read the whole answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest admin request head read.
const MAX_HEAD: usize = 8 * 1024;
/// Connections served at once. A scrape or a health check takes milliseconds: only slow or
/// stalled clients grow old, and the oldest makes room for a new one.
const MAX_CONNS: usize = 32;
/// How often the thread looks at the shutdown flag while a connection lingers: the signal
/// thread sets the flag without waking this one (the workers look at it as often).
const STOP_TICK: Duration = Duration::from_millis(50);

/// What the admin thread reads.
pub struct AdminCtx {
    pub cfg: Arc<Config>,
    pub post: Post<WorkerMsg>,
    /// What a worker whose drain is over left for the scrapes.
    pub finals: Arc<Finals>,
    pub flag: Arc<ShutdownFlag>,
    /// The reloads' outcome, for `/metrics`.
    pub reload: Arc<crate::process_metrics::ReloadState>,
}

/// The running admin listener.
pub struct Admin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Written to wake the thread's poll for the stop. Not a connection to `addr`: that
    /// address is SO_REUSEPORT, and while a takeover's other process listens on it too, a
    /// connection there may reach the other process instead.
    wake: std::os::unix::net::UnixStream,
    thread: Option<JoinHandle<()>>,
    /// Until a takeover takes it (`Admin::release`).
    release: Option<Release>,
}

/// Makes the admin thread let go of its listener for good, once a takeover's new process is
/// ready: the new process accepts on the same socket (handed over with the listeners,
/// `takeover.rs`), and two processes answering one address would give a scraper each one's
/// counters in turn, read as counter resets.
pub struct Release {
    released: Arc<AtomicBool>,
    wake: std::os::unix::net::UnixStream,
    done: mpsc::Receiver<()>,
}

impl Release {
    /// Stop accepting, waiting up to `wait` for the thread to let go: a connection accepted
    /// after this returns is the new process's. The ones accepted before are still answered;
    /// the ones queued stay queued on the socket, which lives on in the new process.
    pub fn now(self, wait: Duration) {
        self.released.store(true, Ordering::SeqCst);
        let _ = std::io::Write::write(&mut &self.wake, &[1]);
        let _ = self.done.recv_timeout(wait);
    }
}

impl Admin {
    /// Serve `listener` on a thread of its own.
    pub fn start(listener: TcpListener, ctx: AdminCtx) -> std::io::Result<Admin> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let released = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = mpsc::channel();
        let (wake, woken) = std::os::unix::net::UnixStream::pair()?;
        let release = Release {
            released: released.clone(),
            wake: wake.try_clone()?,
            done,
        };
        let signals = Signals {
            stop: stop.clone(),
            woken,
            released,
            done: done_tx,
        };
        let thread = std::thread::Builder::new()
            .name("admin".into())
            .spawn(move || serve(listener, ctx, signals))?;
        Ok(Admin {
            addr,
            stop,
            wake,
            thread: Some(thread),
            release: Some(release),
        })
    }

    /// The handle that lets go of the listener (once: a process is taken over once).
    pub fn release(&mut self) -> Option<Release> {
        self.release.take()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop serving and wait for the thread.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the poll; a failed write means the thread is gone already.
        let _ = std::io::Write::write(&mut &self.wake, &[1]);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop_now();
        }
    }
}

/// What the thread is told, besides requests: stop ([`Admin::stop`]), let go of the listener
/// ([`Release`]), and a wake-up for either.
struct Signals {
    stop: Arc<AtomicBool>,
    woken: std::os::unix::net::UnixStream,
    released: Arc<AtomicBool>,
    done: mpsc::Sender<()>,
}

fn serve(listener: TcpListener, ctx: AdminCtx, signals: Signals) {
    if let Err(e) = listener.set_nonblocking(true) {
        eprintln!("proxy: admin listener: {e}; /metrics, /status and /healthz are not served");
        return;
    }
    let Signals {
        stop,
        woken,
        released,
        done,
    } = signals;
    // A wake-up byte left unread would keep the poll returning at once.
    let _ = woken.set_nonblocking(true);
    let mut listener = Some(listener);
    let mut conns: Vec<Conn> = Vec::with_capacity(MAX_CONNS);
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(MAX_CONNS + 1);
    // Set once the process stops: when every lingering close ends at the latest.
    let mut stop_by: Option<Instant> = None;
    while !stop.load(Ordering::SeqCst) {
        if listener.is_some() && released.load(Ordering::SeqCst) {
            // Closing this copy closes nothing the new process serves: it has its own.
            listener = None;
            let _ = done.send(());
        }
        let now = Instant::now();
        // A stop, or a takeover's drain once the new process took the listener.
        if stop_by.is_none() && (ctx.flag.is_set() || listener.is_none()) {
            let by = now + STOPPING_LINGER;
            stop_by = Some(by);
            conns.iter_mut().for_each(|c| c.linger_until(by));
        }
        conns.retain_mut(|c| c.in_time(now));
        fds.clear();
        // poll(2) skips a negative descriptor: the indices stay as they are.
        let l = listener.as_ref().map_or(-1, |l| l.as_raw_fd());
        fds.push(pollfd(l, libc::POLLIN));
        fds.push(pollfd(woken.as_raw_fd(), libc::POLLIN));
        fds.extend(
            conns
                .iter()
                .map(|c| pollfd(c.stream.as_raw_fd(), c.events())),
        );
        let mut wait = conns.iter().map(|c| c.deadline).min();
        if stop_by.is_none() && conns.iter().any(|c| c.lingering.is_some()) {
            wait = wait.map(|d| d.min(now + STOP_TICK));
        }
        if !poll(&mut fds, wait.map(|d| d.saturating_duration_since(now))) {
            continue;
        }
        // Connections first (their indices match `fds`, after the listener and the wake
        // socket), then the new ones.
        let mut i = 1;
        conns.retain_mut(|c| {
            i += 1;
            fds[i].revents == 0 || c.progress(&ctx, stop_by) == Step::Open
        });
        if fds[1].revents != 0 {
            let _ = (&woken).read(&mut [0u8; 16]);
        }
        if let Some(l) = listener.as_ref().filter(|_| fds[0].revents != 0) {
            accept_all(l, &mut conns);
        }
    }
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Wait for an event on `fds` for at most `wait` (`None`: until one comes). `false` when
/// nothing is to be looked at (interrupted, or failed: then after a pause, so that a
/// persistent error does not spin).
fn poll(fds: &mut [libc::pollfd], wait: Option<Duration>) -> bool {
    // Rounded up: a deadline is never looked at before it passed.
    let ms = wait.map_or(-1, |w| {
        let ms = w.as_micros().div_ceil(1000);
        libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
    });
    // SAFETY: `fds` is a valid, initialized array of `fds.len()` pollfd structs that poll(2)
    // may write `revents` into for the length of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            std::thread::sleep(Duration::from_millis(10));
        }
        return false;
    }
    true
}

/// Take every connection waiting on the listener; past [`MAX_CONNS`], the oldest goes.
fn accept_all(listener: &TcpListener, conns: &mut Vec<Conn>) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if conns.len() >= MAX_CONNS {
                    // Accepted in order: the first is the oldest.
                    conns.remove(0);
                }
                conns.push(Conn::new(stream, Instant::now()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                // EMFILE and the like: the proxy's workers are short too; try again shortly.
                std::thread::sleep(Duration::from_millis(10));
                return;
            }
        }
    }
}

/// Whether a connection stays after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Open,
    Done,
}

/// One admin connection: its request being read, then its answer being written, then its
/// lingering close.
struct Conn {
    stream: TcpStream,
    /// The request bytes so far, then the answer.
    buf: Vec<u8>,
    /// `Some(n)`: writing the answer, `n` bytes of it written.
    written: Option<usize>,
    /// `Some`: the answer is written and the write side shut down; what the client still
    /// sends is read and discarded (`crate::lingering`), as on the public listeners: a
    /// close with bytes unread (a body, a pipelined request) would reset the connection and
    /// discard the answer's part the client has not read yet.
    lingering: Option<Lingering>,
    /// When the request (then the answer, then the lingering's next read) must be done.
    deadline: Instant,
}

impl Conn {
    fn new(stream: TcpStream, now: Instant) -> Conn {
        Conn {
            stream,
            buf: Vec::new(),
            written: None,
            lingering: None,
            deadline: now + CLIENT_TIMEOUT,
        }
    }

    fn events(&self) -> libc::c_short {
        match self.written {
            Some(_) if self.lingering.is_none() => libc::POLLOUT,
            _ => libc::POLLIN,
        }
    }

    /// `false` once the deadline passed: a request cut after part of it came is told so (a
    /// 408, if the socket takes it now); one that sent nothing is closed quietly.
    fn in_time(&mut self, now: Instant) -> bool {
        if now < self.deadline {
            return true;
        }
        if self.written.is_none() && !self.buf.is_empty() {
            let _ = self
                .stream
                .write(&Reply::text(408, "request timeout\n").bytes());
        }
        false
    }

    /// Read or write what the socket takes now; a lingering close begun now ends by `stop_by`
    /// at the latest.
    fn progress(&mut self, ctx: &AdminCtx, stop_by: Option<Instant>) -> Step {
        if let Some(l) = self.lingering {
            return self.discard(l);
        }
        if self.written.is_none() {
            match self.read() {
                Got::More => return Step::Open,
                Got::Gone => return Step::Done,
                Got::Head(parsed) => self.answer(ctx, parsed),
            }
        }
        match self.write() {
            Written::Partly => Step::Open,
            Written::Failed => Step::Done,
            Written::Whole => {
                // The client sees the answer's end; the connection closes when it is done
                // sending (or the lingering's bounds say so).
                if self.stream.shutdown(std::net::Shutdown::Write).is_err() {
                    return Step::Done;
                }
                let t = &ctx.cfg.timeouts;
                let l = Lingering::new(Instant::now(), t.lingering_time, t.lingering_timeout);
                let l = stop_by.map_or(l, |by| l.ending_by(by));
                self.lingering = Some(l);
                self.discard(l)
            }
        }
    }

    /// A lingering close under way ends by `by` at the latest (the process stops).
    fn linger_until(&mut self, by: Instant) {
        if let Some(l) = self.lingering {
            self.lingering = Some(l.ending_by(by));
            self.deadline = self.deadline.min(by);
        }
    }

    /// The lingering close: read and discard what arrived; closed once the client ends, or
    /// its next bytes are due after `l`'s bounds.
    fn discard(&mut self, l: Lingering) -> Step {
        let mut chunk = [0u8; 4096];
        // A few reads a turn: a client sending fast does not hold the thread.
        for _ in 0..16 {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Step::Done,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Step::Done,
            }
        }
        match l.read_by(Instant::now()) {
            Some(by) => {
                self.deadline = by;
                Step::Open
            }
            None => Step::Done,
        }
    }

    fn read(&mut self) -> Got {
        let mut chunk = [0u8; 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Got::Gone,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    match parse_request(&self.buf) {
                        Parsed::Partial => {}
                        done => return Got::Head(done),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Got::More,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Got::Gone,
            }
        }
    }

    /// The request is read: the answer replaces it, with a deadline of its own.
    fn answer(&mut self, ctx: &AdminCtx, parsed: Parsed) {
        let reply = match parsed {
            Parsed::Request { head_only, path } => answer(ctx, head_only, &path),
            Parsed::OtherMethod { path } => not_allowed(&path),
            Parsed::TooLarge => Reply::text(431, "request header fields too large\n"),
            Parsed::Bad | Parsed::Partial => Reply::text(400, "bad request\n"),
        };
        self.buf = reply.bytes();
        self.written = Some(0);
        self.deadline = Instant::now() + CLIENT_TIMEOUT;
    }

    fn write(&mut self) -> Written {
        let mut at = self.written.unwrap_or(0);
        while at < self.buf.len() {
            match self.stream.write(&self.buf[at..]) {
                Ok(0) => return Written::Failed,
                Ok(n) => at += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.written = Some(at);
                    return Written::Partly;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Written::Failed,
            }
        }
        self.written = Some(at);
        Written::Whole
    }
}

/// What a write of the answer did.
enum Written {
    /// Part of it: wait for room.
    Partly,
    /// All of it.
    Whole,
    /// The socket failed.
    Failed,
}

/// What a read of a connection found.
enum Got {
    /// Nothing more for now: wait.
    More,
    /// The client went away (or the socket failed) before its head was complete.
    Gone,
    Head(Parsed),
}

/// A request head, parsed from what arrived so far.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    Partial,
    /// Not HTTP.
    Bad,
    /// More header fields than [`MAX_FIELDS`], or a head longer than [`MAX_HEAD`]: 431.
    TooLarge,
    /// A method other than GET and HEAD, on this path (without its query).
    OtherMethod {
        path: String,
    },
    /// The path without its query.
    Request {
        head_only: bool,
        path: String,
    },
}

/// Header fields read from an admin request (a scraper or a probe sends a handful).
const MAX_FIELDS: usize = 32;

fn parse_request(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {
            let Some(path) = request_path(req.path.unwrap_or("/")) else {
                return Parsed::Bad;
            };
            match req.method {
                Some("GET") => Parsed::Request {
                    head_only: false,
                    path,
                },
                Some("HEAD") => Parsed::Request {
                    head_only: true,
                    path,
                },
                _ => Parsed::OtherMethod { path },
            }
        }
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => Parsed::Partial,
        Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => Parsed::TooLarge,
        _ => Parsed::Bad,
    }
}

/// The path of a request target, without its query: the origin form as it is, the absolute
/// form (`http://host/metrics`, which RFC 9112 3.2.2 says a server MUST accept) without its
/// scheme and authority. `None`: an absolute form without a host (RFC 9110 4.2.1: "MUST
/// reject it as invalid").
fn request_path(target: &str) -> Option<String> {
    let scheme_end = ["http://", "https://"].iter().find_map(|s| {
        let head = target.get(..s.len())?;
        head.eq_ignore_ascii_case(s).then_some(s.len())
    });
    let path = match scheme_end {
        Some(at) => {
            let rest = &target[at..];
            let host_end = rest.find(['/', '?']).unwrap_or(rest.len());
            if host_end == 0 {
                return None;
            }
            rest.get(host_end..)
                .filter(|p| !p.is_empty())
                .unwrap_or("/")
        }
        None => target,
    };
    let path = path.split('?').next().unwrap_or(path);
    Some(match path.is_empty() {
        true => "/".to_string(),
        false => path.to_string(),
    })
}

/// Another method than GET or HEAD: 405 on the admin paths, with what they allow; 404 elsewhere,
/// as for a GET.
fn not_allowed(path: &str) -> Reply {
    match path {
        "/metrics" | "/status" | "/healthz" => Reply {
            allow: true,
            ..Reply::text(405, "method not allowed: GET or HEAD\n")
        },
        _ => Reply::text(404, "not found: try /metrics, /status or /healthz\n"),
    }
}

struct Reply {
    status: u16,
    content_type: &'static str,
    body: String,
    head_only: bool,
    /// An `Allow: GET, HEAD` field (a 405).
    allow: bool,
}

impl Reply {
    fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.to_string(),
            head_only: false,
            allow: false,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            431 => "Request Header Fields Too Large",
            _ => "Service Unavailable",
        };
        let allow = if self.allow {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        };
        let mut out = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        if !self.head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

fn answer(ctx: &AdminCtx, head_only: bool, path: &str) -> Reply {
    let draining = ctx.flag.is_set();
    let mut r = match path {
        "/healthz" if draining => Reply::text(503, "draining\n"),
        "/healthz" => Reply::text(200, "ok\n"),
        "/metrics" | "/status" => match gather_one_generation(ctx) {
            Err(e) => Reply::text(503, &format!("{e}\n")),
            Ok((cfg, snaps)) if path == "/metrics" => Reply {
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                ..Reply::text(200, &{
                    let mut text = exposition::prometheus(&cfg, &snaps);
                    crate::process_metrics::render(&mut text, &ctx.reload);
                    text
                })
            },
            Ok((cfg, snaps)) => Reply {
                content_type: "application/json",
                ..Reply::text(200, &exposition::status(&cfg, &snaps, draining))
            },
        },
        _ => Reply::text(404, "not found: try /metrics, /status or /healthz\n"),
    };
    r.head_only = head_only;
    r
}

/// Every worker's snapshot, all keyed on one config generation, and that generation's
/// config (its names label the series). A scrape that lands while a reload reaches the
/// workers one by one asks again; if the workers still disagree after 100 ms (one stuck in a
/// long task), only those on the newest generation are shown: counts keyed on another
/// config's ids must not be read with this one's names.
fn gather_one_generation(
    ctx: &AdminCtx,
) -> Result<(Arc<Config>, Vec<WorkerSnapshot>), shared::inbox::AskError> {
    let mut tries = 0;
    loop {
        let snaps = gather(ctx)?;
        let newest = snaps.iter().max_by_key(|s| s.generation);
        let cfg = newest
            .and_then(|s| s.cfg.clone())
            .unwrap_or_else(|| ctx.cfg.clone());
        let top = newest.map_or(0, |s| s.generation);
        tries += 1;
        if snaps.iter().all(|s| s.generation == top) {
            return Ok((cfg, snaps));
        }
        if tries >= 50 {
            let same = snaps.into_iter().filter(|s| s.generation == top).collect();
            return Ok((cfg, same));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Every worker's snapshot, in worker order: a worker whose drain is over by its final one.
/// Only a worker that ended without leaving one fails the scrape.
pub fn gather(ctx: &AdminCtx) -> Result<Vec<WorkerSnapshot>, shared::inbox::AskError> {
    let answers = ctx
        .post
        .ask_each(|_, reply| WorkerMsg::Snapshot(reply), ASK_TIMEOUT)?;
    let mut gone = Vec::new();
    let mut snaps = Vec::with_capacity(answers.len());
    for (id, a) in answers.into_iter().enumerate() {
        match a.or_else(|| ctx.finals.of(id)) {
            Some(s) => snaps.push(s),
            None => gone.push(id),
        }
    }
    if !gone.is_empty() {
        return Err(shared::inbox::AskError::Gone(gone));
    }
    Ok(snaps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_are_parsed_as_they_grow() {
        let full = b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
        for end in 1..full.len() {
            assert_eq!(parse_request(&full[..end]), Parsed::Partial, "{end}");
        }
        let get = |head_only, path: &str| Parsed::Request {
            head_only,
            path: path.into(),
        };
        assert_eq!(parse_request(full), get(false, "/metrics"));
        assert_eq!(
            parse_request(b"HEAD /healthz HTTP/1.0\r\n\r\n"),
            get(true, "/healthz")
        );
        assert_eq!(
            parse_request(b"POST / HTTP/1.1\r\n\r\n"),
            Parsed::OtherMethod { path: "/".into() }
        );
        let absolute = b"GET http://h:1/metrics?x HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(parse_request(absolute), get(false, "/metrics"));
        assert_eq!(request_path("HTTPS://h").as_deref(), Some("/"));
        assert_eq!(request_path("http://h?q").as_deref(), Some("/"));
        // RFC 9110 4.2.1: an http URI with an empty host MUST be rejected as invalid.
        for empty in [
            &b"GET http:///status HTTP/1.1\r\n\r\n"[..],
            b"GET https://?x HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse_request(empty), Parsed::Bad);
        }
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        many.extend(b"X: y\r\n".repeat(MAX_FIELDS + 1));
        many.extend(b"\r\n");
        assert_eq!(parse_request(&many), Parsed::TooLarge);
        assert_eq!(parse_request(b"\x16\x03\x01"), Parsed::Bad);
        // A head that never ends is refused at the limit.
        let mut endless = b"GET / HTTP/1.1\r\nX: ".to_vec();
        endless.resize(MAX_HEAD - 1, b'a');
        assert_eq!(parse_request(&endless), Parsed::Partial);
        endless.push(b'a');
        // 431, as the public listeners answer a head over their limit (it was 400).
        assert_eq!(parse_request(&endless), Parsed::TooLarge);
    }

    #[test]
    fn a_timeout_is_a_complete_408_that_closes() {
        let r = String::from_utf8(Reply::text(408, "request timeout\n").bytes()).unwrap();
        assert!(r.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{r}");
        assert!(r.contains("\r\nContent-Length: 16\r\n"), "{r}");
        assert!(r.contains("\r\nConnection: close\r\n"), "{r}");
    }
}
