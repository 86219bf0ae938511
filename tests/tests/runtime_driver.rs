//! The driver fallback end to end, through the proxy binary: `auto` falls back to epoll where
//! io_uring is unavailable (simulated with `SHARED_DISABLE_IO_URING`), forcing `io-uring` there
//! is a clear one-line error, and the start-up line says which driver is in use.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use shared::runtime::DriverKind;
use tests::ClosedPort;

/// The spawned proxy, killed when the test ends (pass or fail), and the closed port it uses
/// as its upstream (held as long as the proxy runs).
struct Proxy {
    child: std::process::Child,
    _upstream: ClosedPort,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the proxy with `env` set, return its first stderr line and the process.
fn start_proxy(env: Option<(&str, &str)>, args: &[&str]) -> (String, Proxy) {
    let upstream = ClosedPort::new();
    let mut cmd = Command::new(tests::bin("proxy"));
    cmd.args(["--listen", "127.0.0.1:0", "--upstream"])
        .arg(upstream.addr().to_string())
        .args(["--workers", "1"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let mut child = Proxy {
        child: cmd.spawn().expect("spawn proxy"),
        _upstream: upstream,
    };
    let mut line = String::new();
    BufReader::new(child.child.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    (line, child)
}

fn listen_port(line: &str) -> u16 {
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|s| s.split([',', ' ', '\n']).next())
        .unwrap_or_else(|| panic!("no listen address in {line:?}"));
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// The proxy answers (502: the upstream's port is closed) on the driver it chose.
fn assert_serves(port: u16) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 502 "), "{out}");
}

#[test]
fn auto_falls_back_to_epoll_when_io_uring_is_unavailable() {
    let (line, child) = start_proxy(Some((shared::runtime::DISABLE_URING_ENV, "1")), &[]);
    assert!(line.contains("driver epoll"), "{line}");
    assert_serves(listen_port(&line));
    drop(child);
}

/// `auto` takes io_uring wherever the probe says it works here (the same probe, in this
/// process, on this kernel and under the same seccomp profile); epoll only where it does not.
#[test]
fn auto_uses_io_uring_where_available() {
    let args = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "127.0.0.1:9",
    ];
    let cfg = proxy::cli::config_from_args(args.iter().chain(&["--driver", "auto"])).unwrap();
    let probed = shared::runtime::select_driver(&cfg.runtime).unwrap();
    let (line, child) = start_proxy(None, &["--driver", "auto"]);
    let want = match probed {
        DriverKind::Epoll => "driver epoll",
        DriverKind::Uring | DriverKind::UringFast => "driver io_uring",
    };
    assert!(line.contains(want), "the probe found {probed:?}: {line}");
    assert_serves(listen_port(&line));
    drop(child);
}

#[test]
fn explicit_epoll_driver_serves() {
    let (line, child) = start_proxy(None, &["--driver", "epoll"]);
    assert!(line.contains("driver epoll"), "{line}");
    assert_serves(listen_port(&line));
    drop(child);
}

#[test]
fn forcing_io_uring_where_unavailable_is_a_clear_error() {
    let upstream = ClosedPort::new();
    let out = Command::new(tests::bin("proxy"))
        .args(["--listen", "127.0.0.1:0", "--upstream"])
        .arg(upstream.addr().to_string())
        .args(["--driver", "io-uring"])
        .env(shared::runtime::DISABLE_URING_ENV, "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("io_uring is not available"), "{err}");
}
