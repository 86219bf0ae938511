//! The driver fallback end to end, through the proxy binary: `auto` falls back to epoll where
//! io_uring is unavailable (simulated with `SHARED_DISABLE_IO_URING`), forcing `io-uring` there
//! is a clear one-line error, and the start-up line says which driver is in use.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The spawned proxy, killed when the test ends (pass or fail).
struct Proxy(std::process::Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback address nothing listens on: bound, then released.
fn refusing_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Start the proxy with `env` set, return its first stderr line and the process.
fn start_proxy(env: Option<(&str, &str)>, args: &[&str]) -> (String, Proxy) {
    let upstream = refusing_addr();
    let mut cmd = Command::new(tests::bin("proxy"));
    cmd.args(["--listen", "127.0.0.1:0", "--upstream", &upstream])
        .args(["--workers", "1"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let mut child = Proxy(cmd.spawn().expect("spawn proxy"));
    let mut line = String::new();
    BufReader::new(child.0.stderr.as_mut().unwrap())
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

/// The proxy answers (502: nothing listens on the upstream's port) on the driver it chose.
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

#[test]
fn auto_uses_io_uring_where_available() {
    let (line, child) = start_proxy(None, &["--driver", "auto"]);
    // Some kernels (or seccomp profiles) refuse io_uring: then epoll is the right answer.
    assert!(
        line.contains("driver io_uring") || line.contains("driver epoll"),
        "{line}"
    );
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
    let out = Command::new(tests::bin("proxy"))
        .args(["--listen", "127.0.0.1:0", "--upstream", &refusing_addr()])
        .args(["--driver", "io-uring"])
        .env(shared::runtime::DISABLE_URING_ENV, "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("io_uring is not available"), "{err}");
}
