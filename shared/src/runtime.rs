//! Thread-per-core bootstrap: one monoio runtime per worker, each on its own named OS thread
//! pinned to its own core, shared-nothing. The driver is chosen once, at start, in three steps
//! for `auto`: io_uring with SINGLE_ISSUER + DEFER_TASKRUN, plain io_uring, then epoll.
//! (monoio's own FusionDriver fallback returns an error when the flags are refused, and
//! io_uring is often disabled in containers and by seccomp, so the fallback is ours.)

pub use crate::pinning::PinMode;
use crate::pinning::{decide, CpuBudget, PinDecision};
use crate::shutdown::{Shutdown, ShutdownFlag};
use std::fmt;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Which driver the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DriverChoice {
    /// io_uring with the fast flags, plain io_uring, then epoll: the first that works.
    #[default]
    Auto,
    /// io_uring only (with the fast flags when the kernel takes them); an error if unavailable.
    IoUring,
    /// The epoll driver.
    Epoll,
}

/// The driver actually in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverKind {
    /// io_uring with IORING_SETUP_SINGLE_ISSUER and IORING_SETUP_DEFER_TASKRUN.
    UringFast,
    /// io_uring without those flags (kernels before 6.1).
    Uring,
    /// epoll (monoio's legacy driver).
    Epoll,
}

impl fmt::Display for DriverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DriverKind::UringFast => "io_uring (single-issuer, defer-taskrun)",
            DriverKind::Uring => "io_uring",
            DriverKind::Epoll => "epoll",
        })
    }
}

/// Runtime settings shared by both binaries; flattened into their clap parsers.
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeArgs {
    /// Worker threads, one pinned monoio runtime each [default: the CPUs this process may run on]
    #[arg(long, visible_alias = "threads", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub workers: Option<u16>,
    /// I/O driver: auto tries io_uring (fast flags, then plain), then epoll
    #[arg(long, value_enum, default_value_t = DriverChoice::Auto)]
    pub driver: DriverChoice,
    /// Pin worker i to the i-th CPU of the CPU set: auto pins only when the set holds a CPU
    /// per worker and no cgroup CPU quota is below the worker count
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = PinMode::Auto, conflicts_with = "no_pin")]
    pub pin: PinMode,
    /// Do not pin workers to cores (--pin off)
    #[arg(long)]
    pub no_pin: bool,
    /// Read sockets with a receive submitted per read, not one multishot receive per
    /// connection into a shared buffer ring (io_uring with the fast flags only)
    #[arg(long)]
    pub no_multishot: bool,
}

/// Immutable runtime configuration handed to `spawn_workers`.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub workers: usize,
    /// Pinning allowed (`false`: `--pin off`); whether it happens is [`pin_mode`]'s decision
    /// at start (`pinning::decide`).
    ///
    /// [`pin_mode`]: RuntimeConfig::pin_mode
    pub pin: bool,
    /// `--pin on`: pin whatever the CPU set and the quota (with `pin`).
    pub pin_forced: bool,
    pub driver: DriverChoice,
    /// io_uring submission queue size.
    pub entries: u32,
    /// Multishot receives where the driver has them (see `multishot_recv`).
    pub multishot: bool,
}

impl RuntimeConfig {
    pub fn from_args(args: &RuntimeArgs) -> Self {
        let mode = if args.no_pin { PinMode::Off } else { args.pin };
        RuntimeConfig {
            workers: args.workers.map(usize::from).unwrap_or_else(available_cpus),
            pin: mode != PinMode::Off,
            pin_forced: mode == PinMode::On,
            driver: args.driver,
            entries: 4096,
            multishot: !args.no_multishot,
        }
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig::from_args(&RuntimeArgs {
            workers: None,
            driver: DriverChoice::Auto,
            pin: PinMode::Auto,
            no_pin: false,
            no_multishot: false,
        })
    }
}

impl RuntimeConfig {
    /// `pin` and `pin_forced` as the mode they were given as.
    pub fn pin_mode(&self) -> PinMode {
        match (self.pin, self.pin_forced) {
            (false, _) => PinMode::Off,
            (true, true) => PinMode::On,
            (true, false) => PinMode::Auto,
        }
    }

