//! The loader as a process, as a user runs it: `--version`; the start-up line on stderr
//! (workers, pinning, driver actually in use, open-files limit) with RLIMIT_NOFILE raised to
//! the hard limit; workers defaulting to the CPUs the process may run on (`taskset`);
//! SIGINT/SIGTERM mid-run print the report of what was done and exit 0; the live progress
//! line on a terminal only (not with `-q`, not when stdout is a pipe).
//!
//! Readiness is never a sleep: the tests wait for the start-up line and for the origin to
//! have served requests before signalling.

use shared::origin::Origin;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tests::process::Process;

/// A spawned loader: stderr lines arrive through its [`Process`], stdout is collected on a
/// thread.
struct Loader {
    process: Process,
    stdout: Option<JoinHandle<Vec<u8>>>,
}

/// What the process set-up changes in the child before exec.
#[derive(Default, Clone, Copy)]
struct Setup {
    /// Lower RLIMIT_NOFILE's soft limit to this (the loader must raise it back).
    nofile_soft: Option<u64>,
    /// Lower both RLIMIT_NOFILE limits to this (the loader cannot raise it).
    nofile_both: Option<u64>,
    /// Restrict the CPU affinity to this one CPU, as `taskset -c CPU` does.
    cpu: Option<usize>,
}

impl Loader {
    fn spawn(args: &[&str], setup: Setup, stdout: Stdio) -> Loader {
        let mut cmd = Command::new(tests::bin("loader"));
        cmd.args(args).stdout(stdout);
        // SAFETY: the closure runs in the child between fork and exec and only makes
        // async-signal-safe system calls (setrlimit, sched_setaffinity) on values it owns.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(soft) = setup.nofile_soft {
                    let mut rl: libc::rlimit = std::mem::zeroed();
                    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
                        rl.rlim_cur = soft as libc::rlim_t;
                        libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
                    }
                }
                if let Some(n) = setup.nofile_both {
                    let rl = libc::rlimit {
                        rlim_cur: n as libc::rlim_t,
                        rlim_max: n as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if let Some(cpu) = setup.cpu {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut process = Process::spawn(&mut cmd);
        let stdout = process.take_stdout().map(|mut out| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                out.read_to_end(&mut v)
                    .expect("reading the loader's stdout");
                v
            })
        });
        Loader { process, stdout }
    }

    /// The first stderr line that contains `needle` (within 30 s).
    fn wait_line(&mut self, needle: &str) -> String {
        self.process.wait_line(needle, Duration::from_secs(30))
    }

    fn signal(&self, sig: i32) {
        self.process.signal(sig);
    }

    /// Wait for the exit (killed, and the test failed, after 30 s): (code, stdout, stderr).
    fn finish(mut self) -> (Option<i32>, String, String) {
        let (status, stderr) = self.process.finish(Duration::from_secs(30));
        let out = self
            .stdout
            .take()
            .map(|h| h.join().expect("stdout reader"))
            .unwrap_or_default();
        (
            status.code(),
            String::from_utf8_lossy(&out).into_owned(),
            stderr,
        )
    }
}

fn nofile() -> (u64, u64) {
    // SAFETY: getrlimit writes a plain struct we own.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl), 0);
        (rl.rlim_cur as u64, rl.rlim_max as u64)
    }
}

