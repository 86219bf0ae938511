//! The driver fallback end to end, through the proxy binary: `auto` falls back to epoll where
//! io_uring is unavailable (simulated with `SHARED_DISABLE_IO_URING`), forcing `io-uring` there
//! is a clear one-line error, and the start-up line says which driver is in use.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use shared::runtime::DriverKind;
use tests::process::ProxyProcess;
use tests::ClosedPort;

/// The spawned proxy (killed when the test ends, pass or fail) and the closed port it uses
/// as its upstream (held as long as the proxy runs).
struct Proxy {
    process: ProxyProcess,
    _upstream: ClosedPort,
}

/// Start the proxy with `env` set; its first stderr line is the summary's `listening on` one.
fn start_proxy(env: Option<(&str, &str)>, args: &[&str]) -> (String, Proxy) {
    let upstream = ClosedPort::new();
    let mut cmd = ProxyProcess::command();
    cmd.args(["--listen", "127.0.0.1:0", "--upstream"])
        .arg(upstream.addr().to_string())
        .args(["--workers", "1"])
        .args(args);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let process = ProxyProcess::start(&mut cmd);
    let line = process
        .summary
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let proxy = Proxy {
        process,
        _upstream: upstream,
    };
    (line, proxy)
}

/// The proxy answers (502: the upstream's port is closed) on the driver it chose.
fn assert_serves(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).unwrap();
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
    assert_serves(child.process.addr);
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
    assert_serves(child.process.addr);
    drop(child);
}

#[test]
fn explicit_epoll_driver_serves() {
    let (line, child) = start_proxy(None, &["--driver", "epoll"]);
    assert!(line.contains("driver epoll"), "{line}");
    assert_serves(child.process.addr);
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
