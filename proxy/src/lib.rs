//! The reverse proxy: thread-per-core, io_uring, HTTP/1.1 on both sides.
//!
//! # Layout
//! Modules only look down: each uses the ones listed before it (`docs/ARCHITECTURE.md`).
//! - `error`, `io`, `http_date`, `host`, `preconditions`, `lingering` (how long a lingering
//!   close goes on): leaves.
//! - `answer`: the `return` action built at start and rendered per request (sans-IO);
//!   [`static_files`]: what a static route asks of a file, and opening it beneath the root.
//! - [`config`]: the immutable [`config::Config`], its file layer ([`config::schema`]) and the
//!   one step that resolves and checks it.
//! - [`route`], [`balance`], `pool`, [`cache`] (the response cache's sans-IO core):
//!   per-worker tables built from the config; `generation` holds one config's set of them.
//! - `record`: one request's outcome; `metrics` what a worker counts from it, `exposition`
//!   the text a scrape gets.
//! - `request`: the one parse of a request head, its route, and the one decision of its
//!   action (`request::Dispatch`); `forward`: the response head rewritten for the client.
//! - `access_log`; `worker`: one worker's state (generation, buffers, counters, inbox
//!   messages).
//! - `relay`: bodies streamed both ways; `tunnel`: WebSocket bytes after a 101.
//! - `conn`: a client connection as the actions use it (`conn::Next`, error answers).
//! - The actions: `exchange` (a proxied request; `exchange::cached` through the response
//!   cache), `static_serve` (files), `conn::send_answer` (a `return`).
//! - `client`: the connection loop: read a head, one match on the decision, repeat.
//! - `accept`, [`health`] (active checks), [`reload`], `admin`, `lifecycle` (a worker's
//!   tasks), [`cli`], [`takeover`], and this file: [`start`] / [`Running`].
//! - [`request_path`]: the request path without I/O (for the fuzz target and its seeds).
//!
//! Invariants: nothing is shared between workers on the request path (per-worker state in
//! `Rc`/`RefCell`, never borrowed across an `.await`); nothing is logged per request; no
//! body is ever held whole in memory.

// `proxy::` paths inside the crate too: the fuzz checks are `include!`d here and in the
// fuzz crate alike.
extern crate self as proxy;

pub mod balance;
pub mod cache;
pub mod cidr;
pub mod cli;
pub mod config;
pub mod route;
pub mod route_key;
pub mod static_files;
mod static_serve;

mod accept;
mod access_log;
mod admin;
mod answer;
mod client;
mod conn;
mod direct;
pub mod dns;
mod error;
mod exchange;
mod exposition;
#[cfg(feature = "fault-injection")]
pub mod fault_injection;
mod forward;
mod generation;
pub mod health;
mod host;
mod http_date;
mod io;
mod ip_text;
mod lifecycle;
mod limit;
mod lingering;
mod metrics;
pub mod notify;
mod pool;
mod preconditions;
mod preflight;
mod process_metrics;
mod proxy_header;
mod record;
mod relay;
pub mod reload;
mod request;
pub mod request_path;
mod response_memo;
pub mod retry_budget;
mod sent_fields;
mod splice;
pub mod takeover;
mod tunnel;
mod worker;

pub use error::{Fault, ProxyError};
pub use worker::ProxyCounters;

