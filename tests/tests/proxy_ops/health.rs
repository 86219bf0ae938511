//! Passive health checks (`max_fails` / `fail_timeout`, as `proxy.example.toml` promises):
//! a read timeout and a close before the answer count as failures; with `max_fails` above 1
//! a server is skipped only after that many; when every server is down they are tried
//! anyway, so service comes back as soon as they do; and each worker counts its own failures.
//!
//! With one worker the balancer's choices are deterministic (round-robin starts at the
//! first server); the two-worker test asserts bounds that hold whichever worker the kernel
//! hands each connection to. `fail_timeout` is long everywhere, so no window can expire
//! during a test on a slow machine.

use tests::ClosedPort;

use shared::origin::{Origin, OriginConfig};
use std::sync::atomic::Ordering;
use tests::raw::{assert_generated, get, Client, WAIT};
use tests::strict::{proxy, response, serve_ok};

/// An origin whose every request is answered by `cfg`'s behaviour (hang, drop, reset).
fn bad_origin(cfg: OriginConfig) -> Origin {
    Origin::start(cfg).expect("origin starts")
}

fn good_origin() -> Origin {
    tests::origin()
}

/// One GET on a fresh connection; the response, parsed.
fn one_get(addr: std::net::SocketAddr, path: &str) -> tests::raw::Response {
    let mut c = Client::connect(addr);
    c.send(&get(path)).expect("send");
    response(&mut c, path)
}

/// A proxy error answer on a fresh connection: the status, generated, and a close.
fn one_error(addr: std::net::SocketAddr, status: u16) {
    let mut c = Client::connect(addr);
    c.send(&get("/")).expect("send");
    let reply = c.until_close(WAIT);
    assert_generated(&reply, status, true);
}

#[test]
fn a_read_timeout_counts_as_a_failure() {
    let silent = bad_origin(OriginConfig {
        hang: true,
        ..OriginConfig::default()
    });
    let good = good_origin();
    let (p, addr) = proxy(
        &[silent.addr(), good.addr()],
        &[
            "--read-timeout",
            "300ms",
            "--max-fails",
            "1",
            "--fail-timeout",
            "60s",
        ],
    );
    // Round-robin starts with the first server: it never answers, 504.
    one_error(addr, 504);
    assert_eq!(silent.requests(), 1);
    for i in 0..6 {
        let r = one_get(addr, "/?size=1");
        assert_eq!(
            (r.status, r.is_pattern(1)),
            (200, true),
            "request {i}: {r:?}"
        );
    }
    assert_eq!(silent.requests(), 1, "the timed-out server was not skipped");
    assert_eq!(good.requests(), 6);
    p.shutdown().expect("clean shutdown");
}

/// `drop` closes with FIN, `reset` with RST, both after reading the request: the GET is
/// retried on the other server (nothing was answered) and the first is skipped afterwards.
#[test]
fn a_close_before_the_answer_counts_as_a_failure() {
    for (what, cfg) in [
        (
            "close",
            OriginConfig {
                drop: true,
                ..OriginConfig::default()
            },
        ),
        (
            "reset",
            OriginConfig {
                reset: true,
                ..OriginConfig::default()
            },
        ),
    ] {
        let closing = bad_origin(cfg);
        let good = good_origin();
        let (p, addr) = proxy(
            &[closing.addr(), good.addr()],
            &["--max-fails", "1", "--fail-timeout", "60s"],
        );
        for i in 0..6 {
            let r = one_get(addr, "/?size=1");
            assert_eq!(
                (r.status, r.is_pattern(1)),
                (200, true),
                "{what} {i}: {r:?}"
            );
        }
        assert_eq!(closing.requests(), 1, "{what}: the server was not skipped");
        assert_eq!(good.requests(), 6, "{what}");
        p.shutdown().expect("clean shutdown");
    }
}

