use super::*;
use crate::config::Server;

fn group(balance: Balance, weights: &[u32]) -> UpstreamGroup {
    UpstreamGroup {
        name: "g".into(),
        servers: weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| Server {
                name: format!("s{i}"),
                host: format!("s{i}"),
                addrs: vec![([127, 0, 0, 1], 9000 + i as u16).into()],
                weight,
                max_fails: 1,
                fail_timeout: Duration::from_secs(10),
                max_conns: 0,
            })
            .collect(),
        balance,
        hash_key: Default::default(),
        resolve: None,
        keepalive: 0,
        keepalive_timeout: Duration::from_secs(30),
        keepalive_requests: 100,
        keepalive_check: Duration::from_secs(1),
        health: None,
        tls: None,
        proxy_protocol: None,
    }
}

fn sid(i: usize) -> ServerId {
    ServerId::new(i)
}

/// `Balancer::pick` with the tried servers and the pick as positions.
fn pick(b: &mut Balancer, tried: &[usize], now: Instant) -> Option<usize> {
    let tried: Vec<ServerId> = tried.iter().copied().map(sid).collect();
    b.pick(&tried, now).map(ServerId::index)
}

fn picks(b: &mut Balancer, n: usize, now: Instant) -> Vec<usize> {
    (0..n).map(|_| pick(b, &[], now).unwrap()).collect()
}

fn counts(seq: &[usize], servers: usize) -> Vec<usize> {
    let mut c = vec![0; servers];
    seq.iter().for_each(|&i| c[i] += 1);
    c
}

#[test]
fn smooth_round_robin_is_nginx_sequence() {
    let mut b = Balancer::new(&group(Balance::RoundRobin, &[5, 1, 1]), 0, 1);
    let now = Instant::now();
    // nginx: a a b a c a a, then the cycle repeats.
    assert_eq!(
        picks(&mut b, 14, now),
        [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]
    );
    let mut b = Balancer::new(&group(Balance::RoundRobin, &[1, 1]), 0, 1);
    assert_eq!(picks(&mut b, 4, now), [0, 1, 0, 1]);
}

#[test]
fn round_robin_exact_proportions() {
    let mut b = Balancer::new(&group(Balance::RoundRobin, &[3, 2, 1]), 0, 1);
    let seq = picks(&mut b, 6000, Instant::now());
    assert_eq!(counts(&seq, 3), [3000, 2000, 1000]);
}

#[test]
fn tried_servers_are_excluded() {
    let now = Instant::now();
    for balance in [Balance::RoundRobin, Balance::LeastConn, Balance::Random2] {
        let mut b = Balancer::new(&group(balance, &[1, 1, 1]), 7, 1);
        for _ in 0..50 {
            assert_eq!(pick(&mut b, &[0, 2], now), Some(1), "{balance:?}");
            let p = pick(&mut b, &[1], now).unwrap();
            assert!(p == 0 || p == 2, "{balance:?}");
        }
        assert_eq!(pick(&mut b, &[0, 1, 2], now), None, "{balance:?}");
        assert_eq!(pick(&mut b, &[2, 1, 0], now), None, "{balance:?}");
    }
    let mut empty = Balancer::new(&group(Balance::RoundRobin, &[]), 0, 1);
    assert_eq!(pick(&mut empty, &[], now), None);
}

