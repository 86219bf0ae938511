//! Upstream and client failures through the proxy: refused connects, silent and dying
//! upstreams, slow clients, retries (and the requests that must not be retried), and the
//! form of every response the proxy generates.

use shared::origin::{Origin, OriginConfig};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tests::raw::{
    assert_generated, assert_well_formed, exchange, get, show, Client, End, Reply, Response, WAIT,
};
use tests::{eventually, ClosedPort};

/// A one-worker proxy in front of `upstreams`, with extra flags: `(proxy, addr)`.
macro_rules! proxy {
    ($upstreams:expr $(, $extra:expr)* $(,)?) => {
        tests::start_proxy(&$upstreams, &[$($extra),*])
    };
}

/// An origin on `port`, the port held closed before and after (a restart never gives it up).
fn origin_on(port: &ClosedPort) -> Origin {
    Origin::start_on(OriginConfig::default(), port.addr(), 1).unwrap()
}

/// Connect attempts the proxy made to upstream servers so far (refused ones included).
fn upstream_connects(p: &proxy::Running) -> u64 {
    p.stats().iter().map(|s| s.upstream_connects.get()).sum()
}

/// Send one request on a fresh connection and read one response.
fn request(addr: SocketAddr, req: &[u8]) -> (Result<Response, Reply>, Duration, Client) {
    let mut c = Client::connect(addr);
    let t = Instant::now();
    c.send(req).unwrap();
    let r = c.response(WAIT);
    (r, t.elapsed(), c)
}

/// A generated response, well-formed; if it says `Connection: close`, the proxy closes.
fn expect_generated(r: Result<Response, Reply>, c: &mut Client, status: u16) -> Response {
    let resp =
        r.unwrap_or_else(|reply| panic!("expected {status}, got {reply:?} ({:?})", reply.text()));
    assert_well_formed(&resp, status);
    if resp.connection_has("close") {
        let rest = c.until_close(WAIT);
        assert!(
            rest.bytes.is_empty() && rest.end != End::TimedOut,
            "{rest:?}"
        );
    }
    resp
}

#[test]
fn connect_refused_everywhere_is_502_at_once() {
    let dead = ClosedPort::new();
    let (p, addr) = proxy!([dead.addr()], "--connect-timeout", "30s");
    let (r, elapsed, mut c) = request(addr, &get("/"));
    expect_generated(r, &mut c, 502);
    // Refused is immediate: no waiting for the connect timeout.
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
    p.shutdown().unwrap();
}

#[test]
fn both_upstreams_down_is_502() {
    let (d1, d2) = (ClosedPort::new(), ClosedPort::new());
    let (p, addr) = proxy!([d1.addr(), d2.addr()], "--connect-timeout", "30s");
    for _ in 0..3 {
        let (r, elapsed, mut c) = request(addr, &get("/"));
        expect_generated(r, &mut c, 502);
        assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
    }
    p.shutdown().unwrap();
}

