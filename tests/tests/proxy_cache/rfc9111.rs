//! Issue 26: the cache to the letter of RFC 9111. Each behaviour is a table of steps against
//! the scripted origin (`tests::origin()`: the query says what it answers), each step with the
//! status and `X-Cache` it must get and the exact number of requests the origin has seen after
//! it: the count is the proof of what was served from the store.

use shared::origin::Origin;
use std::net::SocketAddr;

use crate::cache_proxy::{proxy, request, x_cache};
use tests::raw::Response;

/// One request and what must follow: `method path`, extra head lines, the status and X-Cache
/// of the answer, the origin's request count after it.
pub struct Step {
    pub method: &'static str,
    pub path: &'static str,
    pub extra: &'static str,
    pub status: u16,
    pub x_cache: &'static str,
    pub origin: u64,
}

pub const fn step(
    method: &'static str,
    path: &'static str,
    extra: &'static str,
    (status, x_cache, origin): (u16, &'static str, u64),
) -> Step {
    Step {
        method,
        path,
        extra,
        status,
        x_cache,
        origin,
    }
}

/// Run `steps` in order against `addr` (in front of `o`), asserting each; the answers.
pub fn run(case: &str, addr: SocketAddr, o: &Origin, steps: &[Step]) -> Vec<Response> {
    let mut out = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let r = request(addr, s.method, s.path, s.extra);
        assert_eq!(
            (r.status, x_cache(&r), o.requests()),
            (s.status, s.x_cache, s.origin),
            "{case}, step {i}: {} {} {:?}",
            s.method,
            s.path,
            s.extra
        );
        out.push(r);
    }
    out
}

/// A stored response (`max-age=3600`) at `P`.
const P: &str = "/p?header=Cache-Control:max-age%3D3600";

#[test]
fn age_is_read_from_its_first_value() {
    let cases: [(&str, &[Step]); 3] = [
        (
            // RFC 9111 5.1 and 4.2.3: `Age: 7200, 0` is 7200 s old, past max-age=3600.
            "Age 7200, 0 with max-age=3600 is stale",
            &[
                step(
                    "GET",
                    "/a?header=Cache-Control:max-age%3D3600&header=Age:7200,%200",
                    "",
                    (200, "MISS", 1),
                ),
                step(
                    "GET",
                    "/a?header=Cache-Control:max-age%3D3600&header=Age:7200,%200",
                    "",
                    (200, "MISS", 2),
                ),
            ],
        ),
        (
            "Age 10, 7200 with max-age=3600 is fresh",
            &[
                step(
                    "GET",
                    "/b?header=Cache-Control:max-age%3D3600&header=Age:10,%207200",
                    "",
                    (200, "MISS", 1),
                ),
                step(
                    "GET",
                    "/b?header=Cache-Control:max-age%3D3600&header=Age:10,%207200",
                    "",
                    (200, "HIT", 1),
                ),
            ],
        ),
        (
            "Age 7200 on one line",
            &[
                step(
                    "GET",
                    "/c?header=Cache-Control:max-age%3D3600&header=Age:7200",
                    "",
                    (200, "MISS", 1),
                ),
                step(
                    "GET",
                    "/c?header=Cache-Control:max-age%3D3600&header=Age:7200",
                    "",
                    (200, "MISS", 2),
                ),
            ],
        ),
    ];
    for (case, steps) in cases {
        let o = tests::origin();
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let r = run(case, addr, &o, steps);
        // A hit's Age counts from the first value too.
        if r[1].header("x-cache") == Some("HIT") {
            assert!(r[1]
                .header("age")
                .is_some_and(|a| a.parse::<u64>().unwrap() >= 10));
        }
        p.shutdown().unwrap();
    }
}

