//! Issue 26, the behaviours that need answers the query-driven origin cannot give: against
//! `scripted::Scripted`, with exact origin counts.

use crate::cache_proxy::{proxy, request, x_cache};
use crate::scripted::{answer, Scripted};
use tests::raw::{self, Client};

fn get(c: &mut Client, path: &str, extra: &str) -> tests::raw::Response {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n{extra}\r\n").as_bytes())
        .expect("send");
    raw::response(c, path)
}

/// A response stale at once, within its stale-while-revalidate window, ETag "v1", body `stale`.
fn swr_stale() -> crate::scripted::Answer {
    answer(
        "200 OK",
        &[
            "Cache-Control: max-age=0, stale-while-revalidate=60",
            "ETag: \"v1\"",
        ],
        b"stale",
    )
}

#[test]
fn stale_while_revalidate_runs_apart_from_the_connection_that_started_it() {
    // RFC 5861 3: the client whose request started the revalidation has its next request on
    // the same connection answered (STALE) while the origin still holds the revalidation.
    // (replacing answer, its body, what the entry serves after)
    let cases = [
        (
            answer(
                "200 OK",
                &["Cache-Control: max-age=3600", "ETag: \"v2\""],
                b"fresh",
            ),
            &b"fresh"[..],
            "\"v2\"",
        ),
        (
            answer(
                "304 Not Modified",
                &["Cache-Control: max-age=3600", "ETag: \"v1\""],
                b"",
            ),
            &b"stale"[..],
            "\"v1\"",
        ),
    ];
    for (second, body, etag) in cases {
        let (second, release) = second.held();
        let o = Scripted::start(vec![swr_stale(), second]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let r = request(addr, "GET", "/swr", "");
        assert_eq!((r.status, x_cache(&r), o.requests()), (200, "MISS", 1));
        let mut c = Client::connect(addr);
        let r = get(&mut c, "/swr", "");
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..]),
            (200, "STALE", &b"stale"[..])
        );
        assert!(tests::eventually(raw::WAIT, || o.requests() == 2));
        assert!(o.head(1).contains("if-none-match: \"v1\""), "{}", o.head(1));
        // The origin holds the revalidation: this connection's next request is answered.
        for i in 0..2 {
            let r = get(&mut c, "/swr", "");
            assert_eq!(
                (r.status, x_cache(&r), o.requests()),
                (200, "STALE", 2),
                "{etag}: while revalidating, {i}"
            );
        }
        release.send(()).unwrap();
        let fresh = tests::eventually(raw::WAIT, || {
            let r = get(&mut c, "/swr", "");
            x_cache(&r) == "HIT" && r.body == body && r.header("etag") == Some(etag)
        });
        assert!(fresh, "{etag}: the revalidation's answer is stored");
        assert_eq!(o.requests(), 2, "{etag}");
        p.shutdown().unwrap();
    }
}

#[test]
fn a_206_of_the_same_strong_validator_updates_the_stored_fields() {
    // RFC 9111 3.4 and 4.3.4: a validation with a Range answered 206 passes through as the
    // origin sent it; with the stored response's strong validator it updates the stored
    // fields (not its framing: the stored body stays whole), else it updates nothing.
    const DATE: &str = "Date: Wed, 01 Jan 2020 00:00:00 GMT";
    const FRESH: &str = "Cache-Control: max-age=2000000000";
    const LM: &str = "Last-Modified: Tue, 31 Dec 2019 00:00:00 GMT";
    const LM_30S: &str = "Last-Modified: Tue, 31 Dec 2019 23:59:30 GMT";
    // (stored validator fields, the 206's validator, updated)
    let cases: [(&[&str], &str, bool); 5] = [
        (&["ETag: \"v1\""], "ETag: \"v1\"", true),
        (&["ETag: \"v1\""], "ETag: \"v2\"", false),
        (&["ETag: W/\"v1\""], "ETag: W/\"v1\"", false),
        (&[LM, DATE], LM, true),
        (&[LM_30S, DATE], LM_30S, false),
    ];
    for (stored, validator, updated) in cases {
        let mut fields = vec![FRESH, "X-Version: 1", "Content-Type: text/plain"];
        fields.extend_from_slice(stored);
        let partial = [
            FRESH,
            "X-Version: 2",
            "Content-Type: text/plain",
            "Content-Range: bytes 0-4/10",
            validator,
        ];
        let o = Scripted::start(vec![
            answer("200 OK", &fields, b"0123456789"),
            answer("206 Partial Content", &partial, b"01234"),
        ]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let what = format!("{stored:?} then {validator}");
        let r = request(addr, "GET", "/r", "");
        assert_eq!(
            (r.status, x_cache(&r), o.requests()),
            (200, "MISS", 1),
            "{what}"
        );
        let r = request(
            addr,
            "GET",
            "/r",
            "Range: bytes=0-4\r\nCache-Control: no-cache\r\n",
        );
        assert_eq!((r.status, o.requests()), (206, 2), "{what}");
        assert_eq!(
            (
                &r.body[..],
                r.header("content-range"),
                r.header("x-version")
            ),
            (&b"01234"[..], Some("bytes 0-4/10"), Some("2")),
            "{what}: the 206 as the origin sent it"
        );
        let asked = o.head(1);
        assert!(asked.contains("range: bytes=0-4"), "{what}: {asked}");
        assert!(asked.contains("if-"), "{what}: conditional: {asked}");
        let r = request(addr, "GET", "/r", "");
        let version = if updated { "2" } else { "1" };
        assert_eq!(
            (r.status, x_cache(&r), o.requests(), &r.body[..]),
            (200, "HIT", 2, &b"0123456789"[..]),
            "{what}"
        );
        assert_eq!(r.header("x-version"), Some(version), "{what}");
        assert_eq!(r.header("content-range"), None, "{what}");
        p.shutdown().unwrap();
    }
}

#[test]
fn a_304_whose_etag_selects_no_stored_response_updates_nothing_and_is_fetched_again() {
    // RFC 9111 4.3.4: a 304 updates the stored responses its validator selects, strong ones
    // by strong comparison, weak ones by weak; if none, it "MUST NOT" update any, and the
    // client is not answered from a response nothing validated: the request goes again,
    // unconditional, and its 200 replaces the entry. A weak ETag updated the stored response
    // whatever it was (REVALIDATED, then a HIT for the 304's max-age with its ETag); a
    // strong one answered 502.
    // (the stored ETag, the 304's)
    let cases = [
        ("W/\"e6\"", "W/\"zz\""),
        ("\"e6\"", "W/\"zz\""),
        ("\"e6\"", "\"zz\""),
        ("W/\"e6\"", "\"e6\""),
    ];
    for (stored, other) in cases {
        let stored_etag = format!("ETag: {stored}");
        let other_etag = format!("ETag: {other}");
        let o = Scripted::start(vec![
            answer(
                "200 OK",
                &["Cache-Control: max-age=0", &stored_etag, "X-V: old"],
                b"old",
            ),
            answer(
                "304 Not Modified",
                &["Cache-Control: max-age=60", &other_etag, "X-V: new"],
                b"",
            ),
            answer(
                "200 OK",
                &["Cache-Control: max-age=60", &other_etag, "X-V: fresh"],
                b"fresh",
            ),
        ]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let what = format!("stored {stored}, 304 {other}");
        let r = request(addr, "GET", "/v", "");
        assert_eq!((r.status, x_cache(&r)), (200, "MISS"), "{what}");
        let r = request(addr, "GET", "/v", "");
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..], r.header("x-v")),
            (200, "MISS", &b"fresh"[..], Some("fresh")),
            "{what}: the answer to the request asked again"
        );
        assert_eq!(o.requests(), 3, "{what}");
        let conditional = o.head(1);
        let inm = format!("if-none-match: {}", stored.to_ascii_lowercase());
        assert!(conditional.contains(&inm), "{what}: {conditional}");
        let again = o.head(2);
        assert!(!again.contains("if-none-match"), "{what}: {again}");
        let r = request(addr, "GET", "/v", "");
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..], r.header("etag")),
            (200, "HIT", &b"fresh"[..], Some(other)),
            "{what}: the 200 replaced the entry"
        );
        assert_eq!(o.requests(), 3, "{what}");
        p.shutdown().unwrap();
    }
}

