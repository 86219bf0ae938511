//! What a request leaves in the access log and the counters from the client's side, compared
//! with nginx's lines for the same bytes (`$request`, `$status`, `$bytes_sent`,
//! `$request_length`): bodies counted as they were read (chunk framing included), heads the
//! proxy refused or never finished reading (the header timeout, the client's end), values cut
//! to the log's 2048 bytes.

use std::net::{Shutdown, SocketAddr};
use tests::logged::Logged;
use tests::raw::{self, End, WAIT};

/// A POST of a 4,096-byte body in one chunk, as nginx's test sent it.
fn chunked_post(close: bool) -> Vec<u8> {
    let close = if close { "Connection: close\r\n" } else { "" };
    let head = format!("POST / HTTP/1.1\r\nHost: x\r\n{close}Transfer-Encoding: chunked\r\n\r\n");
    [
        head.as_bytes(),
        b"1000\r\n",
        &[b'a'; 4096],
        b"\r\n0\r\n\r\n",
    ]
    .concat()
}

/// Send `req` and read until the proxy closes: the statuses of the responses.
fn statuses(addr: SocketAddr, req: &[u8]) -> Vec<u16> {
    let r = raw::exchange(addr, req, WAIT);
    assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
    r.responses().iter().map(|r| r.status).collect()
}

/// Send `req`, end the sending side, and read until the proxy closes: what came back.
fn then_fin(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut c = raw::Client::connect(addr);
    c.send(req).expect("sent");
    c.stream.shutdown(Shutdown::Write).expect("half-closed");
    let r = c.until_close(WAIT);
    assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
    r.bytes
}

#[test]
fn request_length_and_received_bytes_count_bodies_as_read() {
    let origin = tests::origin();
    let mut p = Logged::start(&[origin.addr()], &[]);
    // nginx: "POST / HTTP/1.1" 200 ... rl=4184, the head and the body with its framing. It
    // was 75 here (the head alone), and the counter moved by as much.
    let post = chunked_post(true);
    assert_eq!(post.len(), 4184);
    let left = p.after(1, |addr| assert_eq!(statuses(addr, &post), [200]));
    assert_eq!(left.lines[0]["request_length"], 4184, "{left:?}");
    assert_eq!(left.moved("proxy_received_bytes_total"), 4184.0);

    // A GET pipelined behind the body, in the same write, is a request of its own.
    let get = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let both = [&chunked_post(false)[..], get].concat();
    let left = p.after(2, |addr| assert_eq!(statuses(addr, &both), [200, 200]));
    let lengths: Vec<_> = left
        .lines
        .iter()
        .map(|l| l["request_length"].clone())
        .collect();
    assert_eq!(lengths, [both.len() - get.len(), get.len()], "{left:?}");
    assert_eq!(left.moved("proxy_received_bytes_total"), both.len() as f64);

    // A Content-Length body cut short by the client's end: what came of it.
    let cut = [
        &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"[..],
        &[b'a'; 100],
    ]
    .concat();
    let left = p.after(1, |addr| assert!(then_fin(addr, &cut).is_empty()));
    assert_eq!(left.lines[0]["request_length"], cut.len(), "{left:?}");
    assert_eq!(left.moved("proxy_received_bytes_total"), cut.len() as f64);

    // Heads the parser refuses count the bytes read: they were 0 in both.
    let bad = b"GET / HTTP/1.1 junk\r\nHost: x\r\n\r\n";
    let left = p.after(1, |addr| assert_eq!(statuses(addr, bad), [400]));
    assert_eq!(left.lines[0]["request_length"], bad.len(), "{left:?}");
    assert_eq!(left.moved("proxy_received_bytes_total"), bad.len() as f64);
    let huge = [
        &b"GET / HTTP/1.1\r\nHost: x\r\nX: "[..],
        &[b'a'; 70_000],
        b"\r\n\r\n",
    ]
    .concat();
    let left = p.after(1, |addr| assert_eq!(statuses(addr, &huge), [431]));
    let read = left.moved("proxy_received_bytes_total");
    // Read up to the head limit (64 KiB, give or take a read), the rest drained unread.
    assert!((65_536.0..=huge.len() as f64).contains(&read), "{read}");
    assert_eq!(left.lines[0]["request_length"], read as u64, "{left:?}");
    p.stop();
}