#[test]
fn any_method_not_known_to_be_safe_invalidates() {
    // RFC 9111 4.4 with RFC 9110 9.2.1: GET, HEAD, OPTIONS and TRACE are safe; a non-error
    // answer to any other method (extension methods included) invalidates the target URI.
    let cases: [(&str, u64); 7] = [
        ("POST", 3),
        ("PUT", 3),
        ("DELETE", 3),
        ("PATCH", 3),
        ("M-SEARCH", 3),
        ("FOOBAR", 3),
        ("OPTIONS", 2),
    ];
    for (method, after) in cases {
        let o = tests::origin();
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let hit_after = if after == 2 { "HIT" } else { "MISS" };
        let steps = [
            step("GET", P, "", (200, "MISS", 1)),
            step("GET", P, "", (200, "HIT", 1)),
            step(method, P, "Content-Length: 0\r\n", (200, "BYPASS", 2)),
            step("GET", P, "", (200, hit_after, after)),
        ];
        run(method, addr, &o, &steps);
        p.shutdown().unwrap();
    }
    // (An error answer invalidates nothing: `policy::invalidates` is unit-tested.)
}

#[test]
fn ttl_zero_stores_only_what_the_response_makes_fresh() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |c| c.ttl = std::time::Duration::ZERO);
    let steps = [
        step("GET", "/plain", "", (200, "MISS", 1)),
        step("GET", "/plain", "", (200, "MISS", 2)),
        step("GET", P, "", (200, "MISS", 3)),
        step("GET", P, "", (200, "HIT", 3)),
    ];
    run("ttl = 0s", addr, &o, &steps);
    p.shutdown().unwrap();
}

#[test]
fn targeted_cache_control_decides_for_this_cache_and_is_not_forwarded() {
    // RFC 9213: CDN-Cache-Control (the default `targeted` list) beats Cache-Control and
    // Expires; invalid, it is ignored as a whole.
    const CDN_LONG: &str =
        "/t1?header=CDN-Cache-Control:max-age%3D3600&header=Cache-Control:no-store";
    const CDN_NO_STORE: &str =
        "/t2?header=CDN-Cache-Control:no-store&header=Cache-Control:max-age%3D3600";
    const CDN_ZERO: &str =
        "/t3?header=CDN-Cache-Control:max-age%3D0&header=Cache-Control:max-age%3D3600";
    const CDN_INVALID: &str =
        "/t4?header=CDN-Cache-Control:max-age%3D%2210000%22&header=Cache-Control:no-store";
    const CDN_PRIVATE: &str =
        "/t5?header=CDN-Cache-Control:private&header=Cache-Control:max-age%3D3600";
    // RFC 9213 2.1 makes the field a Dictionary (RFC 8941 3.2): a repeated key's last value
    // counts, on one line or across two.
    const CDN_REPEATED: &str = "/t7?header=CDN-Cache-Control:max-age%3D3600%2C%20max-age%3D0\
        &header=Cache-Control:max-age%3D3600";
    const CDN_TWO_LINES: &str = "/t8?header=CDN-Cache-Control:max-age%3D3600\
        &header=CDN-Cache-Control:max-age%3D0&header=Cache-Control:max-age%3D3600";
    let cases: [(&str, &[Step]); 7] = [
        (
            "CDN-Cache-Control: max-age=3600, max-age=0",
            &[
                step("GET", CDN_REPEATED, "", (200, "MISS", 1)),
                step("GET", CDN_REPEATED, "", (200, "MISS", 2)),
            ],
        ),
        (
            "CDN-Cache-Control: max-age=3600 then a line max-age=0",
            &[
                step("GET", CDN_TWO_LINES, "", (200, "MISS", 1)),
                step("GET", CDN_TWO_LINES, "", (200, "MISS", 2)),
            ],
        ),
        (
            "CDN-Cache-Control: max-age=3600 over Cache-Control: no-store",
            &[
                step("GET", CDN_LONG, "", (200, "MISS", 1)),
                step("GET", CDN_LONG, "", (200, "HIT", 1)),
            ],
        ),
        (
            "CDN-Cache-Control: no-store over Cache-Control: max-age",
            &[
                step("GET", CDN_NO_STORE, "", (200, "MISS", 1)),
                step("GET", CDN_NO_STORE, "", (200, "MISS", 2)),
            ],
        ),
        (
            "CDN-Cache-Control: max-age=0",
            &[
                step("GET", CDN_ZERO, "", (200, "MISS", 1)),
                step("GET", CDN_ZERO, "", (200, "MISS", 2)),
            ],
        ),
        (
            "an invalid CDN-Cache-Control is ignored",
            &[
                step("GET", CDN_INVALID, "", (200, "MISS", 1)),
                step("GET", CDN_INVALID, "", (200, "MISS", 2)),
            ],
        ),
        (
            "CDN-Cache-Control: private",
            &[
                step("GET", CDN_PRIVATE, "", (200, "MISS", 1)),
                step("GET", CDN_PRIVATE, "", (200, "MISS", 2)),
            ],
        ),
    ];
    for (case, steps) in cases {
        let o = tests::origin();
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        for r in run(case, addr, &o, steps) {
            assert_eq!(r.header("cdn-cache-control"), None, "{case}: not forwarded");
            assert!(
                r.header("cache-control").is_some(),
                "{case}: Cache-Control is"
            );
        }
        p.shutdown().unwrap();
    }
    // `targeted = []`: CDN-Cache-Control means nothing to this cache and is passed on.
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |c| c.targeted.clear());
    let steps = [
        step("GET", CDN_LONG, "", (200, "MISS", 1)),
        step("GET", CDN_LONG, "", (200, "MISS", 2)),
    ];
    for r in run("targeted = []", addr, &o, &steps) {
        assert_eq!(r.header("cdn-cache-control"), Some("max-age=3600"));
    }
    // A list of another name: that one is obeyed.
    let o = tests::origin();
    let (p2, addr) = proxy(&[o.addr()], &[], |c| {
        c.targeted = vec!["Proxy-Cache-Control".into()]
    });
    let path = "/t6?header=Proxy-Cache-Control:max-age%3D3600";
    let steps = [
        step("GET", path, "", (200, "MISS", 1)),
        step("GET", path, "", (200, "HIT", 1)),
    ];
    for r in run("targeted = [Proxy-Cache-Control]", addr, &o, &steps) {
        assert_eq!(r.header("proxy-cache-control"), None);
    }
    p.shutdown().unwrap();
    p2.shutdown().unwrap();
}

