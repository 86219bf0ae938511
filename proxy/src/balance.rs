//! Load balancing over one upstream group, per worker: plain owned state, no atomics, nothing
//! shared between workers (each worker balances its own requests, as nginx's workers do
//! without a shared zone).
//!
//! - Round-robin: nginx's smooth weighted round-robin (`ngx_http_upstream_get_peer`): every pick
//!   adds each candidate's weight to its current weight, takes the largest, and subtracts the
//!   total from the winner. Exact proportions, interleaved: weights 5,1,1 give `a a b a c a a`.
//! - Least connections: the fewest active requests relative to weight (`active / weight`,
//!   compared by cross-multiplying); ties go to smooth weighted round-robin among the tied.
//! - Random2: power of two random choices. Two distinct candidates drawn at random in proportion
//!   to their weights; the one with fewer active requests per weight wins.
//!
//! Failures (nginx's `max_fails`/`fail_timeout`): `max_fails` failures within `fail_timeout`
//! mark a server failed for `fail_timeout`; a success clears the count; `max_fails = 0` never
//! marks. Failed servers are skipped while any other untried one is left; when every untried
//! server is failed, they are picked anyway (as nginx does), so a group never refuses outright.
//!
//! Active health checks (`health = { ... }` on the group, `crate::health`) set each server's
//! [`Health`] on every worker. A server `Down` is never picked, by any method, not even when
//! every other one is down too: a group whose servers are all down has no live upstream and
//! the request gets 502 at once (nginx's "no live upstreams"). Passive marks apply among the
//! servers that are not down, as above. A server coming `Up` has its passive mark cleared:
//! `rise` passed checks are fresher news than the failure that marked it.

use crate::config::{Balance, ServerId, Table, UpstreamGroup};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
struct ServerState {
    weight: i64,
    /// Smooth round-robin's running weight.
    current: i64,
    /// Requests in flight on this worker.
    active: u64,
    max_fails: u32,
    fail_timeout: Duration,
    /// Failures in the window that started at `window_start`.
    fails: u32,
    window_start: Option<Instant>,
    /// Skipped until then.
    down_until: Option<Instant>,
    /// What the active checks say.
    health: Health,
}

impl ServerState {
    fn is_down(&self, now: Instant) -> bool {
        self.down_until.is_some_and(|t| now < t)
    }
}

/// A server's state by the active health checks of its group: the same on every worker (one
/// worker checks, every worker is told, see `crate::health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// The group has no active checks (only the passive marks apply).
    Unchecked,
    /// In rotation: passing, or not yet failed `fall` checks in a row (servers start up).
    Up,
    /// Out of rotation on every worker: failed `fall` checks in a row, until `rise` pass.
    Down,
}

/// One server's new state, as the checking worker tells the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthChange {
    pub group: String,
    /// The server's name as written in the group's `servers`.
    pub server: String,
    pub health: Health,
}

impl Health {
    /// For logs and metrics: "unchecked", "up", "down".
    pub fn name(self) -> &'static str {
        match self {
            Health::Unchecked => "unchecked",
            Health::Up => "up",
            Health::Down => "down",
        }
    }
}

/// One worker's balancer for one group. Its servers are those of `group.servers`, by the same [`ServerId`].
#[derive(Debug, Clone)]
pub struct Balancer {
    balance: Balance,
    servers: Table<ServerId, ServerState>,
    /// xorshift64* state; never zero.
    rng: u64,
}

impl Balancer {
    /// `seed` makes random2 differ between workers (any value; zero is fine).
    pub fn new(group: &UpstreamGroup, seed: u64) -> Self {
        let health = match group.health {
            Some(_) => Health::Up,
            None => Health::Unchecked,
        };
        let servers = group.servers.map(|s| ServerState {
            weight: i64::from(s.weight.max(1)),
            current: 0,
            active: 0,
            max_fails: s.max_fails,
            fail_timeout: s.fail_timeout,
            fails: 0,
            window_start: None,
            down_until: None,
            health,
        });
        Balancer {
            balance: group.balance,
            servers,
            // splitmix64 of the seed: distinct, non-zero states for seeds 0, 1, 2, ...
            rng: splitmix64(seed) | 1,
        }
    }

