//! Per-worker metrics: plain numbers a worker owns (in a `RefCell`, never shared), fed once per
//! request from its outcome record and per upstream attempt from the exchange; a scrape asks
//! every worker for a [`WorkerSnapshot`] through the workers' inbox, so it sees every request
//! completed before it (no timer publishes anything).
//!
//! Rendering (Prometheus text, `/status` JSON) is in `admin`; this file is what is counted.

use crate::config::{Config, GroupId, RouteId, ServerId, Table};
use crate::error::ProxyError;
use crate::record::Record;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Upper bounds of the latency histograms' buckets, in microseconds (then +Inf), 50 µs to
/// 10 s: most of this proxy's answers take well under a millisecond, so the low end is where
/// the buckets are needed. Fixed: the same for every worker and every scrape, so they add up.
pub const BUCKETS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// A latency histogram with fixed buckets: counts per bucket (not cumulative; the last is
/// +Inf) and the sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    pub counts: [u64; BUCKETS_US.len() + 1],
    pub sum_us: u64,
}

impl Histogram {
    pub fn observe(&mut self, d: Duration) {
        let us = d.as_micros().min(u128::from(u64::MAX)) as u64;
        let i = BUCKETS_US.partition_point(|&b| b < us);
        self.counts[i] += 1;
        self.sum_us += us;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn add(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.sum_us += o.sum_us;
    }
}

/// Every kind of failure, by name (`ProxyError` variants), for labels.
pub const FAULT_KINDS: [&str; 17] = [
    "bad_request",
    "header_timeout",
    "body_timeout",
    "client_gone",
    "body_too_large",
    "no_route",
    "method_not_supported",
    "forbidden",
    "upstream_refused",
    "connect_timeout",
    "upstream_timeout",
    "upstream_closed",
    "upstream_io",
    "bad_response",
    "no_resources",
    "no_live_upstream",
    "queue_timeout",
];

/// The index of `e`'s kind in [`FAULT_KINDS`].
pub fn fault_index(e: ProxyError) -> usize {
    use ProxyError::*;
    match e {
        Request(_) => 0,
        HeaderTimeout => 1,
        BodyTimeout => 2,
        ClientGone => 3,
        BodyTooLarge => 4,
        NoRoute => 5,
        MethodNotSupported => 6,
        Forbidden => 7,
        UpstreamRefused => 8,
        ConnectTimeout => 9,
        UpstreamTimeout => 10,
        UpstreamClosed => 11,
        UpstreamIo => 12,
        BadResponse(_) => 13,
        NoResources => 14,
        NoLiveUpstream => 15,
        QueueTimeout => 16,
    }
}

/// Retry reasons (`config::route_opts::RetryReason`), for the retries' label.
pub const RETRY_REASONS: usize = crate::config::route_opts::RetryReason::ALL.len();

/// Status classes 1xx..5xx (index 0..4).
pub const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

fn class_index(status: u16) -> usize {
    usize::from(status / 100).clamp(1, 5) - 1
}

/// Cache statuses, in the order of the cache counters.
pub const CACHE_STATUSES: [&str; 5] = ["hit", "miss", "bypass", "stale", "revalidated"];

fn cache_index(s: crate::cache::CacheStatus) -> usize {
    use crate::cache::CacheStatus::*;
    match s {
        Hit => 0,
        Miss => 1,
        Bypass => 2,
        Stale => 3,
        Revalidated => 4,
    }
}

/// One upstream server's counters on one worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Requests sent (every attempt that got as far as sending).
    pub requests: u64,
    /// Its answers, by the class of its status (the origin's, not the client's: nginx's
    /// `$upstream_status`).
    pub responses: [u64; 5],
    /// New connections opened.
    pub connects: u64,
    /// Failed attempts, by kind ([`FAULT_KINDS`]).
    pub failures: [u64; FAULT_KINDS.len()],
    /// Answers dropped for a retry on their status (a route's `retry.on` statuses): failed
    /// attempts too (`failures_total{kind="status"}`), as nginx counts an attempt that
    /// `proxy_next_upstream http_502` moved on from.
    pub retried_statuses: u64,
}

