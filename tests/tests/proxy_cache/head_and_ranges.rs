//! A HEAD and a Range request answered by the cache: what the cache writes itself to a HEAD
//! (a head, no body: RFC 9110 9.3.2), a HEAD's Range (GET only: 14.2), If-Range with a date
//! (13.1.5), and a range asked of a response the origin has just revalidated.

use crate::cache_proxy::{proxy, request, x_cache};
use crate::scripted::{answer, Scripted};
use tests::raw::{self, Client, Response};

/// The responses to the requests `heads` (each a request line and fields with CRLFs, no
/// empty line) sent together on one connection; `true` marks a HEAD.
fn pipelined(addr: std::net::SocketAddr, heads: &[(bool, &str)]) -> Vec<Response> {
    let mut c = Client::connect(addr);
    let all: String = heads.iter().map(|(_, h)| format!("{h}\r\n")).collect();
    c.send(all.as_bytes()).expect("send");
    heads
        .iter()
        .map(|&(head, h)| {
            c.response_to(head, raw::WAIT)
                .unwrap_or_else(|r| panic!("{h}: no complete response: {}", raw::show(&r)))
        })
        .collect()
}

#[test]
fn a_head_the_cache_answers_itself_has_a_head_and_no_body() {
    // A 412 from the store, a 412 after a revalidation, a 504 for only-if-cached and a 502 for
    // an origin that is not there each carried their text body after a HEAD's head: on a
    // kept connection it was read as the start of the next response ("412 Precondition
    // Failed\n" before the GET's status line).
    let o = Scripted::start(vec![
        answer(
            "200 OK",
            &["ETag: \"v1\"", "Cache-Control: max-age=100"],
            b"hello world",
        ),
        answer(
            "304 Not Modified",
            &["ETag: \"v1\"", "Cache-Control: max-age=100"],
            b"",
        ),
    ]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let r = request(addr, "GET", "/c1", "");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    let get = "GET /c1 HTTP/1.1\r\nHost: cache.test\r\n";
    let cases = [
        ("HEAD /c1 HTTP/1.1\r\nHost: cache.test\r\nIf-Match: \"x\"\r\n", "HIT", 1),
        (
            "HEAD /c1 HTTP/1.1\r\nHost: cache.test\r\nIf-Match: \"x\"\r\nCache-Control: no-cache\r\n",
            "REVALIDATED",
            2,
        ),
    ];
    for (head, status, asked) in cases {
        let rs = pipelined(addr, &[(true, head), (false, get)]);
        assert_eq!(
            (
                rs[0].status,
                x_cache(&rs[0]),
                rs[0].header("content-length")
            ),
            (412, status, Some("24")),
            "{head}: the head a GET would get"
        );
        assert_eq!(
            (rs[1].status, x_cache(&rs[1]), &rs[1].body[..]),
            (200, "HIT", &b"hello world"[..]),
            "{head}: the next response on the connection"
        );
        assert_eq!(o.requests(), asked, "{head}");
    }
    // The proxy's own errors close the connection: nothing follows their head.
    let none = "HEAD /none HTTP/1.1\r\nHost: cache.test\r\nCache-Control: only-if-cached\r\n\r\n";
    head_then_close(addr, none, 504);
    p.shutdown().unwrap();
    let gone = tests::ClosedPort::new();
    let (p, addr) = proxy(&[gone.addr()], &[], |_| {});
    head_then_close(addr, "HEAD /x HTTP/1.1\r\nHost: cache.test\r\n\r\n", 502);
    p.shutdown().unwrap();
}

/// `head` (a HEAD) is answered `status` with a head only, then the connection closes.
fn head_then_close(addr: std::net::SocketAddr, head: &str, status: u16) {
    let mut c = Client::connect(addr);
    c.send(head.as_bytes()).expect("send");
    let r = c
        .response_to(true, raw::WAIT)
        .unwrap_or_else(|r| panic!("{head}: no complete response: {}", raw::show(&r)));
    assert_eq!((r.status, x_cache(&r)), (status, "MISS"), "{head}");
    raw::assert_closed(&mut c, &format!("{head}: after the head"));
}

#[test]
fn a_heads_range_is_not_asked_of_the_origin_and_the_head_is_the_200s() {
    // RFC 9110 14.2: Range is for GET only. A HEAD miss fills with a GET: it went with the
    // HEAD's Range and If-Range (a ranged GET), and an origin's 206 reached the HEAD client,
    // where a hit answers the same HEAD with the 200's head.
    let o = Scripted::start(vec![answer(
        "200 OK",
        &["ETag: \"hr\"", "Cache-Control: max-age=100"],
        b"0123456789",
    )]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let range = "Range: bytes=0-3\r\nIf-Range: \"hr\"\r\n";
    for x in ["MISS", "HIT"] {
        let r = request(addr, "HEAD", "/hr", range);
        assert_eq!(
            (r.status, x_cache(&r), r.header("content-length")),
            (200, x, Some("10")),
            "HEAD with a Range"
        );
        assert_eq!(r.header("content-range"), None, "{x}");
    }
    let asked = o.head(0);
    assert!(asked.starts_with("get /hr "), "{asked}");
    assert!(
        !asked.contains("\r\nrange:") && !asked.contains("\r\nif-range:"),
        "the filling GET asks for the whole: {asked}"
    );
    let r = request(addr, "GET", "/hr", "");
    assert_eq!(
        (r.status, x_cache(&r), &r.body[..], o.requests()),
        (200, "HIT", &b"0123456789"[..], 1)
    );
    p.shutdown().unwrap();
}

#[test]
fn an_if_range_date_holds_only_for_a_last_modified_that_is_a_strong_validator() {
    // RFC 9110 13.1.5: an If-Range date that is not a strong validator is false (the whole
    // 200). 8.8.2.2: a cache's Last-Modified is strong when at least 60 s before the stored
    // response's Date. One equal to its Date gave a 206.
    const DATE: &str = "Wed, 01 Jan 2020 00:00:00 GMT";
    // (Last-Modified, the answer to Range with If-Range of that date)
    let cases = [
        (DATE, 200),
        ("Tue, 31 Dec 2019 23:59:30 GMT", 200),
        ("Tue, 31 Dec 2019 23:59:00 GMT", 206),
    ];
    for (lm, status) in cases {
        let o = Scripted::start(vec![answer(
            "200 OK",
            &[
                &format!("Date: {DATE}"),
                &format!("Last-Modified: {lm}"),
                "Cache-Control: max-age=2000000000",
            ],
            b"0123456789",
        )]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let r = request(addr, "GET", "/ir", "");
        assert_eq!((r.status, x_cache(&r)), (200, "MISS"), "{lm}");
        let asked = format!("Range: bytes=0-3\r\nIf-Range: {lm}\r\n");
        let r = request(addr, "GET", "/ir", &asked);
        let body: &[u8] = if status == 206 {
            b"0123"
        } else {
            b"0123456789"
        };
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..], o.requests()),
            (status, "HIT", body, 1),
            "Last-Modified {lm}, Date {DATE}"
        );
        p.shutdown().unwrap();
    }
}

