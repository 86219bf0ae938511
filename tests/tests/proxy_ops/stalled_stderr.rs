//! A stderr nobody reads never stops a worker: its error lines go through the log writer's
//! bounded queue (`shared::log`), so requests are answered while the pipe is full, and the
//! lines arrive once it is read again.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use tests::process::{listen_addr, ProxyProcess, READY};
use tests::raw::Client;
use tests::ClosedPort;

/// The child, killed when the test ends however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A pipe of one page (the smallest the kernel allows), so a few lines fill it.
fn small_pipe() -> (File, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    assert_eq!(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
        0,
        "pipe2"
    );
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (r, w) = unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: F_SETPIPE_SZ on a pipe we own; the kernel rounds up to a page.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    (r, w)
}

/// Fill the pipe through a description of its own opened non-blocking (the proxy's stderr
/// keeps its blocking one: setting O_NONBLOCK on a shared description would change the
/// proxy's writes too). Returns the bytes written.
fn fill(w: &OwnedFd) -> usize {
    let path = format!("/proc/self/fd/{}", w.as_raw_fd());
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {path}: {e}"));
    let chunk = [b'.'; 512];
    let mut n = 0;
    loop {
        match f.write(&chunk) {
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return n,
            Err(e) => panic!("filling the pipe: {e}"),
        }
    }
}

#[test]
fn a_full_stderr_pipe_does_not_stop_requests() {
    let dead = ClosedPort::new();
    let (r, w) = small_pipe();
    let mut cmd = ProxyProcess::command();
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--no-pin",
        "--upstream",
    ])
    .arg(dead.addr().to_string())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::from(w.try_clone().expect("dup")));
    let _child = Killed(cmd.spawn().expect("spawn proxy"));

    // Read the start-up summary on a thread (bounded by READY), then stop reading.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(r);
        let mut addr = None;
        let mut line = String::new();
        loop {
            line.clear();
            match lines.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            addr = addr.or_else(|| listen_addr(&line));
            if line.contains("open files") {
                break;
            }
        }
        let _ = tx.send((addr, lines));
    });
    let (addr, mut lines) = rx.recv_timeout(READY).expect("no start-up summary");
    let addr = addr.expect("no listening address in the summary");

    let filled = fill(&w);
    assert!(filled >= 4096, "the pipe took only {filled} bytes");

    // Each request fails to connect upstream: the worker logs an error line (the first at
    // once, later ones rate-limited) and answers 502. With the line written straight to the
    // full pipe the worker would block in write(2) and never answer.
    for i in 0..3 {
        let mut c = Client::connect(addr);
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .expect("send");
        let resp = c.response(Duration::from_secs(10)).unwrap_or_else(|r| {
            panic!("request {i}: no answer while stderr is full (a worker blocked on it?): {r:?}")
        });
        assert_eq!(resp.status, 502, "request {i}");
    }

    // Read the pipe again: the queued error line arrives after the filler.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        loop {
            line.clear();
            match lines.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line.contains("connect") && tx.send(line.clone()).is_err() {
                return;
            }
        }
    });
    let logged = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the error line never reached stderr once it was read");
    assert!(
        logged.contains(&dead.addr().to_string()),
        "the line names the upstream: {logged:?}"
    );
}

/// Nor the signal thread: a reload's line written straight to a full pipe blocked it in
/// write(2), and it is the one thread that takes SIGTERM (and the second signal, "stop
/// now"): the proxy could not be stopped until someone read its stderr.
#[test]
fn a_full_stderr_pipe_does_not_stop_the_signals() {
    let (r, w) = small_pipe();
    let mut cmd = ProxyProcess::command();
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--no-pin",
        "--shutdown-timeout",
        "1s",
        "--upstream",
        "127.0.0.1:9",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::from(w.try_clone().expect("dup")));
    let mut child = cmd.spawn().expect("spawn proxy");
    let pid = child.id() as libc::pid_t;
    // The start-up summary read (the signal handlers are in place), then nothing.
    let mut lines = BufReader::new(r);
    let mut line = String::new();
    while !line.contains("open files") {
        line.clear();
        assert!(
            lines.read_line(&mut line).expect("stderr") > 0,
            "no summary"
        );
    }
    fill(&w);
    // Each SIGHUP logs a line (no file to reload): with the pipe full, the first one's
    // write blocked the thread for good.
    for _ in 0..5 {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(pid, libc::SIGHUP) };
    }
    let (tx, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = exited.recv_timeout(Duration::from_secs(10));
    if status.is_err() {
        // SAFETY: as above; the waiting thread reaps it.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(status.is_ok(), "SIGTERM not taken while stderr was full");
    drop(lines);
}