impl ServerCounts {
    /// The server answered with `status`.
    pub fn answered(&mut self, status: u16) {
        self.responses[class_index(status)] += 1;
    }

    /// An attempt on the server failed with `e` (its kind: `fault_index`).
    pub fn failed(&mut self, e: crate::error::ProxyError) {
        self.failures[fault_index(e)] += 1;
    }

    /// The server answered with `status`, which its route retries on: the answer was
    /// dropped and the request went to another server.
    pub fn retried_for(&mut self, status: u16) {
        self.answered(status);
        self.retried_statuses += 1;
    }

    /// Failed attempts of every kind.
    pub fn all_failures(&self) -> u64 {
        self.failures.iter().sum::<u64>() + self.retried_statuses
    }
}

/// What one worker counted since it started. Its tables are laid out like the config it is
/// keyed on (`ProxyWorker::keyed_now`): per route, per group, per server of a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Requests refused before routing (bad head, no route), per status class.
    pub unrouted: [u64; 5],
    /// Per route, per status class.
    pub requests: Table<RouteId, [u64; 5]>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Requests that ended in a failure, by kind.
    pub faults: [u64; FAULT_KINDS.len()],
    /// Durations of the requests refused before routing.
    pub unrouted_time: Histogram,
    /// Per route (bounded by the config: one histogram per route).
    pub request_time: Table<RouteId, Histogram>,
    pub upstream_ttfb: Histogram,
    /// Per group, per server.
    pub servers: Table<GroupId, Table<ServerId, ServerCounts>>,
    /// Per route, by reason (`RetryReason::ALL`): attempts after the first for a request.
    pub retries: Table<RouteId, [u64; RETRY_REASONS]>,
    /// Failures that would have been retried but for the worker's retry budget.
    pub retry_budget_exhausted: u64,
    /// Per route, per cache status.
    pub cache: Table<RouteId, [u64; 5]>,
    /// Per route: requests refused by a rate limit (429) and by `allow`/`deny` (403).
    pub refused: Table<RouteId, [u64; 2]>,
    /// Per route: what the response stores a reload replaced had counted (evictions,
    /// drops, revalidation errors, revalidations skipped), so the counters go on.
    pub cache_ended: Table<RouteId, [u64; 4]>,
}

impl Metrics {
    pub fn new(cfg: &Config) -> Metrics {
        Metrics {
            requests: cfg.routes.map(|_| [0; 5]),
            request_time: cfg.routes.map(|_| Histogram::default()),
            servers: cfg
                .groups
                .map(|g| g.servers.map(|_| ServerCounts::default())),
            retries: cfg.routes.map(|_| [0; RETRY_REASONS]),
            cache: cfg.routes.map(|_| [0; 5]),
            refused: cfg.routes.map(|_| [0; 2]),
            cache_ended: cfg.routes.map(|_| [0; 4]),
            ..Metrics::default()
        }
    }

    /// Count one finished request.
    pub fn record(&mut self, r: &Record, now: Instant) {
        let status = r.final_status();
        let counts = match r.route {
            None => Some(&mut self.unrouted),
            Some(route) => self.requests.get_mut(route),
        };
        if let Some(counts) = counts {
            counts[class_index(status)] += 1;
        }
        // Saturating: a request's count includes the length its client declared.
        self.bytes_in = self.bytes_in.saturating_add(r.bytes_in);
        self.bytes_out += r.bytes_out;
        if let Some(e) = r.fault {
            self.faults[fault_index(e)] += 1;
        }
        let time = match r.route {
            None => Some(&mut self.unrouted_time),
            Some(route) => self.request_time.get_mut(route),
        };
        if let Some(h) = time {
            h.observe(r.duration(now));
        }
        if let Some(t) = r.upstream_ttfb {
            self.upstream_ttfb.observe(t);
        }
        if let Some(s) = r.upstream {
            if let Some(c) = self.server(s.group, s.server) {
                c.answered(r.upstream_status);
            }
        }
        if let (Some(route), Some(cs)) = (r.route, r.cache) {
            if let Some(c) = self.cache.get_mut(route) {
                c[cache_index(cs)] += 1;
            }
        }
        if let (Some(route), Some(why)) = (r.route, r.refused) {
            if let Some(c) = self.refused.get_mut(route) {
                c[usize::from(why == crate::limit::Refusal::Denied)] += 1;
            }
        }
    }

