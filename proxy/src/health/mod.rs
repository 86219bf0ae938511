//! Active health checks (`health = { ... }` on an upstream group): every `interval`, each
//! server of the group gets a real HTTP/1.1 request on a connection of its own; `fall` failed
//! checks in a row take it out of rotation on every worker, `rise` passed ones bring it back.
//!
//! Who checks: one worker per group (group `g` on worker `g % workers`, so groups spread over
//! the workers), never every worker. N workers probing would multiply the checks' load on each
//! server by N (64 cores: 64 probes per interval per server), and they could disagree (one sees
//! a timeout, another a 200) and take a server in and out of rotation at different moments on
//! different cores. One checker keeps the one run of results, decides once, logs once, and
//! tells the others through the workers' inbox (`WorkerMsg::Health`); every worker's balancer
//! then skips the server (`Balancer::set_health`). Checks are off the request path: nothing
//! here runs per request.
//!
//! State changes are logged once each, by the checking worker:
//! `proxy: group G server S down (3 failed checks: status 500)` and
//! `proxy: group G server S up (2 passed checks)`.
//!
//! Reload (config generations, `generation.rs`): a change names its group and server by name,
//! not by index, so a worker applies it to whatever generation is current when it arrives. A
//! balancer a new generation takes over as it was keeps its servers' states; for the others,
//! [`carry_over`] moves each server's state to the new generation's balancers where the server
//! stays (same group name, same server as written). The checks belong to a generation: they
//! end at their first tick after it stops being current, and the reload calls [`start`] for the
//! new one, whose checks begin from the states carried over (their runs of results start over).
//!
//! # Layout
//! - [`track`]: the rise/fall decision, sans-IO;
//! - [`probe`]: one check's I/O;
//! - this file: the checking tasks, telling the workers, carrying state over.

pub mod probe;
pub mod track;

pub use crate::balance::HealthChange;
use crate::balance::{Balancer, Health};
use crate::config::{GroupId, ServerId, Table, UpstreamGroup};
use crate::generation::Generation;
use crate::worker::{ProxyWorker, WorkerMsg};
use probe::Probe;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use track::Tracker;

/// The worker that checks group `group` when there are `workers` workers.
pub fn checker_of(group: GroupId, workers: usize) -> usize {
    group.index() % workers.max(1)
}

/// Start the checks of the groups this worker checks in its current generation: one task per
/// server. `run` calls it at start; a reload calls it again right after making a new
/// generation current. Each task ends at shutdown, or at its first tick after its generation
/// stopped being current.
pub fn start(w: &Rc<ProxyWorker>) {
    let gen = w.generation();
    let workers = w.post.as_ref().map_or(1, |p| p.workers());
    let previous = std::mem::take(&mut *w.life.health.tasks.borrow_mut());
    let mut tasks = Vec::new();
    if !previous.is_empty() {
        tasks.push(monoio::spawn(async move {
            for t in previous {
                t.await;
            }
        }));
    }
    for (g, group) in gen.cfg.groups.enumerate() {
        if group.health.is_none() || checker_of(g, workers) != w.id {
            continue;
        }
        for s in group.servers.ids() {
            tasks.push(monoio::spawn(check_server(w.clone(), gen.clone(), g, s)));
        }
    }
    *w.life.health.tasks.borrow_mut() = tasks;
}

/// Wait for every check task to end (after shutdown fired).
pub async fn stopped(w: &ProxyWorker) {
    let tasks = std::mem::take(&mut *w.life.health.tasks.borrow_mut());
    for t in tasks {
        t.await;
    }
}

/// Check server `s` of group `g` of `gen` every interval until shutdown or until `gen` is no
/// longer the worker's current generation. The servers' first checks are spread over the
/// first interval (HAProxy spreads them too), so a large group is not probed in one burst.
async fn check_server(w: Rc<ProxyWorker>, gen: Rc<Generation>, g: GroupId, s: ServerId) {
    let group = &gen.cfg.groups[g];
    let server = &group.servers[s];
    let Some(check) = &group.health else {
        return;
    };
    let request = probe::request(check, server);
    let limits = &gen.cfg.limits.codec;
    // HAProxy's checks of a `send-proxy` server: v1 UNKNOWN, v2 LOCAL.
    let proxy_header = group.proxy_protocol.map_or(&[][..], |v| v.own_header());
    let tls: probe::TlsTo = match (&group.tls, gen.upstream_tls(g)) {
        (Some(t), Some(client)) => Some((client.clone(), t.names[s].clone())),
        _ => None,
    };
    let start = gen.balancer(g).borrow().health(s);
    let mut track = Tracker::new(start, check.rise, check.fall);
    let mut stop = w.life.shutdown.wait();
    let mut due = Instant::now() + first_offset(check.interval, s.index(), group.servers.len());
    monoio::select! {
        _ = monoio::time::sleep_until(due.into()) => {}
        _ = &mut stop => return,
    }
    while w.is_current(&gen) {
        let result = monoio::select! {
            r = probe::probe(&server.addrs, (&tls, limits), &request, check, proxy_header) => r,
            _ = &mut stop => return,
        };
        let (changed, reason) = match result {
            Probe::Passed(_) => (track.record(true), None),
            Probe::Failed(why) => (track.record(false), Some(why)),
            Probe::NoVerdict => (None, None),
        };
        if let Some(health) = changed {
            let change = HealthChange {
                group: group.name.clone(),
                server: server.name.clone(),
                health,
            };
            announce(&w, change);
            log_change(group, &server.name, health, reason.as_ref());
        }
        due = next_due(due, check.interval, Instant::now());
        monoio::select! {
            _ = monoio::time::sleep_until(due.into()) => {}
            _ = &mut stop => return,
        }
    }
}

