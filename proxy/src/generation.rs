//! One configuration generation: the resolved config and everything a worker builds from it
//! (router, balancers, pools, response stores, open-file caches).
//!
//! Invariants:
//! - A request takes its worker's current generation (an `Rc`) once, when its head is parsed,
//!   and uses only that one until its exchange ends: the group, server and route ids it holds
//!   (`config::ids`) are positions in *its* config, valid across every await. A kept-alive connection takes the
//!   current generation again at its next request.
//! - A reload builds a new generation and makes it current; the old one lives as long as a
//!   request still holds it, then its own state (pools, stores no one carried over) is dropped.
//! - Balancers, pools, stores and open-file caches are `Rc`s so that a new generation can
//!   carry over the ones whose configuration did not change (see `reload.rs`).
//! - Each table is indexed by its own kind of id: balancers by `GroupId`, pools by `GroupId`
//!   and `ServerId` ([`Generation::pool`]), cached routes by [`CacheId`], sites by [`SiteId`].
//!   The cached routes' table is the only one holding the response stores: the dispatch
//!   reaches a store by `CacheId`, and purges, the store counts and the metrics walk the
//!   same table (each entry names its route).

use crate::balance::Balancer;
use crate::cache::Store;
use crate::config::cache::CacheEntry;
use crate::config::ids::Id;
use crate::config::{Action, Config, GroupId, RouteId, ServerId, Table};
use crate::pool::ServerPool;
use crate::response_memo::ResponseMemo;
use crate::route::Router;
use crate::static_files::StaticSite;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

pub struct Generation {
    /// 1 for the config the proxy started with, then one more per applied reload.
    pub number: u64,
    pub cfg: Arc<Config>,
    pub router: Router,
    /// Per group: its balancer.
    balancers: Table<GroupId, Rc<RefCell<Balancer>>>,
    /// Per group, per server: idle keep-alive connections.
    pools: Table<GroupId, Table<ServerId, Rc<RefCell<ServerPool>>>>,
    /// Per group, per server: the last response head it sent, parsed (a hot object's head
    /// repeats until its `Date` changes).
    heads: Table<GroupId, Table<ServerId, RefCell<ResponseMemo>>>,
    /// The cached routes, in route order: each one's settings and response store, named by
    /// `Dispatch::Cached` ([`CacheId`]) and found by the metrics and purges through its route.
    cached: Table<CacheId, CachedRoute>,
    /// The static routes' sites, in route order: what `Dispatch::Static` names by [`SiteId`].
    sites: Table<SiteId, Arc<StaticSite>>,
    /// Per route: its position in `cached` or `sites` (0 for the other routes, never read).
    slot: Table<RouteId, usize>,
    /// Per group: the rustls client config of a TLS group, this worker's own (its session
    /// store is this worker's: no lock shared with another worker).
    upstream_tls: Table<GroupId, Option<Arc<rustls::ClientConfig>>>,
    /// The open-file caches of the static routes' roots: what they hold open (descriptors,
    /// small files' bytes) goes with the generation, unless the next one serves the root too.
    pub statics: crate::static_files::cache::Sites,
    /// Access rules and per client rate limits (`crate::limit`); `None`: none configured.
    pub guards: Option<crate::limit::Guards>,
    /// This worker's access log for the requests of this generation (`cfg.access_log`):
    /// carried over by a reload that leaves `access_log` as it was, a new one (on the file
    /// the reloader opened) when it changed, so a request finishing after a reload still
    /// writes its line where and how its generation said. Set by the worker
    /// (`Observability::log_for`), never by `new`, which must not open files.
    pub access_log: Option<Rc<RefCell<crate::access_log::AccessLog>>>,
    // The TLS acceptor configs are in `cfg.listeners`: a handshake takes the current
    // generation's (see `client::serve_tls`).
}

