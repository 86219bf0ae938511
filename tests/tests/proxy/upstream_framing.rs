//! Upstream responses whose framing the proxy must not pass on as it is: codings other than
//! chunked (re-framing would drop them), interim-response floods, and absolute-form targets
//! whose path is empty.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
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
        let head = tests::raw::read_request_head(&mut s, &mut Vec::new()).unwrap_or_default();
        let _ = s.write_all(&reply);
        s.set_read_timeout(Some(hold)).unwrap();
        let _ = s.read(&mut [0u8; 4096]); // returns when the proxy closes, or after `hold`
        head
    });
    (addr, h)
}

fn fake_upstream(reply: Vec<u8>) -> (SocketAddr, thread::JoinHandle<Vec<u8>>) {
    fake_upstream_holding(reply, Duration::from_millis(1))
}

fn proxy_to(upstream: SocketAddr) -> proxy::Running {
    tests::start_proxy(&[upstream], &[]).0
}

#[test]
fn a_coding_other_than_chunked_is_502_not_silently_dropped() {
    for te in ["gzip, chunked", "gzip"] {
        let body = if te.ends_with("chunked") {
            "5\r\nhello\r\n0\r\n\r\n"
        } else {
            "hello"
        };
        answered_502(format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n\r\n{body}"
        ));
    }
}

/// A GET whose upstream answers `reply` gets the proxy's own 502.
fn answered_502(reply: String) {
    gets_502(fake_upstream(reply.into_bytes()));
}

/// A GET through a proxy to the upstream `up` (its thread `h`) gets the proxy's own 502.
fn gets_502((up, h): (SocketAddr, thread::JoinHandle<Vec<u8>>)) {
    let p = proxy_to(up);
    let r = exchange(p.listen_addrs()[0], &tests::raw::get("/"), WAIT);
    assert_generated(&r, 502, true);
    h.join().unwrap();
    p.shutdown().unwrap();
}

/// Chunked applied twice (RFC 9112 7: MUST NOT), or Transfer-Encoding in an HTTP/1.0
/// response (6.1: faulty framing): read until the close instead, the chunk framing would
/// reach the client as the payload under a 200. A 502, as nginx answers.
#[test]
fn chunked_twice_or_in_http10_is_502_not_relayed_as_payload() {
    for head in [
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n",
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n",
    ] {
        answered_502(format!("{head}\r\n2\r\nok\r\n0\r\n\r\n"));
    }
}

#[test]
fn a_flood_of_interim_responses_is_bounded() {
    // 100 Continue heads well past the 64 KiB head limit, then never a final response: the
    // proxy must give up on the flood itself, not wait for the 60 s read timeout.
    let reply = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(4000);
    gets_502(fake_upstream_holding(reply, Duration::from_secs(30)));
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

/// Read one request head (a GET: no body) from `s`.
fn read_head(s: &mut TcpStream) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            other => panic!("no request head: {other:?} after {head:?}"),
        }
    }
}

const SLOW_REPLY: &[u8] = b"HTTP/1.1 200 OK\r\nX-Slow: yes\r\nContent-Length: 5\r\n\r\nhello";

/// An upstream on one keep-alive connection that answers request `i` with `SLOW_REPLY` cut
/// at `cuts[i]`, each piece written only once the proxy has read the one before; and a client
/// on one keep-alive connection that checks every answer.
fn replay_split(cuts: Vec<Vec<usize>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let up = l.local_addr().unwrap();
    let n = cuts.len();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        for at in cuts {
            read_head(&mut s);
            let mut from = 0;
            for to in at {
                s.write_all(&SLOW_REPLY[from..to]).unwrap();
                tests::wait_until_peer_read(&s, WAIT);
                from = to;
            }
            // The last piece needs no wait: the client's next request comes after it.
            s.write_all(&SLOW_REPLY[from..]).unwrap();
        }
    });
    let p = proxy_to(up);
    let mut c = tests::raw::Client::connect(p.listen_addrs()[0]);
    // Each piece waits for the proxy's ACK (delayed ACKs: up to ~40 ms each on loopback, far
    // more on a loaded machine), so an answer cut byte by byte takes seconds: the wait for it
    // bounds a hang, it does not time the proxy.
    let patience = WAIT * SLOW_REPLY.len() as u32;
    for i in 0..n {
        c.send(&tests::raw::get("/")).unwrap();
        let r = c
            .response(patience)
            .unwrap_or_else(|r| panic!("answer {i}: {r:?}"));
        assert_eq!(
            (r.status, r.header("x-slow"), r.body.as_slice()),
            (200, Some("yes"), &b"hello"[..]),
            "answer {i}"
        );
    }
    drop(c);
    h.join().unwrap();
    p.shutdown().unwrap();
}

#[test]
fn a_response_head_split_at_any_byte_is_read_whole() {
    // The proxy parses an upstream head again only when a read may have ended it; the head
    // cut in two at every byte (the blank line split every way among them) is still found.
    replay_split((1..SLOW_REPLY.len()).map(|k| vec![k]).collect());
}

