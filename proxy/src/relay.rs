//! Bodies, streamed both ways with bounded buffers: a body of any size only ever occupies one
//! relay buffer.
//!
//! Content-Length bodies are written from the buffer they were read into (no copy); chunked
//! bodies are decoded with `BodyDecoder` (which enforces the codec's strictness) and re-framed;
//! close-delimited bodies end at the peer's close. The response head is sent together with the
//! first body bytes in one write when they arrived together, and waits for a short body that
//! has not (`SHORT_REST`); if that body then fails, the head goes out before the close.
//!
//! A body that ends early is never passed off as complete: the caller closes the client
//! connection without writing a Content-Length's missing bytes or chunked's last chunk.

use crate::config::Config;
use crate::error::ProxyError;
use crate::forward::ClientFraming;
use crate::io::{offset_in, read_more, write_all, write_range, IoFail};
use crate::worker::RELAY_BUF;
use bytes::{Buf, BytesMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use shared::http::encode::{write_chunk_header, CHUNK_END, LAST_CHUNK};
use shared::http::{BodyDecoder, BodyKind};
use shared::stream::Stream;
use std::ops::Range;
use std::time::Duration;

/// A cache entry filling from the response being relayed: each body run is copied into it
/// before it goes to the client (the client is never held back by the copy).
pub struct FillSink<'a> {
    pub store: &'a std::cell::RefCell<crate::cache::Store>,
    /// `None` once the fill was dropped (over max_object, no room, invalidated meanwhile).
    pub handle: Option<crate::cache::Handle>,
    /// The client asked HEAD (the fill fetched with GET): it gets the head only.
    pub head_only: bool,
    /// A revalidation after the client was answered from the store: it gets nothing (with
    /// `head_only`, the body only fills the entry).
    pub silent: bool,
}

impl FillSink<'_> {
    fn append(&mut self, data: &[u8]) {
        if let Some(h) = self.handle {
            if self.store.borrow_mut().append(h, data) == crate::cache::Append::Dropped {
                self.handle = None;
            }
        }
    }
}

/// Where a relay failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayFail {
    /// The client side: timed out, went away, or sent a bad or too large body.
    Client(ProxyError),
    /// The upstream side.
    Upstream(ProxyError),
}

pub(crate) fn upstream_fail(f: IoFail) -> RelayFail {
    RelayFail::Upstream(match f {
        IoFail::Timeout => ProxyError::UpstreamTimeout,
        // A TLS upstream's TCP close without close_notify: closed early, as a plain EOF
        // before the body's end is (and a close-delimited body ends unfinished).
        IoFail::Error(std::io::ErrorKind::UnexpectedEof) => ProxyError::UpstreamClosed,
        IoFail::Error(_) => ProxyError::UpstreamIo,
    })
}

/// The longest rest of a Content-Length body that the response head waits for, as nginx's
/// `postpone_output` (1460 bytes) holds a small head back until body bytes join it: the head
/// and the body then leave in one write and one segment, where sending the head alone costs a
/// send and the client's ACK of a second small segment, about one response in ten from an
/// origin whose head and body arrive apart. A longer body's head is not held: it goes out
/// while the body streams.
const SHORT_REST: u64 = 1460;

fn short_rest(dec: &BodyDecoder) -> bool {
    dec.length_remaining().is_some_and(|n| n <= SHORT_REST)
}

/// Where the decoder found payload in the input: `(consumed, data_start, data_end, done)`,
/// as offsets into the whole buffer.
pub(crate) fn decode_at(
    dec: &mut BodyDecoder,
    buf: &[u8],
    pos: usize,
) -> Result<(usize, usize, usize, bool), shared::http::CodecError> {
    let input = &buf[pos..];
    let d = dec.decode(input)?;
    // An empty run carries no position worth trusting: `pos..pos` is always in bounds.
    let a = if d.data.is_empty() {
        pos
    } else {
        pos + offset_in(input, d.data)
    };
    Ok((d.consumed, a, a + d.data.len(), d.done))
}