    /// After a reload: the counts keyed by `old`'s ids move to `new`'s, by name (routes by
    /// their label, servers by group and server name). What the new config no longer has
    /// ends here: its series stop at the reload, as a removed target's do in Prometheus.
    pub fn rekey(&mut self, old: &Config, new: &Config) -> SameIds {
        let same = SameIds::between(old, new);
        let mut next = Metrics::new(new);
        next.bytes_in = self.bytes_in;
        next.bytes_out = self.bytes_out;
        next.faults = self.faults;
        next.upstream_ttfb = std::mem::take(&mut self.upstream_ttfb);
        next.unrouted = self.unrouted;
        for (r, counts) in self.requests.enumerate() {
            if let Some(nr) = same.route(r) {
                add_row(&mut next.requests[nr], counts);
            }
        }
        next.unrouted_time = std::mem::take(&mut self.unrouted_time);
        for (r, h) in self.request_time.enumerate() {
            if let Some(nr) = same.route(r) {
                next.request_time[nr].add(h);
            }
        }
        for (r, counts) in self.cache.enumerate() {
            if let Some(nr) = same.route(r) {
                add_row(&mut next.cache[nr], counts);
            }
        }
        for (r, counts) in self.refused.enumerate() {
            if let Some(nr) = same.route(r) {
                add_row(&mut next.refused[nr], counts);
            }
        }
        for (g, servers) in self.servers.enumerate() {
            for (s, c) in servers.enumerate() {
                if let Some((ng, ns)) = same.server(old, new, g, s) {
                    next.servers[ng][ns] = c.clone();
                }
            }
        }
        for (r, counts) in self.retries.enumerate() {
            if let Some(nr) = same.route(r) {
                add_row(&mut next.retries[nr], counts);
            }
        }
        for (r, counts) in self.cache_ended.enumerate() {
            if let Some(nr) = same.route(r) {
                add_row(&mut next.cache_ended[nr], counts);
            }
        }
        next.retry_budget_exhausted = self.retry_budget_exhausted;
        *self = next;
        same
    }

    /// The store of `route` was replaced (a reload changed its cache settings or origin):
    /// keep what it counted, as the route's counters.
    pub fn store_replaced(&mut self, route: RouteId, st: &crate::cache::StoreStats) {
        if let Some(row) = self.cache_ended.get_mut(route) {
            let counts = [
                st.evicted,
                st.dropped_too_large + st.dropped_no_room,
                st.revalidation_errors,
                st.revalidations_skipped,
            ];
            add_row(row, &counts);
        }
    }

    pub fn server(&mut self, group: GroupId, server: ServerId) -> Option<&mut ServerCounts> {
        self.servers.get_mut(group)?.get_mut(server)
    }

