//! Re-resolution of the servers of `resolve` groups (`config::dns`), on a thread of its own:
//! a lookup (getaddrinfo) blocks, so it never runs on a worker, nor on the signal thread
//! (a slow resolver must not hold a reload or a shutdown up).
//!
//! - Every `resolve` interval, each name of the group is looked up again. A lookup that fails
//!   keeps the name's last good addresses; it is counted (`proxy_dns_failures_total`) and
//!   logged once per change of state (failing, resolving again), never once per lookup.
//!   Lookups are counted too (`proxy_dns_lookups_total`), and the generations changes made
//!   (`proxy_dns_changes_total`).
//! - When a group's servers changed (an address came or went), the config with the new
//!   servers becomes the next generation, exactly as a reload's does (`reload::step`: one
//!   `WorkerMsg::Reload` per worker through the inbox, `Generation::next` there). Why a whole
//!   generation rather than an address list patched into the group: every per-worker table
//!   (balancers, pools, metrics rows, health states, TLS names) is laid out by `ServerId` in
//!   one config, and a generation is the one place those tables are rebuilt and carried over
//!   consistently. A server that stays keeps its pool (by address), failure and health state,
//!   counts (by name) and hash-ring points (by name); a server that went has its pool dropped
//!   with the previous generation: its idle connections close as soon as no request holds
//!   that generation, and none is reused (a new request takes the new generation). Requests
//!   in flight finish on theirs.
//! - A step and a reload never interleave: both hold the current generation's lock
//!   (`reload::Current`) for the whole step. Lookups run before the lock is taken; when a
//!   reload came in between, its own lookups are newer and this round's are dropped.
//! - Unless a group has `resolve`, the thread sleeps until a reload wakes it: nothing is
//!   looked up but at start and at reloads, as before.

use crate::config::dns::{servers_of, tls_name, Entry, Resolve};
use crate::config::{Config, GroupId, Server, ServerId, Table, UpstreamGroup};
use crate::process_metrics::ReloadState;
use crate::reload::{lock, step, SharedCurrent};
use crate::worker::WorkerMsg;
use shared::inbox::Post;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Instant;

/// A name lookup: host and port to addresses (or why not). The default is the system's
/// (`shared::net::resolve`); tests set their own (`Running::set_resolver`).
pub type Lookup = Arc<dyn Fn(&str, u16) -> Result<Vec<SocketAddr>, String> + Send + Sync>;

/// The system resolver, through the one address rule.
pub fn system_lookup() -> Lookup {
    Arc::new(|host, port| shared::net::resolve(host, port).map_err(|e| e.to_string()))
}

enum Wake {
    /// A reload applied a new configuration: the groups and their intervals may differ.
    Reloaded,
    Resolver(Lookup),
    Stop,
}

/// What other threads tell the DNS thread.
#[derive(Clone)]
pub struct Waker(Sender<Wake>);

impl Waker {
    pub fn reloaded(&self) {
        let _ = self.0.send(Wake::Reloaded);
    }

    /// Look names up with `f` from now on.
    pub fn set_resolver(&self, f: Lookup) {
        let _ = self.0.send(Wake::Resolver(f));
    }

    pub fn stop(&self) {
        let _ = self.0.send(Wake::Stop);
    }
}

/// Start the DNS thread; it ends when told to stop or when every [`Waker`] is gone.
pub fn spawn(
    current: SharedCurrent,
    post: Post<WorkerMsg>,
    state: Arc<ReloadState>,
) -> std::io::Result<Waker> {
    let (tx, rx) = mpsc::channel();
    let dns = Dns {
        current,
        post,
        state,
        lookup: system_lookup(),
        rx,
        failing: HashMap::new(),
        due: HashMap::new(),
    };
    std::thread::Builder::new()
        .name("dns".into())
        .spawn(move || dns.run())?;
    Ok(Waker(tx))
}

struct Dns {
    current: SharedCurrent,
    post: Post<WorkerMsg>,
    state: Arc<ReloadState>,
    lookup: Lookup,
    rx: Receiver<Wake>,
    /// (group, entry) whose last lookup failed: logged when it starts and stops failing.
    failing: HashMap<(String, String), String>,
    /// Per group: when its names are looked up next.
    due: HashMap<String, Instant>,
}