/// Ask for `path` every 10 ms until the answer is not `X-Cache: skip` (an event: the entry's
/// age passed a bound); the answers seen on the way and the first other one.
fn until_not(addr: SocketAddr, path: &str, skip: &[&str]) -> (Vec<Response>, Response) {
    let deadline = std::time::Instant::now() + tests::raw::WAIT;
    let mut seen = Vec::new();
    loop {
        let r = request(addr, "GET", path, "");
        if !skip.contains(&x_cache(&r)) {
            return (seen, r);
        }
        seen.push(r);
        assert!(
            std::time::Instant::now() < deadline,
            "{path}: still {skip:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn stale_while_revalidate_answers_at_once_and_revalidates_once() {
    // RFC 5861 3. The revalidation is held by the origin for 1 s: the requests that come
    // meanwhile are answered STALE and start no other.
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    // max-age=2: the answer is 1 s old when it arrives (its delay, RFC 9111 4.2.3).
    let path = "/swr?delay=1s&header=Cache-Control:max-age%3D2,%20stale-while-revalidate%3D60";
    run("fill", addr, &o, &[step("GET", path, "", (200, "MISS", 1))]);
    let (_, r) = until_not(addr, path, &["HIT"]);
    assert_eq!((r.status, x_cache(&r)), (200, "STALE"));
    assert!(r.is_pattern(64), "the stored body");
    assert!(r
        .header("age")
        .is_some_and(|a| a.parse::<u64>().unwrap() >= 1));
    // The revalidation reached the origin after the answer.
    assert!(tests::eventually(tests::raw::WAIT, || o.requests() == 2));
    for i in 0..3 {
        let r = request(addr, "GET", path, "");
        assert_eq!(
            (r.status, x_cache(&r)),
            (200, "STALE"),
            "while revalidating, {i}"
        );
    }
    // The revalidation stored a fresh response: a hit, and no other origin request.
    let (stale, r) = until_not(addr, path, &["STALE"]);
    assert_eq!(
        (r.status, x_cache(&r), o.requests()),
        (200, "HIT", 2),
        "{} stale",
        stale.len()
    );
    p.shutdown().unwrap();
}

#[test]
fn stale_while_revalidate_ends_with_its_window() {
    // max-age=1, stale-while-revalidate=1, and the origin gone after the fill: STALE while
    // the age is within 2 s (each revalidation fails), then the origin's failure (502, MISS).
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &["--admin", "127.0.0.1:0"], |_| {});
    let path = "/swr?header=Cache-Control:max-age%3D1,%20stale-while-revalidate%3D1";
    run("fill", addr, &o, &[step("GET", path, "", (200, "MISS", 1))]);
    o.stop();
    let (_, first) = until_not(addr, path, &["HIT"]);
    assert_eq!((first.status, x_cache(&first)), (200, "STALE"));
    let (stale, after) = until_not(addr, path, &["STALE"]);
    assert_eq!((after.status, x_cache(&after)), (502, "MISS"));
    // Each failed background revalidation is counted (one per STALE answer at most: none
    // starts while another runs).
    let admin = p.admin_addr().expect("admin");
    let errors = || {
        let m = tests::scrape::scrape(admin);
        tests::scrape::total(&m, "proxy_cache_revalidation_errors_total") as usize
    };
    assert!(tests::eventually(tests::raw::WAIT, || errors() >= 1));
    assert!(
        errors() <= 1 + stale.len(),
        "{} for {} STALE",
        errors(),
        1 + stale.len()
    );
    p.shutdown().unwrap();
}

#[test]
fn stale_if_error_from_the_response() {
    // RFC 5861 4, the route's stale_if_error left at 0: the response's own serves, on a
    // failed connection and on a 5xx answer alike.
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let sie = "/sie?header=Cache-Control:max-age%3D1,%20stale-if-error%3D60";
    let plain = "/plain?header=Cache-Control:max-age%3D1";
    run(
        "fill",
        addr,
        &o,
        &[
            step("GET", sie, "", (200, "MISS", 1)),
            step("GET", plain, "", (200, "MISS", 2)),
        ],
    );
    o.stop();
    let (_, r) = until_not(addr, sie, &["HIT"]);
    assert_eq!((r.status, x_cache(&r)), (200, "STALE"));
    assert!(r.is_pattern(64));
    let (_, r) = until_not(addr, plain, &["HIT"]);
    assert_eq!(
        (r.status, x_cache(&r)),
        (502, "MISS"),
        "no stale-if-error: the failure"
    );
    p.shutdown().unwrap();

    let switch = shared::origin::switch::StatusSwitch::new("/e", 200);
    let o = Origin::start(shared::origin::OriginConfig {
        switch: Some(switch.clone()),
        ..shared::origin::OriginConfig::default()
    })
    .unwrap();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let sie = "/e?header=Cache-Control:max-age%3D1,%20stale-if-error%3D60";
    run("fill", addr, &o, &[step("GET", sie, "", (200, "MISS", 1))]);
    switch.set(503);
    let (_, r) = until_not(addr, sie, &["HIT"]);
    assert_eq!((r.status, x_cache(&r), o.requests()), (200, "STALE", 2));
    switch.set(404);
    let r = request(addr, "GET", sie, "");
    assert_eq!(
        (r.status, x_cache(&r), o.requests()),
        (404, "MISS", 3),
        "not an error: passed on"
    );
    p.shutdown().unwrap();
}

#[test]
fn ranges_are_answered_from_a_stored_complete_response() {
    // RFC 9111 3.4 and RFC 9110 14: one range -> 206 from the store; several -> the whole
    // 200; none of its bytes -> 416 with `Content-Range: bytes */length`; an If-Range the
    // stored response fails -> the whole 200. Small (memory) and large (body file) bodies.
    for size in [100usize, 10_000] {
        let o = tests::origin();
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let path: &'static str = Box::leak(
            format!("/r?size={size}&header=Cache-Control:max-age%3D3600&header=ETag:%22v1%22")
                .into_boxed_str(),
        );
        let whole = shared::origin::expected_body(size);
        let last = size - 1;
        let cases: Vec<(String, u16, Option<String>, std::ops::Range<usize>)> = vec![
            (
                "bytes=0-9".into(),
                206,
                Some(format!("bytes 0-9/{size}")),
                0..10,
            ),
            (
                format!("bytes={}-", size - 5),
                206,
                Some(format!("bytes {}-{last}/{size}", size - 5)),
                size - 5..size,
            ),
            (
                "bytes=-3".into(),
                206,
                Some(format!("bytes {}-{last}/{size}", size - 3)),
                size - 3..size,
            ),
            ("bytes=0-1, 4-5".into(), 200, None, 0..size),
            (
                format!("bytes={size}-"),
                416,
                Some(format!("bytes */{size}")),
                0..0,
            ),
            ("bytes=5-2".into(), 200, None, 0..size),
        ];
        run("fill", addr, &o, &[step("GET", path, "", (200, "MISS", 1))]);
        for (range, status, content_range, bytes) in cases {
            let r = request(addr, "GET", path, &format!("Range: {range}\r\n"));
            assert_eq!(
                (r.status, x_cache(&r), o.requests()),
                (status, "HIT", 1),
                "{size}: {range}"
            );
            assert_eq!(
                r.header("content-range"),
                content_range.as_deref(),
                "{size}: {range}"
            );
            if status != 416 {
                assert_eq!(r.body, whole[bytes.clone()], "{size}: {range}");
                assert_eq!(r.header("content-length"), Some(&*bytes.len().to_string()));
                assert_eq!(r.header("etag"), Some("\"v1\""), "the stored fields");
            }
        }
        let if_range = [("\"v1\"", 206), ("\"v2\"", 200), ("W/\"v1\"", 200)];
        for (tag, status) in if_range {
            let r = request(
                addr,
                "GET",
                path,
                &format!("Range: bytes=0-9\r\nIf-Range: {tag}\r\n"),
            );
            assert_eq!(
                (r.status, x_cache(&r), o.requests()),
                (status, "HIT", 1),
                "If-Range {tag}"
            );
        }
        // HEAD: the whole head.
        let r = request(addr, "HEAD", path, "Range: bytes=0-9\r\n");
        assert_eq!(
            (r.status, r.header("content-length")),
            (200, Some(&*size.to_string()))
        );
        p.shutdown().unwrap();
    }
}

