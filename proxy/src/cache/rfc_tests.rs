//! Issue 26's rules as tables: `ttl = "0s"`, targeted cache control (RFC 9213), heuristic
//! freshness, stale-while-revalidate and stale-if-error from the response (RFC 5861). Times
//! are fixed numbers; nothing reads a clock.

use super::policy::{storable, Fetched, NotStored};
use super::Millis;
use crate::config::cache::CacheEntry;
use std::time::Duration;

/// 2023-11-14 22:13:20 UTC, in milliseconds.
const T: Millis = 1_700_000_000_000;

type Fields = &'static [(&'static str, &'static str)];
type Stored = Result<Millis, NotStored>;

fn hs(list: &[(&'static str, &'static str)]) -> Vec<httparse::Header<'static>> {
    list.iter()
        .map(|&(name, v)| httparse::Header {
            name,
            value: v.as_bytes(),
        })
        .collect()
}

fn at() -> Fetched {
    Fetched {
        request_time: T,
        response_time: T,
    }
}

/// The lifetime (ms) storing gives `status` with `resp` under `cfg`, or why it is not stored.
fn lifetime(cfg: &CacheEntry, status: u16, resp: Fields) -> Result<Millis, NotStored> {
    storable(&[], status, &hs(resp), None, at(), cfg).map(|s| s.freshness.lifetime)
}

#[test]
fn ttl_zero_means_no_default_freshness() {
    let zero = CacheEntry {
        ttl: Duration::ZERO,
        ..CacheEntry::default()
    };
    let cases: [(u16, Fields, Result<Millis, NotStored>); 4] = [
        (200, &[], Err(NotStored::NoFreshness)),
        (404, &[], Err(NotStored::NoFreshness)),
        (200, &[("Cache-Control", "max-age=5")], Ok(5_000)),
        (301, &[("Cache-Control", "s-maxage=7")], Ok(7_000)),
    ];
    for (status, resp, want) in cases {
        assert_eq!(lifetime(&zero, status, resp), want, "{status} {resp:?}");
    }
}

#[test]
fn a_valid_targeted_field_replaces_cache_control_and_expires() {
    let cdn = CacheEntry {
        ttl: Duration::ZERO,
        ..CacheEntry::default()
    };
    let untargeted = CacheEntry {
        targeted: Vec::new(),
        ..cdn.clone()
    };
    const FUTURE: &str = "Tue, 14 Nov 2023 23:13:20 GMT";
    let cases: [(Fields, Stored, Stored); 9] = [
        (
            &[
                ("CDN-Cache-Control", "max-age=3600"),
                ("Cache-Control", "no-store"),
            ],
            Ok(3_600_000),
            Err(NotStored::NoStore),
        ),
        (
            &[
                ("Cache-Control", "max-age=3600"),
                ("CDN-Cache-Control", "max-age=1"),
            ],
            Ok(1_000),
            Ok(3_600_000),
        ),
        (
            &[
                ("CDN-Cache-Control", "no-store"),
                ("Cache-Control", "max-age=60"),
            ],
            Err(NotStored::NoStore),
            Ok(60_000),
        ),
        (
            &[
                ("CDN-Cache-Control", "private"),
                ("Cache-Control", "max-age=60"),
            ],
            Err(NotStored::Private),
            Ok(60_000),
        ),
        // max-age=0 with a future Expires: Expires is ignored too.
        (
            &[
                ("CDN-Cache-Control", "max-age=0"),
                ("Date", "Tue, 14 Nov 2023 22:13:20 GMT"),
                ("Expires", FUTURE),
            ],
            Ok(0),
            Ok(3_600_000),
        ),
        // Invalid: ignored as a whole, Cache-Control decides.
        (
            &[
                ("CDN-Cache-Control", "max-age=\"10000\""),
                ("Cache-Control", "no-store"),
            ],
            Err(NotStored::NoStore),
            Err(NotStored::NoStore),
        ),
        (
            &[
                ("CDN-Cache-Control", "max-age=10000, &&&&&"),
                ("Cache-Control", "max-age=5"),
            ],
            Ok(5_000),
            Ok(5_000),
        ),
        // Valid, but says nothing of freshness: no freshness (Cache-Control is ignored).
        (
            &[("CDN-Cache-Control", "foo"), ("Cache-Control", "max-age=5")],
            Err(NotStored::NoFreshness),
            Ok(5_000),
        ),
        (
            &[("CDN-Cache-Control", "s-maxage=9, max-age=2")],
            Ok(9_000),
            Err(NotStored::NoFreshness),
        ),
    ];
    for (resp, with, without) in cases {
        assert_eq!(lifetime(&cdn, 200, resp), with, "targeted: {resp:?}");
        assert_eq!(
            lifetime(&untargeted, 200, resp),
            without,
            "untargeted: {resp:?}"
        );
    }
}

