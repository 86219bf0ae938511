//! Request bodies streamed to an upstream that does not simply read them all and answer:
//! - one that answers before it read the whole body and refuses the rest (413 from a size
//!   limit, 401 before an upload, any error, or an answer that closes): the client gets that
//!   response, as from nginx, not a 502 or a timeout; the client connection then closes (the
//!   rest of its body was never read). An early answer that does not refuse the body lets it
//!   stream on: `early_ok.rs`;
//! - one that stops reading and never answers: the upstream send timeout gives 504;
//! - one that takes the body and closes: 502, and the body is never sent to another server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tests::inproc::{config, Proxy};

/// What the one-shot upstream does after answering.
#[derive(Clone, Copy)]
enum After {
    /// Close at once (the unread body makes the kernel reset the connection).
    Close,
    /// Keep the connection open and read nothing more.
    Stall,
}

/// Held by a test while a fake upstream must keep its connection open; dropping it (at the
/// end of the test, pass or fail) lets the upstream close. An event, not a guess at how long
/// the test takes.
type Hold = mpsc::Sender<()>;

/// An upstream that reads one request head and then neither reads nor answers, until the
/// test drops the returned `Hold`.
fn deaf_upstream() -> (SocketAddr, Hold) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (hold, release) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf); // the head, or whatever part of it came first
        let _ = release.recv(); // returns when the test drops its `Hold`
    });
    (addr, hold)
}

const ANSWER: &[u8] =
    b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big!";

/// An upstream that reads one request head, answers `answer` at once, then does `after`
/// (a stall lasts until the test drops the returned `Hold`).
fn early_upstream(answer: &'static [u8], after: After) -> (SocketAddr, Hold) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (hold, release) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        if tests::raw::read_request_head(&mut s, &mut Vec::new()).is_err() {
            return;
        }
        s.write_all(answer).expect("the answer is written");
        match after {
            After::Close => drop(s),
            // Reads nothing more, until the test is over.
            After::Stall => {
                let _ = release.recv();
            }
        }
    });
    (addr, hold)
}

/// Send a large upload's head and as much of its body as the proxy takes, then read what
/// comes back.
fn upload_and_read(addr: SocketAddr, chunked: bool) -> tests::inproc::Response {
    let mut c = tests::inproc::Client::connect(addr);
    let head = if chunked {
        "PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()
    } else {
        format!(
            "PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            64 << 20
        )
    };
    c.send(head.as_bytes());
    // Write the body from another thread until the proxy stops taking it.
    let mut w = c.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        w.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let block = vec![b'x'; 64 << 10];
        let mut framed = format!("{:x}\r\n", block.len()).into_bytes();
        framed.extend_from_slice(&block);
        framed.extend_from_slice(b"\r\n");
        for _ in 0..1024 {
            let piece = if chunked { &framed } else { &block };
            if w.write_all(piece).is_err() {
                break;
            }
        }
    });
    let r = c.response();
    drop(c);
    writer.join().expect("the writer thread");
    r
}

fn check(after: After, chunked: bool) {
    check_answer((ANSWER, 413, b"too big!"), after, chunked);
}

/// An upload answered early with `answer`, which refuses the body: the client gets
/// `status` and `body`, fast, and its connection closes.
fn check_answer((answer, status, body): (&'static [u8], u16, &[u8]), after: After, chunked: bool) {
    let (up, _hold) = early_upstream(answer, after);
    // Default send timeouts (60 s): the answer must not wait for one of them to fire.
    let p = Proxy::start(config(&[up]));
    let t = Instant::now();
    let r = upload_and_read(p.addr, chunked);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(&r.head));
    assert_eq!(r.body, body);
    assert_eq!(r.header("connection"), Some("close"));
    p.stop();
}

#[test]
fn early_answer_then_close_is_relayed() {
    check(After::Close, false);
}

#[test]
fn early_answer_then_close_is_relayed_chunked() {
    check(After::Close, true);
}

#[test]
fn early_answer_then_stall_is_relayed() {
    check(After::Stall, false);
}

#[test]
fn early_answer_then_stall_is_relayed_chunked() {
    check(After::Stall, true);
}

/// An early error refuses the body even when its connection would stay (no `Connection:
/// close`), and so does an early success that closes: the body stops, the client connection
/// closes after the answer. The upstream stalls: nothing but the answer's own framing ends it.
#[test]
fn early_error_without_close_and_early_200_with_close_stop_the_body() {
    const FORBIDDEN: &[u8] = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 6\r\n\r\ndenied";
    const OK_CLOSE: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\ndone";
    check_answer((FORBIDDEN, 403, b"denied"), After::Stall, false);
    check_answer((OK_CLOSE, 200, b"done"), After::Stall, true);
}

/// The usual case is unchanged: an upstream that answers after the whole body keeps both
/// connections alive (the client's for its next request, the upstream's in the pool).
#[test]
fn answer_after_the_body_keeps_both_connections() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    for _ in 0..3 {
        c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
        for _ in 0..20 {
            c.send(b"1000\r\n");
            c.send(&[b'z'; 0x1000]);
            c.send(b"\r\n");
        }
        c.send(b"0\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), None);
    }
    assert_eq!(c.get("/").status, 200);
    assert_eq!(o.body_bytes(), 3 * 20 * 0x1000);
    assert_eq!(o.connections(), 1, "the upstream connection is reused");
    p.stop();
}

/// An upstream that stops reading a streamed body and never answers: the upstream send
/// timeout ends the wait with 504 (a stuck upstream cannot hold a client forever).
#[test]
fn upstream_that_stops_reading_gets_the_send_timeout() {
    let (deaf, _hold) = deaf_upstream();
    let mut cfg = config(&[deaf]);
    cfg.timeouts.upstream_send = Duration::from_millis(300);
    let p = Proxy::start(cfg);
    let t = Instant::now();
    let r = upload_and_read(p.addr, false);
    assert_eq!(r.status, 504, "{:?}", String::from_utf8_lossy(&r.head));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    p.stop();
}

/// A streamed body (over the 64 KiB read whole first) is never sent twice, even for an
/// idempotent method: both servers take the request and close without answering; the client
/// gets 502, and only one server saw it.
#[test]
fn streamed_body_is_not_retried() {
    let cfg = shared::origin::OriginConfig {
        drop: true,
        ..shared::origin::OriginConfig::default()
    };
    let a = shared::origin::Origin::start(cfg.clone()).unwrap();
    let b = shared::origin::Origin::start(cfg).unwrap();
    let p = Proxy::start(config(&[a.addr(), b.addr()]));
    let mut c = p.connect();
    c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.send(format!("11170\r\n{}\r\n0\r\n\r\n", "h".repeat(70_000)).as_bytes());
    let r = c.response();
    assert_eq!(r.status, 502);
    assert_eq!(r.header("connection"), Some("close"));
    p.stop();
    assert_eq!(a.requests() + b.requests(), 1, "the body was sent twice");
}
