//! Large Content-Length response bodies moved from the upstream's socket to the client's with
//! splice(2) through a pipe: the pages go from one socket to the other by reference, never
//! copied into the proxy (or, on io_uring with multishot receives, into the buffer ring and
//! then again into a relay buffer). HAProxy's `option splice-response`.
//!
//! - Only plain TCP on both sides, a body of at least [`SPLICE_MIN`] bytes still to come, no
//!   cache entry to fill and no re-framing: everything else takes the relay buffer's path.
//! - The upstream connection must be read one-shot: a multishot receive armed on it would take
//!   the body into the worker's buffer ring first. The pool keeps a connection that carried a
//!   large body out of multishot receives (`pool::ServerPool::put`), and its next response
//!   head is read with a small receive ([`HEAD_READ`]) so that the body stays in the socket.
//! - The system calls are made on the worker thread, on non-blocking sockets and a
//!   non-blocking pipe (`SPLICE_F_NONBLOCK`): `EAGAIN` waits through the runtime
//!   (`direct::readable`/`writable`). io_uring's own splice op always runs on a kernel worker
//!   thread: measured slower, not used.
//! - A pipe is per worker, reused while empty; one left holding bytes (a client that went away
//!   mid-body) is closed, never reused, so no byte of one response can reach another client.
//! - A body that ends early (the upstream closes) fails as the relay buffer's path does: the
//!   client connection is closed without the missing bytes.

use crate::direct::{readable, step, writable, Step};
use monoio::net::TcpStream;
use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Bodies this large (bytes still to come after those read with the head) are spliced.
pub const SPLICE_MIN: u64 = 16 * 1024;

/// Whether a body framed as `kind` is large enough to splice.
pub fn worth_it(kind: shared::http::BodyKind) -> bool {
    matches!(kind, shared::http::BodyKind::Length(n) if n >= SPLICE_MIN)
}

/// How much a response head read takes on a connection whose last body was spliced: the
/// head, and only the first bytes of a body that may have arrived with it.
pub const HEAD_READ: usize = 2048;

/// At most this many idle pipes kept per worker (two descriptors each).
const PIPES_KEPT: usize = 64;

/// A pipe's default capacity (16 pages): one splice moves at most this much.
const PIPE_CAP: usize = 64 * 1024;

/// A pipe between the two sockets: read end, write end.
pub struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
}

impl Pipe {
    fn new() -> std::io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: pipe2 returned two new descriptors that nothing else owns.
        Ok(unsafe {
            Pipe {
                r: OwnedFd::from_raw_fd(fds[0]),
                w: OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }
}

/// The worker's idle pipes.
#[derive(Default)]
pub struct Pipes(RefCell<Vec<Pipe>>);

impl Pipes {
    /// An empty pipe: a kept one, or a new one (`None` if the process is out of descriptors).
    pub fn take(&self) -> Option<Pipe> {
        self.0.borrow_mut().pop().or_else(|| Pipe::new().ok())
    }

    /// Keep `pipe` for the next body; it must be empty.
    fn give(&self, pipe: Pipe) {
        let mut kept = self.0.borrow_mut();
        if kept.len() < PIPES_KEPT {
            kept.push(pipe);
        }
    }
}

/// Why a spliced body did not arrive whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpliceFail {
    /// The upstream closed before the body's end.
    UpstreamClosed,
    /// Reading the upstream failed.
    UpstreamIo,
    /// The upstream sent nothing for the read timeout.
    UpstreamTimeout,
    /// The client went away or stopped reading for the send timeout.
    Client,
}

/// Move `len` body bytes from `up` to `client`. Both sockets must be non-blocking. `Ok` once
/// all of them reached the client's socket; `sent` counts what did either way.
pub async fn body(
    pipes: &Pipes,
    up: &TcpStream,
    client: &TcpStream,
    len: u64,
    (read, send): (Duration, Duration),
    sent: &mut u64,
) -> Result<(), SpliceFail> {
    let pipe = pipes.take().ok_or(SpliceFail::UpstreamIo)?;
    let mut left = len;
    // Bytes in the pipe, not yet in the client's socket.
    let mut held = 0usize;
    while left > 0 || held > 0 {
        let mut moved = false;
        if left > 0 && held < PIPE_CAP {
            let want = left.min((PIPE_CAP - held) as u64) as usize;
            match splice(up.as_raw_fd(), pipe.w.as_raw_fd(), want) {
                Spliced::Moved(n) => {
                    left -= n as u64;
                    held += n;
                    moved = n > 0;
                }
                Spliced::Again => {}
                // The upstream's end, before the body's.
                Spliced::End => return Err(SpliceFail::UpstreamClosed),
                Spliced::Failed => return Err(SpliceFail::UpstreamIo),
            }
        }
        if held > 0 {
            match splice(pipe.r.as_raw_fd(), client.as_raw_fd(), held) {
                Spliced::Moved(n) => {
                    held -= n;
                    *sent += n as u64;
                    moved |= n > 0;
                }
                Spliced::Again => {}
                Spliced::End | Spliced::Failed => return Err(SpliceFail::Client),
            }
        }
        if moved {
            continue;
        }
        // Neither side moved: the client's socket is full (wait for it first: what the
        // pipe holds must go before more is read), or the upstream has sent nothing yet.
        if held > 0 {
            writable(client, send)
                .await
                .map_err(|_| SpliceFail::Client)?;
        } else {
            readable(up, read)
                .await
                .map_err(|_| SpliceFail::UpstreamTimeout)?;
        }
    }
    pipes.give(pipe);
    Ok(())
}

/// What one splice(2) did.
enum Spliced {
    Moved(usize),
    /// `EAGAIN`: the source is empty or the destination full.
    Again,
    /// 0 from a socket: its end.
    End,
    Failed,
}

/// One splice(2) of up to `len` bytes, never waiting.
fn splice(from: RawFd, to: RawFd, len: usize) -> Spliced {
    let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK;
    // SAFETY: both descriptors are open for the call; null offsets (sockets and pipes have
    // none).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            flags,
        )
    };
    match step(n) {
        _ if n == 0 => Spliced::End,
        Step::Moved(n) => Spliced::Moved(n),
        Step::Again => Spliced::Again,
        Step::Failed => Spliced::Failed,
    }
}
