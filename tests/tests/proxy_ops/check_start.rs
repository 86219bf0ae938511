//! `--check-config` opens what a start opens: every start failure a file (or a start's flag)
//! can cause is a check failure first, exit 2 with the start's own message on its first
//! line; a config that passes the check starts; the same config already running (as when
//! `systemctl reload` checks first) still passes.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tests::process::{Process, ProxyProcess};
use tests::ClosedPort;

const EXIT: Duration = Duration::from_secs(10);

/// A config listening on `listen` with one upstream (never contacted), plus `extra`; a
/// `driver` line in `[runtime]` when `driver` is not empty.
fn config(dir: &Path, name: &str, listen: SocketAddr, driver: &str, extra: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!(
        "[[listen]]\naddr = \"{listen}\"\n\n[runtime]\nworkers = 1\npin = false\n{driver}\n\
         [upstream.app]\nservers = [\"127.0.0.1:9\"]\n\n{extra}"
    );
    std::fs::write(&path, text).expect("write the config");
    path
}

/// Run `proxy ARGS` to its exit: the exit code and its stderr lines.
fn run(args: &[&str], env: Option<(&str, &str)>) -> (Option<i32>, Vec<String>) {
    let mut cmd = ProxyProcess::command();
    cmd.args(args).stdout(std::process::Stdio::null());
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let (status, err) = Process::spawn(&mut cmd).finish(EXIT);
    (status.code(), err.lines().map(String::from).collect())
}

/// Every way a file can make a start fail: the check fails first, exit 2, its first line the
/// start's line, then "test failed"; the start fails with that same line.
#[test]
fn every_start_failure_from_a_file_fails_the_check_first_with_the_same_line() {
    let dir = tests::temp_dir("check-start");
    // Addresses held by another program (no SO_REUSEPORT), as nginx or a stray server would.
    let foreign = TcpListener::bind("127.0.0.1:0").expect("a foreign listener");
    let taken = foreign.local_addr().expect("its address");
    let free = ClosedPort::new();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let missing = dir.join("no-such-dir");
    let log_in_missing = format!("[access_log]\npath = \"{}/a.log\"\n", missing.display());
    let log_is_dir = format!("[access_log]\npath = \"{}\"\n", dir.display());
    let admin_taken = format!("[admin]\naddr = \"{taken}\"\n");
    let sock = missing.join("takeover.sock");
    let sock = sock.to_str().unwrap();
    // (name, listen, extra text, extra flags, environment, what the line says)
    type Case<'a> = (
        &'a str,
        SocketAddr,
        String,
        Vec<&'a str>,
        Option<(&'a str, &'a str)>,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        ("log-dir-missing", any, log_in_missing, vec![], None, "cannot open the access log"),
        ("log-is-a-dir", any, log_is_dir, vec![], None, "cannot open the access log"),
        ("listen-taken", taken, String::new(), vec![], None, "address already in use"),
        ("admin-taken", free.addr(), admin_taken, vec![], None, "address already in use"),
        ("listen-not-here", "192.0.2.1:8080".parse().unwrap(), String::new(), vec![], None,
         "cannot listen on 192.0.2.1:8080"),
        ("takeover-dir-missing", any, String::new(), vec!["--takeover-socket", sock], None,
         "cannot listen for takeovers"),
        ("uring-refused", any, String::new(), vec![], Some((shared::runtime::DISABLE_URING_ENV, "1")),
         "io_uring is not available"),
        ("tls-key-missing", any, format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"{0}/c.pem\", key = \"{0}/k.pem\" }}\n",
            missing.display()), vec![], None, "c.pem"),
    ];
    for (name, listen, extra, flags, env, says) in cases {
        let driver = if name == "uring-refused" {
            "driver = \"io_uring\""
        } else {
            ""
        };
        let path = config(&dir, &format!("{name}.toml"), listen, driver, &extra);
        let path = path.to_str().unwrap();
        let mut check = vec!["--check-config", path];
        check.extend(&flags);
        let (code, lines) = run(&check, env);
        assert_eq!(code, Some(2), "{name}: check exit; stderr {lines:?}");
        let first = lines.first().cloned().unwrap_or_default();
        assert!(first.contains(says), "{name}: want {says:?} in {first:?}");
        assert_eq!(
            lines.len(),
            2,
            "{name}: one line and the verdict: {lines:?}"
        );
        assert!(lines[1].ends_with("test failed"), "{name}: {lines:?}");
        let mut start = vec!["--config", path];
        start.extend(&flags);
        let (code, lines) = run(&start, env);
        assert!(
            matches!(code, Some(1 | 2)),
            "{name}: the start must fail: {code:?} {lines:?}"
        );
        assert!(
            lines.contains(&first),
            "{name}: the start said {lines:?}, the check {first:?}"
        );
    }
    drop(foreign);
}

