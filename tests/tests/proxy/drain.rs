//! Graceful SIGTERM of the `proxy` binary with 2 workers: new connections are refused as
//! soon as the drain starts, an upload in flight and pipelined requests already queued
//! behind a held one all finish, idle connections close, and the process exits 0;
//! `--shutdown-timeout 0s` stops at once, even with requests held.
//!
//! The upstream is a small scripted server of this file, so the test decides when a held
//! request is answered (a channel, not a delay): every step waits for an event.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use tests::process::ProxyProcess;
use tests::raw::{Client, End, WAIT};
use tests::strict::{assert_closed, response, READY};

/// The `proxy` binary with 2 workers over `upstream`; killed on drop if still running.
fn spawn_proxy(upstream: SocketAddr, extra: &[&str]) -> ProxyProcess {
    ProxyProcess::start(
        ProxyProcess::command()
            .args(["--listen", "127.0.0.1:0", "--workers", "2", "--no-pin"])
            .arg("--upstream")
            .arg(upstream.to_string())
            .args(extra),
    )
}

/// Wait until connecting to `addr` is refused (every worker closed its listener). Before
/// that, a probe may be accepted: it sends nothing, so it holds no request.
fn wait_refused(addr: SocketAddr) {
    let refused = || match TcpStream::connect(addr) {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => true,
        Err(e) => panic!("connect: {e}"),
        Ok(_) => false,
    };
    assert!(
        tests::eventually(READY, refused),
        "the listeners never closed"
    );
}

/// A gate the test opens to let held requests be answered.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn release(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }

    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
}

/// A keep-alive upstream: for each request, report its path on `heads` as soon as the head
/// arrived, read its Content-Length body, hold it at the gate if the path starts with
/// `/hold`, then answer 200 with body `<path>:<body length>`.
fn scripted_upstream() -> (SocketAddr, mpsc::Receiver<String>, Arc<Gate>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    let gate = Arc::new(Gate::default());
    let g = gate.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let (tx, g) = (tx.clone(), g.clone());
            std::thread::spawn(move || serve_conn(s, tx, g));
        }
    });
    (addr, rx, gate)
}

