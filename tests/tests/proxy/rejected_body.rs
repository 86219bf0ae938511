//! Request bodies the proxy refuses, or that end early, after the head may already have gone
//! upstream: the upstream connection that carried the half-written request is never reused,
//! so the next request reaches the origin on its own, whole (checked on what the origin
//! received). And request framings the codec accepts although they are odd
//! (`Content-Length: 5, 5`, `007`, `Transfer-Encoding: , chunked,`) reach the upstream as
//! one canonical framing header.

use shared::origin::Origin;
use std::net::SocketAddr;
use tests::raw::{assert_generated, Client, End, WAIT};
use tests::strict::{assert_closed, captured_text, capturing_origin, proxy, response};

const NEXT: &[u8] = b"GET /next?size=5 HTTP/1.1\r\nHost: test\r\n\r\n";

/// How the first request's client connection is expected to end.
enum Outcome {
    /// The proxy answers this status itself, then closes.
    Refused(u16),
    /// The client goes away mid-body: nobody to answer.
    ClientLeft,
}

/// Send `first` (which the proxy must refuse, or which stops mid-body), then a plain GET on
/// a fresh connection; assert the GET is answered and reached the origin as a request of its
/// own, never appended to the half-written first one.
fn next_request_is_clean(extra: &[&str], first: &[u8], outcome: Outcome) {
    let origin = capturing_origin();
    let (p, addr) = proxy(&[origin.addr()], extra);

    let mut c = Client::connect(addr);
    c.send(first).expect("send the first request");
    match outcome {
        Outcome::Refused(status) => {
            let reply = c.until_close(WAIT);
            assert_generated(&reply, status, true);
            drop(c);
            // The half-written upstream connection (if the head went out) is closed, not
            // kept: the origin sees its EOF.
            tests::strict::wait_for(tests::strict::READY, "the upstream close", || {
                origin.open_connections() == 0
            });
        }
        Outcome::ClientLeft => {
            // The head went upstream (the origin counts it), then the client is gone.
            tests::strict::wait_for(tests::strict::READY, "the first head upstream", || {
                origin.requests() == 1
            });
            c.stream
                .shutdown(std::net::Shutdown::Both)
                .expect("client shutdown");
            drop(c);
            // The proxy gives up the half-written upstream connection: the origin sees it
            // close (EOF ends its body read).
            tests::strict::wait_for(tests::strict::READY, "the upstream close", || {
                origin.open_connections() == 0
            });
        }
    }

    let mut next = Client::connect(addr);
    next.send(NEXT).expect("send the next request");
    let r = response(&mut next, "the request after the refused one");
    assert_eq!(
        (r.status, r.is_pattern(5)),
        (200, true),
        "{r:?}; origin got {:?}",
        captured_text(&origin)
    );
    p.shutdown().expect("clean shutdown");
    assert_next_arrived_alone(&origin);
}

/// The origin's captured requests: exactly one holds the follow-up GET, and it is the whole
/// capture (the GET was the first bytes on its connection); the first request never
/// completed.
fn assert_next_arrived_alone(origin: &Origin) {
    let all = origin.captured();
    let with_next: Vec<&Vec<u8>> = all
        .iter()
        .filter(|raw| raw.windows(9).any(|w| w == b"GET /next"))
        .collect();
    assert_eq!(with_next.len(), 1, "{:?}", captured_text(origin));
    assert!(
        with_next[0].starts_with(b"GET /next?size=5 HTTP/1.1\r\n")
            && with_next[0].ends_with(b"\r\n\r\n"),
        "the GET was glued to other bytes: {:?}",
        captured_text(origin)
    );
    assert_eq!(
        origin.complete_requests(),
        1,
        "only the GET was complete: {:?}",
        captured_text(origin)
    );
}

