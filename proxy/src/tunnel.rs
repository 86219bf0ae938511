//! WebSocket tunnels: after the 101, bytes are copied both ways as they come.
//!
//! When one side ends its stream cleanly, the other side's write half is shut down and the
//! opposite direction runs until it ends too (a close handshake still completes); an error or
//! a timeout on either side ends both. The tunnel is idle, and ends, once neither direction
//! read or wrote a byte for the upstream read timeout: nginx's `proxy_read_timeout` is re-armed
//! by either side's bytes, HAProxy's `timeout tunnel` is inactivity both ways. A server that
//! pushes to a client that never sends (or the other way round) is not idle, nor is a write
//! stalled on a slow reader (the send timeouts bound that one: the client `send` towards the
//! client, the route's `upstream_send` towards the upstream, as nginx's `send_timeout` and
//! `proxy_send_timeout` do).

use crate::balance::HeldRoom;
use crate::config::Timeouts;
use crate::io::{read_some, write_all, IoFail};
use bytes::BytesMut;
use monoio::io::{AsyncReadRent, AsyncWriteRent, Splitable};
use shared::deadline::timeout_at;
use shared::stream::Stream;
use std::cell::Cell;
use std::io;
use std::time::{Duration, Instant};

const TUNNEL_BUF: usize = 16 * 1024;

/// What a tunnel keeps of the configuration its upgrade was served on: three durations,
/// copied, so that the generation (its pools, response stores, open files) is not held for
/// the tunnel's life, which may span many reloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Both directions may be silent this long (the upstream read timeout).
    pub idle: Duration,
    /// One write to the client may stall this long (the client send timeout).
    pub send: Duration,
    /// One write to the upstream may stall this long (the route's `upstream_send`, as
    /// nginx's `proxy_send_timeout` bounds an upgraded connection's writes upstream).
    pub upstream_send: Duration,
}

impl Limits {
    pub fn of(t: &Timeouts) -> Limits {
        Limits {
            idle: t.read,
            send: t.send,
            upstream_send: t.upstream_send,
        }
    }
}

/// A WebSocket upgrade that succeeded: what the tunnel keeps for its life.
pub struct Tunnel {
    /// The upstream connection.
    pub up: Stream,
    pub limits: Limits,
    /// The server's room (`max_conns`, least-conn, the in-flight gauge), held until the
    /// tunnel ends, as nginx and HAProxy count a tunnel as a connection to its server: the
    /// count and the queue only, not the generation (`balance::HeldRoom`).
    pub room: Option<HeldRoom>,
}

/// Bytes a tunnel delivered each way, counted as its writes complete (a failed write is not
/// counted): kept outside the relay, so that a tunnel cut at a stop still has its count.
#[derive(Debug, Default)]
pub struct Moved {
    pub to_upstream: Cell<u64>,
    pub to_client: Cell<u64>,
}

/// Relay bytes both ways until both directions ended, counting them in `moved`; then the
/// server's room is given back.
pub async fn run(tunnel: Tunnel, client: Stream, moved: &Moved) {
    let Tunnel {
        up: upstream,
        limits,
        room: _room,
    } = tunnel;
    let Limits {
        idle,
        send,
        upstream_send,
    } = limits;
    let (mut cr, mut cw) = client.into_split();
    let (mut ur, mut uw) = upstream.into_split();
    let act = Activity {
        last: Cell::new(shared::clock::loop_now()),
        writing: Cell::new(0),
    };
    let to_upstream = (upstream_send, &moved.to_upstream);
    let mut up = std::pin::pin!(pipe(&mut cr, &mut uw, (idle, &act), to_upstream));
    let to_client = (send, &moved.to_client);
    let mut down = std::pin::pin!(pipe(&mut ur, &mut cw, (idle, &act), to_client));
    monoio::select! {
        clean = &mut up => if clean { down.await; },
        clean = &mut down => if clean { up.await; },
    }
}

/// What both directions of a tunnel did last: it is idle once neither read nor wrote for
/// the idle timeout.
struct Activity {
    /// When a direction last read bytes or finished writing them.
    last: Cell<Instant>,
    /// Directions writing now: a write stalled on a slow reader (bounded by the send timeout)
    /// is not idleness.
    writing: Cell<u8>,
}