/// The check opens the access log as a start does (created if missing), and takes
/// `--takeover-socket` like every flag a start takes; what it passes starts.
#[test]
fn a_config_that_passes_the_check_starts() {
    let dir = tests::temp_dir("check-passes");
    let log = dir.join("access.log");
    let extra = format!("[access_log]\npath = \"{}\"\n", log.display());
    let path = config(&dir, "ok.toml", "127.0.0.1:0".parse().unwrap(), "", &extra);
    let sock = dir.join("takeover.sock");
    let (p, s) = (path.to_str().unwrap(), sock.to_str().unwrap());
    let (code, lines) = run(&["--check-config", p, "--takeover-socket", s], None);
    assert_eq!(code, Some(0), "{lines:?}");
    assert!(
        log.exists(),
        "the check creates the access log, as a start does"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("takeover"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "the probe socket is removed: {leftovers:?}"
    );
    let mut cmd = ProxyProcess::command();
    cmd.args(["--config", p, "--takeover-socket", s]);
    let mut proxy = ProxyProcess::start(&mut cmd);
    proxy.signal(libc::SIGTERM);
    assert!(proxy.exit_within(EXIT).is_some_and(|s| s.success()));
}

/// The same config already running (a reload's `ExecReload=` check): its listener, its admin
/// address and its takeover socket are ours, so the check passes while it runs.
#[test]
fn the_running_config_still_passes_the_check() {
    let dir = tests::temp_dir("check-running");
    let (listen, admin) = (ClosedPort::new(), ClosedPort::new());
    let extra = format!("[admin]\naddr = \"{}\"\n", admin.addr());
    let path = config(&dir, "running.toml", listen.addr(), "", &extra);
    let sock = dir.join("takeover.sock");
    let (p, s) = (path.to_str().unwrap(), sock.to_str().unwrap());
    let mut cmd = ProxyProcess::command();
    cmd.args(["--config", p, "--takeover-socket", s]);
    let mut proxy = ProxyProcess::start(&mut cmd);
    let (code, lines) = run(&["--check-config", p, "--takeover-socket", s], None);
    assert_eq!(code, Some(0), "{lines:?}");
    // A second copy started by mistake is still refused (the check is not a start).
    let (code, lines) = run(&["--config", p], None);
    assert_eq!(code, Some(1), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("address already in use")),
        "{lines:?}"
    );
    proxy.signal(libc::SIGTERM);
    assert!(proxy.exit_within(EXIT).is_some_and(|s| s.success()));
}

/// An admin address that a listener's address covers (`0.0.0.0:P` and `127.0.0.1:P`, either
/// way round): the check fails with one line naming both, and so does a start, with that line
/// (not "address already in use", the proxy's own listener). A takeover with such a config is
/// refused the same way, and the running proxy's loopback clients keep getting the proxy, never
/// the admin endpoints.
#[test]
fn an_admin_address_a_listener_covers_fails_the_check_and_the_start() {
    let dir = tests::temp_dir("check-admin-overlap");
    let port = ClosedPort::new();
    let p = port.port();
    let wild: SocketAddr = ([0, 0, 0, 0], p).into();
    let lo: SocketAddr = ([127, 0, 0, 1], p).into();
    for (name, listen, admin) in [("wild-lo", wild, lo), ("lo-wild", lo, wild)] {
        let extra = format!("[admin]\naddr = \"{admin}\"\n");
        let path = config(&dir, &format!("{name}.toml"), listen, "", &extra);
        let path = path.to_str().unwrap();
        let (code, lines) = run(&["--check-config", path], None);
        assert_eq!(code, Some(2), "{name}: check exit; stderr {lines:?}");
        let first = lines.first().cloned().unwrap_or_default();
        let names_both = |l: &str| {
            l.contains(&format!("admin address {admin}")) && l.contains(&listen.to_string())
        };
        assert!(names_both(&first), "{name}: {lines:?}");
        assert_eq!(
            lines.len(),
            2,
            "{name}: one line and the verdict: {lines:?}"
        );
        let (code, lines) = run(&["--config", path], None);
        assert_eq!(code, Some(2), "{name}: start exit; stderr {lines:?}");
        assert!(lines.iter().any(|l| names_both(l)), "{name}: {lines:?}");
        assert!(
            !lines.iter().any(|l| l.contains("already in use")),
            "{name}: {lines:?}"
        );
    }

    // The running proxy on 0.0.0.0:P; a takeover by the overlapping config is refused.
    let sock = dir.join("takeover.sock");
    let s = sock.to_str().unwrap();
    let plain = config(&dir, "plain.toml", wild, "", "");
    let mut cmd = ProxyProcess::command();
    cmd.args(["--config", plain.to_str().unwrap(), "--takeover-socket", s]);
    let mut proxy = ProxyProcess::start(&mut cmd);
    let overlap = dir.join("wild-lo.toml");
    let args = [
        "--config",
        overlap.to_str().unwrap(),
        "--takeover-socket",
        s,
        "--takeover",
    ];
    let (code, lines) = run(&args, None);
    assert_eq!(code, Some(2), "takeover exit; stderr {lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("admin address {lo}"))),
        "{lines:?}"
    );
    // Loopback clients of the public port still reach the proxy (its upstream is closed: a
    // 502), not an admin listener.
    for _ in 0..8 {
        let r = tests::raw::exchange(
            lo,
            b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            tests::raw::WAIT,
        );
        let status = r.responses().first().map(|x| x.status);
        assert_eq!(status, Some(502), "{}", tests::raw::show(&r));
    }
    proxy.signal(libc::SIGTERM);
    assert!(proxy.exit_within(EXIT).is_some_and(|s| s.success()));
}
