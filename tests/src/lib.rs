//! Helpers shared by the end-to-end tests in `tests/tests/`.
//!
//! Most tests run the proxy, the loader and the origin in-process through their libraries.
//! Tests that need the process boundary (exit codes, signals, resident memory) spawn the built
//! binaries: [`bin`] builds them once per test process with a nested `cargo build` (cargo does
//! not hold its build lock while tests run) and returns the path.
//!
//! Each helper exists once, here or in a module of this library:
//! - [`process`]: a spawned binary (stderr drained into a channel, signals, exit within a
//!   limit, killed on drop) and [`process::ProxyProcess`], the proxy and its summary.
//! - [`raw`]: the raw-socket client, its independent response parser, the one classifier of
//!   how a read ended ([`raw::read_once`]) and the strict checks over it (`assert_closed`, ...).
//! - [`proxy_config`]/[`start_proxy`]: an in-process proxy from its command-line flags;
//!   [`capturing_origin`]; [`ClosedPort`]; [`eventually`], the one polling wait.
//! - [`gate`]: an origin that holds each request until the test lets it go.
//! - [`inproc`]: a proxy from a `Config` built in code, and a client that reads responses with
//!   the shared codec; [`toml_proxy`]: a proxy from config text; [`strict`]: readiness waits
//!   and counters for the tests of promised behaviours.
//! - [`logged`]: a proxy with a JSON access log and metrics, and what each client's requests
//!   left in both.
//! - [`reload`]: config files that change under a running `proxy`, and the loader's runs.
//! - [`manual`]: the man pages (stale or not) and the shell completions of both binaries.
//! - [`tls`]: certificates (a CA and its leaves) and a blocking TLS client; [`tls_server`]: a
//!   blocking HTTPS server of its own for the loader's tests.

pub mod gate;
pub mod inproc;
pub mod logged;
pub mod manual;
pub mod process;
pub mod raw;
pub mod reload;
pub mod scrape;
pub mod strict;
pub mod tls;
pub mod tls_server;
pub mod toml_proxy;
pub mod ws;

use std::path::PathBuf;
use std::sync::OnceLock;

/// Path of a workspace binary (`"proxy"` or `"loader"`), built on first use with the same
/// profile and target directory as the running tests.
pub fn bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let mut cmd = std::process::Command::new(env!("CARGO"));
        cmd.args(["build", "-q", "-p", "proxy", "-p", "loader", "--bins"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir().file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    if let Err(e) = built {
        panic!("building the binaries failed:\n{e}");
    }
    profile_dir().join(name)
}

/// `target/<profile>`: the test executable lives in `target/<profile>/deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("test executable is under target/<profile>/deps")
        .to_path_buf()
}

/// The proxy's config from its command line, as the in-process tests start it:
/// `--listen 127.0.0.1:0 --no-pin`, one worker unless `extra` names `--workers`, `--upstream`
/// for each of `ups`, then `extra`. Invalid flags fail the test.
pub fn proxy_config(ups: &[std::net::SocketAddr], extra: &[&str]) -> proxy::config::Config {
    let ups: Vec<String> = ups.iter().map(|a| a.to_string()).collect();
    let mut args = vec!["proxy", "--listen", "127.0.0.1:0", "--no-pin"];
    if !extra.contains(&"--workers") {
        args.extend(["--workers", "1"]);
    }
    for u in &ups {
        args.extend(["--upstream", u.as_str()]);
    }
    args.extend(extra);
    proxy::cli::config_from_args(&args)
        .unwrap_or_else(|e| panic!("invalid proxy flags {args:?}: {e}"))
}

/// [`proxy_config`], started in-process: the running proxy and its (first) listen address.
pub fn start_proxy(
    ups: &[std::net::SocketAddr],
    extra: &[&str],
) -> (proxy::Running, std::net::SocketAddr) {
    let running = proxy::start(proxy_config(ups, extra)).expect("proxy starts");
    let addr = running.listen_addrs()[0];
    (running, addr)
}

/// A fresh, empty folder of its own under the system temp dir for one test's files: `tag`,
/// the process and a counter in its name, so no two calls share one (tests of a binary run in
/// one process, at the same time). Removed with what it holds when dropped: a full run made
/// about a hundred of them, and a developer's machine kept them all.
pub fn temp_dir(tag: &str) -> TempDir {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("tests-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a temp dir");
    TempDir { path: d }
}