#[test]
fn least_conn_follows_active_counts() {
    let now = Instant::now();
    let mut b = Balancer::new(&group(Balance::LeastConn, &[1, 1, 1]), 0, 1);
    b.started(sid(0));
    b.started(sid(0));
    b.started(sid(1));
    // 2, 1, 0 active: server 2.
    assert_eq!(pick(&mut b, &[], now), Some(2));
    b.started(sid(2));
    b.started(sid(2));
    // 2, 1, 2: server 1.
    assert_eq!(pick(&mut b, &[], now), Some(1));
    b.finished(sid(0));
    b.finished(sid(0));
    assert_eq!(pick(&mut b, &[], now), Some(0));
    // Ties are shared round-robin.
    let mut b = Balancer::new(&group(Balance::LeastConn, &[1, 1, 1]), 0, 1);
    assert_eq!(picks(&mut b, 6, now), [0, 1, 2, 0, 1, 2]);
    // A request that starts and finishes each time: all tie, weights respected.
    let mut b = Balancer::new(&group(Balance::LeastConn, &[2, 1]), 0, 1);
    let seq = picks(&mut b, 300, now);
    assert_eq!(counts(&seq, 2), [200, 100]);
    // Weighted: 4 active on weight 4 is as loaded as 1 active on weight 1.
    let mut b = Balancer::new(&group(Balance::LeastConn, &[4, 1]), 0, 1);
    for _ in 0..4 {
        b.started(sid(0));
    }
    b.started(sid(1));
    assert_eq!(
        pick(&mut b, &[], now),
        Some(0),
        "tie broken by smooth round-robin"
    );
    b.started(sid(0));
    assert_eq!(pick(&mut b, &[], now), Some(1));
    b.finished(sid(1));
    b.finished(sid(1)); // saturates at zero
    assert_eq!(b.active(sid(1)), 0);
}

#[test]
fn least_conn_keeps_loads_level() {
    // Requests that never finish: picks spread by weight.
    let now = Instant::now();
    let mut b = Balancer::new(&group(Balance::LeastConn, &[3, 1]), 0, 1);
    for _ in 0..400 {
        let s = pick(&mut b, &[], now).unwrap();
        b.started(sid(s));
    }
    assert_eq!((b.active(sid(0)), b.active(sid(1))), (300, 100));
}

#[test]
fn random2_respects_weights_and_load() {
    let now = Instant::now();
    let mut b = Balancer::new(&group(Balance::Random2, &[3, 1]), 42, 1);
    let seq = picks(&mut b, 40_000, now);
    let c = counts(&seq, 2);
    // Two servers: each pick compares both (ties keep the first draw, weighted 3:1).
    assert!((29_000..31_000).contains(&c[0]), "{c:?}");
    // With load, the less loaded of the two wins.
    let mut b = Balancer::new(&group(Balance::Random2, &[1, 1]), 1, 1);
    b.started(sid(0));
    for _ in 0..20 {
        assert_eq!(pick(&mut b, &[], now), Some(1));
    }
    // Requests that never finish stay balanced.
    let mut b = Balancer::new(&group(Balance::Random2, &[1, 1, 1, 1]), 3, 1);
    for _ in 0..4000 {
        let s = pick(&mut b, &[], now).unwrap();
        b.started(sid(s));
    }
    for i in 0..4 {
        assert!(
            (900..1100).contains(&b.active(sid(i))),
            "{i}: {}",
            b.active(sid(i))
        );
    }
    // Different seeds, different sequences.
    let mut x = Balancer::new(&group(Balance::Random2, &[1; 8]), 1, 1);
    let mut y = Balancer::new(&group(Balance::Random2, &[1; 8]), 2, 1);
    assert_ne!(picks(&mut x, 32, now), picks(&mut y, 32, now));
}

#[test]
fn failed_server_skipped_then_retried_after_fail_timeout() {
    let t0 = Instant::now();
    for balance in [Balance::RoundRobin, Balance::LeastConn, Balance::Random2] {
        let mut b = Balancer::new(&group(balance, &[1, 1]), 5, 1);
        b.failed(sid(0), t0);
        assert!(b.is_down(sid(0), t0));
        for _ in 0..20 {
            assert_eq!(
                pick(&mut b, &[], t0 + Duration::from_secs(9)),
                Some(1),
                "{balance:?}"
            );
        }
        // After fail_timeout it is tried again ...
        let later = t0 + Duration::from_secs(10);
        assert!(!b.is_down(sid(0), later));
        let seq: Vec<_> = (0..20).map(|_| pick(&mut b, &[], later).unwrap()).collect();
        assert!(seq.contains(&0), "{balance:?} {seq:?}");
        // ... and a success clears it.
        b.failed(sid(0), later);
        assert!(b.is_down(sid(0), later));
        b.succeeded(sid(0));
        assert!(!b.is_down(sid(0), later));
    }
}

