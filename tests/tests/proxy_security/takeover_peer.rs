//! A stand-in for the proxy a takeover takes the listening sockets from: it listens on the
//! takeover path and hands over what it is given, with the proxy's own wire code
//! (`proxy::takeover`), descriptions and descriptors as a proxy sends them.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest wait for the new process at each step.
const STEP: Duration = Duration::from_secs(20);

/// Listen on `path` now (so a process started next finds it), then, on a thread, take one
/// connection, check its hello, hand over `sockets` (each a `listener CONFIGURED BOUND` line
/// and its descriptor, in one message) and `end`, and return what the new process said next
/// (`ready`; empty if it hung up).
pub fn serve(path: &Path, sockets: Vec<(String, OwnedFd)>) -> JoinHandle<Result<Vec<u8>, String>> {
    let listener = listen(path);
    std::thread::spawn(move || exchange(&listener, &sockets))
}

/// A SOCK_SEQPACKET socket listening on `path`.
pub fn listen(path: &Path) -> OwnedFd {
    let _ = std::fs::remove_file(path);
    let l = proxy::takeover::seqpacket().expect("seqpacket");
    proxy::takeover::bind_listen(&l, path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    l
}

/// The old process's side of one takeover on `listener`.
pub fn exchange(listener: &OwnedFd, sockets: &[(String, OwnedFd)]) -> Result<Vec<u8>, String> {
    use proxy::takeover::{accept_within, recv, send};
    let deadline = Instant::now() + STEP;
    let conn = loop {
        match accept_within(listener, Duration::from_millis(50)) {
            Ok(Some(c)) => break c,
            Ok(None) if Instant::now() < deadline => {}
            Ok(None) => return Err("nobody connected".into()),
            Err(e) => return Err(format!("accept: {e}")),
        }
    };
    set_timeout(&conn);
    let (hello, _) = recv(&conn).map_err(|e| format!("receive hello: {e}"))?;
    if hello != b"proxy-takeover 1" {
        return Err(format!("hello: {:?}", String::from_utf8_lossy(&hello)));
    }
    let text: Vec<&str> = sockets.iter().map(|(l, _)| l.as_str()).collect();
    let fds: Vec<i32> = sockets.iter().map(|(_, fd)| fd.as_raw_fd()).collect();
    send(&conn, text.join("\n").as_bytes(), &fds).map_err(|e| format!("send: {e}"))?;
    send(&conn, b"end", &[]).map_err(|e| format!("send end: {e}"))?;
    recv(&conn)
        .map(|(said, _)| said)
        .map_err(|e| format!("receive ready: {e}"))
}

/// A receive that waits longer than `STEP` fails instead of hanging the test.
fn set_timeout(conn: &OwnedFd) {
    let tv = libc::timeval {
        tv_sec: STEP.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: a valid timeval of the size given, on an open descriptor.
    let rc = unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::addr_of!(tv).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_RCVTIMEO");
}