impl Generation {
    /// A generation built from scratch: empty pools and stores, fresh balancers. `seed` makes
    /// random2 differ between workers.
    pub fn new(number: u64, cfg: Arc<Config>, seed: u64) -> Self {
        let mut cached: Table<CacheId, CachedRoute> = Table::new();
        let mut sites: Table<SiteId, Arc<StaticSite>> = Table::new();
        let mut slot: Table<RouteId, usize> = Table::new();
        // Each route's action is matched here, once per generation, not per request.
        for (route, r) in cfg.routes.enumerate() {
            let at = match &r.action {
                Action::Proxy { cache: Some(c), .. } => cached
                    .push(CachedRoute {
                        route,
                        cfg: c.clone(),
                        store: Rc::new(RefCell::new(Store::for_route(c))),
                    })
                    .index(),
                Action::Static(site) => sites.push(site.clone()).index(),
                _ => 0,
            };
            slot.push(at);
        }
        Generation {
            number,
            router: Router::new(&cfg.routes),
            balancers: cfg
                .groups
                .map(|g| Rc::new(RefCell::new(Balancer::new(g, seed, cfg.runtime.workers)))),
            pools: cfg
                .groups
                .map(|g| g.servers.map(|_| Rc::new(RefCell::new(ServerPool::new(g))))),
            heads: cfg.groups.map(|g| g.servers.map(|_| RefCell::default())),
            upstream_tls: cfg.groups.map(|g| {
                let t = g.tls.as_ref()?;
                // Built once at resolve already (`resolve` checked it builds).
                t.client.config().ok().map(|(c, _)| c)
            }),
            statics: crate::static_files::cache::Sites::new(cfg.routes.iter().filter_map(|r| {
                match &r.action {
                    Action::Static(site) => Some(site.root.as_path()),
                    _ => None,
                }
            })),
            guards: crate::limit::Guards::new(&cfg),
            access_log: None,
            cached,
            sites,
            slot,
            cfg,
        }
    }

    /// The [`CacheId`] of route `route`, a cached route.
    pub fn cache_id(&self, route: RouteId) -> CacheId {
        CacheId(self.slot[route])
    }

    /// The [`SiteId`] of route `route`, a static route.
    pub fn site_id(&self, route: RouteId) -> SiteId {
        SiteId(self.slot[route])
    }

    /// A cached route's settings and store.
    pub fn cached(&self, id: CacheId) -> &CachedRoute {
        &self.cached[id]
    }

    /// Every cached route (for metrics), in route order.
    pub fn cached_routes(&self) -> impl Iterator<Item = &CachedRoute> {
        self.cached.iter()
    }

    /// Every response store (for purges and the store counts).
    pub fn stores(&self) -> impl Iterator<Item = &Rc<RefCell<Store>>> {
        self.cached.iter().map(|c| &c.store)
    }

    /// A static route's site.
    pub fn site(&self, id: SiteId) -> &StaticSite {
        &self.sites[id]
    }

    /// Group `g`'s balancer.
    pub fn balancer(&self, g: GroupId) -> &Rc<RefCell<Balancer>> {
        &self.balancers[g]
    }

    /// Every group's balancer.
    pub fn balancers(&self) -> &Table<GroupId, Rc<RefCell<Balancer>>> {
        &self.balancers
    }

    /// The idle connections to server `s` of group `g`.
    pub fn pool(&self, g: GroupId, s: ServerId) -> &Rc<RefCell<ServerPool>> {
        &self.pools[g][s]
    }

    /// The last response head server `s` of group `g` sent, for [`parse_final_response_memo`].
    ///
    /// [`parse_final_response_memo`]: shared::http::parse_final_response_memo
    pub fn head_memo(&self, g: GroupId, s: ServerId) -> &RefCell<ResponseMemo> {
        &self.heads[g][s]
    }

    /// Group `g`'s server pools.
    pub fn pools(&self, g: GroupId) -> &Table<ServerId, Rc<RefCell<ServerPool>>> {
        &self.pools[g]
    }

    /// Group `g`'s rustls client config (a TLS group's; `None` for plain HTTP).
    pub fn upstream_tls(&self, g: GroupId) -> Option<&Arc<rustls::ClientConfig>> {
        self.upstream_tls[g].as_ref()
    }
}