use shared::runtime::{select_driver, DriverKind, Launch, RuntimeError, Workers};
use shared::shutdown::ShutdownFlag;
use std::fs::File;
use std::net::SocketAddr;
use std::sync::Arc;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("cannot create the workers' inbox: {0}")]
    Inbox(std::io::Error),
    #[error("cannot open the access log {}: {source}",
            shared::config::escape_controls(&path.display().to_string()))]
    AccessLog {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the admin listener: {0}")]
    Admin(std::io::Error),
    #[error("cannot start the DNS thread: {0}")]
    Dns(std::io::Error),
    #[error(transparent)]
    Takeover(#[from] takeover::TakeoverError),
}

/// A started proxy.
pub struct Running {
    addrs: Vec<SocketAddr>,
    workers: Workers,
    flag: Arc<ShutdownFlag>,
    stats: Vec<Arc<ProxyCounters>>,
    summary: String,
    /// The workers' inboxes (purges between workers, reloads), closed at shutdown.
    post: shared::inbox::Post<worker::WorkerMsg>,
    /// The admin listener, when configured; stopped once the workers ended.
    admin: Option<admin::Admin>,
    /// What the reloads came to (`/metrics`); written by the `Reloader`.
    reload_state: Arc<process_metrics::ReloadState>,
    /// The generation running now, shared by the reloads and the DNS thread.
    current: reload::SharedCurrent,
    /// The DNS thread (`resolve` groups), told of reloads and stopped at the end.
    dns: dns::Waker,
    /// Copies of every worker's listening socket (with its configured address), kept when a
    /// takeover socket will be served: what a takeover hands over.
    copies: Vec<(SocketAddr, std::net::TcpListener)>,
    /// A copy of the admin listener's socket, kept likewise.
    admin_copy: Option<std::net::TcpListener>,
    /// The program on the listener groups, put back if a takeover is aborted (the new process
    /// may have replaced it before it failed).
    steering: limit::Steering,
}

/// How `start_with` gets its listening sockets.
#[derive(Default)]
pub struct Sockets<'a> {
    /// Taken over from the process that had them (`takeover.rs`); addresses not among them
    /// are bound.
    pub inherited: Option<&'a mut takeover::Inherited>,
    /// Keep a copy of each for a later takeover (`Running::serve_takeovers`).
    pub keep_copies: bool,
}

/// Connections steered by CPU go to the planned cores' workers; a worker that could not be
/// pinned runs elsewhere and still gets its planned core's connections (served, with a wake-up
/// across cores): said once at start.
fn warn_if_steered_off_core(
    steering: &limit::Steering,
    workers: &Workers,
    plan: &shared::runtime::PinPlan,
) {
    if matches!(steering, limit::Steering::ByCpu(_)) && workers.cores != plan.cores {
        shared::log!(
            "warning: steer = \"cpu\" steers by the planned cores, and {}",
            workers.describe_pinning()
        );
    }
}

/// Bind every listener (on this thread, so bind errors surface here), start the workers and
/// return once they are listening: connections made after this returns are queued in the
/// backlog and served.
pub fn start(cfg: config::Config) -> Result<Running, StartError> {
    start_with(cfg, Sockets::default())
}

