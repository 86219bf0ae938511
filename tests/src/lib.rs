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
//! - [`inproc`]: a proxy from a `Config` built in code, and a client that reads responses with
//!   the shared codec; [`toml_proxy`]: a proxy from config text; [`strict`]: readiness waits
//!   and counters for the tests of promised behaviours.
//! - [`reload`]: config files that change under a running `proxy`, and the loader's runs.
//! - [`tls`]: certificates (a CA and its leaves) and a blocking TLS client; [`tls_server`]: a
//!   blocking HTTPS server of its own for the loader's tests.

pub mod inproc;
pub mod reload;
pub mod strict;
pub mod tls;
pub mod tls_server;
pub mod toml_proxy;

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
/// one process, at the same time).
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("tests-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a temp dir");
    d
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

/// `(tx_queue, rx_queue)` of the TCP socket bound to `local` and connected to `remote`, from
/// /proc/net/tcp; `None` once no such socket exists (closed).
fn tcp_queues(local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<(u64, u64)> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let (l, r) = (proc_net_hex(local), proc_net_hex(remote));
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[1] != l || f[2] != r {
            return None;
        }
        let (tx, rx) = f[4].split_once(':')?;
        Some((
            u64::from_str_radix(tx, 16).ok()?,
            u64::from_str_radix(rx, 16).ok()?,
        ))
    })
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

/// A spawned binary of ours (`proxy`, `loader`) as the process tests drive it.
///
/// Its stderr is read line by line on a thread into a channel that lives as long as the
/// [`process::Process`]: a dropped reader would make the child's next write to stderr fail
/// (`eprintln!` then panics, and the child dies in the middle of the test). Every line
/// received, through any method, is kept for messages and for [`process::Process::finish`].
/// The child is killed on drop if it still runs, so a failing test leaves nothing behind.
pub mod process {
    use std::io::{BufRead, BufReader};
    use std::net::SocketAddr;
    use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
    use std::sync::mpsc::{self, RecvTimeoutError};
    use std::time::{Duration, Instant};

    /// Patience for a start-up line on a loaded machine.
    pub const READY: Duration = Duration::from_secs(20);

    pub struct Process {
        child: Child,
        /// The program's name, for messages.
        name: String,
        lines: mpsc::Receiver<String>,
        /// Every stderr line received so far.
        seen: Vec<String>,
    }

    impl Process {
        /// Spawn `cmd` with stdin from /dev/null and stderr piped to the reader thread;
        /// stdout stays as `cmd` set it (take a pipe with [`Process::take_stdout`]).
        pub fn spawn(cmd: &mut Command) -> Process {
            let name = cmd.get_program().to_string_lossy().into_owned();
            let mut child = cmd
                .stdin(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
            let err = child.stderr.take().expect("stderr piped");
            let (tx, lines) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(err).split(b'\n') {
                    // A read error on the pipe is reported as a line, not swallowed.
                    let line = line
                        .map(|l| String::from_utf8_lossy(&l).into_owned())
                        .unwrap_or_else(|e| format!("<reading stderr failed: {e}>"));
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            Process {
                child,
                name,
                lines,
                seen: Vec::new(),
            }
        }

        pub fn id(&self) -> u32 {
            self.child.id()
        }

        /// The stdout pipe, when `cmd` asked for one (once).
        pub fn take_stdout(&mut self) -> Option<ChildStdout> {
            self.child.stdout.take()
        }

        /// The next stderr line, waiting up to `wait`; `None` if none came (or stderr ended).
        pub fn next_line(&mut self, wait: Duration) -> Option<String> {
            let line = self.lines.recv_timeout(wait).ok()?;
            self.seen.push(line.clone());
            Some(line)
        }

        /// The stderr lines that have arrived since the last look, without waiting.
        pub fn arrived(&mut self) -> Vec<String> {
            let new: Vec<String> = self.lines.try_iter().collect();
            self.seen.extend(new.iter().cloned());
            new
        }

        /// The first stderr line that contains `needle`, waiting up to `wait`; a panic that
        /// shows stderr so far if none comes.
        pub fn wait_line(&mut self, needle: &str, wait: Duration) -> String {
            let deadline = Instant::now() + wait;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.next_line(left) {
                    Some(l) if l.contains(needle) => return l,
                    Some(_) => {}
                    None => panic!(
                        "{}: no stderr line with {needle:?} within {wait:?}; stderr:\n{}",
                        self.name,
                        self.seen.join("\n")
                    ),
                }
            }
        }

        /// [`Process::finish`] for a command whose stdout is piped: stdout is drained on a
        /// thread meanwhile (a chatty child never blocks on a full pipe), and comes back whole
        /// with the status and stderr.
        pub fn output(mut self, limit: Duration) -> std::process::Output {
            let mut out = self.take_stdout().expect("stdout piped");
            let reader = std::thread::spawn(move || {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut out, &mut v).map(|_| v)
            });
            let (status, stderr) = self.finish(limit);
            std::process::Output {
                status,
                stdout: reader
                    .join()
                    .expect("stdout reader")
                    .expect("reading stdout"),
                stderr: stderr.into_bytes(),
            }
        }