#[test]
fn a_206_from_the_origin_passes_through_unstored() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let path = "/part?status=206&size=5&header=Content-Range:bytes%200-4/100&header=Cache-Control:max-age%3D3600";
    let steps = [
        step("GET", path, "Range: bytes=0-4\r\n", (206, "MISS", 1)),
        step("GET", path, "Range: bytes=0-4\r\n", (206, "MISS", 2)),
        step("GET", path, "", (206, "MISS", 3)),
    ];
    for r in run("206 from the origin", addr, &o, &steps) {
        assert_eq!(r.header("content-range"), Some("bytes 0-4/100"));
        assert!(r.is_pattern(5));
    }
    p.shutdown().unwrap();
}

#[test]
fn interim_responses_reach_the_client_of_a_miss_and_103s_again_on_hits() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let path = "/i?interim=103&header=Cache-Control:max-age%3D3600";
    let mut c = tests::raw::Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n\r\n").as_bytes())
        .unwrap();
    let early = tests::raw::response(&mut c, "the 103");
    assert_eq!(
        (early.status, early.header("link")),
        (103, Some("</hint.css>; rel=preload"))
    );
    let r = tests::raw::response(&mut c, "the final response");
    assert_eq!((r.status, x_cache(&r), o.requests()), (200, "MISS", 1));
    assert_eq!(r.header("link"), None, "the 103's fields are its own");
    // RFC 8297: the stored 103 goes again before a hit to an HTTP/1.1 client (on the same
    // connection, keep-alive), the final response without its fields.
    for i in 0..2 {
        c.send(format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n\r\n").as_bytes())
            .unwrap();
        let early = tests::raw::response(&mut c, "the 103 again");
        assert_eq!(
            (early.status, early.header("link")),
            (103, Some("</hint.css>; rel=preload")),
            "hit {i}"
        );
        let r = tests::raw::response(&mut c, "the hit");
        assert_eq!(
            (r.status, x_cache(&r), o.requests()),
            (200, "HIT", 1),
            "hit {i}"
        );
        assert_eq!(r.header("link"), None, "hit {i}");
    }
    // An HTTP/1.0 client gets none.
    let mut old = tests::raw::Client::connect(addr);
    old.send(format!("GET {path} HTTP/1.0\r\nHost: cache.test\r\n\r\n").as_bytes())
        .unwrap();
    let r = tests::raw::response(&mut old, "the hit, HTTP/1.0");
    assert_eq!((r.status, x_cache(&r), o.requests()), (200, "HIT", 1));
    // A 102 is about its exchange only: not sent again.
    let path = "/i2?interim=102&header=Cache-Control:max-age%3D3600";
    let mut c = tests::raw::Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n\r\n").as_bytes())
        .unwrap();
    assert_eq!(tests::raw::response(&mut c, "the 102").status, 102);
    let r = tests::raw::response(&mut c, "the miss");
    assert_eq!((r.status, x_cache(&r), o.requests()), (200, "MISS", 2));
    run("hit", addr, &o, &[step("GET", path, "", (200, "HIT", 2))]);
    p.shutdown().unwrap();
}

