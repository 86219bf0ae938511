//! SIGHUP: read the config file again, apply the command-line overrides given at start, resolve
//! (host names looked up again) and check, then hand the result to every worker, which builds
//! its next generation from it (`generation.rs`).
//!
//! - Runs on the signal thread, one reload at a time; workers are never blocked: each takes
//!   the new config from its inbox between two tasks.
//! - A broken config is rejected with the file, line and key, and the running generation
//!   stays.
//! - What a running process cannot change (listeners, worker count, driver, pinning) is kept
//!   as started and named in the log line as needing a restart or a takeover: nothing is
//!   re-bound, so a reload never meets the port-in-use check.
//! - A changed `access_log` is opened here, one file per worker, before any worker switches:
//!   a path that cannot be opened rejects the reload like a broken file, and a worker never
//!   opens a file (`WorkerMsg::Reload`'s `log`).
//! - One log line per SIGHUP: the generation number and what changed.

use crate::config::{resolve, schema, Config, Error, Overrides};
use crate::generation::Carried;
use crate::worker::WorkerMsg;
use shared::inbox::{AskError, Post};
use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest a reload waits for every worker to take its new generation.
const APPLY_WAIT: Duration = Duration::from_secs(10);

/// Where a reload reads the configuration from.
#[derive(Debug, Clone)]
pub enum Source {
    /// `--config FILE`, with the overrides of the flags given at start.
    File { path: PathBuf, overrides: Overrides },
    /// Quick mode: the configuration is the command line; there is nothing to read again.
    CommandLine,
}

/// The generation every worker runs now: what a reload (the signal thread) and a DNS change
/// (`crate::dns`, a thread of its own) both start from, one step at a time (the lock is held
/// for a whole step, so neither undoes the other).
#[derive(Debug)]
pub struct Current {
    pub cfg: Arc<Config>,
    pub number: u64,
}

/// [`Current`], shared by the threads that make generations.
pub type SharedCurrent = Arc<Mutex<Current>>;

/// What one generation step came to on the workers.
pub struct Stepped {
    pub number: u64,
    pub carried: Carried,
    pub workers: usize,
    pub missing: Option<AskError>,
}

/// Make `cfg` the next generation on every worker (through their inboxes; each builds it with
/// `Generation::next`), and `current`'s. `logs`: each worker's file of a changed
/// `access_log` ([`open_logs`]); empty when it did not change.
pub fn step(
    post: &Post<WorkerMsg>,
    current: &mut Current,
    cfg: Arc<Config>,
    logs: Vec<File>,
) -> Stepped {
    let number = current.number + 1;
    let logs: RefCell<Vec<Option<File>>> = RefCell::new(logs.into_iter().map(Some).collect());
    let answers = post.ask_all(
        |id, reply| WorkerMsg::Reload {
            number,
            cfg: cfg.clone(),
            log: logs.borrow_mut().get_mut(id).and_then(Option::take),
            reply,
        },
        APPLY_WAIT,
    );
    let (carried, workers, missing) = match answers {
        Ok(all) => (sum(&all), all.len(), None),
        Err(e) => (Carried::default(), 0, Some(e)),
    };
    current.number = number;
    current.cfg = cfg;
    Stepped {
        number,
        carried,
        workers,
        missing,
    }
}

/// Reloads a running proxy: owned by the signal thread.
pub struct Reloader {
    source: Source,
    current: SharedCurrent,
    post: Post<WorkerMsg>,
    /// Told each outcome, for `/metrics` (`Running::reloader` sets it).
    state: Option<Arc<crate::process_metrics::ReloadState>>,
    /// Called after each applied reload (the DNS thread's wake-up: a group's `resolve` may
    /// have changed).
    after: Option<Box<dyn Fn() + Send>>,
}

/// What one SIGHUP came to; `Display` is its log line.
#[derive(Debug)]
pub enum Outcome {
    NoFile,
    /// The file is broken: generation `running` goes on.
    Rejected {
        running: u64,
        error: Error,
    },
    Applied(Applied),
}