#[test]
fn upstream_that_never_answers_is_504_after_read_timeout() {
    let o = Origin::start(OriginConfig {
        hang: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let (p, addr) = proxy!([o.addr()], "--read-timeout", "300ms");
    let (r, elapsed, mut c) = request(addr, &get("/"));
    expect_generated(r, &mut c, 504);
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    // A timeout is not a reason to retry (only refused connects and dead pooled connections).
    assert_eq!(o.requests(), 1);
    p.shutdown().unwrap();
}

/// The upstream dies mid-body: the client must never get a response that looks complete.
/// Either the head went out and the connection is then cut before the body's end, or (if the
/// proxy saw the failure before sending anything) a well-formed 502.
fn assert_cut_off(path: &str, full_len: usize) {
    let o = tests::origin();
    let (p, addr) = proxy!([o.addr()], "--read-timeout", "2s");
    let (r, _, c) = request(addr, &get(path));
    match r {
        Ok(resp) => {
            assert_eq!(
                resp.status, 502,
                "a truncated body passed off as complete: {resp:?}"
            );
            assert_well_formed(&resp, 502);
        }
        Err(reply) => {
            assert_ne!(
                reply.end,
                End::TimedOut,
                "the proxy neither finished nor closed: {reply:?}"
            );
            let partial = reply.responses();
            if let Some(head) = partial.first() {
                assert_eq!(head.status, 200, "{head:?}");
                assert!(!head.complete, "{head:?}");
                assert!(head.body.len() <= full_len, "{head:?}");
            }
        }
    }
    drop(c);
    // The broken upstream connection is not reused: the next request works.
    let (r, _, _c) = request(addr, &get("/after?size=10"));
    let resp = r.unwrap_or_else(|reply| panic!("{reply:?}"));
    assert_eq!(
        (resp.status, resp.body.as_slice()),
        (200, &b"abcdefghij"[..])
    );
    p.shutdown().unwrap();
}

#[test]
fn upstream_closes_mid_body_content_length() {
    assert_cut_off("/?size=100000&abort_after=1000", 100_000);
}

#[test]
fn upstream_closes_mid_body_chunked() {
    assert_cut_off("/?size=100000&chunk=1000&abort_after=5500", 100_000);
}

#[test]
fn upstream_closes_mid_body_chunked_on_a_chunk_boundary() {
    // Every chunk complete, only the last chunk missing: still not a complete response.
    assert_cut_off("/?size=5000&chunk=1000&abort_after=5000", 5000);
}

#[test]
fn upstream_resets_mid_body_content_length() {
    assert_cut_off("/?size=100000&abort_after=1000&reset=1", 100_000);
}

#[test]
fn upstream_resets_a_close_delimited_body() {
    // A close-delimited body ends at FIN; a reset is a failure, not an end.
    assert_cut_off(
        "/?size=100000&framing=close&abort_after=1000&reset=1",
        100_000,
    );
}

/// A scripted origin: one connection, one request head read, `reply` sent, then closed
/// (FIN). Joined, it yields the request head.
fn origin_closing_after(reply: &'static [u8]) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let head = tests::raw::read_request_head(&mut s, &mut Vec::new()).expect("a head");
        std::io::Write::write_all(&mut s, reply).unwrap();
        head
    });
    (addr, h)
}

/// An HTTP/1.0 client gets a body of unknown length close-delimited: a clean close would
/// tell it the body is complete. One cut off upstream (a chunked body without its last
/// chunk) must end in a reset instead, so the client can tell; a complete one still ends
/// in a clean close.
#[test]
fn an_http10_client_sees_a_body_cut_off_upstream_as_a_reset() {
    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n";
    const WHOLE: &[u8] =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    for (reply, end) in [(HEAD, End::Reset), (WHOLE, End::Closed)] {
        let (up, origin) = origin_closing_after(reply);
        let (p, addr) = proxy!([up]);
        let r = exchange(addr, b"GET / HTTP/1.0\r\n\r\n", WAIT);
        let sent = String::from_utf8_lossy(reply);
        assert_eq!(r.end, end, "origin sent {sent:?}; client got {}", show(&r));
        // What arrived before the end is the head and (part of) the body, nothing else.
        assert!(
            r.text().starts_with("HTTP/1.1 200 OK\r\n"),
            "{:?}",
            r.text()
        );
        if end == End::Closed {
            assert!(r.text().ends_with("\r\n\r\nhello"), "{:?}", r.text());
        }
        origin.join().unwrap();
        p.shutdown().unwrap();
    }
}

#[test]
fn client_header_timeout() {
    let o = tests::origin();
    let (p, addr) = proxy!([o.addr()], "--header-timeout", "300ms");
    let t = Instant::now();
    let reply = exchange(addr, b"GET / HTTP/1.1\r\nHost: te", WAIT);
    // Part of a head arrived: 408 (`client.rs`), not a silent close.
    assert_generated(&reply, 408, true);
    assert!(t.elapsed() >= Duration::from_millis(300), "{reply:?}");
    p.shutdown().unwrap();
    assert_eq!(o.requests(), 0);
}

/// A keep-alive connection's second head, read through the multishot receive (what already
/// arrived is read at once, `TcpStream::read_queued`): part of it and then nothing gets the
/// 408 at the header timeout, as a first head does.
#[test]
fn a_second_head_left_partial_gets_408_at_the_header_timeout() {
    let o = tests::origin();
    let (p, addr) = proxy!([o.addr()], "--header-timeout", "300ms");
    let mut c = Client::connect(addr);
    c.send(&get("/")).unwrap();
    let first = c.response(WAIT).expect("the first response");
    assert_eq!(first.status, 200);
    c.send(b"GET / HTTP/1.1\r\nHost: te").unwrap();
    let t = Instant::now();
    let reply = c.until_close(WAIT);
    assert_generated(&reply, 408, true);
    assert!(t.elapsed() >= Duration::from_millis(250), "{reply:?}");
    p.shutdown().unwrap();
    assert_eq!(o.requests(), 1);
}

