//! Interim responses (RFC 9110 15.2): a 103 Early Hints (or 102) from the origin reaches an
//! HTTP/1.1 client before the final response, as soon as it arrives (the origin holds the
//! final head back); an HTTP/1.0 client gets none; 100 Continue is the proxy's own business.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::thread;
use tests::raw::{self, Client, Response};

/// Send `request` and read until the response bytes hold `want` complete heads and the
/// last one's 64-byte body; the bytes.
fn read_heads(addr: SocketAddr, request: &str, want: usize) -> Vec<u8> {
    let mut c = Client::connect(addr);
    c.send(request.as_bytes()).unwrap();
    let deadline = std::time::Instant::now() + raw::WAIT;
    loop {
        let b = c.buffered();
        let heads = b.windows(4).filter(|w| w == b"\r\n\r\n").count();
        if heads >= want && b.ends_with(&shared::origin::expected_body(64)) {
            return b.to_vec();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(b)
        );
        c.fill().expect("more of the response");
    }
}

#[test]
fn early_hints_go_to_http11_clients_first_and_at_once() {
    let o = tests::origin();
    let (p, addr) = tests::start_proxy(&[o.addr()], &[]);
    // The 103 arrives on its own, a second before the final head: it is read first.
    let mut c = Client::connect(addr);
    c.send(b"GET /h?interim=103&delay=1s HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    while !c.buffered().windows(4).any(|w| w == b"\r\n\r\n") {
        c.fill().expect("the interim response");
    }
    let first = String::from_utf8_lossy(c.buffered()).to_string();
    assert_eq!(
        first, "HTTP/1.1 103 Early Hints\r\nLink: </hint.css>; rel=preload\r\n\r\n",
        "the 103 alone, before the final response exists"
    );
    c.consume(first.len());
    let r = raw::response(&mut c, "after the 103");
    assert_eq!(r.status, 200);
    assert!(r.is_pattern(64));

    // Several interims in one read; 100 Continue is not passed on.
    let got = read_heads(
        addr,
        "GET /h?interim=100&interim=102&interim=103 HTTP/1.1\r\nHost: t\r\n\r\n",
        3,
    );
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with(
            "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\n\
             Link: </hint.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\n"
        ),
        "{text}"
    );
    // HTTP/1.0: none.
    let got = read_heads(addr, "GET /h?interim=103 HTTP/1.0\r\nHost: t\r\n\r\n", 1);
    assert!(
        got.starts_with(b"HTTP/1.1 200 OK\r\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(o.requests(), 3);
    p.shutdown().unwrap();
}

/// A scripted origin: one connection, one request head read, `reply` sent, then the
/// connection held until the proxy closes it (or [`raw::WAIT`] passes).
fn scripted_origin(reply: Vec<u8>) -> (SocketAddr, thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(raw::WAIT)).unwrap();
        raw::read_request_head(&mut s, &mut Vec::new()).expect("a request head");
        s.write_all(&reply).unwrap();
        let _ = s.read(&mut [0u8; 1024]); // the proxy's close, or the timeout
    });
    (addr, h)
}

/// `GET /` over HTTP/1.1 through a proxy to an origin answering `interim` (a 103), then a
/// 200 whose body is `ok`: the 103 the client got.
fn early_hints_relayed(interim: &str) -> Response {
    let (up, origin) = scripted_origin(format!("{interim}{OK}").into_bytes());
    let (p, addr) = tests::start_proxy(&[up], &[]);
    let mut c = Client::connect(addr);
    c.send(&raw::get("/")).unwrap();
    let first = raw::response(&mut c, "the 103");
    let last = raw::response(&mut c, "the 200 after the 103");
    assert_eq!(
        (first.status, last.status),
        (103, 200),
        "{first:?} {last:?}"
    );
    assert_eq!(last.body, b"ok");
    drop(c);
    p.shutdown().unwrap();
    origin.join().unwrap();
    first
}

const OK: &str = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// RFC 9110 8.6: "A server MUST NOT send a Content-Length header field in any response with
/// a status code of 1xx": an origin's, malformed or not, is not passed on (a client or a
/// proxy in front that framed by it would misread what follows); nor Transfer-Encoding.
#[test]
fn an_interim_head_goes_without_its_framing_fields() {
    let got = early_hints_relayed(concat!(
        "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nContent-Length: 3\r\n",
        "Content-Length: abc\r\nTransfer-Encoding: chunked\r\ncontent-length: 7, 9\r\n\r\n",
    ));
    assert_eq!(got.headers, [("Link".to_string(), "</a>".to_string())]);
}

/// An empty line before a 103 (RFC 9112 2.2: a recipient may skip it, and the codec does)
/// does not make it vanish: it is the same 103, passed on.
#[test]
fn an_interim_head_after_an_empty_line_is_passed_on() {
    let got = early_hints_relayed("\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n");
    assert_eq!(got.headers, [("Link".to_string(), "</a>".to_string())]);
}

/// The read timeout bounds each wait between two reads of the response (nginx's
/// `proxy_read_timeout`), not the whole wait for its head, also after a request body that was
/// streamed (larger than the proxy holds whole): an origin that sends a 102 every 0.2 s for
/// 1 s and then its answer gets it relayed under a read timeout of 0.6 s, as from nginx with
/// request buffering off.
#[test]
fn the_read_timeout_is_per_read_while_a_streamed_body_awaits_its_answer() {
    const BODY: usize = 200_000;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let up = l.local_addr().unwrap();
    let origin = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(raw::WAIT)).unwrap();
        let mut pending = Vec::new();
        raw::read_request_head(&mut s, &mut pending).expect("a request head");
        while pending.len() < BODY {
            raw::read_once(&mut s, &mut pending).expect("the whole body");
        }
        // The pace of the origin's answer is what is tested: each gap is under the timeout,
        // their sum over it.
        for _ in 0..5 {
            s.write_all(b"HTTP/1.1 102 Processing\r\n\r\n").unwrap();
            thread::sleep(std::time::Duration::from_millis(200));
        }
        s.write_all(OK.as_bytes()).unwrap();
        let _ = s.read(&mut [0u8; 1024]); // the proxy's close, or the timeout
    });
    let (p, addr) = tests::start_proxy(&[up], &["--read-timeout", "600ms"]);
    let mut c = Client::connect(addr);
    let head = format!("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {BODY}\r\n\r\n");
    c.send(&[head.as_bytes(), &vec![b'q'; BODY]].concat())
        .unwrap();
    let mut last = raw::response(&mut c, "the answer");
    while (100..200).contains(&last.status) {
        last = raw::response(&mut c, "the answer after a 102");
    }
    assert_eq!((last.status, &last.body[..]), (200, &b"ok"[..]), "{last:?}");
    drop(c);
    p.shutdown().unwrap();
    origin.join().unwrap();
}
