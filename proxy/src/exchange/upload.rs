//! Request bodies. One up to 64 KiB is read whole before an upstream is chosen
//! (`gather_body`, `gather_chunked`) and goes out with the head; a larger one, or any on a
//! route with `request_buffering = false`, is streamed, sent while the response head is read
//! (nginx's way): an upstream that answers before taking the whole body has its answer
//! relayed, and the rest of the body stops (a 413, a 401, a close) or streams on beside it
//! (a 2xx or 3xx that keeps the connection: `duplex`).

use super::duplex::{self, BodyFuture, Upload};
use super::outcome::{body_failed, no_head, Attempt, Body};
use super::response_head::{read_response_head, Head, HeadFail, HeadRead};
use super::Plan;
use crate::conn::ClientConn;
use crate::error::ProxyError;
use crate::io::{read_more, IoFail};
use crate::pool::Upstream;
use crate::relay::{self, BodyPace, RelayFail};
use crate::request::RequestInfo;
use crate::worker::ProxyWorker;
use bytes::BytesMut;
use monoio::buf::{IoBufMut, IoVecBufMut};
use monoio::io::AsyncReadRent;
use monoio::BufResult;
use shared::http::encode::write_header_u64;
use shared::http::{BodyDecoder, BodyKind, CodecError, Limits};
use shared::stream::Stream;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// A streamed request's answer.
pub(super) struct Streamed<'g> {
    pub(super) head: Head,
    pub(super) body: Body<'g>,
}

/// A streamed request body: answer `Expect: 100-continue` if the client waits for it, then
/// send the body while reading the response head. An answer that comes first either refuses
/// the rest of the body or lets it stream on beside it (`duplex`).
pub(super) async fn stream_request<'g>(
    c: &mut ClientConn,
    w: &ProxyWorker,
    plan: &Plan<'g>,
    up: Upstream,
    ub: BytesMut,
) -> Result<Streamed<'g>, Attempt<'static>> {
    if !answer_expect(c, plan.req).await {
        return Err(Attempt::Abort);
    }
    // In a box: the body's future writes to it where it is while the connection moves on
    // with the answer.
    let mut up = Box::new(up);
    let bufs = (
        std::mem::take(&mut c.from_client),
        std::mem::take(&mut c.to_upstream),
    );
    // SAFETY: the client's stream stays in its connection, which the exchange holds until
    // it ends, and the upstream's in its box; the body's future is dropped before either
    // (below, in `Body::into_upstream`, or first of `Upload`'s fields), and the exchange
    // runs or drops it before it ends. Meanwhile nothing else reads the client's stream
    // (the head read watches it only once the body is sent) nor writes the upstream's.
    let body = unsafe {
        duplex::send_body(
            (&plan.g.cfg, plan.t),
            (&mut c.stream, &mut up.stream),
            (bufs, c.received.clone()),
            (plan.req.body, plan.pace),
        )
    };
    beside_head(c, w, plan, (up, body), ub, Sending::Streamed).await
}

/// The rest of a request held whole (`Plan::inline`) whose first write took only `buf[..at]`
/// (`at` > 0): the upstream stopped reading, and may be answering already (a 413 before the
/// body). Sent as a streamed body is, while the response head is read: an answer that came
/// first is relayed, and one that was there when a write failed too. Only this rare path
/// pays for the box and the body's future; a request taken whole by one write never comes
/// here.
pub(super) async fn send_rest<'g>(
    c: &mut ClientConn,
    w: &ProxyWorker,
    plan: &Plan<'g>,
    up: Upstream,
    ub: BytesMut,
    rest: (BytesMut, usize),
) -> Result<Streamed<'g>, Attempt<'static>> {
    let mut up = Box::new(up);
    // SAFETY: as `stream_request`'s, for the upstream's stream alone (the client's is not
    // read: the body is in `rest`).
    let body = unsafe { duplex::send_rest(&mut up.stream, rest, plan.t.upstream_send) };
    beside_head(c, w, plan, (up, body), ub, Sending::Held).await
}

/// Whose body [`beside_head`] sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// The client's, as it comes: never sent again.
    Streamed,
    /// The rest of a request held whole: part of it reached the server, so it goes again
    /// only where the retry rules let a request that was sent go again.
    Held,
}