    /// Set from a mode (`--pin`, a file's `pin`).
    pub fn set_pin_mode(&mut self, mode: PinMode) {
        self.pin = mode != PinMode::Off;
        self.pin_forced = mode == PinMode::On;
    }
}

/// The default worker count: the CPUs this process may run on (its affinity mask, as taskset
/// sets it), at most its cgroup CPU quota rounded down, at least 1 (`pinning::CpuBudget`).
pub fn available_cpus() -> usize {
    cpu_budget().default_workers()
}

/// Whether the workers are pinned, and the core each is to be pinned to (`None`: unpinned):
/// worker `i` on the CPU set's `i % len`-th CPU. Made once, before the workers start: a
/// caller that must know their cores first (steering connections by CPU) makes it and hands
/// it to its workers through [`Launch`].
#[derive(Debug, Clone)]
pub struct PinPlan {
    pub decision: PinDecision,
    pub cores: Vec<Option<usize>>,
}

/// The pinning plan for `workers` workers under `cfg`.
pub fn plan_pinning(cfg: &RuntimeConfig, workers: usize) -> PinPlan {
    let decision = decide(cfg.pin_mode(), &cpu_budget(), workers);
    let ids = if decision.pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };
    let cores = (0..workers)
        .map(|i| (!ids.is_empty()).then(|| ids[i % ids.len()].id))
        .collect();
    PinPlan { decision, cores }
}

/// This process's CPU set and quota, read once (at start, by the first caller: the thread
/// that parses the configuration, never a worker).
pub fn cpu_budget() -> CpuBudget {
    static BUDGET: std::sync::OnceLock<CpuBudget> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(CpuBudget::read)
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("io_uring is not available here ({0}); use --driver epoll or --driver auto")]
    UringUnavailable(io::Error),
    #[error("cannot start worker {worker}: {source}")]
    Start { worker: usize, source: io::Error },
    #[error("worker {0} panicked")]
    Panicked(usize),
}

/// Set to any value to make io_uring look unavailable (tests the epoll fallback on kernels
/// that do have io_uring).
pub const DISABLE_URING_ENV: &str = "SHARED_DISABLE_IO_URING";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UringFlags {
    Fast,
    Plain,
}

fn uring_builder(flags: UringFlags) -> io_uring::Builder {
    let mut b = io_uring::IoUring::builder();
    if flags == UringFlags::Fast {
        b.setup_single_issuer().setup_defer_taskrun();
    }
    b
}

fn try_uring(flags: UringFlags, entries: u32) -> io::Result<()> {
    if std::env::var_os(DISABLE_URING_ENV).is_some() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("disabled by {DISABLE_URING_ENV}"),
        ));
    }
    // Probe on a throwaway thread: tearing the probe ring down interrupts the probing
    // thread's next blocking socket call with EINTR (seen on 6.x kernels), and the caller's
    // thread may be a test or a main thread doing blocking I/O next.
    std::thread::Builder::new()
        .name("uring-probe".into())
        .spawn(move || uring_builder(flags).build(entries).map(drop))?
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("io_uring probe panicked")))
}

/// The fallback logic, over a probe that says whether io_uring with given flags can be set up.
fn choose_driver(
    choice: DriverChoice,
    probe: impl Fn(UringFlags) -> io::Result<()>,
) -> Result<DriverKind, RuntimeError> {
    match choice {
        DriverChoice::Epoll => Ok(DriverKind::Epoll),
        DriverChoice::IoUring | DriverChoice::Auto => match probe(UringFlags::Fast) {
            Ok(()) => Ok(DriverKind::UringFast),
            Err(_) => match probe(UringFlags::Plain) {
                Ok(()) => Ok(DriverKind::Uring),
                Err(e) if choice == DriverChoice::IoUring => Err(RuntimeError::UringUnavailable(e)),
                Err(_) => Ok(DriverKind::Epoll),
            },
        },
    }
}

thread_local! {
    /// This worker reads sockets through multishot receives (set once, at its start).
    static MULTISHOT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The driver of the runtime `run_on` runs on this thread.
    static DRIVER: std::cell::Cell<Option<DriverKind>> = const { std::cell::Cell::new(None) };
}

