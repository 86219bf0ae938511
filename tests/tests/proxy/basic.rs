//! The proxy's main path against the scriptable origin: forwarding, keep-alive both sides,
//! pooling, balancing, pipelining, HTTP/1.0, Expect, limits, generated errors.

use proxy::config::Balance;
use shared::origin::expected_body;
use shared::runtime::DriverChoice;
use std::time::Duration;
use tests::inproc::{config, Proxy};
use tests::{eventually, ClosedPort};

/// Patience for an effect that should come promptly (generous: the machine is shared).
const WAIT: Duration = Duration::from_secs(10);

use tests::capturing_origin;

#[test]
fn keep_alive_both_sides_one_upstream_connection() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    for _ in 0..100 {
        let r = c.get("/");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, expected_body(64));
        assert_eq!(r.header("content-length"), Some("64"));
        assert_eq!(r.header("connection"), None);
    }
    assert_eq!(o.requests(), 100);
    assert_eq!(
        o.connections(),
        1,
        "the pooled upstream connection is reused"
    );
    p.stop();
}

#[test]
fn sequential_clients_share_the_pool() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    for _ in 0..20 {
        let mut c = p.connect();
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(o.requests(), 20);
    assert_eq!(o.connections(), 1);
}

#[test]
fn forwarded_request_byte_for_byte() {
    let o = capturing_origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(
        b"GET /p?q=1 HTTP/1.1\r\n\
          Host: example.com\r\n\
          Connection: keep-alive, X-Secret\r\n\
          X-Secret: s\r\n\
          Keep-Alive: timeout=5\r\n\
          Proxy-Connection: keep-alive\r\n\
          TE: trailers\r\n\
          Upgrade: h2c\r\n\
          X-Forwarded-For: 10.1.1.1\r\n\
          X-Real-IP: 6.6.6.6\r\n\
          X-Forwarded-Proto: https\r\n\
          Accept: */*\r\n\
          X-Custom: a b\r\n\r\n",
    );
    assert_eq!(c.response().status, 200);
    let got = o.captured();
    assert_eq!(got.len(), 1);
    assert_eq!(
        String::from_utf8_lossy(&got[0]),
        "GET /p?q=1 HTTP/1.1\r\n\
         Host: example.com\r\n\
         Accept: */*\r\n\
         X-Custom: a b\r\n\
         X-Forwarded-For: 10.1.1.1, 127.0.0.1\r\n\
         X-Real-IP: 127.0.0.1\r\n\
         X-Forwarded-Proto: http\r\n\r\n"
    );
}

#[test]
fn forwarded_headers_can_be_turned_off_and_host_replaced() {
    let o = capturing_origin();
    let mut cfg = config(&[o.addr()]);
    cfg.headers.preserve_host = false;
    cfg.headers.x_forwarded_for = false;
    cfg.headers.x_real_ip = false;
    cfg.headers.x_forwarded_proto = false;
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    c.send(
        b"GET http://abs.example/x HTTP/1.1\r\nHost: ignored\r\nX-Forwarded-For: 1.1.1.1\r\n\r\n",
    );
    assert_eq!(c.response().status, 200);
    let got = o.captured();
    assert_eq!(
        String::from_utf8_lossy(&got[0]),
        format!(
            "GET /x HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1\r\nHost: {}\r\n\r\n",
            o.addr()
        )
    );
}

#[test]
fn response_hop_by_hop_headers_are_removed() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    let r = c.get(
        "/?header=Keep-Alive:timeout%3D9&header=X-Hop:1&header=Connection:X-Hop&header=X-End:2\
         &header=Proxy-Connection:keep-alive&header=TE:trailers&header=Trailer:X-T\
         &header=Upgrade:h2c",
    );
    assert_eq!(r.status, 200);
    for hop in [
        "keep-alive",
        "x-hop",
        "connection",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    ] {
        assert_eq!(r.header(hop), None, "{hop} was forwarded");
    }
    assert_eq!(r.header("x-end"), Some("2"));
    assert_eq!(r.body, expected_body(64));
}