/// A folder made by [`temp_dir`], removed when dropped; a `Path` to everything else.
#[derive(Debug)]
#[must_use = "dropped, the folder is removed at once"]
pub struct TempDir {
    path: PathBuf,
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for TempDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A file in a [`TempDir`] of its own, which goes with it; a `Path` to everything else.
#[derive(Debug)]
pub struct TempFile {
    pub path: PathBuf,
    _dir: TempDir,
}

impl TempFile {
    /// `name` in a fresh [`temp_dir`] of `tag`.
    pub fn new(tag: &str, name: &str) -> TempFile {
        let dir = temp_dir(tag);
        TempFile {
            path: dir.join(name),
            _dir: dir,
        }
    }
}

impl std::ops::Deref for TempFile {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for TempFile {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

impl AsRef<std::path::Path> for TempFile {
    fn as_ref(&self) -> &std::path::Path {
        &self.path
    }
}

/// A started origin (the built-in scriptable one) with its default settings.
pub fn origin() -> shared::origin::Origin {
    shared::origin::Origin::start(shared::origin::OriginConfig::default()).expect("origin starts")
}

/// A started origin (the built-in scriptable one) that records every raw request it
/// receives.
pub fn capturing_origin() -> shared::origin::Origin {
    shared::origin::Origin::start(shared::origin::OriginConfig {
        capture: true,
        ..shared::origin::OriginConfig::default()
    })
    .expect("origin starts")
}

/// A loopback port that refuses connections for as long as this value lives: a socket bound
/// to `127.0.0.1:0` that never listens. Connecting to it is refused (RST) at once, and the port
/// is not handed out again meanwhile: the kernel never gives a bound port to another `bind(:0)`
/// nor to an outgoing connection, so only an explicit bind to this very port (a test reviving
/// it) can share it. (A port bound and then released, the usual "dead address", can be taken
/// by any test running at the same time.)
///
/// The socket has SO_REUSEADDR and SO_REUSEPORT, so a server can be brought up on the very
/// same port later (`Origin::start_on(cfg, port.addr(), 1)`, which binds with SO_REUSEPORT)
/// while this still holds it: "the dead server comes back" without ever giving the port up.
pub struct ClosedPort {
    addr: std::net::SocketAddr,
    socket: socket2::Socket,
}

impl ClosedPort {
    pub fn new() -> ClosedPort {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        socket.set_reuse_address(true).expect("SO_REUSEADDR");
        socket.set_reuse_port(true).expect("SO_REUSEPORT");
        let any: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
        socket.bind(&any.into()).expect("bind 127.0.0.1:0");
        let addr = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .expect("bound address");
        ClosedPort { addr, socket }
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Bring the port to life: listen on this very socket (nobody could take the port
    /// in between).
    pub fn revive(self) -> std::net::TcpListener {
        self.socket.listen(128).expect("listen");
        self.socket.into()
    }
}

impl Default for ClosedPort {
    fn default() -> Self {
        ClosedPort::new()
    }
}

/// The io_uring driver with the fast flags (kernel 6.1+), which multishot receives need, for
/// a test of them. Where this machine lacks it the test fails, naming what is missing: such a
/// test must never pass by checking nothing where the feature is expected. A machine known to
/// lack it says so with `TESTS_WITHOUT_FAST_URING=1`; then `None`, with a note on stderr.
pub fn fast_uring() -> Option<shared::runtime::DriverKind> {
    use shared::runtime::{drivers_here, DriverKind};
    let d = drivers_here();
    if d.contains(&DriverKind::UringFast) {
        return Some(DriverKind::UringFast);
    }
    let waived = std::env::var_os("TESTS_WITHOUT_FAST_URING").is_some_and(|v| v == "1");
    assert!(
        waived,
        "this test needs io_uring with the fast flags (kernel 6.1+, io_uring not disabled by \
         sysctl or seccomp); this machine offers {d:?}. Set TESTS_WITHOUT_FAST_URING=1 to \
         skip it knowingly."
    );
    eprintln!(
        "TESTS_WITHOUT_FAST_URING=1: no io_uring with the fast flags here ({d:?}): not tested"
    );
    None
}

/// Every driver this machine has (`shared::runtime::drivers_here`), for a test that runs on
/// each: io_uring with the fast flags is required, as in [`fast_uring`] (the test fails where
/// it is missing unless `TESTS_WITHOUT_FAST_URING=1` says so), so such a test never passes
/// having tried epoll alone.
pub fn drivers() -> Vec<shared::runtime::DriverKind> {
    fast_uring();
    shared::runtime::drivers_here()
}

/// The setting that asks for driver `d` (io_uring is chosen with or without the fast flags,
/// as the machine has them).
pub fn driver_choice(d: shared::runtime::DriverKind) -> shared::runtime::DriverChoice {
    use shared::runtime::{DriverChoice, DriverKind};
    match d {
        DriverKind::Epoll => DriverChoice::Epoll,
        DriverKind::Uring | DriverKind::UringFast => DriverChoice::IoUring,
    }
}

/// The proxy's `--driver` value that asks for `d`.
pub fn driver_flag(d: shared::runtime::DriverKind) -> &'static str {
    use shared::runtime::DriverKind;
    match d {
        DriverKind::Epoll => "epoll",
        DriverKind::Uring | DriverKind::UringFast => "io-uring",
    }
}

/// A test that runs `tool` (a program outside the Rust toolchain, README's requirements) calls
/// this first: without it, the test fails at once with one line naming the tool and where it
/// comes from (`package`), instead of a panic's backtrace or a script's error deep inside.
/// The line goes to the test's captured output and the test unwinds without the panic hook,
/// so nothing but that line is printed for it.
pub fn require_tool(tool: &str, package: &str) {
    let found = std::process::Command::new(tool)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    if !found {
        let line =
            format!("{tool} not found: this test needs it (Debian: apt-get install {package})");
        eprintln!("{line}");
        std::panic::resume_unwind(Box::new(line));
    }
}

/// Bytes a program wrote, as text (invalid UTF-8 replaced), for assertions and messages.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Poll `cond` every 5 ms until it holds or `wait` passes; whether it held. For waiting on an
/// effect another thread or process makes visible through a counter or the file system (the
/// bound makes a test fail instead of hanging; it is never read as a verdict by itself).
pub fn eventually(wait: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + wait;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `read()` once it equals `want`, or its last value when `wait` passed first (for an
/// `assert_eq!` that names what was seen). A request's counters are updated when it ends,
/// right after its response went out: a client that read the response can be ahead of them.
pub fn settled<T: PartialEq>(
    wait: std::time::Duration,
    want: &T,
    mut read: impl FnMut() -> T,
) -> T {
    let mut last = read();
    eventually(wait, || {
        last = read();
        last == *want
    });
    last
}

/// `addr` as /proc/net/tcp writes it: the IPv4 address as a native-endian u32, then the port.
fn proc_net_hex(addr: std::net::SocketAddr) -> String {
    let std::net::SocketAddr::V4(v4) = addr else {
        panic!("IPv4 only: {addr}")
    };
    format!(
        "{:08X}:{:04X}",
        u32::from_ne_bytes(v4.ip().octets()),
        v4.port()
    )
}

/// The fields of /proc/net/tcp's line for the TCP socket bound to `local` and connected to
/// `remote`; `None` once no such socket exists (closed).
fn tcp_line(local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<Vec<String>> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let (l, r) = (proc_net_hex(local), proc_net_hex(remote));
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 5 && f[1] == l && f[2] == r).then(|| f.iter().map(|s| s.to_string()).collect())
    })
}

/// `(tx_queue, rx_queue)` of the TCP socket bound to `local` and connected to `remote`, from
/// /proc/net/tcp; `None` once no such socket exists (closed).
fn tcp_queues(local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<(u64, u64)> {
    let f = tcp_line(local, remote)?;
    let (tx, rx) = f[4].split_once(':')?;
    Some((
        u64::from_str_radix(tx, 16).ok()?,
        u64::from_str_radix(rx, 16).ok()?,
    ))
}

/// /proc/net/tcp's state of an established connection.
pub const TCP_ESTABLISHED: u8 = 1;

/// The state of the TCP socket bound to `local` and connected to `remote` (/proc/net/tcp's
/// `st`: [`TCP_ESTABLISHED`], 4 FIN_WAIT1 once it shut its write side down, ...); `None` once
/// no such socket exists (closed, or reset).
pub fn tcp_state(local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<u8> {
    u8::from_str_radix(&tcp_line(local, remote)?[3], 16).ok()
}

/// Wait (up to `wait`, then panic) until the peer of the loopback connection `s` has read
/// every byte written on `s`: nothing is left unacknowledged on our side nor unread on the
/// peer's (or the peer's socket is gone). The event that makes the next write a read of its
/// own for the peer, however the threads are scheduled.
pub fn wait_until_peer_read(s: &std::net::TcpStream, wait: std::time::Duration) {
    // A connection the peer already reset has no peer address any more: nothing to wait for.
    let (Ok(ours), Ok(theirs)) = (s.local_addr(), s.peer_addr()) else {
        return;
    };
    let drained = || {
        tcp_queues(ours, theirs).is_none_or(|(tx, _)| tx == 0)
            && tcp_queues(theirs, ours).is_none_or(|(_, rx)| rx == 0)
    };
    assert!(
        eventually(wait, drained),
        "the peer never read what was sent"
    );
}

/// A global allocator that counts allocations and reallocations (deallocations are free), for
/// tests that prove a path allocates nothing per request. Declare it in the test binary:
/// `#[global_allocator] static GLOBAL: tests::CountingAlloc = tests::CountingAlloc::new();`
/// and compare [`CountingAlloc::count`] before and after.
pub struct CountingAlloc {
    count: std::sync::atomic::AtomicU64,
}

impl CountingAlloc {
    pub const fn new() -> CountingAlloc {
        CountingAlloc {
            count: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Allocations so far, by every thread of the process.
    pub fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Assert that a path allocates nothing per request: `run(k)` does k requests, once with
    /// `n` and once with `10 * n`; the 9 n more requests may cost at most `slack` more
    /// allocations (a per-request allocation would add at least 9 n).
    pub fn assert_flat(&self, n: u64, slack: u64, mut run: impl FnMut(u64)) {
        let a0 = self.count();
        run(n);
        let a1 = self.count();
        run(10 * n);
        let a2 = self.count();
        let (short, long) = (a1 - a0, a2 - a1);
        assert!(
            long <= short + slack,
            "allocations grow with requests: {short} for {n}, {long} for {}",
            10 * n
        );
    }
}

impl Default for CountingAlloc {
    fn default() -> Self {
        CountingAlloc::new()
    }
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}