#[test]
fn a_range_revalidated_by_the_origin_is_answered_as_a_fresh_hit_would_be() {
    // A Range request that revalidates (its own no-cache, or a stale entry) and is answered
    // 304 got the whole 200 (`bytes=50-` of 10 bytes too, not a 416), where the same request
    // on a fresh hit gets its 206.
    let cases = [
        ("Cache-Control: max-age=100", "Cache-Control: no-cache\r\n"),
        ("Cache-Control: max-age=0", ""),
    ];
    for (cc, extra) in cases {
        let not_modified = || answer("304 Not Modified", &["ETag: \"rv\"", cc], b"");
        let o = Scripted::start(vec![
            answer("200 OK", &["ETag: \"rv\"", cc], b"0123456789"),
            not_modified(),
            not_modified(),
        ]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let r = request(addr, "GET", "/rv", "");
        assert_eq!((r.status, x_cache(&r)), (200, "MISS"), "{cc}");
        // (Range, status, Content-Range, body: a 416's is the proxy's text)
        let asked: [(&str, u16, &str, Option<&[u8]>); 2] = [
            ("bytes=0-3", 206, "bytes 0-3/10", Some(b"0123")),
            ("bytes=50-", 416, "bytes */10", None),
        ];
        for (i, (range, status, content_range, body)) in asked.into_iter().enumerate() {
            let r = request(addr, "GET", "/rv", &format!("Range: {range}\r\n{extra}"));
            assert_eq!(
                (r.status, x_cache(&r), o.requests()),
                (status, "REVALIDATED", i as u64 + 2),
                "{cc} {extra:?}: {range}"
            );
            assert_eq!(
                r.header("content-range"),
                Some(content_range),
                "{cc} {extra:?}: {range}"
            );
            if let Some(body) = body {
                assert_eq!(&r.body[..], body, "{cc} {extra:?}: {range}");
            }
        }
        p.shutdown().unwrap();
    }
}

#[test]
fn the_caches_own_answers_keep_an_http_1_0_keep_alive_connection_and_say_so() {
    // A PURGE's 200/404 and a stored response's 412 and 416 kept an HTTP/1.0 keep-alive
    // connection without `Connection: keep-alive`: a 1.0 client reads that as "the server
    // closes" and waits for an end that never comes (ab -k hung until its timeout).
    let stored = || {
        answer(
            "200 OK",
            &["ETag: \"v1\"", "Cache-Control: max-age=100"],
            b"hello world",
        )
    };
    // The second answer fills the cache again after the PURGE.
    let o = Scripted::start(vec![stored(), stored()]);
    let (p, addr) = proxy(&[o.addr()], &[], |c| {
        c.purge_from = vec![proxy::config::cache::Cidr::parse("127.0.0.1").unwrap()];
    });
    let r = request(addr, "GET", "/c1", "");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    let ka = "Host: cache.test\r\nConnection: keep-alive\r\n";
    let cases = [
        (format!("GET /c1 HTTP/1.0\r\n{ka}If-Match: \"x\"\r\n"), 412),
        (format!("GET /c1 HTTP/1.0\r\n{ka}Range: bytes=99-\r\n"), 416),
        (format!("PURGE /none HTTP/1.0\r\n{ka}"), 404),
        (format!("PURGE /c1 HTTP/1.0\r\n{ka}"), 200),
    ];
    for (head, status) in cases {
        let mut c = Client::connect(addr);
        c.send(format!("{head}\r\n").as_bytes()).expect("send");
        let r = raw::response(&mut c, &head);
        assert_eq!(
            (r.status, r.connection_has("keep-alive")),
            (status, true),
            "{head}"
        );
        // The connection is still there: a second request gets its answer.
        c.send(format!("GET /c1 HTTP/1.0\r\n{ka}\r\n").as_bytes())
            .expect("send");
        let r = raw::response(&mut c, "the next request");
        assert!(matches!(r.status, 200), "{head}: then {}", r.status);
    }
    p.shutdown().unwrap();
}