/// The driver of this thread's runtime (`None` outside `run_on`).
pub fn current_driver() -> Option<DriverKind> {
    DRIVER.with(|d| d.get())
}

/// Whether workers of `cfg` on `driver` read through multishot receives: io_uring with the
/// fast flags (kernel 6.1+; multishot receives and buffer rings came in 6.0 and 5.19), unless
/// turned off.
pub fn multishot_on(cfg: &RuntimeConfig, driver: DriverKind) -> bool {
    cfg.multishot && driver == DriverKind::UringFast
}

/// For the start-up line: how sockets are read.
pub fn describe_recv(cfg: &RuntimeConfig, driver: DriverKind) -> &'static str {
    match (driver, multishot_on(cfg, driver)) {
        (DriverKind::Epoll, _) => "",
        (_, true) => ", multishot receives",
        (_, false) => ", a receive per read",
    }
}

/// Let `s` wait for its next bytes holding no buffer, with a single receive into the
/// worker's buffer ring per wait (`TcpStream::enable_ready_recv`), if this worker reads
/// through multishot receives (see `multishot_on`): a new connection waits for its first
/// request that way. Its reads are plain receives, and nothing stays armed, so a connection
/// that carries one request costs nothing more. `multishot_recv` later makes it a multishot
/// receive.
pub fn ready_recv(s: &mut monoio::net::TcpStream) -> bool {
    MULTISHOT.with(|m| m.get()) && s.enable_ready_recv()
}

/// Read `s` through one multishot receive from now on, if this worker does (see
/// `multishot_on`). A connection whose every read is awaited in turn gains: no submission, no
/// failed first attempt and no poll armed per read, and an idle connection holds no buffer.
/// A peek of such a socket does not see what the receive took: `Stream::still_open` looks
/// at the receive's queue too (plain streams; a TLS one checked that way must not have one).
pub fn multishot_recv(s: &mut monoio::net::TcpStream) -> bool {
    if !MULTISHOT.with(|m| m.get()) {
        return false;
    }
    if s.enable_multishot_recv() {
        return true;
    }
    // The buffer ring could not be registered (the start-up line said multishot): say so
    // once for this worker, and read as without it from now on.
    MULTISHOT.with(|m| m.set(false));
    let me = std::thread::current();
    crate::log!(
        "warning: {}: multishot receives unavailable (the kernel refused the buffer ring); \
         reading with a receive per read",
        me.name().unwrap_or("worker")
    );
    false
}

/// Decide the driver for this process (probing the kernel once).
pub fn select_driver(cfg: &RuntimeConfig) -> Result<DriverKind, RuntimeError> {
    choose_driver(cfg.driver, |f| try_uring(f, cfg.entries))
}

/// Every driver this machine can run: the one `auto` picks and, when that is io_uring, epoll
/// too. Tests that exercise runtime-level code run on each, so the fallback driver is tested
/// wherever the fast one is.
pub fn drivers_here() -> Vec<DriverKind> {
    let auto = choose_driver(DriverChoice::Auto, |f| try_uring(f, 64))
        .expect("auto never fails: epoll is always there");
    if auto == DriverKind::Epoll {
        vec![DriverKind::Epoll]
    } else {
        vec![auto, DriverKind::Epoll]
    }
}

/// What a worker gets: its index, its core, the driver, and its local shutdown handle.
#[derive(Clone)]
pub struct WorkerCtx {
    pub id: usize,
    pub core: Option<usize>,
    pub driver: DriverKind,
    /// Fires when the process-wide shutdown flag is set.
    pub shutdown: Shutdown,
}

/// Running workers. `join` waits for all of them.
pub struct Workers {
    pub driver: DriverKind,
    /// Which core each worker is pinned to (`None`: unpinned, by the plan or because pinning
    /// failed), as each worker reported it once it had tried.
    pub cores: Vec<Option<usize>>,
    /// Why they are pinned or not (`pinning::decide`): "pin auto: ...".
    pub pin_why: String,
    handles: Vec<JoinHandle<Result<(), RuntimeError>>>,
}