/// [`start`], with sockets taken over or kept for a takeover.
pub fn start_with(
    mut cfg: config::Config,
    mut sockets: Sockets<'_>,
) -> Result<Running, StartError> {
    let nofile = shared::net::raise_nofile_limit();
    let driver = select_driver(&cfg.runtime)?;
    let n = cfg.runtime.workers.max(1);
    let Bound {
        per_worker,
        addrs,
        copies,
        firsts,
    } = bind_listeners(&cfg, n, &mut sockets)?;
    let groups: Vec<_> = firsts.iter().map(|(l, t)| (l, *t)).collect();
    // One plan for both: steering by CPU needs each worker's core before the workers start.
    let plan = shared::runtime::plan_pinning(&cfg.runtime, n);
    let (steering, limits_line) = limit::steer_listeners(&mut cfg, &groups, n, &plan.cores);
    drop(firsts);
    // Opened here, one per worker, so that a path that cannot be written stops the start
    // with its reason and no worker opens a file.
    let logs = open_worker_logs(&cfg, n)?;
    let (admin_listener, admin_copy) = admin_sockets(cfg.admin, &mut sockets)?;
    let stats: Vec<Arc<ProxyCounters>> =
        (0..n).map(|_| Arc::new(ProxyCounters::default())).collect();
    let items: Vec<_> = per_worker
        .into_iter()
        .zip(stats.iter().cloned().zip(logs))
        .collect();
    let flag = ShutdownFlag::new();
    let cfg = Arc::new(cfg);
    let post = shared::inbox::Post::new(n).map_err(StartError::Inbox)?;
    let finals = Arc::new(metrics::Finals::new(n));
    let workers = {
        let cfg = cfg.clone();
        let post = post.clone();
        let finals = finals.clone();
        // Worker threads inherit this thread's signal mask: block SIGINT/SIGTERM/SIGHUP in
        // them so the signal thread `main` installs is the one that takes them.
        let _mask = shared::shutdown::SignalMask::block_stop_and_reload_signals();
        let runtime = cfg.runtime.clone();
        let launch = Launch {
            cfg: &runtime,
            plan: &plan,
            driver,
            flag: flag.clone(),
            name: "proxy",
        };
        launch.spawn(items, move |ctx, (ls, st_log)| {
            // A worker's error lines never wait for a stderr nobody reads.
            shared::log::defer_on_this_thread();
            lifecycle::run(ctx, cfg.clone(), ls, st_log, post.clone(), finals.clone())
        })?
    };
    let reload_state = Arc::new(process_metrics::ReloadState::started());
    let admin = match admin_listener {
        Some(l) => {
            let ctx = admin::AdminCtx {
                cfg: cfg.clone(),
                post: post.clone(),
                finals,
                flag: flag.clone(),
                reload: reload_state.clone(),
            };
            // Like the workers, the admin thread must not take a signal meant for `main`'s
            // signal thread (a SIGTERM or SIGHUP it took would kill the process).
            let _mask = shared::shutdown::SignalMask::block_stop_and_reload_signals();
            Some(admin::Admin::start(l, ctx).map_err(StartError::Admin)?)
        }
        None => None,
    };
    let (current, dns) = start_dns(&cfg, &post, &reload_state)?;
    warn_if_steered_off_core(&steering, &workers, &plan);
    let mut summary = summary(&cfg, driver, &workers, &addrs, nofile);
    observability_lines(&mut summary, &cfg, admin.as_ref(), limits_line.as_deref());
    Ok(Running {
        addrs,
        workers,
        flag,
        stats,
        summary,
        post,
        admin,
        reload_state,
        current,
        dns,
        copies,
        admin_copy,
        steering,
    })
}

/// The admin listener of a start (handed over by a takeover when its address is the one
/// configured, else bound), and a copy of it when `sockets` keeps copies for a later
/// takeover.
fn admin_sockets(
    addr: Option<SocketAddr>,
    sockets: &mut Sockets<'_>,
) -> Result<(Option<std::net::TcpListener>, Option<std::net::TcpListener>), StartError> {
    let Some(addr) = addr else {
        return Ok((None, None));
    };
    let taking_over = sockets.inherited.is_some();
    let handed = sockets
        .inherited
        .as_deref_mut()
        .and_then(|i| i.take_admin(addr));
    let listener = match handed {
        Some(s) => s,
        None => admin_listener(addr, taking_over)?,
    };
    let copy = match sockets.keep_copies {
        true => Some(
            listener
                .try_clone()
                .map_err(|source| StartError::Bind { addr, source })?,
        ),
        false => None,
    };
    Ok((Some(listener), copy))
}

/// The admin and access log lines of the start-up summary, and the limits line, inserted
/// before the limits line's place (it stays the summary's last).
fn observability_lines(
    summary: &mut String,
    cfg: &config::Config,
    admin: Option<&admin::Admin>,
    limits_line: Option<&str>,
) {
    let mut obs = String::new();
    if let Some(a) = admin {
        obs.push_str(&format!(
            "  admin: http://{}/metrics /status /healthz\n",
            a.addr()
        ));
    }
    if let Some(l) = &cfg.access_log {
        let (path, format) = (l.path.display(), l.format.name());
        obs.push_str(&format!("  access log: {path} ({format})\n"));
    }
    obs.push_str(limits_line.unwrap_or_default());
    if let Some(at) = summary.rfind("  limits: ") {
        summary.insert_str(at, &obs);
    }
}