fn chunked_post(body: &str) -> Vec<u8> {
    format!("POST /first HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
        .into_bytes()
}

#[test]
fn bad_chunk_size_after_a_good_chunk() {
    // The first chunk is valid (a small body is read whole before it goes upstream; a
    // large one's head and first chunk may be upstream already).
    let first = chunked_post("5\r\nhello\r\nzz\r\nworld\r\n0\r\n\r\n");
    next_request_is_clean(&[], &first, Outcome::Refused(400));
}

#[test]
fn chunk_data_without_its_crlf() {
    let first = chunked_post("5\r\nhello\r\n3\r\nabcXY0\r\n\r\n");
    next_request_is_clean(&[], &first, Outcome::Refused(400));
}

#[test]
fn chunked_body_over_max_body_mid_stream() {
    // 5 bytes are within the limit; the next chunk passes it: 413 (before any upstream
    // saw the request: a small chunked body is read whole first).
    let first = chunked_post(&format!(
        "5\r\nhello\r\n14\r\n{}\r\n0\r\n\r\n",
        "x".repeat(20)
    ));
    next_request_is_clean(&["--max-body", "10"], &first, Outcome::Refused(413));
}

#[test]
fn content_length_over_max_body_never_leaves() {
    let first = format!(
        "POST /first HTTP/1.1\r\nHost: test\r\nContent-Length: 20\r\n\r\n{}",
        "x".repeat(20)
    );
    next_request_is_clean(
        &["--max-body", "10"],
        first.as_bytes(),
        Outcome::Refused(413),
    );
}

/// A streamed body (over the 64 KiB read whole before a request goes upstream).
#[test]
fn client_gone_mid_body() {
    let first = b"POST /first HTTP/1.1\r\nHost: test\r\nContent-Length: 100000\r\n\r\n0123456789";
    next_request_is_clean(&[], first, Outcome::ClientLeft);
}

/// A small body is read whole before the request goes upstream: a client gone in the middle
/// of it sent nothing to the origin (the 100 Continue shows the proxy reading the body).
#[test]
fn client_gone_mid_small_body_sends_nothing_upstream() {
    let origin = capturing_origin();
    let (p, addr) = proxy(&[origin.addr()], &[]);
    let mut c = Client::connect(addr);
    c.send(b"POST /first HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
        .expect("send the head");
    let cont = response(&mut c, "the 100");
    assert_eq!(cont.status, 100, "{cont:?}");
    c.send(b"0123456789").expect("send part of the body");
    c.stream
        .shutdown(std::net::Shutdown::Both)
        .expect("client shutdown");
    drop(c);
    let mut next = Client::connect(addr);
    next.send(NEXT).expect("send the next request");
    let r = response(&mut next, "the next request");
    assert!(r.status == 200 && r.is_pattern(5), "{r:?}");
    p.shutdown().expect("clean shutdown");
    assert_eq!(origin.connections(), 1, "{:?}", captured_text(&origin));
    let got = origin.captured();
    assert_eq!(got.len(), 1, "{:?}", captured_text(&origin));
    assert!(
        got[0].starts_with(b"GET /next"),
        "{:?}",
        captured_text(&origin)
    );
}

#[test]
fn client_gone_mid_chunk() {
    // Past the 64 KiB held before a request goes upstream: it streams.
    let first = chunked_post(&format!("20000\r\n{}", "x".repeat(70_000)));
    next_request_is_clean(&[], &first, Outcome::ClientLeft);
}

/// The refused request's connection is closed for the client too, even with more
/// pipelined requests behind it: the bytes after a broken body are never parsed as a
/// request.
#[test]
fn nothing_after_a_bad_body_is_served() {
    let origin = capturing_origin();
    let (p, addr) = proxy(&[origin.addr()], &[]);
    let mut first = chunked_post("5\r\nhello\r\nzz\r\n");
    first.extend_from_slice(NEXT);
    let mut c = Client::connect(addr);
    c.send(&first).expect("send");
    let reply = c.until_close(WAIT);
    assert_generated(&reply, 400, true);
    assert_ne!(reply.end, End::TimedOut);
    p.shutdown().expect("clean shutdown");
    assert_eq!(
        origin.complete_requests(),
        0,
        "{:?}",
        captured_text(&origin)
    );
    assert!(
        !origin
            .captured()
            .iter()
            .any(|raw| raw.windows(9).any(|w| w == b"GET /next")),
        "{:?}",
        captured_text(&origin)
    );
}

/// The framing headers of one captured request head: (Content-Length values,
/// Transfer-Encoding values), as sent.
fn framing_headers(raw: &[u8]) -> (Vec<String>, Vec<String>) {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a whole head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let (mut cl, mut te) = (Vec::new(), Vec::new());
    for line in head.split("\r\n").skip(1) {
        let (n, v) = line.split_once(':').expect("name: value");
        if n.eq_ignore_ascii_case("content-length") {
            cl.push(v.trim().to_string());
        } else if n.eq_ignore_ascii_case("transfer-encoding") {
            te.push(v.trim().to_string());
        }
    }
    (cl, te)
}

/// What the upstream must get for an accepted odd framing.
#[derive(Debug, PartialEq)]
enum Canonical {
    Length(&'static str),
    Chunked,
}

#[test]
fn odd_accepted_framings_reach_the_upstream_canonical() {
    let cases: [(&str, String, Canonical, &[u8]); 7] = [
        (
            "CL 5, 5",
            "Content-Length: 5, 5\r\n\r\nhello".into(),
            Canonical::Length("5"),
            b"hello",
        ),
        (
            "CL 5 twice",
            "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello".into(),
            Canonical::Length("5"),
            b"hello",
        ),
        (
            "CL 007",
            "Content-Length: 007\r\n\r\nabcdefg".into(),
            Canonical::Length("7"),
            b"abcdefg",
        ),
        (
            "TE , chunked,",
            "Transfer-Encoding: , chunked,\r\n\r\n3\r\nabc\r\n0\r\n\r\n".into(),
            // A small chunked body is read whole, then sent with its length.
            Canonical::Length("3"),
            b"abc",
        ),
        (
            "TE chunked then empty TE",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding:\r\n\r\n3\r\nabc\r\n0\r\n\r\n".into(),
            // A small chunked body is read whole, then sent with its length.
            Canonical::Length("3"),
            b"abc",
        ),
        (
            "TE CHUNKED with tabs",
            "transfer-encoding:  CHUNKED\t\r\n\r\n3\r\nabc\r\n0\r\n\r\n".into(),
            // A small chunked body is read whole, then sent with its length.
            Canonical::Length("3"),
            b"abc",
        ),
        (
            "TE , chunked, over 64 KiB (streamed)",
            format!(
                "Transfer-Encoding: , chunked,\r\n\r\n11170\r\n{}\r\n0\r\n\r\n",
                "a".repeat(70_000)
            ),
            Canonical::Chunked,
            b"\r\n0\r\n\r\n",
        ),
    ];
    let origin = capturing_origin();
    let (p, addr): (proxy::Running, SocketAddr) = proxy(&[origin.addr()], &[]);
    // One keep-alive client connection: each request is answered before the next is sent.
    let mut c = Client::connect(addr);
    for (i, (what, rest, _, _)) in cases.iter().enumerate() {
        let req = format!("POST /case{i}?size=2 HTTP/1.1\r\nHost: test\r\n{rest}");
        c.send(req.as_bytes()).expect("send");
        let r = response(&mut c, what);
        assert_eq!((r.status, r.is_pattern(2)), (200, true), "{what}: {r:?}");
    }
    p.shutdown().expect("clean shutdown");
    assert_closed(&mut c, "client connection after the proxy stopped");
    let captured = origin.captured();
    assert_eq!(captured.len(), cases.len(), "{:?}", captured_text(&origin));
    for (i, (what, _, want, body)) in cases.iter().enumerate() {
        let prefix = format!("POST /case{i}?");
        let raw = captured
            .iter()
            .find(|r| r.starts_with(prefix.as_bytes()))
            .unwrap_or_else(|| panic!("{what}: not received: {:?}", captured_text(&origin)));
        let (cl, te) = framing_headers(raw);
        let show = String::from_utf8_lossy(raw);
        match want {
            Canonical::Length(n) => {
                assert_eq!(cl, vec![n.to_string()], "{what}: {show:?}");
                assert!(te.is_empty(), "{what}: {show:?}");
            }
            Canonical::Chunked => {
                assert_eq!(te, vec!["chunked".to_string()], "{what}: {show:?}");
                assert!(cl.is_empty(), "{what}: {show:?}");
            }
        }
        assert!(raw.ends_with(body), "{what}: body not passed on: {show:?}");
    }
}