        /// Send `sig` (the child is ours and not reaped: this cannot fail).
        pub fn signal(&self, sig: i32) {
            // SAFETY: kill(2) on our own child's pid; no memory is touched.
            let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
            assert_eq!(rc, 0, "kill({sig}) {}", self.name);
        }

        /// The exit status, waiting up to `limit`; `None` if it still runs then.
        pub fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
            let deadline = Instant::now() + limit;
            loop {
                if let Some(s) = self.child.try_wait().expect("try_wait") {
                    return Some(s);
                }
                if Instant::now() > deadline {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }

        /// Wait for the exit (a panic after `limit`, the child killed), then all of stderr
        /// until its EOF: the status and every stderr line, joined by newlines.
        pub fn finish(mut self, limit: Duration) -> (ExitStatus, String) {
            let Some(status) = self.exit_within(limit) else {
                panic!(
                    "{} did not exit within {limit:?}; stderr:\n{}",
                    self.name,
                    self.seen.join("\n")
                );
            };
            // The writer has exited: the reader thread ends at EOF, which disconnects the
            // channel. Only that ends the collection; a timeout is a failure, not the end.
            loop {
                match self.lines.recv_timeout(READY) {
                    Ok(l) => self.seen.push(l),
                    Err(RecvTimeoutError::Disconnected) => break,
                    Err(RecvTimeoutError::Timeout) => {
                        panic!("{}: stderr never reached EOF", self.name)
                    }
                }
            }
            (status, self.seen.join("\n"))
        }
    }

    impl Drop for Process {
        fn drop(&mut self) {
            if let Ok(None) = self.child.try_wait() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }

    /// The first address after `listening on ` in a start-up line.
    pub fn listen_addr(line: &str) -> Option<SocketAddr> {
        let rest = line.split("listening on ").nth(1)?;
        rest.split([' ', ',', '\n']).next()?.parse().ok()
    }

    /// The `proxy` binary, started: its listen address and its start-up summary. Derefs to
    /// its [`Process`].
    pub struct ProxyProcess {
        pub process: Process,
        pub addr: SocketAddr,
        /// The start-up summary, from its first line (the one with `listening on`) through
        /// the open-files limit, its last.
        pub summary: String,
    }

    impl ProxyProcess {
        /// `proxy` (built on first use), to be given its flags.
        pub fn command() -> Command {
            Command::new(crate::bin("proxy"))
        }

        /// Spawn `cmd` (stdout to /dev/null) and wait for its summary.
        pub fn start(cmd: &mut Command) -> ProxyProcess {
            let mut process = Process::spawn(cmd.stdout(Stdio::null()));
            let first = process.wait_line("listening on ", READY);
            let addr = listen_addr(&first)
                .unwrap_or_else(|| panic!("no address in the summary line {first:?}"));
            let mut summary = first + "\n";
            // The rest of the summary ends with the open-files limit (what is missing then
            // fails the assertions on `summary`, which show it).
            while !summary.contains("open files") {
                match process.next_line(Duration::from_secs(5)) {
                    Some(line) => summary.push_str(&(line + "\n")),
                    None => break,
                }
            }
            ProxyProcess {
                process,
                addr,
                summary,
            }
        }
    }

    impl std::ops::Deref for ProxyProcess {
        type Target = Process;
        fn deref(&self) -> &Process {
            &self.process
        }
    }