/// A cached route of a generation: its route, settings and response store.
pub struct CachedRoute {
    pub route: RouteId,
    pub cfg: Arc<CacheEntry>,
    pub store: Rc<RefCell<Store>>,
}

/// A cached route's position in its generation's table ([`Generation::cached`]): made by
/// the request's one dispatch, valid in the generation the request holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheId(usize);

/// A static route's position in its generation's table ([`Generation::site`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteId(usize);

impl Id for CacheId {
    fn from_index(i: usize) -> Self {
        CacheId(i)
    }
    fn index(self) -> usize {
        self.0
    }
}

impl Id for SiteId {
    fn from_index(i: usize) -> Self {
        SiteId(i)
    }
    fn index(self) -> usize {
        self.0
    }
}

/// What a new generation took over from the one before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Carried {
    /// Server pools (idle upstream connections) kept, of all the new generation's.
    pub pools_kept: usize,
    pub pools: usize,
    /// Idle upstream connections the kept pools held.
    pub idle_kept: usize,
    /// Response stores kept, of all the new generation's.
    pub caches_kept: usize,
    pub caches: usize,
}

impl Generation {
    /// The generation after `prev`, built from `cfg`, carrying over what did not change:
    /// - a server's pool, when a server with the same addresses (host names resolved again)
    ///   and pool settings was in `prev` (each old pool goes to one new server at most);
    /// - a group's balancer whole (state and requests in flight), when its servers and
    ///   balancing are as they were; otherwise a new balancer in which each server that
    ///   was there before keeps its failure state, and, in the group of the same name, its
    ///   requests in flight and the group its queue (`share_rooms`);
    /// - a cached route's store, when a route with the same host and path had the same
    ///   cache settings and forwarded the same requests to the same origin ([`Forwards`]);
    /// - a static root's open-file cache, when `prev` served the same root;
    /// - a rate limit's buckets, when its route (same host and path) has the same limit.
    ///
    /// Requests still on `prev` keep using it (and its pools); what was not carried over is
    /// dropped with it.
    pub fn next(prev: &Generation, number: u64, cfg: Arc<Config>, seed: u64) -> (Self, Carried) {
        let mut g = Generation::new(number, cfg, seed);
        let mut carried = Carried::default();
        g.carry_pools(prev, &mut carried);
        g.carry_balancers(prev);
        g.carry_caches(prev, &mut carried);
        g.statics.carry_over(&prev.statics);
        if let (Some(new), Some(old)) = (g.guards.as_mut(), prev.guards.as_ref()) {
            new.carry_over(old, &prev.cfg, &g.cfg);
        }
        (g, carried)
    }

    fn carry_pools(&mut self, prev: &Generation, carried: &mut Carried) {
        // Old pools, each taken once.
        let mut old: Vec<Option<OldPool<'_>>> = Vec::new();
        for (gi, group) in prev.cfg.groups.enumerate() {
            for (si, server) in group.servers.enumerate() {
                old.push(Some(OldPool {
                    addrs: &server.addrs,
                    key: PoolKey::of(group),
                    pool: prev.pool(gi, si),
                }));
            }
        }
        for (gi, group) in self.cfg.groups.enumerate() {
            let key = PoolKey::of(group);
            for (si, server) in group.servers.enumerate() {
                carried.pools += 1;
                let same = |o: &OldPool<'_>| o.addrs == server.addrs.as_slice() && o.key == key;
                let found = old.iter_mut().find(|o| o.as_ref().is_some_and(same));
                if let Some(OldPool { pool, .. }) = found.and_then(Option::take) {
                    carried.pools_kept += 1;
                    carried.idle_kept += pool.borrow().idle();
                    self.pools[gi][si] = pool.clone();
                }
            }
        }
    }

