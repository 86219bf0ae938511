//! One stream type for plain and TLS connections, client and server side.
//!
//! [`Stream`] is what the proxy, the loader and the origin read and write: monoio's
//! `AsyncReadRent`/`AsyncWriteRent` with owned buffers, `Split` for the exchange and the
//! tunnel, a write-side shutdown that sends TLS's close_notify first, a check that an idle
//! pooled connection is still alive, and the scheme (`http`/`https`).
//!
//! The plain path is the `TcpStream` it wraps plus one branch; the TLS state is boxed so a
//! plain `Stream` stays two words. The TLS adapter is in [`tls`].

mod tls;
pub mod tls_buffers;

pub use tls::{accept, connect, AcceptFail, PlainStart, TlsStream};

use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent, Split};
use monoio::net::TcpStream;
use monoio::BufResult;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// A connection, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl From<TcpStream> for Stream {
    #[inline]
    fn from(s: TcpStream) -> Self {
        Stream::Plain(s)
    }
}

// SAFETY: reads and writes use disjoint state. Plain: monoio's own `TcpStream` split. TLS:
// a read uses the read scratch buffer and a recv on the socket, a write the write buffer and a
// send; both touch the rustls session only between awaits, never across one, and a worker is
// one thread, so the two halves never hold the session at the same time.
unsafe impl Split for Stream {}