#[derive(Debug)]
pub struct Applied {
    pub number: u64,
    pub source: String,
    /// What changed, one phrase each (empty: nothing).
    pub changes: Vec<String>,
    /// What changed but cannot be applied to a running process.
    pub not_applied: Vec<String>,
    /// Over every worker that answered.
    pub carried: Carried,
    pub workers: usize,
    /// Workers that did not take it (gone: the proxy is stopping).
    pub missing: Option<AskError>,
    /// The new configuration's warnings (an expired certificate...), as at start.
    pub warnings: Vec<String>,
}

impl Reloader {
    pub fn new(source: Source, current: SharedCurrent, post: Post<WorkerMsg>) -> Reloader {
        Reloader {
            source,
            current,
            post,
            state: None,
            after: None,
        }
    }

    /// Tell `state` what each reload came to.
    pub fn report_to(&mut self, state: Arc<crate::process_metrics::ReloadState>) {
        self.state = Some(state);
    }

    /// Call `f` after each applied reload.
    pub fn after_each(&mut self, f: Box<dyn Fn() + Send>) {
        self.after = Some(f);
    }

    /// The number of the generation running now.
    pub fn generation(&self) -> u64 {
        lock(&self.current).number
    }

    /// Read, resolve and check the file again; on success make it every worker's current
    /// generation.
    pub fn reload(&mut self) -> Outcome {
        let Source::File { path, overrides } = &self.source else {
            return Outcome::NoFile;
        };
        let loaded = schema::load(path)
            .map_err(Error::from)
            .and_then(|f| resolve(&f, overrides));
        let mut current = lock(&self.current);
        let opened = loaded.and_then(|new| {
            let logs = open_logs(&current.cfg, &new, self.post.workers())?;
            Ok((new, logs))
        });
        let (new, logs) = match opened {
            Ok(opened) => opened,
            Err(error) => {
                if let Some(s) = &self.state {
                    s.rejected();
                }
                return Outcome::Rejected {
                    running: current.number,
                    error,
                };
            }
        };
        let (cfg, changes, not_applied) = compare(&current.cfg, new);
        let warnings = crate::config::warnings(&cfg);
        let cfg = Arc::new(cfg);
        let source = cfg.source.clone();
        let Stepped {
            number,
            carried,
            workers,
            missing,
        } = step(&self.post, &mut current, cfg, logs);
        drop(current);
        if let Some(s) = &self.state {
            s.applied(number);
        }
        if let Some(f) = &self.after {
            f();
        }
        Outcome::Applied(Applied {
            number,
            source,
            changes,
            not_applied,
            carried,
            workers,
            missing,
            warnings,
        })
    }
}

/// The lock on the current generation; a thread that panicked holding it left a whole
/// `Current` behind (it is replaced in one assignment), so a poisoned lock is used as is.
pub fn lock(current: &SharedCurrent) -> std::sync::MutexGuard<'_, Current> {
    current.lock().unwrap_or_else(|p| p.into_inner())
}

/// When `new` changes `old`'s `access_log`, its file opened once per worker (each its own
/// descriptor, as at start); none when it is the same or off. Opened here, on the reloader's
/// thread, so that a path that cannot be opened rejects the reload before any worker
/// switches, and no worker waits on the file system.
pub fn open_logs(old: &Config, new: &Config, workers: usize) -> Result<Vec<File>, Error> {
    let Some(l) = new
        .access_log
        .as_ref()
        .filter(|_| old.access_log != new.access_log)
    else {
        return Ok(Vec::new());
    };
    crate::access_log::open_per_worker(l, workers).map_err(|e| {
        Error::File(shared::config::ConfigError::Invalid {
            file: new.source.clone(),
            key: Some("access_log".into()),
            message: format!("cannot open {}: {e}", l.path.display()),
        })
    })
}

fn sum(all: &[Carried]) -> Carried {
    all.iter().fold(Carried::default(), |a, c| Carried {
        pools_kept: a.pools_kept + c.pools_kept,
        pools: a.pools + c.pools,
        idle_kept: a.idle_kept + c.idle_kept,
        caches_kept: a.caches_kept + c.caches_kept,
        caches: a.caches + c.caches,
    })
}