    impl std::ops::DerefMut for ProxyProcess {
        fn deref_mut(&mut self) -> &mut Process {
            &mut self.process
        }
    }
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

/// Raw-socket clients for wire-level tests: send exact bytes, read exactly what comes back,
/// and parse it with a small parser of our own: the oracle that checks the codec, so it is
/// independent of it (its own head, field, length and chunk parsing). The one decision it
/// takes from `shared` is which statuses have no body ([`shared::http::framing::status_has_no_body`], RFC 9112 6.3
/// step 1): a table, decided once for the whole project, not parsing.
///
/// Reads retry EINTR: a thread that created an io_uring (a driver probe, a runtime) sees its
/// next blocking socket call with a timeout interrupted once when the ring is torn down.
pub mod raw {
    use shared::http::framing::status_has_no_body;
    use std::io::{ErrorKind, Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::{Duration, Instant};

    /// Default patience for anything that should happen promptly.
    pub const WAIT: Duration = Duration::from_secs(5);

    /// How reading ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum End {
        /// The peer closed (EOF).
        Closed,
        /// The peer reset the connection.
        Reset,
        /// Nothing more arrived before the deadline; the connection is still open.
        TimedOut,
    }

    /// Everything a connection received until it ended.
    #[derive(Debug)]
    pub struct Reply {
        pub bytes: Vec<u8>,
        pub end: End,
        /// From the start of the read (after the request was sent).
        pub elapsed: Duration,
    }

    impl Reply {
        pub fn text(&self) -> String {
            String::from_utf8_lossy(&self.bytes).into_owned()
        }

        /// The responses in `bytes`, in order; the last may be incomplete.
        pub fn responses(&self) -> Vec<Response> {
            let mut out = Vec::new();
            let mut at = 0;
            while at < self.bytes.len() {
                match parse_response(&self.bytes[at..], self.end != End::TimedOut) {
                    Parse::Complete(r, used) => {
                        at += used;
                        out.push(r);
                    }
                    Parse::Incomplete(r) => {
                        out.extend(r);
                        break;
                    }
                    Parse::Invalid(_) => break,
                }
            }
            out
        }
    }

    /// How a response body was delimited.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Framing {
        Length(usize),
        Chunked,
        /// Neither: the body runs to the end of the connection.
        Close,
    }

    /// One parsed response.
    #[derive(Debug, Clone)]
    pub struct Response {
        pub status: u16,
        /// The status line without its CRLF.
        pub status_line: String,
        pub headers: Vec<(String, String)>,
        pub framing: Framing,
        /// The payload (chunk framing removed).
        pub body: Vec<u8>,
        /// The body arrived in full: its length, its last chunk, or a close after a
        /// close-delimited body.
        pub complete: bool,
    }

    impl Response {
        /// The first value of a header (name case-insensitive).
        pub fn header(&self, name: &str) -> Option<&str> {
            header(&self.headers, name)
        }

        /// Whether the body is the origin's pattern body of `len` bytes.
        pub fn is_pattern(&self, len: usize) -> bool {
            self.body == shared::origin::expected_body(len)
        }

        /// Whether a `Connection` header lists `token`.
        pub fn connection_has(&self, token: &str) -> bool {
            self.headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
                .flat_map(|(_, v)| v.split(','))
                .any(|t| t.trim().eq_ignore_ascii_case(token))
        }
    }

    /// The first value of the field `name` (case-insensitive) in `headers`.
    pub fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// What [`parse_response`] found.
    #[derive(Debug)]
    pub enum Parse {
        /// A complete response and the bytes it took.
        Complete(Response, usize),
        /// Not all there yet; at EOF, the head if it was complete (`complete == false`).
        Incomplete(Option<Response>),
        /// Not HTTP/1.x as a server should send it.
        Invalid(String),
    }

    /// Parse the response at the start of `buf`. `eof`: nothing more will arrive (a
    /// close-delimited body is then complete). Strict: CRLF line endings, one status line,
    /// `name: value` fields, hex chunk sizes. Responses to HEAD are not supported.
    pub fn parse_response(buf: &[u8], eof: bool) -> Parse {
        parse_response_to(buf, eof, false)
    }