/// Append `data` as one chunk (none if empty), then the last chunk if `last`.
fn push_chunk(out: &mut BytesMut, data: &[u8], last: bool) {
    if !data.is_empty() {
        write_chunk_header(out, data.len());
        out.extend_from_slice(data);
        out.extend_from_slice(CHUNK_END);
    }
    if last {
        out.extend_from_slice(LAST_CHUNK);
    }
}

/// A request body's minimum rate (Apache's mod_reqtimeout `body=GRACE,MinRate=RATE`): the time
/// spent waiting for the client's bytes may exceed `grace` (the body timeout) by one second per
/// `rate` bytes received, no more. Time spent writing them to the upstream (its backpressure)
/// is not the client's and does not count. Each read keeps its own timeout too. A body is
/// streamed to an upstream connection opened when the head arrived: without this, one byte
/// a little faster than the body timeout would hold that connection indefinitely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyPace {
    grace: Duration,
    /// Bytes per second; 0: no minimum.
    rate: u64,
    waited: Duration,
    received: u64,
}

impl BodyPace {
    pub fn new(grace: Duration, rate: u64) -> BodyPace {
        BodyPace {
            grace,
            rate,
            waited: Duration::ZERO,
            received: 0,
        }
    }

    /// How long the next read may wait for the client: `timeout` (the per-read timeout), or
    /// what is left of the allowance when that is less (zero: the body fell behind the rate).
    pub fn next_wait(&self, timeout: Duration) -> Duration {
        if self.rate == 0 {
            return timeout;
        }
        let nanos = u128::from(self.received) * 1_000_000_000 / u128::from(self.rate);
        let earned = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        let allowed = self.grace.saturating_add(earned);
        allowed.saturating_sub(self.waited).min(timeout)
    }

    /// The client's bytes: `bytes` arrived after a wait of `waited`.
    pub fn record(&mut self, waited: Duration, bytes: usize) {
        self.waited = self.waited.saturating_add(waited);
        self.received = self.received.saturating_add(bytes as u64);
    }
}

/// Stream a request body from the client (`from_client` holds what already arrived) to the
/// upstream. Bytes after the body stay in `from_client` (a pipelined request). `scratch` frames
/// chunks; `received` counts the bytes read from the client. A client that falls behind `[timeouts] body_min_rate` ([`BodyPace`]) or lets one
/// read wait past the body timeout fails with `BodyTimeout` (408).
pub async fn request_body<C: AsyncReadRent, U: AsyncWriteRent>(
    (cfg, t): (&Config, &crate::config::Timeouts),
    client: &mut C,
    up: &mut U,
    (from_client, received): (&mut BytesMut, &std::cell::Cell<u64>),
    scratch: &mut BytesMut,
    (kind, pace): (BodyKind, Option<BodyPace>),
) -> Result<(), RelayFail> {
    let max = cfg.limits.max_body;
    let chunked = kind == BodyKind::Chunked;
    let mut dec = BodyDecoder::new(kind, &cfg.limits.codec);
    let mut total: u64 = 0;
    // The pace of a body partly read before the upstream was chosen goes on; otherwise what
    // came with the head counts, with no wait.
    let mut pace = pace.unwrap_or_else(|| {
        let mut p = BodyPace::new(t.body, t.body_min_rate);
        p.record(Duration::ZERO, from_client.len());
        p
    });
    loop {
        if !from_client.is_empty() {
            let (consumed, a, b, done) = decode_at(&mut dec, from_client, 0)
                .map_err(|e| RelayFail::Client(ProxyError::Request(e)))?;
            total += (b - a) as u64;
            if max.is_some_and(|m| total > m) {
                return Err(RelayFail::Client(ProxyError::BodyTooLarge));
            }
            if chunked {
                scratch.clear();
                push_chunk(scratch, &from_client[a..b], done);
                if !scratch.is_empty() {
                    let buf = std::mem::take(scratch);
                    *scratch = write_all(up, buf, t.upstream_send)
                        .await
                        .map_err(|e| upstream_fail(e.fail))?;
                }
            } else if b > a {
                let buf = std::mem::take(from_client);
                *from_client = write_range(up, buf, a, b, t.upstream_send)
                    .await
                    .map_err(|e| upstream_fail(e.fail))?;
            }
            from_client.advance(consumed);
            if done {
                return Ok(());
            }
            if consumed > 0 {
                continue;
            }
            // The decoder needs more than what is buffered (a split chunk-size line).
        }
        let wait = pace.next_wait(t.body);
        if wait.is_zero() {
            return Err(RelayFail::Client(ProxyError::BodyTimeout));
        }
        let buf = std::mem::take(from_client);
        let started = monoio::time::Instant::now();
        match read_more(client, buf, RELAY_BUF, started + wait).await {
            Ok((0, _)) => return Err(RelayFail::Client(ProxyError::ClientGone)),
            Ok((n, buf)) => {
                pace.record(started.elapsed(), n);
                received.set(received.get() + n as u64);
                *from_client = buf
            }
            Err(IoFail::Timeout) => return Err(RelayFail::Client(ProxyError::BodyTimeout)),
            Err(IoFail::Error(_)) => return Err(RelayFail::Client(ProxyError::ClientGone)),
        }
    }
}