#[test]
fn header_timeout_covers_the_whole_head_not_each_read() {
    // Slowloris: one byte every 50 ms never completes a head; the timeout still fires.
    let o = tests::origin();
    let (p, addr) = proxy!([o.addr()], "--header-timeout", "300ms");
    let mut c = Client::connect(addr);
    let t = Instant::now();
    // Long enough to trickle for over 10 s: far past the bound below, which is itself far
    // past the 300 ms the timeout takes on a loaded machine.
    let head = format!(
        "GET / HTTP/1.1\r\nHost: test\r\nX-Slow: {}",
        "a".repeat(200)
    )
    .into_bytes();
    let mut got = Vec::new();
    let mut end = End::TimedOut;
    for b in &head {
        if c.send(&[*b]).is_err() || t.elapsed() > Duration::from_secs(8) {
            break;
        }
        let reply = c.until_close(Duration::from_millis(50));
        got.extend_from_slice(&reply.bytes);
        end = reply.end;
        if end != End::TimedOut {
            break;
        }
    }
    let elapsed = t.elapsed();
    if end == End::TimedOut {
        let rest = c.until_close(WAIT);
        got.extend_from_slice(&rest.bytes);
        end = rest.end;
    }
    let reply = Reply {
        bytes: got,
        end,
        elapsed,
    };
    assert!(
        elapsed < Duration::from_secs(8),
        "the head timeout never fired: {reply:?}"
    );
    assert_generated(&reply, 408, true);
    p.shutdown().unwrap();
    assert_eq!(o.requests(), 0);
}

#[test]
fn one_upstream_down_every_request_succeeds_and_it_is_skipped() {
    let live = tests::origin();
    let dead = ClosedPort::new();
    let (p, addr) = proxy!(
        [live.addr(), dead.addr()],
        "--max-fails",
        "1",
        "--fail-timeout",
        "10s"
    );
    for i in 0..10 {
        let (r, _, _c) = request(addr, &get(&format!("/{i}?size=3")));
        let resp = r.unwrap_or_else(|reply| panic!("request {i}: {reply:?}"));
        assert_eq!(
            (resp.status, resp.body.as_slice()),
            (200, &b"abc"[..]),
            "request {i}"
        );
    }
    assert_eq!(live.requests(), 10);
    // One refused connect to the dead server, one pooled connection to the live one.
    assert_eq!((upstream_connects(&p), live.connections()), (2, 1));
    // Bring the dead server back: within fail_timeout it is still skipped.
    let back = origin_on(&dead);
    for i in 0..10 {
        let (r, _, _c) = request(addr, &get(&format!("/again{i}")));
        assert_eq!(r.map(|r| r.status).ok(), Some(200), "request {i}");
    }
    assert_eq!(
        (back.connections(), back.requests()),
        (0, 0),
        "a failed server was used within its fail_timeout"
    );
    assert_eq!(live.requests(), 20);
    p.shutdown().unwrap();
}

#[test]
fn failed_server_is_tried_again_after_fail_timeout() {
    let live = tests::origin();
    let dead = ClosedPort::new();
    let (p, addr) = proxy!(
        [live.addr(), dead.addr()],
        "--max-fails",
        "1",
        "--fail-timeout",
        "300ms"
    );
    for i in 0..4 {
        let (r, _, _c) = request(addr, &get("/"));
        assert_eq!(r.map(|r| r.status).ok(), Some(200), "request {i}");
    }
    let refused = upstream_connects(&p) - live.connections();
    assert!(refused >= 1, "the dead server was never tried");
    let back = origin_on(&dead);
    // The behaviour under test: once the window ends, the recovered server gets requests
    // again; every answer meanwhile is a 200.
    let mut i = 0;
    let used = eventually(WAIT, || {
        let (r, _, _c) = request(addr, &get("/"));
        assert_eq!(r.map(|r| r.status).ok(), Some(200), "request {i}");
        i += 1;
        back.requests() > 0
    });
    assert!(
        used,
        "the recovered server was never used again ({i} requests)"
    );
    p.shutdown().unwrap();
}

#[test]
fn post_whose_body_was_sent_is_not_retried() {
    // Both servers read the request fully, then close without answering.
    let cfg = OriginConfig {
        drop: true,
        capture: true,
        ..OriginConfig::default()
    };
    let a = Origin::start(cfg.clone()).unwrap();
    let b = Origin::start(cfg).unwrap();
    let (p, addr) = proxy!([a.addr(), b.addr()], "--read-timeout", "2s");
    let req = b"POST /form HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello";
    let (r, _, mut c) = request(addr, req);
    expect_generated(r, &mut c, 502);
    drop(c);
    p.shutdown().unwrap();
    assert_eq!(
        a.requests() + b.requests(),
        1,
        "the POST was sent more than once"
    );
    assert_eq!(a.body_bytes() + b.body_bytes(), 5);
}