impl Activity {
    fn idle_since(&self, idle: Duration) -> Option<Instant> {
        (self.writing.get() == 0).then(|| self.last.get() + idle)
    }
}

/// Copy until end of stream (then shut the writer down: `true`) or an error or the tunnel's
/// idle timeout (`false`); each write, and that shutdown, within `send` (`false` past it), the
/// bytes written counted in `moved`.
async fn pipe<R: AsyncReadRent, W: AsyncWriteRent>(
    r: &mut R,
    w: &mut W,
    (idle, act): (Duration, &Activity),
    (send, moved): (Duration, &Cell<u64>),
) -> bool {
    let mut buf = BytesMut::with_capacity(TUNNEL_BUF);
    loop {
        buf.clear();
        // One read, waited for across the other direction's activity: re-armed, not
        // dropped (a dropped read may take bytes it received with it).
        let mut read = std::pin::pin!(read_some(r, buf, TUNNEL_BUF));
        let got = loop {
            // While the other direction writes, look again an idle period from now.
            let until = act
                .idle_since(idle)
                .unwrap_or_else(|| Instant::now() + idle);
            match timeout_at(monoio::time::Instant::from_std(until), &mut read).await {
                Ok(got) => break got,
                // The timer's clock (never early): idle unless the other direction read or
                // wrote since, or writes now; then wait on to the new deadline.
                Err(_) if act.idle_since(idle).is_some_and(|t| t <= Instant::now()) => {
                    return false
                }
                Err(_) => {}
            }
        };
        act.last.set(shared::clock::loop_now());
        match got {
            // A TLS peer's TCP close without close_notify ends a tunnel's direction as a
            // clean close does: the bytes carry their own framing, the tunnel has none.
            // The end goes on within the send timeout: a TLS close_notify waits for room a
            // peer that reads nothing never makes, and would hold the tunnel for good. Past
            // it, the tunnel ends (the stream is not used through TLS again).
            Ok((0, _)) | Err(IoFail::Error(io::ErrorKind::UnexpectedEof)) => {
                return monoio::time::timeout(send, w.shutdown()).await.is_ok();
            }
            Ok((_, b)) => buf = b,
            Err(_) => return false,
        }
        act.writing.set(act.writing.get() + 1);
        let wrote = write_all(w, buf, send).await;
        act.writing.set(act.writing.get() - 1);
        act.last.set(shared::clock::loop_now());
        match wrote {
            Ok(b) => {
                moved.set(moved.get() + b.len() as u64);
                buf = b;
            }
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
    use monoio::BufResult;

    /// A peer that has ended its stream: every read is end of stream.
    struct Ended;

    impl AsyncReadRent for Ended {
        async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
            (Ok(0), buf)
        }
        async fn readv<T: IoVecBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
            (Ok(0), buf)
        }
    }

    /// A writer whose shutdown never completes: a TLS close_notify to a peer that reads
    /// nothing, its socket buffer full.
    struct NeverShuts;

    impl AsyncWriteRent for NeverShuts {
        async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
            (Ok(buf.bytes_init()), buf)
        }
        async fn writev<T: IoVecBuf>(&mut self, buf: T) -> BufResult<usize, T> {
            (Ok(0), buf)
        }
        async fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
        async fn shutdown(&mut self) -> io::Result<()> {
            std::future::pending().await
        }
    }

    #[test]
    fn a_shutdown_the_peer_never_takes_ends_within_the_send_timeout() {
        let ended = shared::runtime::run_on(shared::runtime::DriverKind::Epoll, 64, async {
            let act = Activity {
                last: Cell::new(shared::clock::loop_now()),
                writing: Cell::new(0),
            };
            let moved = Cell::new(0);
            let send = Duration::from_millis(50);
            let (mut r, mut w) = (Ended, NeverShuts);
            let pipe = pipe(&mut r, &mut w, (send, &act), (send, &moved));
            // Far past the send timeout: the pipe must have ended by then on its own.
            monoio::time::timeout(Duration::from_secs(5), pipe).await
        })
        .expect("runtime");
        assert!(
            ended.is_ok(),
            "the direction still waits on its shutdown after 5 s"
        );
    }
}
