//! Upstream keep-alive pools and connection limits: reuse, retirement after N requests, idle
//! timeout, stale pooled connections retried, and the per-worker client connection limit.

use proxy::config::{GroupId, ServerId};
use shared::origin::{Origin, OriginConfig};
use std::time::Duration;
use tests::inproc::{config, Proxy};
use tests::{eventually, ClosedPort};

/// Patience for an effect that should come promptly (generous: the machine is shared).
const WAIT: Duration = Duration::from_secs(10);
/// The pool's check threshold in these tests (the group's `keepalive_check`, 1 s by default),
/// and an idle time past it.
const CHECK: Duration = Duration::from_millis(50);
const IDLE: Duration = Duration::from_millis(60);

fn origin_on(addr: std::net::SocketAddr) -> Origin {
    Origin::start_on(OriginConfig::default(), addr, 1).expect("origin starts")
}

/// An origin that restarts on the same port: the port is held closed around both lives
/// (never given up for another test to take), and the first origin's connections close.
struct Restarting {
    port: ClosedPort,
    first: Option<Origin>,
}

impl Restarting {
    fn new() -> Restarting {
        let port = ClosedPort::new();
        let first = Some(origin_on(port.addr()));
        Restarting { port, first }
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.port.addr()
    }

    /// Stop the first origin (closing every connection it had) and start the second.
    fn restart(&mut self) -> Origin {
        self.first.take().expect("restarted once").stop();
        origin_on(self.port.addr())
    }
}