    /// [`parse_response`] for the answer to a HEAD request (`head_request`): no body,
    /// whatever the framing headers say.
    pub fn parse_response_to(buf: &[u8], eof: bool, head_request: bool) -> Parse {
        let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            return Parse::Incomplete(None);
        };
        let Ok(head) = std::str::from_utf8(&buf[..head_end]) else {
            return Parse::Invalid("head is not UTF-8".into());
        };
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default().to_string();
        let status = match status_line.split(' ').collect::<Vec<_>>()[..] {
            [v, code, ..] if v.starts_with("HTTP/1.") && code.len() == 3 => code.parse().ok(),
            _ => None,
        };
        let Some(status) = status else {
            return Parse::Invalid(format!("bad status line {status_line:?}"));
        };
        let mut headers = Vec::new();
        for l in lines {
            match l.split_once(':') {
                Some((n, v)) if !n.is_empty() && !n.contains([' ', '\t', '\n', '\r']) => {
                    headers.push((n.to_string(), v.trim().to_string()))
                }
                _ => return Parse::Invalid(format!("bad header line {l:?}")),
            }
        }
        let mut resp = Response {
            status,
            status_line,
            headers,
            framing: Framing::Close,
            body: Vec::new(),
            complete: false,
        };
        let body = &buf[head_end + 4..];
        let chunked = resp.header("transfer-encoding").is_some_and(|te| {
            te.rsplit(',')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("chunked")
        });
        let no_body = head_request || status_has_no_body(status);
        if no_body {
            resp.framing = Framing::Length(0);
        } else if chunked {
            resp.framing = Framing::Chunked;
        } else if let Some(cl) = resp.header("content-length") {
            match cl.parse() {
                Ok(n) => resp.framing = Framing::Length(n),
                Err(_) => return Parse::Invalid(format!("bad Content-Length {cl:?}")),
            }
        }
        let used = match resp.framing {
            Framing::Length(n) if body.len() >= n => {
                resp.body = body[..n].to_vec();
                head_end + 4 + n
            }
            Framing::Length(_) => {
                resp.body = body.to_vec();
                return Parse::Incomplete(eof.then_some(resp));
            }
            Framing::Close if eof => {
                resp.body = body.to_vec();
                buf.len()
            }
            Framing::Close => return Parse::Incomplete(None),
            Framing::Chunked => match dechunk(body, &mut resp.body) {
                Ok(Some(n)) => head_end + 4 + n,
                Ok(None) => return Parse::Incomplete(eof.then_some(resp)),
                Err(e) => return Parse::Invalid(e),
            },
        };
        resp.complete = true;
        Parse::Complete(resp, used)
    }

    /// Decode a chunked body into `out`. `Ok(Some(n))`: complete in `n` bytes (empty trailers
    /// only); `Ok(None)`: incomplete.
    fn dechunk(mut b: &[u8], out: &mut Vec<u8>) -> Result<Option<usize>, String> {
        let total = b.len();
        loop {
            let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
                return Ok(None);
            };
            let line = std::str::from_utf8(&b[..eol]).map_err(|_| "chunk line not UTF-8")?;
            let size = line.split(';').next().unwrap_or("");
            let n =
                usize::from_str_radix(size, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
            b = &b[eol + 2..];
            if n == 0 {
                return Ok(b.starts_with(b"\r\n").then(|| total - b.len() + 2));
            }
            if b.len() < n + 2 {
                out.extend_from_slice(&b[..n.min(b.len())]);
                return Ok(None);
            }
            if &b[n..n + 2] != b"\r\n" {
                return Err("chunk data not followed by CRLF".into());
            }
            out.extend_from_slice(&b[..n]);
            b = &b[n + 2..];
        }
    }

    /// A client connection with its unparsed input.
    pub struct Client {
        pub stream: TcpStream,
        buf: Vec<u8>,
        /// Set once the connection ended (EOF or reset).
        pub ended: Option<End>,
    }

    impl Client {
        /// Connect (TCP_NODELAY, 5 s write timeout).
        pub fn connect(addr: SocketAddr) -> Client {
            let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
            stream.set_nodelay(true).unwrap();
            stream.set_write_timeout(Some(WAIT)).unwrap();
            Client::from_stream(stream)
        }