/// The listening sockets of a start, as [`bind_listeners`] leaves them.
struct Bound {
    /// Per worker: its sockets, each with the index of its listener in `cfg.listeners`.
    per_worker: Vec<Vec<(usize, std::net::TcpListener)>>,
    /// Per listener: its bound address.
    addrs: Vec<SocketAddr>,
    /// Copies kept for a takeover (`Sockets::keep_copies`).
    copies: Vec<(SocketAddr, std::net::TcpListener)>,
    /// Per listener: a copy of its first socket, and whether its group was taken over (the
    /// client steering is attached through it: `limit::steer_listeners`).
    firsts: Vec<(std::net::TcpListener, bool)>,
}

/// Every listener's group of sockets, taken over or bound, at least one per worker.
fn bind_listeners(
    cfg: &config::Config,
    n: usize,
    sockets: &mut Sockets<'_>,
) -> Result<Bound, StartError> {
    let mut b = Bound {
        per_worker: (0..n).map(|_| Vec::new()).collect(),
        addrs: Vec::with_capacity(cfg.listeners.len()),
        copies: Vec::new(),
        firsts: Vec::with_capacity(cfg.listeners.len()),
    };
    for (li, l) in cfg.listeners.iter().enumerate() {
        let bind_err = |source| StartError::Bind {
            addr: l.addr,
            source,
        };
        let inherited = match sockets.inherited.as_deref_mut() {
            Some(i) => i.take(l.addr),
            None => Vec::new(),
        };
        let taken_over = !inherited.is_empty();
        let group = listener_group(l, n, inherited).map_err(bind_err)?;
        b.addrs.push(group[0].local_addr().map_err(bind_err)?);
        b.firsts
            .push((group[0].try_clone().map_err(bind_err)?, taken_over));
        for (i, s) in group.into_iter().enumerate() {
            if sockets.keep_copies {
                b.copies.push((l.addr, s.try_clone().map_err(bind_err)?));
            }
            // More sockets than workers (taken over from a process with more): a worker
            // accepts on several.
            b.per_worker[i % n].push((li, s));
        }
    }
    Ok(b)
}

/// Generation 1 as the reloads and the DNS thread share it, and the DNS thread.
fn start_dns(
    cfg: &Arc<config::Config>,
    post: &shared::inbox::Post<worker::WorkerMsg>,
    state: &Arc<process_metrics::ReloadState>,
) -> Result<(reload::SharedCurrent, dns::Waker), StartError> {
    let current = Arc::new(std::sync::Mutex::new(reload::Current {
        cfg: cfg.clone(),
        number: 1,
    }));
    // Like the workers and the admin thread, the DNS thread must not take a signal meant for
    // `main`'s signal thread.
    let _mask = shared::shutdown::SignalMask::block_stop_and_reload_signals();
    let dns = dns::spawn(current.clone(), post.clone(), state.clone()).map_err(StartError::Dns)?;
    Ok((current, dns))
}

/// `proxy`'s start: with `takeover_socket`, takeovers are served there; with `take_over`
/// too, the listening sockets are first taken from the process serving it, which is told to
/// drain once this one is up.
pub fn start_for(
    cfg: config::Config,
    takeover_socket: Option<&std::path::Path>,
    take_over: bool,
) -> Result<Running, StartError> {
    let mut inherited = match takeover_socket {
        Some(path) if take_over => Some(takeover::Inherited::request(path)?),
        _ => None,
    };
    let sockets = Sockets {
        inherited: inherited.as_mut(),
        keep_copies: takeover_socket.is_some(),
    };
    let mut running = start_with(cfg, sockets)?;
    if let Some(path) = takeover_socket {
        running.serve_takeovers(path, take_over)?;
        let mut line = format!("  takeover socket {}", path.display());
        if let Some(i) = inherited {
            line.push_str(&finish_takeover(i));
        }
        // Before the last line (the limits), which ends the summary.
        let at = running.summary.rfind('\n').map_or(0, |i| i + 1);
        running.summary.insert_str(at, &(line + "\n"));
    }
    Ok(running)
}