#[test]
fn a_response_without_a_date_gets_one_relayed_and_stored() {
    // RFC 9110 6.6.1: "A recipient with a clock that receives a response message without a
    // Date header field MUST record the time it was received and append a corresponding Date
    // header field to the message's header section if it is cached or forwarded downstream."
    // A Date the origin sent goes on as it is, once, from the store too. (Without one, the
    // stored response was served without one.)
    const DATE: &str = "Wed, 01 Jan 2020 00:00:00 GMT";
    let dated = format!("Date: {DATE}");
    let o = Scripted::start(vec![
        answer("200 OK", &["Cache-Control: max-age=60"], b"undated"),
        answer(
            "200 OK",
            &["Cache-Control: max-age=2000000000", &dated],
            b"dated",
        ),
        answer("200 OK", &[], b"apart"),
    ]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let dates = |r: &tests::raw::Response| -> Vec<String> {
        let d = r
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("date"));
        d.map(|(_, v)| v.clone()).collect()
    };
    let is_date = |d: &[String]| matches!(d, [d] if d.ends_with(" GMT") && d.len() == 29);
    for (path, xc) in [("/u", "MISS"), ("/u", "HIT"), ("/u", "HIT")] {
        let r = request(addr, "GET", path, "");
        assert_eq!((r.status, x_cache(&r)), (200, xc), "{path}");
        assert!(is_date(&dates(&r)), "{path} {xc}: {:?}", r.headers);
    }
    for xc in ["MISS", "HIT"] {
        let r = request(addr, "GET", "/d", "");
        assert_eq!((r.status, x_cache(&r)), (200, xc));
        assert_eq!(dates(&r), [DATE], "{xc}: the origin's, once");
    }
    // Not stored (no freshness, ttl aside: a POST), relayed with one.
    let r = request(addr, "POST", "/a", "Content-Length: 0\r\n");
    assert_eq!((r.status, x_cache(&r)), (200, "BYPASS"));
    assert!(is_date(&dates(&r)), "{:?}", r.headers);
    assert_eq!(o.requests(), 3);
    p.shutdown().unwrap();
}

