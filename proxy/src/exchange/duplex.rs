//! A streamed request body that goes on after its answer's head came.
//!
//! RFC 9112 9.3 and RFC 9110 15 only let a client stop sending a body when the server answers
//! with an error or closes; nginx and HAProxy keep sending otherwise. So an upstream that
//! answers a streamed upload early with a 2xx or 3xx that keeps its connection (a streaming
//! or echo server: `200`, its first bytes, then the rest once it read the body) gets the
//! whole body while its answer is relayed to the client, both at once: an upstream that
//! writes a large answer before it reads on would otherwise fill both directions' buffers
//! and wait for ever. An error, a close, or an HTTP/1.0 answer without keep-alive still
//! ends the body (`refuses`): the client connection closes after the answer.
//!
//! The body's future is started before the head is known (`upload::stream_body`) and is
//! handed on with the answer ([`Upload`]) until `relay_response` runs it beside the answer's
//! relay ([`both`]). It cannot borrow the client's stream (the exchange goes on using the
//! client connection) nor the upstream's (its connection moves with the answer): it reads and
//! writes them through [`Side`]s, pointers to streams that stay put meanwhile.

use crate::config::{Config, Timeouts};
use crate::forward::{ClientFraming, ResponseInfo};
use crate::pool::Upstream;
use crate::relay::{self, BodyPace, RelayFail, Relayed};
use bytes::BytesMut;
use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use monoio::BufResult;
use shared::http::BodyKind;
use shared::stream::Stream;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::rc::Rc;

/// One direction of a stream that another future uses in the other direction at the same
/// time: what monoio's split halves do, over a stream that stays where it is instead of one
/// moved into an `Rc` (the client's stays in its connection, an upstream's in its `Box`).
/// Unlike those halves, no `UnsafeCell` sits between the two: the stream is also reached
/// through the `&mut` borrows the exchange goes on making, which Rust's aliasing rules do
/// not bless (Miri's Stacked Borrows would object) although nothing reads or writes the
/// same state from both at once (one task, and a read and a write touch separate parts).
/// Reaching both streams only through pointers (or an `UnsafeCell`) while the body lives
/// would close that gap.
pub(super) struct Side(NonNull<Stream>);

impl Side {
    /// # Safety
    /// `s` must stay where it is and stay alive until this side and every future made with
    /// it are dropped, and nothing else may use it in this side's direction meanwhile
    /// (`Stream`'s `Split` makes a read and a write at once safe, not two reads).
    pub(super) unsafe fn of(s: &mut Stream) -> Side {
        Side(NonNull::from(s))
    }

    fn stream(&mut self) -> &mut Stream {
        // SAFETY: `Side::of`'s contract.
        unsafe { self.0.as_mut() }
    }
}

impl AsyncReadRent for Side {
    fn read<T: IoBufMut>(&mut self, buf: T) -> impl Future<Output = BufResult<usize, T>> {
        self.stream().read(buf)
    }

    fn readv<T: IoVecBufMut>(&mut self, buf: T) -> impl Future<Output = BufResult<usize, T>> {
        self.stream().readv(buf)
    }
}

impl AsyncWriteRent for Side {
    fn write<T: IoBuf>(&mut self, buf: T) -> impl Future<Output = BufResult<usize, T>> {
        self.stream().write(buf)
    }

    fn writev<T: IoVecBuf>(&mut self, buf: T) -> impl Future<Output = BufResult<usize, T>> {
        self.stream().writev(buf)
    }

    fn flush(&mut self) -> impl Future<Output = std::io::Result<()>> {
        self.stream().flush()
    }

    fn shutdown(&mut self) -> impl Future<Output = std::io::Result<()>> {
        self.stream().shutdown()
    }
}

/// What the rest of a request body came to, with the client connection's buffers it held
/// (what followed the body, a pipelined request, is in `from_client`; `None`: it held none,
/// the body was held whole and stays where it was).
pub(super) struct BodyEnd {
    pub(super) result: Result<(), RelayFail>,
    pub(super) from_client: Option<BytesMut>,
    pub(super) scratch: BytesMut,
}

impl BodyEnd {
    /// Give the client connection its buffers back.
    pub(super) fn restore(self, from_client: &mut BytesMut, scratch: &mut BytesMut) {
        if let Some(b) = self.from_client {
            *from_client = b;
        }
        *scratch = self.scratch;
    }
}

