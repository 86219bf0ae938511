//! A cache hit allocates nothing per request in steady state: the lookup hashes and compares
//! in place, the stored head and body are reference-counted views, and the response head is
//! written into the connection's reused buffer.
//!
//! A counting global allocator (this test binary only, one test so nothing else runs beside
//! it) counts allocations of the whole process while one keep-alive client, which itself
//! allocates nothing per request, sends N and then 10×N requests that are all hits. The
//! difference must stay near zero, not grow with the 9×N extra requests. A small body
//! (copied behind the head), a large one (a second write from the stored bytes) and a range
//! of the large one (a 206: a view of the stored bytes) are hit.

use std::io::{Read, Write};
use std::net::TcpStream;

#[global_allocator]
static GLOBAL: tests::CountingAlloc = tests::CountingAlloc::new();

const SMALL: &[u8] = b"GET /small?size=64 HTTP/1.1\r\nHost: cache.test\r\n\r\n";
const LARGE: &[u8] = b"GET /large?size=8000 HTTP/1.1\r\nHost: cache.test\r\n\r\n";
const RANGE: &[u8] =
    b"GET /large?size=8000 HTTP/1.1\r\nHost: cache.test\r\nRange: bytes=100-4199\r\n\r\n";

/// The requests sent in turn: each, its body length and its status line.
const KINDS: [(&[u8], usize, &[u8]); 3] = [
    (SMALL, 64, b"HTTP/1.1 200 OK\r\n"),
    (LARGE, 8000, b"HTTP/1.1 200 OK\r\n"),
    (RANGE, 4100, b"HTTP/1.1 206 Partial Content\r\n"),
];

/// Send `n` requests (the kinds in turn) and read each whole response, checking each is a
/// hit of the kind's length and status.
fn requests(s: &mut TcpStream, buf: &mut [u8; 16384], n: usize) {
    for i in 0..n {
        let (req, len, status) = KINDS[i % KINDS.len()];
        s.write_all(req).expect("request sent");
        let mut got = 0;
        let total = loop {
            let head_end = buf[..got].windows(4).position(|w| w == b"\r\n\r\n");
            if let Some(h) = head_end {
                if got >= h + 4 + len {
                    break h + 4 + len;
                }
            }
            let n = s.read(&mut buf[got..]).expect("response read");
            assert!(n > 0, "request {i}: closed after {got} bytes");
            got += n;
        };
        assert_eq!(total, got, "request {i}: nothing beyond the body");
        let head = &buf[..total - len];
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
    for req in [SMALL, LARGE] {
        s.write_all(req).unwrap();
        let len = if req == SMALL { 64 } else { 8000 };
        let mut got = 0;
        while buf[..got]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .is_none_or(|h| got < h + 4 + len)
        {
            got += s.read(&mut buf[got..]).unwrap();
        }
    }
    requests(&mut s, &mut buf, 500);
    GLOBAL.assert_flat(1_000, 200, |k| requests(&mut s, &mut buf, k as usize));
    assert_eq!(
        origin.requests(),
        2,
        "only the two fills reached the origin"
    );
    drop(s);
    p.shutdown().unwrap();
}
