//! System calls made straight on a connection's non-blocking socket (`sendmsg(MSG_MORE)`,
//! `sendfile`, `splice`), waiting through the runtime when the socket says `EAGAIN`: a poll op
//! on io_uring, epoll's readiness otherwise. Used where the runtime has no operation for the
//! job (sendfile) or where one would go through a worker thread (io_uring's splice always
//! does). The socket must be non-blocking (`shared::stream::ensure_nonblocking`): a blocking
//! one would hold the worker thread.

use monoio::net::TcpStream;
use shared::deadline::timeout_at;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// The socket failed, or its peer did not make room (or send) within the time allowed.
#[derive(Debug)]
pub struct Stuck;

/// Wait until the socket may take more bytes, or fail after `limit`.
pub async fn writable(s: &TcpStream, limit: Duration) -> Result<(), Stuck> {
    match timeout_at(shared::clock::deadline(limit), s.writable(false)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(Stuck),
    }
}

/// Wait until the socket has bytes (or its end) to read, or fail after `limit`.
pub async fn readable(s: &TcpStream, limit: Duration) -> Result<(), Stuck> {
    match timeout_at(shared::clock::deadline(limit), s.readable(false)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(Stuck),
    }
}

/// What a system call that may say `EAGAIN` did.
pub enum Step {
    /// Moved this many bytes (0 after `EINTR`: try again).
    Moved(usize),
    /// `EAGAIN`: wait for the socket.
    Again,
    /// 0 (the end, or nothing to move) or an error.
    Failed,
}

/// Classify a system call's return value (and `errno`).
pub fn step(n: isize) -> Step {
    if n > 0 {
        return Step::Moved(n as usize);
    }
    if n == 0 {
        return Step::Failed;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => Step::Again,
        Some(libc::EINTR) => Step::Moved(0),
        _ => Step::Failed,
    }
}

/// `send(MSG_MORE)` all of `head`, then all of `body` (the body bytes already in hand; may be
/// empty), on a non-blocking socket: more body follows at once, in the same segments. One
/// `sendmsg` of both each time, so that neither is copied behind the other (a relay buffer's
/// worth, per response, into a head buffer). `MSG_DONTWAIT` as well: this call never waits,
/// whatever the socket's mode.
pub async fn send_more(
    s: &TcpStream,
    (mut head, mut body): (&[u8], &[u8]),
    limit: Duration,
) -> Result<(), Stuck> {
    while !(head.is_empty() && body.is_empty()) {
        let mut iov = [head, body].map(|part| libc::iovec {
            iov_base: part.as_ptr().cast_mut().cast(),
            iov_len: part.len(),
        });
        // SAFETY: all-zero is a valid msghdr (no address, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len();
        let flags = libc::MSG_MORE | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        // SAFETY: both iovecs point at readable slices that outlive the call (the kernel
        // only reads them); the fd is open.
        let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, flags) };
        match step(n) {
            Step::Moved(n) => {
                let of_head = n.min(head.len());
                head = &head[of_head..];
                body = &body[n - of_head..];
            }
            Step::Again => writable(s, limit).await?,
            Step::Failed => return Err(Stuck),
        }
    }
    Ok(())
}

/// `sendfile` until `len` bytes from `offset` are sent; the peer gets `limit` to make room
/// each time the socket is full. The socket must be non-blocking (`ensure_nonblocking`).
pub async fn sendfile_all(
    s: &TcpStream,
    file: std::os::fd::BorrowedFd<'_>,
    offset: u64,
    len: u64,
    limit: Duration,
) -> Result<(), Stuck> {
    let mut off = offset as libc::off_t;
    let mut left = len;
    while left > 0 {
        let chunk = left.min(1 << 30) as usize;
        // SAFETY: both fds are open for the call; `off` is a valid offset variable.
        let n = unsafe { libc::sendfile(s.as_raw_fd(), file.as_raw_fd(), &mut off, chunk) };
        // 0: the file ended early (it shrank).
        match step(n) {
            Step::Moved(n) => left -= n as u64,
            Step::Again => writable(s, limit).await?,
            Step::Failed => return Err(Stuck),
        }
    }
    Ok(())
}