/// A request body on its way to the upstream, movable with the answer it is sent beside.
pub(super) type BodyFuture<'g> = Pin<Box<dyn Future<Output = BodyEnd> + 'g>>;

/// Stream the request body (`from_client` holds what came of it; `scratch` frames chunks)
/// from `client` to `up`, as `relay::request_body` does, in a future that owns all it
/// needs but the two streams.
///
/// # Safety
/// As [`Side::of`], for `client` (read) and `up` (written).
pub(super) unsafe fn send_body<'g>(
    (cfg, t): (&'g Config, &'g Timeouts),
    (client, up): (&mut Stream, &mut Stream),
    ((mut from_client, mut scratch), received): ((BytesMut, BytesMut), Rc<Cell<u64>>),
    (kind, pace): (BodyKind, Option<BodyPace>),
) -> BodyFuture<'g> {
    // SAFETY: the caller's.
    let (mut client, mut up) = unsafe { (Side::of(client), Side::of(up)) };
    Box::pin(async move {
        // Counted as the bytes come: a future dropped unfinished loses none of the count.
        let result = relay::request_body(
            (cfg, t),
            &mut client,
            &mut up,
            (&mut from_client, &received),
            &mut scratch,
            (kind, pace),
        )
        .await;
        BodyEnd {
            result,
            from_client: Some(from_client),
            scratch,
        }
    })
}

/// Write the rest of a request held whole, `buf[at..]` (its first write took `buf[..at]`),
/// to `up` within the upstream send timeout `limit`, in a future that owns the buffer, which
/// comes back as the end's `scratch` (empty after a timeout: the write took it).
///
/// # Safety
/// As [`Side::of`], for `up` (written).
pub(super) unsafe fn send_rest<'g>(
    up: &mut Stream,
    (buf, at): (BytesMut, usize),
    limit: std::time::Duration,
) -> BodyFuture<'g> {
    // SAFETY: the caller's.
    let mut up = unsafe { Side::of(up) };
    Box::pin(async move {
        let len = buf.len();
        let (result, scratch) = match crate::io::write_range(&mut up, buf, at, len, limit).await {
            Ok(b) => (Ok(()), b),
            Err(f) => (Err(relay::upstream_fail(f.fail)), f.buf.unwrap_or_default()),
        };
        BodyEnd {
            result,
            from_client: None,
            scratch,
        }
    })
}

/// An early answer's request body, still streaming to the upstream.
pub(super) struct Upload<'g> {
    // Declared first, dropped first: it points into `up` (and the client's stream).
    pub(super) body: BodyFuture<'g>,
    /// The connection, boxed so that it stays where `body` writes to it.
    pub(super) up: Box<Upstream>,
}

/// Whether an answer that came before the whole request body was sent refuses the rest: an
/// error, or a connection that ends after it (`Connection: close`, HTTP/1.0 without
/// keep-alive, a body delimited by the close), or a switch of protocols, which an upload
/// cannot be carried through. Then the body stops (RFC 9112 9.3: a client may stop sending
/// on an error or a close), otherwise it goes on.
pub(super) fn refuses(resp: &ResponseInfo) -> bool {
    resp.status >= 400 || !resp.upstream_keep_alive || resp.framing == ClientFraming::Tunnel
}

/// Relay the answer (`answer`) while `body` streams, both to their end, at once: an
/// upstream may send all its answer before it reads on. The answer's result, and how the
/// body ended (`None`: the answer failed first, and the body was left). An answer that
/// failed ends the body (nothing to send it for), and so does a body the client failed (its
/// pace, its size, its going away: the upstream waits for the rest). A body that ended
/// well, or whose writes failed on the upstream's side, lets the answer finish (an upstream
/// that answered whole and then closed is still being relayed). A body that failed after a
/// whole answer does not make that answer a failure: the caller closes both connections.
pub(super) async fn both(
    answer: impl Future<Output = Result<Relayed, RelayFail>>,
    body: &mut BodyFuture<'_>,
) -> (Result<Relayed, RelayFail>, Option<BodyEnd>) {
    let mut answer = std::pin::pin!(answer);
    monoio::select! {
        r = &mut answer => match r {
            Ok(relayed) => (Ok(relayed), Some(body.await)),
            Err(e) => (Err(e), None),
        },
        end = &mut *body => match end.result {
            Err(e @ RelayFail::Client(_)) => (Err(e), Some(end)),
            _ => (answer.await, Some(end)),
        },
    }
}
