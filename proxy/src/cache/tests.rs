//! The cache's rules as tables with exact outcomes: request classes, storability, freshness
//! and age, and the store's life cycle (hits, collapsing, variants, drops, LRU, staleness,
//! invalidation). Times are fixed numbers; nothing reads a clock.

use super::policy::{classify, invalidates, storable, Bypass, Fetched, NotStored, RequestClass};
use super::store::{Append, Key, Lookup, Read, Store, ENTRY_OVERHEAD};
use super::vary::VarySpec;
use super::{CacheStatus, Freshness, Millis, Storable};
use crate::config::cache::CacheEntry;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Duration;

/// 2023-11-14 22:13:20 UTC, in milliseconds.
const T: Millis = 1_700_000_000_000;
const DATE_T: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
const DATE_T_MINUS_10: &str = "Tue, 14 Nov 2023 22:13:10 GMT";
const DATE_T_PLUS_60: &str = "Tue, 14 Nov 2023 22:14:20 GMT";

/// Header fields as (name, value) pairs.
type Fields = &'static [(&'static str, &'static str)];

fn hs(list: &[(&'static str, &'static str)]) -> Vec<httparse::Header<'static>> {
    list.iter()
        .map(|&(name, v)| httparse::Header {
            name,
            value: v.as_bytes(),
        })
        .collect()
}

fn cfg() -> CacheEntry {
    CacheEntry {
        ttl: Duration::from_secs(60),
        max_object: 1000,
        ..CacheEntry::default()
    }
}

/// Fetched at T - 500ms, answered at T.
fn at() -> Fetched {
    Fetched {
        request_time: T - 500,
        response_time: T,
    }
}

#[test]
fn request_classes() {
    let lookup = RequestClass::Lookup {
        accepts: false.into(),
        only_if_cached: false,
    };
    let revalidate = RequestClass::Lookup {
        accepts: true.into(),
        only_if_cached: false,
    };
    let cases: [(&str, Fields, bool, RequestClass); 18] = [
        ("GET", &[], false, lookup),
        ("HEAD", &[], false, lookup),
        ("GET", &[("Cache-Control", "no-cache")], false, revalidate),
        ("GET", &[("Pragma", "no-cache")], false, revalidate),
        ("GET", &[("Cache-Control", "max-age=0")], false, revalidate),
        (
            "GET",
            &[("Cache-Control", "only-if-cached")],
            false,
            RequestClass::Lookup {
                accepts: false.into(),
                only_if_cached: true,
            },
        ),
        (
            "GET",
            &[("Cache-Control", "no-store")],
            false,
            RequestClass::Bypass(Bypass::NoStore),
        ),
        (
            "GET",
            &[("Authorization", "Basic eDp5")],
            false,
            RequestClass::Bypass(Bypass::Credentials),
        ),
        (
            "GET",
            &[("cookie", "a=1")],
            false,
            RequestClass::Bypass(Bypass::Credentials),
        ),
        ("GET", &[("Cookie", "a=1")], true, lookup),
        ("POST", &[], false, RequestClass::Invalidate),
        ("DELETE", &[], false, RequestClass::Invalidate),
        ("PURGE", &[], false, RequestClass::Purge),
        ("OPTIONS", &[], false, RequestClass::Bypass(Bypass::Method)),
        ("TRACE", &[], false, RequestClass::Bypass(Bypass::Method)),
        // RFC 9110 9.2.1: any method not known to be safe invalidates.
        ("M-SEARCH", &[], false, RequestClass::Invalidate),
        ("FOO", &[], false, RequestClass::Invalidate),
        ("PATCH", &[], false, RequestClass::Invalidate),
    ];
    for (method, headers, allow, want) in cases {
        let c = CacheEntry {
            allow_credentials: allow,
            ..cfg()
        };
        assert_eq!(
            classify(method, &hs(headers), &c),
            want,
            "{method} {headers:?}"
        );
    }
    assert!(invalidates(200) && invalidates(204) && invalidates(303));
    assert!(!invalidates(404) && !invalidates(500) && !invalidates(100));
    let names: Vec<&str> = [
        CacheStatus::Hit,
        CacheStatus::Miss,
        CacheStatus::Bypass,
        CacheStatus::Stale,
    ]
    .iter()
    .map(|s| s.as_str())
    .collect();
    assert_eq!(names, ["HIT", "MISS", "BYPASS", "STALE"]);
}

/// (status, response fields, request fields, Content-Length) → lifetime and initial age in
/// ms, or why not stored.
type StoreCase = (
    u16,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
    Option<u64>,
    Result<(Millis, Millis), NotStored>,
);

