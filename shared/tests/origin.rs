//! The scriptable origin, driven by raw std sockets: exact bytes on the wire for each
//! scripted behaviour, counts, capture, and a prompt stop.

use shared::origin::{expected_body, Framing, Origin, OriginConfig};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Send `req`, half-close, and read everything until the origin closes.
fn exchange(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut s = connect(addr);
    s.write_all(req).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A parsed response (test-side parser, independent of the codec under test).
#[derive(Debug)]
struct Resp {
    status_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Read one response: body by Content-Length, chunked, or to EOF.
fn read_response(r: &mut impl BufRead) -> Resp {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status_line = line.trim_end().to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.to_string(), v.trim().to_string()));
    }
    let mut resp = Resp {
        status_line,
        headers,
        body: Vec::new(),
    };
    if let Some(n) = resp.header("content-length") {
        let mut body = vec![0; n.parse().unwrap()];
        r.read_exact(&mut body).unwrap();
        resp.body = body;
    } else if resp.header("transfer-encoding") == Some("chunked") {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let n = usize::from_str_radix(line.trim_end(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            resp.body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut resp.body).unwrap();
    }
    resp
}

#[test]
fn default_response_exact_bytes() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let got = exchange(o.addr(), &get("/"));
    let mut want = b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n".to_vec();
    want.extend_from_slice(&expected_body(64));
    assert_eq!(text(&got), text(&want));
    assert_eq!(
        &expected_body(40)[..],
        b"abcdefghijklmnopqrstuvwxyz0123456789abcd"
    );
    assert_eq!(
        (
            o.connections(),
            o.requests(),
            o.complete_requests(),
            o.body_bytes()
        ),
        (1, 1, 1, 0)
    );
    assert!(o.url("/x").starts_with("http://127.0.0.1:") && o.url("x").ends_with("/x"));
}

#[test]
fn config_and_query_set_status_size_and_headers() {
    let cfg = OriginConfig {
        status: 201,
        body_size: 3,
        headers: vec![("X-From".into(), "config".into())],
        ..OriginConfig::default()
    };
    let o = Origin::start(cfg).unwrap();
    let got = exchange(o.addr(), &get("/"));
    assert_eq!(
        text(&got),
        "HTTP/1.1 201 Created\r\nX-From: config\r\nContent-Length: 3\r\n\r\nabc"
    );
    let got = exchange(o.addr(), &get("/x?status=404&size=40&header=X-Q:%20a+b"));
    let mut want =
        b"HTTP/1.1 404 Not Found\r\nX-From: config\r\nX-Q: a b\r\nContent-Length: 40\r\n\r\n"
            .to_vec();
    want.extend_from_slice(&expected_body(40));
    assert_eq!(text(&got), text(&want));
    // 204 has no body and no framing header.
    let got = exchange(o.addr(), &get("/?status=204&size=10"));
    assert_eq!(
        text(&got),
        "HTTP/1.1 204 No Content\r\nX-From: config\r\n\r\n"
    );
}

#[test]
fn bad_query_value_is_a_400_naming_it() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let got = text(&exchange(o.addr(), &get("/?status=abc")));
    assert!(got.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{got}");
    assert!(got.contains("Connection: close\r\n"), "{got}");
    assert!(
        got.ends_with("bad origin parameter `status=abc`: expected a three-digit status\n"),
        "{got}"
    );
}

#[test]
fn chunked_body_exact_bytes() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let got = exchange(o.addr(), &get("/?size=10&chunk=4"));
    assert_eq!(
        text(&got),
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n4\r\nefgh\r\n2\r\nij\r\n0\r\n\r\n"
    );
    // From the config, with a delay between chunks.
    let cfg = OriginConfig {
        body_size: 5,
        framing: Framing::Chunked { chunk_size: 2 },
        chunk_delay: Duration::from_millis(20),
        ..OriginConfig::default()
    };
    let o = Origin::start(cfg).unwrap();
    let t = Instant::now();
    let got = exchange(o.addr(), &get("/"));
    assert!(t.elapsed() >= Duration::from_millis(40));
    assert!(
        text(&got).ends_with("\r\n\r\n2\r\nab\r\n2\r\ncd\r\n1\r\ne\r\n0\r\n\r\n"),
        "{}",
        text(&got)
    );
}

#[test]
fn close_delimited_body() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut s = connect(o.addr());
    s.write_all(&get("/?framing=close&size=50")).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap(); // the origin closes: no half-close needed
    let mut want = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
    want.extend_from_slice(&expected_body(50));
    assert_eq!(text(&got), text(&want));
}

