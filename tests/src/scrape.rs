//! `/metrics` read as a test reads it: the samples of one scrape of an admin listener, by
//! `name{labels}`, for assertions on exact counts.

use crate::raw::{exchange, show, End, WAIT};
use std::collections::HashMap;
use std::net::SocketAddr;

/// The samples of a Prometheus text page: `name{labels}` -> value.
pub fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("sample line");
            (k.to_string(), v.parse().expect("sample value"))
        })
        .collect()
}

/// One scrape of `GET /metrics` on the admin listener `admin` (its answer must be a 200).
pub fn scrape(admin: SocketAddr) -> HashMap<String, f64> {
    let r = exchange(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n",
        WAIT,
    );
    assert_eq!(r.end, End::Closed, "admin /metrics: {}", show(&r));
    let resp = r.responses().into_iter().next().expect("a response");
    assert_eq!(resp.status, 200, "{}", show(&r));
    samples(&String::from_utf8_lossy(&resp.body))
}

/// A sample's value, 0 when the scrape does not have it.
pub fn value(m: &HashMap<String, f64>, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(0.0)
}

/// The sum of a family's samples over all their labels (`name` or `name{...}`), 0 when the
/// scrape has none: e.g. every route's `proxy_request_duration_seconds_count`.
pub fn total(m: &HashMap<String, f64>, name: &str) -> f64 {
    m.iter()
        .filter(|(k, _)| {
            k.strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('{'))
        })
        .map(|(_, v)| v)
        .sum()
}
