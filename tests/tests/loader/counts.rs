//! Exact counts at the end of a run: whatever ends it (`-d`, `-n`, Ctrl-C), in every mode
//! (keep-alive, `--close`, `--pipeline`, `--rate`, several URLs), every request the origin
//! received is counted exactly once by the loader, completed or failed after sending; the
//! requests in flight at the deadline are drained and recorded, not dropped. Also the send
//! lateness of `--rate` and `--spin`, and the per-URL histograms.
//!
//! The origin's request counter is the access log here: a request counts there once its head
//! arrived. Nothing asserts speed: a slow origin (200 ms a response) makes requests in flight
//! at the deadline certain, whatever the machine's load.

use crate::run;
use loader::stats::RunResult;
use loader::RunOptions;
use shared::origin::{Origin, OriginConfig};
use shared::shutdown::ShutdownFlag;
use std::time::{Duration, Instant};

fn origin_with_delay(delay: Duration) -> Origin {
    Origin::start(OriginConfig {
        delay,
        ..OriginConfig::default()
    })
    .expect("origin starts")
}

/// The binary's options with a 10 s timeout.
fn opts(urls: &[String], connections: usize) -> RunOptions {
    let mut o = crate::opts(urls, connections);
    o.timeout = Duration::from_secs(10);
    o
}

/// Every attempt ended once; with an origin that answers everything, every request it
/// received completed, and the loader's count is the origin's (`served` during this run).
fn assert_exact(r: &RunResult, served: u64, what: &str) {
    let t = &r.totals;
    assert_eq!(
        t.attempts,
        t.completed + t.failures.not_completed(),
        "{what}: {t:?}"
    );
    assert_eq!(t.failures.total(), 0, "{what}: {t:?}");
    assert_eq!(t.completed, served, "{what}: {t:?}");
    // Every completed request is in the percentiles, the drained ones included.
    assert_eq!(r.hist.total.len(), t.completed, "{what}");
    let per_url: u64 = r.urls.iter().map(|u| u.hist.len()).sum();
    assert_eq!(per_url, t.completed, "{what}");
}

#[test]
fn a_timed_run_drains_what_is_in_flight_at_the_deadline() {
    let o = origin_with_delay(Duration::from_millis(200));
    let mut opt = opts(&[o.url("/")], 20);
    opt.duration = Some(Duration::from_millis(500));
    let r = run(&opt);
    assert_exact(&r, o.requests(), "slow origin");
    // 20 connections, each waiting 200 ms per response: at the deadline every connection
    // that had started had a request in flight.
    let drain = r.drain.expect("the deadline stopped the run");
    assert!(drain.in_flight >= 1, "{drain:?}");
    assert!(drain.in_flight <= 20, "{drain:?}");
    assert_eq!(r.totals.failures.unanswered, 0);
    // The drained requests are the slow ones: they are in the figures, so the longest
    // request is at least the origin's delay.
    assert!(r.hist.total.max() >= 200_000, "{}", r.hist.total.max());
    // The load period ends at the deadline; the drain is reported apart.
    assert!(r.elapsed <= Duration::from_millis(500), "{:?}", r.elapsed);
    let text = loader::report::render(&r);
    assert!(
        text.contains(&format!(
            "In flight at the stop:  {} (drained in",
            drain.in_flight
        )),
        "{text}"
    );
    assert!(text.contains("\n   (Unanswered at end: 0)\n"), "{text}");
    let json = loader::json::run_value(&r);
    assert_eq!(json["drain"]["in_flight_at_stop"], drain.in_flight);
    assert_eq!(json["totals"]["failures"]["unanswered"], 0);
    assert_eq!(json["totals"]["unanswered"], 0);
}