impl Stream {
    /// `http` or `https`: for `X-Forwarded-Proto`.
    #[inline]
    pub fn scheme(&self) -> &'static str {
        match self {
            Stream::Plain(_) => "http",
            Stream::Tls(_) => "https",
        }
    }

    #[inline]
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// The TCP stream underneath (for `sendfile` and socket options).
    #[inline]
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.tcp(),
        }
    }

    /// The TCP stream underneath, to read raw: what a closing connection still receives
    /// and discards (over TLS nothing needs decrypting then, and a read dropped in flight
    /// may have left the session's stream unreadable).
    #[inline]
    pub fn tcp_mut(&mut self) -> &mut TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.tcp_mut(),
        }
    }

    /// Read the TCP stream underneath through a multishot receive from now on, where this
    /// worker does (`runtime::multishot_recv`). Worth it on a connection that waits for
    /// more than one message. A plain one may still be checked with `still_open`; a TLS one
    /// must not (its check reads the receive's queue only, not the socket behind it).
    pub fn multishot_recv(&mut self) -> bool {
        match self {
            Stream::Plain(s) => crate::runtime::multishot_recv(s),
            Stream::Tls(t) => crate::runtime::multishot_recv(t.tcp_mut()),
        }
    }

    /// Let a stream wait for its next bytes holding no buffer, with a single receive per wait,
    /// where this worker does (`runtime::ready_recv`): a connection's first request. A TLS
    /// stream only while its session holds nothing to read (what the handshake's last read
    /// brought may already be a request).
    pub fn ready_recv(&mut self) -> bool {
        match self {
            Stream::Plain(s) => crate::runtime::ready_recv(s),
            Stream::Tls(t) if t.drained() => crate::runtime::ready_recv(t.tcp_mut()),
            Stream::Tls(_) => false,
        }
    }

    /// The stream waits idle (a client before or between requests) holding no buffer: a TLS
    /// stream gives its own buffers back to the thread's pool (`tls_buffers`) until its next
    /// read or write. Nothing to do for a plain one.
    pub fn park(&mut self) {
        if let Stream::Tls(t) = self {
            t.park();
        }
    }

    /// Resolves `true` once the peer's end of the stream (a FIN) or an error came through the
    /// receive armed on a plain stream (behind bytes not read yet: pipelined requests are not
    /// an end), `false` at once when none is armed (`TcpStream::multishot_ended`): no system
    /// call, nothing armed.
    pub async fn peer_ended(&self) -> bool {
        match self {
            Stream::Plain(s) => s.multishot_ended().await,
            Stream::Tls(_) => false,
        }
    }

    /// Wait, holding no buffer, until a read would complete at once: a stream read through a
    /// multishot receive (`TcpStream::multishot_ready`); a TLS one at once when its session
    /// already holds something to read (then its records wait in the receive). `false` at
    /// once for any other stream: wait by reading then.
    pub async fn multishot_ready(&mut self) -> bool {
        match self {
            Stream::Plain(s) => s.multishot_ready().await,
            Stream::Tls(t) if !t.tcp().multishot_enabled() => false,
            Stream::Tls(t) if !t.drained() => true,
            Stream::Tls(t) => t.tcp_mut().multishot_ready().await,
        }
    }

    /// Whether a multishot receive stays armed on a plain stream (`TcpStream::multishot_armed`):
    /// what arrives will be in its queue. False for TLS.
    pub fn multishot_armed(&self) -> bool {
        matches!(self, Stream::Plain(s) if s.multishot_armed())
    }

    /// Whether bytes (or the end) already arrived and wait unread: a stream read through a
    /// multishot receive, whose queue is in memory (no system call), or a TLS session's
    /// plaintext. `false` when unknown.
    pub fn arrived(&self) -> bool {
        match self {
            Stream::Plain(s) => s.multishot_queued(),
            Stream::Tls(t) => {
                let tcp = t.tcp();
                tcp.multishot_enabled() && (tcp.multishot_queued() || !t.drained())
            }
        }
    }

    /// A read that completes at once, without a future, from what already arrived;
    /// `Err(buf)` when nothing did (or `buf` has no room): read with `read`. A stream read
    /// through a multishot receive reads the receive's queue (`arrived`: memory, no system
    /// call); another plain stream what its socket holds (a non-blocking recv(2)); a TLS
    /// stream the plaintext its session holds, then the records that arrived, taken the same
    /// way.
    pub fn read_queued<T: IoBufMut>(&mut self, buf: T) -> Result<BufResult<usize, T>, T> {
        match self {
            Stream::Plain(s) if s.multishot_enabled() => s.read_queued(buf),
            Stream::Plain(s) => recv_now(s.as_raw_fd(), buf),
            Stream::Tls(t) => t.read_queued(buf),
        }
    }

    /// Whether `multishot_ready` can wait on this stream: one read through a multishot (or
    /// single) receive; a TLS one whose session holds nothing to read.
    pub fn waits_bufferless(&self) -> bool {
        match self {
            Stream::Plain(s) => s.multishot_enabled(),
            Stream::Tls(t) => t.tcp().multishot_enabled() && t.drained(),
        }
    }

    /// Whether an idle connection (no request in flight on it) is still open and silent.
    /// Plain: a non-blocking peek finds nothing. TLS: the session holds no plaintext, and the
    /// bytes waiting are read and given to it; post-handshake messages (TLS 1.3 session tickets, a key update) are fine,
    /// application data, an alert, a close_notify or end of stream mean the connection must
    /// not carry another request.
    pub fn still_open(&mut self) -> bool {
        match self {
            // What arrived is in the multishot receive's queue or still in the socket.
            Stream::Plain(s) => !s.multishot_queued() && peek_silent(s.as_raw_fd()),
            Stream::Tls(t) => {
                debug_assert!(
                    !t.tcp().multishot_enabled(),
                    "a TLS connection checked for liveness must not use a multishot receive"
                );
                t.still_open()
            }
        }
    }

    /// Shut the write side down (over TLS, a close_notify first), giving up at `deadline`:
    /// `Err(TimedOut)` then. A close_notify waits for room in the socket, which a peer that
    /// does not read never makes: the bound keeps such a peer from holding the connection's
    /// task (and its buffers) for good. After a timeout the TLS stream's write was dropped
    /// in flight and its write side is not shut down: the stream is only closed after that
    /// (`close_now`, or dropped), never written or read through TLS again.
    pub async fn shutdown_by(&mut self, deadline: monoio::time::Instant) -> io::Result<()> {
        match monoio::time::timeout_at(deadline, AsyncWriteRent::shutdown(self)).await {
            Ok(r) => r,
            Err(_) => Err(io::ErrorKind::TimedOut.into()),
        }
    }

    /// Close right away with close(2), sending a TLS close_notify first if the socket takes
    /// it without waiting. Dropping a monoio stream under io_uring submits a close op and,
    /// because the op's future is dropped unfinished, an ASYNC_CANCEL that searches the io-wq
    /// for it: two more SQEs and ~2% of the CPU of a connection-per-request client. Meant for
    /// streams with no operation in flight: taking the fd needs the last reference to it, and
    /// an operation dropped before completing keeps one until it completes. With one in
    /// flight all the same, the stream is dropped the ordinary way (the fd closes when that
    /// operation completes), never a panic.
    pub fn close_now(self) {
        self.close_now_with(false)
    }

    /// End a connection quietly (the peer's own end, an idle timeout, a stop): a TLS one
    /// with a close_notify first (`close_now`), as RFC 8446 6.1 asks of a party closing its
    /// write side, so its peer tells the clean end from a cut; a plain one is dropped, which
    /// closes it the ordinary way.
    pub fn close_quietly(self) {
        match self {
            Stream::Tls(_) => self.close_now(),
            Stream::Plain(s) => drop(s),
        }
    }

    /// `close_now` for a socket whose last bytes were written under TCP_CORK: shutdown(2) of
    /// the write side (after the TLS close_notify) sends them with the FIN in one segment.
    /// close(2) alone would do the same, except when the peer sent bytes never read: then it
    /// resets the connection and the corked bytes are dropped unsent.
    pub fn close_now_corked(self) {
        self.close_now_with(true)
    }

    fn close_now_with(self, shut_write: bool) {
        use std::os::fd::{FromRawFd, OwnedFd};
        let tcp = match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.close_notify_now(),
        };
        let fd = match tcp.try_into_raw_fd() {
            Ok(fd) => fd,
            Err(busy) => {
                if shut_write {
                    // The corked bytes leave with the FIN now, not when the fd closes.
                    // SAFETY: shutdown(2) on the stream's open descriptor; it stays owned by
                    // the stream, which closes it.
                    unsafe { libc::shutdown(busy.as_raw_fd(), libc::SHUT_WR) };
                }
                return drop(busy);
            }
        };
        if shut_write {
            // SAFETY: an open descriptor, owned here.
            unsafe { libc::shutdown(fd, libc::SHUT_WR) };
        }
        // SAFETY: `try_into_raw_fd` gave up monoio's ownership of the fd (and deregistered it
        // from the epoll driver): it is open and owned by nothing else.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }

    /// Whether [`Stream::discard`] can drop bytes: a plain stream read through a multishot
    /// receive (it may still answer `None` when the receive's ring runs short).
    pub fn can_discard(&self) -> bool {
        matches!(self, Stream::Plain(s) if s.multishot_enabled())
    }

    /// Drop up to `max` bytes of what arrives without copying them: a plain stream read
    /// through a multishot receive (`TcpStream::discard`); `Ok(0)` at the end of the stream.
    /// `None` for any other stream, for `max` 0, or when the receive cannot take it now:
    /// read instead.
    pub async fn discard(&mut self, max: usize) -> Option<io::Result<usize>> {
        match self {
            Stream::Plain(s) if max > 0 => s.discard(max).await,
            _ => None,
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}

/// Make socket `fd` non-blocking for good, unless `done` says it already is (the proxy
/// keeps it per client connection). One F_SETFL of O_NONBLOCK alone, no F_GETFL first: of
/// the status flags F_SETFL changes, a socket of ours has none but O_NONBLOCK (O_APPEND,
/// O_ASYNC, O_DIRECT and O_NOATIME are never set on one), so nothing else is cleared, and
/// nothing is ever restored from another socket's flags.
/// `sendfile(2)` takes no flags, so only the socket's mode keeps it from waiting on the
/// worker thread for a client that stopped reading. Left on: the runtime's own I/O does not
/// mind (io_uring still parks an operation on an O_NONBLOCK socket until it is ready, since
/// sockets support nowait; the epoll driver's sockets are non-blocking already), and a socket
/// switched back could meet a later `sendfile` blocking.
pub fn ensure_nonblocking(fd: RawFd, done: &mut bool) -> io::Result<()> {
    if *done {
        return Ok(());
    }
    // SAFETY: F_SETFL on the caller's open socket; no memory is passed.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    *done = true;
    Ok(())
}

/// One recv(2) into `buf`'s room that never waits, whatever the socket's mode: `Err(buf)`
/// when the socket holds nothing (or `buf` has no room), `Ok(0)` at its end. For a socket no
/// multishot receive reads (it would have taken the bytes first) and no read is in flight on.
fn recv_now<T: IoBufMut>(fd: RawFd, mut buf: T) -> Result<BufResult<usize, T>, T> {
    let room = buf.bytes_total();
    if room == 0 {
        return Err(buf);
    }
    let n = loop {
        // SAFETY: recv(2) writes at most `room` bytes at the buffer's write pointer, the room
        // monoio's own reads write into; the caller keeps `fd` open for the call.
        let n = unsafe { libc::recv(fd, buf.write_ptr().cast(), room, libc::MSG_DONTWAIT) };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => return Err(buf),
            _ => return Ok((Err(e), buf)),
        }
    };
    // SAFETY: recv wrote `n` bytes at the write pointer.
    unsafe { buf.set_init(n as usize) };
    Ok((Ok(n as usize), buf))
}