/// `GET /p` with the head lines `extra`, expecting `status`, `x_cache`, the body `body` and
/// the origin's count `origin` after it.
type PartStep = (&'static str, u16, &'static str, &'static [u8], u64);

#[test]
fn a_206_is_stored_as_partial_content_and_answers_ranges_within_it() {
    // RFC 9111 3.3, 3.4: a 206 for a key with nothing stored (one range, the complete length
    // known, a strong validator) keeps its part; ranges within it are answered from it (206,
    // HIT), a range beyond it is fetched (its 206 replaces the part), a whole response
    // replaces it and answers every range after.
    const CC: &str = "Cache-Control: max-age=3600";
    let part = |range: &'static str, body: &'static [u8]| {
        answer("206 Partial Content", &[CC, "ETag: \"v1\"", range], body)
    };
    let o = Scripted::start(vec![
        part("Content-Range: bytes 0-4/10", b"01234"),
        part("Content-Range: bytes 7-9/10", b"789"),
        answer("200 OK", &[CC, "ETag: \"v1\""], b"0123456789"),
    ]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let steps: [PartStep; 9] = [
        ("Range: bytes=0-4\r\n", 206, "MISS", b"01234", 1),
        ("Range: bytes=1-3\r\n", 206, "HIT", b"123", 1),
        ("Range: bytes=0-4\r\n", 206, "HIT", b"01234", 1),
        ("If-None-Match: \"v1\"\r\n", 304, "HIT", b"", 1),
        ("Range: bytes=-3\r\n", 206, "MISS", b"789", 2),
        ("Range: bytes=8-9\r\n", 206, "HIT", b"89", 2),
        ("", 200, "MISS", b"0123456789", 3),
        ("Range: bytes=2-8\r\n", 206, "HIT", b"2345678", 3),
        ("", 200, "HIT", b"0123456789", 3),
    ];
    for (i, (extra, status, xc, body, origin)) in steps.into_iter().enumerate() {
        let r = request(addr, "GET", "/p", extra);
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..], o.requests()),
            (status, xc, body, origin),
            "step {i}: {extra:?}"
        );
        if status == 206 {
            let first = b"0123456789".windows(body.len()).position(|w| w == body);
            let first = first.unwrap();
            let want = format!("bytes {first}-{}/10", first + body.len() - 1);
            assert_eq!(r.header("content-range"), Some(&*want), "step {i}");
            assert_eq!(r.header("etag"), Some("\"v1\""), "step {i}");
        }
    }
    assert!(o.head(1).contains("range: bytes=-3"), "{}", o.head(1));
    p.shutdown().unwrap();

    // `bytes=5-` beyond a stored `0-4`: fetched, and joined with it into the whole (RFC 9111
    // 3.4: the same strong validator), which answers the whole and every range after; a part
    // of another validator replaces the stored one instead.
    for (etag, joined) in [("ETag: \"v1\"", true), ("ETag: \"v2\"", false)] {
        let o = Scripted::start(vec![
            answer(
                "206 Partial Content",
                &[CC, "ETag: \"v1\"", "Content-Range: bytes 0-4/10"],
                b"01234",
            ),
            answer(
                "206 Partial Content",
                &[CC, etag, "Content-Range: bytes 5-9/10"],
                b"56789",
            ),
            answer("200 OK", &[CC, etag], b"0123456789"),
        ]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let (whole, after): (PartStep, PartStep) = if joined {
            (
                ("", 200, "HIT", b"0123456789", 2),
                ("Range: bytes=3-6\r\n", 206, "HIT", b"3456", 2),
            )
        } else {
            (
                ("", 200, "MISS", b"0123456789", 3),
                ("Range: bytes=0-4\r\n", 206, "HIT", b"01234", 3),
            )
        };
        let steps: [PartStep; 5] = [
            ("Range: bytes=0-4\r\n", 206, "MISS", b"01234", 1),
            ("Range: bytes=5-\r\n", 206, "MISS", b"56789", 2),
            ("Range: bytes=6-9\r\n", 206, "HIT", b"6789", 2),
            whole,
            after,
        ];
        for (i, (extra, status, xc, body, origin)) in steps.into_iter().enumerate() {
            let r = request(addr, "GET", "/p", extra);
            assert_eq!(
                (r.status, x_cache(&r), &r.body[..], o.requests()),
                (status, xc, body, origin),
                "{etag}, step {i}: {extra:?}"
            );
        }
        p.shutdown().unwrap();
    }

    // Not stored: a weak validator, none, or an unknown complete length.
    let cases: [&[&str]; 3] = [
        &[CC, "ETag: W/\"v1\"", "Content-Range: bytes 0-4/10"],
        &[CC, "Content-Range: bytes 0-4/10"],
        &[CC, "ETag: \"v1\"", "Content-Range: bytes 0-4/*"],
    ];
    for fields in cases {
        let o = Scripted::start(vec![
            answer("206 Partial Content", fields, b"01234"),
            answer("206 Partial Content", fields, b"01234"),
        ]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        for n in 1..=2 {
            let r = request(addr, "GET", "/p", "Range: bytes=0-4\r\n");
            assert_eq!(
                (r.status, x_cache(&r), o.requests()),
                (206, "MISS", n),
                "{fields:?}"
            );
        }
        p.shutdown().unwrap();
    }
}

#[test]
fn background_revalidations_are_bounded_per_worker() {
    // At most 32 run at once on a worker (documented in CONFIGURATION.md): with 32 held at
    // the origin, the 33rd stale key is served STALE and its revalidation is not started
    // (counted); released, the held ones refresh their entries.
    const MAX: usize = 32;
    let swr = "Cache-Control: max-age=0, stale-while-revalidate=60";
    let mut answers: Vec<_> = (0..=MAX)
        .map(|_| answer("200 OK", &[swr, "ETag: \"v1\""], b"stale"))
        .collect();
    let mut gates = Vec::new();
    for _ in 0..MAX {
        let fresh = ["Cache-Control: max-age=3600", "ETag: \"v1\""];
        let (a, gate) = answer("304 Not Modified", &fresh, b"").held();
        answers.push(a);
        gates.push(gate);
    }
    let o = Scripted::start(answers);
    let (p, addr) = proxy(&[o.addr()], &["--admin", "127.0.0.1:0"], |_| {});
    let admin = p.admin_addr().expect("admin");
    let count = |name: &str| {
        let m = tests::scrape::scrape(admin);
        tests::scrape::total(&m, name) as u64
    };
    let keys: Vec<String> = (0..=MAX).map(|k| format!("/k{k}")).collect();
    for (k, key) in keys.iter().enumerate() {
        let r = request(addr, "GET", key, "");
        assert_eq!(
            (r.status, x_cache(&r), o.requests()),
            (200, "MISS", k as u64 + 1)
        );
    }
    for key in &keys[..MAX] {
        let r = request(addr, "GET", key, "");
        assert_eq!((r.status, x_cache(&r)), (200, "STALE"), "{key}");
    }
    let all = (2 * MAX + 1) as u64;
    assert!(tests::eventually(raw::WAIT, || o.requests() == all));
    let r = request(addr, "GET", &keys[MAX], "");
    assert_eq!(
        (r.status, x_cache(&r)),
        (200, "STALE"),
        "the one over the bound"
    );
    assert_eq!(count("proxy_cache_revalidations_skipped_total"), 1);
    assert_eq!(o.requests(), all);
    drop(gates);
    assert!(tests::eventually(raw::WAIT, || {
        x_cache(&request(addr, "GET", &keys[0], "")) == "HIT"
    }));
    assert_eq!(count("proxy_cache_revalidation_errors_total"), 0);
    p.shutdown().unwrap();
}

#[test]
fn a_background_revalidation_runs_under_its_routes_upstream_timeouts() {
    // A route's own `timeouts` (here `read = 300ms` under the global 60 s) bound its
    // background revalidations as they bound its clients' fetches: the origin holds the
    // first revalidation's answer, which ends at the route's read timeout (counted as a
    // revalidation error, the entry left as it was), and a request of the window starts the
    // next, whose answer refreshes the entry. Under the global timeout the first would hold
    // the key's one revalidation for a minute.
    use std::time::Duration;
    let swr = [
        "Cache-Control: max-age=0, stale-while-revalidate=60",
        "ETag: \"v1\"",
    ];
    let fresh = ["Cache-Control: max-age=3600", "ETag: \"v1\""];
    let (held, gate) = answer("304 Not Modified", &fresh, b"").held();
    let o = Scripted::start(vec![
        answer("200 OK", &swr, b"stale"),
        held,
        answer("304 Not Modified", &fresh, b""),
    ]);
    let mut cfg = tests::proxy_config(&[o.addr()], &["--cache", "1MiB", "--admin", "127.0.0.1:0"]);
    with_route_read(&mut cfg, Duration::from_millis(300));
    assert_eq!(
        cfg.timeouts.read,
        Duration::from_secs(60),
        "the global read timeout"
    );
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    let admin = p.admin_addr().expect("admin");
    let errors = || {
        let m = tests::scrape::scrape(admin);
        tests::scrape::total(&m, "proxy_cache_revalidation_errors_total") as u64
    };
    let r = request(addr, "GET", "/t", "");
    assert_eq!((r.status, x_cache(&r), o.requests()), (200, "MISS", 1));
    let r = request(addr, "GET", "/t", "");
    assert_eq!(
        (r.status, x_cache(&r), &r.body[..]),
        (200, "STALE", &b"stale"[..])
    );
    assert!(tests::eventually(raw::WAIT, || o.requests() == 2));
    assert!(
        tests::eventually(raw::WAIT, || errors() == 1),
        "the held revalidation did not end at the route's read timeout"
    );
    let r = request(addr, "GET", "/t", "");
    assert_eq!(
        (r.status, x_cache(&r)),
        (200, "STALE"),
        "the entry as it was"
    );
    assert!(
        tests::eventually(raw::WAIT, || x_cache(&request(addr, "GET", "/t", ""))
            == "HIT"),
        "the next revalidation did not refresh the entry"
    );
    assert_eq!((o.requests(), errors()), (3, 1));
    drop(gate);
    p.shutdown().unwrap();
}

#[test]
fn a_304_that_selects_nothing_counts_as_an_answer_of_its_server() {
    // The 304 came (and was dropped for the unconditional request that follows, as an
    // answer a route retries on is): its server's `responses_total` counts it, 3xx, beside
    // the two 200s.
    let o = Scripted::start(vec![
        answer(
            "200 OK",
            &["Cache-Control: max-age=0", "ETag: \"e6\""],
            b"old",
        ),
        answer("304 Not Modified", &["ETag: \"zz\""], b""),
        answer(
            "200 OK",
            &["Cache-Control: max-age=60", "ETag: \"zz\""],
            b"fresh",
        ),
    ]);
    let cfg = tests::proxy_config(&[o.addr()], &["--cache", "1MiB", "--admin", "127.0.0.1:0"]);
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    let admin = p.admin_addr().expect("admin");
    assert_eq!(x_cache(&request(addr, "GET", "/v", "")), "MISS");
    assert_eq!(x_cache(&request(addr, "GET", "/v", "")), "MISS");
    assert_eq!(o.requests(), 3);
    let m = tests::scrape::scrape(admin);
    let class = |code: &str| {
        m.iter()
            .filter(|(k, _)| {
                k.starts_with("proxy_upstream_responses_total{")
                    && k.contains(&format!(r#"code="{code}""#))
            })
            .map(|(_, v)| *v)
            .sum::<f64>()
    };
    assert_eq!((class("2xx"), class("3xx")), (2.0, 1.0));
    p.shutdown().unwrap();
}

#[test]
fn a_background_revalidation_whose_body_stalls_counts_against_its_server() {
    // The refresh's answer comes with its head and 5 of its 100 bytes, then nothing: its
    // fill ends at the route's read timeout, a failure of the server mid-body, which its
    // `proxy_upstream_failures_total` counts as a client's fetch's would.
    use crate::scripted::raw_answer;
    use std::time::Duration;
    let swr = [
        "Cache-Control: max-age=0, stale-while-revalidate=60",
        "ETag: \"v1\"",
    ];
    let cut = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Length: 100\r\n\r\nshort";
    let o = Scripted::start(vec![
        answer("200 OK", &swr, b"stale"),
        raw_answer(cut.to_vec()),
    ]);
    let mut cfg = tests::proxy_config(&[o.addr()], &["--cache", "1MiB", "--admin", "127.0.0.1:0"]);
    with_route_read(&mut cfg, Duration::from_millis(300));
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    let admin = p.admin_addr().expect("admin");
    let count = |name: &str| {
        let m = tests::scrape::scrape(admin);
        m.iter()
            .filter(|(k, _)| k.starts_with(name) && k.contains(r#"kind="upstream_timeout""#))
            .map(|(_, v)| *v)
            .sum::<f64>()
    };
    assert_eq!(x_cache(&request(addr, "GET", "/t", "")), "MISS");
    assert_eq!(x_cache(&request(addr, "GET", "/t", "")), "STALE");
    assert!(
        tests::eventually(raw::WAIT, || {
            let m = tests::scrape::scrape(admin);
            tests::scrape::total(&m, "proxy_cache_revalidation_errors_total") == 1.0
        }),
        "the stalled refresh did not end"
    );
    assert_eq!(
        count("proxy_upstream_failures_total{"),
        1.0,
        "the server's failures"
    );
    p.shutdown().unwrap();
}

#[test]
fn requests_collapsed_on_a_fill_wait_under_their_routes_read_timeout() {
    // Collapsed forwarding on a route whose own read timeout (2 s) is longer than the global
    // one (100 ms): the requests that wait for another's fill wait as long as that fill may
    // take (it reads its upstream under the route's timeout), here 1.2 s, and are answered
    // from it. They waited under the global timeout, and a wait could not end at it (the
    // timer's wake-up was taken for the entry's change): each gave up after its eighth wait,
    // 800 ms, and fetched on its own: the stampede on a slow origin that collapsing exists
    // to spare it.
    use std::time::Duration;
    let fresh = ["Cache-Control: max-age=3600"];
    let (held, gate) = answer("200 OK", &fresh, b"filled").held();
    let o = Scripted::start(vec![
        held,
        answer("200 OK", &fresh, b"apart"),
        answer("200 OK", &fresh, b"apart"),
    ]);
    let mut cfg = tests::proxy_config(&[o.addr()], &["--cache", "1MiB"]);
    cfg.timeouts.read = Duration::from_millis(100);
    with_route_read(&mut cfg, Duration::from_secs(2));
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    let get = move || std::thread::spawn(move || request(addr, "GET", "/t", ""));
    let leader = get();
    assert!(
        tests::eventually(raw::WAIT, || o.requests() == 1),
        "the fill's request never reached the origin"
    );
    let followers = [get(), get()];
    // The fill takes 1.2 s: past the global read timeout (eight times over), within the
    // route's.
    std::thread::sleep(Duration::from_millis(1200));
    gate.send(()).expect("release the fill's answer");
    let r = leader.join().expect("the leader");
    assert_eq!(
        (r.status, x_cache(&r), &r.body[..]),
        (200, "MISS", &b"filled"[..])
    );
    for (i, f) in followers.into_iter().enumerate() {
        let r = f.join().expect("a follower");
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..]),
            (200, "HIT", &b"filled"[..]),
            "request {i} collapsed on the fill"
        );
    }
    assert_eq!(o.requests(), 1, "requests that fetched on their own");
    p.shutdown().unwrap();
}

/// Give the first route its own read timeout, `read` (the others from `[timeouts]`).
fn with_route_read(cfg: &mut proxy::config::Config, read: std::time::Duration) {
    use proxy::config::{route_opts::RouteOpts, route_opts::RouteTimeouts, RouteId};
    let own = RouteTimeouts {
        read: Some(read),
        ..RouteTimeouts::default()
    };
    let mut opts = RouteOpts {
        own_timeouts: Some(own),
        ..RouteOpts::default()
    };
    opts.merge_timeouts(&cfg.timeouts);
    cfg.routes[RouteId::new(0)].opts = Some(std::sync::Arc::new(opts));
}

/// An origin whose first answer (`filled`, max-age 3600) comes a byte each 25 ms, about 2 s
/// in all, each byte well within a 300 ms read timeout (its fill never times out, and its
/// entry does not change for seconds); later answers (`apart!`) come at once. Its address and
/// its count of requests.
fn trickling_fill_origin() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let origin = l.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for (i, s) in l.incoming().flatten().enumerate() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut s = s;
                if raw::read_request_head(&mut s, &mut Vec::new()).is_err() {
                    return;
                }
                seen.fetch_add(1, Ordering::SeqCst);
                let body = if i == 0 { "filled" } else { "apart!" };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Length: 6\r\n\r\n{body}"
                );
                if i > 0 {
                    let _ = s.write_all(answer.as_bytes());
                } else {
                    for byte in answer.as_bytes() {
                        if s.write_all(&[*byte]).is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(25));
                    }
                }
                let _ = s.read(&mut [0u8; 64]);
            });
        }
    });
    (origin, requests)
}