#[test]
fn every_mode_counts_what_the_origin_received_exactly_once() {
    let o = origin_with_delay(Duration::from_millis(20));
    let urls = [o.url("/a"), o.url("/b?size=100"), o.url("/c?size=3000")];
    type Tweak = fn(&mut RunOptions);
    let modes: [(&str, Tweak); 6] = [
        ("keep-alive -d", |_| {}),
        ("--close -d", |o| o.close = true),
        ("--pipeline 4 -d", |o| o.pipeline = 4),
        ("--rate -d", |o| o.rate = Some(400.0)),
        ("--rate --pipeline 2 -d", |o| {
            o.rate = Some(400.0);
            o.pipeline = 2;
        }),
        ("-n with -d", |o| o.requests = Some(40)),
    ];
    for (what, tweak) in modes {
        let mut opt = opts(&urls, 6);
        opt.duration = Some(Duration::from_millis(300));
        opt.accept_variable_length = true;
        tweak(&mut opt);
        let before = o.requests();
        let r = run(&opt);
        let served = o.requests() - before;
        assert_exact(&r, served, what);
        assert!(r.totals.completed > 0, "{what}");
        // Each URL's histogram holds its own requests.
        for u in &r.urls {
            assert_eq!(u.hist.len(), u.counts.completed, "{what} {}", u.url);
        }
    }
    // -n alone: exact, no drain.
    for (what, tweak) in [
        ("-n", (|_| {}) as Tweak),
        ("-n --close", |o| o.close = true),
        ("-n --pipeline 3", |o| o.pipeline = 3),
        ("-n --rate", |o| o.rate = Some(500.0)),
    ] {
        let mut opt = opts(&urls, 4);
        opt.requests = Some(30);
        opt.accept_variable_length = true;
        tweak(&mut opt);
        let before = o.requests();
        let r = run(&opt);
        assert_exact(&r, o.requests() - before, what);
        assert_eq!((r.totals.completed, r.drain), (30, None), "{what}");
        let shares: Vec<u64> = r.urls.iter().map(|u| u.hist.len()).collect();
        assert_eq!(shares, [10, 10, 10], "{what}");
    }
}