#[test]
fn storability_and_freshness_table() {
    let cases: &[StoreCase] = &[
        // The route's ttl (60s) for 200, 301, 404 without explicit freshness; the initial age
        // is the response delay (500ms, 4.2.3).
        (200, &[], &[], Some(10), Ok((60_000, 500))),
        (301, &[], &[], None, Ok((60_000, 500))),
        (404, &[], &[], None, Ok((60_000, 500))),
        (302, &[], &[], None, Err(NotStored::NoFreshness)),
        (500, &[], &[], None, Err(NotStored::NoFreshness)),
        // Explicit freshness: s-maxage over max-age over Expires (4.2.1), any final status.
        (
            200,
            &[("Cache-Control", "max-age=5")],
            &[],
            None,
            Ok((5_000, 500)),
        ),
        (
            200,
            &[("Cache-Control", "max-age=5, s-maxage=7")],
            &[],
            None,
            Ok((7_000, 500)),
        ),
        (
            500,
            &[("Cache-Control", "max-age=5")],
            &[],
            None,
            Ok((5_000, 500)),
        ),
        (
            200,
            &[("Date", DATE_T), ("Expires", DATE_T_PLUS_60)],
            &[],
            None,
            Ok((60_000, 500)),
        ),
        (
            200,
            &[("Expires", DATE_T_PLUS_60)],
            &[],
            None,
            Ok((60_000, 500)),
        ),
        (
            200,
            &[("Expires", DATE_T_PLUS_60), ("Cache-Control", "max-age=2")],
            &[],
            None,
            Ok((2_000, 500)),
        ),
        // 5.3: an invalid Expires ("0") is in the past: stored already stale.
        (200, &[("Expires", "0")], &[], None, Ok((0, 500))),
        // 4.2.3: Age adds to the delay; a Date in the past gives an apparent age.
        (200, &[("Age", "30")], &[], None, Ok((60_000, 30_500))),
        (
            200,
            &[("Date", DATE_T_MINUS_10)],
            &[],
            None,
            Ok((60_000, 10_000)),
        ),
        (
            200,
            &[("Date", DATE_T_MINUS_10), ("Age", "20")],
            &[],
            None,
            Ok((60_000, 20_500)),
        ),
        // Never stored.
        (
            206,
            &[("Cache-Control", "max-age=60")],
            &[],
            None,
            Err(NotStored::Status),
        ),
        (304, &[], &[], None, Err(NotStored::Status)),
        (
            200,
            &[("Cache-Control", "no-store, max-age=60")],
            &[],
            None,
            Err(NotStored::NoStore),
        ),
        (
            200,
            &[],
            &[("Cache-Control", "no-store")],
            None,
            Err(NotStored::NoStore),
        ),
        (
            200,
            &[("Cache-Control", "private")],
            &[],
            None,
            Err(NotStored::Private),
        ),
        (
            200,
            &[("Cache-Control", "private=\"X\", max-age=9")],
            &[],
            None,
            Err(NotStored::Private),
        ),
        (
            200,
            &[("Cache-Control", "no-cache")],
            &[],
            None,
            Err(NotStored::NoCache),
        ),
        (
            200,
            &[
                ("Set-Cookie", "s=1"),
                ("Cache-Control", "public, max-age=60"),
            ],
            &[],
            None,
            Err(NotStored::SetCookie),
        ),
        (
            200,
            &[("Vary", "Accept, *")],
            &[],
            None,
            Err(NotStored::VaryStar),
        ),
        (200, &[], &[], Some(1001), Err(NotStored::TooLarge)),
        (200, &[], &[], Some(1000), Ok((60_000, 500))),
        // 3.5: Authorization needs public, s-maxage or must-revalidate.
        (
            200,
            &[("Cache-Control", "max-age=9")],
            &[("Authorization", "x")],
            None,
            Err(NotStored::Authorization),
        ),
        (
            200,
            &[("Cache-Control", "public, max-age=9")],
            &[("Authorization", "x")],
            None,
            Ok((9_000, 500)),
        ),
    ];
    for (status, resp, req, len, want) in cases {
        let got = storable(&hs(req), *status, &hs(resp), *len, at(), &cfg())
            .map(|s| (s.freshness.lifetime, s.freshness.corrected_initial_age));
        assert_eq!(got, *want, "{status} {resp:?} {req:?}");
    }
}

#[test]
fn age_of_a_fetched_response() {
    use super::policy::fetched_age;
    let cases: [(Fields, Fetched, u64); 9] = [
        // Straight from the origin, quickly: 0.
        (&[("Date", DATE_T)], at(), 0),
        // 1.5 s in transit, then Age from an upstream cache added.
        (
            &[],
            Fetched {
                request_time: T - 1_500,
                response_time: T,
            },
            1,
        ),
        (&[("Age", "30")], at(), 30),
        (&[("Age", "bogus")], at(), 0),
        // One line holding a list: its first value (RFC 9111 5.1, 4.2.3).
        (&[("Age", "7200, 0")], at(), 7200),
        (&[("Age", " 5 ,9")], at(), 5),
        // Two lines: the first.
        (&[("Age", "40"), ("Age", "3")], at(), 40),
        (&[("Age", "-1, 5")], at(), 0),
        // Date 10 s before the response arrived: the apparent age beats Age + transit.
        (&[("Date", DATE_T_MINUS_10), ("Age", "3")], at(), 10),
    ];
    for (resp, at, want) in cases {
        assert_eq!(fetched_age(&hs(resp), at), want, "{resp:?}");
    }
}

#[test]
fn freshness_age_and_stale_if_error() {
    let f = Freshness {
        response_time: T,
        corrected_initial_age: 2_500,
        lifetime: 10_000,
        forbids_stale: false,
        stale_while_revalidate: 0,
        stale_if_error: None,
    };
    assert_eq!(f.current_age(T), 2_500);
    assert_eq!(f.age_secs(T), 2);
    assert_eq!(f.age_secs(T + 600), 3);
    assert!(f.is_fresh(T + 7_499));
    assert!(
        !f.is_fresh(T + 7_500),
        "fresh means lifetime > current_age (4.2)"
    );
    // Within stale_if_error past the lifetime (10s past it at T + 17.5s), not beyond.
    assert!(f.usable_on_error(T + 17_500, 10_000));
    assert!(!f.usable_on_error(T + 17_501, 10_000));
    assert!(!f.usable_on_error(T + 8_000, 0), "stale_if_error off");
    let strict = Freshness {
        forbids_stale: true,
        ..f
    };
    assert!(
        !strict.usable_on_error(T + 8_000, 10_000),
        "must-revalidate and co. (4.2.4)"
    );
    // A clock that went back never makes a negative age.
    assert_eq!(f.current_age(T - 5_000), 2_500);
}

