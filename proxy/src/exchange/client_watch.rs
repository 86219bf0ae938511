//! A client that goes away while its request waits for the upstream's answer (nginx's 499):
//! noticed while waiting, so the upstream request is abandoned (its connection closed, never
//! pooled) instead of running to its end for nobody. Likewise while it waits in its group's
//! queue for room under `max_conns`: it leaves the queue instead of being sent when its turn
//! comes.
//!
//! As nginx (without `proxy_ignore_client_abort`): the end of the client's stream (a FIN,
//! even a half-close after a whole request) or a reset while the request waits is an abort;
//! bytes that arrive meanwhile (pipelined requests) are not, and are read after the answer.
//!
//! Free on the request path: a client read through a multishot receive (a keep-alive client
//! from its second request on) has it armed already, and its queue shows the end with no
//! system call and nothing armed. Any other client (its first request, TLS, without
//! multishot receives) is watched only once the wait passed `WATCH_AFTER`: then one poll for
//! readability and a look at the socket, so an answer that comes within a few milliseconds
//! costs nothing but the timer.

use crate::cache::{Handle, Store};
use shared::stream::Stream;
use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// What a client's going away does to the request it waits on.
#[derive(Clone, Copy)]
pub(super) enum Watch<'a> {
    /// Nothing: nobody waits for this exchange's answer (a revalidation after an answer
    /// from the store).
    Off,
    /// The request is abandoned (499).
    Abandon,
    /// As `Abandon`, unless other requests wait on the cache fill this request fetches
    /// (collapsed forwarding): then the fetch goes on for them, and `Wanted::left` says the
    /// client is gone.
    UnlessWanted(&'a Wanted<'a>),
}

/// A cache fill that other requests may wait on.
pub(in crate::exchange) struct Wanted<'a> {
    store: &'a RefCell<Store>,
    fill: Handle,
    left: Cell<bool>,
}

impl<'a> Wanted<'a> {
    pub(in crate::exchange) fn new(store: &'a RefCell<Store>, fill: Handle) -> Self {
        Wanted {
            store,
            fill,
            left: Cell::new(false),
        }
    }

    /// The client left while the answer was awaited; the fetch went on for the others.
    pub(in crate::exchange) fn left(&self) -> bool {
        self.left.get()
    }
}

impl Watch<'_> {
    /// Whether the client is to be watched now.
    pub(super) fn on(self) -> bool {
        match self {
            Watch::Off => false,
            Watch::Abandon => true,
            Watch::UnlessWanted(w) => !w.left(),
        }
    }

    /// The client is known gone (its answer goes nowhere).
    pub(super) fn left(self) -> bool {
        matches!(self, Watch::UnlessWanted(w) if w.left())
    }
}

/// Resolves once the request is to be abandoned: its client is gone and nobody else wants
/// its answer (`Watch`). Never for `Watch::Off`.
pub(super) async fn abandoned(client: &Stream, watch: Watch<'_>) {
    match watch {
        Watch::Off => std::future::pending().await,
        Watch::Abandon => client_gone(client).await,
        Watch::UnlessWanted(w) => {
            if !w.left() {
                client_gone(client).await;
                if !w.store.borrow().waited_on(w.fill) {
                    return;
                }
                w.left.set(true);
            }
            std::future::pending().await
        }
    }
}

/// How long a request waits before a client without an armed receive is watched.
pub(super) const WATCH_AFTER: Duration = Duration::from_millis(20);

/// Resolves once the client is gone (its end of the stream or an error arrived); never while
/// it is there (bytes it sends meanwhile stay unread for after the answer).
pub(super) async fn client_gone(client: &Stream) {
    if client.peer_ended().await {
        return;
    }
    monoio::time::sleep(WATCH_AFTER).await;
    loop {
        // What an armed receive took (a multishot client whose receive ended meanwhile).
        if client.peer_ended().await {
            return;
        }
        if client.tcp().readable(false).await.is_err() {
            return;
        }
        match look(client.as_raw_fd()) {
            Seen::Gone => return,
            Seen::Nothing => continue,
            // Bytes wait in the socket and the client's side is open: pipelined bytes (or,
            // TLS, records) for after the answer. The socket stays readable from now on, so
            // nothing more can be learned without reading (nginx stops watching too).
            Seen::Bytes => return std::future::pending().await,
        }
    }
}

/// What a readable client socket holds.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Its end of the stream arrived (behind bytes or not), or an error.
    Gone,
    /// Bytes, and the client's side is still open.
    Bytes,
    /// Nothing after all.
    Nothing,
}

fn look(fd: RawFd) -> Seen {
    if fin_received(fd) {
        return Seen::Gone;
    }
    let mut byte = 0u8;
    // SAFETY: recv(2) on the client's open descriptor into a one-byte buffer on this stack;
    // MSG_PEEK leaves the socket's data untouched and MSG_DONTWAIT keeps it from blocking.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => Seen::Gone,
        n if n > 0 => Seen::Bytes,
        _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock => {
            Seen::Nothing
        }
        _ => Seen::Gone,
    }
}

/// The peer's FIN arrived: the socket is in CLOSE_WAIT (or past it), whatever bytes still
/// wait in front of the end (a peek sees only those).
fn fin_received(fd: RawFd) -> bool {
    // SAFETY: `tcp_info` is plain data; zeroed is a valid value for getsockopt to fill.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt(2) on the client's open descriptor, writing at most `len` bytes
    // into `info`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    // TCP_CLOSE_WAIT = 8, TCP_LAST_ACK = 9, TCP_CLOSE = 7 (include/net/tcp_states.h).
    r == 0 && matches!(info.tcpi_state, 7..=9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_socket_shows_bytes_then_its_end() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        let fd = server.as_raw_fd();
        assert_eq!(look(fd), Seen::Nothing);
        client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        wait_for(fd, libc::POLLIN);
        assert_eq!(look(fd), Seen::Bytes);
        // A half-close behind unread bytes: gone (nginx's view of a FIN while waiting).
        client.shutdown(std::net::Shutdown::Write).unwrap();
        wait_for(fd, libc::POLLRDHUP);
        assert_eq!(look(fd), Seen::Gone);
    }

    /// Wait (5 s at most) for `events` on `fd`.
    fn wait_for(fd: RawFd, events: libc::c_short) {
        let mut p = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd on this stack.
        let n = unsafe { libc::poll(&mut p, 1, 5000) };
        assert!(
            n == 1 && p.revents & events != 0,
            "no event {events} on the socket"
        );
    }
}