#[test]
fn round_robin_splits_evenly() {
    let (a, b) = (tests::origin(), tests::origin());
    let p = Proxy::start(config(&[a.addr(), b.addr()]));
    let mut c = p.connect();
    for _ in 0..100 {
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(a.requests(), 50);
    assert_eq!(b.requests(), 50);
}

/// Least-conn sends each request to the server with fewer requests in flight: while one
/// request is held at one server, every other request goes to the other one.
#[test]
fn least_conn_avoids_the_server_with_a_request_in_flight() {
    let (a, b) = (tests::origin(), tests::origin());
    let mut cfg = config(&[a.addr(), b.addr()]);
    cfg.groups[proxy::config::GroupId::new(0)].balance = Balance::LeastConn;
    // The held request is ended by the shutdown when the test is over.
    cfg.timeouts.shutdown = Duration::from_millis(100);
    let p = Proxy::start(cfg);
    let mut held = p.connect();
    held.send(b"GET /?hang=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(
        eventually(WAIT, || a.requests() + b.requests() == 1),
        "the held request never reached a server"
    );
    let (busy, free) = if a.requests() == 1 {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let mut c = p.connect();
    for _ in 0..20 {
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(
        (busy.requests(), free.requests()),
        (1, 20),
        "requests went to the server with one in flight"
    );
    drop(held);
}

#[test]
fn random2_uses_both_servers() {
    let (a, b) = (tests::origin(), tests::origin());
    let mut cfg = config(&[a.addr(), b.addr()]);
    cfg.groups[proxy::config::GroupId::new(0)].balance = Balance::Random2;
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    for _ in 0..200 {
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(a.requests() + b.requests(), 200);
    assert!(
        a.requests() > 0 && b.requests() > 0,
        "{} / {}",
        a.requests(),
        b.requests()
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(
        b"GET /?size=1 HTTP/1.1\r\nHost: t\r\n\r\n\
          POST /?size=2 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc\
          GET /?size=3 HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    for n in 1..=3 {
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, expected_body(n));
    }
    assert_eq!(o.requests(), 3);
}

#[test]
fn http10_keep_alive_when_length_known() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    for _ in 0..3 {
        c.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), Some("keep-alive"));
        assert_eq!(r.header("content-length"), Some("64"));
    }
    // Unknown length (chunked upstream): close-delimited for an HTTP/1.0 client.
    c.send(b"GET /?framing=chunked&chunk=10&size=95 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.response();
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.header("transfer-encoding"), None);
    assert_eq!(r.body, expected_body(95));
    c.assert_closed();
}

#[test]
fn http10_without_keep_alive_closes() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(b"GET / HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.body, expected_body(64));
    c.assert_closed();
}

#[test]
fn connection_close_from_client_is_honoured() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = c.response();
    assert_eq!(r.header("connection"), Some("close"));
    c.assert_closed();
    // The upstream connection is still pooled.
    let mut c = p.connect();
    assert_eq!(c.get("/").status, 200);
    assert_eq!(o.connections(), 1);
}

/// A finished connection's fd is closed directly (`client::close_now`), which on the epoll
/// driver also takes it out of the poller: the worker must survive it there too.
#[test]
fn connection_close_is_clean_on_the_epoll_driver() {
    let o = tests::origin();
    let mut cfg = config(&[o.addr()]);
    cfg.runtime.driver = DriverChoice::Epoll;
    let p = Proxy::start(cfg);
    for _ in 0..3 {
        let mut c = p.connect();
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), Some("close"));
        c.assert_closed();
    }
    let mut c = p.connect();
    assert_eq!(c.get("/").status, 200);
    assert_eq!(c.get("/").status, 200);
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let o = capturing_origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    c.expect_100();
    c.send(b"hello");
    let r = c.response();
    assert_eq!(r.status, 200);
    let got = o.captured();
    let req = String::from_utf8_lossy(&got[0]);
    assert!(!req.to_ascii_lowercase().contains("expect"), "{req}");
    assert!(req.ends_with("Content-Length: 5\r\n\r\nhello"), "{req}");
}

#[test]
fn body_limit_gives_413() {
    let o = tests::origin();
    let mut cfg = config(&[o.addr()]);
    cfg.limits.max_body = Some(10);
    let p = Proxy::start(cfg);
    // Declared too large: refused before anything reaches the origin.
    let mut c = p.connect();
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n01234567890");
    let r = c.response();
    assert_eq!(r.status, 413);
    assert_eq!(r.header("connection"), Some("close"));
    c.assert_closed();
    assert_eq!(o.requests(), 0);
    // Chunked beyond the limit.
    let mut c = p.connect();
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n8\r\n01234567\r\n0\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 413);
    // Within the limit.
    let mut c = p.connect();
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789");
    assert_eq!(c.response().status, 200);
}

/// A small chunked body is read whole before the request goes upstream, then sent with its
/// length: extensions and trailer dropped (nginx does the same with a buffered body).
#[test]
fn a_small_chunked_request_body_is_relayed_with_its_length() {
    let o = capturing_origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(
        b"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n",
    );
    c.send(b"6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
    assert_eq!(c.response().status, 200);
    let got = o.captured();
    let req = String::from_utf8_lossy(&got[0]);
    assert!(
        !req.to_ascii_lowercase().contains("transfer-encoding"),
        "{req}"
    );
    assert!(
        req.ends_with("\r\nContent-Length: 11\r\n\r\nhello world"),
        "{req}"
    );
}

#[test]
fn chunked_and_close_delimited_responses_are_rechunked() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    let r = c.get("/?framing=chunked&chunk=100&size=1000");
    assert!(r.chunked);
    assert_eq!(r.body, expected_body(1000));
    let r = c.get("/?framing=close&size=5000");
    assert!(
        r.chunked,
        "close-delimited upstream body re-framed for an HTTP/1.1 client"
    );
    assert_eq!(r.body, expected_body(5000));
    // The client connection survives both.
    assert_eq!(c.get("/").body, expected_body(64));
}