// ---- The store. ----

const KEY: Key<'static> = Key {
    https: false,
    host: b"Example.com",
    target: b"/page?x=1",
};

fn fresh(lifetime: Millis) -> Storable {
    Storable {
        freshness: Freshness {
            response_time: T,
            corrected_initial_age: 0,
            lifetime,
            forbids_stale: false,
            stale_while_revalidate: 0,
            stale_if_error: None,
        },
        vary: VarySpec::default(),
    }
}

fn head() -> Bytes {
    Bytes::from_static(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n")
}

/// Fill `key` completely with `body` (fresh for 10s from T).
fn put(store: &mut Store, key: Key<'_>, body: &[u8]) {
    let h = store.begin_fill(key).expect("room");
    assert!(store.fill_head(h, 200, head(), fresh(10_000), Some(body.len() as u64)));
    assert_eq!(store.append(h, body), Append::Kept);
    assert!(store.finish(h));
}

fn hit_body(l: Lookup) -> Bytes {
    match l {
        Lookup::Hit(h) => h.body,
        other => panic!("expected a hit, got {other:?}"),
    }
}

#[derive(Default)]
struct Counting(AtomicUsize);
impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
fn counting() -> (Arc<Counting>, Waker) {
    let c = Arc::new(Counting::default());
    (c.clone(), Waker::from(c))
}

#[test]
fn hit_after_fill_with_age_and_case_insensitive_host() {
    let mut s = Store::new(1 << 20, 1 << 16);
    assert!(matches!(s.lookup(KEY, &[], false, T), Lookup::Miss));
    put(&mut s, KEY, b"hello");
    let other_case = Key {
        https: false,
        host: b"EXAMPLE.COM",
        target: KEY.target,
    };
    match s.lookup(other_case, &[], false, T + 3_999) {
        Lookup::Hit(h) => {
            assert_eq!((h.status, &h.body[..], h.age), (200, &b"hello"[..], 3));
            assert_eq!(h.head, head());
        }
        other => panic!("{other:?}"),
    }
    // Another target, another query: misses.
    for target in [&b"/page?x=2"[..], b"/page", b"/Page?x=1"] {
        let k = Key {
            https: false,
            host: KEY.host,
            target,
        };
        assert!(
            matches!(s.lookup(k, &[], false, T), Lookup::Miss),
            "{target:?}"
        );
    }
    let o = Key {
        https: false,
        host: b"other.com",
        target: KEY.target,
    };
    assert!(matches!(s.lookup(o, &[], false, T), Lookup::Miss));
    // Request no-cache: the stored response is not used without validation: it is the one
    // to validate (`Stale`), even while fresh; a key with nothing stored misses.
    let Lookup::Stale(h) = s.lookup(KEY, &[], true, T) else {
        panic!("no-cache: the stored entry is to be validated")
    };
    assert_eq!(s.stored(h, T + 1_000).map(|h| h.age), Some(1));
    assert!(matches!(s.lookup(o, &[], true, T), Lookup::Miss));
}

#[test]
fn a_refresh_replaces_head_and_freshness_and_keeps_the_body() {
    let mut s = Store::new(1 << 20, 1 << 16);
    put(&mut s, KEY, b"hello");
    // Stale at T + 10s.
    let Lookup::Stale(h) = s.lookup(KEY, &[], false, T + 10_000) else {
        panic!("stale")
    };
    let bytes = s.bytes();
    let new_head =
        Bytes::from_static(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nETag: \"v2\"\r\n");
    let mut st = fresh(5_000);
    st.freshness.response_time = T + 10_000;
    assert!(s.refresh(h, new_head.clone(), st));
    let grown = (new_head.len() - head().len()) as u64;
    assert_eq!(s.bytes(), bytes + grown, "the longer head is counted");
    match s.lookup(KEY, &[], false, T + 12_000) {
        Lookup::Hit(hit) => {
            assert_eq!(
                (&hit.body[..], &hit.head, hit.age),
                (&b"hello"[..], &new_head, 2)
            );
        }
        other => panic!("fresh again after the refresh: {other:?}"),
    }
    // Stale again 5s after the refresh; a refresh of a handle that is gone does nothing.
    assert!(matches!(
        s.lookup(KEY, &[], false, T + 15_000),
        Lookup::Stale(_)
    ));
    s.invalidate(KEY);
    assert!(!s.refresh(h, new_head, fresh(5_000)));
    assert_eq!((s.bytes(), s.len()), (0, 0));
}

#[test]
fn concurrent_misses_collapse_and_stream_as_the_entry_fills() {
    let mut s = Store::new(1 << 20, 1 << 16);
    let h = s.begin_fill(KEY).unwrap();
    let Lookup::Wait(w) = s.lookup(KEY, &[], false, T) else {
        panic!("second miss waits")
    };
    assert_eq!(w, h);
    let (woken, waker) = counting();
    assert!(s.subscribe(w, &waker));
    assert!(s.subscribe(w, &waker), "subscribing twice keeps one waker");
    assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(6)));
    assert_eq!(
        woken.0.load(Ordering::SeqCst),
        1,
        "the head wakes waiters once"
    );
    let Lookup::Stream {
        entry, status, age, ..
    } = s.lookup(KEY, &[], false, T + 1_000)
    else {
        panic!("a declared length streams")
    };
    assert_eq!((entry, status, age), (h, 200, 1));
    assert_eq!(s.read(entry, 0), Read::Pending);
    assert!(s.subscribe(entry, &waker));
    assert_eq!(s.append(h, b"abc"), Append::Kept);
    assert_eq!(
        woken.0.load(Ordering::SeqCst),
        2,
        "bytes wake streaming readers"
    );
    assert_eq!(s.read(entry, 0), Read::Data(Bytes::from_static(b"abc")));
    assert_eq!(s.read(entry, 1), Read::Data(Bytes::from_static(b"bc")));
    assert_eq!(s.read(entry, 3), Read::Pending);
    assert_eq!(s.append(h, b"def"), Append::Kept);
    assert_eq!(s.read(entry, 3), Read::Data(Bytes::from_static(b"def")));
    assert!(s.finish(h));
    assert_eq!(s.read(entry, 3), Read::Data(Bytes::from_static(b"def")));
    assert_eq!(s.read(entry, 6), Read::End);
    assert!(!s.subscribe(entry, &waker), "complete: nothing to wait for");
    assert_eq!(&hit_body(s.lookup(KEY, &[], false, T))[..], b"abcdef");
}

