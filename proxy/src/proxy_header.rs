//! A PROXY protocol listener's first read (`[[listen]] proxy_protocol = true`): the header
//! (`shared::proxy_protocol`, v1 or v2) taken off the socket and nothing past it, before a
//! TLS handshake or the first request.
//!
//! The bytes are peeked (`MSG_PEEK`) and only the header's exact length is then received:
//! what follows it (the request, a TLS ClientHello) stays in the socket for whoever reads
//! next, so neither the request loop nor rustls needs to be handed leftover bytes. A header
//! split across segments is waited for with SO_RCVLOWAT set past what was peeked, so the
//! wait (a poll on io_uring, epoll otherwise) wakes only when more bytes (or the end) came,
//! never spinning on the bytes already there. A nginx or HAProxy balancer sends the header
//! in the connection's first segment: the usual cost is one poll, one peek and one receive.

use crate::direct::{step, Step};
use monoio::net::TcpStream;
use monoio::time::Instant;
use shared::proxy_protocol::{parse, Invalid, Parsed, MAX_HEADER_LEN, MAX_V1_LEN};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

/// Why a connection had no valid header: it is closed, never served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    /// Not a PROXY header.
    Invalid(Invalid),
    /// Part of a header came, then the end (or an error), or the header timeout.
    Truncated,
    /// Nothing came before the end or the header timeout (a balancer's TCP check).
    Nothing,
}

/// Read the header at the start of `tcp` by `deadline`: the client's address it names
/// (`None`: it names none, as v2 LOCAL and v1 UNKNOWN do; the socket's peer is the client).
pub async fn read(tcp: &TcpStream, deadline: Instant) -> Result<Option<SocketAddr>, Fail> {
    let fd = tcp.as_raw_fd();
    // The longest v1 header fits; a v2 length over it grows the buffer once.
    let mut buf = vec![0u8; 2 * MAX_V1_LEN + 40];
    let mut seen = 0;
    let mut lowat = false;
    let got = loop {
        let ready = monoio::time::timeout_at(deadline, tcp.readable(false)).await;
        if !matches!(ready, Ok(Ok(()))) {
            break Err(if seen == 0 {
                Fail::Nothing
            } else {
                Fail::Truncated
            });
        }
        let n = match peek(fd, &mut buf) {
            Step::Moved(0) | Step::Again => continue,
            Step::Moved(n) => n,
            Step::Failed => {
                break Err(if seen == 0 {
                    Fail::Nothing
                } else {
                    Fail::Truncated
                })
            }
        };
        match parse(&buf[..n]) {
            Parsed::Done(h) => break take(fd, &mut buf[..h.consumed]).map(|()| h.source),
            Parsed::Invalid(e) => break Err(Fail::Invalid(e)),
            // A look that filled the buffer: look again at once into the grown one. Not
            // counted as seen: the next look may find the same bytes and nothing new, which
            // then means only that the rest has not come yet.
            Parsed::Incomplete if n == buf.len() && n < MAX_HEADER_LEN => {
                buf.resize(MAX_HEADER_LEN, 0);
                continue;
            }
            // Woken with nothing new: the peer's end (or an error) arrived.
            Parsed::Incomplete if n <= seen => break Err(Fail::Truncated),
            Parsed::Incomplete => {
                lowat = true;
                set_rcvlowat(fd, n + 1);
            }
        }
        seen = n;
    };
    if lowat {
        set_rcvlowat(fd, 1);
    }
    got
}

/// Peek at what the socket holds, without waiting.
fn peek(fd: RawFd, buf: &mut [u8]) -> Step {
    let flags = libc::MSG_PEEK | libc::MSG_DONTWAIT;
    // SAFETY: `buf` is writable for `buf.len()` bytes; the fd is open (the stream owns it).
    step(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) })
}

/// Receive exactly `buf.len()` bytes, which a peek just saw in the socket.
fn take(fd: RawFd, buf: &mut [u8]) -> Result<(), Fail> {
    let mut at = 0;
    while at < buf.len() {
        let rest = &mut buf[at..];
        // SAFETY: `rest` is writable for `rest.len()` bytes; the fd is open.
        let n = unsafe { libc::recv(fd, rest.as_mut_ptr().cast(), rest.len(), libc::MSG_DONTWAIT) };
        match step(n) {
            Step::Moved(n) => at += n,
            // The peeked bytes are in the socket: neither can happen but by a broken socket.
            Step::Again | Step::Failed => return Err(Fail::Truncated),
        }
    }
    Ok(())
}

/// Readiness (a poll, epoll) only once `n` bytes are in the socket, or its end.
fn set_rcvlowat(fd: RawFd, n: usize) {
    let n = n as libc::c_int;
    // SAFETY: a valid fd and a c_int option value of the right size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            &n as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}