/// The takeover's last step, `ready`, and what the summary's takeover line says of it. This
/// process already serves on the sockets and owns the takeover path: an old process that
/// cannot be told (it went away meanwhile, a SIGTERM between the handover and `ready`) is no
/// reason to stop serving, which would leave nothing listening. One warning line: if the old
/// process still runs (its side gave up waiting), it serves the same sockets until stopped.
fn finish_takeover(i: takeover::Inherited) -> String {
    let old = i.peer_pid();
    match i.ready() {
        Ok(dropped) => format!(
            ": listening sockets taken over from the proxy that served it \
             ({dropped} of them not in this config, closed); it drains and exits"
        ),
        Err(e) => {
            shared::log!(
                "proxy: warning: {e}; serving on the sockets taken over anyway: the old \
                 process (pid {old}) went away before this one was ready, or gave up waiting \
                 and serves them too until it is stopped (kill -TERM {old} if it still runs)"
            );
            ": listening sockets taken over from the proxy that served it, which was not \
             told this one is ready (see the warning above)"
                .into()
        }
    }
}

/// One listener's SO_REUSEPORT sockets, at least one per worker: the ones taken over (and
/// more bound into their group for workers beyond them: no port-in-use check, the group is
/// ours), or a new group.
fn listener_group(
    l: &config::Listener,
    n: usize,
    mut group: Vec<std::net::TcpListener>,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let fresh = if group.is_empty() {
        group = shared::net::reuseport_group(l.addr, n, l.backlog)?;
        0
    } else {
        let bound = group[0].local_addr()?;
        let have = group.len();
        for _ in have..n {
            group.push(shared::net::reuseport_listener(bound, l.backlog)?);
        }
        have
    };
    for s in &group[fresh..] {
        shared::net::nodelay_listener(s)?;
        shared::net::defer_accept_listener(s)?;
    }
    Ok(group)
}

/// The admin listener's socket, bound on this thread (so a bind error stops the start).
/// SO_REUSEPORT, as the listeners have, so that `--check-config` of the running config
/// (`shared::net::probe_bind`) and a takeover (`taking_over`: from a process that did not hand
/// its admin socket over, which holds it until it lets go) can bind beside it; a second copy
/// started by mistake is still refused.
fn admin_listener(
    addr: SocketAddr,
    taking_over: bool,
) -> Result<std::net::TcpListener, StartError> {
    let bind_err = |source| StartError::Bind { addr, source };
    if !taking_over && addr.port() != 0 {
        shared::net::ensure_not_listened_on(addr).map_err(bind_err)?;
    }
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )
    .map_err(bind_err)?;
    s.set_reuse_address(true).map_err(bind_err)?;
    s.set_reuse_port(true).map_err(bind_err)?;
    s.bind(&addr.into()).map_err(bind_err)?;
    s.listen(64).map_err(bind_err)?;
    Ok(s.into())
}

impl Running {
    /// The bound addresses, one per configured listener (port 0 resolved).
    pub fn listen_addrs(&self) -> Vec<SocketAddr> {
        self.addrs.clone()
    }

    /// The start-up summary (one line per topic), for stderr.
    pub fn summary(&self) -> String {
        self.summary.clone()
    }

    /// The process-wide flag; `main` installs the signal handler on it.
    pub fn shutdown_flag(&self) -> Arc<ShutdownFlag> {
        self.flag.clone()
    }

    /// What SIGHUP runs (on the signal thread): reads `source` again and hands the result to
    /// the workers.
    pub fn reloader(&self, source: reload::Source) -> reload::Reloader {
        let mut r = reload::Reloader::new(source, self.current.clone(), self.post.clone());
        r.report_to(self.reload_state.clone());
        let dns = self.dns.clone();
        r.after_each(Box::new(move || dns.reloaded()));
        r
    }

    /// Look the names of `resolve` groups up with `f` from now on (tests: names that resolve
    /// to what the test says, when it says).
    pub fn set_resolver(&self, f: dns::Lookup) {
        self.dns.set_resolver(f);
    }