#[test]
fn a_head_cut_by_the_header_timeout_is_logged_with_its_request_line() {
    let origin = tests::origin();
    // Long enough that the two-read case's second send comes within it on a loaded machine
    // (at 300 ms a busy test thread missed it: only the first read was logged).
    let mut p = Logged::start(&[origin.addr()], &["--header-timeout", "1500ms"]);
    // nginx: "GET / HTTP/1.1" 408 bs=0 rl=25. Here the line said "-" (null) and 0 bytes: the
    // read the timeout dropped took the head's bytes with it.
    let partial = b"GET / HTTP/1.1\r\nHost: x\r\n";
    let left = p.after(1, |addr| assert_eq!(statuses(addr, partial), [408]));
    let l = &left.lines[0];
    assert_eq!(
        (&l["request"], &l["status"], &l["request_length"]),
        (&"GET / HTTP/1.1".into(), &408.into(), &25.into()),
        "{l}"
    );
    assert_eq!(l["fault"], "header_timeout", "{l}");
    assert_eq!(left.moved("proxy_received_bytes_total"), 25.0);

    // In two reads: the bytes of both are kept.
    let left = p.after(1, |addr| {
        let mut c = raw::Client::connect(addr);
        c.send(b"GET /two HTTP/1.1\r\n").expect("sent");
        tests::wait_until_peer_read(&c.stream, WAIT);
        c.send(b"Host: x\r\nUser-Agent: two\r\n").expect("sent");
        let r = c.until_close(WAIT);
        assert_eq!(r.responses()[0].status, 408, "{}", raw::show(&r));
    });
    let l = &left.lines[0];
    assert_eq!(l["request"], "GET /two HTTP/1.1", "{l}");
    assert_eq!(l["user_agent"], "two", "{l}");
    assert_eq!(l["request_length"], 19 + 26, "{l}");

    // The request line itself unfinished: no request line (nginx's "-"), its bytes counted.
    let left = p.after(1, |addr| assert_eq!(statuses(addr, b"GET /abc"), [408]));
    let l = &left.lines[0];
    assert_eq!(
        (&l["request"], &l["request_length"]),
        (&serde_json::Value::Null, &8.into()),
        "{l}"
    );
    p.stop();
}