#[test]
fn head_request_keeps_content_length() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(b"HEAD /?size=1234 HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.try_response(shared::http::RequestMethod::Head).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("1234"));
    assert!(r.body.is_empty());
    assert_eq!(c.get("/").status, 200);
}

#[test]
fn no_route_gives_404() {
    let o = tests::origin();
    let mut cfg = config(&[o.addr()]);
    cfg.routes[proxy::config::RouteId::new(0)].path_prefix = "/api/".into();
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    let r = c.get("/other");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("connection"), Some("close"));
    let mut c = p.connect();
    assert_eq!(c.get("/api/x").status, 200);
}

#[test]
fn every_server_down_gives_502_at_once() {
    let (d1, d2) = (ClosedPort::new(), ClosedPort::new());
    let mut cfg = config(&[d1.addr(), d2.addr()]);
    // Long enough that waiting for it would show; refused connects must not wait at all.
    cfg.timeouts.connect = Duration::from_secs(30);
    let p = Proxy::start(cfg);
    let t = std::time::Instant::now();
    let mut c = p.connect();
    let r = c.get("/");
    assert_eq!(r.status, 502);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

/// The dead server is tried once, marked failed (max_fails 1, fail_timeout 10 s) and then
/// skipped: the proxy's connect attempts are that one refusal and the pooled connection to
/// the live server, however many requests follow.
#[test]
fn one_server_down_is_skipped() {
    let o = tests::origin();
    let dead = ClosedPort::new();
    let p = Proxy::start(config(&[dead.addr(), o.addr()]));
    let mut c = p.connect();
    for _ in 0..10 {
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(o.requests(), 10);
    assert_eq!(o.connections(), 1);
    let connects: u64 = p
        .running()
        .stats()
        .iter()
        .map(|s| s.upstream_connects.get())
        .sum();
    assert_eq!(connects, 2, "the dead server was tried again");
}

#[test]
fn silent_upstream_gives_504() {
    let o = tests::origin();
    let mut cfg = config(&[o.addr()]);
    cfg.timeouts.read = Duration::from_millis(200);
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    let r = c.get("/?hang=1");
    assert_eq!(r.status, 504);
    assert_eq!(r.header("connection"), Some("close"));
}

#[test]
fn upstream_closing_mid_body_aborts_the_client() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(b"GET /?size=100000&abort_after=1000 HTTP/1.1\r\nHost: t\r\n\r\n");
    let err = c
        .try_response(shared::http::RequestMethod::Other)
        .unwrap_err();
    assert!(err.contains("truncated"), "{err}");
    let mut c = p.connect();
    c.send(
        b"GET /?framing=chunked&chunk=100&size=100000&abort_after=1000 HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    let err = c
        .try_response(shared::http::RequestMethod::Other)
        .unwrap_err();
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn bad_requests_get_a_well_formed_error() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    for (req, status) in [
        (&b"GET / HTTP/1.1\r\n\r\n"[..], 400),
        (
            b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            400,
        ),
        (b"GET / HTTP/3.0\r\nHost: t\r\n\r\n", 505),
        (b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 501),
    ] {
        let mut c = p.connect();
        c.send(req);
        let r = c.response();
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(req));
        assert_eq!(r.header("connection"), Some("close"));
        let len = r.body.len().to_string();
        assert_eq!(r.header("content-length"), Some(len.as_str()));
        c.assert_closed();
    }
    assert_eq!(o.requests(), 0);
}

#[test]
fn header_timeout_gives_408_and_idle_connections_close() {
    let o = tests::origin();
    let mut cfg = config(&[o.addr()]);
    cfg.timeouts.header = Duration::from_millis(200);
    cfg.timeouts.idle = Duration::from_millis(200);
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    c.send(b"GET / HTTP/1.1\r\n");
    let r = c.response();
    assert_eq!(r.status, 408);
    // A connection that sends nothing is closed quietly.
    let mut c = p.connect();
    assert!(c.read_to_close().is_empty());
    let mut c = p.connect();
    assert_eq!(c.get("/").status, 200);
    c.assert_closed(); // the idle timeout closes quietly
}

/// A request whose body is still coming when the shutdown starts cannot have finished early:
/// the idle connection closing is the sign that the shutdown began, and only then does the
/// client send its body (the proxy's 100 Continue says it is reading it: a small body is read
/// whole before the request goes upstream).
#[test]
fn shutdown_closes_idle_connections_and_finishes_in_flight() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut idle = p.connect();
    assert_eq!(idle.get("/").status, 200);
    let mut busy = p.connect();
    busy.send(
        b"POST /?size=5 HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    );
    busy.expect_100();
    p.running().trigger_shutdown();
    idle.assert_closed();
    busy.send(b"abcd");
    let r = busy.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, expected_body(5));
    assert_eq!(r.header("connection"), Some("close"));
    busy.assert_closed();
    assert_eq!(o.body_bytes(), 4);
    p.stop();
}