#[test]
fn without_a_declared_length_waiters_wait_for_the_whole_body() {
    let mut s = Store::new(1 << 20, 1 << 16);
    let h = s.begin_fill(KEY).unwrap();
    assert!(s.fill_head(h, 200, head(), fresh(10_000), None));
    let Lookup::Wait(w) = s.lookup(KEY, &[], false, T) else {
        panic!("chunked fills are waited for")
    };
    let (woken, waker) = counting();
    assert!(s.subscribe(w, &waker));
    assert_eq!(s.append(h, b"abc"), Append::Kept);
    assert_eq!(
        woken.0.load(Ordering::SeqCst),
        0,
        "bytes do not wake who waits for the end"
    );
    assert!(s.finish(h));
    assert_eq!(woken.0.load(Ordering::SeqCst), 1);
    assert_eq!(&hit_body(s.lookup(KEY, &[], false, T))[..], b"abc");
}

#[test]
fn an_entry_over_max_object_midway_is_dropped_and_waiters_told() {
    let mut s = Store::new(1 << 20, 10);
    let h = s.begin_fill(KEY).unwrap();
    assert!(s.fill_head(h, 200, head(), fresh(10_000), None));
    let Lookup::Wait(w) = s.lookup(KEY, &[], false, T) else {
        panic!()
    };
    let (woken, waker) = counting();
    assert!(s.subscribe(w, &waker));
    assert_eq!(s.append(h, b"123456"), Append::Kept);
    assert_eq!(s.append(h, b"7890X"), Append::Dropped);
    assert_eq!(woken.0.load(Ordering::SeqCst), 1, "the drop wakes waiters");
    assert_eq!(s.read(w, 0), Read::Dropped);
    assert!(
        matches!(s.lookup(KEY, &[], false, T), Lookup::Miss),
        "each waiter fetches"
    );
    assert_eq!(
        s.append(h, b"more"),
        Append::Dropped,
        "later appends are refused"
    );
    assert!(!s.finish(h));
    assert_eq!((s.len(), s.bytes(), s.stats().dropped_too_large), (0, 0, 1));
    // A declared length over max_object is refused at the head.
    let h = s.begin_fill(KEY).unwrap();
    assert!(!s.fill_head(h, 200, head(), fresh(10_000), Some(11)));
    assert_eq!((s.len(), s.stats().dropped_too_large), (0, 2));
    // A fill that ends short of its declared length is not kept.
    let h = s.begin_fill(KEY).unwrap();
    assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(5)));
    assert_eq!(s.append(h, b"1234"), Append::Kept);
    assert!(!s.finish(h));
    assert!(s.is_empty());
}

#[test]
fn abandoned_fill_sends_waiters_upstream() {
    let mut s = Store::new(1 << 20, 1 << 16);
    let h = s.begin_fill(KEY).unwrap();
    let Lookup::Wait(w) = s.lookup(KEY, &[], false, T) else {
        panic!()
    };
    let (woken, waker) = counting();
    assert!(s.subscribe(w, &waker));
    s.abandon(h);
    assert_eq!(woken.0.load(Ordering::SeqCst), 1);
    assert!(!s.subscribe(w, &waker));
    assert!(matches!(s.lookup(KEY, &[], false, T), Lookup::Miss));
    // The slot is reused with a new generation: the old handle stays dead.
    let h2 = s.begin_fill(KEY).unwrap();
    assert_ne!(h, h2);
    assert!(!s.fill_head(h, 200, head(), fresh(1), None));
    assert_eq!(s.read(h, 0), Read::Dropped);
}