#[test]
fn max_fails_counts_within_the_window() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1, 1]);
    g.servers[sid(0)].max_fails = 3;
    g.servers[sid(1)].max_fails = 0;
    let mut b = Balancer::new(&g, 0, 1);
    b.failed(sid(0), t0);
    b.failed(sid(0), t0 + Duration::from_secs(1));
    assert!(!b.is_down(sid(0), t0 + Duration::from_secs(1)));
    // The window (fail_timeout, 10 s) ran out: counting starts over.
    b.failed(sid(0), t0 + Duration::from_secs(11));
    assert!(!b.is_down(sid(0), t0 + Duration::from_secs(11)));
    b.failed(sid(0), t0 + Duration::from_secs(12));
    b.failed(sid(0), t0 + Duration::from_secs(13));
    assert!(b.is_down(sid(0), t0 + Duration::from_secs(13)));
    assert!(b.is_down(sid(0), t0 + Duration::from_secs(22)));
    assert!(!b.is_down(sid(0), t0 + Duration::from_secs(23)));
    // max_fails = 0: never marked.
    for _ in 0..100 {
        b.failed(sid(1), t0);
    }
    assert!(!b.is_down(sid(1), t0));
    // A success resets the count.
    b.failed(sid(0), t0 + Duration::from_secs(30));
    b.failed(sid(0), t0 + Duration::from_secs(30));
    b.succeeded(sid(0));
    b.failed(sid(0), t0 + Duration::from_secs(31));
    assert!(!b.is_down(sid(0), t0 + Duration::from_secs(31)));
}

#[test]
fn all_failed_still_picks() {
    let t0 = Instant::now();
    for balance in [Balance::RoundRobin, Balance::LeastConn, Balance::Random2] {
        let mut b = Balancer::new(&group(balance, &[1, 1, 1]), 9, 1);
        for i in 0..3 {
            b.failed(sid(i), t0);
        }
        let seq: Vec<_> = (0..30).map(|_| pick(&mut b, &[], t0).unwrap()).collect();
        assert_eq!(
            counts(&seq, 3).iter().filter(|&&c| c > 0).count(),
            3,
            "{balance:?}"
        );
        // A failed untried server still beats nothing; all tried is None.
        assert_eq!(pick(&mut b, &[0, 1], t0), Some(2), "{balance:?}");
        assert_eq!(pick(&mut b, &[0, 1, 2], t0), None, "{balance:?}");
        // One healthy one left among the untried: only it.
        b.succeeded(sid(1));
        for _ in 0..10 {
            assert_eq!(pick(&mut b, &[], t0), Some(1), "{balance:?}");
        }
        // The healthy one was tried: the failed ones are tried anyway.
        let p = pick(&mut b, &[1], t0).unwrap();
        assert!(p == 0 || p == 2, "{balance:?}");
    }
}

fn checked_group(balance: Balance, weights: &[u32]) -> UpstreamGroup {
    UpstreamGroup {
        health: Some(crate::config::health::HealthCheck::default()),
        ..group(balance, weights)
    }
}

#[test]
fn health_follows_the_group() {
    let b = Balancer::new(&group(Balance::RoundRobin, &[1, 1]), 0, 1);
    assert_eq!(b.health(sid(0)), Health::Unchecked);
    let mut b = Balancer::new(&checked_group(Balance::RoundRobin, &[1, 1]), 0, 1);
    assert_eq!(
        (b.health(sid(0)), b.health(sid(1))),
        (Health::Up, Health::Up)
    );
    assert_eq!(b.health(sid(7)), Health::Unchecked);
    b.set_health(sid(1), Health::Down);
    assert_eq!(
        (b.health(sid(0)), b.health(sid(1))),
        (Health::Up, Health::Down)
    );
    b.set_health(sid(9), Health::Down); // out of range: nothing
}