    fn carry_balancers(&mut self, prev: &Generation) {
        for (gi, group) in self.cfg.groups.enumerate() {
            let same = prev.cfg.groups.position(|o| {
                o.name == group.name && o.servers == group.servers && o.balance == group.balance
            });
            if let Some(oi) = same {
                self.balancers[gi] = prev.balancers[oi].clone();
                continue;
            }
            let mut b = self.balancers[gi].borrow_mut();
            for (si, server) in group.servers.enumerate() {
                let before = prev.cfg.groups.enumerate().find_map(|(oi, o)| {
                    let sj = o.servers.position(|s| s.addrs == server.addrs)?;
                    Some((oi, sj))
                });
                if let Some((oi, sj)) = before {
                    b.adopt_failures(si, &prev.balancers[oi].borrow(), sj);
                }
            }
            if let Some(oi) = prev.cfg.groups.position(|o| o.name == group.name) {
                share_rooms(&mut b, group, &prev.cfg.groups[oi], &prev.balancers[oi]);
            }
        }
    }

    /// A cached route takes the store of the route of `prev` with the same cache settings
    /// that forwards alike ([`Forwards`]); the dispatch's table is the one the store is
    /// replaced in, so nothing else needs rebuilding.
    fn carry_caches(&mut self, prev: &Generation, carried: &mut Carried) {
        let old: Vec<Forwards<'_>> = prev
            .cached
            .iter()
            .map(|o| Forwards::of(&prev.cfg, o.route))
            .collect();
        for c in self.cached.iter_mut() {
            carried.caches += 1;
            let forwards = Forwards::of(&self.cfg, c.route);
            let before = prev
                .cached
                .iter()
                .zip(&old)
                .find(|(o, f)| o.cfg == c.cfg && **f == forwards)
                .map(|(o, _)| o);
            if let Some(o) = before {
                carried.caches_kept += 1;
                c.store = o.store.clone();
            }
        }
    }
}

/// What a cached route forwards, and where: what it matches (host, path prefix), the origin
/// (its group's servers as written, deduplicated and in order, their TLS names, a PROXY
/// header), and what the request becomes on its way (`strip_prefix`, `request_headers`, the
/// `[headers]` fields the proxy writes). A store holds what that origin answered those
/// requests, keyed by the client's URL and varied on the values the origin got
/// (`cache::vary`): it answers for the route only while all of this stays. The rest (the
/// response's edits, timeouts, retries, balancing, weights) leaves the answers as they were.
#[derive(PartialEq)]
struct Forwards<'a> {
    host: Option<&'a str>,
    path_prefix: &'a str,
    servers: Vec<(&'a str, Option<&'a rustls::pki_types::ServerName<'static>>)>,
    proxy_protocol: Option<crate::config::send_proxy::SendProxy>,
    strip: Option<usize>,
    request: Option<&'a crate::config::route_opts::HeaderEdits>,
    /// `preserve_host`, `x_forwarded_for`, `x_real_ip`, `x_forwarded_proto`.
    headers: [bool; 4],
}