#[test]
fn a_fill_whose_head_answers_none_of_its_waiters_passes_them() {
    // Not storable: the fill is gone, and what woke its waiters was a pass; a fill that
    // failed (abandoned) is not one: they look up again.
    let mut s = Store::new(1 << 20, 1 << 16);
    let h = s.begin_fill(KEY).unwrap();
    assert!(!s.passes(h, T));
    s.pass(h);
    assert!(s.passes(h, T));
    assert!(matches!(s.lookup(KEY, &[], false, T), Lookup::Miss));
    let failed = s.begin_fill(KEY).unwrap();
    s.abandon(failed);
    assert!(!s.passes(failed, T));
    // Not fresh (max-age=0): a pass; fresh: not, until it is stale.
    let stale = s.begin_fill(KEY).unwrap();
    assert!(s.fill_head(stale, 200, head(), fresh(0), Some(1)));
    assert!(s.passes(stale, T));
    s.abandon(stale);
    let f = s.begin_fill(KEY).unwrap();
    assert!(s.fill_head(f, 200, head(), fresh(10_000), Some(1)));
    assert!(!s.passes(f, T));
    assert!(s.passes(f, T + 10_001));
}

#[test]
fn variants_are_stored_apart() {
    let mut s = Store::new(1 << 20, 1 << 16);
    let resp = hs(&[("Vary", "Accept-Encoding")]);
    let gz = hs(&[("Accept-Encoding", "gzip")]);
    let br = hs(&[("Accept-Encoding", "br")]);
    for (req, body) in [(&gz, &b"gz"[..]), (&br, b"br")] {
        assert!(matches!(s.lookup(KEY, req, false, T), Lookup::Miss));
        let h = s.begin_fill(KEY).unwrap();
        let st = Storable {
            vary: VarySpec::new(&resp, req).unwrap(),
            ..fresh(10_000)
        };
        assert!(s.fill_head(h, 200, head(), st, Some(2)));
        assert_eq!(s.append(h, body), Append::Kept);
        assert!(s.finish(h));
    }
    assert_eq!(s.len(), 2);
    assert_eq!(&hit_body(s.lookup(KEY, &gz, false, T))[..], b"gz");
    assert_eq!(&hit_body(s.lookup(KEY, &br, false, T))[..], b"br");
    let both = hs(&[("Accept-Encoding", "br, gzip")]);
    assert!(matches!(s.lookup(KEY, &both, false, T), Lookup::Miss));
    // A fill of one variant does not hold the other back once its head is in.
    let h = s.begin_fill(KEY).unwrap();
    let st = Storable {
        vary: VarySpec::new(&resp, &both).unwrap(),
        ..fresh(10_000)
    };
    assert!(s.fill_head(h, 200, head(), st, Some(1)));
    assert!(s.vary(h).is_some());
    assert!(matches!(s.lookup(KEY, &[], false, T), Lookup::Miss));
    assert_eq!(
        s.invalidate(KEY),
        3,
        "invalidation takes every variant and the fill"
    );
    assert!(s.is_empty());
    assert_eq!(s.bytes(), 0);
}

/// The route's ttl is the lifetime of a response that gives none: a hit until the entry's
/// age reaches it, stale from that millisecond (the end-to-end tests wait for that moment on
/// a real clock; here it is a number).
#[test]
fn an_entry_is_a_hit_for_the_routes_ttl_and_stale_from_then() {
    let c = CacheEntry {
        ttl: Duration::from_millis(1500),
        ..cfg()
    };
    // Fetched at T - 500, answered at T: its age is 500 ms at T (the table above).
    let fresh = storable(&[], 200, &[], Some(3), at(), &c).expect("storable");
    let mut s = Store::new(1 << 20, 1 << 16);
    let h = s.begin_fill(KEY).expect("room");
    assert!(s.fill_head(h, 200, head(), fresh, Some(3)));
    assert_eq!(s.append(h, b"abc"), Append::Kept);
    assert!(s.finish(h));
    assert_eq!(&hit_body(s.lookup(KEY, &[], false, T + 999))[..], b"abc");
    assert!(
        matches!(s.lookup(KEY, &[], false, T + 1_000), Lookup::Stale(_)),
        "stale once its age (500 ms + 1 s) reaches the ttl"
    );
}

#[test]
fn stale_entries_are_refetched_kept_for_errors_and_replaced() {
    let mut s = Store::new(1 << 20, 1 << 16);
    put(&mut s, KEY, b"old");
    let Lookup::Stale(old) = s.lookup(KEY, &[], false, T + 10_000) else {
        panic!("expired at its lifetime")
    };
    // The refresh collapses: others wait for it rather than going upstream too.
    let h = s.begin_fill(KEY).unwrap();
    assert!(matches!(s.lookup(KEY, &[], false, T + 10_000), Lookup::Wait(w) if w == h));
    // The upstream failed: within stale_if_error the old entry is served, with its age.
    s.abandon(h);
    let hit = s
        .stale_hit(old, T + 15_000, 5_000)
        .expect("within stale_if_error");
    assert_eq!((&hit.body[..], hit.age), (&b"old"[..], 15));
    assert!(s.stale_hit(old, T + 15_001, 5_000).is_none());
    assert!(s.stale_hit(old, T + 11_000, 0).is_none());
    // A successful refresh replaces it.
    put(&mut s, KEY, b"new");
    assert_eq!(s.len(), 1);
    assert_eq!(&hit_body(s.lookup(KEY, &[], false, T + 1))[..], b"new");
    assert!(
        s.stale_hit(old, T + 10_001, 5_000).is_none(),
        "the old handle is gone"
    );
}