fn serve_conn(mut s: TcpStream, heads: mpsc::Sender<String>, gate: Arc<Gate>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let mut fill = |buf: &mut Vec<u8>, s: &mut TcpStream| match s.read(&mut chunk) {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    };
    loop {
        let end = loop {
            if let Some(e) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break e + 4;
            }
            if !fill(&mut buf, &mut s) {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        if heads.send(path.clone()).is_err() {
            return; // the test is over
        }
        while buf.len() < len {
            if !fill(&mut buf, &mut s) {
                return;
            }
        }
        buf.drain(..len);
        if path.starts_with("/hold") {
            gate.wait();
        }
        let body = format!("{path}:{len}");
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if s.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

fn expect_head(heads: &mpsc::Receiver<String>, path: &str) {
    let got = heads
        .recv_timeout(READY)
        .unwrap_or_else(|_| panic!("{path} never reached the upstream"));
    assert_eq!(got, path);
}

const UPLOAD: usize = 200_000;

#[test]
fn sigterm_drains_uploads_and_queued_pipelined_requests() {
    let (up, heads, gate) = scripted_upstream();
    let mut p = spawn_proxy(up, &["--shutdown-timeout", "60s"]);

    // An idle keep-alive client: answered, then left idle.
    let mut idle = Client::connect(p.addr);
    idle.send(b"GET /idle HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    expect_head(&heads, "/idle");
    assert_eq!(response(&mut idle, "idle").body, b"/idle:0");

    // An upload in flight: the head and a first part of the body.
    let mut upload = Client::connect(p.addr);
    let head = format!("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {UPLOAD}\r\n\r\n");
    upload.send(head.as_bytes()).unwrap();
    upload.send(&vec![b'u'; 1000]).unwrap();
    expect_head(&heads, "/up");

    // Three pipelined requests in one write; the first is held by the upstream.
    let mut pipe = Client::connect(p.addr);
    pipe.send(
        b"GET /hold1 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /p2 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /p3 HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .unwrap();
    expect_head(&heads, "/hold1");

    p.signal(libc::SIGTERM);
    // The drain started: no new connections.
    wait_refused(p.addr);
    assert_eq!(
        TcpStream::connect(p.addr).map_err(|e| e.kind()).err(),
        Some(ErrorKind::ConnectionRefused)
    );
    // The idle connection is closed.
    assert_closed(&mut idle, "idle keep-alive connection on shutdown");

    // The held request is answered, then the two queued behind it.
    gate.release();
    for (i, want) in ["/hold1:0", "/p2:0", "/p3:0"].iter().enumerate() {
        let r = response(&mut pipe, want);
        assert_eq!(
            (r.status, String::from_utf8_lossy(&r.body).as_ref()),
            (200, *want),
            "pipelined response {i}: {r:?}"
        );
        // Open while more queued requests wait, closed after the last.
        assert_eq!(r.connection_has("close"), i == 2, "{r:?}");
    }
    assert_closed(&mut pipe, "pipelined connection after its last response");

    // The upload finishes.
    upload.send(&vec![b'u'; UPLOAD - 1000]).unwrap();
    let r = response(&mut upload, "upload");
    let want = format!("/up:{UPLOAD}");
    assert_eq!(
        (r.status, String::from_utf8_lossy(&r.body).as_ref()),
        (200, want.as_str()),
        "{r:?}"
    );
    assert!(r.connection_has("close"), "{r:?}");
    assert_closed(&mut upload, "upload connection after its response");

    let status = p.exit_within(READY).expect("the proxy exits once drained");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn shutdown_timeout_zero_stops_at_once() {
    let (up, heads, _gate) = scripted_upstream();
    let mut p = spawn_proxy(up, &["--shutdown-timeout", "0s"]);
    let mut held = Client::connect(p.addr);
    held.send(b"GET /hold HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    expect_head(&heads, "/hold");
    // A streamed upload (over the 64 KiB read whole before a request goes upstream).
    let mut upload = Client::connect(p.addr);
    let head =
        format!("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {UPLOAD}\r\n\r\n0123456789");
    upload.send(head.as_bytes()).unwrap();
    expect_head(&heads, "/up");

    p.signal(libc::SIGTERM);
    // The gate is never opened: a proxy that waited for these would never exit.
    let status = p
        .exit_within(READY)
        .expect("exits without waiting for requests in flight");
    assert_eq!(status.code(), Some(0), "{status:?}");
    // Both clients are cut off (EOF or reset), without anything resembling an answer.
    for (what, c) in [("held", &mut held), ("upload", &mut upload)] {
        let r = c.until_close(WAIT);
        assert_ne!(r.end, End::TimedOut, "{what}: {}", tests::strict::show(&r));
        assert!(r.bytes.is_empty(), "{what}: {}", tests::strict::show(&r));
    }
}

/// A request pipelined behind a body that was still arriving when its head was read is
/// served in a drain too: it was received before the answer, as the queued requests above.
#[test]
fn a_request_pipelined_behind_a_body_still_arriving_is_served_in_a_drain() {
    let (up, heads, gate) = scripted_upstream();
    let mut p = spawn_proxy(up, &["--shutdown-timeout", "60s"]);
    let mut c = Client::connect(p.addr);
    c.send(
        b"POST /hold-up HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    // The 100 says the head was read and the body is awaited: nothing was behind it then.
    let cont = response(&mut c, "the 100");
    assert_eq!(cont.status_line, "HTTP/1.1 100 Continue", "{cont:?}");
    // The body's bytes and a next request, in one write.
    c.send(b"0123456789GET /p2 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    expect_head(&heads, "/hold-up");

    p.signal(libc::SIGTERM);
    wait_refused(p.addr);
    gate.release();
    let r = response(&mut c, "the held upload's answer");
    assert_eq!(
        (r.status, String::from_utf8_lossy(&r.body).as_ref()),
        (200, "/hold-up:10"),
        "{r:?}"
    );
    assert!(
        !r.connection_has("close"),
        "a request waits behind it: {r:?}"
    );
    let r = response(&mut c, "the pipelined request's answer");
    assert_eq!(
        (r.status, String::from_utf8_lossy(&r.body).as_ref()),
        (200, "/p2:0"),
        "{r:?}"
    );
    assert!(r.connection_has("close"), "{r:?}");
    assert_closed(&mut c, "the connection after its last response");
    let status = p.exit_within(READY).expect("the proxy exits once drained");
    assert_eq!(status.code(), Some(0), "{status:?}");
}
