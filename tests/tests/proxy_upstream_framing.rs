//! Upstream responses whose framing the proxy must not pass on as it is: codings other than
//! chunked (re-framing would drop them), interim-response floods, and absolute-form targets
//! whose path is empty.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::thread;
use std::time::Duration;
use tests::raw::{assert_generated, exchange, WAIT};

/// A one-shot upstream: accepts one connection, reads the request head, sends `reply`,
/// keeps the connection open for `hold` (or until the proxy closes it), then closes.
/// Returns its address and a handle yielding the request head it read.
fn fake_upstream_holding(
    reply: Vec<u8>,
    hold: Duration,
) -> (SocketAddr, thread::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&b[..n]),
            }
        }
        let _ = s.write_all(&reply);
        s.set_read_timeout(Some(hold)).unwrap();
        let _ = s.read(&mut b); // returns when the proxy closes, or after `hold`
        head
    });
    (addr, h)
}

fn fake_upstream(reply: Vec<u8>) -> (SocketAddr, thread::JoinHandle<Vec<u8>>) {
    fake_upstream_holding(reply, Duration::from_millis(1))
}

fn proxy_to(upstream: SocketAddr) -> proxy::Running {
    let cfg = proxy::cli::config_from_args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &upstream.to_string(),
        "--workers",
        "1",
        "--no-pin",
    ])
    .unwrap();
    proxy::start(cfg).unwrap()
}

#[test]
fn a_coding_other_than_chunked_is_502_not_silently_dropped() {
    for te in ["gzip, chunked", "gzip"] {
        let body = if te.ends_with("chunked") {
            "5\r\nhello\r\n0\r\n\r\n"
        } else {
            "hello"
        };
        let reply = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n\r\n{body}");
        let (up, h) = fake_upstream(reply.into_bytes());
        let p = proxy_to(up);
        let r = exchange(p.listen_addrs()[0], &tests::raw::get("/"), WAIT);
        assert_generated(&r, 502, true);
        h.join().unwrap();
        p.shutdown().unwrap();
    }
}

#[test]
fn a_flood_of_interim_responses_is_bounded() {
    // 100 Continue heads well past the 64 KiB head limit, then never a final response: the
    // proxy must give up on the flood itself, not wait for the 60 s read timeout.
    let reply = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(4000);
    let (up, h) = fake_upstream_holding(reply, Duration::from_secs(30));
    let p = proxy_to(up);
    let r = exchange(p.listen_addrs()[0], &tests::raw::get("/"), WAIT);
    assert_generated(&r, 502, true);
    h.join().unwrap();
    p.shutdown().unwrap();
}

#[test]
fn absolute_form_with_an_empty_path_keeps_its_query() {
    let (up, h) = fake_upstream(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec());
    let p = proxy_to(up);
    let req =
        b"GET http://example.test?a=1 HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n";
    let r = exchange(p.listen_addrs()[0], req, Duration::from_secs(5));
    assert!(r.text().starts_with("HTTP/1.1 204 "), "{}", r.text());
    let head = String::from_utf8(h.join().unwrap()).unwrap();
    assert!(head.starts_with("GET /?a=1 HTTP/1.1\r\n"), "{head}");
    p.shutdown().unwrap();
}

#[test]
fn a_response_head_trickling_in_byte_by_byte_is_read_whole() {
    // The proxy parses an upstream head again only when a read may have ended it; the blank
    // line split across reads in every way must still be found.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let up = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut b = [0u8; 4096];
        let _ = s.read(&mut b);
        let reply = b"HTTP/1.1 200 OK\r\nX-Slow: yes\r\nContent-Length: 5\r\n\r\nhello";
        for byte in reply.iter() {
            s.write_all(std::slice::from_ref(byte)).unwrap();
            thread::sleep(Duration::from_millis(1));
        }
        let _ = s.read(&mut b); // until the proxy closes or pools it and the test ends
    });
    let p = proxy_to(up);
    let req = b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let r = exchange(p.listen_addrs()[0], req, WAIT);
    let text = r.text();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("X-Slow: yes\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nhello"), "{text}");
    p.shutdown().unwrap();
    drop(h);
}