#[test]
fn heuristic_freshness_from_last_modified() {
    // RFC 9111 4.2.2, ttl = "0s" so that only the heuristic can make these fresh.
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |c| c.ttl = std::time::Duration::ZERO);
    let old = "/lm?header=Last-Modified:Tue,%2014%20Nov%202000%2022:13:20%20GMT";
    let gone = "/gone?status=410&header=Last-Modified:Tue,%2014%20Nov%202000%2022:13:20%20GMT";
    let moved = "/tmp?status=302&header=Last-Modified:Tue,%2014%20Nov%202000%2022:13:20%20GMT";
    let steps = [
        step("GET", old, "", (200, "MISS", 1)),
        step("GET", old, "", (200, "HIT", 1)),
        step("GET", gone, "", (410, "MISS", 2)),
        step("GET", gone, "", (410, "HIT", 2)),
        // 302 is not heuristically cacheable.
        step("GET", moved, "", (302, "MISS", 3)),
        step("GET", moved, "", (302, "MISS", 4)),
        step("GET", "/none", "", (200, "MISS", 5)),
        step("GET", "/none", "", (200, "MISS", 6)),
    ];
    run("heuristic", addr, &o, &steps);
    p.shutdown().unwrap();
}

#[test]
fn no_cache_responses_are_stored_and_revalidated_on_every_use() {
    // RFC 9111 5.2.2.4: with a validator the response is stored, and each use is a conditional
    // request (a 304 from the origin: REVALIDATED, the stored body); without one, not stored.
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let tagged = "/nc?header=Cache-Control:no-cache&header=ETag:%22n1%22";
    let bare = "/nc2?header=Cache-Control:no-cache";
    let steps = [
        step("GET", tagged, "", (200, "MISS", 1)),
        step("GET", tagged, "", (200, "REVALIDATED", 2)),
        step("GET", tagged, "", (200, "REVALIDATED", 3)),
        step("GET", bare, "", (200, "MISS", 4)),
        step("GET", bare, "", (200, "MISS", 5)),
    ];
    let r = run("no-cache", addr, &o, &steps);
    assert!(
        r[1].is_pattern(64) && r[2].is_pattern(64),
        "the stored body"
    );
    p.shutdown().unwrap();
}

