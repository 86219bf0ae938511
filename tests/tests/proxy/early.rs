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

// A body held whole (64 KiB or less) goes out with the head in one write; an upstream that
// answers before it took all of that write (a 413 from a size limit) has its answer relayed
// as a streamed body's is, and the request, part of which reached it, is never sent again.

/// A held POST body that no loopback buffer takes whole: the upstream's receive buffer is
/// 2 KiB and its segments 536 bytes (set on the listener, so its connections inherit them).
const HELD: usize = 60_000;

/// What a scripted upstream saw: each request line, with the number of its connection.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(usize, String)>>>;

/// An upstream with a small receive buffer: a GET gets `200 ok` (the connection stays), any
/// other request, once its head is read, `ANSWER` (413, `Connection: close`), then `after`
/// (a stall lasts until the test drops the returned `Hold`). `answer: false`: nothing is sent
/// before `after`.
fn narrow_upstream(after: After, answer: bool) -> (SocketAddr, Seen, Hold) {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(2048).expect("SO_RCVBUF");
    s.set_mss(536).expect("TCP_MAXSEG");
    s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    s.listen(16).unwrap();
    let l: TcpListener = s.into();
    let addr = l.local_addr().unwrap();
    let seen = Seen::default();
    let (hold, release) = mpsc::channel::<()>();
    let release = std::sync::Arc::new(std::sync::Mutex::new(release));
    let log = seen.clone();
    std::thread::spawn(move || {
        for (n, s) in l.incoming().enumerate() {
            let Ok(s) = s else { return };
            let (log, release) = (log.clone(), release.clone());
            std::thread::spawn(move || narrow_conn(s, n, (log, release), (after, answer)));
        }
    });
    (addr, seen, hold)
}

/// One connection of [`narrow_upstream`].
fn narrow_conn(
    mut s: std::net::TcpStream,
    n: usize,
    (log, release): (Seen, std::sync::Arc<std::sync::Mutex<mpsc::Receiver<()>>>),
    (after, answer): (After, bool),
) {
    let mut pending = Vec::new();
    loop {
        let Ok(head) = tests::raw::read_request_head(&mut s, &mut pending) else {
            return;
        };
        let line = String::from_utf8_lossy(&head);
        let line = line.lines().next().unwrap_or_default().to_string();
        let get = line.starts_with("GET");
        log.lock().unwrap().push((n, line));
        if get {
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
            continue;
        }
        if answer {
            s.write_all(ANSWER).expect("the answer is written");
        }
        match after {
            After::Close => return,
            After::Stall => {
                let _ = release.lock().unwrap().recv();
                return;
            }
        }
    }
}

/// The POST with a held body, on client connection `c`.
fn post_held(c: &mut tests::inproc::Client) -> tests::inproc::Response {
    let head = format!("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {HELD}\r\n\r\n");
    c.send(head.as_bytes());
    c.send(&vec![b'x'; HELD]);
    c.response()
}

/// The POSTs `seen` holds.
fn posts(seen: &Seen) -> Vec<(usize, String)> {
    let seen = seen.lock().unwrap();
    seen.iter()
        .filter(|(_, l)| l.starts_with("POST"))
        .cloned()
        .collect()
}

/// The upstream answers 413 and reads no more: the 413 comes back (as from nginx), not a 504
/// once the upstream send timeout (sub-second here) gave up on the rest of the write. On
/// every driver: each writes and reads the upstream its own way.
#[test]
fn early_answer_to_a_held_body_is_relayed_when_the_upstream_stops_reading() {
    for d in tests::drivers() {
        let (up, seen, _hold) = narrow_upstream(After::Stall, true);
        let mut cfg = config(&[up]);
        cfg.runtime.driver = tests::driver_choice(d);
        cfg.timeouts.upstream_send = Duration::from_millis(500);
        let p = Proxy::start(cfg);
        let r = post_held(&mut p.connect());
        assert_eq!(
            r.status,
            413,
            "{d:?}: {:?}",
            String::from_utf8_lossy(&r.head)
        );
        assert_eq!(r.body, b"too big!");
        assert_eq!(r.header("connection"), Some("close"));
        assert_eq!(posts(&seen).len(), 1);
        p.stop();
    }
}

