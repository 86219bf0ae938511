//! Per client limits and access rules, per worker and sans-IO (the time is given): a route's
//! `allow`/`deny`, the `[client_limits]` rate and a route's own `limit` (token buckets kept as
//! GCRA's one "theoretical arrival time" per address: 8 bytes a client), and the count of a
//! client's open connections (`[client_limits] connections`).
//!
//! Semantics (docs/CONFIGURATION.md):
//! - `deny` is checked first, then `allow` (when given, only its ranges may pass), then the
//!   rates: a denied client costs no token. nginx checks `limit_req` before `allow`/`deny`;
//!   here a refused address never fills a bucket.
//! - A request over a limit is refused at once (429, nginx `limit_req ... nodelay`): never
//!   delayed. It costs no token of either limit: the global and the route's limit are
//!   both checked, then both taken only if both allow it.
//! - Each worker counts the clients it serves. With the listeners steering each client
//!   address to one worker (`Config::client_steering`), that is the client's whole count;
//!   otherwise each worker allows 1/workers of the rate and of the burst (approximate). Behind
//!   a balancer ([`behind_a_balancer`]) that is the design, not a fallback: steering by the
//!   peer cannot follow an address a header names, and with nothing shared between workers
//!   1/workers is the only share that never lets a client past its limit, however its
//!   requests spread over the balancer's connections (exact when they reach every worker
//!   alike, stricter when they reach fewer). The start-up line says so.
//! - State is bounded: each rate limit remembers at most `table_size` addresses per worker,
//!   the least recently seen forgotten first (a forgotten client starts with a full bucket).

pub mod table;

pub use steering::{steer_listeners, Steering};
mod steering;

use crate::config::client_limits::RateLimit;
use crate::config::{Config, RouteId, Table};
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Instant;
pub use table::{key_of, AddrKey, AddrTable};

/// Why a route's guard refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `allow`/`deny`: 403.
    Denied,
    /// Over a rate limit: 429, with `Retry-After` in seconds.
    Limited { retry_after: u32 },
}

/// GCRA's arithmetic for one rate (in nanoseconds): a request at `now` is admitted if the
/// client's theoretical arrival time is at most `tau` ahead of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// What one request costs.
    interval: u64,
    /// How far ahead of now a client may run: `burst` requests' worth.
    tau: u64,
}

impl Bucket {
    /// `limit` as one of `share` workers enforces it (1: the whole limit).
    pub fn new(limit: &RateLimit, share: u32) -> Bucket {
        let share = share.max(1);
        let interval = (limit.interval().as_nanos() as u64).saturating_mul(u64::from(share));
        Bucket {
            interval,
            tau: interval.saturating_mul(u64::from(limit.burst / share)),
        }
    }

    /// The client's next arrival time if a request at `now` is admitted (`tat`: its arrival
    /// time so far, 0 for a new client); else how long until it would be.
    pub fn admit(&self, tat: u64, now: u64) -> Result<u64, u64> {
        let start = tat.max(now);
        let ahead = start - now;
        if ahead > self.tau {
            Err(ahead - self.tau)
        } else {
            Ok(start.saturating_add(self.interval))
        }
    }
}

/// One rate limit on one worker: its bucket and the addresses it remembers.
pub struct Limiter {
    limit: RateLimit,
    bucket: Bucket,
    /// Times are nanoseconds since this (the limiter's own: a carried-over one keeps it).
    epoch: Instant,
    table: RefCell<AddrTable<u64>>,
}

impl Limiter {
    pub fn new(limit: RateLimit, share: u32, table_size: usize, epoch: Instant) -> Limiter {
        Limiter {
            limit,
            bucket: Bucket::new(&limit, share),
            epoch,
            table: RefCell::new(AddrTable::new(table_size)),
        }
    }

    fn nanos(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// The arrival time `key` would have after a request now, or how long to wait.
    fn check(&self, key: AddrKey, now: u64) -> Result<u64, u64> {
        let tat = *self.table.borrow_mut().entry(key, 0);
        self.bucket.admit(tat, now)
    }

    fn commit(&self, key: AddrKey, tat: u64) {
        *self.table.borrow_mut().entry(key, 0) = tat;
    }

    /// Addresses remembered now.
    #[cfg(test)]
    pub fn remembered(&self) -> usize {
        self.table.borrow().len()
    }
}

/// One generation's guards on one worker: the global rate limit and each route's.
pub struct Guards {
    global: Option<Rc<Limiter>>,
    routes: Table<RouteId, Option<Rc<Limiter>>>,
    /// How many workers share each client (1: steered).
    share: u32,
}

impl Guards {
    /// `None` when no route has access rules or a limit and no global rate is set: the
    /// request path then tests one `Option`.
    pub fn new(cfg: &Config) -> Option<Guards> {
        let any_route = cfg.routes.iter().any(|r| r.access.is_some());
        if !any_route && cfg.client_limits.rate.is_none() {
            return None;
        }
        let share = share_of(cfg);
        let size = cfg.client_limits.table_size;
        let epoch = Instant::now();
        let make = |l: RateLimit| Rc::new(Limiter::new(l, share, size, epoch));
        Some(Guards {
            global: cfg.client_limits.rate.map(make),
            routes: cfg.routes.map(|r| r.access.as_ref()?.limit.map(make)),
            share,
        })
    }

