//! Active health checks (`health = { ... }` on a group), end to end with real origins whose
//! `/healthz` a test switches between 200 and 500 (`shared::origin::switch`): a server leaves
//! rotation after `fall` failed checks and comes back after `rise` passed ones, on every
//! worker; a check that times out fails; a group with every server down answers 502 at once;
//! passive max_fails works alongside.
//!
//! Readiness is the workers' `health_changes` counter (every worker counts each change it
//! applied), never a sleep. Traffic goes to `/x`; origins capture every request, so the
//! counts of `/x` requests per server are exact. Intervals are sub-second, timeouts as long
//! as the interval: a healthy origin on a loaded machine does not miss `fall` checks in a row.

use crate::health_origin::{hits, switched, switched_origin, traffic};
use shared::origin::OriginConfig;
use std::net::SocketAddr;
use tests::raw::{assert_generated, get, Client, WAIT};
use tests::strict::{wait_for, READY};

/// The checks every test here uses unless it says otherwise.
const CHECK: &str =
    r#"path = "/healthz", interval = "400ms", timeout = "400ms", rise = 2, fall = 3, expect = 200"#;

/// A proxy with one group `app` of `servers` and `health = { <check> }` (`extra` is added to
/// the group), `workers` workers.
fn proxy(servers: &[SocketAddr], check: &str, extra: &str, workers: usize) -> proxy::Running {
    let list: Vec<String> = servers.iter().map(|a| format!("\"{a}\"")).collect();
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = {workers}\npin = false\n\
         [upstream.app]\nservers = [{}]\nhealth = {{ {check} }}\n{extra}",
        list.join(", ")
    );
    let cfg = proxy::config::from_toml("health-test.toml", &text).expect("config");
    proxy::start(cfg).expect("proxy starts")
}

/// Wait until every worker has applied exactly `n` health changes.
fn wait_changes(p: &proxy::Running, n: u64, what: &str) {
    wait_for(READY, what, || {
        p.stats().iter().all(|s| s.health_changes.get() >= n)
    });
    let seen: Vec<u64> = p.stats().iter().map(|s| s.health_changes.get()).collect();
    assert!(
        seen.iter().all(|&c| c == n),
        "{what}: changes per worker {seen:?}, want {n}"
    );
}

#[test]
fn fall_takes_a_server_out_and_rise_brings_it_back() {
    let (a, a_health) = switched_origin();
    let (b, _b_health) = switched_origin();
    let p = proxy(&[a.addr(), b.addr()], CHECK, "", 1);
    let addr = p.listen_addrs()[0];
    // Both up: round-robin, one each in turn.
    traffic(addr, 4);
    assert_eq!((hits(&a, "/x"), hits(&b, "/x")), (2, 2));

    a_health.set(500);
    let probes_before = hits(&a, "/healthz");
    wait_changes(&p, 1, "a going down");
    // It took `fall` failed checks (at least 3 since the switch; one may have been in flight).
    assert!(
        hits(&a, "/healthz") >= probes_before + 2,
        "a went down after {} checks",
        hits(&a, "/healthz") - probes_before
    );
    traffic(addr, 10);
    assert_eq!(
        (hits(&a, "/x"), hits(&b, "/x")),
        (2, 12),
        "b takes everything"
    );

    a_health.set(200);
    wait_changes(&p, 2, "a coming back");
    traffic(addr, 10);
    assert_eq!((hits(&a, "/x"), hits(&b, "/x")), (7, 17), "shared again");
    // Checks carry the server's name as Host, on a connection that closes.
    let probe = a
        .captured()
        .into_iter()
        .find(|r| r.starts_with(b"GET /healthz "))
        .expect("a probe");
    let probe = String::from_utf8_lossy(&probe).into_owned();
    assert!(
        probe.contains(&format!("\r\nHost: {}\r\n", a.addr())),
        "{probe}"
    );
    assert!(probe.contains("\r\nConnection: close\r\n"), "{probe}");
    p.shutdown().unwrap();
}

#[test]
fn every_worker_follows_the_checking_worker() {
    let (a, a_health) = switched_origin();
    let (b, _b_health) = switched_origin();
    let p = proxy(&[a.addr(), b.addr()], CHECK, "", 2);
    let addr = p.listen_addrs()[0];
    let served =
        |p: &proxy::Running| -> Vec<u64> { p.stats().iter().map(|s| s.requests.get()).collect() };

    a_health.set(500);
    wait_changes(&p, 1, "a going down on both workers");
    let before = served(&p);
    // Fresh connections: the kernel spreads them over both workers.
    for _ in 0..24 {
        traffic(addr, 1);
    }
    // Counted as each request ends, right after its response went out.
    let more = |after: &Vec<u64>| before.iter().zip(after).all(|(b, a)| a > b);
    tests::eventually(WAIT, || more(&served(&p)));
    let after = served(&p);
    assert!(
        more(&after),
        "both workers served some: {before:?} -> {after:?}"
    );
    assert_eq!(
        (hits(&a, "/x"), hits(&b, "/x")),
        (0, 24),
        "no worker sent any to a"
    );

    a_health.set(200);
    wait_changes(&p, 2, "a coming back on both workers");
    for _ in 0..24 {
        traffic(addr, 1);
    }
    // Each worker alternates on its own: a gets half of each worker's share, give or take one.
    let back = hits(&a, "/x");
    assert!((11..=13).contains(&back), "a got {back} of 24");
    assert_eq!(hits(&b, "/x"), 24 + 24 - back);
    p.shutdown().unwrap();
}