#[test]
fn a_request_waiting_on_a_fill_that_never_changes_fetches_on_its_own() {
    // A request that waits for a fill that does not change within the read timeout (300 ms)
    // fetches on its own (a miss, not stored); the fill, once complete, is what the store
    // answers afterwards. With only-if-cached it never fetches: 504 (RFC 9111 5.2.1.7; it
    // did fetch, and the origin saw its only-if-cached).
    use std::sync::atomic::Ordering;
    for only_if_cached in [false, true] {
        let (origin, requests) = trickling_fill_origin();
        let mut cfg = tests::proxy_config(&[origin], &["--cache", "1MiB"]);
        cfg.timeouts.read = std::time::Duration::from_millis(300);
        let p = proxy::start(cfg).expect("proxy starts");
        let addr = p.listen_addrs()[0];
        let leader = std::thread::spawn(move || request(addr, "GET", "/t", ""));
        assert!(
            tests::eventually(raw::WAIT, || requests.load(Ordering::SeqCst) == 1),
            "the fill's request never reached the origin"
        );
        if only_if_cached {
            let r = request(addr, "GET", "/t", "Cache-Control: only-if-cached\r\n");
            assert_eq!((r.status, x_cache(&r)), (504, "MISS"), "only-if-cached");
            assert_eq!(requests.load(Ordering::SeqCst), 1, "only-if-cached");
        } else {
            let r = request(addr, "GET", "/t", "");
            assert_eq!(
                (r.status, x_cache(&r), &r.body[..]),
                (200, "MISS", &b"apart!"[..]),
                "the waiting request, after one read timeout without a change"
            );
            assert_eq!(requests.load(Ordering::SeqCst), 2);
        }
        let r = leader.join().expect("the leader");
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..]),
            (200, "MISS", &b"filled"[..])
        );
        let r = request(addr, "GET", "/t", "");
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..]),
            (200, "HIT", &b"filled"[..]),
            "the fill was stored, the fetch apart was not"
        );
        p.shutdown().unwrap();
    }
}