/// The CPUs this test process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity writes a cpu_set_t we own; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Wait until the origin has served at least `n` requests (the run is under way).
fn wait_served(origin: &Origin, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while origin.requests() < n {
        assert!(Instant::now() < deadline, "the origin served nothing");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn field(report: &str, name: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name:?} in:\n{report}"))
}

#[test]
fn version_names_the_binary() {
    let out = Command::new(tests::bin("loader"))
        .arg("--version")
        .output()
        .expect("run loader --version");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("loader {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn startup_line_raised_open_files_and_one_worker_per_allowed_cpu() {
    let origin = tests::origin();
    let url = origin.url("/");
    let (_, hard) = nofile();
    // Restricted to one CPU (the last allowed, so "core 0" by accident does not pass), with a
    // low soft open-files limit: one worker pinned to that CPU, the limit raised to the hard one.
    let cpu = *allowed_cpus().last().expect("some CPU is allowed");
    let setup = Setup {
        nofile_soft: Some(hard.min(256)),
        cpu: Some(cpu),
        ..Setup::default()
    };
    let mut l = Loader::spawn(&["-n", "50", "-c", "4", &url], setup, Stdio::piped());
    let line = l.wait_line("loader: ");
    let (code, stdout, stderr) = l.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        line.contains(&format!("1 worker pinned to core {cpu},")),
        "{line}"
    );
    assert!(line.contains(", driver "), "{line}");
    assert!(line.contains(&format!("open files {hard};")), "{line}");
    assert!(
        stdout.contains("\nComplete requests:      50\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\nWorkers:                1 ("), "{stdout}");
    // The start-up line is the only stderr line (no progress line: stdout is a pipe).
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    // --no-pin and --driver epoll are what the line says.
    let mut l = Loader::spawn(
        &[
            "-n",
            "10",
            "-c",
            "2",
            "--threads",
            "2",
            "--no-pin",
            "--driver",
            "epoll",
            &url,
        ],
        Setup::default(),
        Stdio::piped(),
    );
    let line = l.wait_line("loader: ");
    let (code, _, stderr) = l.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        line.contains("2 workers, unpinned, driver epoll,"),
        "{line}"
    );
}