#[test]
fn lru_bounded_by_bytes_keeps_the_recently_used() {
    let body = [b'x'; 100];
    let key = |t: &'static [u8]| Key {
        https: false,
        host: b"h",
        target: t,
    };
    let one = ENTRY_OVERHEAD + 1 + 2 + head().len() as u64 + 100;
    let mut s = Store::new(one * 3, 1000);
    put(&mut s, key(b"/a"), &body);
    put(&mut s, key(b"/b"), &body);
    put(&mut s, key(b"/c"), &body);
    assert_eq!(s.bytes(), one * 3);
    hit_body(s.lookup(key(b"/a"), &[], false, T));
    put(&mut s, key(b"/d"), &body);
    assert_eq!(s.stats().evicted, 1);
    assert!(
        matches!(s.lookup(key(b"/b"), &[], false, T), Lookup::Miss),
        "/b was least recently used"
    );
    for k in [&b"/a"[..], b"/c", b"/d"] {
        hit_body(s.lookup(key(k), &[], false, T));
    }
    assert!(s.bytes() <= one * 3);
}

#[test]
fn fills_are_never_evicted_and_a_fill_without_room_is_dropped() {
    let one = ENTRY_OVERHEAD + 3 + head().len() as u64;
    let mut s = Store::new(one * 2 + 10, 1000);
    let key = |t: &'static [u8]| Key {
        https: false,
        host: b"h",
        target: t,
    };
    let a = s.begin_fill(key(b"/a")).unwrap();
    assert!(s.fill_head(a, 200, head(), fresh(10_000), None));
    let b = s.begin_fill(key(b"/b")).unwrap();
    assert!(s.fill_head(b, 200, head(), fresh(10_000), None));
    assert_eq!(s.append(a, &[b'x'; 10]), Append::Kept);
    assert_eq!(
        s.append(b, b"y"),
        Append::Dropped,
        "only fills to evict: b goes"
    );
    assert_eq!(s.stats().dropped_no_room, 1);
    assert!(s.finish(a));
    assert_eq!(s.len(), 1);
}

/// Bytes the body file of `s` has allocated, through its fd in a hit.
fn file_blocks(fd: std::os::fd::RawFd) -> u64 {
    // SAFETY: fstat on an open fd into a zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
    st.st_blocks as u64 * 512
}

#[test]
fn bodies_from_4_kib_live_in_the_body_file_until_their_last_reader_is_done() {
    let mut s = Store::new(1 << 20, 1 << 16).with_body_file();
    let small = vec![b's'; super::memfd::FILE_BODY_MIN - 1];
    let large: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    put(&mut s, KEY, &small);
    let Lookup::Hit(hit) = s.lookup(KEY, &[], false, T) else {
        panic!("hit")
    };
    assert_eq!(
        (hit.file, &hit.body[..]),
        (None, &small[..]),
        "small: memory"
    );
    put(&mut s, KEY, &large);
    let Lookup::Hit(hit) = s.lookup(KEY, &[], false, T) else {
        panic!("hit")
    };
    let file = hit.file.expect("large: in the file");
    assert_eq!(&hit.body[..], &large[..], "the mapping reads the body");
    assert_eq!(file_blocks(file.fd), 20_480, "five pages");
    // Removed from the store while a response still holds it: the pages stay until it is
    // dropped, then go.
    assert_eq!(s.invalidate(KEY), 1);
    assert_eq!(file_blocks(file.fd), 20_480);
    assert_eq!(&hit.body[..], &large[..]);
    drop(hit);
    assert_eq!(file_blocks(file.fd), 0);
}

#[test]
fn a_request_waiting_on_a_fill_still_finds_the_stored_entry_to_fall_back_on() {
    let mut s = Store::new(1 << 20, 1 << 16);
    put(&mut s, KEY, b"old");
    // Stale at T + 10s: a refill starts; another request waits for it ...
    let Lookup::Stale(old) = s.lookup(KEY, &[], false, T + 10_000) else {
        panic!("stale")
    };
    let fill = s.begin_fill(KEY).expect("room");
    let Lookup::Wait(w) = s.lookup(KEY, &[], false, T + 10_000) else {
        panic!("waits for the fill")
    };
    assert_eq!(w, fill);
    // ... and, should it give up waiting and fetch on its own, the stored entry is what a
    // failed fetch falls back on (exchange::cached asks with `revalidate`).
    match s.lookup(KEY, &[], true, T + 10_000) {
        Lookup::Stale(h) => assert_eq!(h, old),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.stale_hit(old, T + 10_000, 60_000).map(|h| h.body),
        Some(Bytes::from_static(b"old"))
    );
}

#[test]
fn keys_keep_the_scheme_and_a_port_other_than_the_default() {
    let host = |https, authority: &'static [u8]| Key::new(https, authority, b"/").host;
    assert_eq!(host(false, b"Site:80"), b"Site");
    assert_eq!(host(false, b"site:"), b"site");
    assert_eq!(host(false, b"site:080"), b"site");
    assert_eq!(host(false, b"site:443"), b"site:443");
    assert_eq!(host(true, b"site:443"), b"site");
    assert_eq!(host(true, b"site:80"), b"site:80");
    assert_eq!(host(false, b"site:1337"), b"site:1337");
    assert_eq!(host(false, b"[::1]:80"), b"[::1]");
    assert_eq!(host(false, b"[::1]"), b"[::1]");
    assert_eq!(host(false, b"[::1]:8080"), b"[::1]:8080");
    assert_eq!(host(false, b""), b"");
    // Stored under one scheme, never found under the other.
    let mut s = Store::new(1 << 20, 1 << 20);
    let plain = Key::new(false, b"site", b"/p");
    put(&mut s, plain, b"http answer");
    assert!(matches!(s.lookup(plain, &[], false, T), Lookup::Hit(_)));
    let tls = Key::new(true, b"site", b"/p");
    assert!(matches!(s.lookup(tls, &[], false, T), Lookup::Miss));
    let port = Key::new(false, b"site:1337", b"/p");
    assert!(matches!(s.lookup(port, &[], false, T), Lookup::Miss));
    let default = Key::new(false, b"SITE:80", b"/p");
    assert!(matches!(s.lookup(default, &[], false, T), Lookup::Hit(_)));
    assert_eq!(s.invalidate(tls), 0);
    assert_eq!(s.invalidate(default), 1);
}