impl Workers {
    /// Wait for every worker; the first error (a worker that could not start, or panicked).
    pub fn join(self) -> Result<(), RuntimeError> {
        let mut first = Ok(());
        for (i, h) in self.handles.into_iter().enumerate() {
            let r = h.join().unwrap_or(Err(RuntimeError::Panicked(i)));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// "2 workers pinned to cores 0,1" / "1 worker pinned to core 1" / "2 workers, unpinned" /
    /// "2 workers, 1 pinned to core 0, 1 unpinned" (a pin the kernel refused).
    pub fn describe_pinning(&self) -> String {
        let pinned: Vec<String> = self.cores.iter().flatten().map(|c| c.to_string()).collect();
        let n = self.cores.len();
        let w = if n == 1 { "worker" } else { "workers" };
        let c = if pinned.len() == 1 { "core" } else { "cores" };
        let (k, list) = (pinned.len(), pinned.join(","));
        match k {
            0 => format!("{n} {w}, unpinned"),
            k if k < n => format!("{n} {w}, {k} pinned to {c} {list}, {} unpinned", n - k),
            _ => format!("{n} {w} pinned to {c} {list}"),
        }
    }
}

/// Start one worker per item of `per_worker` (its listeners, its share of connections...).
/// Each runs `f(ctx, item)` to completion on its own runtime, on a thread named `{name}-{i}`,
/// pinned as [`plan_pinning`] says. Returns once every worker has tried its pin.
pub fn spawn_workers<T: Send + 'static, Fut: Future<Output = ()> + 'static>(
    cfg: &RuntimeConfig,
    driver: DriverKind,
    flag: Arc<ShutdownFlag>,
    name: &str,
    per_worker: Vec<T>,
    f: impl Fn(WorkerCtx, T) -> Fut + Send + Sync + 'static,
) -> Result<Workers, RuntimeError> {
    let plan = plan_pinning(cfg, per_worker.len());
    let launch = Launch {
        cfg,
        plan: &plan,
        driver,
        flag,
        name,
    };
    launch.spawn(per_worker, f)
}

/// How workers start: their runtime settings, the pinning plan (one core per worker, made by
/// the caller when it must know the cores first), the driver, the shutdown flag and the
/// threads' name.
pub struct Launch<'a> {
    pub cfg: &'a RuntimeConfig,
    pub plan: &'a PinPlan,
    pub driver: DriverKind,
    pub flag: Arc<ShutdownFlag>,
    pub name: &'a str,
}

impl Launch<'_> {
    /// Start one worker per item of `per_worker`, each running `f(ctx, item)` (see
    /// [`spawn_workers`]). Returns once every worker has tried its pin: `Workers::cores` says
    /// where they run, not where they were meant to (a pin the kernel refuses leaves its
    /// worker unpinned, with a warning).
    pub fn spawn<T, F, Fut>(self, per_worker: Vec<T>, f: F) -> Result<Workers, RuntimeError>
    where
        T: Send + 'static,
        F: Fn(WorkerCtx, T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let Launch {
            cfg,
            plan,
            driver,
            flag,
            name,
        } = self;
        assert_eq!(
            plan.cores.len(),
            per_worker.len(),
            "one planned core per worker"
        );
        let f = Arc::new(f);
        let n = per_worker.len();
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
        let mut handles = Vec::with_capacity(n);
        for (id, item) in per_worker.into_iter().enumerate() {
            let f = f.clone();
            let flag = flag.clone();
            let core = plan.cores[id];
            let entries = cfg.entries;
            let multishot = multishot_on(cfg, driver);
            let pinned_tx = pinned_tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("{name}-{id}"))
                .spawn(move || {
                    let pinned = core.filter(|&c| crate::pinning::pin_this_thread(c));
                    // The start waits for every worker's report: sent before the warning,
                    // which may wait for a stderr nobody reads.
                    let _ = pinned_tx.send((id, pinned));
                    drop(pinned_tx);
                    if let (Some(c), None) = (core, pinned) {
                        crate::log!(
                            "warning: could not pin worker {id} to core {c}; running unpinned"
                        );
                    }
                    MULTISHOT.with(|m| m.set(multishot));
                    let ctx = WorkerCtx {
                        id,
                        core: pinned,
                        driver,
                        shutdown: Shutdown::new(),
                    };
                    run_on(driver, entries, async move {
                        monoio::spawn(ctx.shutdown.clone().watch(flag));
                        f(ctx, item).await
                    })
                    .map_err(|source| RuntimeError::Start { worker: id, source })
                })
                .map_err(|source| RuntimeError::Start { worker: id, source })?;
            handles.push(h);
        }
        drop(pinned_tx);
        // Every thread sends once, first thing; the channel ends when all have (or died trying).
        let mut cores = vec![None; n];
        for (id, core) in pinned_rx {
            cores[id] = core;
        }
        Ok(Workers {
            driver,
            cores,
            pin_why: plan.decision.why.clone(),
            handles,
        })
    }
}