    /// A server not in `tried` and not down by active checks, preferring those not marked
    /// failed; if every such one is failed, pick among them anyway (as nginx does). `None`
    /// when none is left: all tried, or down.
    pub fn pick(&mut self, tried: &[ServerId], now: Instant) -> Option<ServerId> {
        let mut filter = Filter {
            tried,
            now,
            skip_down: false,
        };
        filter.skip_down = self
            .servers
            .enumerate()
            .any(|(i, s)| filter.ok(i, s) && !s.is_down(now));
        match self.balance {
            Balance::RoundRobin => self.smooth_rr(|i, s| filter.ok(i, s)),
            Balance::LeastConn => {
                let best = self.least_loaded(&filter)?;
                let best = self.servers[best];
                self.smooth_rr(|i, s| filter.ok(i, s) && load_cmp(s, &best).is_eq())
            }
            Balance::Random2 => self.random2(&filter),
        }
    }

    /// A request to `server` started.
    pub fn started(&mut self, server: ServerId) {
        if let Some(s) = self.servers.get_mut(server) {
            s.active += 1;
        }
    }

    /// A request to `server` finished (whatever its outcome).
    pub fn finished(&mut self, server: ServerId) {
        if let Some(s) = self.servers.get_mut(server) {
            s.active = s.active.saturating_sub(1);
        }
    }

    /// Connecting to `server` failed, or it closed or timed out before answering.
    pub fn failed(&mut self, server: ServerId, now: Instant) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if s.max_fails == 0 {
            return;
        }
        let window_over = match s.window_start {
            None => true,
            Some(start) => now.saturating_duration_since(start) >= s.fail_timeout,
        };
        if window_over {
            s.fails = 0;
            s.window_start = Some(now);
        }
        s.fails = s.fails.saturating_add(1);
        if s.fails >= s.max_fails {
            s.down_until = Some(now + s.fail_timeout);
        }
    }

    /// `server` answered: its failure count starts over.
    pub fn succeeded(&mut self, server: ServerId) {
        if let Some(s) = self.servers.get_mut(server) {
            s.fails = 0;
            s.window_start = None;
            s.down_until = None;
        }
    }

    /// What the active checks say about `server` (`Unchecked` for an index out of range).
    pub fn health(&self, server: ServerId) -> Health {
        self.servers
            .get(server)
            .map_or(Health::Unchecked, |s| s.health)
    }

    /// The active checks' verdict on `server`. Coming up clears its passive mark.
    pub fn set_health(&mut self, server: ServerId, health: Health) {
        let Some(s) = self.servers.get_mut(server) else {
            return;
        };
        if health == Health::Up && s.health == Health::Down {
            s.fails = 0;
            s.window_start = None;
            s.down_until = None;
        }
        s.health = health;
    }

    /// A reload's carry-over: `server` takes the failure state (count, window, marked failed)
    /// and the active checks' verdict of `from`'s `from_server`, the same address in the
    /// previous generation.
    pub fn adopt_failures(&mut self, server: ServerId, from: &Balancer, from_server: ServerId) {
        if let (Some(s), Some(f)) = (self.servers.get_mut(server), from.servers.get(from_server)) {
            s.fails = f.fails;
            s.window_start = f.window_start;
            s.down_until = f.down_until;
            s.health = f.health;
        }
    }

    /// Whether `server` is currently marked failed (passively).
    pub fn is_down(&self, server: ServerId, now: Instant) -> bool {
        self.servers.get(server).is_some_and(|s| s.is_down(now))
    }

    /// Active requests on `server` (this worker).
    pub fn active(&self, server: ServerId) -> u64 {
        self.servers.get(server).map_or(0, |s| s.active)
    }

    fn least_loaded(&self, filter: &Filter) -> Option<ServerId> {
        // `min_by` keeps the first of equal minima.
        self.servers
            .enumerate()
            .filter(|&(i, s)| filter.ok(i, s))
            .min_by(|a, b| load_cmp(a.1, b.1))
            .map(|(i, _)| i)
    }

    /// nginx's smooth weighted round-robin over the servers `ok` accepts.
    fn smooth_rr(&mut self, ok: impl Fn(ServerId, &ServerState) -> bool) -> Option<ServerId> {
        let mut total = 0i64;
        let mut best: Option<(ServerId, i64)> = None;
        for (i, s) in self.servers.enumerate_mut() {
            if !ok(i, s) {
                continue;
            }
            s.current += s.weight;
            total += s.weight;
            let better = match best {
                None => true,
                Some((_, current)) => s.current > current,
            };
            if better {
                best = Some((i, s.current));
            }
        }
        let (b, _) = best?;
        self.servers[b].current -= total;
        Some(b)
    }

    fn random2(&mut self, filter: &Filter) -> Option<ServerId> {
        let total: u64 = self
            .servers
            .enumerate()
            .filter(|&(i, s)| filter.ok(i, s))
            .map(|(_, s)| s.weight as u64)
            .sum();
        if total == 0 {
            return None;
        }
        let first = self.weighted_draw(filter, None, total);
        let rest = total - self.servers[first].weight as u64;
        if rest == 0 {
            return Some(first);
        }
        let second = self.weighted_draw(filter, Some(first), rest);
        Some(
            if load_cmp(&self.servers[second], &self.servers[first]).is_lt() {
                second
            } else {
                first
            },
        )
    }

    /// A candidate drawn with probability weight / `total` (`total`: the candidates' sum).
    fn weighted_draw(&mut self, filter: &Filter, skip: Option<ServerId>, total: u64) -> ServerId {
        let mut r = self.next_random() % total;
        let mut last = ServerId::new(0);
        for (i, s) in self.servers.enumerate() {
            if !filter.ok(i, s) || Some(i) == skip {
                continue;
            }
            last = i;
            let w = s.weight as u64;
            if r < w {
                return i;
            }
            r -= w;
        }
        last
    }

    /// xorshift64* (Vigna): fast, good enough to spread load, not for secrets.
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Which servers a pick may choose: untried ones not down by active checks, and of those only
/// the ones not marked failed unless every such one is failed.
struct Filter<'a> {
    tried: &'a [ServerId],
    now: Instant,
    skip_down: bool,
}