#[test]
fn an_answer_to_a_clients_precondition_or_range_never_becomes_the_stored_response() {
    // A 412 answers the client's If-Match, a 416 its Range: fields the cache key does not
    // hold. Stored, either would be every later client's answer to a plain GET (cache
    // poisoning: one request with `If-Match: "bogus"` and the origin's max-age).
    let cases = [
        (
            "If-Match: \"bogus\"\r\n",
            answer(
                "412 Precondition Failed",
                &["Cache-Control: max-age=60", "ETag: \"v1\""],
                b"",
            ),
            412,
        ),
        (
            "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n",
            answer(
                "412 Precondition Failed",
                &["Cache-Control: max-age=60"],
                b"",
            ),
            412,
        ),
        (
            "Range: bytes=999-\r\n",
            answer(
                "416 Range Not Satisfiable",
                &["Cache-Control: max-age=60", "Content-Range: bytes */4"],
                b"",
            ),
            416,
        ),
    ];
    for (field, first, status) in cases {
        let good = answer(
            "200 OK",
            &["Cache-Control: max-age=60", "ETag: \"v1\""],
            b"good",
        );
        let o = Scripted::start(vec![first, good]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let r = request(addr, "GET", "/p", field);
        assert_eq!((r.status, x_cache(&r)), (status, "MISS"), "{field}");
        let r = request(addr, "GET", "/p", "");
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..], o.requests()),
            (200, "MISS", &b"good"[..], 2),
            "{field}: a plain GET after it"
        );
        let r = request(addr, "GET", "/p", "");
        assert_eq!(
            (r.status, x_cache(&r), o.requests()),
            (200, "HIT", 2),
            "{field}"
        );
        p.shutdown().unwrap();
    }
}