#[test]
fn connections_retire_after_keepalive_requests() {
    let o = origin_on("127.0.0.1:0".parse().unwrap());
    let mut cfg = config(&[o.addr()]);
    cfg.groups[GroupId::new(0)].keepalive_requests = 10;
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    for _ in 0..100 {
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(o.connections(), 10);
}

#[test]
fn keepalive_zero_disables_pooling() {
    let o = origin_on("127.0.0.1:0".parse().unwrap());
    let mut cfg = config(&[o.addr()]);
    cfg.groups[GroupId::new(0)].keepalive = 0;
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    for _ in 0..5 {
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(o.connections(), 5);
}

#[test]
fn idle_pooled_connections_are_closed_after_the_timeout() {
    let o = origin_on("127.0.0.1:0".parse().unwrap());
    let mut cfg = config(&[o.addr()]);
    cfg.groups[GroupId::new(0)].keepalive_timeout = Duration::from_millis(100);
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    assert_eq!(c.get("/").status, 200);
    assert!(
        eventually(WAIT, || o.open_connections() == 0),
        "pooled connection still open"
    );
    assert_eq!(c.get("/").status, 200);
    assert_eq!(o.connections(), 2);
}

/// `keepalive` bounds the idle connections kept at rest, not within a burst: eight requests in
/// flight at once give back eight connections together, and the next eight reuse all of them
/// (before, six were closed on the way back and six requests connected again); once the burst
/// is over the surplus is closed and `keepalive` stay.
#[test]
fn a_burst_reuses_its_connections_and_its_surplus_is_closed_after() {
    const BURST: usize = 8;
    let o = origin_on("127.0.0.1:0".parse().unwrap());
    let mut cfg = config(&[o.addr()]);
    cfg.groups[GroupId::new(0)].keepalive = 2;
    let p = Proxy::start(cfg);
    let mut clients: Vec<_> = (0..BURST).map(|_| p.connect()).collect();
    for round in 0..2 {
        // Every request waits at the origin until all have arrived there: eight connections
        // in use at once.
        for c in &mut clients {
            c.send(b"GET /?delay=200ms HTTP/1.1\r\nHost: t\r\n\r\n");
        }
        for c in &mut clients {
            assert_eq!(c.response().status, 200, "round {round}");
        }
    }
    assert_eq!(o.requests(), 2 * BURST as u64);
    assert_eq!(
        o.connections(),
        BURST as u64,
        "the second burst connected again instead of reusing the first's connections"
    );
    assert!(
        eventually(WAIT, || o.open_connections() == 2),
        "the surplus was not closed: {} open",
        o.open_connections()
    );
}

/// `max_conns` bounds the requests in flight on a server, and so its connections: eight
/// requests at once to a server with `max_conns = 2` go out two at a time over two
/// connections, the rest waiting in the queue; every one is answered. Without the cap the
/// origin sees eight connections (the test above).
#[test]
fn max_conns_queues_requests_beyond_it_and_opens_no_more_connections() {
    const BURST: usize = 8;
    let o = origin_on("127.0.0.1:0".parse().unwrap());
    let mut cfg = config(&[o.addr()]);
    cfg.groups[GroupId::new(0)].servers[ServerId::new(0)].max_conns = 2;
    let p = Proxy::start(cfg);
    let mut clients: Vec<_> = (0..BURST).map(|_| p.connect()).collect();
    for c in &mut clients {
        c.send(b"GET /?delay=100ms HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.response().status, 200, "client {i}");
    }
    assert_eq!(o.requests(), BURST as u64);
    assert_eq!(
        o.connections(),
        2,
        "more connections than max_conns were opened"
    );
}

/// A proxy to `upstream` with `max_conns = 1`, a queue limit (the connect timeout) of 800 ms
/// and an admin listener: the proxy and the admin address.
fn one_at_a_time(upstream: std::net::SocketAddr) -> (Proxy, std::net::SocketAddr) {
    let mut cfg = config(&[upstream]);
    cfg.groups[GroupId::new(0)].servers[ServerId::new(0)].max_conns = 1;
    cfg.timeouts.connect = Duration::from_millis(800);
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let p = Proxy::start(cfg);
    let admin = p.running().admin_addr().expect("admin address");
    (p, admin)
}

/// A request that finds its server at `max_conns` waits at most the connect timeout, then
/// gets 503 (HAProxy's queue timeout), never reaching the origin; the request holding the
/// room is answered. `/metrics` shows it queued, then its fault.
#[test]
fn a_request_queued_past_the_connect_timeout_gets_503() {
    let o = origin_on("127.0.0.1:0".parse().unwrap());
    let (p, admin) = one_at_a_time(o.addr());
    let mut holder = p.connect();
    holder.send(b"GET /?delay=3s HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(
        eventually(WAIT, || o.requests() == 1),
        "the first request never reached the origin"
    );
    let mut queued = p.connect();
    queued.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let waiting = |n: f64| {
        let m = tests::scrape::scrape(admin);
        m.iter()
            .any(|(k, v)| k.starts_with("proxy_upstream_queued{") && *v == n)
    };
    assert!(
        eventually(WAIT, || waiting(1.0)),
        "the request is not shown queued"
    );
    assert_eq!(queued.response().status, 503, "the queued request");
    assert_eq!(o.requests(), 1, "the queued request reached the origin");
    // Counted once the request's record ends (after its answer went out).
    let fault = r#"proxy_request_faults_total{kind="queue_timeout"}"#;
    assert!(
        eventually(WAIT, || tests::scrape::scrape(admin).get(fault)
            == Some(&1.0)),
        "the queue timeout is not counted"
    );
    assert!(waiting(0.0), "the queue is not empty after the timeout");
    assert_eq!(
        holder.response().status,
        200,
        "the request holding the room"
    );
    // The room is free again: the next request goes out.
    assert_eq!(p.connect().get("/").status, 200);
}

/// A request waiting for room under `max_conns` whose client leaves gives its place up there
/// and then (499), as one waiting for the answer does: it never goes to the server when its
/// turn comes, for nobody. The queue's limit (5 s) outlasts the wait for the leave to show.
#[test]
fn a_queued_request_whose_client_left_gives_its_place_up() {
    let gate = tests::gate::Gate::start();
    let mut cfg = config(&[gate.addr]);
    cfg.groups[GroupId::new(0)].servers[ServerId::new(0)].max_conns = 1;
    cfg.timeouts.connect = Duration::from_secs(5);
    cfg.admin = Some("127.0.0.1:0".parse().unwrap());
    let p = Proxy::start(cfg);
    let admin = p.running().admin_addr().expect("admin address");
    let metric = |key: &str| tests::scrape::value(&tests::scrape::scrape(admin), key);
    let mut holder = p.connect();
    holder.send(b"GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    let held = gate.next();
    let mut gone = p.connect();
    gone.send(b"GET /gone HTTP/1.1\r\nHost: t\r\n\r\n");
    let queued = r#"proxy_upstream_queued{group="default"}"#;
    assert!(
        eventually(WAIT, || metric(queued) == 1.0),
        "/gone never queued"
    );
    drop(gone);
    let (aborted, timed_out) = (
        r#"proxy_requests_total{route="/",code="4xx"}"#,
        r#"proxy_requests_total{route="/",code="5xx"}"#,
    );
    assert!(
        eventually(Duration::from_secs(20), || metric(aborted)
            + metric(timed_out)
            == 1.0),
        "the queued request never ended"
    );
    assert_eq!(
        (metric(aborted), metric(timed_out)),
        (1.0, 0.0),
        "ended as its client's abort, not at the queue's limit"
    );
    assert_eq!(metric(queued), 0.0);
    held.go.send(()).unwrap();
    assert_eq!(holder.response().status, 200);
    // The room is the next request's: the origin never saw /gone.
    let mut next = p.connect();
    next.send(b"GET /next HTTP/1.1\r\nHost: t\r\n\r\n");
    let arrival = gate.next();
    assert_eq!(arrival.path, "/next");
    arrival.go.send(()).unwrap();
    assert_eq!(next.response().status, 200);
}

/// A request body (`Content-Length`, up to the relay buffer's 64 KiB) is read whole before an
/// upstream is chosen for it: an upload that trickles holds no room under `max_conns` (nor an
/// upstream connection), so the next request gets its server at once instead of a 503 after
/// the queue's 800 ms; the upload goes out, body and all, when its body is in. The 100
/// Continue marks the moment: the proxy sends it as it starts to read the body.
#[test]
fn a_slow_upload_holds_no_room_while_its_body_arrives() {
    let o = origin_on("127.0.0.1:0".parse().unwrap());
    let (p, admin) = one_at_a_time(o.addr());
    let mut upload = p.connect();
    upload.send(
        b"POST /up?echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
    );
    upload.expect_100();
    upload.send(b"hello");
    assert_eq!(
        p.connect().get("/").status,
        200,
        "a request while an upload trickles"
    );
    let in_flight = |m: &std::collections::HashMap<String, f64>| {
        m.iter()
            .filter(|(k, _)| k.starts_with("proxy_upstream_in_flight{"))
            .map(|(_, v)| *v)
            .sum::<f64>()
    };
    assert_eq!(
        in_flight(&tests::scrape::scrape(admin)),
        0.0,
        "the trickling upload holds a room"
    );
    assert_eq!(
        o.requests(),
        1,
        "the upload reached the origin before its body"
    );
    // The origin echoes the request it got: the head, then the whole body.
    let echoed = |upload: &mut tests::inproc::Client, body: &[u8]| {
        let r = upload.response();
        assert_eq!(r.status, 200, "the upload");
        let tail = [&b"Content-Length: 10\r\n\r\n"[..], body].concat();
        assert!(
            r.body.ends_with(&tail),
            "the request the origin got: {:?}",
            String::from_utf8_lossy(&r.body)
        );
    };
    upload.send(b"world");
    echoed(&mut upload, b"helloworld");

    // Without Expect, the same: the head and part of the body first, the rest later.
    let mut upload = p.connect();
    upload.send(b"POST /up?echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhel");
    assert_eq!(p.connect().get("/").status, 200, "a request behind it");
    upload.send(b"lo, you");
    echoed(&mut upload, b"hello, you");

    // A chunked body too, and it reaches the origin re-framed with its length (its trailer
    // dropped, as nginx drops a buffered body's).
    let mut upload = p.connect();
    upload.send(
        b"POST /up?echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n",
    );
    assert_eq!(
        p.connect().get("/").status,
        200,
        "a request behind a chunked upload"
    );
    upload.send(b"7\r\nlo, you\r\n0\r\nX-Trailer: t\r\n\r\n");
    echoed(&mut upload, b"hello, you");
}

/// An origin whose connections close without an answer to their second request `/stale`, once
/// the test says so (`close`): a pooled connection the origin closed just as the proxy reused it.
/// `/slow` is answered after `SLOW`; everything else at once.
struct ClosesSecond {
    addr: std::net::SocketAddr,
    /// Second requests for `/stale` received so far.
    stale_seen: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    close: std::sync::mpsc::Sender<()>,
}

const SLOW: Duration = Duration::from_millis(1500);

impl ClosesSecond {
    fn start() -> ClosesSecond {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        use std::sync::{Arc, Mutex};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stale_seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (close, closing) = std::sync::mpsc::channel::<()>();
        let closing = Arc::new(Mutex::new(closing));
        let seen = stale_seen.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { return };
                let (seen, closing) = (seen.clone(), closing.clone());
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut n = 0;
                    loop {
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            let mut chunk = [0u8; 4096];
                            match conn.read(&mut chunk) {
                                Ok(0) | Err(_) => return,
                                Ok(k) => buf.extend_from_slice(&chunk[..k]),
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        buf.drain(..end + 4);
                        n += 1;
                        let path = head.split(' ').nth(1).unwrap_or("");
                        if path == "/stale" && n >= 2 {
                            seen.fetch_add(1, Ordering::SeqCst);
                            let _ = closing.lock().unwrap().recv();
                            return;
                        }
                        if path == "/slow" {
                            std::thread::sleep(SLOW);
                        }
                        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if conn.write_all(ok).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        ClosesSecond {
            addr,
            stale_seen,
            close,
        }
    }
}

/// A request whose pooled connection turns out closed keeps its server's `max_conns` room
/// for its resend: the request that queued for the room meanwhile waits its turn behind it,
/// and the resend is not sent to the back of the queue (where, behind a slow request, it
/// would time out with a 503 although it had been given the room).
#[test]
fn a_stale_connections_resend_keeps_its_room_at_max_conns() {
    use std::sync::atomic::Ordering;
    let o = ClosesSecond::start();
    // The queue's limit (800 ms): shorter than the slow request, long enough for the resend.
    let (p, admin) = one_at_a_time(o.addr);
    let mut a = p.connect();
    assert_eq!(a.get("/stale").status, 200, "the first request");
    // The second goes out on the pooled connection, which the origin holds unanswered.
    a.send(b"GET /stale HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(
        eventually(WAIT, || o.stale_seen.load(Ordering::SeqCst) == 1),
        "the second request never reached the origin on the pooled connection"
    );
    let mut b = p.connect();
    b.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(
        eventually(WAIT, || tests::scrape::scrape(admin)
            .iter()
            .any(|(k, v)| k.starts_with("proxy_upstream_queued{") && *v == 1.0)),
        "the other request is not shown queued"
    );
    // The origin closes the pooled connection: the GET goes again, on a new connection.
    o.close.send(()).unwrap();
    assert_eq!(a.response().status, 200, "the stale connection's resend");
    assert_eq!(b.response().status, 200, "the request that queued");
}

/// The restarted server's stale pooled connection fails a GET, which is retried (on the same
/// server if the connection was used, else wherever round robin goes: the pool may notice the
/// close first); and the stale connection does not mark the server failed
/// (max_fails 1): round robin keeps giving it every other request.
#[test]
fn stale_pooled_connection_is_retried_for_idempotent_requests() {
    let mut a = Restarting::new();
    let b = origin_on("127.0.0.1:0".parse().unwrap());
    let p = Proxy::start(config(&[a.addr(), b.addr()]));
    let mut c = p.connect();
    // One pooled connection to each server.
    assert_eq!(c.get("/").status, 200);
    assert_eq!(c.get("/").status, 200);
    assert_eq!(b.requests(), 1);
    // The first server restarts on the same port: its pooled connection is now closed.
    let second = a.restart();
    let r = c.get("/");
    assert_eq!(r.status, 200, "retried");
    assert_eq!(second.requests() + b.requests(), 2, "delivered once");
    for _ in 0..10 {
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(second.requests() + b.requests(), 12);
    assert!(
        second.requests() >= 4,
        "the restarted server was marked failed by its stale connection: {} of 10",
        second.requests()
    );
}

#[test]
fn stale_pooled_connection_is_not_retried_for_post() {
    let mut a = Restarting::new();
    let p = Proxy::start(config(&[a.addr()]));
    let mut c = p.connect();
    assert_eq!(c.get("/").status, 200);
    let second = a.restart();
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    let r = c.response();
    // Which happens depends on how long the connection sat idle (a connection idle past
    // `check_after` is checked before reuse): found closed before anything was sent, the POST
    // goes on a fresh connection (200, delivered once); sent on the stale connection, it is
    // not retried (502, never delivered). Never two deliveries, never a 200 without one.
    match r.status {
        200 => assert_eq!(second.complete_requests(), 1),
        502 => {
            assert_eq!(r.header("connection"), Some("close"));
            assert_eq!(second.requests(), 0, "a POST already sent was retried");
        }
        other => panic!("status {other}"),
    }
}

#[test]
fn connections_past_the_limit_wait_in_the_backlog() {
    let o = origin_on("127.0.0.1:0".parse().unwrap());
    let mut cfg = config(&[o.addr()]);
    cfg.limits.max_connections = 1;
    let p = Proxy::start(cfg);
    let mut first = p.connect();
    assert_eq!(first.get("/").status, 200);
    let mut second = p.connect();
    second.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    second
        .stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut probe = [0u8; 1];
    let waited = std::io::Read::read(&mut second.stream, &mut probe);
    // Nothing within the wait, and the connection still open (not closed, not reset).
    assert!(
        matches!(&waited, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "the second connection was served (or closed) while the first held the slot: {waited:?}"
    );
    second
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    drop(first);
    assert_eq!(second.response().status, 200);
}

/// The origin closed a pooled connection while it sat idle (its keep-alive timeout is shorter
/// than ours: Apache's is 5 s). A POST cannot be retried once sent, so the proxy must notice
/// the close before reusing the connection, as nginx does, instead of answering 502.
#[test]
fn post_after_the_origin_closed_an_idle_pooled_connection_succeeds() {
    let mut a = Restarting::new();
    let mut cfg = config(&[a.addr()]);
    // `check_after` is half of this, capped at `keepalive_check`; the timeout itself stays
    // far away.
    cfg.groups[GroupId::new(0)].keepalive_timeout = Duration::from_secs(30);
    cfg.groups[GroupId::new(0)].keepalive_check = CHECK;
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    assert_eq!(c.get("/").status, 200);
    // Closes the pooled connection from the origin's side.
    let second = a.restart();
    // The behaviour under test: the connection has sat idle past the check threshold (a
    // sleep is at least that long however loaded the machine), within the pool's timeout.
    std::thread::sleep(IDLE);
    for i in 0..3 {
        c.send(b"POST /form HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
        assert_eq!(c.response().status, 200, "request {i}");
    }
    assert_eq!(second.requests(), 3);
    assert_eq!(second.connections(), 1);
}

/// An origin that sends bytes nobody asked for on an idle pooled connection (a broken server,
/// or the tail of a response it framed wrong). The proxy reads pooled plain connections
/// through a multishot receive, which takes such bytes off the socket where a peek no longer
/// sees them: the check before reuse must find them in the receive's queue, and the request
/// must go on a fresh connection, never be answered with those bytes.
#[test]
fn bytes_sent_on_an_idle_pooled_connection_keep_it_from_reuse() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let (sent_tx, sent_rx) = std::sync::mpsc::channel();
    let origin = std::thread::spawn(move || {
        // Read one request head (the tests' requests have no body).
        fn head(s: &mut std::net::TcpStream) {
            let mut got = Vec::new();
            let mut b = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut b).expect("read a request");
                assert!(n > 0, "the proxy closed before sending a request");
                got.extend_from_slice(&b[..n]);
            }
        }
        let ok = |body: &str| {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let (mut first, _) = l.accept().expect("first connection");
        // Two requests: the second is read through the receive armed for it, which stays
        // armed while the connection idles in the pool.
        for body in ["first", "again"] {
            head(&mut first);
            first.write_all(ok(body).as_bytes()).expect("answer");
        }
        // Then, unasked, a whole response's worth of bytes.
        std::thread::sleep(Duration::from_millis(100));
        first
            .write_all(ok("unasked").as_bytes())
            .expect("unasked bytes");
        sent_tx.send(()).expect("signal");
        let (mut second, _) = l.accept().expect("second connection");
        head(&mut second);
        second.write_all(ok("second").as_bytes()).expect("answer");
        // Keep both open until the proxy is done.
        let mut rest = [0u8; 64];
        let _ = second.read(&mut rest);
        drop(first);
    });
    let mut cfg = config(&[addr]);
    cfg.groups[GroupId::new(0)].keepalive_timeout = Duration::from_secs(30);
    cfg.groups[GroupId::new(0)].keepalive_check = CHECK;
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    let r = c.get("/one");
    assert_eq!((r.status, &r.body[..]), (200, &b"first"[..]));
    let r = c.get("/again");
    assert_eq!((r.status, &r.body[..]), (200, &b"again"[..]));
    sent_rx
        .recv_timeout(WAIT)
        .expect("the origin sent its unasked bytes");
    // Idle past the check threshold, within the pool's timeout.
    std::thread::sleep(IDLE);
    let r = c.get("/three");
    assert_eq!(
        (r.status, String::from_utf8_lossy(&r.body).into_owned()),
        (200, "second".to_string()),
        "answered from the idle connection's unasked bytes"
    );
    drop(c);
    drop(p);
    origin.join().expect("origin thread");
}
