//! A cache hit allocates nothing per request in steady state: the lookup hashes and compares
//! in place, the stored head and body are reference-counted views, and the response head is
//! written into the connection's reused buffer.
//!
//! A counting global allocator (this test binary only, one test so nothing else runs beside
//! it) counts allocations of the whole process while one keep-alive client, which itself
//! allocates nothing per request, sends N and then 10×N requests that are all hits. The
//! difference must stay near zero, not grow with the 9×N extra requests. A small body
//! (copied behind the head), a large one (a second write from the stored bytes), a range
//! of the large one (a 206: a view of the stored bytes) and a small one stored with a 103
//! Early Hints head (sent again before it, from the stored bytes) are hit.

use std::io::{Read, Write};
use std::net::TcpStream;

#[global_allocator]
static GLOBAL: tests::CountingAlloc = tests::CountingAlloc::new();

const SMALL: &[u8] = b"GET /small?size=64 HTTP/1.1\r\nHost: cache.test\r\n\r\n";
const LARGE: &[u8] = b"GET /large?size=8000 HTTP/1.1\r\nHost: cache.test\r\n\r\n";
const RANGE: &[u8] =
    b"GET /large?size=8000 HTTP/1.1\r\nHost: cache.test\r\nRange: bytes=100-4199\r\n\r\n";

const HINTED: &[u8] = b"GET /hinted?size=64&interim=103 HTTP/1.1\r\nHost: cache.test\r\n\r\n";

/// The requests sent in turn: each, its body length and its status line.
const KINDS: [(&[u8], usize, &[u8]); 4] = [
    (SMALL, 64, b"HTTP/1.1 200 OK\r\n"),
    (LARGE, 8000, b"HTTP/1.1 200 OK\r\n"),
    (RANGE, 4100, b"HTTP/1.1 206 Partial Content\r\n"),
    (HINTED, 64, b"HTTP/1.1 200 OK\r\n"),
];

/// Read response `i` (`usize::MAX`: a fill), with a body of `len` bytes, into `buf`, after any
/// 103 heads: where its final head starts and where it ends. (Allocates nothing.)
fn read_response(s: &mut TcpStream, buf: &mut [u8; 16384], len: usize, i: usize) -> (usize, usize) {
    let mut got = 0;
    loop {
        let mut start = 0;
        let mut end = None;
        while let Some(h) = buf[start..got].windows(4).position(|w| w == b"\r\n\r\n") {
            if buf[start..got].starts_with(b"HTTP/1.1 103 ") {
                start += h + 4;
                continue;
            }
            end = Some(start + h + 4 + len);
            break;
        }
        if let Some(e) = end.filter(|&e| got >= e) {
            return (start, e);
        }
        let n = s.read(&mut buf[got..]).expect("response read");
        assert!(n > 0, "request {i}: closed after {got} bytes");
        got += n;
    }
}

/// Send `n` requests (the kinds in turn) and read each whole response, checking each is a
/// hit of the kind's length and status.
fn requests(s: &mut TcpStream, buf: &mut [u8; 16384], n: usize) {
    for i in 0..n {
        let (req, len, status) = KINDS[i % KINDS.len()];
        s.write_all(req).expect("request sent");
        let (start, total) = read_response(s, buf, len, i);
        assert_eq!(
            start > 0,
            req == HINTED,
            "request {i}: the 103 first, only where stored"
        );
        let head = &buf[start..total - len];
        assert!(head.starts_with(status), "request {i}");
        let hit = b"X-Cache: HIT\r\n";
        assert!(
            head.windows(hit.len()).any(|w| w == hit),
            "request {i}: a hit"
        );
    }
}

#[test]
fn hits_allocate_nothing_per_request() {
    let origin = tests::origin();
    let p = proxy::start(tests::proxy_config(&[origin.addr()], &["--cache", "1MiB"]))
        .expect("proxy starts");
    let mut s = TcpStream::connect(p.listen_addrs()[0]).expect("connect");
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16384];
    // Fill both entries (misses), then warm up: buffers and timers reach their steady size.
    for (req, len) in [(SMALL, 64), (LARGE, 8000), (HINTED, 64)] {
        s.write_all(req).unwrap();
        read_response(&mut s, &mut buf, len, usize::MAX);
    }
    requests(&mut s, &mut buf, 500);
    GLOBAL.assert_flat(1_000, 200, |k| requests(&mut s, &mut buf, k as usize));
    assert_eq!(
        origin.requests(),
        3,
        "only the three fills reached the origin"
    );
    drop(s);
    p.shutdown().unwrap();
}