#[test]
fn down_servers_are_never_picked() {
    let t0 = Instant::now();
    for balance in [Balance::RoundRobin, Balance::LeastConn, Balance::Random2] {
        let mut b = Balancer::new(&checked_group(balance, &[1, 5, 1]), 3, 1);
        b.set_health(sid(1), Health::Down);
        let seq = picks(&mut b, 60, t0);
        assert_eq!(counts(&seq, 3)[1], 0, "{balance:?}");
        assert!(
            counts(&seq, 3)[0] > 0 && counts(&seq, 3)[2] > 0,
            "{balance:?}"
        );
        // Down beats "every other one is failed": the failed one is tried, never the down.
        b.failed(sid(0), t0);
        b.failed(sid(2), t0);
        let seq = picks(&mut b, 30, t0);
        assert_eq!(counts(&seq, 3)[1], 0, "{balance:?}");
        // Every server down: no live upstream.
        b.set_health(sid(0), Health::Down);
        b.set_health(sid(2), Health::Down);
        assert_eq!(pick(&mut b, &[], t0), None, "{balance:?}");
        // One back: only it, its passive mark cleared by coming up.
        b.set_health(sid(2), Health::Up);
        assert!(!b.is_down(sid(2), t0), "{balance:?}");
        for _ in 0..10 {
            assert_eq!(pick(&mut b, &[], t0), Some(2), "{balance:?}");
        }
        assert_eq!(pick(&mut b, &[2], t0), None, "{balance:?}");
    }
}

#[test]
fn passive_marks_apply_among_the_live() {
    let t0 = Instant::now();
    let mut b = Balancer::new(&checked_group(Balance::RoundRobin, &[1, 1, 1]), 0, 1);
    b.set_health(sid(0), Health::Down);
    b.failed(sid(1), t0);
    // Up by checks, failed passively: skipped while another live one is fine.
    for _ in 0..10 {
        assert_eq!(pick(&mut b, &[], t0), Some(2));
    }
    // Staying up (no transition) leaves the passive mark alone.
    b.set_health(sid(1), Health::Up);
    assert!(b.is_down(sid(1), t0));
    assert_eq!(
        pick(&mut b, &[2], t0),
        Some(1),
        "failed but live beats nothing"
    );
}

/// `pick_for` with a key, the tried servers and the pick as positions.
fn pick_key(b: &mut Balancer, key: &str, tried: &[usize], now: Instant) -> Option<usize> {
    let tried: Vec<ServerId> = tried.iter().copied().map(sid).collect();
    let k = ring::hash_key(key.as_bytes());
    b.pick_for(k, &tried, now).map(ServerId::index)
}

#[test]
fn hash_keeps_a_key_on_its_server_and_walks_the_ring_past_unusable_ones() {
    let t0 = Instant::now();
    let mut b = Balancer::new(&checked_group(Balance::Hash, &[1, 1, 1, 1]), 0, 1);
    let keys: Vec<String> = (0..400).map(|i| format!("/k{i}")).collect();
    let home: Vec<usize> = keys
        .iter()
        .map(|k| pick_key(&mut b, k, &[], t0).unwrap())
        .collect();
    // The same key, the same server; every server has keys.
    for (k, h) in keys.iter().zip(&home) {
        assert_eq!(pick_key(&mut b, k, &[], t0), Some(*h), "{k}");
    }
    assert_eq!(counts(&home, 4).iter().filter(|&&c| c > 0).count(), 4);
    // A retry goes on along the ring: another server, the same one for every retry of a key.
    for (k, h) in keys.iter().zip(&home) {
        let next = pick_key(&mut b, k, &[*h], t0).unwrap();
        assert_ne!(next, *h);
        assert_eq!(pick_key(&mut b, k, &[*h], t0), Some(next));
    }
    // Server 2 down by checks: its keys go elsewhere (where their retries went), the
    // others stay; back up, they all come back.
    let retry: Vec<usize> = keys
        .iter()
        .zip(&home)
        .map(|(k, h)| pick_key(&mut b, k, &[*h], t0).unwrap())
        .collect();
    b.set_health(sid(2), Health::Down);
    for i in 0..keys.len() {
        let now = pick_key(&mut b, &keys[i], &[], t0).unwrap();
        let want = if home[i] == 2 { retry[i] } else { home[i] };
        assert_eq!(now, want, "{}", keys[i]);
    }
    // Passively failed: skipped the same way while another is fine.
    b.failed(sid(0), t0);
    for k in &keys {
        let now = pick_key(&mut b, k, &[], t0).unwrap();
        assert!(now != 0 && now != 2, "{k}");
    }
    b.succeeded(sid(0));
    b.set_health(sid(2), Health::Up);
    for (k, h) in keys.iter().zip(&home) {
        assert_eq!(pick_key(&mut b, k, &[], t0), Some(*h), "{k}");
    }
    // Every server tried or down: none.
    assert_eq!(pick_key(&mut b, "/k1", &[0, 1, 2, 3], t0), None);
    for i in 0..4 {
        b.set_health(sid(i), Health::Down);
    }
    assert_eq!(pick_key(&mut b, "/k1", &[], t0), None);
}

