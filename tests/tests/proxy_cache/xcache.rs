//! `X-Cache` on every response of a cached route (issue 10), the proxy's own answers
//! included: MISS when a lookup found nothing it could serve and the fetch failed (nginx's
//! `$upstream_cache_status` says MISS for a failed fill too), BYPASS when the request did not
//! use the cache (unsafe methods, credentials, PURGE, a request body refused before any
//! fetch). Errors answered before the route is known (a malformed head) carry none.

use proxy::config::cache::Cidr;
use shared::origin::{Origin, OriginConfig};
use std::net::SocketAddr;
use std::time::Duration;

use crate::cache_proxy::{first_after_expiry, proxy, request, x_cache};
use tests::raw::{self, Client, Response};

/// Send `bytes` on a new connection; the one complete response.
fn exchange(addr: SocketAddr, bytes: &[u8], head_only: bool) -> Response {
    let mut c = Client::connect(addr);
    c.send(bytes).expect("send");
    c.response_to(head_only, raw::WAIT)
        .unwrap_or_else(|r| panic!("no complete response: {}", raw::show(&r)))
}

/// Status, X-Cache, and whether the connection closes after it.
fn seen(r: &Response) -> (u16, &str, bool) {
    (r.status, x_cache(r), r.connection_has("close"))
}

#[test]
fn a_dead_upstream_answers_502_with_miss_or_bypass() {
    let port = tests::ClosedPort::new();
    let (p, addr) = proxy(&[port.addr()], &[], |_| {});
    // A lookup that found nothing: the failed fill is a MISS.
    assert_eq!(seen(&request(addr, "GET", "/a", "")), (502, "MISS", true));
    assert_eq!(seen(&request(addr, "HEAD", "/a", "")), (502, "MISS", true));
    // Requests that do not use the cache: BYPASS.
    let post = request(addr, "POST", "/a", "Content-Length: 2\r\n\r\nab");
    assert_eq!(seen(&post), (502, "BYPASS", true));
    let auth = request(addr, "GET", "/a", "Authorization: Basic eDp5\r\n");
    assert_eq!(seen(&auth), (502, "BYPASS", true));
    let no_store = request(addr, "GET", "/a", "Cache-Control: no-store\r\n");
    assert_eq!(seen(&no_store), (502, "BYPASS", true));
    let options = request(addr, "OPTIONS", "/a", "");
    assert_eq!(seen(&options), (502, "BYPASS", true));
    let s = &p.stats()[0];
    let want = (2, 4);
    let seen = tests::settled(raw::WAIT, &want, || {
        (s.cache_misses.get(), s.cache_bypasses.get())
    });
    assert_eq!(seen, want);
    p.shutdown().unwrap();
}

#[test]
fn an_upstream_timeout_answers_504_miss_and_only_if_cached_504_miss() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &["--read-timeout", "300ms"], |_| {});
    assert_eq!(
        seen(&request(addr, "GET", "/h?hang", "")),
        (504, "MISS", true)
    );
    let r = request(addr, "GET", "/never", "Cache-Control: only-if-cached\r\n");
    assert_eq!(seen(&r), (504, "MISS", true));
    assert_eq!(o.requests(), 1, "only-if-cached did not reach the origin");
    p.shutdown().unwrap();
}

#[test]
fn an_expired_entry_without_stale_if_error_is_a_miss_when_the_upstream_fails() {
    let port = tests::ClosedPort::new();
    let o = Origin::start_on(OriginConfig::default(), port.addr(), 1).expect("origin");
    let (p, addr) = proxy(&[port.addr()], &[], |c| c.ttl = Duration::from_millis(300));
    assert_eq!(seen(&request(addr, "GET", "/x", "")), (200, "MISS", false));
    o.stop();
    let r = first_after_expiry(addr, "GET", "/x", "");
    assert_eq!(seen(&r), (502, "MISS", true));
    p.shutdown().unwrap();
}

#[test]
fn purge_answers_carry_bypass() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |c| {
        c.purge_from = vec![Cidr::parse("127.0.0.1").unwrap()];
    });
    let (p2, addr2) = proxy(&[o.addr()], &[], |_| {});
    assert_eq!(seen(&request(addr, "GET", "/p", "")), (200, "MISS", false));
    assert_eq!(
        seen(&request(addr, "PURGE", "/p", "")),
        (200, "BYPASS", false)
    );
    assert_eq!(
        seen(&request(addr, "PURGE", "/p", "")),
        (404, "BYPASS", false)
    );
    // Not in purge_from: 403.
    assert_eq!(
        seen(&request(addr2, "PURGE", "/p", "")),
        (403, "BYPASS", true)
    );
    p.shutdown().unwrap();
    p2.shutdown().unwrap();
}

#[test]
fn request_bodies_refused_by_the_proxy_carry_bypass() {
    let o = tests::origin();
    let (p, addr) = proxy(
        &[o.addr()],
        &["--max-body", "100", "--body-timeout", "300ms"],
        |_| {},
    );
    // Declared over --max-body: 413 before any fetch, on an unsafe method and on a GET.
    let r = request(addr, "POST", "/b", "Content-Length: 1000\r\n");
    assert_eq!(seen(&r), (413, "BYPASS", true));
    let r = request(addr, "GET", "/b", "Content-Length: 1000\r\n");
    assert_eq!(seen(&r), (413, "BYPASS", true));
    // A chunked body that grows over it while it streams: 413 too.
    let body = format!("c8\r\n{}\r\n0\r\n\r\n", "x".repeat(200));
    let head =
        format!("POST /b HTTP/1.1\r\nHost: cache.test\r\nTransfer-Encoding: chunked\r\n\r\n{body}");
    assert_eq!(
        seen(&exchange(addr, head.as_bytes(), false)),
        (413, "BYPASS", true)
    );
    // A body that stops arriving: 408.
    let r = request(addr, "POST", "/b", "Content-Length: 10\r\n\r\nab");
    assert_eq!(seen(&r), (408, "BYPASS", true));
    p.shutdown().unwrap();
}

#[test]
fn errors_before_the_route_is_known_carry_no_x_cache() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let r = exchange(
        addr,
        b"GET /a HTTP/1.1\r\nHost: cache.test\r\nBad Field\r\n\r\n",
        false,
    );
    assert_eq!(seen(&r), (400, "(none)", true));
    assert_eq!(o.requests(), 0);
    p.shutdown().unwrap();
}