impl Dns {
    fn run(mut self) {
        loop {
            let cfg = lock(&self.current).cfg.clone();
            let next = self.schedule(&cfg);
            let woke = match next {
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(at) => self
                    .rx
                    .recv_timeout(at.saturating_duration_since(Instant::now())),
            };
            match woke {
                Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Wake::Resolver(f)) => self.lookup = f,
                Ok(Wake::Reloaded) => {}
                Err(RecvTimeoutError::Timeout) => self.refresh(&cfg),
            }
        }
    }

    /// The `resolve` groups' next lookups (a new group's one interval from now); the soonest.
    fn schedule(&mut self, cfg: &Config) -> Option<Instant> {
        let now = Instant::now();
        let resolving = |g: &UpstreamGroup| g.resolve.as_ref().map(|r| (g.name.clone(), r.every));
        let groups: Vec<_> = cfg.groups.iter().filter_map(resolving).collect();
        self.due
            .retain(|name, _| groups.iter().any(|(n, _)| n == name));
        let dues = groups
            .into_iter()
            .map(|(name, every)| *self.due.entry(name).or_insert(now + every));
        dues.min()
    }

    /// Look up the names of the groups that are due; make a generation if any changed.
    fn refresh(&mut self, cfg: &Arc<Config>) {
        let now = Instant::now();
        let mut changed: Vec<(GroupId, Table<ServerId, Server>)> = Vec::new();
        for (gi, g) in cfg.groups.enumerate() {
            let Some(r) = &g.resolve else { continue };
            if self.due.get(&g.name).is_some_and(|&t| t > now) {
                continue;
            }
            self.due.insert(g.name.clone(), now + r.every);
            let servers = self.look_up(g, r);
            if servers != g.servers {
                changed.push((gi, servers));
            }
        }
        if changed.is_empty() {
            return;
        }
        let mut current = lock(&self.current);
        if !Arc::ptr_eq(&current.cfg, cfg) {
            // A reload came in between: it looked every name up itself, later than this.
            return;
        }
        let mut next = (**cfg).clone();
        let mut said = Vec::new();
        for (gi, servers) in changed {
            if let Err(m) = set_servers(&mut next.groups[gi], servers) {
                shared::log!("proxy: dns: upstream {}: {m}", next.groups[gi].name);
                continue;
            }
            let g = &next.groups[gi];
            let names: Vec<&str> = g.servers.iter().map(|s| s.name.as_str()).collect();
            said.push(format!("upstream {}: {}", g.name, names.join(", ")));
        }
        if said.is_empty() {
            return;
        }
        // The same `access_log`: each worker keeps its log.
        let stepped = step(&self.post, &mut current, Arc::new(next), Vec::new());
        drop(current);
        self.state.dns_applied(stepped.number);
        shared::log!(
            "proxy: dns: generation {} on {} workers: {}",
            stepped.number,
            stepped.workers,
            said.join("; ")
        );
    }

    /// Group `g`'s servers for its names' addresses now, a failed name keeping its last
    /// good ones (those of its servers in `g`).
    fn look_up(&mut self, g: &UpstreamGroup, r: &Resolve) -> Table<ServerId, Server> {
        let addrs: Vec<Vec<SocketAddr>> = r
            .entries
            .iter()
            .map(|e| {
                let (host, port) = (&e.lookup.0, e.lookup.1);
                if let (true, Ok(ip)) = (e.literal, host.parse::<IpAddr>()) {
                    return vec![SocketAddr::new(ip, port)];
                }
                self.state.dns_looked_up();
                let found = match (self.lookup)(host, port) {
                    Ok(a) if a.is_empty() => Err(format!("{host}: no address")),
                    other => other,
                };
                self.note(g, e, found.as_ref().err());
                found.unwrap_or_else(|_| last_good(g, e))
            })
            .collect();
        servers_of(&r.entries, &addrs)
    }

    /// Count a failed lookup; log when a name starts or stops failing.
    fn note(&mut self, g: &UpstreamGroup, e: &Entry, failed: Option<&String>) {
        let key = (g.name.clone(), e.host.clone());
        match failed {
            Some(why) => {
                self.state.dns_failed();
                if let std::collections::hash_map::Entry::Vacant(v) = self.failing.entry(key) {
                    let kept: Vec<String> = last_good(g, e).iter().map(|a| a.to_string()).collect();
                    shared::log!(
                        "proxy: dns: upstream {}: cannot resolve {} ({why}); keeping {}",
                        g.name,
                        e.host,
                        kept.join(", ")
                    );
                    v.insert(why.clone());
                }
            }
            None => {
                if self.failing.remove(&key).is_some() {
                    shared::log!("proxy: dns: upstream {}: {} resolves again", g.name, e.host);
                }
            }
        }
    }
}

/// The addresses entry `e`'s servers in `g` have now.
fn last_good(g: &UpstreamGroup, e: &Entry) -> Vec<SocketAddr> {
    let mine = g.servers.iter().filter(|s| s.host == e.host);
    mine.flat_map(|s| s.addrs.iter().copied()).collect()
}

/// `g` with `servers`; a TLS group's names made for them.
fn set_servers(g: &mut UpstreamGroup, servers: Table<ServerId, Server>) -> Result<(), String> {
    if let (Some(tls), Some(r)) = (g.tls.as_mut(), g.resolve.as_ref()) {
        let mut names = Table::new();
        for s in &servers {
            names.push(tls_name(r.sni.as_deref(), &s.host)?);
        }
        tls.names = names;
    }
    g.servers = servers;
    Ok(())
}