/// Run `body` (which writes to `up`) while reading the response head on `up`: the answer,
/// and where the body stands, or what the attempt came to.
async fn beside_head<'g>(
    c: &mut ClientConn,
    w: &ProxyWorker,
    plan: &Plan<'g>,
    (mut up, mut body): (Box<Upstream>, BodyFuture<'g>),
    ub: BytesMut,
    sending: Sending,
) -> Result<Streamed<'g>, Attempt<'static>> {
    let held = sending == Sending::Held;
    // A held request's server took part of it (its first write): a failure now is the
    // server's, not a pooled connection gone stale.
    let reused = up.reused && !held;
    // In an allocation of its own: relaying the body while reading the head holds two
    // futures at once, which every client connection's task would otherwise carry.
    let outcome = Box::pin(stream_body(c, w, plan, &mut up.stream, &mut body, ub)).await;
    let (head, goes_on) = match outcome {
        BodyOutcome::Sent(Ok(head)) => (head, None),
        // All of it went: a held request may go again as one its first write took whole.
        BodyOutcome::Sent(Err(f)) => return Err(no_head(f, held, reused)),
        BodyOutcome::Early(head) => {
            let on = plan.duplex && !duplex::refuses(&head.resp);
            (head, Some(on))
        }
        BodyOutcome::Refused(head) => (head, Some(false)),
        // The write failed and no answer was there; the request is back in `to_upstream`.
        BodyOutcome::WriteFailed(RelayFail::Upstream(error)) if held => {
            return Err(Attempt::Retry {
                error,
                blame: super::outcome::Blame::Server,
                why: crate::config::route_opts::RetryReason::Reset,
                sent: true,
            })
        }
        BodyOutcome::Failed(f) | BodyOutcome::WriteFailed(f) => return Err(body_failed(f)),
        // Dropping `up` closes the upstream connection: the request is abandoned (499).
        BodyOutcome::ClientGone => return Err(Attempt::Abort),
    };
    if goes_on == Some(true) {
        let body = Body::Streams(Upload { body, up });
        return Ok(Streamed { head, body });
    }
    // The body's future goes first: it points into `up`.
    drop(body);
    let body = match goes_on {
        None => Body::Sent(*up),
        Some(_) => Body::Refused(*up),
    };
    Ok(Streamed { head, body })
}

/// `100 Continue` to a client that sent `Expect: 100-continue` and waits for it (no byte of
/// its body came yet). False: the client could not be written to.
async fn answer_expect(c: &mut ClientConn, req: &RequestInfo) -> bool {
    if !req.expect_continue || !c.from_client.is_empty() {
        return true;
    }
    let cont: &'static [u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let r = monoio::time::timeout(c.g.cfg.timeouts.send, async {
        use monoio::io::AsyncWriteRentExt;
        c.stream.write_all(cont).await.0
    });
    if !matches!(r.await, Ok(Ok(_))) {
        return false;
    }
    c.rec.wrote(cont);
    true
}

/// Read the rest of a request body of `n` bytes (`Content-Length`; chunked: [`gather_chunked`]) into `from_client`, whose
/// head was consumed, before any upstream is chosen for it: a slow upload then holds no
/// upstream connection and no room under `max_conns` while it trickles, and the body goes out
/// with the head in one write (and again on a retry). nginx reads every body before it
/// connects (`proxy_request_buffering`), HAProxy what fits its buffer (`option
/// http-buffer-request`); the caller does this for bodies up to the relay buffer's size,
/// which a streamed body would take anyway. Paced as a streamed body is: the body timeout,
/// then `body_min_rate`. `Err(None)`: the client went away.
pub(super) async fn gather_body(
    c: &mut ClientConn,
    req: &RequestInfo,
    n: usize,
    t: &crate::config::Timeouts,
) -> Result<(), Option<ProxyError>> {
    let whole = |buf: &[u8]| {
        Ok(if buf.len() >= n {
            Held::Whole
        } else {
            Held::More
        })
    };
    gather(c, req, (t, n), whole).await.map(|_| ())
}

