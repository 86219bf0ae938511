//! The I/O edge: the head in `to_client`, then the body.
//!
//! - A file kept in memory (small ones, see `cache`) is appended to the head: one write
//!   through the runtime.
//! - Any other file: the head with `send(MSG_MORE)`, then `sendfile(2)` from the file to the
//!   socket, no copy through user space, the head and the first body bytes in the same
//!   segments. Both are plain syscalls on a non-blocking socket; `EAGAIN` waits for
//!   writability through the runtime (a poll op on io_uring, epoll's readiness otherwise).
//!   Client sockets are accepted non-blocking on every driver (`shared::accept`);
//!   `shared::stream::ensure_nonblocking` stays for any socket that is not, and `send` says
//!   `MSG_DONTWAIT` anyway. Never switched back: a blocking `sendfile` to a client that stops
//!   reading would hold the worker thread.
//!   Measured for a 32 KB file, CPU per response against nginx's sendfile path (benches/
//!   README.md): `pread` into a pooled buffer + a runtime write 1.8-2.0 (io_uring), the body
//!   kept in memory and written with the head 1.5-1.8, `send(MSG_MORE)` + `sendfile` ~1.0.
//! - A file that shrank while being sent cannot deliver the length announced: the
//!   connection is closed mid-body (the client sees a short body, never a complete-looking
//!   wrong one).

use super::Plan;
use crate::conn::ClientConn;
use crate::direct::{send_more, sendfile_all};
use crate::io::write_all;
use crate::static_files::respond::Body;
use shared::stream::Stream;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

/// The response could not be sent whole; the connection must close.
#[derive(Debug)]
pub struct SendFail;

/// Write the head in `c.to_client` and the body `plan` names.
pub async fn response(c: &mut ClientConn, plan: Plan) -> Result<(), SendFail> {
    let limit = c.g.cfg.timeouts.send;
    let (file, start, len) = match (plan.file, plan.body) {
        (Some(f), Body::Bytes { start, len }) if len > 0 => (f, start, len),
        _ => return write_head(c).await,
    };
    if let Some(mem) = &file.body {
        c.to_client
            .extend_from_slice(&mem[start as usize..(start + len) as usize]);
        return write_head(c).await;
    }
    let Stream::Plain(tcp) = &c.stream else {
        return copy_through(c, file.fd.as_fd(), start, len, limit).await;
    };
    shared::stream::ensure_nonblocking(tcp.as_raw_fd(), &mut c.nonblocking)
        .map_err(|_| SendFail)?;
    send_more(tcp, (&c.to_client, &[]), limit)
        .await
        .map_err(|_| SendFail)?;
    c.rec.wrote(&c.to_client);
    sendfile_all(tcp, file.fd.as_fd(), start, len, limit)
        .await
        .map_err(|_| SendFail)?;
    c.rec.wrote_body(len);
    Ok(())
}

/// A TLS client: the file goes through the session (no sendfile), read with pread(2) into a
/// relay buffer, the head sent with the first piece.
async fn copy_through(
    c: &mut ClientConn,
    fd: BorrowedFd<'_>,
    start: u64,
    len: u64,
    limit: Duration,
) -> Result<(), SendFail> {
    let mut buf = std::mem::take(&mut c.to_client);
    let (mut off, end) = (start, start + len);
    while off < end {
        let have = buf.len();
        let want = (end - off).min(crate::worker::RELAY_BUF as u64) as usize;
        buf.reserve(want);
        // SAFETY: pread(2) into the buffer's spare capacity (at least `want` bytes), from a
        // descriptor borrowed for the call.
        let n = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                buf.as_mut_ptr().add(have).cast(),
                want,
                off as libc::off_t,
            )
        };
        if n <= 0 {
            // The file shrank or failed: the length announced cannot be delivered.
            return Err(SendFail);
        }
        // SAFETY: pread wrote `n` bytes right after the `have` initialized ones.
        unsafe { buf.set_len(have + n as usize) };
        off += n as u64;
        buf = write_all(&mut c.stream, buf, limit)
            .await
            .map_err(|_| SendFail)?;
        c.rec.wrote(&buf);
        buf.clear();
    }
    c.to_client = buf;
    Ok(())
}

async fn write_head(c: &mut ClientConn) -> Result<(), SendFail> {
    c.send_cout().await.map_err(|_| SendFail)
}
