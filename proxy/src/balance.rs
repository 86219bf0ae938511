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
//! - Hash: consistent hashing of the request's key (`hash_key`) on a ketama ring
//!   ([`ring`]): the same key reaches the same server, and a server added or removed moves
//!   about 1/N of the keys. A server that may not be picked (tried, down, failed) is passed
//!   over by walking the ring on to the next distinct server, so a retry goes where that
//!   key's requests go while the first one is out, and they all come back with it.
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
use std::cell::{Cell, RefCell, RefMut};
use std::rc::Rc;
use std::time::{Duration, Instant};

pub mod queue;
pub mod ring;

pub use queue::InFlight;

#[derive(Debug)]
struct ServerState {
    weight: i64,
    /// Smooth round-robin's running weight.
    current: i64,
    /// Requests in flight and the limit on them: the server's across generations.
    load: Rc<Load>,
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

    /// At its share of `max_conns`: no room for another request.
    fn full(&self) -> bool {
        let cap = self.load.cap.get();
        cap != 0 && self.load.active.get() >= cap
    }

    /// Requests in flight, and the weight they are measured against.
    fn load(&self) -> (u64, i64) {
        (self.load.active.get(), self.weight)
    }
}

/// A server's requests in flight on this worker and its share of `max_conns`
/// (`queue::per_worker`; 0: no limit). A reload or a DNS change keeps one for a server it
/// keeps (same group, same addresses): the balancers of both generations count into it, so
/// the requests still on the old generation hold rooms the new one sees, their ends make room
/// for it, and least-conn weighs them. The limit is the newest generation's.
#[derive(Debug, Default)]
struct Load {
    active: Cell<u64>,
    cap: Cell<u64>,
}

/// What a request may go to now ([`Balancer::pick_room`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    Server(ServerId),
    /// Every server it may go to is at its `max_conns`, or others wait already: queue.
    Full,
    /// No server is left: all tried, or down.
    None,
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
#[derive(Debug)]
pub struct Balancer {
    balance: Balance,
    servers: Table<ServerId, ServerState>,
    /// `Balance::Hash`'s ring (empty otherwise).
    ring: ring::Ring,
    /// xorshift64* state; never zero.
    rng: u64,
    /// Some server has `max_conns`: requests may have to wait. A cell: a later generation
    /// that shares this one's servers sets it (`share_load`).
    capped: Cell<bool>,
    /// Requests waiting for room (`max_conns`): the group's, shared with the balancers of
    /// the same group in the generations before and after this one.
    queue: Rc<RefCell<queue::Queue>>,
}

impl Balancer {
    /// `seed` makes random2 differ between workers (any value; zero is fine); `workers`
    /// share each server's `max_conns`.
    pub fn new(group: &UpstreamGroup, seed: u64, workers: usize) -> Self {
        let health = match group.health {
            Some(_) => Health::Up,
            None => Health::Unchecked,
        };
        let servers = group.servers.map(|s| ServerState {
            weight: i64::from(s.weight.max(1)),
            current: 0,
            load: Rc::new(Load {
                active: Cell::new(0),
                cap: Cell::new(queue::per_worker(s.max_conns, workers)),
            }),
            max_fails: s.max_fails,
            fail_timeout: s.fail_timeout,
            fails: 0,
            window_start: None,
            down_until: None,
            health,
        });
        let ring = match group.balance {
            Balance::Hash => ring::Ring::new(
                (group.servers.enumerate()).map(|(i, s)| (i, s.name.as_str(), s.weight)),
            ),
            _ => ring::Ring::default(),
        };
        Balancer {
            balance: group.balance,
            capped: Cell::new(servers.iter().any(|s| s.load.cap.get() != 0)),
            queue: Rc::default(),
            servers,
            ring,
            // splitmix64 of the seed: distinct, non-zero states for seeds 0, 1, 2, ...
            rng: splitmix64(seed) | 1,
        }
    }

    /// A server not in `tried` and not down by active checks, preferring those not marked
    /// failed; if every such one is failed, pick among them anyway (as nginx does). `None`
    /// when none is left: all tried, or down.
    pub fn pick(&mut self, tried: &[ServerId], now: Instant) -> Option<ServerId> {
        self.pick_for(0, tried, now)
    }