#[test]
fn the_open_files_limit_is_raised_while_the_run_goes() {
    let origin = tests::origin();
    let url = origin.url("/");
    let (_, hard) = nofile();
    let setup = Setup {
        nofile_soft: Some(hard.min(256)),
        ..Setup::default()
    };
    let mut l = Loader::spawn(
        &["-d", "20s", "-c", "2", "--threads", "1", &url],
        setup,
        Stdio::piped(),
    );
    l.wait_line("loader: ");
    wait_served(&origin, 1);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", l.process.id())).unwrap();
    let row = limits
        .lines()
        .find(|r| r.starts_with("Max open files"))
        .expect("open files row");
    let soft: u64 = row.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert_eq!(soft, hard, "{row}");
    l.signal(libc::SIGTERM);
    let (code, _, stderr) = l.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn sigint_and_sigterm_mid_run_print_the_report_of_what_was_done() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let origin = tests::origin();
        let url = origin.url("/");
        let mut l = Loader::spawn(
            &["-d", "60s", "-c", "4", "--threads", "1", "--no-pin", &url],
            Setup::default(),
            Stdio::piped(),
        );
        l.wait_line("loader: ");
        wait_served(&origin, 20);
        l.signal(sig);
        // `finish` fails after 30 s; the report below says the signal, not `-d 60s`, ended it.
        let (code, stdout, stderr) = l.finish();
        assert_eq!(code, Some(0), "signal {sig}: {stderr}\n{stdout}");
        assert!(stdout.starts_with("Server Software:"), "{stdout}");
        assert!(stdout.contains("\nInterrupted:            yes"), "{stdout}");
        let done = field(&stdout, "Complete requests:");
        let failed = field(&stdout, "Failed requests:");
        assert!(done >= 20, "{stdout}");
        assert_eq!(failed, 0, "{stdout}");
        // What the report counts, the origin served (the in-flight ones may be served too).
        let served = origin.requests();
        assert!(served >= done && served <= done + 4, "{served} vs {done}");
        let secs: f64 = stdout
            .lines()
            .find_map(|l| l.strip_prefix("Time taken for tests:"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("time taken");
        assert!(
            secs < 30.0,
            "the time covers the run until the signal: {secs}"
        );
    }
}

/// A pseudo-terminal: (controller, terminal) descriptors.
fn pty() -> (OwnedFd, OwnedFd) {
    let (mut controller, mut terminal) = (-1, -1);
    // SAFETY: openpty writes two descriptors we then own; the name and settings are unused.
    let rc = unsafe {
        libc::openpty(
            &mut controller,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by nobody else.
    unsafe {
        (
            OwnedFd::from_raw_fd(controller),
            OwnedFd::from_raw_fd(terminal),
        )
    }
}

/// Run the loader for a bit over a second with stdout on a terminal (or a pipe); its stderr.
fn progress_run(url: &str, on_terminal: bool, quiet: bool) -> String {
    let mut args = vec!["-d", "1200ms", "-c", "2", "--threads", "1", "--no-pin"];
    if quiet {
        args.push("-q");
    }
    args.push(url);
    let (controller, stdout) = if on_terminal {
        let (c, t) = pty();
        // Drain the terminal so the report never blocks on a full pty buffer.
        let mut c = std::fs::File::from(c);
        let h = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = c.read_to_end(&mut v); // EIO once the child exits
            v
        });
        (Some(h), Stdio::from(t))
    } else {
        (None, Stdio::piped())
    };
    let l = Loader::spawn(&args, Setup::default(), stdout);
    let (code, _, stderr) = l.finish();
    assert_eq!(code, Some(0), "{stderr}");
    if let Some(h) = controller {
        let report = String::from_utf8_lossy(&h.join().unwrap()).into_owned();
        assert!(report.contains("Complete requests:"), "{report}");
    }
    stderr
}

#[test]
fn progress_line_on_a_terminal_only() {
    let origin = tests::origin();
    let url = origin.url("/");
    // The three runs at once: each lasts over a second (the line is printed once a second).
    let run = |tty, quiet| {
        let url = url.clone();
        std::thread::spawn(move || progress_run(&url, tty, quiet))
    };
    let (on_tty, piped, quiet) = (run(true, false), run(false, false), run(true, true));
    let (on_tty, piped, quiet) = (
        on_tty.join().unwrap(),
        piped.join().unwrap(),
        quiet.join().unwrap(),
    );
    assert!(
        on_tty.contains(" req/s ") && on_tty.contains('\r') && on_tty.contains(" errors"),
        "no progress line on a terminal: {on_tty:?}"
    );
    assert!(
        !piped.contains("req/s") && !piped.contains('\r'),
        "progress line with stdout on a pipe: {piped:?}"
    );
    assert!(
        !quiet.contains("req/s") && !quiet.contains('\r'),
        "progress line with -q: {quiet:?}"
    );
}

#[test]
fn origin_prints_its_url_serves_and_exits_0_on_sigint() {
    let mut origin = Process::spawn(
        Command::new(tests::bin("loader"))
            .args(["origin", "--listen", "127.0.0.1:0", "--body-size", "1KiB"])
            .args(["--workers", "1", "--no-pin"])
            .stdout(Stdio::piped()),
    );
    let mut out = BufReader::new(origin.take_stdout().unwrap());
    let mut url = String::new();
    out.read_line(&mut url).expect("the URL on stdout");
    let addr = url
        .trim()
        .strip_prefix("http://")
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("not a URL: {url:?}"))
        .to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    assert!(resp.starts_with(b"HTTP/1.1 200"), "{resp:?}");
    assert!(resp.len() > 1024, "a 1 KiB body: {} bytes", resp.len());
    origin.signal(libc::SIGINT);
    let (status, err) = origin.finish(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0), "{err}");
    let line = err.lines().next().unwrap_or("");
    assert!(
        line.starts_with("origin: 1 worker, unpinned, driver ") && line.contains("open files "),
        "{err}"
    );
}

#[test]
fn more_connections_than_open_files_are_warned_counted_and_explained() {
    let origin = tests::origin();
    let url = origin.url("/");
    let setup = Setup {
        nofile_both: Some(64),
        ..Setup::default()
    };
    let args = ["-n", "400", "-c", "100", "--threads", "1", "--no-pin", &url];
    let l = Loader::spawn(&args, setup, Stdio::piped());
    let (code, stdout, stderr) = l.finish();
    // Some connections fit: the run completes, the others' attempts are connect failures.
    assert_eq!(code, Some(0), "{stderr}\n{stdout}");
    let done = field(&stdout, "Complete requests:");
    let failed = field(&stdout, "Failed requests:");
    assert!(done > 0 && failed > 0, "{stdout}");
    assert_eq!(done + failed, 400, "{stdout}");
    assert!(
        stdout.contains(&format!("(Connect: {failed}, Receive: 0, Length: 0")),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning: -c 100 is close to or above the open-files limit 64"),
        "{stderr}"
    );
    // Why the connects failed, said once.
    let why: Vec<&str> = stderr.lines().filter(|l| l.contains("failed: ")).collect();
    assert_eq!(why.len(), 1, "{stderr}");
    assert!(why[0].contains("Too many open files"), "{stderr}");
}