#[test]
fn variants_per_key_are_capped_and_the_oldest_goes() {
    let mut s = Store::new(64 << 20, 1 << 16).with_max_variants(16);
    let resp = hs(&[("Vary", "User-Agent")]);
    let agent = |i: usize| format!("agent-{i}");
    for i in 0..10_000 {
        let ua = agent(i);
        let req = [httparse::Header {
            name: "User-Agent",
            value: ua.as_bytes(),
        }];
        assert!(matches!(s.lookup(KEY, &req, false, T), Lookup::Miss));
        let h = s.begin_fill(KEY).unwrap();
        let st = Storable {
            vary: VarySpec::new(&resp, &req).unwrap(),
            ..fresh(10_000)
        };
        assert!(s.fill_head(h, 200, head(), st, Some(1)));
        assert_eq!(s.append(h, b"x"), Append::Kept);
        assert!(s.finish(h));
        assert!(s.chain_len(KEY) <= 16, "after {i}: {}", s.chain_len(KEY));
    }
    assert_eq!(s.len(), 16);
    // The 16 most recent are served; the one before them went.
    let mut served = |i: usize| {
        let ua = agent(i);
        let req = [httparse::Header {
            name: "User-Agent",
            value: ua.as_bytes(),
        }];
        matches!(s.lookup(KEY, &req, false, T), Lookup::Hit(_))
    };
    assert!((10_000 - 16..10_000).all(&mut served));
    assert!(!served(10_000 - 17));
    // Another key is not touched by the cap.
    put(&mut s, Key::new(false, b"h", b"/other"), b"y");
    assert_eq!(s.len(), 17);
}

#[test]
fn parts_are_held_joined_into_the_whole_and_counted() {
    use super::store::Held;
    let head = Bytes::from_static(b"HTTP/1.1 200 OK\r\nETag: \"v1\"\r\n");
    let mut s = Store::new(100_000, 1000);
    let part = |s: &mut Store, start: u64, body: &[u8]| {
        let h = s.begin_fill(KEY).expect("room");
        let n = Some(body.len() as u64);
        assert!(s.fill_head(h, 200, head.clone(), fresh(10_000), n));
        assert!(s.hold(h, Held { start, total: 10 }));
        assert_eq!(s.append(h, body), Append::Kept);
        assert!(s.finish(h));
    };
    let held = |s: &mut Store| match s.lookup(KEY, &[], false, T) {
        Lookup::Held { hit, held } => (hit.body, held),
        other => panic!("expected a part, got {other:?}"),
    };
    part(&mut s, 0, b"01234");
    assert_eq!(
        held(&mut s),
        (
            Bytes::from_static(b"01234"),
            Held {
                start: 0,
                total: 10
            }
        )
    );
    let one = s.bytes();
    // Overlapping: joined (the new bytes win), counted once.
    part(&mut s, 3, b"34567");
    assert_eq!(
        held(&mut s),
        (
            Bytes::from_static(b"01234567"),
            Held {
                start: 0,
                total: 10
            }
        )
    );
    assert_eq!((s.len(), s.bytes()), (1, one + 3));
    // A part that touches nothing replaces the stored one.
    part(&mut s, 9, b"9");
    assert_eq!(
        held(&mut s),
        (
            Bytes::from_static(b"9"),
            Held {
                start: 9,
                total: 10
            }
        )
    );
    assert_eq!((s.len(), s.bytes()), (1, one - 4));
    // Adjacent parts up to the whole: a hit.
    part(&mut s, 0, b"012345678");
    assert_eq!(
        hit_body(s.lookup(KEY, &[], false, T)),
        Bytes::from_static(b"0123456789")
    );
    assert_eq!((s.len(), s.bytes()), (1, one + 5));
}

#[test]
fn early_hints_are_kept_with_the_entry_and_counted() {
    let mut s = Store::new(100_000, 1000);
    let h = s.begin_fill(KEY).expect("room");
    assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(2)));
    let before = s.bytes();
    let hints =
        Bytes::from_static(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n");
    assert!(s.set_interim(h, hints.clone()));
    assert_eq!(s.bytes(), before + hints.len() as u64);
    assert_eq!(s.append(h, b"ok"), Append::Kept);
    assert!(s.finish(h));
    match s.lookup(KEY, &[], false, T) {
        Lookup::Hit(hit) => assert_eq!((hit.interim, &hit.body[..]), (hints, &b"ok"[..])),
        other => panic!("expected a hit, got {other:?}"),
    }
    // No room for them: the fill goes.
    let mut s = Store::new(ENTRY_OVERHEAD + 200, 1000);
    let h = s.begin_fill(KEY).expect("room");
    assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(2)));
    assert!(!s.set_interim(h, Bytes::from(vec![b'x'; 300])));
    assert!(s.is_empty());
}