#[test]
fn a_background_revalidation_carries_none_of_the_clients_preconditions_or_range() {
    // The revalidation a stale-while-revalidate entry starts is the cache's own request:
    // the client that happened to start it had its answer from the store. Its If-Match (or
    // Range) must not ride along: an origin answering that 412 (or 416) would replace the
    // entry for everyone.
    for field in [
        "If-Match: \"bogus\"\r\n",
        "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n",
        "Range: bytes=999-\r\n",
        "If-Range: \"v1\"\r\nRange: bytes=0-1\r\n",
    ] {
        let o = Scripted::start(vec![
            swr_stale(),
            answer(
                "412 Precondition Failed",
                &["Cache-Control: max-age=60"],
                b"",
            ),
            answer("200 OK", &["Cache-Control: max-age=60"], b"fresh"),
        ]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let r = request(addr, "GET", "/swr", "");
        assert_eq!((r.status, x_cache(&r)), (200, "MISS"), "{field}");
        // Answered from the stale entry (its own preconditions and range apply there).
        let r = request(addr, "GET", "/swr", field);
        assert_eq!(x_cache(&r), "STALE", "{field}");
        assert!(
            tests::eventually(raw::WAIT, || o.requests() == 2),
            "{field}"
        );
        let head = o.head(1);
        assert!(head.contains("if-none-match: \"v1\""), "{field}: {head}");
        for name in ["if-match", "if-unmodified-since", "range", "if-range"] {
            assert!(!head.contains(&format!("\n{name}:")), "{field}: {head}");
        }
        // Whatever the revalidation got, a 412 is no one's stored answer: plain GETs get the
        // stale entry until the revalidation's answer (not storable: it supersedes the entry)
        // sends the next one to the origin (the event that says it was done with).
        let mut seen = Vec::new();
        let next = tests::eventually(raw::WAIT, || {
            let r = request(addr, "GET", "/swr", "");
            seen.push((r.status, x_cache(&r).to_string()));
            o.requests() >= 3
        });
        let first = &seen[..seen.len().min(4)];
        assert!(
            next,
            "{field}: no third request in {} answers: {first:?}...",
            seen.len()
        );
        assert!(seen.iter().all(|(s, _)| *s == 200), "{field}: {seen:?}");
        p.shutdown().unwrap();
    }
}

#[test]
fn a_stored_404_is_served_whole_whatever_the_range_or_preconditions() {
    // RFC 9110 14.2: a range applies only where the answer would be a 200; 13.2.1:
    // preconditions only where it would be a 2xx. A stored 404 is the answer as it is: not a
    // 206 of its bytes, a 416, a 304 or a 412.
    let o = Scripted::start(vec![answer(
        "404 Not Found",
        &["Cache-Control: max-age=60", "ETag: \"e\""],
        b"not here",
    )]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let r = request(addr, "GET", "/gone", "");
    assert_eq!((r.status, x_cache(&r)), (404, "MISS"));
    for field in [
        "Range: bytes=0-3\r\n",
        "Range: bytes=100-\r\n",
        "If-None-Match: *\r\n",
        "If-None-Match: \"e\"\r\n",
        "If-Match: \"abc\"\r\n",
    ] {
        let r = request(addr, "GET", "/gone", field);
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..]),
            (404, "HIT", &b"not here"[..]),
            "{field}"
        );
    }
    assert_eq!(o.requests(), 1);
    p.shutdown().unwrap();
}

/// What [`filler_leaves`] came to.
struct Left {
    p: proxy::Running,
    addr: std::net::SocketAddr,
    /// B's read of the rest of the body.
    rest: std::io::Result<Vec<u8>>,
    /// The origin's requests, numbered.
    heads: std::sync::mpsc::Receiver<usize>,
    /// `StopsReading`: all A read once it read again, to the proxy's close.
    a_got: usize,
    /// The body's length.
    len: usize,
}

/// How A, the client whose request fills the entry, leaves in [`filler_leaves`].
#[derive(Clone, Copy, PartialEq)]
enum Leaves {
    /// It closes with bytes unread (a reset).
    Closes,
    /// As `Closes`, and a POST of the same URL then invalidates the key (its fill too, for
    /// later requests).
    Invalidated,
    /// It stops reading, with a small receive buffer, until the proxy's send timeout.
    StopsReading,
}