    /// Listen for takeovers on `path` (a thread of its own): a new process that asks gets
    /// the listening sockets, then this one drains and exits. `replace`: this process took
    /// over from the one at `path`. Needs `Sockets::keep_copies` at start.
    pub fn serve_takeovers(
        &mut self,
        path: &std::path::Path,
        replace: bool,
    ) -> Result<(), takeover::TakeoverError> {
        let (control, listener) = takeover::Control::bind(path, replace)?;
        let post = self.post.clone();
        let steering = self.steering.clone();
        let release = self.admin.as_mut().and_then(|a| a.release());
        let serve = takeover::Serve {
            control,
            listener,
            sockets: std::mem::take(&mut self.copies),
            admin: self.admin_copy.take(),
            flag: self.flag.clone(),
            // The admin thread lets go and every worker drains before the log line says so.
            on_ready: Box::new(move || {
                let wait = std::time::Duration::from_secs(5);
                if let Some(r) = release {
                    r.now(wait);
                }
                let _ = post.ask_all(|_, reply| worker::WorkerMsg::HandOver(reply), wait);
            }),
            resteer: Box::new(move |l| steering.apply(l)),
        };
        takeover::spawn(serve).map_err(|source| takeover::TakeoverError::Bind {
            path: path.display().to_string(),
            source,
        })
    }

    /// The core each worker was pinned to (`None`: unpinned), in worker order.
    pub fn cores(&self) -> &[Option<usize>] {
        &self.workers.cores
    }

    /// Per-worker counters (connections, requests, upstream connects, errors).
    pub fn stats(&self) -> &[Arc<ProxyCounters>] {
        &self.stats
    }

    /// Stop accepting; in-flight requests finish up to the shutdown timeout.
    pub fn trigger_shutdown(&self) {
        self.flag.trigger();
    }

    /// The admin listener's address, when one is configured (port 0 resolved).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|a| a.addr())
    }

    /// Reopen the access log on every worker (SIGUSR1); returns how many were asked.
    pub fn reopen_logs(&self) -> usize {
        reopen_logs(&self.current, &self.post)
    }

    /// A handle that reopens the workers' access logs, for the signal thread.
    pub fn log_reopener(&self) -> impl Fn() + Send + 'static {
        let (current, post) = (self.current.clone(), self.post.clone());
        move || {
            reopen_logs(&current, &post);
        }
    }

    /// A handle that has every worker write out its access logs' buffers, for the signal
    /// thread's stop-now path: it waits up to the duration given, and says which workers did
    /// not answer by then (a worker stuck on a stalled file system, or in a long task).
    pub fn log_flusher(
        &self,
    ) -> impl Fn(std::time::Duration) -> Result<(), shared::inbox::AskError> + Send + 'static {
        let post = self.post.clone();
        move |wait| {
            // A worker whose drain is over is gone: its logs were flushed as it ended.
            post.ask_each(|_, reply| worker::WorkerMsg::FlushLogs(reply), wait)
                .map(drop)
        }
    }

    /// Wait for the workers to end (after a shutdown was triggered). The admin listener
    /// answers until then (`/healthz` says 503 while they drain), and the DNS thread looks
    /// names up (the binary waits here from its start: stopping it first stopped it for good).
    pub fn join(self) -> Result<(), RuntimeError> {
        let r = self.workers.join();
        self.dns.stop();
        self.post.close_all();
        if let Some(a) = self.admin {
            a.stop();
        }
        r
    }

    pub fn shutdown(self) -> Result<(), RuntimeError> {
        self.trigger_shutdown();
        self.join()
    }
}

/// One access log file per worker for the first generation, opened before the workers.
fn open_worker_logs(cfg: &config::Config, n: usize) -> Result<Vec<Option<File>>, StartError> {
    let Some(l) = &cfg.access_log else {
        return Ok((0..n).map(|_| None).collect());
    };
    access_log::open_per_worker(l, n)
        .map(|files| files.into_iter().map(Some).collect())
        .map_err(|source| StartError::AccessLog {
            path: l.path.clone(),
            source,
        })
}