#[test]
fn empty_lines_after_a_request_then_the_clients_end_are_no_request() {
    // RFC 9112 2.2: empty lines before a request line are ignored. A client ending its
    // request with an extra CRLF, then closing, was logged and counted a second, phantom
    // request: "-" 400 0 (route "(none)", 4xx).
    let origin = tests::origin();
    let mut p = Logged::start(&[origin.addr()], &[]);
    let left = p.after(2, |addr| {
        let answered = then_fin(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\r\n");
        assert!(answered.starts_with(b"HTTP/1.1 200"), "{answered:?}");
        // A request on another connection after that one ended: counted after its end.
        let next = then_fin(
            addr,
            b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(next.starts_with(b"HTTP/1.1 200"), "{next:?}");
    });
    let statuses: Vec<_> = left.lines.iter().map(|l| l["status"].clone()).collect();
    assert_eq!(statuses, [200, 200], "{:?}", left.lines);
    assert_eq!(
        left.moved(r#"proxy_requests_total{route="(none)",code="4xx"}"#),
        0.0,
        "{left:?}"
    );
}

#[test]
fn a_head_cut_by_the_clients_end_is_logged_as_nginx_logs_it() {
    let origin = tests::origin();
    let mut p = Logged::start(&[origin.addr()], &[]);
    // nginx: "client prematurely closed connection", nothing sent, "GET / HTTP/1.1" 400 bs=0
    // rl=43. Here nothing was sent either, but nothing was logged or counted.
    let partial = b"GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: cut\r\n";
    let left = p.after(1, |addr| assert!(then_fin(addr, partial).is_empty()));
    let l = &left.lines[0];
    assert_eq!(
        (&l["request"], &l["status"], &l["bytes_sent"]),
        (&"GET / HTTP/1.1".into(), &400.into(), &0.into()),
        "{l}"
    );
    assert_eq!(
        (&l["request_length"], &l["user_agent"], &l["fault"]),
        (&partial.len().into(), &"cut".into(), &"client_gone".into()),
        "{l}"
    );
    assert_eq!(
        left.moved(r#"proxy_requests_total{route="(none)",code="4xx"}"#),
        1.0,
        "{left:?}"
    );
    assert_eq!(
        left.moved("proxy_received_bytes_total"),
        partial.len() as f64
    );

    // The request line itself unfinished: no request line (nginx's "-"), its bytes counted.
    let left = p.after(1, |addr| assert!(then_fin(addr, b"GET /abc").is_empty()));
    let l = &left.lines[0];
    assert_eq!(
        (&l["request"], &l["status"], &l["request_length"]),
        (&serde_json::Value::Null, &400.into(), &8.into()),
        "{l}"
    );

    // Behind a whole request on a keep-alive connection: that one is answered, the cut one
    // counts its own bytes only.
    let whole = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let cut = b"GET /next HTTP/1.1\r\nHo";
    let both = [&whole[..], cut].concat();
    let left = p.after(2, |addr| {
        let mut c = raw::Client::connect(addr);
        c.send(&both).expect("sent");
        c.stream.shutdown(Shutdown::Write).expect("half-closed");
        let r = c.until_close(WAIT);
        let statuses: Vec<_> = r.responses().iter().map(|r| r.status).collect();
        assert_eq!(
            (r.end, statuses),
            (End::Closed, vec![200]),
            "{}",
            raw::show(&r)
        );
    });
    let got: Vec<_> = left
        .lines
        .iter()
        .map(|l| {
            (
                l["request"].clone(),
                l["status"].clone(),
                l["request_length"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("GET / HTTP/1.1".into(), 200.into(), whole.len().into()),
            ("GET /next HTTP/1.1".into(), 400.into(), cut.len().into()),
        ],
        "{left:?}"
    );
    p.stop();
}

#[test]
fn values_over_the_cap_are_cut_between_characters() {
    let origin = tests::origin();
    let mut p = Logged::start(&[origin.addr()], &[]);
    // Cut at 2048 bytes, inside a character: the value was no longer UTF-8, so every byte of
    // it was escaped on its own, "aaa…\u00c3" for "aaa…é", one U+00XX per byte of "日".
    let cases = [
        ("a".repeat(2047) + "é", "a".repeat(2047)),
        ("日".repeat(700), "日".repeat(682)),
        ("b".repeat(2046) + "😀x", "b".repeat(2046)),
        ("c".repeat(2048) + "é", "c".repeat(2048)),
    ];
    for (agent, logged) in cases {
        let req = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: {agent}\r\nConnection: close\r\n\r\n"
        );
        let left = p.after(1, |addr| assert_eq!(statuses(addr, req.as_bytes()), [200]));
        let got = left.lines[0]["user_agent"]
            .as_str()
            .expect("a string")
            .to_string();
        let tail = |s: &str| s.chars().rev().take(4).collect::<Vec<_>>();
        assert!(
            got == logged,
            "{} bytes logged, ending {:?} (reversed), for {} bytes ending {:?}",
            got.len(),
            tail(&got),
            agent.len(),
            tail(&agent)
        );
    }
    p.stop();
}

#[test]
fn a_504_after_the_read_timeout_logs_the_time_spent_upstream() {
    // nginx: `$upstream_response_time` is the time spent on the server that timed out (the
    // read timeout, give or take), `$upstream_header_time` "-". It was null here: only an
    // answered attempt set it.
    let silent = tests::tls_server::silent_server();
    let mut p = Logged::start(&[silent], &["--read-timeout", "300ms"]);
    let get = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let left = p.after(1, |addr| assert_eq!(statuses(addr, get), [504]));
    let l = &left.lines[0];
    assert_eq!(l["upstream_addr"], silent.to_string(), "{l}");
    let spent = l["upstream_response_time"][0].as_f64();
    assert!(spent.is_some_and(|t| t >= 0.3), "{l}");
    assert_eq!(l["upstream_header_time"], serde_json::json!([null]), "{l}");
    // nginx's `$upstream_status` for an attempt that timed out: 504.
    assert_eq!(l["upstream_status"], serde_json::json!([504]), "{l}");
}

#[test]
fn a_retried_request_logs_every_server_tried_in_order() {
    // nginx: `$upstream_addr` "A, B" for a request refused by A and answered by B, and
    // `$upstream_status`, `$upstream_header_time`, `$upstream_response_time` one entry per
    // attempt, a refused attempt's status 502 (nginx's ngx_http_upstream_next). Only B was
    // logged here.
    let refused = tests::ClosedPort::new();
    let origin = tests::origin();
    let mut p = Logged::start(&[refused.addr(), origin.addr()], &[]);
    let get = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let left = p.after(1, |addr| assert_eq!(statuses(addr, get), [200]));
    let l = &left.lines[0];
    let both = format!("{}, {}", refused.addr(), origin.addr());
    assert_eq!(l["upstream_addr"], both, "{l}");
    assert_eq!(l["upstream_status"], serde_json::json!([502, 200]), "{l}");
    let header = l["upstream_header_time"].as_array();
    assert!(
        header.is_some_and(|h| h.len() == 2 && h[0].is_null() && h[1].is_f64()),
        "{l}"
    );
    let spent = l["upstream_response_time"].as_array();
    assert!(
        spent.is_some_and(|t| t.len() == 2 && t.iter().all(|t| t.as_f64() >= Some(0.0))),
        "{l}"
    );
    // The refused server is down for a while now: the next request is tried once.
    let left = p.after(1, |addr| assert_eq!(statuses(addr, get), [200]));
    let l = &left.lines[0];
    assert_eq!(l["upstream_addr"], origin.addr().to_string(), "{l}");
    assert_eq!(l["upstream_status"], serde_json::json!([200]), "{l}");
    p.stop();
}

/// RFC 9112 3.2.4: the asterisk-form is OPTIONS's alone, and asks about the server as a whole,
/// which no route (a path prefix) stands for. The proxy answers 400 and closes for every
/// method, OPTIONS included, as nginx does (docs/CONFIGURATION.md, "What the proxy does with a
/// request"); `OPTIONS *` got 404, as though a route were missing. Nothing goes upstream; the
/// log has its line.
#[test]
fn an_asterisk_target_gets_400_and_a_close_whatever_the_method() {
    let origin = tests::capturing_origin();
    let mut p = Logged::start(&[origin.addr()], &[]);
    for req in [
        "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
        "OPTIONS * HTTP/1.0\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
        "GET * HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST * HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    ] {
        let left = p.after(1, |addr| {
            let r = raw::exchange(addr, req.as_bytes(), WAIT);
            assert_eq!(r.end, End::Closed, "{req:?}: {}", raw::show(&r));
            let got = r.responses();
            assert_eq!(got.len(), 1, "{req:?}: {}", raw::show(&r));
            assert_eq!(got[0].status, 400, "{req:?}: {}", raw::show(&r));
            assert!(got[0].connection_has("close"), "{req:?}: {}", raw::show(&r));
        });
        let l = &left.lines[0];
        let line = req.split("\r\n").next().unwrap();
        assert_eq!(
            (&l["request"], &l["status"], &l["fault"]),
            (&line.into(), &400.into(), &"bad_request".into()),
            "{req:?}: {l}"
        );
        assert_eq!(
            left.moved(r#"proxy_requests_total{route="(none)",code="4xx"}"#),
            1.0,
            "{req:?}: {left:?}"
        );
    }
    // Behind a request on a keep-alive connection: that one is answered, then the 400 and
    // the close.
    let both = b"GET /first HTTP/1.1\r\nHost: x\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n";
    let left = p.after(2, |addr| {
        assert_eq!(statuses(addr, both), [200, 400]);
    });
    let got: Vec<_> = left.lines.iter().map(|l| l["status"].clone()).collect();
    assert_eq!(got, [200, 400], "{left:?}");
    let upstream: Vec<String> = origin
        .captured()
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect();
    assert!(
        upstream.len() == 1 && upstream[0].starts_with("GET /first "),
        "only the GET goes upstream: {upstream:?}"
    );
    p.stop();
}

#[test]
fn a_post_on_a_pooled_connection_its_server_closed_logs_502() {
    // The origin answers a GET and keeps the connection; the POST that reuses it is read
    // and the connection closed unanswered. A POST already sent is not resent: the client
    // gets the proxy's 502, and nginx's `$upstream_status` for that attempt is 502 too. It
    // was null here (a stale pooled connection is not the server's fault for the balancer,
    // and only a server's fault set the status).
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let origin = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let mut got = Vec::new();
        let mut heads = 0;
        let mut chunk = [0u8; 4096];
        while heads < 2 {
            let n = s.read(&mut chunk).expect("read");
            assert!(n > 0, "the proxy closed the pooled connection");
            got.extend_from_slice(&chunk[..n]);
            let seen = got.windows(4).filter(|w| *w == b"\r\n\r\n").count();
            if seen > heads && heads == 0 {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .expect("write");
            }
            heads = seen;
        }
        // The POST's head: closed unanswered.
    });
    let mut p = Logged::start(&[origin], &[]);
    let left = p.after(2, |addr| {
        let get = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        assert_eq!(statuses(addr, get), [200]);
        let post =
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
        assert_eq!(statuses(addr, post), [502]);
    });
    let l = left
        .lines
        .iter()
        .find(|l| l["request"] == "POST / HTTP/1.1")
        .expect("the POST's line");
    assert_eq!(l["upstream_addr"], origin.to_string(), "{l}");
    assert_eq!(l["upstream_status"], serde_json::json!([502]), "{l}");
}
