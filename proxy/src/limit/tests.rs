use super::*;
use crate::config::client_limits::RateLimit;
use std::num::NonZeroU32;
use std::time::Duration;

const SEC: u64 = 1_000_000_000;

fn rate(n: u32, burst: u32) -> RateLimit {
    RateLimit {
        count: NonZeroU32::new(n).unwrap(),
        per_minute: false,
        burst,
    }
}

/// Admit requests at `times` (ns) on a bucket; what each got.
fn run(b: Bucket, times: &[u64]) -> Vec<Result<(), u64>> {
    let mut tat = 0;
    times
        .iter()
        .map(|&t| b.admit(tat, t).map(|next| tat = next))
        .collect()
}

#[test]
fn a_bucket_admits_burst_plus_one_at_once_then_the_rate() {
    // 10/s, burst 2: three at once, the fourth waits 100 ms; 100 ms later one more.
    let b = Bucket::new(&rate(10, 2), 1);
    let got = run(b, &[SEC, SEC, SEC, SEC, SEC + SEC / 10, SEC + SEC / 10]);
    assert_eq!(
        got,
        vec![Ok(()), Ok(()), Ok(()), Err(SEC / 10), Ok(()), Err(SEC / 10)]
    );
    // Burst 0: one per interval exactly.
    let b = Bucket::new(&rate(4, 0), 1);
    let got = run(b, &[0, 1, SEC / 4 - 1, SEC / 4, SEC / 2]);
    assert_eq!(got, vec![Ok(()), Err(SEC / 4 - 1), Err(1), Ok(()), Ok(())]);
    // Shared by 2 workers: each takes half the rate and half the burst.
    let b = Bucket::new(&rate(10, 4), 2);
    let got = run(b, &[SEC; 4]);
    assert_eq!(got, vec![Ok(()), Ok(()), Ok(()), Err(SEC / 5)]);
}

fn cfg(text: &str) -> Config {
    let t = format!("[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 2\n{text}");
    crate::config::from_toml("t.toml", &t).expect("config")
}

const ROUTES: &str = "[[route]]\npath = \"/a/\"\nreturn = { status = 200 }\n\
    allow = [\"10.0.0.0/8\", \"::1\"]\ndeny = [\"10.0.0.9\"]\n\
    [[route]]\npath = \"/\"\nreturn = { status = 200 }\nlimit = { rate = \"1/m\", burst = 1 }\n";

#[test]
fn guards_check_access_then_both_limits_and_take_tokens_only_when_both_allow() {
    let mut c = cfg(&format!(
        "[client_limits]\nrate = \"1/m\"\nburst = 2\n{ROUTES}"
    ));
    c.client_steering = true;
    let g = Guards::new(&c).expect("guards");
    let (a, root) = (RouteId::new(0), RouteId::new(1));
    let now = Instant::now();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(g.check(&c, a, ip("10.0.0.9"), now), Some(Refusal::Denied));
    assert_eq!(g.check(&c, a, ip("11.0.0.1"), now), Some(Refusal::Denied));
    assert_eq!(g.check(&c, a, ip("::2"), now), Some(Refusal::Denied));
    // Denied requests took nothing: 10.0.0.1 has its whole global burst (3).
    let one = ip("10.0.0.1");
    // The route's limit (2 at once) refuses the third on `/`: the global keeps that token.
    assert_eq!(g.check(&c, root, one, now), None);
    assert_eq!(g.check(&c, root, one, now), None);
    let Some(Refusal::Limited { retry_after }) = g.check(&c, root, one, now) else {
        panic!("the route's limit")
    };
    assert!((59..=60).contains(&retry_after), "{retry_after}");
    // `/a/` has no limit of its own: the global's third token is still there.
    assert_eq!(g.check(&c, a, one, now), None);
    assert!(matches!(
        g.check(&c, a, one, now),
        Some(Refusal::Limited { .. })
    ));
    // Another address is not limited by the first's requests.
    assert_eq!(g.check(&c, a, ip("10.0.0.2"), now), None);
    assert_eq!(g.global.as_ref().unwrap().remembered(), 2);
}

#[test]
fn no_guard_without_limits_or_rules_and_the_table_stays_bounded() {
    assert!(Guards::new(&cfg("[[route]]\npath = \"/\"\nreturn = { status = 200 }\n")).is_none());
    let c = cfg("[client_limits]\nrate = \"1000/s\"\ntable_size = 16\n\
                 [[route]]\npath = \"/\"\nreturn = { status = 200 }\n");
    let g = Guards::new(&c).unwrap();
    let now = Instant::now() + Duration::from_secs(1);
    for i in 0..1000u32 {
        let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        assert_eq!(g.check(&c, RouteId::new(0), ip, now), None);
        assert!(g.global.as_ref().unwrap().remembered() <= 16);
    }
    assert_eq!(g.global.as_ref().unwrap().remembered(), 16);
}

#[test]
fn reloads_keep_unchanged_limiters() {
    let c1 = cfg(&format!("[client_limits]\nrate = \"1/m\"\n{ROUTES}"));
    let c2 = cfg(&format!("[client_limits]\nrate = \"2/m\"\n{ROUTES}"));
    let g1 = Guards::new(&c1).unwrap();
    let mut g2 = Guards::new(&c2).unwrap();
    g2.carry_over(&g1, &c1, &c2);
    let root = RouteId::new(1);
    assert!(!Rc::ptr_eq(
        g1.global.as_ref().unwrap(),
        g2.global.as_ref().unwrap()
    ));
    let (a, b) = (
        g1.routes[root].as_ref().unwrap(),
        g2.routes[root].as_ref().unwrap(),
    );
    assert!(Rc::ptr_eq(a, b));
}

#[test]
fn connections_are_counted_per_address_and_given_back() {
    let c = ConnCounts::default();
    let (a, b) = (
        key_of("10.0.0.1".parse().unwrap()),
        key_of("::1".parse().unwrap()),
    );
    assert!(c.enter(a, 2) && c.enter(a, 2));
    assert!(!c.enter(a, 2));
    assert!(c.enter(b, 2));
    c.leave(a);
    assert!(c.enter(a, 2));
    assert_eq!(c.clients(), 2);
    for _ in 0..2 {
        c.leave(a);
    }
    c.leave(b);
    assert_eq!(c.clients(), 0);
    let mut cfgd = cfg(
        "[client_limits]\nconnections = 5\n[[route]]\npath = \"/\"\nreturn = { status = 200 }\n",
    );
    assert_eq!(connections_per_worker(&cfgd), Some(2));
    cfgd.client_steering = true;
    assert_eq!(connections_per_worker(&cfgd), Some(5));
}
