//! Revalidation (issue 10, RFC 9111 4.3): a `no-cache` request, or a stale entry, with a
//! validator is checked with a conditional request (If-None-Match from ETag, If-Modified-Since
//! from Last-Modified); a 304 refreshes the stored entry and the client gets the stored
//! response (`X-Cache: REVALIDATED`, or a 304 if its own conditional matches); a 200 replaces
//! the entry. The origin's request count and the heads it received are the proof.

use shared::origin::{Origin, OriginConfig};
use std::time::Duration;

use crate::cache_proxy::{first_after_expiry, proxy, request, x_cache};
use tests::raw::{self};

const LM: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
/// A page whose responses carry `ETag: "v1"` and `Last-Modified: LM`.
const PAGE: &str =
    "/r?size=500&header=ETag:%22v1%22&header=Last-Modified:Tue,%2014%20Nov%202023%2022:13:20%20GMT";

/// An origin that records the requests it gets, with `headers` on every response.
fn origin(headers: &[(&str, &str)]) -> Origin {
    Origin::start(OriginConfig {
        capture: true,
        headers: headers
            .iter()
            .map(|&(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        ..OriginConfig::default()
    })
    .expect("origin starts")
}

fn fields(raw: &[u8], name: &str) -> Vec<String> {
    String::from_utf8_lossy(raw)
        .split("\r\n")
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

/// The conditional fields of the `i`th request `o` captured.
fn conditionals(o: &Origin, i: usize) -> (Vec<String>, Vec<String>) {
    let raw = &o.captured()[i];
    (
        fields(raw, "if-none-match"),
        fields(raw, "if-modified-since"),
    )
}

#[test]
fn no_cache_revalidates_with_the_validators_and_a_304_serves_the_stored_body() {
    let o = origin(&[]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let r = request(addr, "GET", PAGE, "");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    assert_eq!(x_cache(&request(addr, "GET", PAGE, "")), "HIT");
    assert_eq!(o.requests(), 1);
    assert_eq!(
        conditionals(&o, 0),
        (vec![], vec![]),
        "a miss is unconditional"
    );

    // no-cache: a conditional request with the stored validators (the client's own
    // If-None-Match replaced), a 304, the stored body.
    let r = request(
        addr,
        "GET",
        PAGE,
        "Cache-Control: no-cache\r\nIf-None-Match: \"other\"\r\n",
    );
    assert_eq!((r.status, x_cache(&r)), (200, "REVALIDATED"));
    assert!(r.is_pattern(500), "the stored body");
    assert_eq!(
        (
            r.header("content-length"),
            r.header("etag"),
            r.header("age")
        ),
        (Some("500"), Some("\"v1\""), Some("0"))
    );
    assert_eq!(o.requests(), 2);
    assert_eq!(
        conditionals(&o, 1),
        (vec!["\"v1\"".to_string()], vec![LM.to_string()])
    );
    assert_eq!(x_cache(&request(addr, "GET", PAGE, "")), "HIT");
    assert_eq!(o.requests(), 2, "the entry still serves hits");

    // The client's own conditional matches the stored response: 304, no body.
    let r = request(
        addr,
        "GET",
        PAGE,
        "Pragma: no-cache\r\nIf-None-Match: W/\"v1\"\r\n",
    );
    assert_eq!((r.status, x_cache(&r)), (304, "REVALIDATED"));
    assert_eq!(
        (r.body.len(), r.header("etag"), r.header("content-length")),
        (0, Some("\"v1\""), None)
    );
    assert_eq!(o.requests(), 3);

    // HEAD: validated with a conditional GET, answered with the stored head.
    let r = request(addr, "HEAD", PAGE, "Cache-Control: max-age=0\r\n");
    assert_eq!((r.status, x_cache(&r)), (200, "REVALIDATED"));
    assert_eq!(r.header("content-length"), Some("500"));
    assert_eq!(o.requests(), 4);
    assert!(
        o.captured()[3].starts_with(b"GET "),
        "HEAD validated with a GET"
    );
    assert_eq!(conditionals(&o, 3).0, vec!["\"v1\"".to_string()]);

    let s = &p.stats()[0];
    let want = (2, 1, 3);
    let seen = tests::settled(raw::WAIT, &want, || {
        let (h, m, r) = (&s.cache_hits, &s.cache_misses, &s.cache_revalidated);
        (h.get(), m.get(), r.get())
    });
    assert_eq!(seen, want);
    p.shutdown().unwrap();
}

#[test]
fn without_a_validator_no_cache_refetches_the_whole_response() {
    let o = origin(&[]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    assert_eq!(x_cache(&request(addr, "GET", "/plain", "")), "MISS");
    let r = request(addr, "GET", "/plain", "Cache-Control: no-cache\r\n");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    assert_eq!(conditionals(&o, 1), (vec![], vec![]));
    assert_eq!(x_cache(&request(addr, "GET", "/plain", "")), "HIT");
    assert_eq!(o.requests(), 2);
    p.shutdown().unwrap();
}

#[test]
fn a_304_updates_the_stored_fields() {
    // Two origins, round-robin: the fill comes from one, the 304 from the other, with
    // another X-Version (RFC 9111 4.3.4: the 304's fields replace the stored ones).
    let one = origin(&[("ETag", "\"v1\""), ("X-Version", "one")]);
    let two = origin(&[("ETag", "\"v1\""), ("X-Version", "two")]);
    let (p, addr) = proxy(&[one.addr(), two.addr()], &[], |_| {});
    let first = request(addr, "GET", "/u", "");
    assert_eq!(x_cache(&first), "MISS");
    let filled_by = first.header("x-version").expect("X-Version").to_string();
    let r = request(addr, "GET", "/u", "Cache-Control: no-cache\r\n");
    assert_eq!((r.status, x_cache(&r)), (200, "REVALIDATED"));
    let validated_by = r.header("x-version").expect("X-Version").to_string();
    assert_ne!(
        filled_by, validated_by,
        "the 304's X-Version replaced the stored one"
    );
    let r = request(addr, "GET", "/u", "");
    assert_eq!(
        (x_cache(&r), r.header("x-version")),
        ("HIT", Some(validated_by.as_str()))
    );
    assert_eq!((one.requests(), two.requests()), (1, 1));
    p.shutdown().unwrap();
}

#[test]
fn a_200_to_the_conditional_request_replaces_the_entry() {
    let one = origin(&[("ETag", "\"one\"")]);
    let two = origin(&[("ETag", "\"two\"")]);
    let (p, addr) = proxy(&[one.addr(), two.addr()], &[], |_| {});
    let first = request(addr, "GET", "/w?size=300", "");
    assert_eq!(x_cache(&first), "MISS");
    let stored = first.header("etag").expect("ETag").to_string();
    let r = request(addr, "GET", "/w?size=300", "Cache-Control: no-cache\r\n");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    assert!(r.is_pattern(300));
    let replaced = r.header("etag").expect("ETag").to_string();
    assert_ne!(stored, replaced);
    // The origin that answered 200 was asked with the stored ETag.
    let second = if one.requests() == 1 && two.requests() == 1 {
        if stored == "\"one\"" {
            &two
        } else {
            &one
        }
    } else {
        panic!(
            "round-robin: one request each, got {} and {}",
            one.requests(),
            two.requests()
        )
    };
    assert_eq!(conditionals(second, 0).0, vec![stored]);
    let r = request(addr, "GET", "/w?size=300", "");
    assert_eq!(
        (x_cache(&r), r.header("etag")),
        ("HIT", Some(replaced.as_str()))
    );
    assert_eq!(one.requests() + two.requests(), 2);
    let s = &p.stats()[0];
    let want = (2, 0);
    let seen = tests::settled(raw::WAIT, &want, || {
        (s.cache_misses.get(), s.cache_revalidated.get())
    });
    assert_eq!(seen, want);
    p.shutdown().unwrap();
}

#[test]
fn a_stale_entry_is_revalidated_and_the_304_makes_it_fresh_again() {
    let o = origin(&[]);
    // Long enough for the HIT at the end on a loaded machine.
    let (p, addr) = proxy(&[o.addr()], &[], |c| c.ttl = Duration::from_secs(1));
    assert_eq!(x_cache(&request(addr, "GET", PAGE, "")), "MISS");
    // Past the ttl.
    let r = first_after_expiry(addr, "GET", PAGE, "");
    assert_eq!((r.status, x_cache(&r)), (200, "REVALIDATED"));
    assert!(r.is_pattern(500));
    assert_eq!(
        r.header("age"),
        Some("0"),
        "the 304 renewed the entry's age"
    );
    assert_eq!(o.requests(), 2);
    assert_eq!(conditionals(&o, 1).0, vec!["\"v1\"".to_string()]);
    // Fresh again for the route's ttl.
    assert_eq!(x_cache(&request(addr, "GET", PAGE, "")), "HIT");
    assert_eq!(o.requests(), 2);
    p.shutdown().unwrap();
}

#[test]
fn a_revalidation_the_origin_cannot_answer_serves_stale_within_stale_if_error() {
    let port = tests::ClosedPort::new();
    let o = Origin::start_on(OriginConfig::default(), port.addr(), 1).expect("origin");
    let (p, addr) = proxy(&[port.addr()], &[], |c| {
        c.ttl = Duration::from_millis(300);
        c.stale_if_error = Duration::from_secs(60);
    });
    assert_eq!(x_cache(&request(addr, "GET", PAGE, "")), "MISS");
    o.stop();
    // Fresh, but the client asks for validation: the origin refuses; the stored response
    // serves (stale_if_error is the operator's choice; RFC 9111 5.2.1.4 "prefers").
    let r = request(addr, "GET", PAGE, "Cache-Control: no-cache\r\n");
    assert_eq!((r.status, x_cache(&r)), (200, "STALE"));
    assert!(r.is_pattern(500));
    // Past the ttl: stale now, and still served.
    let r = first_after_expiry(addr, "GET", PAGE, "");
    assert_eq!((r.status, x_cache(&r)), (200, "STALE"));
    let stale = tests::settled(raw::WAIT, &2, || p.stats()[0].cache_stale.get());
    assert_eq!(stale, 2);
    p.shutdown().unwrap();
}

#[test]
fn a_hit_answers_the_clients_own_conditional_request() {
    let o = origin(&[]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    assert_eq!(x_cache(&request(addr, "GET", PAGE, "")), "MISS");
    let before = "Tue, 14 Nov 2023 22:13:10 GMT";
    for (extra, status) in [
        ("If-None-Match: \"v1\"\r\n", 304),
        ("If-None-Match: \"x\", W/\"v1\"\r\n", 304),
        ("If-None-Match: \"x\"\r\n", 200),
        (&format!("If-Modified-Since: {LM}\r\n")[..], 304),
        (&format!("If-Modified-Since: {before}\r\n")[..], 200),
        // A list field sent on several lines is one list (RFC 9110 5.3).
        ("If-None-Match: \"x\"\r\nIf-None-Match: \"v1\"\r\n", 304),
        ("If-Match: \"x\"\r\nX-A: 1\r\nIf-Match: \"v1\"\r\n", 200),
        ("If-Match: \"x\"\r\nIf-Match: \"y\"\r\n", 412),
        // A date sent twice is a list of dates, no valid date: ignored (RFC 9110 13.1.3-4).
        (
            &format!("If-Modified-Since: {LM}\r\nIf-Modified-Since: {LM}\r\n")[..],
            200,
        ),
        (
            &format!("If-Unmodified-Since: {before}\r\nIf-Unmodified-Since: {before}\r\n")[..],
            200,
        ),
    ] {
        let r = request(addr, "GET", PAGE, extra);
        assert_eq!((r.status, x_cache(&r)), (status, "HIT"), "{extra}");
        let body = match status {
            200 => 500,
            304 => 0,
            _ => r.body.len(),
        };
        assert_eq!(r.body.len(), body, "{extra}");
    }
    assert_eq!(
        o.requests(),
        1,
        "every conditional was answered from the store"
    );
    p.shutdown().unwrap();
}

#[test]
fn a_hit_without_last_modified_answers_if_modified_since_by_its_date() {
    // RFC 9111 4.3.2: a cache SHOULD answer If-Modified-Since with a 304 when the stored
    // response has no Last-Modified "but it has a Date field value that is earlier than or
    // equal to the conditional timestamp" (the store gives every response a Date: the time it
    // came, when the origin sent none, the section's third case). Without a Last-Modified
    // the date was ignored: 200 and the whole body.
    let o = origin(&[]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let page = "/r?size=500&header=Cache-Control:max-age%3D600";
    let stored = request(addr, "GET", page, "");
    assert_eq!(x_cache(&stored), "MISS");
    assert_eq!(stored.header("last-modified"), None);
    assert!(stored.header("date").is_some(), "{:?}", stored.headers);
    let later = "Fri, 01 Jan 2100 00:00:00 GMT";
    let earlier = "Tue, 14 Nov 2023 22:13:10 GMT";
    for (date, status, body) in [(later, 304, 0), (earlier, 200, 500)] {
        let r = request(addr, "GET", page, &format!("If-Modified-Since: {date}\r\n"));
        let got = (r.status, x_cache(&r), r.body.len());
        assert_eq!(got, (status, "HIT", body), "If-Modified-Since: {date}");
    }
    // The tag field decides alone when it is there (RFC 9110 13.2.2).
    let tag = format!("If-None-Match: \"x\"\r\nIf-Modified-Since: {later}\r\n");
    assert_eq!(request(addr, "GET", page, &tag).status, 200);
    assert_eq!(o.requests(), 1, "every request was answered from the store");
    p.shutdown().unwrap();
}