    /// Whether a request of `ip` on `route` (of `cfg`, this generation's) may be served now.
    pub fn check(&self, cfg: &Config, route: RouteId, ip: IpAddr, now: Instant) -> Option<Refusal> {
        if let Some(a) = cfg.routes[route].access.as_deref() {
            if !a.permits(ip) {
                return Some(Refusal::Denied);
            }
        }
        let key = key_of(ip);
        let limits = [self.global.as_deref(), self.routes[route].as_deref()];
        let mut next = [0u64; 2];
        for (l, n) in limits.iter().zip(next.iter_mut()) {
            if let Some(l) = l {
                match l.check(key, l.nanos(now)) {
                    Ok(tat) => *n = tat,
                    Err(wait) => {
                        let secs = wait.div_ceil(1_000_000_000).clamp(1, u64::from(u32::MAX));
                        return Some(Refusal::Limited {
                            retry_after: secs as u32,
                        });
                    }
                }
            }
        }
        for (l, n) in limits.iter().zip(next) {
            if let Some(l) = l {
                l.commit(key, n);
            }
        }
        None
    }

    /// After a reload: the global limiter and each route's (the route with the same host and
    /// path) are kept, buckets and all, when their limit and share did not change.
    pub fn carry_over(&mut self, prev: &Guards, old: &Config, new: &Config) {
        let same = |a: &Option<Rc<Limiter>>, b: &Option<Rc<Limiter>>| match (a, b) {
            (Some(a), Some(b)) => a.limit == b.limit && self.share == prev.share,
            _ => false,
        };
        if same(&self.global, &prev.global) {
            self.global = prev.global.clone();
        }
        for (i, r) in new.routes.enumerate() {
            let before = old
                .routes
                .position(|o| o.host == r.host && o.path_prefix == r.path_prefix);
            if let Some(o) = before {
                if same(&self.routes[i], &prev.routes[o]) {
                    self.routes[i] = prev.routes[o].clone();
                }
            }
        }
    }
}

/// Whether `cfg` counts clients (a rate or a connection limit): the listeners then steer
/// each client address to one worker (`shared::steer`), so the counts are exact.
///
/// Steering by the TCP peer is only right when the peer is the client: where a client
/// address comes from a PROXY header or `real_ip_from` (a balancer in front: its few
/// addresses would all land on one worker), this is false and the limits are divided
/// between the workers.
pub fn wants_steering(cfg: &Config) -> bool {
    behind_a_balancer(cfg).is_none() && counts_clients(cfg)
}

/// Whether `cfg` has a rate or a connection limit per client.
pub fn counts_clients(cfg: &Config) -> bool {
    let l = &cfg.client_limits;
    let routes = cfg.routes.iter();
    let route_limit = routes
        .filter_map(|r| r.access.as_ref())
        .any(|a| a.limit.is_some());
    l.rate.is_some() || l.connections.is_some() || route_limit
}

/// What names clients other than the TCP peer (for the start-up line), if anything does.
pub fn behind_a_balancer(cfg: &Config) -> Option<&'static str> {
    let proxied = cfg.listeners.iter().any(|l| l.proxy_protocol);
    match (proxied, !cfg.headers.real_ip_from.is_empty()) {
        (true, true) => Some("PROXY protocol headers and real_ip_from"),
        (true, false) => Some("PROXY protocol headers"),
        (false, true) => Some("real_ip_from"),
        (false, false) => None,
    }
}

/// How many workers one client's connections can reach.
fn share_of(cfg: &Config) -> u32 {
    if cfg.client_steering {
        1
    } else {
        u32::try_from(cfg.runtime.workers.max(1)).unwrap_or(u32::MAX)
    }
}

/// The open connections of each client address on one worker (entries only for addresses
/// with a connection open: bounded by the worker's connection limit).
#[derive(Default)]
pub struct ConnCounts {
    open: RefCell<HashMap<AddrKey, u32>>,
}

impl ConnCounts {
    /// Count a new connection of `key` in, unless `max` (the client's share on this worker)
    /// are open already.
    pub fn enter(&self, key: AddrKey, max: u32) -> bool {
        let mut open = self.open.borrow_mut();
        let n = open.entry(key).or_insert(0);
        if *n >= max {
            return false;
        }
        *n += 1;
        true
    }

    pub fn leave(&self, key: AddrKey) {
        let mut open = self.open.borrow_mut();
        if let Some(n) = open.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&key);
            }
        }
    }

    /// Addresses with a connection open.
    #[cfg(test)]
    pub fn clients(&self) -> usize {
        self.open.borrow().len()
    }
}

/// A client's connections allowed on one worker by `cfg` (`None`: no limit).
pub fn connections_per_worker(cfg: &Config) -> Option<u32> {
    let max = cfg.client_limits.connections?;
    Some((max / share_of(cfg)).max(1))
}

#[cfg(test)]
mod tests;