fn capped(balance: Balance, max_conns: &[u32]) -> UpstreamGroup {
    let mut g = group(balance, &vec![1; max_conns.len()]);
    for (s, &m) in g.servers.iter_mut().zip(max_conns) {
        s.max_conns = m;
    }
    g
}

#[test]
fn max_conns_is_shared_among_workers_and_never_below_one() {
    assert_eq!(queue::per_worker(0, 4), 0);
    assert_eq!(queue::per_worker(100, 4), 25);
    assert_eq!(queue::per_worker(10, 4), 2);
    assert_eq!(queue::per_worker(3, 4), 1);
    assert_eq!(queue::per_worker(7, 0), 7);
}

#[test]
fn a_server_at_its_max_conns_is_passed_over_and_when_all_are_the_request_queues() {
    let now = Instant::now();
    for balance in [
        Balance::RoundRobin,
        Balance::LeastConn,
        Balance::Random2,
        Balance::Hash,
    ] {
        // Two workers share max_conns 4 and 2: 2 and 1 here; the third server has no limit
        // but is tried already.
        let mut b = Balancer::new(&capped(balance, &[4, 2, 0]), 1, 2);
        let tried = [sid(2)];
        let mut on = [0; 3];
        for _ in 0..3 {
            let Room::Server(s) = b.pick_room(7, &tried, now, false) else {
                panic!("{balance:?}: room expected while under the caps");
            };
            b.started(s);
            on[s.index()] += 1;
        }
        assert_eq!(on, [2, 1, 0], "{balance:?}");
        assert_eq!(
            b.pick_room(7, &tried, now, false),
            Room::Full,
            "{balance:?}"
        );
        assert_eq!(b.pick_for(7, &tried, now), None, "{balance:?}");
        // The uncapped one has room; nothing left at all is `None`, not `Full`.
        assert_eq!(b.pick_room(7, &[], now, false), Room::Server(sid(2)));
        let all = [sid(0), sid(1), sid(2)];
        assert_eq!(b.pick_room(7, &all, now, false), Room::None, "{balance:?}");
        assert!(b.has_candidate(&tried, now));
        b.finished(sid(1));
        assert_eq!(b.pick_room(7, &tried, now, false), Room::Server(sid(1)));
    }
}