#[test]
fn max_fails_above_one_skips_only_after_that_many() {
    let closing = bad_origin(OriginConfig {
        drop: true,
        ..OriginConfig::default()
    });
    let good = good_origin();
    let (p, addr) = proxy(
        &[closing.addr(), good.addr()],
        &["--max-fails", "3", "--fail-timeout", "60s"],
    );
    for i in 0..20 {
        let r = one_get(addr, "/?size=1");
        assert_eq!(
            (r.status, r.is_pattern(1)),
            (200, true),
            "request {i}: {r:?}"
        );
    }
    // Round-robin comes back to the failing server until its third failure, then never.
    assert_eq!(closing.requests(), 3);
    assert_eq!(good.requests(), 20);
    p.shutdown().expect("clean shutdown");
}

#[test]
fn every_server_down_then_recovering() {
    // Two ports kept dead by sockets bound without listen for the whole outage.
    let (a, b) = (ClosedPort::new(), ClosedPort::new());
    let (p, addr) = proxy(
        &[a.addr(), b.addr()],
        &["--max-fails", "1", "--fail-timeout", "60s"],
    );
    // Both refused: 502, and both are now marked failed for 60 s.
    one_error(addr, 502);
    // Every server failed: they are tried anyway (still down: 502 again, not a refusal
    // without trying; the next step shows they are really tried).
    one_error(addr, 502);
    // They come back, long before fail_timeout: served at once.
    let (served_a, served_b) = (serve_ok(a.revive()), serve_ok(b.revive()));
    for i in 0..4 {
        let r = one_get(addr, "/");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"ok"[..]),
            "request {i}: {r:?}"
        );
    }
    assert_eq!(
        served_a.load(Ordering::SeqCst) + served_b.load(Ordering::SeqCst),
        4
    );
    p.shutdown().expect("clean shutdown");
}

/// Two workers, each with its own failure count, whatever the kernel's spread: round-robin
/// over two servers comes back to the failing one at least every other request until it is
/// skipped, so a worker that served `r` requests sent it `min(max_fails, ceil(r / 2))` at
/// least and `min(max_fails, r)` at most. When both workers served 3 or more, that is
/// `max_fails` from each: twice what one shared count would allow.
#[test]
fn failures_are_counted_per_worker() {
    const MAX_FAILS: u64 = 2;
    const REQUESTS: u64 = 24;
    let closing = bad_origin(OriginConfig {
        drop: true,
        ..OriginConfig::default()
    });
    let good = good_origin();
    let (p, addr) = proxy(
        &[closing.addr(), good.addr()],
        &[
            "--workers",
            "2",
            "--max-fails",
            "2",
            "--fail-timeout",
            "60s",
        ],
    );
    for i in 0..REQUESTS {
        let r = one_get(addr, "/?size=1");
        assert_eq!(
            (r.status, r.is_pattern(1)),
            (200, true),
            "request {i}: {r:?}"
        );
    }
    // Counted as each request ends, right after its response went out.
    let per_worker =
        |p: &proxy::Running| -> Vec<u64> { p.stats().iter().map(|s| s.requests.get()).collect() };
    tests::eventually(WAIT, || per_worker(&p).iter().sum::<u64>() == REQUESTS);
    let per_worker = per_worker(&p);
    p.shutdown().expect("clean shutdown");
    assert_eq!(per_worker.iter().sum::<u64>(), REQUESTS, "{per_worker:?}");
    let least: u64 = per_worker
        .iter()
        .map(|&n| n.div_ceil(2).min(MAX_FAILS))
        .sum();
    let most: u64 = per_worker.iter().map(|&n| n.min(MAX_FAILS)).sum();
    let fails = closing.requests();
    assert!(
        (least..=most).contains(&fails),
        "{fails} requests reached the failing server; per-worker requests {per_worker:?}"
    );
    // Every request was answered by the good server (a failure is retried there).
    assert_eq!(good.requests(), REQUESTS);
}