/// `new` with what a running process keeps as started (listener addresses, runtime) put back
/// from `old`; what changed; and what changed but was not applied.
///
/// Sections are compared by their `Debug` text: the config types hold parsed templates and
/// paths that have no `PartialEq`, and this only words a log line (what a worker carries over
/// is decided field by field in `generation.rs`).
pub fn compare(old: &Config, mut new: Config) -> (Config, Vec<String>, Vec<String>) {
    let differs = |a: &dyn fmt::Debug, b: &dyn fmt::Debug| format!("{a:?}") != format!("{b:?}");
    let mut not_applied = Vec::new();
    // A listener's PROXY protocol is decided when its accept loop starts.
    let bound = |c: &Config| -> Vec<(SocketAddr, u32, bool)> {
        let l = c.listeners.iter();
        l.map(|l| (l.addr, l.backlog, l.proxy_protocol)).collect()
    };
    if bound(old) != bound(&new) {
        let addrs = |c: &Config| {
            let v: Vec<String> = c.listeners.iter().map(|l| l.addr.to_string()).collect();
            v.join(" ")
        };
        not_applied.push(format!("listeners {} -> {}", addrs(old), addrs(&new)));
    }
    if old.runtime.workers != new.runtime.workers {
        let (a, b) = (old.runtime.workers, new.runtime.workers);
        not_applied.push(format!("workers {a} -> {b}"));
    }
    if differs(&old.runtime, &new.runtime) && old.runtime.workers == new.runtime.workers {
        not_applied.push("runtime (driver, pinning, multishot)".into());
    }
    let mut changes = Vec::new();
    if bound(old) == bound(&new) {
        // The same sockets: their TLS settings are the new file's (a handshake takes the
        // certificates of the generation current then).
        if new.listeners.iter().any(|l| l.tls.is_some()) {
            changes.push("TLS certificates reloaded".to_string());
        }
        // Same sockets, same clients: their session tickets and IDs stay valid.
        for (n, o) in new.listeners.iter_mut().zip(&old.listeners) {
            if let (Some(n), Some(o)) = (n.tls.as_mut(), o.tls.as_ref()) {
                n.built.keep_resumption(&o.built);
            }
        }
    } else {
        new.listeners = old.listeners.clone();
    }
    new.runtime = old.runtime.clone();
    // The listeners stay as started, and so does their steering by client address.
    if crate::limit::wants_steering(&new) && !old.client_steering && old.runtime.workers > 1 {
        not_applied.push(
            "steering clients to workers (the limits are divided between the workers until \
             a restart or a takeover)"
                .into(),
        );
    }
    // Steered by peer, the listeners now see a balancer where clients were: every connection
    // of its address goes to the one worker (the counts stay exact, the load does not spread).
    let named_by = crate::limit::behind_a_balancer(&new);
    if let Some(by) = named_by.filter(|_| old.client_steering && old.runtime.workers > 1) {
        not_applied.push(format!(
            "unsteering the listeners for clients named by {by} (a balancer's connections \
             all go to one worker until a restart or a takeover)"
        ));
    }
    new.client_steering = old.client_steering;
    if old.steer != new.steer {
        let (a, b) = (old.steer.name(), new.steer.name());
        not_applied.push(format!(
            "steer {a} -> {b} (the listeners keep how they were steered)"
        ));
        new.steer = old.steer;
    }
    if old.admin != new.admin {
        let addr = |a: Option<SocketAddr>| a.map_or("none".to_string(), |a| a.to_string());
        let (a, b) = (addr(old.admin), addr(new.admin));
        not_applied.push(format!("admin listener {a} -> {b}"));
        new.admin = old.admin;
    }
    for g in &new.groups {
        match old.groups.iter().find(|o| o.name == g.name) {
            None => changes.push(format!("upstream {} added", g.name)),
            Some(o) if differs(o, g) => changes.push(format!("upstream {} changed", g.name)),
            Some(_) => {}
        }
    }
    for o in &old.groups {
        if !new.groups.iter().any(|g| g.name == o.name) {
            changes.push(format!("upstream {} removed", o.name));
        }
    }
    let sections: [(&str, &dyn fmt::Debug, &dyn fmt::Debug); 5] = [
        ("routes", &old.routes, &new.routes),
        ("timeouts", &old.timeouts, &new.timeouts),
        ("headers", &old.headers, &new.headers),
        ("limits", &old.limits, &new.limits),
        ("client_limits", &old.client_limits, &new.client_limits),
    ];
    for (name, a, b) in sections {
        if differs(a, b) {
            changes.push(name.to_string());
        }
    }
    if old.access_log != new.access_log {
        let log = |l: &Option<crate::config::AccessLogConfig>| match l {
            Some(l) => format!("{} ({})", l.path.display(), l.format.name()),
            None => "off".to_string(),
        };
        let (a, b) = (log(&old.access_log), log(&new.access_log));
        changes.push(format!("access_log {a} -> {b}"));
    }
    (new, changes, not_applied)
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::NoFile => f.write_str(
                "proxy: SIGHUP: no configuration file to reload (started without --config: \
                 the configuration is the command line); nothing changed",
            ),
            Outcome::Rejected { running, error } => write!(
                f,
                "proxy: reload rejected, generation {running} keeps running: {error}"
            ),
            Outcome::Applied(a) => a.fmt(f),
        }
    }
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let changed = if self.changes.is_empty() {
            "no change".to_string()
        } else {
            self.changes.join(", ")
        };
        let c = &self.carried;
        write!(
            f,
            "proxy: reload: generation {} from {} on {} workers: {changed}; kept {}/{} server \
             pools ({} idle connections), {}/{} caches",
            self.number,
            self.source,
            self.workers,
            c.pools_kept,
            c.pools,
            c.idle_kept,
            c.caches_kept,
            c.caches
        )?;
        if !self.not_applied.is_empty() {
            write!(
                f,
                "; not applied, kept as started (needs a restart or a takeover): {}",
                self.not_applied.join(", ")
            )?;
        }
        if let Some(e) = &self.missing {
            write!(f, "; {e}")?;
        }
        // A line each, as at start (`cli::print_warnings`).
        for w in &self.warnings {
            write!(f, "\nproxy: warning: {w}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(listen: &str, servers: &str, extra: &str) -> Config {
        let text = format!(
            "[[listen]]\naddr = \"{listen}\"\n[upstream.app]\nservers = [{servers}]\n{extra}"
        );
        crate::config::from_toml("t.toml", &text).expect("config")
    }

    #[test]
    fn changes_are_named_and_what_cannot_change_is_kept_as_started() {
        let old = cfg("127.0.0.1:8080", "\"127.0.0.1:1\"", "");
        let (same, changes, not_applied) = compare(&old, old.clone());
        assert!(changes.is_empty() && not_applied.is_empty());
        assert_eq!(same.listeners[0].addr, old.listeners[0].addr);

        let new = cfg(
            "127.0.0.1:9090",
            "\"127.0.0.1:2\"",
            "[upstream.img]\nservers = [\"127.0.0.1:3\"]\n[[route]]\npath = \"/api/\"\nupstream = \"app\"\n\
             [runtime]\nworkers = 3\n[timeouts]\nread = \"1s\"\n[admin]\naddr = \"127.0.0.1:9901\"\n",
        );
        let (applied, changes, not_applied) = compare(&old, new);
        assert_eq!(
            changes,
            [
                "upstream app changed",
                "upstream img added",
                "routes",
                "timeouts"
            ]
        );
        let workers = format!("workers {} -> 3", old.runtime.workers);
        assert_eq!(
            not_applied,
            [
                "listeners 127.0.0.1:8080 -> 127.0.0.1:9090".to_string(),
                workers,
                "admin listener none -> 127.0.0.1:9901".to_string()
            ]
        );
        // Kept as started; everything else is the new file's.
        assert_eq!(applied.listeners[0].addr, old.listeners[0].addr);
        assert_eq!(applied.runtime.workers, old.runtime.workers);
        assert_eq!(applied.admin, None);
        assert_eq!(applied.timeouts.read, Duration::from_secs(1));
        assert_eq!(applied.groups.len(), 2);

        // How the listeners are steered stays as started.
        let new = cfg(
            "127.0.0.1:8080",
            "\"127.0.0.1:1\"",
            "[runtime]\nsteer = \"cpu\"\n",
        );
        let (applied, changes, not_applied) = compare(&old, new);
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(
            not_applied,
            ["steer kernel -> cpu (the listeners keep how they were steered)"]
        );
        assert_eq!(applied.steer, old.steer);
    }
}