/// Collapsed forwarding: B streams the entry A's request fills with a 200,000-byte body; A
/// leaves after 50,000 of them (`how`); then the origin sends the rest.
fn filler_leaves(how: Leaves) -> Left {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::mpsc;
    // A that stops reading must stall the proxy's writes: more than the proxy's send buffer
    // grows to on loopback (up to tcp_wmem's 4 MiB) and A's receive buffer hold.
    let len: usize = if how == Leaves::StopsReading {
        12_000_000
    } else {
        200_000
    };
    const FIRST: usize = 50_000;
    const SECOND: usize = 10_000;
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let origin = l.local_addr().unwrap();
    let (go, rest) = mpsc::channel::<()>();
    let (heads_tx, heads) = mpsc::channel::<usize>();
    // A thread per connection: the fill's waits for `go` while a POST is answered.
    let mut gate = Some(rest);
    std::thread::spawn(move || {
        for (i, mut s) in l.incoming().flatten().enumerate() {
            let (gate, heads_tx) = (gate.take(), heads_tx.clone());
            std::thread::spawn(move || {
                if raw::read_request_head(&mut s, &mut Vec::new()).is_err() {
                    return;
                }
                let _ = heads_tx.send(i);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: {len}\r\n\r\n"
                );
                let body = vec![b'x'; len];
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(&body[..FIRST]);
                // The fill's body: FIRST bytes, SECOND more at the first `go`, the rest in
                // pieces at the second.
                if let Some(gate) = gate {
                    if gate.recv().is_err() {
                        return;
                    }
                    let _ = s.write_all(&body[FIRST..FIRST + SECOND]);
                    if gate.recv().is_err() {
                        return;
                    }
                    for piece in body[FIRST + SECOND..].chunks(SECOND) {
                        let _ = s.write_all(piece);
                    }
                } else {
                    let _ = s.write_all(&body[FIRST..]);
                }
                // Open until the proxy closes it (pooled meanwhile).
                let _ = raw::read_once(&mut s, &mut Vec::new());
            });
        }
    });
    // A short send timeout for A that stops reading (the default is 60 s).
    let (p, addr) = proxy(&[origin], &["--send-timeout", "300ms"], |c| {
        c.max_bytes = 32 << 20;
        c.max_object = 16 << 20;
    });
    let connect = |addr: std::net::SocketAddr| {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        if how == Leaves::StopsReading {
            // Set before the handshake, so the window it advertises stays small.
            s.set_recv_buffer_size(4096).unwrap();
        }
        s.connect(&addr.into()).expect("connect");
        TcpStream::from(s)
    };
    let get_with = |addr: std::net::SocketAddr, req: &str| {
        let mut s = connect(addr);
        s.set_read_timeout(Some(raw::WAIT)).unwrap();
        s.write_all(req.as_bytes()).expect("send");
        s
    };
    let get = |addr| get_with(addr, "GET /big HTTP/1.1\r\nHost: cache.test\r\n\r\n");
    // (the head's text, the body bytes read after it), reading until `body` bytes came.
    let read_until = |s: &mut TcpStream, body: usize| -> (String, usize) {
        let mut got = Vec::new();
        let mut buf = [0u8; 16384];
        loop {
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                if got.len() - (i + 4) >= body {
                    let head = String::from_utf8_lossy(&got[..i + 4]).into_owned();
                    return (head, got.len() - (i + 4));
                }
            }
            match s.read(&mut buf) {
                Ok(0) => panic!("closed after {} bytes", got.len()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => panic!("{e} after {} bytes", got.len()),
            }
        }
    };
    let mut a = get(addr);
    assert_eq!(heads.recv_timeout(raw::WAIT), Ok(0), "the fill's request");
    let (head, _) = read_until(&mut a, 1);
    assert!(head.contains("X-Cache: MISS"), "{head}");
    // B, once the entry has its head and length: it streams the entry as it fills.
    let mut b = get(addr);
    let (head, got) = read_until(&mut b, FIRST);
    assert!(head.contains("X-Cache: HIT"), "{head}");
    assert_eq!(got, FIRST, "B has what the entry holds");
    // More of the body while B waits for it (and A is still there).
    go.send(()).unwrap();
    let mut more = vec![0u8; SECOND];
    b.read_exact(&mut more).expect("B streams the fill");
    // A stops reading for good (its receive buffer is full well before the body's end),
    // or closes.
    let _a = if how == Leaves::StopsReading {
        Some(a)
    } else {
        drop(a);
        None
    };
    if how == Leaves::Invalidated {
        // Its answer's head comes after the key (and its fill) was invalidated.
        let mut post = get_with(
            addr,
            "POST /big HTTP/1.1\r\nHost: cache.test\r\nContent-Length: 0\r\n\r\n",
        );
        let (head, _) = read_until(&mut post, 0);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    go.send(()).unwrap();
    let mut rest = vec![0u8; len - FIRST - SECOND];
    let rest = b.read_exact(&mut rest).map(|()| rest);
    let mut a_got = 0;
    if let Some(mut a) = _a {
        let mut buf = [0u8; 16384];
        loop {
            match a.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => a_got += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("A's end: {e} after {a_got} bytes"),
            }
        }
    }
    Left {
        len,
        a_got,
        p,
        addr,
        rest,
        heads,
    }
}

#[test]
fn a_fill_goes_on_for_the_requests_streaming_it_when_its_own_client_leaves() {
    // The fill must go on for B, which gets the whole body; it was cut off with A (B had a
    // HIT head and 60,000 of its 200,000 bytes).
    let left = filler_leaves(Leaves::Closes);
    let rest = left.rest.as_ref().expect("B was cut off");
    assert!(rest.iter().all(|&c| c == b'x'));
    assert!(left.heads.try_recv().is_err(), "nobody fetched again");
    // The entry is whole: the next request is a hit of all of it.
    let r = request(left.addr, "GET", "/big", "");
    assert_eq!((r.status, x_cache(&r), r.body.len()), (200, "HIT", 200_000));
    left.p.shutdown().unwrap();
}

#[test]
fn a_fill_goes_on_for_the_requests_streaming_it_when_its_own_client_stops_reading() {
    // As above, A holding its connection open and reading nothing: its write times out
    // (the send timeout), which took the relay's buffer with it, and the fill with it.
    let left = filler_leaves(Leaves::StopsReading);
    assert!(
        left.a_got < left.len,
        "A's write timed out: {} bytes",
        left.a_got
    );
    let rest = left.rest.as_ref().expect("B was cut off");
    assert!(rest.iter().all(|&c| c == b'x'));
    assert!(left.heads.try_recv().is_err(), "nobody fetched again");
    // Stored whole: a HEAD hit gives the stored body's length. (A GET's 12 MB would test how
    // fast this process's client reads, against the 300 ms send timeout: it passed only while
    // the fill's freed 12 MB copy had raised glibc's mmap threshold for the client's buffer.)
    let r = request(left.addr, "HEAD", "/big", "");
    let whole = left.len.to_string();
    assert_eq!(
        (r.status, x_cache(&r), r.header("content-length")),
        (200, "HIT", Some(whole.as_str()))
    );
    left.p.shutdown().unwrap();
}

#[test]
fn a_fill_invalidated_after_its_client_left_goes_on_for_the_request_streaming_it() {
    // As above, and a POST of the URL invalidates the key, its fill too: that is for the
    // requests after it (RFC 9111 4.4); B, streaming the fill, gets the whole body (it was
    // cut off, nothing holding the rest for it), and the key finds nothing after. (A fill
    // nobody reads is dropped at once and read no further: cache::tests::
    // an_entry_nobody_reads_goes_at_once_and_a_failed_fill_fails_its_readers.)
    let left = filler_leaves(Leaves::Invalidated);
    let rest = left.rest.as_ref().expect("B was cut off");
    assert!(rest.iter().all(|&c| c == b'x'));
    assert_eq!(left.heads.try_recv(), Ok(1), "the POST");
    let r = request(left.addr, "GET", "/big", "");
    assert_eq!(
        (r.status, x_cache(&r), r.body.len()),
        (200, "MISS", 200_000)
    );
    left.p.shutdown().unwrap();
}