    /// Add another worker's counts (same config: same shape).
    pub fn add(&mut self, o: &Metrics) {
        add_row(&mut self.unrouted, &o.unrouted);
        add_rows(&mut self.requests, &o.requests);
        add_rows(&mut self.cache, &o.cache);
        add_rows(&mut self.refused, &o.refused);
        add_rows(&mut self.cache_ended, &o.cache_ended);
        self.bytes_in = self.bytes_in.saturating_add(o.bytes_in);
        self.bytes_out += o.bytes_out;
        add_row(&mut self.faults, &o.faults);
        self.unrouted_time.add(&o.unrouted_time);
        for (a, b) in self.request_time.iter_mut().zip(o.request_time.iter()) {
            a.add(b);
        }
        self.upstream_ttfb.add(&o.upstream_ttfb);
        for (g, og) in self.servers.iter_mut().zip(o.servers.iter()) {
            for (s, os) in g.iter_mut().zip(og.iter()) {
                s.requests += os.requests;
                s.connects += os.connects;
                add_row(&mut s.responses, &os.responses);
                add_row(&mut s.failures, &os.failures);
                s.retried_statuses += os.retried_statuses;
            }
        }
        add_rows(&mut self.retries, &o.retries);
        self.retry_budget_exhausted += o.retry_budget_exhausted;
    }
}

fn add_row(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

fn add_rows<const N: usize>(a: &mut Table<RouteId, [u64; N]>, b: &Table<RouteId, [u64; N]>) {
    for (x, y) in a.iter_mut().zip(b) {
        add_row(x, y);
    }
}

/// One upstream server's state on one worker at a scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerState {
    /// Idle keep-alive connections in the pool.
    pub idle: u64,
    /// Requests in flight on it (connections in use).
    pub busy: u64,
    /// Not marked failed (passive max_fails/fail_timeout).
    pub up: bool,
    /// Active health checks' verdict: "unchecked", "up" or "down" (`balance::Health`).
    pub health: &'static str,
}

/// One route's response store at a scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheState {
    pub entries: u64,
    pub bytes: u64,
    pub evicted: u64,
    pub dropped: u64,
    pub revalidation_errors: u64,
    pub revalidations_skipped: u64,
}

/// One worker's answer to a scrape.
#[derive(Debug, Clone, Default)]
pub struct WorkerSnapshot {
    pub worker: usize,
    /// The generation the counts are keyed on (its config names routes and servers).
    pub generation: u64,
    pub cfg: Option<std::sync::Arc<Config>>,
    pub metrics: Metrics,
    /// Client connections open now, and accepted since start.
    pub open: u64,
    pub accepted: u64,
    pub accept_errors: u64,
    /// Connection tasks ended by a panic.
    pub panics: u64,
    /// TLS client handshakes: full, resumed, failed, and plain HTTP on a TLS listener.
    pub tls: [u64; 4],
    /// Response bodies spliced from socket to socket (`splice.rs`).
    pub spliced: u64,
    /// Connections closed at accept by `[client_limits] connections`.
    pub limited_connections: u64,
    /// PROXY protocol listeners' connections without a valid header: invalid, truncated,
    /// nothing sent.
    pub proxy_protocol: [u64; 3],
    /// Per group, per server.
    pub servers: Table<GroupId, Table<ServerId, ServerState>>,
    /// Per group: requests waiting for room (`max_conns`) or for a descriptor.
    pub queued: Table<GroupId, u64>,
    /// Per route (`None`: not cached).
    pub caches: Table<RouteId, Option<CacheState>>,
    /// The worker is draining (shutdown began).
    pub draining: bool,
    /// The worker's drain is over: these are its final counts (`Finals`).
    pub drained: bool,
    /// Access log lines dropped: failed writes, or a file that could not take them without
    /// waiting (a pipe nobody reads).
    pub access_log_dropped: u64,
}

/// Each worker's last snapshot, left when its drain is over: a worker that ended no longer
/// answers the admin's asks while the others still drain, and without its counts a scrape's
/// sums would drop (or the scrape would fail) until the whole process is gone. Written once
/// per worker, read only by the admin thread: never touched on the request path.
pub struct Finals(Box<[std::sync::Mutex<Option<WorkerSnapshot>>]>);

impl Finals {
    pub fn new(workers: usize) -> Finals {
        Finals((0..workers).map(|_| Default::default()).collect())
    }

