//! The `proxy` binary as a process: start-up summary, bounded memory while streaming 100 MB
//! both ways, and SIGTERM's graceful exit.

mod proxy_common;

use proxy_common::Client;
use shared::origin::{expected_body, Origin, OriginConfig, PATTERN};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A spawned proxy; killed on drop if still running.
struct ProxyProcess {
    child: Child,
    addr: SocketAddr,
    summary: String,
}

impl ProxyProcess {
    fn spawn(upstream: SocketAddr) -> ProxyProcess {
        let mut child = Command::new(tests::bin("proxy"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--workers",
                "1",
                "--no-pin",
                "--upstream",
            ])
            .arg(upstream.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn proxy");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut summary = String::new();
        let addr = loop {
            let line = rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no 'listening on' line; stderr so far:\n{summary}"));
            summary.push_str(&line);
            summary.push('\n');
            if let Some(rest) = line.split("listening on ").nth(1) {
                let first = rest.split([' ', ',']).next().unwrap();
                break first.parse::<SocketAddr>().expect("address in the summary");
            }
        };
        // The rest of the summary ends with the open-files limit.
        while !summary.contains("open files") {
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(line) => {
                    summary.push_str(&line);
                    summary.push('\n');
                }
                Err(_) => break,
            }
        }
        ProxyProcess {
            child,
            addr,
            summary,
        }
    }

    /// Peak and current resident set size in KiB (VmHWM, VmRSS).
    fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap()
        };
        (field("VmHWM:"), field("VmRSS:"))
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid; no memory is touched.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0);
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const HUNDRED_MB: usize = 100 << 20;

#[test]
fn summary_names_workers_driver_listener_and_upstream() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let p = ProxyProcess::spawn(o.addr());
    let s = &p.summary;
    assert!(s.contains("1 worker"), "{s}");
    assert!(s.contains("driver"), "{s}");
    assert!(s.contains(&o.addr().to_string()), "{s}");
    assert!(s.contains("open files"), "{s}");
    let mut c = Client::connect(p.addr);
    assert_eq!(c.get("/").status, 200);
}

#[test]
fn hundred_megabytes_both_ways_in_bounded_memory() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let p = ProxyProcess::spawn(o.addr());
    let mut c = Client::connect(p.addr);

    // Download: read and verify as it streams, never holding the body.
    c.send(format!("GET /?size={HUNDRED_MB} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        c.stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {HUNDRED_MB}")),
        "{head}"
    );
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0usize;
    while got < HUNDRED_MB {
        let n = c
            .stream
            .read(&mut buf[..(HUNDRED_MB - got).min(1 << 16)])
            .unwrap();
        assert!(n > 0, "closed after {got} bytes");
        for (i, b) in buf[..n].iter().enumerate() {
            assert_eq!(*b, PATTERN[(got + i) % PATTERN.len()], "byte {}", got + i);
        }
        got += n;
    }

    // Upload on the same connection.
    c.send(
        format!("PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: {HUNDRED_MB}\r\n\r\n").as_bytes(),
    );
    let block = expected_body(1 << 16);
    for _ in 0..HUNDRED_MB / block.len() {
        c.stream.write_all(&block).unwrap();
    }
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(o.body_bytes(), HUNDRED_MB as u64);

    let (hwm, rss) = p.memory_kib();
    eprintln!("proxy memory after 100 MB each way: peak {hwm} KiB, now {rss} KiB");
    assert!(
        hwm < 64 * 1024,
        "peak resident memory {hwm} KiB (now {rss} KiB)"
    );
}

#[test]
fn sigterm_finishes_in_flight_requests_and_exits_zero() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let mut p = ProxyProcess::spawn(o.addr());
    let mut idle = Client::connect(p.addr);
    assert_eq!(idle.get("/").status, 200);
    let mut busy = Client::connect(p.addr);
    busy.send(b"GET /?delay=400ms&size=1000 HTTP/1.1\r\nHost: t\r\n\r\n");
    while o.requests() < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    p.signal(libc::SIGTERM);
    let r = busy.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, expected_body(1000));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(
        idle.is_closed(),
        "idle keep-alive connection closed on shutdown"
    );
    let status = p.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    // Nothing listens any more.
    assert!(std::net::TcpStream::connect(p.addr).is_err());
}