/// The upstream answers 413 and closes (a reset: the body is unread). One server: the 413,
/// not a 502. Two: still the 413, and the POST, whose head reached the first server, is never
/// sent to the second (it was, as if the connect had failed).
#[test]
fn early_answer_to_a_held_body_then_a_reset_is_relayed_and_not_retried() {
    let (a, seen_a, _ha) = narrow_upstream(After::Close, true);
    let p = Proxy::start(config(&[a]));
    let r = post_held(&mut p.connect());
    assert_eq!(r.status, 413, "{:?}", String::from_utf8_lossy(&r.head));
    assert_eq!(r.body, b"too big!");
    p.stop();
    assert_eq!(posts(&seen_a).len(), 1);

    let (a, seen_a, _ha) = narrow_upstream(After::Close, true);
    let (b, seen_b, _hb) = narrow_upstream(After::Close, true);
    let p = Proxy::start(config(&[a, b]));
    let r = post_held(&mut p.connect());
    assert_eq!(r.status, 413, "{:?}", String::from_utf8_lossy(&r.head));
    p.stop();
    let sent = posts(&seen_a).len() + posts(&seen_b).len();
    assert_eq!(sent, 1, "the POST went to both servers");
}

/// The same on a pooled connection (a GET went first): the 413, and the POST is not sent
/// again on a fresh connection as if the pooled one had gone stale.
#[test]
fn early_answer_to_a_held_body_on_a_pooled_connection_is_relayed_and_not_resent() {
    let (up, seen, _hold) = narrow_upstream(After::Close, true);
    let p = Proxy::start(config(&[up]));
    let mut c = p.connect();
    assert_eq!(c.get("/").status, 200);
    let r = post_held(&mut c);
    assert_eq!(r.status, 413, "{:?}", String::from_utf8_lossy(&r.head));
    p.stop();
    assert_eq!(posts(&seen), [(0, "POST /up HTTP/1.1".to_string())]);
}

/// An upstream that reads the head and resets without answering: 502, and the POST, part of
/// which it took, goes to no other server.
#[test]
fn a_held_post_reset_mid_write_without_an_answer_is_not_retried() {
    let (a, seen_a, _ha) = narrow_upstream(After::Close, false);
    let (b, seen_b, _hb) = narrow_upstream(After::Close, false);
    let p = Proxy::start(config(&[a, b]));
    let r = post_held(&mut p.connect());
    assert_eq!(r.status, 502, "{:?}", String::from_utf8_lossy(&r.head));
    p.stop();
    let sent = posts(&seen_a).len() + posts(&seen_b).len();
    assert_eq!(sent, 1, "the POST went to both servers");
}

/// A reset before any byte of the answer counts as `upstream_closed` (the server closed
/// without answering), whether it struck while the request was being written or after: which
/// of the two it is depends on the request's size and the buffers on the way, not on what
/// the server did. The upstream reads the head of a held POST and resets without answering.
#[test]
fn a_reset_that_strikes_the_requests_write_counts_as_upstream_closed() {
    let (up, seen, _hold) = narrow_upstream(After::Close, false);
    let mut cfg = config(&[up]);
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let p = Proxy::start(cfg);
    let r = post_held(&mut p.connect());
    assert_eq!(r.status, 502, "{:?}", String::from_utf8_lossy(&r.head));
    assert_eq!(posts(&seen).len(), 1);
    let m = tests::scrape::scrape(p.running().admin_addr().unwrap());
    let fault = |kind: &str| m[&format!("proxy_request_faults_total{{kind=\"{kind}\"}}")];
    assert_eq!(
        (fault("upstream_closed"), fault("upstream_io")),
        (1.0, 0.0),
        "(upstream_closed, upstream_io)"
    );
    p.stop();
}
