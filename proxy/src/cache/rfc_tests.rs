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