#[test]
fn must_understand_with_no_store() {
    // RFC 9111 5.2.2.3: a 200 is understood, stored despite no-store; a 299 is not.
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let ok = "/mu?header=Cache-Control:must-understand,%20no-store,%20max-age%3D3600";
    let odd = "/mu?status=299&header=Cache-Control:must-understand,%20no-store,%20max-age%3D3600";
    let steps = [
        step("GET", ok, "", (200, "MISS", 1)),
        step("GET", ok, "", (200, "HIT", 1)),
        step("GET", odd, "", (299, "MISS", 2)),
        step("GET", odd, "", (299, "MISS", 3)),
    ];
    run("must-understand", addr, &o, &steps);
    p.shutdown().unwrap();
}

#[test]
fn vary_accept_language_is_normalised_only_where_the_meaning_is_the_same() {
    // RFC 9111 4.1: two values select one variant only when a normalisation "known to have
    // identical semantics" makes them alike: case, whitespace, the order of ranges of
    // different weights, `q=1` spelled out or not. Another weight or a `q=0` exclusion is
    // another request (it was one: `*, fr;q=0` got the French body stored for `*`).
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let path = "/lang?header=Vary:Accept-Language&header=Cache-Control:max-age%3D3600";
    let steps = [
        step(
            "GET",
            path,
            "Accept-Language: en-US, fr;q=0.5\r\n",
            (200, "MISS", 1),
        ),
        step(
            "GET",
            path,
            "Accept-Language: fr;q=0.500,EN-us\r\n",
            (200, "HIT", 1),
        ),
        step(
            "GET",
            path,
            "Accept-Language: en-US;q=1 , fr;q=0.5\r\n",
            (200, "HIT", 1),
        ),
        step(
            "GET",
            path,
            "Accept-Language: en-US, fr;q=0.4\r\n",
            (200, "MISS", 2),
        ),
        step(
            "GET",
            path,
            "Accept-Language: en-us, de;q=0, fr;q=0.5\r\n",
            (200, "MISS", 3),
        ),
        step("GET", path, "Accept-Language: *\r\n", (200, "MISS", 4)),
        step(
            "GET",
            path,
            "Accept-Language: *, fr;q=0\r\n",
            (200, "MISS", 5),
        ),
        step(
            "GET",
            path,
            "Accept-Language: *, FR;q=0.0\r\n",
            (200, "HIT", 5),
        ),
        step("GET", path, "", (200, "MISS", 6)),
    ];
    run("Accept-Language", addr, &o, &steps);
    p.shutdown().unwrap();
}