#[test]
fn body_over_max_body_is_413() {
    let o = tests::capturing_origin();
    let (p, addr) = proxy!([o.addr()], "--max-body", "10");
    let mut req = b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n".to_vec();
    req.extend_from_slice(&[b'x'; 100]);
    let reply = exchange(addr, &req, WAIT);
    assert_generated(&reply, 413, true);
    // A declared length over the limit is refused before anything is forwarded.
    assert_eq!(o.requests(), 0);
    // A chunked body that grows past the limit: 413 (or a close if the response had
    // already started), and the origin never gets a complete request.
    let mut req = b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..10 {
        req.extend_from_slice(b"5\r\nxxxxx\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let reply = exchange(addr, &req, WAIT);
    assert_generated(&reply, 413, true);
    p.shutdown().unwrap();
    assert_eq!(o.complete_requests(), 0);
}

#[test]
fn no_matching_route_is_404() {
    let o = tests::origin();
    let mut cfg = tests::proxy_config(&[o.addr()], &[]);
    cfg.routes = vec![proxy::config::Route {
        host: None,
        path_prefix: "/api/".into(),
        action: proxy::config::Action::Proxy {
            group: proxy::config::GroupId::new(0),
            cache: None,
        },
        access: None,
        opts: None,
    }]
    .into();
    let p = proxy::start(cfg).unwrap();
    let addr = p.listen_addrs()[0];
    let (r, _, mut c) = request(addr, &get("/other"));
    expect_generated(r, &mut c, 404);
    let (r, _, _c) = request(addr, &get("/api/x"));
    assert_eq!(r.map(|r| r.status).ok(), Some(200));
    p.shutdown().unwrap();
    assert_eq!(o.requests(), 1);
}

#[test]
fn client_that_never_reads_does_not_hold_the_upstream() {
    let o = tests::origin();
    let (p, addr) = proxy!([o.addr()], "--send-timeout", "300ms");
    let mut c = Client::connect(addr);
    c.send(&get("/?size=256MiB")).unwrap();
    assert!(
        eventually(WAIT, || o.connections() == 1),
        "the request never reached the origin"
    );
    // The client reads nothing: the proxy's writes stall, the send timeout fires, and both
    // connections are closed.
    assert!(
        eventually(WAIT, || o.open_connections() == 0),
        "the upstream connection is still held open"
    );
    let rest = c.until_close(WAIT * 2);
    assert_ne!(
        rest.end,
        End::TimedOut,
        "the client connection is still open"
    );
    p.shutdown().unwrap();
}

#[test]
fn client_body_timeout_closes_and_never_completes_the_request() {
    let o = tests::origin();
    let (p, addr) = proxy!([o.addr()], "--body-timeout", "300ms");
    let t = Instant::now();
    let reply = exchange(
        addr,
        b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n0123456789",
        WAIT,
    );
    // No response had started: 408 and a close.
    assert_generated(&reply, 408, true);
    assert!(t.elapsed() >= Duration::from_millis(300), "{reply:?}");
    assert_eq!(o.complete_requests(), 0);
    // The half-sent upstream connection is not pooled: it is closed, and the next request
    // gets a clean one.
    assert!(eventually(WAIT, || o.open_connections() == 0));
    let (r, _, _c) = request(addr, &get("/?size=3"));
    let resp = r.unwrap_or_else(|reply| panic!("{reply:?}"));
    assert_eq!((resp.status, resp.body.as_slice()), (200, &b"abc"[..]));
    p.shutdown().unwrap();
}

/// A scripted origin for a streamed upload: one connection; the request head and `body`
/// bytes read, then `pause` and an `ok` (`None`: no answer, the proxy's close awaited).
/// Joined, it says whether it got the whole body (and answered).
fn origin_answering_after(
    body: usize,
    pause: Option<Duration>,
) -> (SocketAddr, std::thread::JoinHandle<bool>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let mut pending = Vec::new();
        tests::raw::read_request_head(&mut s, &mut pending).expect("a head");
        while pending.len() < body {
            if tests::raw::read_once(&mut s, &mut pending).is_err() {
                return false;
            }
        }
        let Some(pause) = pause else {
            // Until the proxy gives up (EOF) or the test's wait ends.
            return tests::raw::read_once(&mut s, &mut pending) == Err(End::Closed);
        };
        // The origin's pace is what is tested.
        std::thread::sleep(pause);
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        std::io::Write::write_all(&mut s, ok).is_ok()
    });
    (addr, h)
}