#[test]
fn the_served_part_of_a_stored_head_ends_at_its_empty_line() {
    use super::store::served_len;
    assert_eq!(served_len(b"HTTP/1.1 200 OK\r\nA: 1\r\n"), 23);
    assert_eq!(
        served_len(b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\nCDN-Cache-Control: max-age=1\r\n"),
        23
    );
    // A 304's update reads the hidden fields as stored fields.
    let head = b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\nCDN-Cache-Control: max-age=1\r\n";
    let names: Vec<&[u8]> = super::validate::stored_fields(head)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, [&b"A"[..], b"CDN-Cache-Control"]);
}

/// A store entry for `KEY`, fetched at T, with the response fields `resp`.
fn stored_with(resp: Fields) -> (super::Store, super::Key<'static>) {
    use super::store::{Append, Store};
    const KEY: super::Key<'static> = super::Key {
        https: false,
        host: b"example.com",
        target: b"/swr",
    };
    let st = storable(&[], 200, &hs(resp), Some(3), at(), &CacheEntry::default()).unwrap();
    let mut s = Store::new(1 << 20, 1 << 16);
    let h = s.begin_fill(KEY).unwrap();
    let head = bytes::Bytes::from_static(b"HTTP/1.1 200 OK\r\n");
    assert!(s.fill_head(h, 200, head, st, Some(3)));
    assert_eq!(s.append(h, b"abc"), Append::Kept);
    assert!(s.finish(h));
    (s, KEY)
}

#[test]
fn stale_while_revalidate_serves_within_its_window_with_one_revalidation() {
    use super::store::Lookup;
    // Fresh for 10 s, then 5 s of stale-while-revalidate.
    let (mut s, key) = stored_with(&[("Cache-Control", "max-age=10, stale-while-revalidate=5")]);
    assert!(matches!(
        s.lookup(key, &[], false, T + 9_999),
        Lookup::Hit(_)
    ));
    let Lookup::Revalidate {
        hit,
        entry,
        revalidating: false,
    } = s.lookup(key, &[], false, T + 10_000)
    else {
        panic!("stale within the window: served, and revalidated by this request")
    };
    assert_eq!((&hit.body[..], hit.age), (&b"abc"[..], 10));
    // The revalidation's fill is under way: the others are served, and start none.
    let fill = s.begin_fill(key).unwrap();
    for now in [T + 10_001, T + 15_000] {
        assert!(matches!(
            s.lookup(key, &[], false, now),
            Lookup::Revalidate { entry: e, revalidating: true, .. } if e == entry
        ));
    }
    // Past the window: not served; the request waits for the fill like any other.
    assert!(matches!(s.lookup(key, &[], false, T + 15_001), Lookup::Wait(f) if f == fill));
    s.abandon(fill);
    assert!(matches!(
        s.lookup(key, &[], false, T + 15_001),
        Lookup::Stale(_)
    ));
    // A directive that forbids stale use forbids it here too (4.2.4).
    let forbidden: [Fields; 3] = [
        &[(
            "Cache-Control",
            "max-age=10, stale-while-revalidate=5, must-revalidate",
        )],
        &[("Cache-Control", "s-maxage=10, stale-while-revalidate=5")],
        &[("Cache-Control", "max-age=10, stale-while-revalidate=bogus")],
    ];
    for resp in forbidden {
        let (mut s, key) = stored_with(resp);
        let l = s.lookup(key, &[], false, T + 10_000);
        assert!(matches!(l, Lookup::Stale(_)), "{resp:?}");
    }
}

#[test]
fn stale_if_error_from_the_response_when_the_route_sets_none() {
    use super::store::Lookup;
    let (mut s, key) = stored_with(&[("Cache-Control", "max-age=10, stale-if-error=5")]);
    let Lookup::Stale(h) = s.lookup(key, &[], false, T + 10_000) else {
        panic!("stale")
    };
    assert!(
        s.stale_hit(h, T + 15_000, 0).is_some(),
        "the response's 5 s"
    );
    assert!(s.stale_hit(h, T + 15_001, 0).is_none());
    // The route's setting comes first (as nginx's proxy_cache_use_stale does).
    assert!(s.stale_hit(h, T + 15_001, 60_000).is_some());
    assert!(s.stale_hit(h, T + 10_500, 100).is_none());
    let (mut s, key) = stored_with(&[("Cache-Control", "max-age=10")]);
    let Lookup::Stale(h) = s.lookup(key, &[], false, T + 10_000) else {
        panic!("stale")
    };
    assert!(
        s.stale_hit(h, T + 10_000, 0).is_none(),
        "neither says anything"
    );
}

