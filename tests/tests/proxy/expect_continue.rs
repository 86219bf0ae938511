//! `Expect: 100-continue` on its failure paths (RFC 9110 10.1.1): no `100 Continue` before
//! an answer the head decides (a 413 over `--max-body`), none for HTTP/1.0 (where Expect is
//! ignored), a client that sends its body without waiting for the 100 is served whole, and
//! one whose small body is read before any upstream is chosen (nginx's and HAProxy's
//! buffered bodies) gets the 100 first and then, with every upstream down, a 502.
//!
//! Ordering makes these checks free of time windows: the proxy writes its 100 before it
//! reads the body and its final response after, so a 100 that was sent at all comes first
//! in the bytes the client reads.

use tests::ClosedPort;

use tests::raw::{assert_generated, Client, WAIT};
use tests::strict::{captured_text, capturing_origin, proxy, response, wait_for, READY};

const EXPECT_HEAD: &[u8] =
    b"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";

/// A small body is read whole before an upstream is chosen (it holds none while it comes):
/// the 100 comes first, then the 502 once the body is in and no upstream could be reached.
#[test]
fn a_100_then_a_502_when_every_upstream_is_down() {
    let (dead_a, dead_b) = (ClosedPort::new(), ClosedPort::new());
    let (p, addr) = proxy(&[dead_a.addr(), dead_b.addr()], &[]);
    let mut c = Client::connect(addr);
    c.send(EXPECT_HEAD).expect("send");
    let cont = response(&mut c, "the 100");
    assert_eq!(cont.status_line, "HTTP/1.1 100 Continue", "{cont:?}");
    c.send(b"hello").expect("send the body");
    let reply = c.until_close(WAIT);
    assert_generated(&reply, 502, true);
    p.shutdown().expect("clean shutdown");
}

#[test]
fn no_100_before_a_413_over_max_body() {
    let origin = capturing_origin();
    let (p, addr) = proxy(&[origin.addr()], &["--max-body", "4"]);
    let mut c = Client::connect(addr);
    c.send(EXPECT_HEAD).expect("send");
    let reply = c.until_close(WAIT);
    assert_generated(&reply, 413, true);
    p.shutdown().expect("clean shutdown");
    assert_eq!(origin.connections(), 0, "{:?}", captured_text(&origin));
}

#[test]
fn a_chunked_body_over_max_body_after_the_100_is_413() {
    // With chunked framing the size is unknown up front: the 100 is fine, then 413.
    let origin = capturing_origin();
    let (p, addr) = proxy(&[origin.addr()], &["--max-body", "4"]);
    let mut c = Client::connect(addr);
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n")
        .expect("send");
    let cont = response(&mut c, "the 100");
    assert_eq!(cont.status_line, "HTTP/1.1 100 Continue", "{cont:?}");
    c.send(b"5\r\nhello\r\n0\r\n\r\n").expect("send the body");
    let reply = c.until_close(WAIT);
    assert_generated(&reply, 413, true);
    p.shutdown().expect("clean shutdown");
    assert_eq!(
        origin.complete_requests(),
        0,
        "{:?}",
        captured_text(&origin)
    );
}

#[test]
fn expect_in_http10_is_ignored() {
    let origin = capturing_origin();
    let (p, addr) = proxy(&[origin.addr()], &[]);
    let mut c = Client::connect(addr);
    // A streamed body (over the 64 KiB read whole first), so that the head goes upstream
    // before it: only then does the proxy decide about a 100. Send the body now: any 100
    // would already be ahead of the final response in the stream.
    c.send(b"POST /up?size=3 HTTP/1.0\r\nContent-Length: 70000\r\nExpect: 100-continue\r\n\r\n")
        .expect("send");
    wait_for(READY, "the head at the origin", || origin.requests() == 1);
    let body = vec![b'h'; 70000];
    c.send(&body).expect("send the body");
    let r = response(&mut c, "the HTTP/1.0 POST");
    assert_eq!(r.status, 200, "a 100 was sent to an HTTP/1.0 client: {r:?}");
    assert!(r.is_pattern(3), "{r:?}");
    tests::strict::assert_closed(&mut c, "HTTP/1.0 without keep-alive");
    p.shutdown().expect("clean shutdown");
    let got = origin.captured();
    assert_eq!(got.len(), 1, "{:?}", captured_text(&origin));
    let text = String::from_utf8_lossy(&got[0]).to_ascii_lowercase();
    assert!(!text.contains("expect"), "{text}");
    assert!(text.contains("\r\ncontent-length: 70000\r\n"), "{text}");
    assert!(got[0].ends_with(&body), "the body is not whole");
}

/// A client that does not wait for the 100: head and body in one write, a small body (sent
/// upstream with the head) and a large one (streamed). At most one 100 may precede the final
/// answer; the origin gets the whole body and the connection stays usable.
#[test]
fn a_client_that_sends_its_body_without_waiting() {
    let origin = capturing_origin();
    let (p, addr) = proxy(&[origin.addr()], &[]);
    let mut c = Client::connect(addr);
    for (i, len) in [5usize, 300 * 1024].into_iter().enumerate() {
        let body = vec![b'a' + i as u8; len];
        let mut req = format!(
            "POST /up{i}?size=2 HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\nExpect: 100-continue\r\n\r\n"
        )
        .into_bytes();
        req.extend_from_slice(&body);
        c.send(&req).expect("send head and body");
        let mut r = response(&mut c, "the answer");
        if r.status == 100 {
            r = response(&mut c, "the answer after a 100");
        }
        assert_eq!((r.status, r.is_pattern(2)), (200, true), "{len}: {r:?}");
        let got = origin.captured();
        assert_eq!(got.len(), i + 1, "{:?}", captured_text(&origin));
        assert!(got[i].ends_with(&body), "{len}: body not whole");
    }
    assert_eq!(origin.body_bytes(), 5 + 300 * 1024);
    // Still usable: a plain GET on the same connection.
    c.send(b"GET /?size=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("send");
    let r = response(&mut c, "GET after");
    assert_eq!((r.status, r.is_pattern(1)), (200, true), "{r:?}");
    p.shutdown().expect("clean shutdown");
}