/// A non-blocking one-byte peek finds nothing to read (and no end of stream, no error).
pub fn peek_silent(fd: RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: recv(2) on a descriptor the caller keeps open for the call, into a one-byte
    // buffer on this stack; MSG_PEEK leaves the socket's data untouched and MSG_DONTWAIT
    // keeps it from blocking whatever the socket's mode.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

/// Run `op` (a vectored read or write of `buf` on a plain socket) again after `ready` (the
/// socket's readiness) while it fails with `WouldBlock`; return its result with `buf`.
macro_rules! until_ready {
    ($buf:ident, $op:expr, $ready:expr) => {
        loop {
            let (r, back) = $op;
            $buf = back;
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Err(e) = $ready {
                        return (Err(e), $buf);
                    }
                }
                r => return (r, $buf),
            }
        }
    };
}

impl AsyncReadRent for Stream {
    #[inline]
    async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            Stream::Plain(s) => s.read(buf).await,
            Stream::Tls(t) => t.read(buf).await,
        }
    }

    /// A one-shot READV's EAGAIN is waited out, as `writev`'s is (see there).
    #[inline]
    async fn readv<T: IoVecBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        match self {
            Stream::Plain(s) => until_ready!(buf, s.readv(buf).await, s.readable(false).await),
            Stream::Tls(t) => t.readv(buf).await,
        }
    }
}

