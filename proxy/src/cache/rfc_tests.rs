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