#[test]
fn abort_mid_body() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut s = connect(o.addr());
    s.write_all(&get("/?size=100&abort_after=10")).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(
        text(&got),
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabcdefghij"
    );

    let mut s = connect(o.addr());
    s.write_all(&get("/?size=10&chunk=4&abort_after=6"))
        .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(
        text(&got),
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n4\r\nef"
    );

    // reset: the client sees ECONNRESET (or EOF if the RST raced the read).
    let mut s = connect(o.addr());
    s.write_all(&get("/?size=100000&abort_after=10&reset=1"))
        .unwrap();
    let mut got = Vec::new();
    let r = s.read_to_end(&mut got);
    assert!(got.len() < 100_000);
    if let Err(e) = r {
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    }
}

#[test]
fn drop_closes_without_answering() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let got = exchange(
        o.addr(),
        b"POST /?drop=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
    );
    assert!(got.is_empty(), "{}", text(&got));
    assert_eq!(
        (o.requests(), o.complete_requests(), o.body_bytes()),
        (1, 1, 3)
    );
    // A body cut short by the client: the head counts, the request is not complete.
    exchange(
        o.addr(),
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 9\r\n\r\nabc",
    );
    assert_eq!(
        (o.requests(), o.complete_requests(), o.body_bytes()),
        (2, 1, 6)
    );
}

#[test]
fn hang_never_answers_and_stop_is_prompt() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut s = connect(o.addr());
    s.write_all(&get("/?hang=1")).unwrap();
    // Readiness is the origin's own count, not a pause.
    wait_until("the hanging request is counted", || o.requests() == 1);
    assert_eq!(o.open_connections(), 1);
    // Stopping does not wait for the hanging connection (it would wait forever: the client
    // keeps it open), and closes it.
    stop_within(o, STOP_LIMIT);
    // The first read sees the close: not one byte of an answer came before it. A timeout
    // here fails the test (`connect` set 5 s), it is never taken for a close.
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(n) => assert_eq!(n, 0, "answered: {}", text(&buf[..n])),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
    }
}

/// Generous: `stop` returning at all is the point; a stop that waited for a connection would
/// never return, and this turns that into a failure instead of a hung test.
const STOP_LIMIT: Duration = Duration::from_secs(30);

/// Stops `o` on another thread and fails if it has not returned within `limit`.
fn stop_within(o: Origin, limit: Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        o.stop();
        let _ = tx.send(());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|e| panic!("stop() did not return within {limit:?}: {e}"));
}

/// Polls a condition the origin reports (its counters) until it holds; 30 s to fail.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn delay_before_head() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let t = Instant::now();
    let got = exchange(o.addr(), &get("/?delay=100&size=1"));
    assert!(t.elapsed() >= Duration::from_millis(100));
    assert_eq!(text(&got), "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
}

#[test]
fn echo_returns_the_raw_request() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let req = b"POST /e?echo=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
    let got = exchange(o.addr(), req);
    let want = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}",
        req.len(),
        text(req)
    );
    assert_eq!(text(&got), want);

    // Chunked requests are echoed with their framing, as received.
    let req = b"POST /e?echo=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    let got = exchange(o.addr(), req);
    let resp = read_response(&mut BufReader::new(&got[..]));
    assert_eq!(text(&resp.body), text(req));
    assert_eq!(o.body_bytes(), 5 + 5);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut reqs = get("/?size=1");
    reqs.extend_from_slice(b"POST /?size=2 HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody");
    reqs.extend_from_slice(b"PUT /?size=3&chunk=2 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n");
    reqs.extend_from_slice(&get("/?status=404&size=4"));
    let got = exchange(o.addr(), &reqs);
    let mut r = BufReader::new(&got[..]);
    let sizes: Vec<(String, Vec<u8>)> = (0..4)
        .map(|_| {
            let resp = read_response(&mut r);
            (resp.status_line, resp.body)
        })
        .collect();
    assert_eq!(sizes[0], ("HTTP/1.1 200 OK".into(), b"a".to_vec()));
    assert_eq!(sizes[1], ("HTTP/1.1 200 OK".into(), b"ab".to_vec()));
    assert_eq!(sizes[2], ("HTTP/1.1 200 OK".into(), b"abc".to_vec()));
    assert_eq!(
        sizes[3],
        ("HTTP/1.1 404 Not Found".into(), b"abcd".to_vec())
    );
    assert_eq!((o.connections(), o.requests(), o.body_bytes()), (1, 4, 5));
}