/// A server that never answers: the requests in flight at the deadline get `--timeout`,
/// then fail (timeout, or unanswered when the drain's end comes first); the origin received
/// every one of them and the loader counts every one as failed, none dropped.
#[test]
fn unanswered_requests_at_the_end_fail_and_are_counted() {
    let o = Origin::start(OriginConfig {
        hang: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let mut opt = opts(&[o.url("/")], 3);
    opt.duration = Some(Duration::from_millis(200));
    opt.timeout = Duration::from_millis(400);
    let r = run(&opt);
    let t = &r.totals;
    let f = &t.failures;
    assert_eq!(t.completed, 0);
    assert_eq!(t.attempts, 3, "{t:?}");
    assert_eq!(f.timeout + f.unanswered, 3, "{t:?}");
    assert_eq!(o.requests(), 3);
    assert_eq!(r.drain.map(|d| d.in_flight), Some(3));
    assert_eq!(f.ab_failed(), 3);
}

/// Ctrl-C stops like the deadline: what is in flight drains and is counted.
#[test]
fn an_interrupted_run_drains_too() {
    let o = origin_with_delay(Duration::from_millis(100));
    let mut opt = opts(&[o.url("/")], 4);
    opt.duration = Some(Duration::from_secs(60));
    let flag = ShutdownFlag::new();
    let f2 = flag.clone();
    let stats = o.stats().to_vec();
    let watcher = std::thread::spawn(move || {
        // Stop once the origin has received 8 requests: an event, not a pause.
        let limit = Instant::now() + Duration::from_secs(30);
        while stats.iter().map(|s| s.requests.get()).sum::<u64>() < 8 && Instant::now() < limit {
            std::thread::sleep(Duration::from_millis(1));
        }
        f2.trigger();
    });
    let r = loader::run(&opt, flag).unwrap();
    watcher.join().unwrap();
    assert!(r.interrupted);
    assert!(r.drain.is_some());
    assert_exact(&r, o.requests(), "interrupted");
    assert!(r.totals.completed >= 8, "{:?}", r.totals);
}

#[test]
fn rate_mode_reports_send_lateness() {
    let o = origin_with_delay(Duration::ZERO);
    let mut opt = opts(&[o.url("/")], 2);
    opt.rate = Some(200.0);
    opt.duration = Some(Duration::from_millis(400));
    let r = run(&opt);
    assert_exact(&r, o.requests(), "--rate");
    // Every measured send at this rate waits for its time (the origin answers at once).
    let late = &r.hist.send_lateness;
    assert!(
        !late.is_empty() && late.len() <= r.totals.attempts,
        "{}",
        late.len()
    );
    let text = loader::report::render(&r);
    assert!(
        text.lines().any(|l| l.starts_with("Send lateness (ms")),
        "{text}"
    );
    let json = loader::json::run_value(&r);
    assert_eq!(json["rate"]["send_lateness_count"], late.len());
    assert!(json["rate"]["send_lateness_percentiles_ms"]["99"].is_number());
    // Closed loop: no schedule, no lateness.
    let mut closed = opts(&[o.url("/")], 2);
    closed.requests = Some(10);
    assert!(run(&closed).hist.send_lateness.is_empty());
}

/// `--spin`: the worker never sleeps, so every wait (send times, deadline, drain, Ctrl-C)
/// runs on the clock; the run must still end on time and count exactly.
#[test]
fn spin_paces_and_still_ends() {
    let o = origin_with_delay(Duration::from_millis(5));
    let mut opt = opts(&[o.url("/")], 3);
    opt.rate = Some(300.0);
    opt.spin = true;
    opt.duration = Some(Duration::from_millis(300));
    let r = run(&opt);
    assert!(r.spin);
    // --spin runs on epoll (see worker.rs): io_uring would never post its completions.
    assert_eq!(r.driver, shared::runtime::DriverKind::Epoll);
    assert_exact(&r, o.requests(), "--spin -d");
    assert!(r.drain.is_some());
    assert!(!r.hist.send_lateness.is_empty());
    // A spun send never leaves before its time: latency from the intended time is never
    // below the latency from the actual send.
    assert!(r.hist.total.min() >= r.hist.uncorrected.min());
    // Ctrl-C is read from its flag under --spin (the runtime's timers never fire).
    let mut long = opt.clone();
    long.duration = Some(Duration::from_secs(60));
    let flag = ShutdownFlag::new();
    let f2 = flag.clone();
    let stats = o.stats().to_vec();
    let before = o.requests();
    let watcher = std::thread::spawn(move || {
        let limit = Instant::now() + Duration::from_secs(30);
        while stats.iter().map(|s| s.requests.get()).sum::<u64>() < before + 5
            && Instant::now() < limit
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        f2.trigger();
    });
    let r = loader::run(&long, flag).unwrap();
    watcher.join().unwrap();
    assert!(r.interrupted);
    assert_exact(&r, o.requests() - before, "--spin Ctrl-C");
    // The same rule for --timeout: a hanging request fails on time under --spin too.
    let hang = Origin::start(OriginConfig {
        hang: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let mut h = opts(&[hang.url("/")], 1);
    h.rate = Some(100.0);
    h.spin = true;
    h.requests = Some(2);
    h.timeout = Duration::from_millis(200);
    let r = run(&h);
    assert_eq!(r.totals.failures.timeout, 2, "{:?}", r.totals);
    assert_eq!(hang.requests(), 2);
}

#[test]
fn spin_needs_rate() {
    let o = origin_with_delay(Duration::ZERO);
    let mut opt = opts(&[o.url("/")], 1);
    opt.spin = true;
    let err = loader::run(&opt, ShutdownFlag::new()).unwrap_err();
    assert!(err.to_string().contains("--spin"), "{err}");
    assert_eq!(err.exit_code(), 2);
}

/// Content-Length bodies longer than a head read are counted as they arrive without being
/// read (the rest of a body is dropped from the receive's buffers): every byte is counted
/// and the response behind a body (pipelined, in the same arrival) is read whole, whether
/// the connection carries one response or many.
#[test]
fn long_bodies_dropped_unread_are_counted_to_the_byte() {
    let o = origin_with_delay(Duration::ZERO);
    let sizes = [100_000u64, 3_000, 70_000, 1_024];
    let urls: Vec<String> = sizes
        .iter()
        .map(|n| o.url(&format!("/?size={n}")))
        .collect();
    type Tweak = fn(&mut RunOptions);
    for (what, tweak) in [
        ("keep-alive", (|_| {}) as Tweak),
        ("--pipeline 4", |o| o.pipeline = 4),
        ("--close", |o| o.close = true),
    ] {
        let mut opt = opts(&urls, 3);
        opt.requests = Some(40);
        opt.accept_variable_length = true;
        tweak(&mut opt);
        let before = o.requests();
        let r = run(&opt);
        assert_exact(&r, o.requests() - before, what);
        assert_eq!(r.totals.completed, 40, "{what}: {:?}", r.totals);
        let per_url: u64 = sizes.iter().sum();
        assert_eq!(r.totals.body_bytes, 10 * per_url, "{what}: {:?}", r.totals);
    }
}