/// Build a runtime with the given driver (and a timer) on this thread and run `fut` on it.
pub fn run_on<Fut: Future>(driver: DriverKind, entries: u32, fut: Fut) -> io::Result<Fut::Output> {
    DRIVER.with(|d| d.set(Some(driver)));
    match driver {
        DriverKind::UringFast | DriverKind::Uring => {
            let flags = if driver == DriverKind::UringFast {
                UringFlags::Fast
            } else {
                UringFlags::Plain
            };
            let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
                .uring_builder(uring_builder(flags))
                .with_entries(entries)
                .enable_timer()
                .build()?;
            Ok(rt.block_on(fut))
        }
        DriverKind::Epoll => {
            let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
                .enable_timer()
                .build()?;
            Ok(rt.block_on(fut))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refuse(which: &'static [UringFlags]) -> impl Fn(UringFlags) -> io::Result<()> {
        move |f| {
            if which.contains(&f) {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn auto_falls_back_in_three_steps() {
        use DriverChoice::*;
        use UringFlags::*;
        assert_eq!(
            choose_driver(Auto, refuse(&[])).unwrap(),
            DriverKind::UringFast
        );
        assert_eq!(
            choose_driver(Auto, refuse(&[Fast])).unwrap(),
            DriverKind::Uring
        );
        assert_eq!(
            choose_driver(Auto, refuse(&[Fast, Plain])).unwrap(),
            DriverKind::Epoll
        );
        assert_eq!(
            choose_driver(Epoll, refuse(&[])).unwrap(),
            DriverKind::Epoll
        );
        assert_eq!(
            choose_driver(IoUring, refuse(&[Fast])).unwrap(),
            DriverKind::Uring
        );
        let err = choose_driver(IoUring, refuse(&[Fast, Plain])).unwrap_err();
        assert!(
            err.to_string().contains("io_uring is not available"),
            "{err}"
        );
    }

    #[test]
    fn disabled_uring_selects_epoll_and_runs() {
        // The env var is read by the probe only; set it in a child-free way for this check.
        let kind = choose_driver(DriverChoice::Auto, |_| {
            Err(io::Error::new(io::ErrorKind::Unsupported, "seccomp"))
        })
        .unwrap();
        assert_eq!(kind, DriverKind::Epoll);
        let out = run_on(kind, 256, async {
            monoio::time::sleep(std::time::Duration::from_millis(1)).await;
            7
        })
        .unwrap();
        assert_eq!(out, 7);
    }

    #[test]
    fn multishot_only_on_io_uring_with_the_fast_flags_unless_turned_off() {
        let on = RuntimeConfig::default();
        let off = RuntimeConfig {
            multishot: false,
            ..RuntimeConfig::default()
        };
        assert!(multishot_on(&on, DriverKind::UringFast));
        for d in [DriverKind::Uring, DriverKind::Epoll] {
            assert!(!multishot_on(&on, d), "{d}");
        }
        assert!(!multishot_on(&off, DriverKind::UringFast));
        assert_eq!(
            describe_recv(&on, DriverKind::UringFast),
            ", multishot receives"
        );
        assert_eq!(
            describe_recv(&off, DriverKind::UringFast),
            ", a receive per read"
        );
        assert_eq!(
            describe_recv(&on, DriverKind::Uring),
            ", a receive per read"
        );
        assert_eq!(describe_recv(&on, DriverKind::Epoll), "");
    }

    #[test]
    fn workers_run_and_stop_on_flag() {
        for driver in drivers_here() {
            let cfg = RuntimeConfig {
                workers: 2,
                pin: true,
                pin_forced: false,
                driver: DriverChoice::Auto,
                entries: 256,
                multishot: true,
            };
            let flag = ShutdownFlag::new();
            let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let s2 = seen.clone();
            let w = spawn_workers(
                &cfg,
                driver,
                flag.clone(),
                "t",
                vec![10usize, 20],
                move |ctx, v| {
                    let seen = s2.clone();
                    async move {
                        ctx.shutdown.wait().await;
                        seen.fetch_add(v + ctx.id, std::sync::atomic::Ordering::SeqCst);
                    }
                },
            )
            .unwrap();
            assert_eq!(w.cores.len(), 2);
            assert_eq!(w.driver, driver);
            flag.trigger();
            w.join().unwrap();
            assert_eq!(
                seen.load(std::sync::atomic::Ordering::SeqCst),
                31,
                "{driver}"
            );
        }
    }

    /// A worker whose planned core the kernel refuses runs unpinned and is reported so: the
    /// summary never names a core a worker is not on.
    #[test]
    fn a_refused_pin_is_reported_as_unpinned() {
        let allowed: Vec<usize> = core_affinity::get_core_ids()
            .expect("this process's CPU set")
            .iter()
            .map(|c| c.id)
            .collect();
        let offline = (0..libc::CPU_SETSIZE as usize)
            .rev()
            .find(|c| !allowed.contains(c))
            .expect("a CPU id outside this process's CPU set");
        let cfg = RuntimeConfig {
            workers: 2,
            pin: true,
            pin_forced: true,
            driver: DriverChoice::Epoll,
            entries: 256,
            multishot: false,
        };
        let plan = PinPlan {
            decision: PinDecision {
                pin: true,
                why: "pin on".into(),
            },
            cores: vec![Some(allowed[0]), Some(offline)],
        };
        let flag = ShutdownFlag::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let launch = Launch {
            cfg: &cfg,
            plan: &plan,
            driver: DriverKind::Epoll,
            flag: flag.clone(),
            name: "pin",
        };
        let w = launch
            .spawn(vec![tx.clone(), tx], |ctx, tx| async move {
                tx.send((ctx.id, ctx.core)).unwrap();
                ctx.shutdown.wait().await;
            })
            .unwrap();
        assert_eq!(w.cores, vec![Some(allowed[0]), None]);
        assert_eq!(
            w.describe_pinning(),
            format!("2 workers, 1 pinned to core {}, 1 unpinned", allowed[0])
        );
        // Stopped first: a worker that failed to start cannot leave the collection waiting.
        flag.trigger();
        w.join().unwrap();
        let mut told: Vec<_> = rx.iter().collect();
        told.sort();
        assert_eq!(
            told,
            vec![(0, Some(allowed[0])), (1, None)],
            "each worker's own view"
        );
    }

    #[test]
    fn drivers_here_has_epoll_last_and_no_repeats() {
        let d = drivers_here();
        assert_eq!(d.last(), Some(&DriverKind::Epoll));
        assert!(
            d.len() <= 2 && (d.len() == 1 || d[0] != DriverKind::Epoll),
            "{d:?}"
        );
    }

    #[test]
    fn pinning_is_described_in_words() {
        let w = |cores: Vec<Option<usize>>| Workers {
            pin_why: String::new(),
            driver: DriverKind::Epoll,
            cores,
            handles: Vec::new(),
        };
        assert_eq!(
            w(vec![Some(0), Some(1)]).describe_pinning(),
            "2 workers pinned to cores 0,1"
        );
        assert_eq!(
            w(vec![Some(1)]).describe_pinning(),
            "1 worker pinned to core 1"
        );
        assert_eq!(
            w(vec![None, None]).describe_pinning(),
            "2 workers, unpinned"
        );
        assert_eq!(
            w(vec![Some(0), None, Some(1)]).describe_pinning(),
            "3 workers, 2 pinned to cores 0,1, 1 unpinned"
        );
    }
}