        /// Wrap a connected stream as it is (no socket option changed).
        pub fn from_stream(stream: TcpStream) -> Client {
            Client {
                stream,
                buf: Vec::new(),
                ended: None,
            }
        }

        /// The bytes received and not parsed yet.
        pub fn buffered(&self) -> &[u8] {
            &self.buf
        }

        /// Drop the first `n` buffered bytes (a parser took them).
        pub fn consume(&mut self, n: usize) {
            self.buf.drain(..n);
        }

        /// Take the bytes received and not parsed yet (after a tunnel's 101, for example).
        pub fn take_buffered(&mut self) -> Vec<u8> {
            std::mem::take(&mut self.buf)
        }

        /// Read once onto the buffer, within the read timeout the stream has: the count of
        /// new bytes, or how the connection ended ([`read_once`]'s outcomes).
        pub fn fill(&mut self) -> Result<usize, End> {
            if let Some(end) = self.ended {
                return Err(end);
            }
            let read = read_once(&mut self.stream, &mut self.buf);
            if let Err(end @ (End::Closed | End::Reset)) = read {
                self.ended = Some(end);
            }
            read
        }

        /// Write all of `bytes`. Errors are returned, not panics: a peer may close early.
        pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            self.stream.write_all(bytes)
        }

        /// Read once into the buffer, waiting until `deadline`. `false` when the connection
        /// ended or the deadline passed.
        fn read_some(&mut self, deadline: Instant) -> bool {
            if self.ended.is_some() {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            self.fill().is_ok()
        }

        /// The next complete response, waiting up to `wait`. `Err` carries what had arrived
        /// (an incomplete or invalid response, or nothing) and how the connection ended.
        pub fn response(&mut self, wait: Duration) -> Result<Response, Reply> {
            self.response_to(false, wait)
        }

        /// [`Client::response`] for a HEAD request when `head_request`: the head only.
        pub fn response_to(
            &mut self,
            head_request: bool,
            wait: Duration,
        ) -> Result<Response, Reply> {
            let start = Instant::now();
            let deadline = start + wait;
            loop {
                let eof = self.ended.is_some();
                match parse_response_to(&self.buf, eof, head_request) {
                    Parse::Complete(r, used) => {
                        self.buf.drain(..used);
                        return Ok(r);
                    }
                    Parse::Invalid(_) => break,
                    Parse::Incomplete(_) if eof => break,
                    Parse::Incomplete(_) => {}
                }
                if !self.read_some(deadline) && self.ended.is_none() {
                    break;
                }
            }
            Err(Reply {
                bytes: std::mem::take(&mut self.buf),
                end: self.ended.unwrap_or(End::TimedOut),
                elapsed: start.elapsed(),
            })
        }

        /// Everything (buffered first) until the connection ends or `wait` passes.
        pub fn until_close(&mut self, wait: Duration) -> Reply {
            let start = Instant::now();
            let deadline = start + wait;
            while self.read_some(deadline) {}
            Reply {
                bytes: std::mem::take(&mut self.buf),
                end: self.ended.unwrap_or(End::TimedOut),
                elapsed: start.elapsed(),
            }
        }
    }