/// When server `s` of `servers` gets its first check: `s / servers` of the way into the first
/// interval.
fn first_offset(interval: Duration, s: usize, servers: usize) -> Duration {
    let n = u32::try_from(servers.max(1)).unwrap_or(u32::MAX);
    let s = u32::try_from(s).unwrap_or(u32::MAX).min(n - 1);
    interval / n * s
}

/// When the next check is due: one interval after the last was due, or, if the machine fell
/// behind by more than that, one interval from now (missed checks are not made up in a burst).
fn next_due(last: Instant, interval: Duration, now: Instant) -> Instant {
    let next = last + interval;
    if next < now {
        now + interval
    } else {
        next
    }
}

/// Apply `change` here and tell every other worker.
fn announce(w: &ProxyWorker, change: HealthChange) {
    apply(w, &change);
    if let Some(post) = &w.post {
        for to in (0..post.workers()).filter(|&to| to != w.id) {
            // A closed inbox is a worker that ended: nothing to tell.
            let _ = post.send(to, WorkerMsg::Health(change.clone()));
        }
    }
}

/// Set the state `change` names in this worker's current generation (a group or server no
/// longer in the config is ignored) and count it.
pub fn apply(w: &ProxyWorker, change: &HealthChange) {
    let gen = w.generation();
    let Some(g) = gen.cfg.groups.position(|g| g.name == change.group) else {
        return;
    };
    let Some(s) = gen.cfg.groups[g]
        .servers
        .position(|s| s.name == change.server)
    else {
        return;
    };
    gen.balancer(g).borrow_mut().set_health(s, change.health);
    w.stats.health_changes.incr();
}

fn log_change(
    group: &UpstreamGroup,
    server: &str,
    health: Health,
    reason: Option<&probe::ProbeFail>,
) {
    let Some(check) = &group.health else {
        return;
    };
    let g = &group.name;
    match (health, reason) {
        (Health::Down, Some(why)) => shared::log!(
            "proxy: group {g} server {server} down ({} failed checks: {why})",
            check.fall
        ),
        (Health::Down, None) => shared::log!(
            "proxy: group {g} server {server} down ({} failed checks)",
            check.fall
        ),
        _ => shared::log!(
            "proxy: group {g} server {server} up ({} passed checks)",
            check.rise
        ),
    }
}

/// Carry each server's state from the `old` generation to the `new` one where the server
/// stays: same group name, same server name, checks on in both. A balancer the new generation
/// took over as it was (the same `Rc`) keeps its state anyway. Servers new to a group start up.
pub fn carry_over(old: &Generation, new: &Generation) {
    carry_between(
        &old.cfg.groups,
        old.balancers(),
        &new.cfg.groups,
        new.balancers(),
    );
}

fn carry_between(
    old_groups: &Table<GroupId, UpstreamGroup>,
    old: &Table<GroupId, Rc<RefCell<Balancer>>>,
    new_groups: &Table<GroupId, UpstreamGroup>,
    new: &Table<GroupId, Rc<RefCell<Balancer>>>,
) {
    for (ng, group) in new_groups.enumerate() {
        let Some(og) = old_groups.position(|o| o.name == group.name) else {
            continue;
        };
        if group.health.is_none()
            || old_groups[og].health.is_none()
            || Rc::ptr_eq(&old[og], &new[ng])
        {
            continue;
        }
        for (ns, server) in group.servers.enumerate() {
            let found = old_groups[og].servers.position(|o| o.name == server.name);
            if let Some(os) = found {
                let health = old[og].borrow().health(os);
                new[ng].borrow_mut().set_health(ns, health);
            }
        }
    }
}

#[cfg(test)]
mod tests;