impl<'a> Forwards<'a> {
    fn of(cfg: &'a Config, route: RouteId) -> Forwards<'a> {
        let r = &cfg.routes[route];
        let group = r.action.group().map(|g| &cfg.groups[g]);
        let mut servers: Vec<_> = group
            .into_iter()
            .flat_map(|g| {
                g.servers.enumerate().map(move |(si, s)| {
                    let tls = g.tls.as_ref().map(|t| &t.names[si]);
                    (s.host.as_str(), tls)
                })
            })
            .collect();
        // A `resolve` group has a server per address of a name: the name is the origin.
        servers.sort_by(|a, b| a.0.cmp(b.0));
        servers.dedup();
        let opts = r.opts.as_deref();
        let h = &cfg.headers;
        Forwards {
            host: r.host.as_deref(),
            path_prefix: &r.path_prefix,
            servers,
            proxy_protocol: group.and_then(|g| g.proxy_protocol),
            strip: opts.and_then(|o| o.strip),
            request: opts.and_then(|o| o.request.as_ref()),
            headers: [
                h.preserve_host,
                h.x_forwarded_for,
                h.x_real_ip,
                h.x_forwarded_proto,
            ],
        }
    }
}

/// `b`, the new balancer of `group`, takes over from `old`, the balancer of `old_group` (the
/// same name, the previous generation) its queue and, for each server with the same
/// addresses (each old one to one new one at most), its count of requests in flight: the
/// requests still on the old generation hold rooms under `max_conns` until they end, and
/// those waiting for one keep their places. Within a generation two groups listing one
/// address count apart; so do they across one.
fn share_rooms(
    b: &mut Balancer,
    group: &crate::config::UpstreamGroup,
    old_group: &crate::config::UpstreamGroup,
    old: &RefCell<Balancer>,
) {
    let old = old.borrow();
    let mut taken: Vec<ServerId> = Vec::new();
    for (si, server) in group.servers.enumerate() {
        let same = old_group
            .servers
            .enumerate()
            .find(|(sj, o)| o.addrs == server.addrs && !taken.contains(sj));
        if let Some((sj, _)) = same {
            taken.push(sj);
            b.share_load(si, &old, sj);
        }
    }
    b.share_queue(&old);
}

/// A pool of the previous generation, with what decides whether a new server takes it.
struct OldPool<'a> {
    addrs: &'a [std::net::SocketAddr],
    key: PoolKey,
    pool: &'a Rc<RefCell<ServerPool>>,
}

/// The group settings a server's pool is built from: a pool is carried over only to a
/// server whose group pools the same way.
#[derive(Clone, Copy, PartialEq, Eq)]
struct PoolKey {
    keepalive: usize,
    timeout: std::time::Duration,
    requests: u64,
    check: std::time::Duration,
}