/// What `response_body` leaves behind.
pub struct Relayed {
    /// The relay buffer, for reuse.
    pub buf: BytesMut,
    /// The body ended exactly at the end of what was read: the upstream connection is clean.
    pub clean: bool,
    /// The cache entry the body filled, if it was not dropped on the way.
    pub filled: Option<crate::cache::Handle>,
    /// The body went through a pipe (`splice.rs`), not the buffer.
    pub spliced: bool,
    /// The client went away mid-body while other requests streamed the entry it filled: the
    /// rest of the body went into the entry alone ([`ToClient::client_failed`]).
    pub client_gone: bool,
}

/// What splicing a body needs: the worker's pipes and both sockets' non-blocking marks.
pub struct SpliceWith<'a> {
    pub pipes: &'a crate::splice::Pipes,
    pub client_nonblocking: &'a mut bool,
    pub up_nonblocking: &'a mut bool,
}

/// A response on its way to the client.
pub struct ResponseRelay<'a> {
    pub client: &'a mut Stream,
    pub up: &'a mut Stream,
    /// The client's response head, sent with the first body bytes when they came with it;
    /// then the chunk framing buffer.
    pub head: &'a mut BytesMut,
    /// How the upstream frames the body.
    pub kind: BodyKind,
    /// How the client gets it.
    pub framing: ClientFraming,
    /// A cache entry to fill with the body (cached routes only).
    pub fill: Option<FillSink<'a>>,
    /// What was written to the client is noted here.
    pub rec: &'a mut crate::record::Record,
    /// Where a large body may be spliced (`None`: splicing is off).
    pub splice: Option<SpliceWith<'a>>,
}

/// Send the client's response head and the response body to the client. The body starts at
/// `ubuf[pos..]` (after the upstream's head) and continues on the upstream connection.
///
/// The upstream failing mid-body (a stall past the read timeout, a close, a reset, bad
/// framing) while the head is still held for its short body (`SHORT_REST`) sends the head
/// first: the origin answered, so the client gets its status, and the close that follows
/// shows the body cut short, as with nginx, whose `postpone_output` holds a head the same
/// way. A status of the proxy's own in its place would hide that the origin answered. When
/// that head cannot reach the client either, the failure is still the upstream's.
pub async fn response_body(
    ct: (&Config, &crate::config::Timeouts),
    r: ResponseRelay<'_>,
    ubuf: BytesMut,
    pos: usize,
) -> Result<Relayed, RelayFail> {
    let ResponseRelay {
        client,
        up,
        head,
        kind,
        framing,
        fill,
        rec,
        splice,
    } = r;
    let mut out = ToClient {
        client,
        head,
        head_pending: true,
        gone: false,
        others: false,
        chunked: framing == ClientFraming::Chunked,
        send: ct.1.send,
        fill,
        rec,
    };
    let from = FromUpstream {
        up,
        kind,
        framing,
        splice,
    };
    let relayed = relay_body(ct, &mut out, from, ubuf, pos).await;
    if let Err(RelayFail::Upstream(e)) = relayed {
        // The head's write may fail too (the client went away meanwhile): both ends failed,
        // and the server's failure stays the relay's. It came first and it cut the answer;
        // the client's only kept the head from it, which the record's status shows (nothing
        // reached the client: 499) and its bytes. So the record's fault is the server's,
        // noted before the write can note the client's, and the caller counts and logs it
        // against the server as any body the server cut.
        out.rec.failed(e);
        let _ = out.flush_head().await;
    }
    relayed
}