/// SIGUSR1: the current generation's access log path opened again, once per worker, here
/// (the caller's thread: a worker never waits on the file system), and handed to the
/// workers; how many were asked. Under the generation lock, so that no reload's generation
/// comes between the files and the workers (the reloader posts under it too). A path that
/// cannot be opened leaves every worker on the file it had, and says so.
fn reopen_logs(
    current: &reload::SharedCurrent,
    post: &shared::inbox::Post<worker::WorkerMsg>,
) -> usize {
    let current = reload::lock(current);
    let Some(l) = current.cfg.access_log.as_ref() else {
        return 0;
    };
    let files = match access_log::open_per_worker(l, post.workers()) {
        Ok(files) => files,
        Err(e) => {
            shared::log!(
                "proxy: access log: cannot reopen {}: {e}; still writing to the file open before",
                l.path.display()
            );
            return 0;
        }
    };
    let reopened = |file| {
        worker::WorkerMsg::ReopenLog(access_log::Reopened {
            cfg: l.clone(),
            file,
        })
    };
    files
        .into_iter()
        .enumerate()
        .filter_map(|(i, file)| post.send(i, reopened(file)).ok())
        .count()
}

fn summary(
    cfg: &config::Config,
    driver: DriverKind,
    workers: &Workers,
    addrs: &[SocketAddr],
    nofile: u64,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let listen: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let _ = writeln!(
        s,
        "proxy {}: {} ({}), driver {driver}{}, listening on {}",
        env!("CARGO_PKG_VERSION"),
        workers.describe_pinning(),
        workers.pin_why,
        shared::runtime::describe_recv(&cfg.runtime, driver),
        listen.join(" ")
    );
    for (gi, g) in cfg.groups.enumerate() {
        let servers: Vec<String> = g
            .servers
            .iter()
            .map(|sv| {
                let addrs: Vec<String> = sv.addrs.iter().map(|a| a.to_string()).collect();
                if [sv.name.clone()] == addrs[..] {
                    sv.name.clone()
                } else {
                    format!("{} ({})", sv.name, addrs.join(", "))
                }
            })
            .collect();
        let balance = g.balance.name();
        let _ = writeln!(
            s,
            "  upstream {}: {} [{balance}, keepalive {}/worker, {} requests/connection, idle {}]",
            g.name,
            servers.join(", "),
            g.keepalive,
            g.keepalive_requests,
            shared::units::format_duration(g.keepalive_timeout),
        );
        if let Some(h) = &g.health {
            let by = health::checker_of(gi, cfg.runtime.workers.max(1));
            let _ = writeln!(s, "    {}, checked by worker {by}", h.describe());
        }
    }
    for r in &cfg.routes {
        let what = match &r.action {
            config::Action::Proxy { cache: None, .. } => continue,
            config::Action::Proxy {
                group,
                cache: Some(c),
            } => format!(
                "upstream {}, cache {} bytes/worker (objects up to {}), ttl {}, stale_if_error {}, purge from {}",
                cfg.groups[*group].name,
                c.max_bytes,
                c.max_object,
                shared::units::format_duration(c.ttl),
                shared::units::format_duration(c.stale_if_error),
                if c.purge_from.is_empty() {
                    "nobody".to_string()
                } else {
                    c.purge_from
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                },
            ),
            config::Action::Return(a) => format!("return {}", a.status()),
            config::Action::Static(site) => format!("static {}", site.root.display()),
        };
        let host = r.host.as_deref().unwrap_or("(any host)");
        let _ = writeln!(s, "  route {host} {}: {what}", r.path_prefix);
    }
    let t = &cfg.timeouts;
    let l = &cfg.limits;
    let body = l
        .max_body
        .map_or_else(|| "unlimited".to_string(), |b| format!("{b} bytes"));
    let _ = write!(
        s,
        "  limits: {} connections/worker, body {body}, head {} bytes; timeouts: connect {}, read {}, header {}, idle {}, send {}; open files {nofile}",
        l.max_connections,
        l.codec.max_head,
        shared::units::format_duration(t.connect),
        shared::units::format_duration(t.read),
        shared::units::format_duration(t.header),
        shared::units::format_duration(t.idle),
        shared::units::format_duration(t.send),
    );
    s
}