#[test]
fn the_requests_max_age_min_fresh_and_max_stale_decide_what_a_stored_response_answers() {
    // RFC 9111 5.2.1.1-3: a request's max-age=N takes no stored response older than N
    // seconds, min-fresh=N none fresh for less than N more, max-stale[=N] a stale one (at most
    // N seconds past its lifetime) unless the response forbids stale use (4.2.4). The cache
    // ignored all three: max-age=10 and min-fresh=40 got a 30-second-old HIT, max-stale went
    // to the origin. (request fields, expected: HIT or from the origin, body)
    let fresh = |body: &'static [u8], age: &'static str| {
        answer("200 OK", &["Cache-Control: max-age=60", age], body)
    };
    let o = Scripted::start(vec![
        fresh(b"one", "Age: 30"),
        fresh(b"two", "Age: 30"),
        fresh(b"three", "X-Age: none"),
        answer("200 OK", &["Cache-Control: max-age=10", "Age: 20"], b"old"),
        answer(
            "200 OK",
            &["Cache-Control: max-age=10, must-revalidate", "Age: 20"],
            b"strict",
        ),
        answer("200 OK", &["Cache-Control: max-age=60"], b"last"),
    ]);
    let (_p, addr) = proxy(&[o.addr()], &[], |_| {});
    let cases: [(&str, &str, bool, &[u8]); 14] = [
        ("/a", "", false, b"one"),
        ("/a", "", true, b"one"),
        ("/a", "Cache-Control: max-age=40\r\n", true, b"one"),
        ("/a", "Cache-Control: max-age=10\r\n", false, b"two"),
        ("/a", "Cache-Control: min-fresh=20\r\n", true, b"two"),
        ("/a", "Cache-Control: min-fresh=40\r\n", false, b"three"),
        ("/a", "Cache-Control: min-fresh=40\r\n", true, b"three"),
        ("/s", "", false, b"old"),
        ("/s", "Cache-Control: max-stale=15\r\n", true, b"old"),
        ("/s", "Cache-Control: max-stale\r\n", true, b"old"),
        (
            "/s",
            "Cache-Control: max-stale=15, max-age=15\r\n",
            false,
            b"strict",
        ),
        ("/s", "Cache-Control: max-stale\r\n", false, b"last"),
        ("/s", "", true, b"last"),
        ("/s", "Cache-Control: max-stale=5\r\n", true, b"last"),
    ];
    let mut origin = 0;
    for (path, fields, hit, body) in cases {
        let r = request(addr, "GET", path, fields);
        origin += u64::from(!hit);
        let got = (r.status, x_cache(&r) == "HIT", &r.body[..], o.requests());
        assert_eq!(got, (200, hit, body, origin), "GET {path} with {fields:?}");
    }
}

#[test]
fn a_background_revalidation_whose_304_selects_nothing_fetches_again_unconditionally() {
    // RFC 5861 3 with RFC 9111 4.3.4: a stale-while-revalidate entry's background
    // revalidation answered 304 with an ETag that selects no stored response updates nothing;
    // it asks again without a validator and the 200 replaces the entry. It left the entry as
    // it was, so every request of the window started another conditional request that got
    // the same 304 (the origin saw one per request).
    let o = Scripted::start(vec![
        swr_stale(),
        answer(
            "304 Not Modified",
            &["Cache-Control: max-age=60", "ETag: \"zz\""],
            b"",
        ),
        answer(
            "200 OK",
            &["Cache-Control: max-age=3600", "ETag: \"zz\""],
            b"fresh",
        ),
    ]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let r = request(addr, "GET", "/swr", "");
    assert_eq!((r.status, x_cache(&r), o.requests()), (200, "MISS", 1));
    let r = request(addr, "GET", "/swr", "");
    assert_eq!(
        (r.status, x_cache(&r), &r.body[..]),
        (200, "STALE", &b"stale"[..])
    );
    assert!(
        tests::eventually(raw::WAIT, || o.requests() == 3),
        "the background revalidation never asked again: {} origin requests",
        o.requests()
    );
    assert!(o.head(1).contains("if-none-match: \"v1\""), "{}", o.head(1));
    assert!(!o.head(2).contains("if-none-match"), "{}", o.head(2));
    let fresh = tests::eventually(raw::WAIT, || {
        let r = request(addr, "GET", "/swr", "");
        x_cache(&r) == "HIT" && r.body == b"fresh"
    });
    assert!(fresh, "the unconditional answer is stored");
    assert_eq!(o.requests(), 3);
    p.shutdown().unwrap();
}

#[test]
fn a_304_to_the_background_revalidations_unconditional_request_keeps_the_stale_entry() {
    // A broken origin answers 304 even to the request asked again without a validator: a
    // 304 is no full response (RFC 9111 4.3.3 lets only one supersede the stored one), so
    // the stale entry stays and is served within its window. It was dropped: the next
    // request was a MISS, answered with whatever the origin sent.
    let not_modified = || {
        answer(
            "304 Not Modified",
            &["Cache-Control: max-age=60", "ETag: \"zz\""],
            b"",
        )
    };
    let o = Scripted::start(vec![swr_stale(), not_modified(), not_modified()]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let r = request(addr, "GET", "/swr", "");
    assert_eq!((r.status, x_cache(&r), o.requests()), (200, "MISS", 1));
    let r = request(addr, "GET", "/swr", "");
    assert_eq!((r.status, x_cache(&r)), (200, "STALE"));
    assert!(
        tests::eventually(raw::WAIT, || o.requests() == 3),
        "{} origin requests",
        o.requests()
    );
    assert!(!o.head(2).contains("if-none-match"), "{}", o.head(2));
    // The revalidation that got the second 304 has settled once its fill is released: the
    // next request finds the entry again (the one after may start another revalidation,
    // which the origin answers 500: the stale entry stands).
    let stale = tests::eventually(raw::WAIT, || {
        let r = request(addr, "GET", "/swr", "");
        r.status == 200 && x_cache(&r) == "STALE" && r.body == b"stale"
    });
    assert!(stale, "the stale entry was dropped");
    p.shutdown().unwrap();
}
