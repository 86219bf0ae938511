//! Issue 22, item 15: an access log that cannot take more (a FIFO whose reader opened it and
//! never reads) must not stop the worker. Its write used to block the worker thread once the
//! pipe's 64 KiB were full: every connection of that worker stalled. Lines that cannot be
//! written are dropped and counted (`proxy_access_log_dropped_total`).

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use tests::inproc::Proxy;
use tests::raw::{self, Client, WAIT};
use tests::reload::Scratch;

/// Far more lines than the pipe holds (64 KiB, a line is about 80 bytes here).
const REQUESTS: usize = 4000;

/// A FIFO at `path`, and its read end, opened (without waiting for a writer) and never read.
fn fifo_nobody_reads(path: &Path) -> OwnedFd {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    // SAFETY: open(2) with a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    assert!(fd >= 0, "open the FIFO for reading");
    // SAFETY: a new descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn proxy(log: &Path) -> Proxy {
    let text = format!(
        r#"access_log = {{ path = "{}", format = "combined" }}
[admin]
addr = "127.0.0.1:0"
[[listen]]
addr = "127.0.0.1:0"
[runtime]
workers = 1
pin = false
[[route]]
path = "/"
return = {{ status = 200, body = "ok" }}
"#,
        log.display()
    );
    Proxy::start(proxy::config::from_toml("fifo.toml", &text).expect("config"))
}

/// The value of the unlabelled series `name` in the admin listener's /metrics.
fn metric(admin: std::net::SocketAddr, name: &str) -> Option<u64> {
    let r = raw::exchange(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        WAIT,
    );
    let text = r.text();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_log_fifo_nobody_reads_drops_lines_and_the_worker_keeps_serving() {
    let dir = Scratch::new("sec-log-fifo");
    let path = dir.path("access.fifo");
    let reader = fifo_nobody_reads(&path);
    let p = proxy(&path);
    // Declared after the proxy, so dropped before it: should a write still block, the last
    // reader going away ends it (EPIPE), and the proxy can stop.
    let _reader = reader;
    let mut c = Client::connect(p.addr);
    for i in 0..REQUESTS {
        c.send(&raw::get(&format!("/r{i}"))).expect("send");
        let r = c.response(WAIT);
        assert!(
            r.as_ref().is_ok_and(|r| r.status == 200),
            "request {i} of {REQUESTS} was not answered (the log's pipe is full): {}",
            r.err().map_or(String::new(), |r| raw::show(&r))
        );
    }
    let admin = p.running().admin_addr().expect("admin listener");
    let dropped = metric(admin, "proxy_access_log_dropped_total");
    assert!(
        dropped.is_some_and(|d| d > 0 && d <= REQUESTS as u64),
        "proxy_access_log_dropped_total: {dropped:?}"
    );
    p.stop();
}
