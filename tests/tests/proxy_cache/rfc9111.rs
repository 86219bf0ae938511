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