#[test]
fn set_cookie_is_stored_only_when_the_route_says_so() {
    let resp: Fields = &[("Set-Cookie", "a=1"), ("Cache-Control", "max-age=5")];
    assert_eq!(
        lifetime(&CacheEntry::default(), 200, resp),
        Err(NotStored::SetCookie)
    );
    let opted = CacheEntry {
        store_set_cookie: true,
        ..CacheEntry::default()
    };
    assert_eq!(lifetime(&opted, 200, resp), Ok(5_000));
}

#[test]
fn heuristic_freshness_is_a_tenth_of_the_time_since_last_modified_capped_by_ttl() {
    // Date T; Last-Modified 10 000 s before it: 1 000 s of heuristic freshness.
    const DATE: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
    const LM: &str = "Tue, 14 Nov 2023 19:26:40 GMT";
    const LM_OLD: &str = "Tue, 14 Nov 2000 22:13:20 GMT";
    let route = |secs| CacheEntry {
        ttl: Duration::from_secs(secs),
        ..CacheEntry::default()
    };
    let lm: Fields = &[("Date", DATE), ("Last-Modified", LM)];
    let cases: [(u64, u16, Fields, Stored); 10] = [
        (3_600, 200, lm, Ok(1_000_000)),
        (600, 200, lm, Ok(600_000)),
        // ttl 0: only the heuristic, capped at a day.
        (0, 200, lm, Ok(1_000_000)),
        (
            0,
            200,
            &[("Date", DATE), ("Last-Modified", LM_OLD)],
            Ok(86_400_000),
        ),
        // Other heuristically cacheable statuses get it too; others do not, unless public.
        (3_600, 410, lm, Ok(1_000_000)),
        (3_600, 302, lm, Err(NotStored::NoFreshness)),
        (
            3_600,
            302,
            &[
                ("Date", DATE),
                ("Last-Modified", LM),
                ("Cache-Control", "public"),
            ],
            Ok(1_000_000),
        ),
        // Explicit freshness wins.
        (
            3_600,
            200,
            &[
                ("Date", DATE),
                ("Last-Modified", LM),
                ("Cache-Control", "max-age=5"),
            ],
            Ok(5_000),
        ),
        // A Last-Modified after Date: no heuristic, the route's ttl for 200.
        (
            3_600,
            200,
            &[("Date", LM), ("Last-Modified", DATE)],
            Ok(3_600_000),
        ),
        (
            0,
            200,
            &[("Date", LM), ("Last-Modified", DATE)],
            Err(NotStored::NoFreshness),
        ),
    ];
    for (ttl, status, resp, want) in cases {
        assert_eq!(
            lifetime(&route(ttl), status, resp),
            want,
            "ttl {ttl}: {status} {resp:?}"
        );
    }
}

#[test]
fn no_cache_is_stored_with_a_validator_and_never_fresh() {
    let cfg = CacheEntry::default();
    let cases: [(Fields, Stored); 4] = [
        (&[("Cache-Control", "no-cache")], Err(NotStored::NoCache)),
        (&[("Cache-Control", "no-cache"), ("ETag", "\"a\"")], Ok(0)),
        (
            &[
                ("Cache-Control", "no-cache, max-age=3600"),
                ("Last-Modified", "Tue, 14 Nov 2023 19:26:40 GMT"),
            ],
            Ok(0),
        ),
        (
            &[("Cache-Control", "no-cache, no-store"), ("ETag", "\"a\"")],
            Err(NotStored::NoStore),
        ),
    ];
    for (resp, want) in cases {
        assert_eq!(lifetime(&cfg, 200, resp), want, "{resp:?}");
        if want.is_ok() {
            let st = storable(&[], 200, &hs(resp), None, at(), &cfg).unwrap();
            assert!(st.freshness.forbids_stale, "never served stale either");
        }
    }
}

#[test]
fn must_understand_overrides_no_store_for_understood_statuses() {
    let cfg = CacheEntry::default();
    let mu: Fields = &[("Cache-Control", "must-understand, no-store, max-age=60")];
    let cases: [(u16, Fields, Stored); 5] = [
        (200, mu, Ok(60_000)),
        (404, mu, Ok(60_000)),
        // A status it does not understand: not stored, whatever else the response says.
        (299, mu, Err(NotStored::Status)),
        (
            299,
            &[("Cache-Control", "must-understand, max-age=60")],
            Err(NotStored::Status),
        ),
        // Without must-understand, no-store stands.
        (
            200,
            &[("Cache-Control", "no-store, max-age=60")],
            Err(NotStored::NoStore),
        ),
    ];
    for (status, resp, want) in cases {
        assert_eq!(lifetime(&cfg, status, resp), want, "{status} {resp:?}");
    }
    // The request's no-store still forbids storing.
    let req = hs(&[("Cache-Control", "no-store")]);
    let got = storable(&req, 200, &hs(mu), None, at(), &cfg).map(|_| ());
    assert_eq!(got, Err(NotStored::NoStore));
}