#[test]
fn keep_alive_counts_and_http10() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut s = connect(o.addr());
    let mut r = BufReader::new(s.try_clone().unwrap());
    for _ in 0..3 {
        s.write_all(&get("/")).unwrap();
        let resp = read_response(&mut r);
        assert_eq!(resp.body, expected_body(64));
        assert_eq!(resp.header("connection"), None);
    }
    // HTTP/1.0 with keep-alive keeps the connection and says so.
    for _ in 0..2 {
        s.write_all(b"GET /?size=2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let resp = read_response(&mut r);
        assert_eq!(resp.header("connection"), Some("keep-alive"));
        assert_eq!(resp.body, b"ab");
    }
    // Plain HTTP/1.0, and chunked asked of a 1.0 client: close-delimited.
    s.write_all(b"GET /?size=3&chunk=1 HTTP/1.0\r\n\r\n")
        .unwrap();
    let resp = read_response(&mut r);
    assert_eq!(resp.status_line, "HTTP/1.1 200 OK");
    assert_eq!(resp.header("connection"), Some("close"));
    assert_eq!(resp.header("transfer-encoding"), None);
    assert_eq!(resp.body, b"abc");
    drop((s, r));
    exchange(o.addr(), &get("/"));
    assert_eq!((o.connections(), o.requests()), (2, 7));
}

#[test]
fn close_on_request() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut s = connect(o.addr());
    s.write_all(&get("/?close=1&size=2")).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(
        text(&got),
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nab"
    );
    // A client's Connection: close is honoured too.
    let mut s = connect(o.addr());
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert!(text(&got).contains("Connection: close\r\n"));
}

#[test]
fn head_request_has_length_but_no_body() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let got = exchange(o.addr(), b"HEAD /?size=10 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(text(&got), "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
}

#[test]
fn expect_100_continue() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut s = connect(o.addr());
    s.write_all(
        b"PUT /?size=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    let mut buf = [0u8; 25];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"abc").unwrap();
    let resp = read_response(&mut BufReader::new(s));
    assert_eq!(resp.body, b"a");
    assert_eq!(o.body_bytes(), 3);
}

#[test]
fn capture_records_raw_requests() {
    let cfg = OriginConfig {
        capture: true,
        ..OriginConfig::default()
    };
    let o = Origin::start(cfg).unwrap();
    let a = get("/a");
    let b =
        b"POST /b HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
            .to_vec();
    let mut both = a.clone();
    both.extend_from_slice(&b);
    exchange(o.addr(), &both);
    // A malformed request is captured too (it reached the origin), and answered 400.
    let bad =
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n".to_vec();
    let got = exchange(o.addr(), &bad);
    assert!(text(&got).starts_with("HTTP/1.1 400 "), "{}", text(&got));
    assert_eq!(o.captured(), vec![a, b, bad]);
    assert_eq!(o.requests(), 2);
}

#[test]
fn large_body_is_the_pattern() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let got = exchange(o.addr(), &get("/?size=1MiB"));
    let resp = read_response(&mut BufReader::new(&got[..]));
    assert_eq!(resp.body.len(), 1 << 20);
    assert!(resp.body == expected_body(1 << 20));
    let got = exchange(o.addr(), &get("/?size=300000&chunk=100000"));
    let resp = read_response(&mut BufReader::new(&got[..]));
    assert!(resp.body == expected_body(300_000));
}

#[test]
fn websocket_upgrade_then_echo() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut s = connect(o.addr());
    s.write_all(
        b"GET /chat HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let want = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    let mut head = vec![0; want.len()];
    s.read_exact(&mut head).unwrap();
    assert_eq!(text(&head), want);
    for msg in [&b"\x81\x04ping"[..], b"anything at all, both ways"] {
        s.write_all(msg).unwrap();
        let mut back = vec![0; msg.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, msg);
    }
    s.shutdown(Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
}

#[test]
fn workers_share_the_port_and_counts_add_up() {
    let o = Origin::start_on(OriginConfig::default(), "127.0.0.1:0".parse().unwrap(), 2).unwrap();
    for _ in 0..20 {
        let got = exchange(o.addr(), &get("/?size=1"));
        assert!(text(&got).ends_with("\r\n\r\na"));
    }
    assert_eq!((o.connections(), o.requests()), (20, 20));
    assert_eq!(o.stats().len(), 2);
    stop_within(o, STOP_LIMIT);
}

#[test]
fn websocket_upgrade_can_be_refused() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let got = exchange(
        o.addr(),
        b"GET /chat?status=426&size=2 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\nGET /next?size=1 HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    // The refusal, then the following bytes are parsed as the next HTTP request.
    assert_eq!(
        text(&got),
        "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 2\r\n\r\nab\
         HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
    );
}

/// The one WebSocket rule (`shared::http::head::is_websocket_upgrade`): a GET whose Upgrade
/// list names `websocket`, wherever in the list; anything else is an ordinary request.
#[test]
fn websocket_upgrade_is_a_get_naming_websocket_in_its_upgrade_list() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut s = connect(o.addr());
    s.write_all(
        b"GET /chat HTTP/1.1\r\nHost: t\r\nUpgrade: h2c, websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .unwrap();
    let want = "HTTP/1.1 101 Switching Protocols\r\n";
    let mut head = vec![0; want.len()];
    s.read_exact(&mut head).unwrap();
    assert_eq!(text(&head), want);

    let got = exchange(
        o.addr(),
        b"POST /chat?size=1 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(text(&got), "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
}