/// The upstream side of a response relay.
struct FromUpstream<'a> {
    up: &'a mut Stream,
    kind: BodyKind,
    framing: ClientFraming,
    splice: Option<SpliceWith<'a>>,
}

/// [`response_body`]'s relay, through `out`.
async fn relay_body(
    (cfg, t): (&Config, &crate::config::Timeouts),
    out: &mut ToClient<'_>,
    mut r: FromUpstream<'_>,
    mut ubuf: BytesMut,
    mut pos: usize,
) -> Result<Relayed, RelayFail> {
    if r.framing == ClientFraming::Empty {
        out.flush_head().await?;
        let clean = pos == ubuf.len();
        let filled = out.filled();
        return Ok(Relayed {
            buf: ubuf,
            clean,
            filled,
            spliced: false,
            client_gone: out.gone,
        });
    }
    let mut dec = BodyDecoder::new(r.kind, &cfg.limits.codec);
    let buffered = (ubuf.len() - pos) as u64;
    if let (Some(sp), Some(len)) = (&mut r.splice, spliceable(&dec, out, r.up, buffered)) {
        splice_rest(sp, out, r.up, (&ubuf, pos), len, t).await?;
        ubuf.clear();
        return Ok(Relayed {
            buf: ubuf,
            clean: true,
            filled: None,
            spliced: true,
            client_gone: false,
        });
    }
    loop {
        if pos < ubuf.len() {
            let (consumed, a, b, done) = decode_at(&mut dec, &ubuf, pos)
                .map_err(|e| RelayFail::Upstream(ProxyError::BadResponse(e)))?;
            ubuf = out.payload(ubuf, a..b, done).await?;
            pos += consumed;
            if done {
                out.flush_head().await?;
                let clean = pos == ubuf.len();
                let filled = out.filled();
                return Ok(Relayed {
                    buf: ubuf,
                    clean,
                    filled,
                    spliced: false,
                    client_gone: out.gone,
                });
            }
            if consumed > 0 && pos < ubuf.len() {
                continue;
            }
        }
        if out.for_nobody() {
            // A HEAD whose GET is not stored: its head is all the client wants, and nothing
            // needs the rest (nginx finalizes such a request and closes the upstream). The
            // connection, mid-body, is not clean: the caller drops it.
            out.flush_head().await?;
            return Ok(Relayed {
                buf: ubuf,
                clean: false,
                filled: None,
                spliced: false,
                client_gone: out.gone,
            });
        }
        // Need more input. A slow body must not hold the head back; one that already arrived
        // (an origin that sends its head and then its body, as nginx's sendfile does) goes
        // out with it in one write, and so does a short one still on its way.
        if !out.head_pending || !(r.up.arrived() || short_rest(&dec)) {
            out.flush_head().await?;
            // Keep an undecoded tail (a split chunk-size line) at the front.
            ubuf.advance(pos);
            pos = 0;
        }
        // Otherwise the upstream's head stays in front of what comes: the client's head is
        // then written over it, right before the body, for one write without a copy.
        match read_more(r.up, ubuf, RELAY_BUF / 4, shared::clock::deadline(t.read)).await {
            Ok((0, buf)) => {
                dec.finish()
                    .map_err(|_| RelayFail::Upstream(ProxyError::UpstreamClosed))?;
                // A close-delimited body ended: the only kind that may end at EOF.
                if out.chunked && !out.head_only() {
                    out.head.clear();
                    out.head.extend_from_slice(LAST_CHUNK);
                    out.write_head().await?;
                }
                let filled = out.filled();
                return Ok(Relayed {
                    buf,
                    clean: false,
                    filled,
                    spliced: false,
                    client_gone: out.gone,
                });
            }
            Ok((_, buf)) => ubuf = buf,
            Err(f) => return Err(upstream_fail(f)),
        }
    }
}

