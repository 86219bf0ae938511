//! `Age` (RFC 9111 4.2.3, 5.1): the age the cache computed, on the answers it relays and on
//! the ones it writes from a stored response.

use crate::cache_proxy::{proxy, request, x_cache};
use crate::scripted::{answer, Scripted};
use tests::raw::Response;

/// `secs` since the epoch as an IMF-fixdate.
fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let (y, m, d) = shared::civil::civil_from_days(days as i64);
    let rem = secs % 86_400;
    format!(
        "{}, {d:02} {} {y} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[m as usize - 1],
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The Date field of a response generated `ago` seconds before now.
fn date_ago(ago: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!("Date: {}", http_date(now - ago))
}

/// The one Age field of `r`, as a number (`what` names the response in a failure).
fn age(r: &Response, what: &str) -> u64 {
    let ages: Vec<&str> = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("age"))
        .map(|(_, v)| v.as_str())
        .collect();
    match ages[..] {
        [one] => one
            .parse()
            .unwrap_or_else(|_| panic!("{what}: Age {one:?} is not delta-seconds")),
        _ => panic!("{what}: one Age field, got {ages:?}"),
    }
}

/// No more than a minute past `least`: what a test's own run adds, and far from the 2^31
/// of a response delay counted from no request time.
fn about(age: u64, least: u64) -> bool {
    (least..least + 60).contains(&age)
}

#[test]
fn a_relayed_answer_carries_the_age_the_cache_computed() {
    // RFC 9111 4.2.3: the corrected initial age, max(now - Date, Age + response delay), is
    // what a hit of the response counts from; 5.1 and 4.2.3 have the cache send the age it
    // computed, and an Age that is not delta-seconds is not passed on as it is. A MISS sent
    // Age: 0, or the origin's field unchanged: a response whose Date was 100 s old showed
    // Age: 0 on its MISS and Age: 100 on the HIT a moment later, and `Age: bogus` went on.
    let old = date_ago(100);
    // (what, the origin's fields, the request's, X-Cache, the least age)
    let cases: [(&str, [&str; 2], &str, &str, u64); 5] = [
        (
            "Date 100 s old",
            ["Cache-Control: max-age=1000", &old],
            "",
            "MISS",
            100,
        ),
        (
            "Age: 50",
            ["Cache-Control: max-age=1000", "Age: 50"],
            "",
            "MISS",
            50,
        ),
        (
            "Age: bogus",
            ["Cache-Control: max-age=1000", "Age: bogus"],
            "",
            "MISS",
            0,
        ),
        (
            "Age: 50 and Date 100 s old",
            [&old, "Age: 50"],
            "",
            "MISS",
            100,
        ),
        (
            "bypassed, Date 100 s old",
            ["Cache-Control: max-age=1000", &old],
            "Cache-Control: no-store\r\n",
            "BYPASS",
            100,
        ),
    ];
    for (what, fields, extra, status, least) in cases {
        let o = Scripted::start(vec![answer("200 OK", &fields, b"aged")]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let r = request(addr, "GET", "/a", extra);
        assert_eq!((r.status, x_cache(&r)), (200, status), "{what}");
        let first = age(&r, what);
        assert!(about(first, least), "{what}: {status} Age {first}");
        if status == "MISS" && fields[0].starts_with("Cache-Control") {
            let r = request(addr, "GET", "/a", "");
            assert_eq!((r.status, x_cache(&r)), (200, "HIT"), "{what}");
            let hit = age(&r, what);
            assert!(hit >= first && about(hit, least), "{what}: HIT Age {hit}");
        }
        p.shutdown().unwrap();
    }
}

#[test]
fn answers_the_cache_writes_from_a_stored_response_carry_its_age() {
    // RFC 9111 4.2.3: a response generated from a stored one carries its Age: the 304, and
    // the 412 and 416 the cache answers from it too (these had none). The 504 of
    // only-if-cached with nothing stored has no stored response to have an age: none.
    let o = Scripted::start(vec![answer(
        "200 OK",
        &[
            "Cache-Control: max-age=1000",
            "ETag: \"r1\"",
            &date_ago(100),
        ],
        b"0123456789",
    )]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let r = request(addr, "GET", "/r", "");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    let cases = [
        ("If-None-Match: \"r1\"\r\n", 304),
        ("If-Match: \"zz\"\r\n", 412),
        ("Range: bytes=50-\r\n", 416),
    ];
    for (extra, status) in cases {
        let r = request(addr, "GET", "/r", extra);
        assert_eq!((r.status, x_cache(&r)), (status, "HIT"), "{extra:?}");
        let a = age(&r, extra.trim_end());
        assert!(about(a, 100), "{extra:?}: Age {a}");
    }
    assert_eq!(o.requests(), 1);
    let r = request(addr, "GET", "/none", "Cache-Control: only-if-cached\r\n");
    assert_eq!(
        (r.status, x_cache(&r), r.header("age")),
        (504, "MISS", None)
    );
    p.shutdown().unwrap();
}
