//! The admin listener (`--admin ADDR`, `[admin] addr`): `/metrics` (Prometheus text),
//! `/status` (JSON, per worker and totals), `/healthz` (200 while serving, 503 while
//! draining). Never on the public listeners.
//!
//! One plain thread, off the workers: it answers one connection at a time (a scrape is a few
//! requests a second; a client that stalls is cut off after a second). A scrape asks every
//! worker for its snapshot through the workers' inbox (`Post::ask_all`): each worker answers
//! between two of its tasks, so the answer counts every request completed before the scrape.
//! The listener keeps answering while the workers drain (`/healthz` says 503 then), and stops
//! when the workers have ended.

use crate::config::Config;
use crate::exposition;
use crate::metrics::WorkerSnapshot;
use crate::worker::WorkerMsg;
use shared::inbox::Post;
use shared::shutdown::ShutdownFlag;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a scrape waits for the workers.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client gets to send its request and read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest admin request head read.
const MAX_HEAD: usize = 8 * 1024;

/// What the admin thread reads.
pub struct AdminCtx {
    pub cfg: Arc<Config>,
    pub post: Post<WorkerMsg>,
    pub flag: Arc<ShutdownFlag>,
}

/// The running admin listener.
pub struct Admin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Admin {
    /// Serve `listener` on a thread of its own.
    pub fn start(listener: TcpListener, ctx: AdminCtx) -> std::io::Result<Admin> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("admin".into())
            .spawn(move || serve(listener, ctx, s))?;
        Ok(Admin {
            addr,
            stop,
            thread: Some(thread),
        })
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
        // Wake the blocking accept; a refused connect means it is gone already.
        let _ = TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1));
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

/// Where to connect to reach a listener bound to `addr` (a wildcard address is reached on
/// loopback).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let mut a = addr;
    if a.ip().is_unspecified() {
        a.set_ip(match a {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    a
}

fn serve(listener: TcpListener, ctx: AdminCtx, stop: Arc<AtomicBool>) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut s) = conn else {
            // EMFILE and the like: the proxy's workers are short too; try again shortly.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = s.set_read_timeout(Some(CLIENT_TIMEOUT));
        let _ = s.set_write_timeout(Some(CLIENT_TIMEOUT));
        let reply = match read_request(&mut s) {
            Some(Ok((head, path))) => answer(&ctx, head, &path),
            Some(Err(())) => Reply::text(400, "bad request\n"),
            None => continue,
        };
        let _ = s.write_all(&reply.bytes());
    }
}

/// The request line's method and path; `None`: the client sent nothing usable in time.
fn read_request(s: &mut TcpStream) -> Option<Result<(bool, String), ()>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let head_only = match req.method {
                    Some("GET") => false,
                    Some("HEAD") => true,
                    _ => return Some(Err(())),
                };
                let path = req.path.unwrap_or("/");
                let path = path.split('?').next().unwrap_or(path).to_string();
                return Some(Ok((head_only, path)));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
            _ => return Some(Err(())),
        }
    }
}

struct Reply {
    status: u16,
    content_type: &'static str,
    body: String,
    head_only: bool,
}

impl Reply {
    fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.to_string(),
            head_only: false,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            _ => "Service Unavailable",
        };
        let mut out = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
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
                ..Reply::text(200, &exposition::prometheus(&cfg, &snaps))
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
/// config's indices must not be read with this one's names.
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

/// Every worker's snapshot, in worker order.
pub fn gather(ctx: &AdminCtx) -> Result<Vec<WorkerSnapshot>, shared::inbox::AskError> {
    ctx.post
        .ask_all(|_, reply| WorkerMsg::Snapshot(reply), ASK_TIMEOUT)
}