#[test]
fn vary_accept_encoding_keeps_apart_what_the_origin_tells_apart() {
    // A coding this cache does not know and a `q=0` exclusion stay in the value: a response
    // in `compress` was served to `identity` and to an empty Accept-Encoding (both read as
    // "no known coding"), and one for `gzip, br` to a client refusing neither but weighing
    // them otherwise.
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let path = "/ae?header=Vary:Accept-Encoding&header=Content-Encoding:compress\
        &header=Cache-Control:max-age%3D3600";
    let steps = [
        step(
            "GET",
            path,
            "Accept-Encoding: compress\r\n",
            (200, "MISS", 1),
        ),
        step(
            "GET",
            path,
            "Accept-Encoding: COMPRESS;q=1\r\n",
            (200, "HIT", 1),
        ),
        step(
            "GET",
            path,
            "Accept-Encoding: identity\r\n",
            (200, "MISS", 2),
        ),
        step("GET", path, "Accept-Encoding: \r\n", (200, "MISS", 3)),
        step(
            "GET",
            path,
            "Accept-Encoding: gzip, br\r\n",
            (200, "MISS", 4),
        ),
        step(
            "GET",
            path,
            "Accept-Encoding: br;q=1 , GZIP\r\n",
            (200, "HIT", 4),
        ),
        step(
            "GET",
            path,
            "Accept-Encoding: x-gzip,br\r\n",
            (200, "HIT", 4),
        ),
        step(
            "GET",
            path,
            "Accept-Encoding: gzip;q=0.5, br\r\n",
            (200, "MISS", 5),
        ),
        step(
            "GET",
            path,
            "Accept-Encoding: gzip, br, compress;q=0\r\n",
            (200, "MISS", 6),
        ),
        step("GET", path, "", (200, "MISS", 7)),
    ];
    run("Accept-Encoding", addr, &o, &steps);
    p.shutdown().unwrap();
}

#[test]
fn location_and_content_location_of_the_same_origin_are_invalidated_too() {
    // RFC 9111 4.4: after a successful POST, the URIs its answer names in Location and
    // Content-Location go too when they have the same origin (Host: cache.test).
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let post = "/a?header=Location:/b&header=Content-Location:http://cache.test/c";
    let elsewhere = "/a2?header=Location:http://other.test/b";
    let steps = [
        step("GET", "/b", "", (200, "MISS", 1)),
        step("GET", "/c", "", (200, "MISS", 2)),
        step("GET", "/b", "", (200, "HIT", 2)),
        step("POST", post, "Content-Length: 0\r\n", (200, "BYPASS", 3)),
        step("GET", "/b", "", (200, "MISS", 4)),
        step("GET", "/c", "", (200, "MISS", 5)),
        // Another origin's URI: nothing of ours goes.
        step(
            "POST",
            elsewhere,
            "Content-Length: 0\r\n",
            (200, "BYPASS", 6),
        ),
        step("GET", "/b", "", (200, "HIT", 6)),
    ];
    run("Location invalidation", addr, &o, &steps);
    p.shutdown().unwrap();
}