#[cfg(test)]
mod access_log_tests {
    use super::{compare, open_logs};

    fn cfg(log: &str) -> crate::config::Config {
        let text = format!(
            "{log}[[listen]]\naddr = \"127.0.0.1:8080\"\n[upstream.app]\nservers = [\"127.0.0.1:1\"]\n"
        );
        crate::config::from_toml("t.toml", &text).unwrap()
    }

    #[test]
    fn an_access_log_change_is_named_and_its_files_opened_before_the_workers_switch() {
        let dir = std::env::temp_dir().join(format!("proxy-reload-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = |name: &str, format: &str| {
            let path = dir.join(name);
            format!(
                "access_log = {{ path = \"{}\", format = \"{format}\" }}\n",
                path.display()
            )
        };
        let (a, b) = (cfg(&log("a.log", "combined")), cfg(&log("b.log", "json")));
        let (_, changes, not_applied) = compare(&a, b.clone());
        let (pa, pb) = (dir.join("a.log"), dir.join("b.log"));
        let want = format!(
            "access_log {} (combined) -> {} (json)",
            pa.display(),
            pb.display()
        );
        assert_eq!(changes, [want]);
        assert!(not_applied.is_empty(), "{not_applied:?}");
        let (_, changes, _) = compare(&a, cfg(""));
        assert_eq!(
            changes,
            [format!("access_log {} (combined) -> off", pa.display())]
        );
        let (_, changes, _) = compare(&cfg(""), a.clone());
        assert_eq!(
            changes,
            [format!("access_log off -> {} (combined)", pa.display())]
        );

        // A file per worker for a change; none for the same log or none at all.
        assert_eq!(open_logs(&a, &b, 3).unwrap().len(), 3);
        assert!(pb.exists());
        assert!(open_logs(&a, &a, 3).unwrap().is_empty());
        assert!(open_logs(&a, &cfg(""), 3).unwrap().is_empty());
        let bad = cfg(&log("no-such-dir/c.log", "combined"));
        let e = open_logs(&a, &bad, 3).unwrap_err().to_string();
        assert!(
            e.starts_with("t.toml: key `access_log`: cannot open ") && e.contains("no-such-dir"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod steering_tests {
    use super::compare;

    fn cfg(extra: &str, steered: bool) -> crate::config::Config {
        let text = format!(
            "[[listen]]\naddr = \"127.0.0.1:8080\"\n[runtime]\nworkers = 2\n\
             [upstream.app]\nservers = [\"127.0.0.1:9001\"]\n{extra}"
        );
        let mut c = crate::config::from_toml("t.toml", &text).unwrap();
        c.client_steering = steered;
        c
    }

    #[test]
    fn a_reload_keeps_the_listeners_steering_and_says_when_limits_need_it() {
        let limits = "[client_limits]\nrate = \"10/s\"\n";
        // Limits added to a process whose listeners are not steered: divided until a restart.
        let (new, changes, not_applied) = compare(&cfg("", false), cfg(limits, true));
        assert!(!new.client_steering);
        assert!(
            changes.contains(&"client_limits".to_string()),
            "{changes:?}"
        );
        assert!(
            not_applied.iter().any(|m| m.contains("steering clients")),
            "{not_applied:?}"
        );
        // Steered from the start: kept, nothing to say.
        let (new, _, not_applied) = compare(&cfg(limits, true), cfg(limits, false));
        assert!(new.client_steering);
        assert!(not_applied.is_empty(), "{not_applied:?}");
        // Clients named by a balancer from now on: the steering by peer stays, and the line
        // says what that does to the balancer's connections.
        let behind = format!("[headers]\nreal_ip_from = [\"10.0.0.0/8\"]\n{limits}");
        let (new, _, not_applied) = compare(&cfg(limits, true), cfg(&behind, false));
        assert!(new.client_steering);
        assert!(
            not_applied
                .iter()
                .any(|m| m.contains("all go to one worker")),
            "{not_applied:?}"
        );
    }
}