    /// Worker `snap.worker`'s counts once it serves nothing more.
    pub fn leave(&self, mut snap: WorkerSnapshot) {
        snap.drained = true;
        if let Some(slot) = self.0.get(snap.worker) {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(snap);
        }
    }

    /// Worker `id`'s final counts, if it left them.
    pub fn of(&self, id: usize) -> Option<WorkerSnapshot> {
        let slot = self.0.get(id)?;
        slot.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A request of `old` in flight across a reload, counted under the same names in `new` (the
/// generation the metrics are keyed on now): its route and server there, if they stay.
pub fn same_record(old: &Config, new: &Config, rec: &Record) -> Record {
    let mut r = rec.counted();
    r.route = rec.route.and_then(|i| same_route(old, new, i));
    let same = |u: crate::record::Served| {
        let (group, server) = same_server(old, new, u.group, u.server)?;
        Some(crate::record::Served { group, server })
    };
    r.upstream = rec.upstream.and_then(same);
    r.tried = rec.tried.and_then(same);
    r
}

/// Route `r` of `old` in `new`: the route with the same label (host and path). One scan of
/// `new`'s routes: a reload maps them all at once with [`SameIds`].
pub fn same_route(old: &Config, new: &Config, r: RouteId) -> Option<RouteId> {
    let o = old.routes.get(r)?;
    new.routes
        .position(|n| n.host == o.host && n.path_prefix == o.path_prefix)
}

/// Where `old`'s routes and groups are in `new` (by label, by name), found in one pass over
/// each: a reload re-keys every counter with it. (Each id looked up on its own scanned
/// `new`, formatting every label: a reload of 3,000 routes held its worker 0.9 s.)
pub struct SameIds {
    routes: Table<RouteId, Option<RouteId>>,
    groups: Table<GroupId, Option<GroupId>>,
}

impl SameIds {
    pub fn between(old: &Config, new: &Config) -> SameIds {
        let mut labels = HashMap::with_capacity(new.routes.len());
        for (i, r) in new.routes.enumerate() {
            // The first route of a label, as `same_route` finds it.
            labels
                .entry((r.host.as_deref(), r.path_prefix.as_str()))
                .or_insert(i);
        }
        let mut names = HashMap::with_capacity(new.groups.len());
        for (i, g) in new.groups.enumerate() {
            names.entry(g.name.as_str()).or_insert(i);
        }
        SameIds {
            routes: old.routes.map(|r| {
                labels
                    .get(&(r.host.as_deref(), r.path_prefix.as_str()))
                    .copied()
            }),
            groups: old.groups.map(|g| names.get(g.name.as_str()).copied()),
        }
    }

    pub fn route(&self, r: RouteId) -> Option<RouteId> {
        self.routes.get(r).copied().flatten()
    }

    /// Server `s` of group `g` of `old` in `new`, by group and server name.
    pub fn server(
        &self,
        old: &Config,
        new: &Config,
        g: GroupId,
        s: ServerId,
    ) -> Option<(GroupId, ServerId)> {
        let ng = self.groups.get(g).copied().flatten()?;
        let name = &old.groups.get(g)?.servers.get(s)?.name;
        let ns = new.groups[ng].servers.position(|x| x.name == *name)?;
        Some((ng, ns))
    }
}

/// Group `g` of `old` in `new`, by name.
pub fn same_group(old: &Config, new: &Config, g: GroupId) -> Option<GroupId> {
    let name = &old.groups.get(g)?.name;
    new.groups.position(|x| x.name == *name)
}

/// Server `s` of group `g` of `old` in `new`, by group and server name.
pub fn same_server(
    old: &Config,
    new: &Config,
    g: GroupId,
    s: ServerId,
) -> Option<(GroupId, ServerId)> {
    let name = &old.groups.get(g)?.servers.get(s)?.name;
    let ng = same_group(old, new, g)?;
    let ns = new.groups[ng].servers.position(|x| x.name == *name)?;
    Some((ng, ns))
}

/// The label of route `i` (`None`: requests refused before routing): its host, if any, and
/// its path prefix.
pub fn route_label(cfg: &Config, i: Option<RouteId>) -> String {
    match i.and_then(|i| cfg.routes.get(i)) {
        None => "(none)".to_string(),
        Some(r) => format!("{}{}", r.host.as_deref().unwrap_or(""), r.path_prefix),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config of `routes` (host, path) to group `app` and `groups` (name, servers).
    fn config(routes: &[(Option<&str>, &str)], groups: &[(&str, &[&str])]) -> Config {
        let mut text = String::from("[[listen]]\naddr = \"127.0.0.1:8080\"\n");
        for (name, servers) in groups {
            let servers: Vec<String> = servers.iter().map(|s| format!("\"{s}\"")).collect();
            text += &format!("[upstream.{name}]\nservers = [{}]\n", servers.join(", "));
        }
        for (host, path) in routes {
            text += "[[route]]\n";
            if let Some(h) = host {
                text += &format!("host = \"{h}\"\n");
            }
            text += &format!("path = \"{path}\"\nupstream = \"{}\"\n", groups[0].0);
        }
        crate::config::from_toml("m.toml", &text).expect("the test's config")
    }

    #[test]
    fn a_reload_maps_routes_by_label_and_servers_by_name() {
        let r = |i: usize| RouteId::new(i);
        let g = |i: usize| GroupId::new(i);
        let s = |i: usize| ServerId::new(i);
        let old = config(
            &[
                (None, "/a/"),
                (Some("x.test"), "/a/"),
                (None, "/gone/"),
                (None, "/b/"),
            ],
            &[
                ("app", &["127.0.0.1:1", "127.0.0.1:2"]),
                ("db", &["127.0.0.1:3"]),
            ],
        );
        let new = config(
            &[
                (None, "/b/"),
                (None, "/a/"),
                (Some("x.test"), "/a/"),
                (None, "/new/"),
            ],
            &[
                ("db", &["127.0.0.1:3"]),
                ("app", &["127.0.0.1:2", "127.0.0.1:9"]),
            ],
        );
        let same = SameIds::between(&old, &new);
        for i in 0..4 {
            assert_eq!(same.route(r(i)), same_route(&old, &new, r(i)), "route {i}");
        }
        let routes: Vec<_> = (0..4).map(|i| same.route(r(i))).collect();
        assert_eq!(routes, [Some(r(1)), Some(r(2)), None, Some(r(0))]);
        // Groups are in name order (app, db) whichever order the file has them in.
        assert_eq!(same.server(&old, &new, g(0), s(1)), Some((g(0), s(0))));
        assert_eq!(same.server(&old, &new, g(0), s(0)), None);
        assert_eq!(same.server(&old, &new, g(1), s(0)), Some((g(1), s(0))));
        for (gi, si) in [(0, 0), (0, 1), (1, 0)] {
            assert_eq!(
                same.server(&old, &new, g(gi), s(si)),
                same_server(&old, &new, g(gi), s(si))
            );
        }
    }

    #[test]
    fn histogram_buckets_hold_their_upper_bound() {
        let mut h = Histogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_micros(51));
        h.observe(Duration::from_secs(60));
        assert_eq!((h.counts[0], h.counts[1], h.counts[17]), (1, 1, 1));
        assert_eq!((h.count(), h.sum_us), (3, 60_000_101));
    }

    #[test]
    fn classes_and_kinds() {
        assert_eq!(
            [100, 204, 302, 499, 503, 0, 999].map(class_index),
            [0, 1, 2, 3, 4, 0, 4]
        );
        assert_eq!(
            FAULT_KINDS[fault_index(ProxyError::NoResources)],
            "no_resources"
        );
        assert_eq!(
            FAULT_KINDS[fault_index(ProxyError::ConnectTimeout)],
            "connect_timeout"
        );
    }
}