/// What reading a chunked body before the pick came to.
pub(super) enum ChunkedBody {
    /// Joined at the front of `from_client`: its length.
    Joined(usize),
    /// It streams, from its first byte, with the pace its reading kept so far (if it was
    /// read: the body timeout and `body_min_rate` go on from there, not from zero).
    Streams(Option<BodyPace>),
}

/// The upstream head's last line for a chunked request body (`request::write_upstream_head`
/// writes the framing field last).
const CHUNKED_FIELD: &[u8] = b"Transfer-Encoding: chunked\r\n";

/// [`gather_body`] for a chunked request body: read while it fits in `max` bytes (framing
/// included); one that ends within them is joined into a plain body at the front of
/// `from_client` (its trailer dropped, as nginx drops a buffered body's) and the upstream
/// head (`to_upstream`) gets its `Content-Length` instead of `Transfer-Encoding`. One that
/// does not end within `max` streams as it came (nothing consumed). Over `max_body` it is
/// refused (413) before any upstream sees it.
pub(super) async fn gather_chunked(
    c: &mut ClientConn,
    req: &RequestInfo,
    max: usize,
    t: &crate::config::Timeouts,
) -> Result<ChunkedBody, Option<ProxyError>> {
    if !c.to_upstream.ends_with(CHUNKED_FIELD) {
        return Ok(ChunkedBody::Streams(None));
    }
    let g = c.g.clone();
    let limits = &g.cfg.limits;
    let mut dec = BodyDecoder::new(BodyKind::Chunked, &limits.codec);
    // How far the chunks were decoded, and the payload found in them.
    let (mut scanned, mut total) = (0usize, 0u64);
    let ends = |buf: &[u8]| {
        while scanned < buf.len() {
            let d = dec.decode(&buf[scanned..]).map_err(ProxyError::Request)?;
            scanned += d.consumed;
            total += d.data.len() as u64;
            if limits.max_body.is_some_and(|m| total > m) {
                return Err(ProxyError::BodyTooLarge);
            }
            if d.done {
                // Held only when it ended within `max` (a larger one that came in one read
                // streams, as a larger Content-Length body does).
                return Ok(if scanned <= max {
                    Held::Whole
                } else {
                    Held::TooLarge
                });
            }
            if d.consumed == 0 {
                break;
            }
        }
        Ok(if buf.len() >= max {
            Held::TooLarge
        } else {
            Held::More
        })
    };
    if let Gathered::Streams(pace) = gather(c, req, (t, max), ends).await? {
        return Ok(ChunkedBody::Streams(pace));
    }
    let len = join_chunks(&mut c.from_client, scanned, &limits.codec)
        .map_err(|e| Some(ProxyError::Request(e)))?;
    let head = c.to_upstream.len() - CHUNKED_FIELD.len();
    c.to_upstream.truncate(head);
    write_header_u64(&mut c.to_upstream, b"Content-Length", len as u64);
    Ok(ChunkedBody::Joined(len))
}

/// The payload of the complete chunked body in `buf[..raw]`, moved to the front of `buf`
/// (the bytes after the body follow it): its length.
fn join_chunks(buf: &mut BytesMut, raw: usize, codec: &Limits) -> Result<usize, CodecError> {
    let mut dec = BodyDecoder::new(BodyKind::Chunked, codec);
    let (mut at, mut joined) = (0, 0);
    loop {
        let (consumed, a, b, done) = relay::decode_at(&mut dec, &buf[..raw], at)?;
        buf.copy_within(a..b, joined);
        joined += b - a;
        at += consumed;
        if done {
            break;
        }
        if consumed == 0 {
            // Not reached: the same bytes decoded to their end a moment ago.
            return Err(CodecError::UnexpectedEof);
        }
    }
    let rest = buf.len() - raw;
    buf.copy_within(raw.., joined);
    buf.truncate(joined + rest);
    Ok(joined)
}

/// What a request body read so far amounts to.
enum Held {
    Whole,
    More,
    /// Past what is held before an upstream is chosen: it streams.
    TooLarge,
}

/// What [`gather`] came to.
enum Gathered {
    Whole,
    /// Too large to hold: it streams, with the pace kept so far (`None`: nothing was read).
    Streams(Option<BodyPace>),
}