#[test]
fn a_check_that_times_out_fails() {
    // Accepts, reads the check, never answers.
    let (silent, _) = switched(OriginConfig {
        hang: true,
        ..OriginConfig::default()
    });
    let (b, _b_health) = switched_origin();
    let check = r#"path = "/healthz", interval = "400ms", timeout = "300ms", rise = 2, fall = 2"#;
    let p = proxy(&[silent.addr(), b.addr()], check, "", 1);
    wait_changes(&p, 1, "the silent server going down");
    assert!(hits(&silent, "/healthz") >= 2);
    traffic(p.listen_addrs()[0], 6);
    assert_eq!((hits(&silent, "/x"), hits(&b, "/x")), (0, 6));
    p.shutdown().unwrap();
}

#[test]
fn every_server_down_answers_502_at_once() {
    let (a, a_health) = switched_origin();
    let (b, b_health) = switched_origin();
    let p = proxy(&[a.addr(), b.addr()], CHECK, "", 1);
    let addr = p.listen_addrs()[0];
    a_health.set(500);
    b_health.set(503);
    wait_changes(&p, 2, "both going down");
    for _ in 0..3 {
        let mut c = Client::connect(addr);
        c.send(&get("/x")).expect("send");
        let reply = c.until_close(WAIT);
        assert_generated(&reply, 502, true);
    }
    assert_eq!((hits(&a, "/x"), hits(&b, "/x")), (0, 0), "nobody was asked");
    b_health.set(200);
    wait_changes(&p, 3, "b coming back");
    traffic(addr, 3);
    assert_eq!((hits(&a, "/x"), hits(&b, "/x")), (0, 3));
    p.shutdown().unwrap();
}

#[test]
fn passive_marks_work_alongside_active_checks() {
    // `a` drops every request (a passive failure, retried on `b`) but passes its checks:
    // `/healthz?drop=0` turns the drop off for the check alone.
    let (a, _a_health) = switched(OriginConfig {
        drop: true,
        ..OriginConfig::default()
    });
    let (b, b_health) = switched_origin();
    let check =
        r#"path = "/healthz?drop=0", interval = "400ms", timeout = "400ms", rise = 2, fall = 3"#;
    let p = proxy(&[a.addr(), b.addr()], check, "", 1);
    let addr = p.listen_addrs()[0];
    // a's checks pass (several of them, so a verdict would have been reached by now).
    wait_for(READY, "a's checks", || hits(&a, "/healthz") >= 4);
    // Round-robin starts with a: it drops, the request is retried on b; then a is skipped
    // passively (max_fails 1, fail_timeout 10s) while its checks keep passing.
    traffic(addr, 6);
    assert_eq!((hits(&a, "/x"), hits(&b, "/x")), (1, 6));
    assert_eq!(
        p.stats()[0].health_changes.get(),
        0,
        "a stays up by its checks"
    );

    // b down by checks: a, failed passively, is the only live server and is tried anyway;
    // b is never the fallback. a drops again: 502.
    b_health.set(500);
    wait_changes(&p, 1, "b going down");
    let mut c = Client::connect(addr);
    c.send(&get("/x")).expect("send");
    assert_generated(&c.until_close(WAIT), 502, true);
    assert_eq!((hits(&a, "/x"), hits(&b, "/x")), (2, 6));

    // b back: b takes the traffic, a still skipped passively.
    b_health.set(200);
    wait_changes(&p, 2, "b coming back");
    traffic(addr, 4);
    assert_eq!((hits(&a, "/x"), hits(&b, "/x")), (2, 10));
    p.shutdown().unwrap();
}

/// A check's answer with more fields than 64 (80: under `[limits] max_headers`, 100 by
/// default, which a request's answer may have too) passes: the server stays up and serves.
/// With `fall = 2`, two checks read as invalid would have taken it out before the fourth was
/// sent (each check's verdict comes before the next is sent).
#[test]
fn a_check_answer_with_as_many_fields_as_max_headers_allows_passes() {
    let headers = (0..80)
        .map(|i| (format!("X-H{i}"), "v".to_string()))
        .collect();
    let (o, _health) = crate::health_origin::switched(OriginConfig {
        headers,
        ..OriginConfig::default()
    });
    let check = r#"path = "/healthz", interval = "200ms", timeout = "200ms", rise = 1, fall = 2, expect = 200"#;
    let p = proxy(&[o.addr()], check, "", 1);
    wait_for(READY, "four checks", || hits(&o, "/healthz") >= 4);
    let changes: Vec<u64> = p.stats().iter().map(|s| s.health_changes.get()).collect();
    assert_eq!(changes, [0], "the server was taken out");
    traffic(p.listen_addrs()[0], 1);
    p.shutdown().unwrap();
}