/// Read a response body whole into the cache fill `fill`, sending it nowhere (a background
/// revalidation: `exchange::cached::background`). The body starts at `ubuf[pos..]`. The
/// buffer back, and whether the body ended exactly at the end of what was read (the upstream
/// connection is clean). `t`: the route's upstream timeouts (`read` between two reads).
pub async fn fill_only(
    (cfg, t): (&Config, &crate::config::Timeouts),
    up: &mut Stream,
    (mut ubuf, mut pos): (BytesMut, usize),
    kind: BodyKind,
    fill: &mut FillSink<'_>,
) -> Result<(BytesMut, bool), ProxyError> {
    let mut dec = BodyDecoder::new(kind, &cfg.limits.codec);
    loop {
        let (consumed, a, b, done) =
            decode_at(&mut dec, &ubuf, pos).map_err(ProxyError::BadResponse)?;
        fill.append(&ubuf[a..b]);
        pos += consumed;
        if done {
            let clean = pos == ubuf.len();
            return Ok((ubuf, clean));
        }
        if consumed > 0 && pos < ubuf.len() {
            continue;
        }
        // Keep an undecoded tail (a split chunk-size line) at the front.
        ubuf.advance(pos);
        pos = 0;
        let until = shared::clock::deadline(t.read);
        match read_more(up, ubuf, RELAY_BUF / 4, until).await {
            Ok((0, buf)) => {
                dec.finish().map_err(|_| ProxyError::UpstreamClosed)?;
                return Ok((buf, false));
            }
            Ok((_, buf)) => ubuf = buf,
            Err(f) => {
                return Err(match upstream_fail(f) {
                    RelayFail::Upstream(e) | RelayFail::Client(e) => e,
                })
            }
        }
    }
}

/// The body bytes to splice when the response is to be spliced: a plain Content-Length body
/// with at least `SPLICE_MIN` bytes beyond the `buffered` ones read with the head, both
/// connections plain TCP, the upstream read one-shot, nothing to fill or re-frame.
fn spliceable(dec: &BodyDecoder, out: &ToClient<'_>, up: &Stream, buffered: u64) -> Option<u64> {
    let len = dec.length_remaining()?.checked_sub(buffered)?;
    let plain = matches!((&*out.client, up), (Stream::Plain(_), Stream::Plain(_)));
    let ok = len >= crate::splice::SPLICE_MIN
        && plain
        && !out.chunked
        && out.fill.is_none()
        && !up.waits_bufferless();
    ok.then_some(len)
}

/// Send the head and the body bytes read with it (`ubuf[pos..]`) with MSG_MORE, then splice
/// the body's last `len` bytes: the client gets them in the same segments. `Ok` once all of it
/// reached the client's socket.
async fn splice_rest(
    sp: &mut SpliceWith<'_>,
    out: &mut ToClient<'_>,
    up: &Stream,
    (ubuf, pos): (&BytesMut, usize),
    len: u64,
    t: &crate::config::Timeouts,
) -> Result<(), RelayFail> {
    use shared::stream::ensure_nonblocking;
    use std::os::fd::AsRawFd;
    let (client, up) = (out.client.tcp(), up.tcp());
    let gone = RelayFail::Client(ProxyError::ClientGone);
    ensure_nonblocking(client.as_raw_fd(), sp.client_nonblocking).map_err(|_| gone)?;
    ensure_nonblocking(up.as_raw_fd(), sp.up_nonblocking)
        .map_err(|_| RelayFail::Upstream(ProxyError::UpstreamIo))?;
    let body = &ubuf[pos..];
    crate::direct::send_more(client, (out.head, body), t.send)
        .await
        .map_err(|_| gone)?;
    out.rec.wrote(out.head);
    out.rec.wrote_body(body.len() as u64);
    out.head_pending = false;
    let mut sent = 0;
    let r = crate::splice::body(sp.pipes, up, client, len, (t.read, t.send), &mut sent).await;
    out.rec.wrote_body(sent);
    use crate::splice::SpliceFail as F;
    r.map_err(|f| match f {
        F::UpstreamClosed => RelayFail::Upstream(ProxyError::UpstreamClosed),
        F::UpstreamIo => RelayFail::Upstream(ProxyError::UpstreamIo),
        F::UpstreamTimeout => RelayFail::Upstream(ProxyError::UpstreamTimeout),
        F::Client => gone,
    })
}