#[test]
fn heads_with_many_fields_pass_both_ways() {
    let o = capturing_origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    let mut req = String::from("GET /?");
    for i in 0..60 {
        req.push_str(&format!("header=X-R{i}:{i}&"));
    }
    req.push_str(" HTTP/1.1\r\nHost: t\r\n");
    for i in 0..60 {
        req.push_str(&format!("X-Q{i}: {i}\r\n"));
    }
    req.push_str("\r\n");
    c.send(req.as_bytes());
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-r59"), Some("59"));
    assert_eq!(
        r.headers
            .iter()
            .filter(|(n, _)| n.starts_with("X-R"))
            .count(),
        60
    );
    let got = String::from_utf8_lossy(&o.captured()[0]).into_owned();
    assert!(
        got.contains("X-Q0: 0\r\n") && got.contains("X-Q59: 59\r\n"),
        "{got}"
    );
}

/// Two workers on one port: connections spread over both (the kernel hashes each connection
/// to one SO_REUSEPORT socket), and both serve. Fresh connections are opened until each worker
/// has accepted one; with one worker left out, 200 connections never get there.
#[test]
fn several_workers_share_the_port() {
    let o = tests::origin();
    let mut cfg = config(&[o.addr()]);
    cfg.runtime.workers = 2;
    let p = Proxy::start(cfg);
    let stats = p.running().stats().to_vec();
    assert_eq!(stats.len(), 2);
    let mut open = Vec::new();
    while stats.iter().any(|s| s.requests.get() == 0) {
        assert!(
            open.len() < 200,
            "one worker never served: {:?}",
            stats.iter().map(|s| s.requests.get()).collect::<Vec<_>>()
        );
        let mut c = p.connect();
        assert_eq!(c.get("/").status, 200);
        open.push(c); // held open, so every connection has its own source port
    }
    let opened = open.len() as u64;
    drop(open);
    // Concurrent clients on both workers.
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let addr = p.addr;
            std::thread::spawn(move || {
                let mut c = tests::inproc::Client::connect(addr);
                for _ in 0..10 {
                    assert_eq!(c.get("/").status, 200);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(o.requests(), 80 + opened);
    let want = 80 + opened;
    let served = tests::settled(WAIT, &want, || {
        stats.iter().map(|s| s.requests.get()).sum::<u64>()
    });
    assert_eq!(served, want);
    p.stop();
}

/// The proxy's own error answers to HEAD are the head alone (RFC 9110 9.3.2), its
/// Content-Length what a GET would get: a head refused before routing (413 over max_body, 400
/// for a NUL in the path) and an exchange that failed (502 from a server that refuses).
/// Before, each came with its one-line body ("413 Content Too Large\n"), which a client
/// reads as the start of its next response.
#[test]
fn own_error_answers_to_head_are_heads_only() {
    let o = tests::origin();
    let mut cfg = config(&[o.addr()]);
    cfg.limits.max_body = Some(10);
    let refusing = Proxy::start(cfg);
    let dead = ClosedPort::new();
    let failing = Proxy::start(config(&[dead.addr()]));
    let cases = [
        (
            &refusing,
            "HEAD / HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n",
            413,
        ),
        (&refusing, "HEAD /a/%00 HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (&failing, "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", 502),
    ];
    for (p, req, status) in cases {
        let mut c = tests::raw::Client::connect(p.addr);
        c.send(req.as_bytes()).unwrap();
        let reply = c.until_close(WAIT);
        let text = reply.text();
        assert!(
            text.starts_with(&tests::raw::status_line(status)),
            "{req:?}: {text:?}"
        );
        let end = text.find("\r\n\r\n").map(|i| i + 4);
        assert_eq!(end, Some(text.len()), "{req:?}: the head alone: {text:?}");
        assert!(text.contains("\r\nContent-Length: "), "{req:?}: {text:?}");
        assert!(
            text.contains("\r\nConnection: close\r\n"),
            "{req:?}: {text:?}"
        );
        assert_eq!(reply.end, tests::raw::End::Closed, "{req:?}");
    }
    assert_eq!(o.requests(), 0);
}