    /// [`Balancer::pick`] for a request whose key hashes to `key` (`ring::hash_key`; read
    /// by `Balance::Hash` only). A server at its `max_conns` is not picked.
    pub fn pick_for(&mut self, key: u64, tried: &[ServerId], now: Instant) -> Option<ServerId> {
        let filter = self.filter(tried, now);
        self.pick_with(key, &filter)
    }

    /// [`Balancer::pick_for`], or `Full` when every server the request may go to is at its
    /// `max_conns`, or when a waiter was woken for the room (`queued`: the caller is a woken
    /// waiter, whose turn it is).
    pub fn pick_room(&mut self, key: u64, tried: &[ServerId], now: Instant, queued: bool) -> Room {
        let mut filter = self.filter(tried, now);
        if !self.capped.get() {
            return self
                .pick_with(key, &filter)
                .map_or(Room::None, Room::Server);
        }
        filter.skip_full = false;
        if !self.servers.enumerate().any(|(i, s)| filter.ok(i, s)) {
            return Room::None;
        }
        // First come, first served: the room a finished request left is the waiter's it
        // woke, not a newcomer's that came before that waiter ran. A room no wake is headed
        // for is one every waiter looked at and could not use (a server its retry tried, one
        // a reload added): taking it robs no one, and queueing for it would leave it idle
        // until some other request ends.
        if !queued && self.queue.borrow().wake_pending() {
            return Room::Full;
        }
        filter.skip_full = true;
        self.pick_with(key, &filter)
            .map_or(Room::Full, Room::Server)
    }

    /// Whether any server is left for a request that tried `tried` (full ones included).
    pub fn has_candidate(&self, tried: &[ServerId], now: Instant) -> bool {
        let mut filter = self.filter(tried, now);
        filter.skip_full = false;
        self.servers.enumerate().any(|(i, s)| filter.ok(i, s))
    }

    /// Whether any request is in flight on the group (on this worker): one will end.
    pub fn busy(&self) -> bool {
        self.servers.iter().any(|s| s.load.active.get() > 0)
    }

    /// How many requests wait in the queue (for `/metrics`).
    pub fn waiting(&self) -> usize {
        self.queue.borrow().len()
    }