/// A streamed request body (larger than the proxy reads whole) is under the client body
/// timeout while it comes, and the wait for the answer after it under the upstream read
/// timeout alone: an upload sent whole and an origin that takes longer than the body timeout
/// (but less than the read timeout) to answer is a 200, not a 408; and a client that pauses
/// in its body for longer than the read timeout (but less than the body timeout) is a 200,
/// not a 504.
#[test]
fn body_and_read_timeouts_each_cover_their_own_wait_on_a_streamed_upload() {
    const BODY: usize = 200_000;
    let head = format!("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {BODY}\r\n\r\n");
    // The origin is slow to answer once it has the body.
    let (up, origin) = origin_answering_after(BODY, Some(Duration::from_millis(900)));
    let (p, addr) = proxy!([up], "--body-timeout", "300ms", "--read-timeout", "3s");
    let mut c = Client::connect(addr);
    c.send(&[head.as_bytes(), &vec![b'q'; BODY]].concat())
        .unwrap();
    let r = c.response(WAIT).unwrap_or_else(|r| panic!("{}", show(&r)));
    assert_eq!(
        (r.status, &r.body[..]),
        (200, &b"ok"[..]),
        "a slow origin: {r:?}"
    );
    assert!(origin.join().unwrap());
    drop(c);
    p.shutdown().unwrap();

    // The client is slow to send the body; the origin answers as soon as it has it.
    let (up, origin) = origin_answering_after(BODY, Some(Duration::ZERO));
    let (p, addr) = proxy!([up], "--body-timeout", "3s", "--read-timeout", "300ms");
    let mut c = Client::connect(addr);
    c.send(&[head.as_bytes(), &vec![b'q'; BODY / 2]].concat())
        .unwrap();
    // The client's pace is what is tested.
    std::thread::sleep(Duration::from_millis(900));
    c.send(&vec![b'q'; BODY - BODY / 2]).unwrap();
    let r = c.response(WAIT).unwrap_or_else(|r| panic!("{}", show(&r)));
    assert_eq!(
        (r.status, &r.body[..]),
        (200, &b"ok"[..]),
        "a slow client: {r:?}"
    );
    assert!(origin.join().unwrap());
    drop(c);
    p.shutdown().unwrap();

    // An origin that never answers after the body is a 504 at the read timeout, not a 408.
    let (up, origin) = origin_answering_after(BODY, None);
    let (p, addr) = proxy!([up], "--body-timeout", "300ms", "--read-timeout", "600ms");
    let mut c = Client::connect(addr);
    c.send(&[head.as_bytes(), &vec![b'q'; BODY]].concat())
        .unwrap();
    let r = c.response(WAIT).unwrap_or_else(|r| panic!("{}", show(&r)));
    assert_eq!(r.status, 504, "a silent origin: {r:?}");
    drop(c);
    assert!(
        origin.join().unwrap(),
        "the upstream connection was not closed"
    );
    p.shutdown().unwrap();
}

#[test]
fn idle_keep_alive_client_is_closed_after_idle_timeout() {
    let o = tests::origin();
    let (p, addr) = proxy!([o.addr()], "--idle-timeout", "300ms");
    // The idle time starts after the response, so after `t`: whatever the scheduling, the
    // close comes at least the idle timeout after `t`.
    let t = Instant::now();
    let (r, _, mut c) = request(addr, &get("/?size=1"));
    assert_eq!(r.map(|r| r.status).ok(), Some(200));
    let rest = c.until_close(WAIT);
    assert_eq!(rest.end, End::Closed, "{rest:?}");
    assert!(rest.bytes.is_empty(), "{rest:?}");
    assert!(t.elapsed() >= Duration::from_millis(300), "{rest:?}");
    p.shutdown().unwrap();
}