#[test]
fn a_fill_that_is_not_fresh_is_not_joined() {
    // RFC 9111 4: used without validation only while fresh (no-cache: a lifetime of 0; an
    // Age over the lifetime: stale on arrival). A request that finds only such a fill
    // fetches (Miss), or validates the stored response of its variant (Stale); a fresh fill
    // of the same key is still streamed.
    let stale_on_arrival = |mut st: Storable| {
        st.freshness.corrected_initial_age = 100_000;
        st
    };
    for (st, declared) in [
        (fresh(0), Some(3)),
        (fresh(0), None),
        (stale_on_arrival(fresh(10_000)), Some(3)),
    ] {
        let what = format!("{st:?} {declared:?}");
        let mut s = Store::new(1 << 20, 1 << 16);
        let h = s.begin_fill(KEY).unwrap();
        let Lookup::Wait(_) = s.lookup(KEY, &[], false, T) else {
            panic!("{what}: before its head, the fill is waited for")
        };
        assert!(s.fill_head(h, 200, head(), st.clone(), declared));
        let l = s.lookup(KEY, &[], false, T);
        assert!(matches!(l, Lookup::Miss), "{what}: {l:?}");
        // With a stored response of the variant: that one is validated.
        put(&mut s, KEY, b"old");
        let l = s.lookup(KEY, &[], false, T + 20_000);
        assert!(matches!(l, Lookup::Stale(_)), "{what}: {l:?}");
    }
    let mut s = Store::new(1 << 20, 1 << 16);
    let h = s.begin_fill(KEY).unwrap();
    assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(3)));
    let l = s.lookup(KEY, &[], false, T);
    assert!(matches!(l, Lookup::Stream { .. }), "fresh: {l:?}");
}

#[test]
fn an_entry_being_read_is_taken_out_of_the_store_and_read_to_its_end() {
    // RFC 9111 4.4: invalidation is for the requests after it; an answer being sent from an
    // entry finishes. Every way an entry leaves the store but a failure (invalidated, a
    // key's variants capped, evicted, replaced) leaves it to its readers: the fill goes on
    // for them, outside the store's bound, and it goes once they are done.
    type Out = fn(&mut Store);
    let ways: [(&str, Out); 3] = [
        ("invalidated", |s| {
            assert_eq!(s.invalidate(KEY), 1);
        }),
        ("a variant over max_variants", |s| {
            s.begin_fill(KEY).expect("room");
        }),
        ("evicted for room", |s| {
            let big = Key {
                target: b"/big",
                ..KEY
            };
            let h = s.begin_fill(big).expect("room");
            assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(800)));
            assert_eq!(s.append(h, &[b'x'; 800]), Append::Kept);
        }),
    ];
    for (how, out) in ways {
        let mut s = Store::new(1200, 1000).with_max_variants(1);
        let h = s.begin_fill(KEY).unwrap();
        assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(6)));
        assert_eq!(s.append(h, b"abc"), Append::Kept);
        assert!(s.open_reader(h), "{how}");
        if how == "evicted for room" {
            // Complete and read: eviction is for complete entries.
            assert_eq!(s.append(h, b"def"), Append::Kept);
            assert!(s.finish(h), "{how}");
        }
        out(&mut s);
        assert!(
            !matches!(
                s.lookup(KEY, &[], false, T),
                Lookup::Hit(_) | Lookup::Stream { .. }
            ),
            "{how}: no longer found"
        );
        let read = s.read(h, 0);
        assert!(
            matches!(&read, Read::Data(b) if b.starts_with(b"abc")),
            "{how}: {read:?}"
        );
        if how != "evicted for room" {
            assert_eq!(s.append(h, b"def"), Append::Kept, "{how}: the fill goes on");
            assert!(s.finish(h), "{how}");
        }
        assert_eq!(
            s.read(h, 3),
            Read::Data(Bytes::from_static(b"def")),
            "{how}"
        );
        assert_eq!(s.read(h, 6), Read::End, "{how}");
        let (bytes, len) = (s.bytes(), s.len());
        s.close_reader(h);
        assert_eq!(
            s.read(h, 6),
            Read::Dropped,
            "{how}: gone with its last reader"
        );
        assert_eq!((s.bytes(), s.len()), (bytes, len), "{how}: counted apart");
    }
}

#[test]
fn an_entry_nobody_reads_goes_at_once_and_a_failed_fill_fails_its_readers() {
    let mut s = Store::new(1 << 20, 1 << 16);
    let h = s.begin_fill(KEY).unwrap();
    assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(6)));
    assert_eq!(s.invalidate(KEY), 1);
    assert_eq!(s.read(h, 0), Read::Dropped);
    assert_eq!(
        s.append(h, b"abc"),
        Append::Dropped,
        "nobody wants the rest"
    );
    assert_eq!((s.bytes(), s.len()), (0, 0));
    // The upstream failed: its readers fail too, taken out of the store or not.
    for invalidated in [false, true] {
        let h = s.begin_fill(KEY).unwrap();
        assert!(s.fill_head(h, 200, head(), fresh(10_000), Some(6)));
        assert_eq!(s.append(h, b"abc"), Append::Kept);
        assert!(s.open_reader(h));
        if invalidated {
            s.invalidate(KEY);
        }
        s.abandon(h);
        assert_eq!(s.read(h, 0), Read::Dropped, "{invalidated}");
        s.close_reader(h);
        assert_eq!((s.bytes(), s.len()), (0, 0));
    }
}