    /// The requests waiting for room.
    pub fn queue(&self) -> RefMut<'_, queue::Queue> {
        self.queue.borrow_mut()
    }

    fn filter<'t>(&self, tried: &'t [ServerId], now: Instant) -> Filter<'t> {
        let mut filter = Filter {
            tried,
            now,
            skip_down: false,
            skip_full: false,
        };
        filter.skip_down = self
            .servers
            .enumerate()
            .any(|(i, s)| filter.ok(i, s) && !s.is_down(now));
        filter.skip_full = true;
        filter
    }

    fn pick_with(&mut self, key: u64, filter: &Filter) -> Option<ServerId> {
        let filter = *filter;
        match self.balance {
            Balance::RoundRobin => self.smooth_rr(|i, s| filter.ok(i, s)),
            Balance::LeastConn => {
                let best = self.least_loaded(&filter)?;
                let best = self.servers[best].load();
                self.smooth_rr(|i, s| filter.ok(i, s) && load_cmp(s.load(), best).is_eq())
            }
            Balance::Random2 => self.random2(&filter),
            Balance::Hash => self.on_ring(key, &filter),
        }
    }

    /// The first server at or after `key` on the ring that `filter` accepts.
    fn on_ring(&self, key: u64, filter: &Filter) -> Option<ServerId> {
        // None at all: say so without walking every point.
        if !self.servers.enumerate().any(|(i, s)| filter.ok(i, s)) {
            return None;
        }
        self.ring
            .walk(key)
            .find(|&i| filter.ok(i, &self.servers[i]))
    }

    /// A request to `server` started.
    pub fn started(&mut self, server: ServerId) {
        if let Some(s) = self.servers.get(server) {
            s.load.active.set(s.load.active.get() + 1);
        }
    }

    /// A request to `server` finished (whatever its outcome): room for a waiter.
    pub fn finished(&mut self, server: ServerId) {
        if let Some(s) = self.servers.get(server) {
            s.load.active.set(s.load.active.get().saturating_sub(1));
        }
        wake_one(&self.queue);
    }

    /// `server`'s room, counted in already, as a value that holds no part of this balancer
    /// ([`HeldRoom`]); `None` for an index out of range.
    fn hold(&self, server: ServerId) -> Option<HeldRoom> {
        self.servers.get(server).map(|s| HeldRoom {
            load: s.load.clone(),
            queue: self.queue.clone(),
        })
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

    /// A reload's carry-over: `server` counts its requests in flight with `from`'s
    /// `from_server` (the same address, in the previous generation's group of the same
    /// name), under this generation's `max_conns` ([`Load`]).
    pub fn share_load(&mut self, server: ServerId, from: &Balancer, from_server: ServerId) {
        if let (Some(s), Some(f)) = (self.servers.get_mut(server), from.servers.get(from_server)) {
            f.load.cap.set(s.load.cap.get());
            s.load = f.load.clone();
        }
        // The old generation's requests still pick (retries, waiters): they respect the
        // limit now theirs too. A group without limits merely goes the longer way round.
        if self.capped.get() {
            from.capped.set(true);
        }
    }

    /// A reload's carry-over: the group of the same name in the previous generation hands
    /// over its queue, so the requests waiting keep their places ahead of this generation's.
    /// Its limits or servers may have changed: each waiter looks for room again, in order.
    pub fn share_queue(&mut self, from: &Balancer) {
        self.queue = from.queue.clone();
        self.queue.borrow_mut().wake_all();
    }

    /// Whether `server` is currently marked failed (passively).
    pub fn is_down(&self, server: ServerId, now: Instant) -> bool {
        self.servers.get(server).is_some_and(|s| s.is_down(now))
    }

    /// Active requests on `server` (this worker).
    pub fn active(&self, server: ServerId) -> u64 {
        self.servers.get(server).map_or(0, |s| s.load.active.get())
    }

    fn least_loaded(&self, filter: &Filter) -> Option<ServerId> {
        // `min_by` keeps the first of equal minima.
        self.servers
            .enumerate()
            .filter(|&(i, s)| filter.ok(i, s))
            .min_by(|a, b| load_cmp(a.1.load(), b.1.load()))
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
            if load_cmp(self.servers[second].load(), self.servers[first].load()).is_lt() {
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

/// A request's room on a server held apart from its generation, for a WebSocket tunnel's
/// life (which may span many reloads): the server's count of requests in flight ([`Load`],
/// shared with every later generation that keeps the server) and the group's queue (handed
/// on the same way), not the balancer nor anything else of the generation. Dropped, it
/// counts the request out and wakes a waiter, as [`Balancer::finished`] does: a request
/// queued in a later generation that kept the server takes the room; a server or group a
/// reload removed leaves a count and a queue that no one reads any more.
pub struct HeldRoom {
    load: Rc<Load>,
    queue: Rc<RefCell<queue::Queue>>,
}

impl Drop for HeldRoom {
    fn drop(&mut self) {
        self.load
            .active
            .set(self.load.active.get().saturating_sub(1));
        wake_one(&self.queue);
    }
}

/// A request finished: the first waiter not woken yet looks for room.
fn wake_one(queue: &RefCell<queue::Queue>) {
    let mut queue = queue.borrow_mut();
    if !queue.is_empty() {
        queue.wake_next();
    }
}

/// Which servers a pick may choose: untried ones not down by active checks, and of those only
/// the ones not marked failed unless every such one is failed; and (`skip_full`) not at
/// their `max_conns`.
#[derive(Clone, Copy)]
struct Filter<'a> {
    tried: &'a [ServerId],
    now: Instant,
    skip_down: bool,
    skip_full: bool,
}

impl Filter<'_> {
    fn ok(&self, i: ServerId, s: &ServerState) -> bool {
        if s.health == Health::Down || self.tried.contains(&i) {
            return false;
        }
        if self.skip_full && s.full() {
            return false;
        }
        !self.skip_down || !s.is_down(self.now)
    }
}

/// `a`'s requests in flight per weight against `b`'s ([`ServerState::load`]), without
/// division.
fn load_cmp((a, a_weight): (u64, i64), (b, b_weight): (u64, i64)) -> std::cmp::Ordering {
    (u128::from(a) * b_weight as u128).cmp(&(u128::from(b) * a_weight as u128))
}

fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