/// Read the client's body into `from_client` until `held` says it is whole or too large to
/// hold, at most `max` bytes buffered: `100 Continue` first to a client that waits for it,
/// then reads paced as a streamed body's (the body timeout, then `body_min_rate`: 408).
/// `Err(None)`: the client went away.
async fn gather(
    c: &mut ClientConn,
    req: &RequestInfo,
    (t, max): (&crate::config::Timeouts, usize),
    mut held: impl FnMut(&[u8]) -> Result<Held, ProxyError>,
) -> Result<Gathered, Option<ProxyError>> {
    let mut pace = BodyPace::new(t.body, t.body_min_rate);
    // Set once a read was needed (the 100 went out, the pace started).
    let mut reading = false;
    loop {
        match held(&c.from_client)? {
            Held::Whole => return Ok(Gathered::Whole),
            Held::TooLarge => return Ok(Gathered::Streams(reading.then_some(pace))),
            Held::More => {}
        }
        if !reading {
            if !answer_expect(c, req).await {
                return Err(None);
            }
            pace.record(Duration::ZERO, c.from_client.len());
            reading = true;
        }
        let wait = pace.next_wait(t.body);
        if wait.is_zero() {
            return Err(Some(ProxyError::BodyTimeout));
        }
        let buf = std::mem::take(&mut c.from_client);
        let spare = max.saturating_sub(buf.len()).max(1);
        let started = monoio::time::Instant::now();
        match read_more(&mut c.stream, buf, spare, started + wait).await {
            Ok((0, _)) | Err(IoFail::Error(_)) => return Err(None),
            Ok((got, buf)) => {
                pace.record(started.elapsed(), got);
                c.received.set(c.received.get() + got as u64);
                c.from_client = buf;
            }
            Err(IoFail::Timeout) => return Err(Some(ProxyError::BodyTimeout)),
        }
    }
}

/// What streaming a request body led to.
enum BodyOutcome {
    /// The body was sent; then came a response head, or not.
    Sent(Result<Head, HeadFail>),
    /// The upstream answered before it had the whole body, which is still on its way.
    Early(Head),
    /// The body could not all be sent (the upstream closed, or reset), and an answer came.
    Refused(Head),
    Failed(RelayFail),
    /// A write of the body failed (not its timeout) and no answer was there after it: the
    /// body's buffers are back in the client connection.
    WriteFailed(RelayFail),
    /// The body was sent, and the client went away while the response head was awaited.
    ClientGone,
}

/// Stream the request body (`body`, which writes to `up`) while reading the response head
/// on `up`, as nginx does: an upstream that answers early (and then stops reading, or
/// closes) has its answer relayed instead of a 502 or a send timeout. The read waits
/// without a deadline while the body is in flight (a slow upload is bounded by the body and
/// send timeouts); once the body is sent, the read timeout bounds each wait between two
/// reads (`per_read`), as it does on every other path. A body that ended gives the client
/// connection its buffers back.
async fn stream_body(
    c: &mut ClientConn,
    w: &ProxyWorker,
    plan: &Plan<'_>,
    up: &mut Stream,
    body: &mut BodyFuture<'_>,
    ub: BytesMut,
) -> BodyOutcome {
    let g = plan.g;
    let read_timeout = plan.t.read;
    // `to_client` gets the response head.
    let to = HeadRead {
        req: plan.req,
        out: &mut c.to_client,
        fields: &mut c.response_fields,
        limits: &g.cfg.limits.codec,
        read_timeout: None,
        at_most: usize::MAX,
        // The client's stream carries the body: interim heads go with the final one.
        client: None,
        interim: plan.interim,
        watch: super::client_watch::Watch::Off,
        send_timeout: g.cfg.timeouts.send,
        edits: plan.edits,
        // A streamed upload is rare enough not to keep its server's head.
        memo: None,
    };
    let last = Cell::new(shared::clock::loop_now());
    let mut up = Stamped { up, last: &last };
    let mut head = std::pin::pin!(read_response_head(w, &mut up, ub, to));
    let bounded = |head| {
        // The wait for the answer starts when the body is sent, as nginx's read timer.
        last.set(shared::clock::loop_now());
        per_read(head, &last, read_timeout)
    };
    let first = monoio::select! {
        // The body finishing wins a tie: then the response is not "early".
        biased;
        end = &mut *body => Ok(end),
        h = &mut head => Err(h),
    };
    let sent = match first {
        Ok(end) => {
            let result = end.result;
            end.restore(&mut c.from_client, &mut c.to_upstream);
            result
        }
        Err(h) => return head_first(h),
    };
    match sent {
        // The whole request is sent: a client that goes away now abandons it (499).
        Ok(()) => monoio::select! {
            biased;
            h = bounded(head) => BodyOutcome::Sent(h),
            _ = super::client_watch::client_gone(&c.stream) => BodyOutcome::ClientGone,
        },
        // A write failed (the upstream closed or reset): it may have answered first.
        Err(RelayFail::Upstream(e)) if e != ProxyError::UpstreamTimeout => {
            match bounded(head).await {
                Ok(head) => BodyOutcome::Refused(head),
                // Not a byte of an answer: the server closed (or reset) without answering,
                // as when the wait for the answer notices it (`upstream_closed`).
                Err(HeadFail::Nothing(_)) => {
                    BodyOutcome::WriteFailed(RelayFail::Upstream(ProxyError::UpstreamClosed))
                }
                Err(HeadFail::Bad(e)) => BodyOutcome::Failed(RelayFail::Upstream(e)),
                Err(_) => BodyOutcome::WriteFailed(RelayFail::Upstream(e)),
            }
        }
        Err(f) => BodyOutcome::Failed(f),
    }
}