impl AsyncWriteRent for Stream {
    #[inline]
    async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            Stream::Plain(s) => s.write(buf).await,
            Stream::Tls(t) => t.write(buf).await,
        }
    }

    /// A plain socket's vectored I/O is io_uring's READV/WRITEV (not RECV/SEND, which
    /// ignore O_NONBLOCK): before Linux 5.15 they fail with EAGAIN on a non-blocking socket
    /// instead of waiting for it (client sockets are accepted non-blocking, see
    /// `accept::Acceptor::accepted`). That failure is waited out here, on every kernel.
    #[inline]
    async fn writev<T: IoVecBuf>(&mut self, mut buf: T) -> BufResult<usize, T> {
        match self {
            Stream::Plain(s) => until_ready!(buf, s.writev(buf).await, s.writable(false).await),
            Stream::Tls(t) => t.writev(buf).await,
        }
    }

    #[inline]
    async fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Shut the write side down (TLS: close_notify first). The plain shutdown(2) happens when
    /// this is called, not when it is awaited, as with monoio's `TcpStream`: a split write half
    /// dropped without being reunited shuts the socket down that way.
    fn shutdown(&mut self) -> impl std::future::Future<Output = io::Result<()>> {
        let (plain, tls) = match self {
            Stream::Plain(s) => (Some(s.shutdown()), None),
            Stream::Tls(t) => (None, Some(t)),
        };
        async move {
            match (plain, tls) {
                (Some(p), _) => p.await,
                (None, Some(t)) => t.shutdown().await,
                (None, None) => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests;
