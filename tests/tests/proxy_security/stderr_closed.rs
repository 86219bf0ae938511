//! Issue 22, item 14: a proxy whose stderr is a pipe nobody reads any more (every write fails
//! with EPIPE) keeps serving when a worker logs. `eprintln!` panics on a failed write, and
//! the release profile turns a panic into an abort.

use crate::takeover_peer;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use tests::raw::{self, Client, WAIT};
use tests::reload::Scratch;

/// A spawned proxy, killed on drop.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The worker logs a listener it cannot use: a takeover hands over, with a listening socket,
/// a descriptor that is no socket at all (the epoll driver refuses to register it). It logs
/// that line to the gone stderr and serves on the good socket.
#[test]
fn a_worker_that_logs_to_a_stderr_whose_reader_is_gone_keeps_serving() {
    let o = tests::origin();
    let dir = Scratch::new("sec-stderr");
    let good = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = good.local_addr().unwrap();
    let bad = std::fs::File::create(dir.path("not-a-socket")).expect("file");
    let line = format!("listener {addr} {addr}");
    let path = dir.path("takeover.sock");
    // Built (on first use) before the peer starts waiting for it.
    let proxy_bin = tests::bin("proxy");
    let old = takeover_peer::serve(
        &path,
        vec![
            (line.clone(), OwnedFd::from(good)),
            (line, OwnedFd::from(bad)),
        ],
    );
    let mut child = Command::new(proxy_bin)
        .args([
            "--listen",
            &addr.to_string(),
            "--upstream",
            &o.addr().to_string(),
        ])
        .args(["--workers", "1", "--no-pin", "--driver", "epoll"])
        .args([
            "--shutdown-timeout",
            "1s",
            "--takeover",
            "--takeover-socket",
        ])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn proxy");
    // The reader is gone before the proxy writes anything: every write to stderr fails.
    drop(child.stderr.take());
    let mut child = Spawned(child);

    let said = old.join().expect("takeover peer");
    assert_eq!(said, Ok(b"ready".to_vec()), "the proxy did not start");
    let mut c = Client::connect(addr);
    c.send(&raw::get("/")).expect("send");
    let r = c.response(WAIT);
    let exited = child.0.try_wait().expect("try_wait");
    assert!(
        r.as_ref().is_ok_and(|r| r.status == 200),
        "no answer after the worker logged (the proxy exited: {exited:?}): {}",
        r.err().map_or(String::new(), |r| raw::show(&r))
    );
    assert!(exited.is_none(), "the proxy exited: {exited:?}");
}