/// The upstream's reads while a streamed body's answer is awaited, each noting when it
/// ended: the head's reads run without a deadline while the body is in flight (it may take
/// longer than the read timeout), and once it is sent the read timeout bounds each wait
/// between two reads (`per_read`), not the whole wait for the head.
struct Stamped<'a> {
    up: &'a mut Stream,
    last: &'a Cell<Instant>,
}

impl AsyncReadRent for Stamped<'_> {
    async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        let r = self.up.read(buf).await;
        self.last.set(shared::clock::loop_now());
        r
    }

    async fn readv<T: IoVecBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        let r = self.up.readv(buf).await;
        self.last.set(shared::clock::loop_now());
        r
    }
}

/// `head`, failing once `read_timeout` passed with no read since `last` (which the head's
/// `Stamped` reads move on).
async fn per_read<F: Future<Output = Result<Head, HeadFail>>>(
    mut head: Pin<&mut F>,
    last: &Cell<Instant>,
    read_timeout: Duration,
) -> Result<Head, HeadFail> {
    loop {
        let from = last.get();
        let until = monoio::time::Instant::from_std(from) + read_timeout;
        monoio::select! {
            biased;
            h = &mut head => return h,
            _ = monoio::time::sleep_until(until) => {}
        }
        if last.get() == from {
            // Interim heads wait for the final one on this path: none went out.
            return Err(HeadFail::Timeout {
                interim_sent: false,
            });
        }
    }
}

/// What a response head (or the failure to read one) that came while the body was still
/// being sent comes to.
fn head_first(h: Result<Head, HeadFail>) -> BodyOutcome {
    match h {
        Ok(head) => BodyOutcome::Early(head),
        Err(HeadFail::Bad(e)) => BodyOutcome::Failed(RelayFail::Upstream(e)),
        Err(HeadFail::Nothing(_)) => {
            BodyOutcome::Failed(RelayFail::Upstream(ProxyError::UpstreamClosed))
        }
        Err(HeadFail::Timeout { .. }) => {
            BodyOutcome::Failed(RelayFail::Upstream(ProxyError::UpstreamTimeout))
        }
        // Not reached: interim heads go out with the final head on this path.
        Err(HeadFail::Client) => BodyOutcome::Failed(RelayFail::Client(ProxyError::ClientGone)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_chunks_moves_the_payload_to_the_front_and_the_rest_after_it() {
        let limits = Limits::default();
        let body = b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-T: t\r\n\r\n";
        let mut buf = BytesMut::from(&body[..]);
        buf.extend_from_slice(b"GET /next HTTP/1.1\r\n\r\n");
        assert_eq!(join_chunks(&mut buf, body.len(), &limits), Ok(11));
        assert_eq!(&buf[..], b"hello worldGET /next HTTP/1.1\r\n\r\n");
    }
}
