//! Head parsing cost: our strict codec next to plain httparse on the same bytes, so the
//! overhead of our checks (bare LF, framing, Host, keep-alive) is visible; and a whole
//! response read as the loader reads one, with its head parsed or taken from a `HeadMemo`.
//!
//! Run: `cargo bench -p benches --bench codec`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use shared::http::{
    parse_request, parse_response, HeadMemo, Limits, ReadStep, RequestMethod, ResponseReader,
    Status,
};

/// A Chrome-like navigation request (570 bytes, 13 fields).
const REQUEST: &[u8] = b"GET /wiki/Hypertext_Transfer_Protocol?action=view HTTP/1.1\r\n\
Host: en.wikipedia.org\r\n\
Connection: keep-alive\r\n\
sec-ch-ua-mobile: ?0\r\n\
sec-ch-ua-platform: \"Linux\"\r\n\
Upgrade-Insecure-Requests: 1\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8\r\n\
Sec-Fetch-Site: none\r\n\
Sec-Fetch-Mode: navigate\r\n\
Sec-Fetch-User: ?1\r\n\
Sec-Fetch-Dest: document\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Accept-Language: en-US,en;q=0.9\r\n\
\r\n";

/// A typical origin response head (427 bytes, 11 fields).
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\n\
Date: Mon, 30 Nov 2026 00:00:00 GMT\r\n\
Content-Type: text/html; charset=UTF-8\r\n\
Content-Length: 84512\r\n\
Connection: keep-alive\r\n\
Cache-Control: private, s-maxage=0, max-age=0, must-revalidate\r\n\
Content-Language: en\r\n\
Last-Modified: Sun, 29 Nov 2026 22:10:41 GMT\r\n\
Vary: Accept-Encoding,Cookie\r\n\
Server: nginx\r\n\
X-Content-Type-Options: nosniff\r\n\
Strict-Transport-Security: max-age=106384710; includeSubDomains; preload\r\n\r\n";

fn request_head(c: &mut Criterion) {
    let limits = Limits::default();
    let mut g = c.benchmark_group("request_head");
    g.throughput(Throughput::Bytes(REQUEST.len() as u64));
    g.bench_function("httparse", |b| {
        b.iter(|| {
            let mut headers = [httparse::EMPTY_HEADER; 100];
            let mut req = httparse::Request::new(&mut headers);
            let n = req.parse(black_box(REQUEST)).unwrap();
            assert!(n.is_complete());
            black_box(req.headers.len())
        })
    });
    g.bench_function("shared::http", |b| {
        b.iter(|| {
            let mut headers = [httparse::EMPTY_HEADER; 100];
            match parse_request(black_box(REQUEST), &mut headers, &limits) {
                Ok(Status::Complete(h)) => black_box((h.head_len, h.body, h.keep_alive)),
                other => panic!("{other:?}"),
            }
        })
    });
    g.finish();
}

fn response_head(c: &mut Criterion) {
    let limits = Limits::default();
    let mut g = c.benchmark_group("response_head");
    g.throughput(Throughput::Bytes(RESPONSE.len() as u64));
    g.bench_function("httparse", |b| {
        b.iter(|| {
            let mut headers = [httparse::EMPTY_HEADER; 100];
            let mut res = httparse::Response::new(&mut headers);
            let n = res.parse(black_box(RESPONSE)).unwrap();
            assert!(n.is_complete());
            black_box(res.headers.len())
        })
    });
    g.bench_function("shared::http", |b| {
        b.iter(|| {
            let mut headers = [httparse::EMPTY_HEADER; 100];
            match parse_response(
                black_box(RESPONSE),
                &mut headers,
                RequestMethod::Other,
                &limits,
            ) {
                Ok(Status::Complete(h)) => black_box((h.head_len, h.body, h.keep_alive)),
                other => panic!("{other:?}"),
            }
        })
    });
    g.finish();
}

/// A whole response (head and a 64-byte body) read as the loader reads one: parsed each time,
/// and with a memo that holds its head (a server's repeated head).
fn response_read(c: &mut Criterion) {
    let limits = Limits::default();
    let head =
        String::from_utf8_lossy(RESPONSE).replace("Content-Length: 84512", "Content-Length: 64");
    let mut wire = head.clone().into_bytes();
    wire.extend_from_slice(&[b'x'; 64]);
    // The same response a second later: its Date differs.
    let mut later = head.replace("00:00:00", "00:00:01").into_bytes();
    later.extend_from_slice(&[b'x'; 64]);
    let read = |wire: &[u8], memo: &mut HeadMemo| {
        let step = ResponseReader::new().advance(
            black_box(wire),
            (RequestMethod::Other, &limits),
            memo,
            |_| {},
        );
        match step {
            Ok(ReadStep::Done(n, r)) => black_box((n, r.body_len)),
            other => panic!("{other:?}"),
        }
    };
    let mut g = c.benchmark_group("response_read");
    g.throughput(Throughput::Bytes(wire.len() as u64));
    // Every head differs from the one before: parsed, and kept in the memo, each time.
    let mut memo = HeadMemo::default();
    let mut flip = false;
    g.bench_function("parsed", |b| {
        b.iter(|| {
            flip = !flip;
            read(if flip { &wire } else { &later }, &mut memo)
        })
    });
    let mut memo = HeadMemo::default();
    g.bench_function("memo", |b| b.iter(|| read(&wire, &mut memo)));
    g.finish();
}

criterion_group!(benches, request_head, response_head, response_read);
criterion_main!(benches);