impl PoolKey {
    fn of(g: &crate::config::UpstreamGroup) -> PoolKey {
        PoolKey {
            keepalive: g.keepalive,
            timeout: g.keepalive_timeout,
            requests: g.keepalive_requests,
            check: g.keepalive_check,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const G: GroupId = GroupId::new(0);
    const S0: ServerId = ServerId::new(0);
    const S1: ServerId = ServerId::new(1);

    fn cfg(servers: &str, balance: &str, cache_ttl: &str) -> Arc<Config> {
        let text = format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[upstream.app]\nservers = [{servers}]\n\
             balance = \"{balance}\"\n[[route]]\npath = \"/\"\nupstream = \"app\"\n\
             cache = {{ ttl = \"{cache_ttl}\" }}\n"
        );
        Arc::new(crate::config::from_toml("t.toml", &text).expect("config"))
    }

    #[test]
    fn what_stays_is_carried_over_and_what_changed_is_new() {
        let a = "\"127.0.0.1:9001\", \"127.0.0.1:9002\"";
        let g1 = Generation::new(1, cfg(a, "round-robin", "1m"), 7);
        g1.balancer(G).borrow_mut().failed(S1, Instant::now());
        assert!(g1.balancer(G).borrow().is_down(S1, Instant::now()));

        // Same servers, balancing and cache: everything is the same object.
        let (g2, c) = Generation::next(&g1, 2, cfg(a, "round-robin", "1m"), 7);
        assert!(Rc::ptr_eq(g1.pool(G, S0), g2.pool(G, S0)));
        assert!(Rc::ptr_eq(g1.pool(G, S1), g2.pool(G, S1)));
        assert!(Rc::ptr_eq(g1.balancer(G), g2.balancer(G)));
        // The dispatch's table holds the carried store, not a new one.
        let store = |g: &Generation| g.cached(g.cache_id(RouteId::new(0))).store.clone();
        assert!(Rc::ptr_eq(&store(&g1), &store(&g2)));
        assert_eq!(g2.stores().count(), 1);
        let all = Carried {
            pools_kept: 2,
            pools: 2,
            idle_kept: 0,
            caches_kept: 1,
            caches: 1,
        };
        assert_eq!(c, all);

        // 9002 stays (now first), 9001 goes, 9003 comes; another cache ttl.
        let b = "\"127.0.0.1:9002\", \"127.0.0.1:9003\"";
        let (g3, c) = Generation::next(&g2, 3, cfg(b, "round-robin", "2m"), 7);
        assert!(Rc::ptr_eq(g2.pool(G, S1), g3.pool(G, S0)), "9002's pool");
        assert!(!Rc::ptr_eq(g2.pool(G, S0), g3.pool(G, S1)), "9003 is new");
        assert!(!Rc::ptr_eq(g2.balancer(G), g3.balancer(G)));
        // 9002 was marked failed: still is, at its new index; 9003 is not.
        let bal = g3.balancer(G).borrow();
        assert!(bal.is_down(S0, Instant::now()) && !bal.is_down(S1, Instant::now()));
        assert_eq!(
            (c.pools_kept, c.pools, c.caches_kept, c.caches),
            (1, 2, 0, 1)
        );

        // Another balancing method: a new balancer, pools kept.
        let (g4, c) = Generation::next(&g3, 4, cfg(b, "least-conn", "2m"), 7);
        assert!(!Rc::ptr_eq(g3.balancer(G), g4.balancer(G)));
        assert_eq!((c.pools_kept, c.caches_kept), (2, 1));
        assert_eq!(g4.number, 4);
    }

    /// A cached route `/api/` to group `app` (two servers) with `route` more lines, and `top`
    /// more sections.
    fn api(route: &str, top: &str) -> Arc<Config> {
        let text = format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n{top}\n\
             [upstream.app]\nservers = [\"127.0.0.1:9001\", \"127.0.0.1:9002\"]\n\
             [upstream.other]\nservers = [\"127.0.0.1:9003\"]\n\
             [upstream.same]\nservers = [\"127.0.0.1:9002\", \"127.0.0.1:9001\"]\n\
             [[route]]\npath = \"/api/\"\nupstream = \"app\"\ncache = {{ ttl = \"1m\" }}\n{route}\n"
        );
        Arc::new(crate::config::from_toml("t.toml", &text).expect("config"))
    }

    #[test]
    fn a_store_is_kept_only_while_its_route_forwards_the_same_requests_to_the_same_origin() {
        // What a store holds is what those origins answered those requests: a reload that
        // changes either gets a new one (it kept the old, whose answers then went on being
        // served for a new target: GET /api/x answered by the stored /api/x after strip_prefix
        // made it /x). What only changes the response's way to the client, or the timing,
        // keeps it.
        let cases: [(&str, &str, &str, usize); 10] = [
            ("nothing", "", "", 1),
            ("strip_prefix", "strip_prefix = true", "", 0),
            (
                "request_headers",
                "request_headers = { set = { \"X-Tenant\" = \"b\" } }",
                "",
                0,
            ),
            ("another group", "", "", 0),
            (
                "[headers] preserve_host",
                "",
                "[headers]\npreserve_host = false",
                0,
            ),
            (
                "[headers] x_forwarded_proto",
                "",
                "[headers]\nx_forwarded_proto = false",
                0,
            ),
            ("the same servers", "", "", 1),
            (
                "response_headers",
                "response_headers = { set = { \"X-A\" = \"1\" } }",
                "",
                1,
            ),
            ("timeouts", "timeouts = { read = \"5s\" }", "", 1),
            ("retry", "retry = { tries = 3, on = [\"connect\"] }", "", 1),
        ];
        for (what, route, top, kept) in cases {
            let g1 = Generation::new(1, api("", ""), 7);
            let mut new = api(route, top).as_ref().clone();
            let to = match what {
                "another group" => Some("other"),
                "the same servers" => Some("same"),
                _ => None,
            };
            if let Some(name) = to {
                let gi = new.groups.position(|g| g.name == name).unwrap();
                if let Action::Proxy { group, .. } = &mut new.routes[RouteId::new(0)].action {
                    *group = gi;
                }
            }
            let (_, c) = Generation::next(&g1, 2, Arc::new(new), 7);
            assert_eq!((c.caches_kept, c.caches), (kept, 1), "{what}");
        }
    }
}