#[test]
fn a_response_head_trickling_in_byte_by_byte_is_read_whole() {
    replay_split(vec![(1..SLOW_REPLY.len()).collect()]);
}

/// RFC 9112 2.3: a response in `HTTP/1.2` to `HTTP/1.9` is read as HTTP/1.1 (it was a 502),
/// and the client gets it as 1.1; a version the codec does not read stays a 502.
#[test]
fn an_upstream_answering_in_a_later_minor_version_is_read_as_1_1() {
    for (version, status) in [("HTTP/1.2", 200), ("HTTP/1.9", 200), ("HTTP/2.0", 502)] {
        let reply = format!("{version} 200 Fine\r\nContent-Length: 2\r\nX-Up: 1\r\n\r\nhi");
        let (up, h) = fake_upstream(reply.into_bytes());
        let p = proxy_to(up);
        let r = exchange(p.listen_addrs()[0], &tests::raw::get("/"), WAIT);
        let resp = &r.responses()[0];
        assert_eq!(resp.status, status, "{version}");
        if status == 200 {
            assert!(
                resp.status_line.starts_with("HTTP/1.1 200"),
                "{version}: {resp:?}"
            );
            assert_eq!(resp.body, b"hi", "{version}");
            assert_eq!(resp.header("x-up"), Some("1"), "{version}");
        } else {
            assert_generated(&r, 502, true);
        }
        h.join().unwrap();
        p.shutdown().unwrap();
    }
}

/// An upstream on one keep-alive connection answering each request with the next of
/// `replies`; it closes after the last. Yields the request heads it read.
fn scripted_upstream(replies: Vec<Vec<u8>>) -> (SocketAddr, thread::JoinHandle<Vec<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let (mut heads, mut pending) = (Vec::new(), Vec::new());
        for reply in replies {
            match tests::raw::read_request_head(&mut s, &mut pending) {
                Ok(head) => heads.push(head),
                Err(_) => return heads,
            }
            s.write_all(&reply).unwrap();
        }
        heads
    });
    (addr, h)
}

/// The proxy keeps each server's last response head parsed, and takes a head that repeats
/// its bytes from there: a head that repeats them only in part, or the same bytes to a HEAD
/// request, must still reach the client as what it is.
#[test]
fn repeated_and_nearly_repeated_heads_each_reach_the_client_as_sent() {
    let head = |len: &str, extra: &str| {
        format!("HTTP/1.1 200 OK\r\nX-N: 1\r\n{extra}Content-Length: {len}\r\n\r\n")
    };
    let thirty = "x".repeat(30);
    // (request method, upstream reply, what the client gets: X-N, body)
    let script: Vec<(&str, String, &str)> = vec![
        ("GET", head("3", "") + "abc", "abc"),
        ("GET", head("3", "") + "def", "def"),
        // The kept head's bytes up to its length's first digit, then more digits.
        ("GET", head("30", "") + &thirty, &thirty),
        // The first head again, to a HEAD request: no body follows it.
        ("HEAD", head("3", ""), ""),
        ("GET", head("3", "") + "ghi", "ghi"),
        // One more field before the length: the same start, a different head.
        ("GET", head("2", "X-M: 2\r\n") + "jk", "jk"),
        (
            "GET",
            "HTTP/1.2 200 OK\r\nX-N: 1\r\nContent-Length: 2\r\n\r\nlm".into(),
            "lm",
        ),
        (
            "GET",
            "HTTP/1.2 200 OK\r\nX-N: 1\r\nContent-Length: 2\r\n\r\nno".into(),
            "no",
        ),
        ("GET", head("3", "") + "pqr", "pqr"),
    ];
    let replies = script
        .iter()
        .map(|(_, r, _)| r.clone().into_bytes())
        .collect();
    let (up, h) = scripted_upstream(replies);
    let p = proxy_to(up);
    let mut c = tests::raw::Client::connect(p.listen_addrs()[0]);
    for (i, (method, _, body)) in script.iter().enumerate() {
        c.send(format!("{method} /{i} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
            .unwrap();
        let r = c
            .response_to(*method == "HEAD", WAIT)
            .unwrap_or_else(|r| panic!("response {i}: {}", tests::raw::show(&r)));
        let extra = (i == 5).then_some("2");
        assert_eq!(
            (r.status, r.header("x-n"), r.header("x-m"), &r.body[..]),
            (200, Some("1"), extra, body.as_bytes()),
            "response {i} ({method})"
        );
        if *method == "HEAD" {
            assert_eq!(r.header("content-length"), Some("3"), "response {i}");
        }
    }
    let heads = h.join().unwrap();
    assert_eq!(
        heads.len(),
        script.len(),
        "one upstream connection carried them all"
    );
    p.shutdown().unwrap();
}