/// The client side of a response relay: the head goes out with the first payload bytes (or
/// alone, when the body is slow or empty), then the payload, re-framed as chunks or not.
struct ToClient<'a> {
    client: &'a mut Stream,
    /// The head until it is sent; then the chunk framing buffer.
    head: &'a mut BytesMut,
    head_pending: bool,
    /// The client went away; the body goes on into the fill alone.
    gone: bool,
    /// Other requests waited on the entry this response fills, at some append (each append
    /// wakes them: at a failed write they may be between two waits).
    others: bool,
    chunked: bool,
    send: Duration,
    fill: Option<FillSink<'a>>,
    rec: &'a mut crate::record::Record,
}

impl<'a> ToClient<'a> {
    fn filled(&self) -> Option<crate::cache::Handle> {
        self.fill.as_ref().and_then(|f| f.handle)
    }

    fn head_only(&self) -> bool {
        self.fill.as_ref().is_some_and(|f| f.head_only)
    }

    /// The rest of the body would be read for nobody: the client takes the head only and no
    /// entry is filling (not storable, or dropped on the way: over max_object, no room).
    fn for_nobody(&self) -> bool {
        self.fill
            .as_ref()
            .is_some_and(|f| f.head_only && f.handle.is_none())
    }

    /// Write all of `head`.
    async fn write_head(&mut self) -> Result<(), RelayFail> {
        if self.gone || self.fill.as_ref().is_some_and(|f| f.silent) {
            self.head.clear();
            self.head_pending = false;
            return Ok(());
        }
        let buf = std::mem::take(self.head);
        match write_all(self.client, buf, self.send).await {
            Ok(buf) => {
                *self.head = buf;
                self.rec.wrote(self.head);
            }
            Err(e) => {
                self.rec.wrote_partly(e.buf.as_deref(), e.written);
                // The head buffer holds nothing the relay still needs.
                self.client_failed(e.fail, true)?;
                *self.head = e.buf.unwrap_or_default();
                self.head.clear();
            }
        }
        self.head_pending = false;
        Ok(())
    }

    /// A write to the client failed (`kept`: the relay still has what it needs of the
    /// buffer). The relay fails, unless the response fills an entry that other requests
    /// stream or wait for: then the body goes on into the entry alone (Varnish's fetch does
    /// not depend on its client either), or they would all be cut off with the client that
    /// happened to start it. A write that timed out took its buffer with it: where others
    /// wait, `payload` writes a copy, never the relay's buffer.
    fn client_failed(&mut self, f: IoFail, kept: bool) -> Result<(), RelayFail> {
        if !(kept && self.others) {
            return Err(client_fail(f));
        }
        self.gone = true;
        self.rec.failed(ProxyError::ClientGone);
        Ok(())
    }

    /// Send the head now if it is still waiting for body bytes.
    async fn flush_head(&mut self) -> Result<(), RelayFail> {
        if self.head_pending {
            self.write_head().await?;
        }
        Ok(())
    }

