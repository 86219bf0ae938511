//! Request bodies. One up to 64 KiB is read whole before an upstream is chosen
//! (`gather_body`, `gather_chunked`) and goes out with the head; a larger one, or any on a
//! route with `request_buffering = false`, is streamed, sent while the response head is read
//! (nginx's way): an upstream that answers before taking the whole body (a 413, a 401) has
//! its answer relayed.

use super::outcome::{body_failed, no_head, Attempt};
use super::response_head::{read_response_head, Head, HeadFail, HeadRead};
use crate::conn::ClientConn;
use crate::error::ProxyError;
use crate::io::{read_more, IoFail};
use crate::pool::Upstream;
use crate::relay::{self, BodyPace, RelayFail};
use crate::request::RequestInfo;
use crate::worker::ProxyWorker;
use bytes::BytesMut;
use monoio::io::Splitable;
use shared::http::encode::write_header_u64;
use shared::http::{BodyDecoder, BodyKind, CodecError, Limits};
use std::time::Duration;

/// A streamed request's answer.
pub(super) struct Streamed {
    pub(super) up: Upstream,
    pub(super) head: Head,
    /// The head came before the whole body was sent.
    pub(super) early: bool,
}

/// A streamed request body: answer `Expect: 100-continue` if the client waits for it, then
/// send the body while reading the response head.
pub(super) async fn stream_request(
    c: &mut ClientConn,
    w: &ProxyWorker,
    (req, interim, pace): (&RequestInfo, bool, Option<BodyPace>),
    up: Upstream,
    ub: BytesMut,
) -> Result<Streamed, Attempt<'static>> {
    if !answer_expect(c, req).await {
        return Err(Attempt::Abort);
    }
    let reused = up.reused;
    // In an allocation of its own: relaying the body while reading the head holds two
    // futures at once (3 KB), which every client connection's task would otherwise carry.
    let (up, outcome) = Box::pin(stream_body(c, w, up, ub, (req, interim, pace))).await;
    // monoio could not put the connection's halves back together.
    let Some(up) = up else {
        return Err(Attempt::Abort);
    };
    match outcome {
        BodyOutcome::Sent(Ok(head)) => Ok(Streamed {
            up,
            head,
            early: false,
        }),
        BodyOutcome::Sent(Err(f)) => Err(no_head(f, false, reused)),
        BodyOutcome::Early(head) => Ok(Streamed {
            up,
            head,
            early: true,
        }),
        BodyOutcome::Failed(f) => Err(body_failed(f)),
        // Dropping `up` closes the upstream connection: the request is abandoned (499).
        BodyOutcome::ClientGone => Err(Attempt::Abort),
    }
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
    /// The upstream answered before it had the whole body (a 413, a 401...).
    Early(Head),
    Failed(RelayFail),
    /// The body was sent, and the client went away while the response head was awaited.
    ClientGone,
}

/// Stream the request body to the upstream while reading its response head, as nginx does:
/// an upstream that answers early (and then stops reading, or closes) has its answer relayed
/// instead of a 502 or a send timeout. The read waits without a deadline while the body is
/// in flight (a slow upload is bounded by the body and send timeouts) and gets the read
/// timeout once the body is sent. Returns the connection, put back together (`None` only if
/// monoio could not reunite its halves).
///
/// Costs two allocations (this future's, and monoio's split) per streamed body; requests
/// without a body, or whose body came with the head, never get here.
async fn stream_body(
    c: &mut ClientConn,
    w: &ProxyWorker,
    up: Upstream,
    ub: BytesMut,
    (req, interim, pace): (&RequestInfo, bool, Option<BodyPace>),
) -> (Option<Upstream>, BodyOutcome) {
    let Upstream {
        stream,
        requests,
        reused,
        splices,
        nonblocking,
    } = up;
    let g = &c.g;
    // The route's own upstream timeouts, where it has them.
    let t = g.cfg.routes[req.route].timeouts(&g.cfg.timeouts);
    let read_timeout = t.read;
    let (mut ur, mut uw) = stream.into_split();
    let outcome = {
        // `to_client` gets the response head.
        let to = HeadRead {
            req,
            out: &mut c.to_client,
            fields: &mut c.response_fields,
            limits: &g.cfg.limits.codec,
            read_timeout: None,
            at_most: usize::MAX,
            // The client's stream carries the body: interim heads go with the final one.
            client: None,
            interim,
            watch: super::client_watch::Watch::Off,
            send_timeout: g.cfg.timeouts.send,
            edits: g.cfg.routes[req.route].response_edits(),
            // A streamed upload is rare enough not to keep its server's head.
            memo: None,
        };
        let mut head = std::pin::pin!(read_response_head(w, &mut ur, ub, to));
        let bounded = |head| async move {
            match monoio::time::timeout(read_timeout, head).await {
                Ok(r) => r,
                Err(_) => Err(HeadFail::Timeout),
            }
        };
        let first = {
            // `to_upstream` (the request head, already sent) frames chunks. In a block of its
            // own: once the body is sent, the client's stream is free to be watched.
            let relay = std::pin::pin!(relay::request_body(
                (&g.cfg, t),
                &mut c.stream,
                &mut uw,
                &mut c.from_client,
                &mut c.to_upstream,
                (req.body, pace),
            ));
            monoio::select! {
                // The body finishing wins a tie: then the response is not "early".
                biased;
                r = relay => Ok(r),
                h = &mut head => Err(h),
            }
        };
        match first {
            // The whole request is sent: a client that goes away now abandons it (499).
            Ok(Ok(())) => monoio::select! {
                biased;
                h = bounded(head) => BodyOutcome::Sent(h),
                _ = super::client_watch::client_gone(&c.stream) => BodyOutcome::ClientGone,
            },
            // A write failed (the upstream closed or reset): it may have answered first.
            Ok(Err(RelayFail::Upstream(e))) if e != ProxyError::UpstreamTimeout => {
                match bounded(head).await {
                    Ok(head) => BodyOutcome::Early(head),
                    Err(_) => BodyOutcome::Failed(RelayFail::Upstream(e)),
                }
            }
            Ok(Err(f)) => BodyOutcome::Failed(f),
            Err(Ok(head)) => BodyOutcome::Early(head),
            Err(Err(HeadFail::Bad(e))) => BodyOutcome::Failed(RelayFail::Upstream(e)),
            Err(Err(HeadFail::Nothing(_))) => {
                BodyOutcome::Failed(RelayFail::Upstream(ProxyError::UpstreamClosed))
            }
            Err(Err(HeadFail::Timeout)) => {
                BodyOutcome::Failed(RelayFail::Upstream(ProxyError::UpstreamTimeout))
            }
            // Not reached: interim heads go out with the final head on this path.
            Err(Err(HeadFail::Client)) => {
                BodyOutcome::Failed(RelayFail::Client(ProxyError::ClientGone))
            }
        }
    };
    let up = ur.reunite(uw).ok().map(|stream| Upstream {
        stream,
        requests,
        reused,
        splices,
        nonblocking,
    });
    (up, outcome)
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