impl Filter<'_> {
    fn ok(&self, i: ServerId, s: &ServerState) -> bool {
        if s.health == Health::Down || self.tried.contains(&i) {
            return false;
        }
        !self.skip_down || !s.is_down(self.now)
    }
}

/// `a.active / a.weight` against `b.active / b.weight`, without division.
fn load_cmp(a: &ServerState, b: &ServerState) -> std::cmp::Ordering {
    (u128::from(a.active) * b.weight as u128).cmp(&(u128::from(b.active) * a.weight as u128))
}

fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
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
                    addrs: vec![([127, 0, 0, 1], 9000 + i as u16).into()],
                    weight,
                    max_fails: 1,
                    fail_timeout: Duration::from_secs(10),
                })
                .collect(),
            balance,
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
        let mut b = Balancer::new(&group(Balance::RoundRobin, &[5, 1, 1]), 0);
        let now = Instant::now();
        // nginx: a a b a c a a, then the cycle repeats.
        assert_eq!(
            picks(&mut b, 14, now),
            [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]
        );
        let mut b = Balancer::new(&group(Balance::RoundRobin, &[1, 1]), 0);
        assert_eq!(picks(&mut b, 4, now), [0, 1, 0, 1]);
    }

    #[test]
    fn round_robin_exact_proportions() {
        let mut b = Balancer::new(&group(Balance::RoundRobin, &[3, 2, 1]), 0);
        let seq = picks(&mut b, 6000, Instant::now());
        assert_eq!(counts(&seq, 3), [3000, 2000, 1000]);
    }

    #[test]
    fn tried_servers_are_excluded() {
        let now = Instant::now();
        for balance in [Balance::RoundRobin, Balance::LeastConn, Balance::Random2] {
            let mut b = Balancer::new(&group(balance, &[1, 1, 1]), 7);
            for _ in 0..50 {
                assert_eq!(pick(&mut b, &[0, 2], now), Some(1), "{balance:?}");
                let p = pick(&mut b, &[1], now).unwrap();
                assert!(p == 0 || p == 2, "{balance:?}");
            }
            assert_eq!(pick(&mut b, &[0, 1, 2], now), None, "{balance:?}");
            assert_eq!(pick(&mut b, &[2, 1, 0], now), None, "{balance:?}");
        }
        let mut empty = Balancer::new(&group(Balance::RoundRobin, &[]), 0);
        assert_eq!(pick(&mut empty, &[], now), None);
    }

    #[test]
    fn least_conn_follows_active_counts() {
        let now = Instant::now();
        let mut b = Balancer::new(&group(Balance::LeastConn, &[1, 1, 1]), 0);
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
        let mut b = Balancer::new(&group(Balance::LeastConn, &[1, 1, 1]), 0);
        assert_eq!(picks(&mut b, 6, now), [0, 1, 2, 0, 1, 2]);
        // A request that starts and finishes each time: all tie, weights respected.
        let mut b = Balancer::new(&group(Balance::LeastConn, &[2, 1]), 0);
        let seq = picks(&mut b, 300, now);
        assert_eq!(counts(&seq, 2), [200, 100]);
        // Weighted: 4 active on weight 4 is as loaded as 1 active on weight 1.
        let mut b = Balancer::new(&group(Balance::LeastConn, &[4, 1]), 0);
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
        let mut b = Balancer::new(&group(Balance::LeastConn, &[3, 1]), 0);
        for _ in 0..400 {
            let s = pick(&mut b, &[], now).unwrap();
            b.started(sid(s));
        }
        assert_eq!((b.active(sid(0)), b.active(sid(1))), (300, 100));
    }

    #[test]
    fn random2_respects_weights_and_load() {
        let now = Instant::now();
        let mut b = Balancer::new(&group(Balance::Random2, &[3, 1]), 42);
        let seq = picks(&mut b, 40_000, now);
        let c = counts(&seq, 2);
        // Two servers: each pick compares both (ties keep the first draw, weighted 3:1).
        assert!((29_000..31_000).contains(&c[0]), "{c:?}");
        // With load, the less loaded of the two wins.
        let mut b = Balancer::new(&group(Balance::Random2, &[1, 1]), 1);
        b.started(sid(0));
        for _ in 0..20 {
            assert_eq!(pick(&mut b, &[], now), Some(1));
        }
        // Requests that never finish stay balanced.
        let mut b = Balancer::new(&group(Balance::Random2, &[1, 1, 1, 1]), 3);
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
        let mut x = Balancer::new(&group(Balance::Random2, &[1; 8]), 1);
        let mut y = Balancer::new(&group(Balance::Random2, &[1; 8]), 2);
        assert_ne!(picks(&mut x, 32, now), picks(&mut y, 32, now));
    }

    #[test]
    fn failed_server_skipped_then_retried_after_fail_timeout() {
        let t0 = Instant::now();
        for balance in [Balance::RoundRobin, Balance::LeastConn, Balance::Random2] {
            let mut b = Balancer::new(&group(balance, &[1, 1]), 5);
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
        let mut b = Balancer::new(&g, 0);
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
            let mut b = Balancer::new(&group(balance, &[1, 1, 1]), 9);
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
        let b = Balancer::new(&group(Balance::RoundRobin, &[1, 1]), 0);
        assert_eq!(b.health(sid(0)), Health::Unchecked);
        let mut b = Balancer::new(&checked_group(Balance::RoundRobin, &[1, 1]), 0);
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
            let mut b = Balancer::new(&checked_group(balance, &[1, 5, 1]), 3);
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
        let mut b = Balancer::new(&checked_group(Balance::RoundRobin, &[1, 1, 1]), 0);
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
}