#[test]
fn waiters_are_woken_one_per_finished_request_in_order_and_newcomers_queue_behind_them() {
    let now = Instant::now();
    let mut b = Balancer::new(&capped(Balance::RoundRobin, &[1]), 0, 1);
    let Room::Server(s) = b.pick_room(0, &[], now, false) else {
        panic!("room expected");
    };
    b.started(s);
    let waker = std::task::Waker::noop();
    let first = b.queue().join();
    let second = b.queue().join();
    assert!(!first.woken(waker) && !second.woken(waker));
    b.finished(s);
    assert!(first.woken(waker), "the oldest waiter is woken");
    assert!(!second.woken(waker), "one wake per finished request");
    // The room is the woken waiter's: a newcomer queues behind the others.
    assert_eq!(b.pick_room(0, &[], now, false), Room::Full);
    assert_eq!(b.pick_room(0, &[], now, true), Room::Server(s));
    b.queue().leave(&first, true);
    b.started(s);
    assert!(!second.woken(waker), "a used wake is not passed on");
    // A woken waiter that cannot use the room passes the wake on; one leaving unserved
    // passes its wake on too.
    let third = b.queue().join();
    b.finished(s);
    assert!(second.woken(waker));
    b.queue().pass_on(&second);
    assert!(!second.woken(waker) && third.woken(waker));
    b.queue().leave(&third, false);
    assert!(
        second.woken(waker),
        "an unused wake goes to the next waiter"
    );
    b.queue().leave(&second, true);
    assert!(b.queue().is_empty());
}

/// A room every waiter looked at and could not use (their retries tried that server) is a
/// newcomer's: queueing for it would leave the server idle until some other request ends.
#[test]
fn a_room_no_waiter_can_use_goes_to_a_newcomer() {
    let now = Instant::now();
    let waker = std::task::Waker::noop();
    let mut b = Balancer::new(&capped(Balance::RoundRobin, &[1, 1]), 0, 1);
    b.started(sid(0));
    b.started(sid(1));
    // A retry that tried server 1 waits for server 0.
    let retry = b.queue().join();
    assert_eq!(b.pick_room(0, &[sid(1)], now, false), Room::Full);
    b.finished(sid(1));
    assert!(retry.woken(waker));
    assert_eq!(b.pick_room(0, &[sid(1)], now, true), Room::Full);
    b.queue().pass_on(&retry);
    assert_eq!(b.pick_room(0, &[], now, false), Room::Server(sid(1)));
    b.started(sid(1));
    // A room the waiter was woken for stays its own.
    b.finished(sid(0));
    assert!(retry.woken(waker));
    b.finished(sid(1));
    assert_eq!(b.pick_room(0, &[], now, false), Room::Full);
    assert_eq!(b.pick_room(0, &[sid(1)], now, true), Room::Server(sid(0)));
    b.started(sid(0));
    b.queue().leave(&retry, true);
    assert_eq!(b.pick_room(0, &[], now, false), Room::Server(sid(1)));
}

/// A reload that changes a group (`generation::share_rooms`): the server it keeps counts the
/// old generation's requests in flight against its `max_conns` and the waiters keep the
/// queue; a server it adds takes a new request at once, although the old generation's waiter
/// (which cannot go there) is ahead of it.
#[test]
fn a_reload_shares_a_kept_servers_rooms_and_the_queue() {
    let (now, waker) = (Instant::now(), std::task::Waker::noop());
    let mut old = Balancer::new(&capped(Balance::RoundRobin, &[1]), 0, 1);
    old.started(sid(0));
    let waiter = old.queue().join();

    // Server 0 stays (same address), server 1 comes.
    let mut new = Balancer::new(&capped(Balance::RoundRobin, &[1, 1]), 0, 1);
    new.share_load(sid(0), &old, sid(0));
    new.share_queue(&old);
    assert_eq!(new.active(sid(0)), 1, "the old generation's request");
    assert_eq!(new.waiting(), 1, "the old generation's waiter");
    // Woken by the reload to look: server 0 is still full.
    assert!(waiter.woken(waker));
    assert_eq!(old.pick_room(0, &[], now, true), Room::Full);
    old.queue().pass_on(&waiter);
    assert_eq!(new.pick_room(0, &[], now, false), Room::Server(sid(1)));
    new.started(sid(1));
    // The old generation's request ends: server 0's room is its waiter's, on either one.
    old.finished(sid(0));
    assert!(waiter.woken(waker));
    assert_eq!(new.pick_room(0, &[], now, false), Room::Full);
    assert_eq!(old.pick_room(0, &[], now, true), Room::Server(sid(0)));
}