    /// Send the payload run `ubuf[run]` (`done`: the body's last), with the head if it is
    /// still pending. Returns the buffer.
    async fn payload(
        &mut self,
        mut ubuf: BytesMut,
        run: Range<usize>,
        done: bool,
    ) -> Result<BytesMut, RelayFail> {
        let Range { start: a, end: b } = run;
        if let Some(f) = &mut self.fill {
            self.others |= f.handle.is_some_and(|h| f.store.borrow().waited_on(h));
            f.append(&ubuf[a..b]);
            // Read on for nobody: the client left and the entry was dropped (too large, no
            // room, invalidated).
            if self.gone && f.handle.is_none() {
                return Err(RelayFail::Client(ProxyError::ClientGone));
            }
            if f.head_only || self.gone {
                self.flush_head().await?;
                return Ok(ubuf);
            }
        }
        if self.chunked {
            // The head (or nothing, once it is out) then the chunk, in one write.
            if !self.head_pending {
                self.head.clear();
            }
            push_chunk(self.head, &ubuf[a..b], done);
            if b > a || done {
                self.write_head().await?;
            }
            return Ok(ubuf);
        }
        if b == a {
            return Ok(ubuf);
        }
        if self.others {
            // A copy through the head buffer: a write that times out takes its buffer with
            // it, and this one holds the undecoded rest of the body (collapsed requests only).
            if !self.head_pending {
                self.head.clear();
            }
            self.head.extend_from_slice(&ubuf[a..b]);
            self.write_head().await?;
            return Ok(ubuf);
        }
        let hl = self.head.len();
        if self.head_pending && hl <= a {
            // Put the head right before the body bytes (over the upstream's head, already
            // parsed) and send both with one write, no body copy.
            ubuf[a - hl..a].copy_from_slice(self.head);
            ubuf = self.write_range(ubuf, a - hl, b).await?;
        } else if self.head_pending {
            self.head.extend_from_slice(&ubuf[a..b]);
            self.write_head().await?;
        } else {
            ubuf = self.write_range(ubuf, a, b).await?;
        }
        self.head_pending = false;
        Ok(ubuf)
    }

    async fn write_range(
        &mut self,
        buf: BytesMut,
        a: usize,
        b: usize,
    ) -> Result<BytesMut, RelayFail> {
        match write_range(self.client, buf, a, b, self.send).await {
            Ok(buf) => {
                self.rec.wrote(&buf[a..b]);
                Ok(buf)
            }
            Err(e) => {
                let sent = e.buf.as_ref().map(|buf| &buf[a..b]);
                self.rec.wrote_partly(sent, e.written);
                self.client_failed(e.fail, e.buf.is_some())?;
                Ok(e.buf.unwrap_or_default())
            }
        }
    }
}

fn client_fail(_: IoFail) -> RelayFail {
    RelayFail::Client(ProxyError::ClientGone)
}

#[cfg(test)]
mod tests {
    use super::BodyPace;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_body_behind_the_minimum_rate_runs_out_of_time_after_the_grace() {
        // 1000 B/s after a 60 s grace, reads timed at 60 s each.
        let per_read = 60_000 * MS;
        let mut p = BodyPace::new(60_000 * MS, 1000);
        assert_eq!(p.next_wait(per_read), per_read, "the grace first");
        // A byte every 59 s: the per-read timeout never fires, the allowance does.
        p.record(59_000 * MS, 1);
        assert_eq!(p.next_wait(per_read), 1001 * MS);
        p.record(1002 * MS, 1);
        assert_eq!(p.next_wait(per_read), Duration::ZERO, "cut");
    }

    #[test]
    fn a_body_at_the_rate_keeps_its_time_and_pauses_within_the_grace_are_free() {
        let per_read = 300 * MS;
        let mut p = BodyPace::new(300 * MS, 1000);
        // 30 KB over 20 s of waiting: 1.5 times the minimum, credit grows.
        for _ in 0..20 {
            p.record(1000 * MS, 1500);
            assert_eq!(p.next_wait(per_read), per_read);
        }
        // Then 40 KB quickly: time in hand beyond any single read's timeout.
        p.record(10 * MS, 40_000);
        assert_eq!(p.next_wait(per_read), per_read);
        // Time spent on the upstream side is never recorded: only waits for the client.
        assert_eq!(p.waited, 20_010 * MS);
    }

    #[test]
    fn rate_zero_is_off_and_nothing_overflows() {
        let mut p = BodyPace::new(Duration::from_secs(60), 0);
        p.record(Duration::from_secs(1 << 40), 0);
        assert_eq!(
            p.next_wait(Duration::from_secs(60)),
            Duration::from_secs(60)
        );
        let mut p = BodyPace::new(Duration::MAX, 1);
        p.record(Duration::ZERO, usize::MAX);
        p.record(Duration::ZERO, usize::MAX);
        assert_eq!(p.next_wait(Duration::from_secs(5)), Duration::from_secs(5));
    }
}