    /// Read once from `stream` (within its read timeout) onto `into`: the count of bytes
    /// (never 0), or how the connection ended. The one place a read outcome is classified:
    /// EOF is [`End::Closed`], a reset (or abort, or broken pipe) [`End::Reset`], the read
    /// timeout [`End::TimedOut`] (the connection is still open); EINTR is retried (see the
    /// module's doc), and any other error fails the test rather than pass for an end.
    pub fn read_once(stream: &mut TcpStream, into: &mut Vec<u8>) -> Result<usize, End> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            return match stream.read(&mut chunk) {
                Ok(0) => Err(End::Closed),
                Ok(n) => {
                    into.extend_from_slice(&chunk[..n]);
                    Ok(n)
                }
                Err(e) => match e.kind() {
                    ErrorKind::Interrupted => continue,
                    ErrorKind::WouldBlock | ErrorKind::TimedOut => Err(End::TimedOut),
                    ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe => Err(End::Reset),
                    _ => panic!("reading from {:?}: {e}", stream.peer_addr()),
                },
            };
        }
    }

    /// A reply for messages: how it ended, when, and the bytes as text.
    pub fn show(r: &Reply) -> String {
        format!("{:?} after {:?}: {:?}", r.end, r.elapsed, r.text())
    }

    /// The next response on `c` (within [`WAIT`]), or a panic that shows what arrived and
    /// how the read ended.
    pub fn response(c: &mut Client, what: &str) -> Response {
        c.response(WAIT)
            .unwrap_or_else(|r| panic!("{what}: no complete response: {}", show(&r)))
    }

    /// The peer closes `c` (EOF or reset, within [`WAIT`]) with nothing more sent; a read
    /// timeout fails.
    pub fn assert_closed(c: &mut Client, what: &str) {
        assert_closed_within(c, WAIT, what);
    }

    /// [`assert_closed`] with the patience `wait`.
    pub fn assert_closed_within(c: &mut Client, wait: Duration, what: &str) {
        let r = c.until_close(wait);
        assert!(
            r.end != End::TimedOut && r.bytes.is_empty(),
            "{what}: expected a close, got {}",
            show(&r)
        );
    }

    /// `c` is still open and silent: the peer neither sent anything nor closed within
    /// `wait` (for "this connection is being held", where a close would be the failure).
    pub fn assert_open_and_silent(c: &mut Client, wait: Duration, what: &str) {
        let r = c.until_close(wait);
        assert!(
            r.end == End::TimedOut && r.bytes.is_empty(),
            "{what}: expected an open, silent connection, got {}",
            show(&r)
        );
    }

    /// Connect, send `bytes` (without half-closing), and read until the peer closes or
    /// `wait` passes.
    pub fn exchange(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Reply {
        let mut c = Client::connect(addr);
        if let Err(e) = c.send(bytes) {
            // The peer may answer and close before taking every byte; nothing else is fine.
            assert!(
                matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
                "sending to {addr}: {e}"
            );
        }
        c.until_close(wait)
    }

    /// `GET path HTTP/1.1` with a Host header.
    pub fn get(path: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
    }

    /// `HTTP/1.1 <status> <reason>`, the reason as the codec writes it.
    pub fn status_line(status: u16) -> String {
        format!(
            "HTTP/1.1 {status} {}",
            shared::http::encode::reason_phrase(status)
        )
    }

    /// Assert a generated response's own form: the exact status line, a Content-Length that
    /// matches the body, no Transfer-Encoding.
    pub fn assert_well_formed(resp: &Response, status: u16) {
        assert_eq!(resp.status_line, status_line(status), "{resp:?}");
        assert!(resp.complete, "{resp:?}");
        match resp.header("content-length") {
            Some(cl) => assert_eq!(cl.parse::<usize>().ok(), Some(resp.body.len()), "{resp:?}"),
            None => panic!("generated response without Content-Length: {resp:?}"),
        }
        assert!(resp.header("transfer-encoding").is_none(), "{resp:?}");
    }

    /// Assert a response the proxy generated itself: exactly `HTTP/1.1 <status> <reason>`,
    /// a Content-Length that matches the body, and, when `must_close`, `Connection: close`
    /// followed by the connection actually closing. A response that says `Connection: close`
    /// must also be followed by a close.
    pub fn assert_generated(reply: &Reply, status: u16, must_close: bool) {
        let ctx = || {
            format!(
                "reply ({:?} after {:?}): {:?}",
                reply.end,
                reply.elapsed,
                reply.text()
            )
        };
        let want = status_line(status);
        let eof = reply.end != End::TimedOut;
        let (resp, used) = match parse_response(&reply.bytes, eof) {
            Parse::Complete(r, used) => (r, used),
            other => panic!(
                "expected a complete {status} response, got {other:?}; {}",
                ctx()
            ),
        };
        assert_eq!(resp.status_line, want, "{}", ctx());
        assert_well_formed(&resp, status);
        assert_eq!(
            used,
            reply.bytes.len(),
            "bytes after the response; {}",
            ctx()
        );
        if must_close {
            assert!(
                resp.connection_has("close"),
                "no `Connection: close`; {}",
                ctx()
            );
        }
        if must_close || resp.connection_has("close") {
            assert!(
                eof,
                "the connection stayed open after `Connection: close`; {}",
                ctx()
            );
        }
    }
}