/// The origin restarts between two requests: the proxy's pooled connection is dead. A GET
/// is retried on a fresh connection; the client never sees the stale connection.
#[test]
fn stale_pooled_connection_is_retried_for_get() {
    let port = ClosedPort::new();
    let first = origin_on(&port);
    let (p, addr) = proxy!([port.addr()], "--keepalive", "8");
    let (r, _, _c) = request(addr, &get("/?size=1"));
    assert_eq!(r.map(|r| r.status).ok(), Some(200));
    first.stop(); // closes the pooled upstream connection from the origin's side
    let second = origin_on(&port);
    for i in 0..3 {
        let (r, _, _c) = request(addr, &get(&format!("/again{i}?size=2")));
        let resp = r.unwrap_or_else(|reply| panic!("request {i}: {reply:?}"));
        assert_eq!(
            (resp.status, resp.body.as_slice()),
            (200, &b"ab"[..]),
            "request {i}"
        );
    }
    assert_eq!(second.requests(), 3);
    p.shutdown().unwrap();
}

/// The same with a POST: retried only if the proxy found the connection dead before sending
/// any of it, so the client gets the answer or a 502, and the origin sees it at most once.
#[test]
fn stale_pooled_connection_and_post() {
    let port = ClosedPort::new();
    let first = origin_on(&port);
    let (p, addr) = proxy!([port.addr()], "--keepalive", "8");
    let (r, _, _c) = request(addr, &get("/?size=1"));
    assert_eq!(r.map(|r| r.status).ok(), Some(200));
    first.stop();
    let second = origin_on(&port);
    let req = b"POST /form?size=2 HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello";
    let (r, _, mut c) = request(addr, req);
    let resp = r.unwrap_or_else(|reply| panic!("{reply:?}"));
    if resp.status == 502 {
        let _ = expect_generated(Ok(resp), &mut c, 502);
        assert_eq!(second.requests(), 0);
    } else {
        assert_eq!((resp.status, resp.body.as_slice()), (200, &b"ab"[..]));
        assert_eq!(second.requests(), 1);
    }
    p.shutdown().unwrap();
}

/// Slowloris on a keep-alive connection: after a first exchange, a second head that never
/// completes is cut off by the header timeout too (not only by the longer idle timeout).
#[test]
fn header_timeout_applies_to_later_requests_on_a_connection() {
    let o = tests::origin();
    let (p, addr) = proxy!(
        [o.addr()],
        "--header-timeout",
        "300ms",
        "--idle-timeout",
        "30s"
    );
    let (r, _, mut c) = request(addr, &get("/?size=1"));
    assert_eq!(r.map(|r| r.status).ok(), Some(200));
    c.send(b"GET /second HTTP/1.1\r\nHost: te").unwrap();
    let reply = c.until_close(WAIT);
    assert_generated(&reply, 408, true);
    p.shutdown().unwrap();
    assert_eq!(o.requests(), 1);
}

/// A listening socket whose accept queue is full (backlog 0, one connection queued, never
/// accepted): the kernel drops further SYNs, so connecting to it hangs like a dead host.
/// Returns the address and what keeps it full.
fn blackhole() -> (SocketAddr, std::net::TcpStream, libc::c_int) {
    // SAFETY: plain socket calls on a descriptor this function owns; the sockaddr is a
    // zeroed sockaddr_in filled in before use and outlives the calls that read it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, &sa as *const _ as *const libc::sockaddr, len),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        let mut got = len;
        assert_eq!(
            libc::getsockname(fd, &mut sa as *mut _ as *mut libc::sockaddr, &mut got),
            0
        );
        let addr = SocketAddr::from(([127, 0, 0, 1], u16::from_be(sa.sin_port)));
        let filler = std::net::TcpStream::connect(addr).unwrap();
        (addr, filler, fd)
    }
}

#[test]
fn connect_timeout_is_504_and_the_next_server_is_tried() {
    let (hole, _filler, fd) = blackhole();
    let (p, addr) = proxy!([hole], "--connect-timeout", "300ms");
    let (r, elapsed, mut c) = request(addr, &get("/"));
    expect_generated(r, &mut c, 504);
    assert!(elapsed >= Duration::from_millis(250), "{elapsed:?}");
    p.shutdown().unwrap();
    // With a live server next to it, the request goes there after the connect timeout.
    let live = tests::origin();
    let (p, addr) = proxy!([hole, live.addr()], "--connect-timeout", "300ms");
    for i in 0..4 {
        let (r, _, _c) = request(addr, &get("/?size=2"));
        let resp = r.unwrap_or_else(|reply| panic!("request {i}: {reply:?}"));
        assert_eq!(
            (resp.status, resp.body.as_slice()),
            (200, &b"ab"[..]),
            "{i}"
        );
    }
    assert_eq!(live.requests(), 4);
    p.shutdown().unwrap();
    // SAFETY: closes the descriptor `blackhole` opened, once.
    unsafe { libc::close(fd) };
}
