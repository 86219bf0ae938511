//! The I/O edge: the head in `cout`, then the body.
//!
//! - A file kept in memory (small ones, see `cache`) is appended to the head: one write.
//! - Otherwise, on a non-blocking socket (the epoll driver's), `sendfile(2)` from the file to
//!   the socket: no copy through user space; `EAGAIN` waits for writability through the
//!   runtime. io_uring's accepted sockets are blocking (monoio accepts without
//!   `SOCK_NONBLOCK`), where `sendfile` would stall the whole worker on a slow reader, so
//!   there the body is `pread` into a pooled buffer and written by the runtime.
//! - A file that shrank while being sent cannot deliver the length announced: the
//!   connection is closed mid-body (the client sees a short body, never a complete-looking
//!   wrong one).

use super::respond::Body;
use super::Plan;
use crate::client::ClientConn;
use crate::io::{write_all, IoFail};
use monoio::net::TcpStream;
use monoio::time::{timeout_at, Instant};
use std::cell::Cell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

/// The response could not be sent whole; the connection must close.
#[derive(Debug)]
pub struct SendFail;

/// Write the head in `c.cout` and the body `plan` names.
pub async fn response(c: &mut ClientConn, plan: Plan) -> Result<(), SendFail> {
    let limit = c.w.cfg.timeouts.send;
    let (file, start, len) = match (plan.file, plan.body) {
        (Some(f), Body::Bytes { start, len }) if len > 0 => (f, start, len),
        _ => return write_head(c, limit).await,
    };
    if let Some(mem) = &file.body {
        c.cout
            .extend_from_slice(&mem[start as usize..(start + len) as usize]);
        return write_head(c, limit).await;
    }
    write_head(c, limit).await?;
    if nonblocking(&c.stream) {
        sendfile_all(&c.stream, file.fd.as_fd(), start, len, limit).await
    } else {
        pread_write(c, file.fd.as_fd(), start, len, limit).await
    }
}

async fn write_head(c: &mut ClientConn, limit: Duration) -> Result<(), SendFail> {
    let buf = std::mem::take(&mut c.cout);
    match write_all(&mut c.stream, buf, limit).await {
        Ok(buf) => {
            c.cout = buf;
            Ok(())
        }
        Err(_) => Err(SendFail),
    }
}

thread_local! {
    /// Whether this worker's sockets are non-blocking (the driver decides, once per worker).
    static NONBLOCKING: Cell<Option<bool>> = const { Cell::new(None) };
}

fn nonblocking(s: &TcpStream) -> bool {
    NONBLOCKING.with(|nb| {
        if let Some(v) = nb.get() {
            return v;
        }
        // SAFETY: F_GETFL on an open fd reads its flags.
        let flags = unsafe { libc::fcntl(s.as_raw_fd(), libc::F_GETFL) };
        let v = flags >= 0 && flags & libc::O_NONBLOCK != 0;
        nb.set(Some(v));
        v
    })
}

/// `sendfile` until `len` bytes from `offset` are sent; the peer gets `limit` to make room
/// each time the socket is full.
async fn sendfile_all(
    s: &TcpStream,
    file: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    limit: Duration,
) -> Result<(), SendFail> {
    let mut off = offset as libc::off_t;
    let mut left = len;
    while left > 0 {
        let chunk = left.min(1 << 30) as usize;
        // SAFETY: both fds are open for the call; `off` is a valid offset variable.
        let n = unsafe { libc::sendfile(s.as_raw_fd(), file.as_raw_fd(), &mut off, chunk) };
        if n > 0 {
            left -= n as u64;
            continue;
        }
        if n == 0 {
            return Err(SendFail);
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) => {
                let ready = timeout_at(Instant::now() + limit, s.writable(false)).await;
                if !matches!(ready, Ok(Ok(()))) {
                    return Err(SendFail);
                }
            }
            Some(libc::EINTR) => {}
            _ => return Err(SendFail),
        }
    }
    Ok(())
}

/// `pread` into a pooled buffer and write it, chunk by chunk.
async fn pread_write(
    c: &mut ClientConn,
    file: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    limit: Duration,
) -> Result<(), SendFail> {
    let w = c.w.clone();
    let mut buf = w.take_buf();
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(buf.capacity() as u64) as usize;
        buf.clear();
        buf.resize(n, 0);
        if super::open::pread_exact(file, &mut buf, offset + done).is_err() {
            return Err(SendFail);
        }
        buf = match write_all(&mut c.stream, buf, limit).await {
            Ok(b) => b,
            Err(e) => {
                debug_assert!(matches!(e.fail, IoFail::Timeout | IoFail::Error(_)));
                return Err(SendFail);
            }
        };
        done += n as u64;
    }
    w.give_buf(buf);
    Ok(())
}
