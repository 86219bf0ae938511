//! The response side, read one way for everyone (the proxy, the loader, the tests).
//!
//! Two layers, no I/O:
//! - [`parse_final_response`]: the head step. It skips interim heads (1xx other than 101,
//!   RFC 9110 15.2) and returns the final head with the decisions made once: its framing,
//!   whether the connection can carry another response (`keep_alive`), and whether a
//!   transfer coding other than chunked was named (`other_coding`). Callers that keep the
//!   head's bytes (the proxy re-writes it) use this on their read buffer.
//! - [`ResponseReader`]: whole responses, one after another on a connection, counted
//!   (status, body length, bytes on the wire) and not kept. The loader runs on it.
//!
//! Invariants: every head is parsed once (an interim head is recognised from its status
//! digits before it is parsed, so the final head is never parsed twice); the interim heads
//! skipped before a final one count against `limits.max_head`, so an upstream flooding
//! `100 Continue` is an error, not an unbounded buffer; incomplete input is never an error.

use super::{
    parse_response, BodyDecoder, BodyKind, CodecError, Limits, RequestMethod, ResponseHead, Status,
};

/// Header fields a response read by [`ResponseReader`] may have (it keeps its storage on
/// the stack): the codec's documented default, `Limits::default().max_headers` (a response
/// with many Set-Cookie lines passes; checked by a test). `limits.max_headers` lowers this,
/// never raises it.
pub const READER_MAX_HEADERS: usize = 100;

/// An interim response: 1xx, except 101 (Switching Protocols), which is final.
pub fn is_interim(status: u16) -> bool {
    (100..200).contains(&status) && status != 101
}

/// Parse the final response head at the start of `buf` (a response to `method`), skipping
/// the interim heads before it. The head's `head_len` includes the skipped interim heads:
/// the body starts there. `Partial` until the final head is complete.
///
/// Errors: anything [`parse_response`] rejects, in an interim head or the final one, and
/// `HeadTooLarge` once the interim heads skipped exceed `limits.max_head`.
pub fn parse_final_response<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
    method: RequestMethod,
    limits: &Limits,
) -> Result<Status<ResponseHead<'h, 'b>>, CodecError> {
    let skipped = match skip_interim(buf, headers, method, limits)? {
        Status::Complete(skipped) => skipped,
        Status::Partial => return Ok(Status::Partial),
    };
    match parse_response(&buf[skipped..], headers, method, limits)? {
        Status::Complete(mut head) => {
            debug_assert!(
                !is_interim(head.status),
                "peek_status disagrees with httparse"
            );
            head.head_len += skipped;
            Ok(Status::Complete(head))
        }
        Status::Partial => Ok(Status::Partial),
    }
}

/// Bytes of interim heads at the start of `buf`, all complete; the final head (complete or
/// not) starts there. Only heads that announce a 1xx status are parsed here.
fn skip_interim<'b>(
    buf: &'b [u8],
    headers: &mut [httparse::Header<'b>],
    method: RequestMethod,
    limits: &Limits,
) -> Result<Status<usize>, CodecError> {
    let mut skipped = 0;
    loop {
        if skipped > limits.max_head {
            return Err(CodecError::HeadTooLarge);
        }
        let rest = &buf[skipped..];
        if !peek_status(rest).is_some_and(is_interim) {
            return Ok(Status::Complete(skipped));
        }
        match parse_response(rest, headers, method, limits)? {
            Status::Complete(head) if is_interim(head.status) => skipped += head.head_len,
            // Not reached (the peek reads the status httparse reads); the final parse decides.
            Status::Complete(_) => return Ok(Status::Complete(skipped)),
            Status::Partial => return Ok(Status::Partial),
        }
    }
}

/// The status a head announces, read from its bytes before parsing: after any leading
/// empty lines, `HTTP/1.x SP` is exactly 9 bytes in every head httparse accepts, and three
/// digits follow. `None` when those bytes have not all arrived or are not digits.
fn peek_status(head: &[u8]) -> Option<u16> {
    let lead = head
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let code = head.get(lead + 9..lead + 12)?;
    code.iter().try_fold(0u16, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u16::from(d - b'0'))
    })
}

/// What reading a response takes from its final head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KnownHead {
    /// Interim heads included.
    head_len: usize,
    status: u16,
    body: BodyKind,
    keep_alive: bool,
}

impl KnownHead {
    fn of(head: &ResponseHead<'_, '_>) -> KnownHead {
        KnownHead {
            head_len: head.head_len,
            status: head.status,
            body: head.body,
            keep_alive: head.keep_alive,
        }
    }
}

/// Heads longer than this are not kept: a memo is for the short heads a server repeats.
const MEMO_MAX_HEAD: usize = 1024;

/// The last head a [`ResponseReader`] parsed, kept with its bytes. A head is a pure function
/// of its bytes, the request's method and the limits, so a response whose head is the same
/// bytes (same method, same limits) reads the same without a parse. A load generator reads
/// one head over and over (a server's `Date` changes once a second): taking it from here
/// costs a comparison of its bytes instead of the parse, about half of what reading a small
/// response costs. One memo serves any number of readers (a connection's, or a worker's).
#[derive(Debug, Default)]
pub struct HeadMemo {
    bytes: Vec<u8>,
    /// The head kept, with the method and limits it was parsed for; `None` while `bytes`
    /// holds nothing worth comparing.
    kept: Option<(RequestMethod, Limits, KnownHead)>,
}

impl HeadMemo {
    /// The kept head, when `buf` starts with its bytes and `method` and `limits` are the ones
    /// it was parsed with.
    fn get(&self, buf: &[u8], method: RequestMethod, limits: &Limits) -> Option<KnownHead> {
        let (m, l, head) = self.kept?;
        (m == method && l == *limits && buf.starts_with(&self.bytes)).then_some(head)
    }

    /// Keep `head`, parsed from `bytes` (its whole head) for `method` within `limits`.
    fn keep(&mut self, bytes: &[u8], method: RequestMethod, limits: &Limits, head: KnownHead) {
        self.bytes.clear();
        self.kept = None;
        if bytes.len() <= MEMO_MAX_HEAD {
            self.bytes.extend_from_slice(bytes);
            self.kept = Some((method, *limits, head));
        }
    }
}

/// A complete response, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The connection can carry another response (see [`ResponseHead::keep_alive`]).
    pub keep_alive: bool,
    /// Payload bytes (chunk framing not included).
    pub body_len: u64,
    /// Bytes it took on the wire: interim heads, head, body, framing.
    pub wire_len: u64,
}

/// What one [`ResponseReader::advance`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadStep {
    /// Consumed this much; more input is needed.
    More(usize),
    /// A response ended after consuming this much; the rest is the next response's.
    Done(usize, Response),
}

/// Where the reader is within one response.
#[derive(Debug, Clone)]
enum ReadState {
    Head,
    Body {
        decoder: BodyDecoder,
        status: u16,
        keep_alive: bool,
        body_len: u64,
    },
}

/// Incremental reader of one response after another on a connection: feed it the
/// unconsumed bytes, drop what it consumed, feed it again after the next read.
#[derive(Debug, Clone)]
pub struct ResponseReader {
    state: ReadState,
    /// Bytes of the current response consumed so far.
    wire: u64,
}

impl Default for ResponseReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseReader {
    pub fn new() -> ResponseReader {
        ResponseReader {
            state: ReadState::Head,
            wire: 0,
        }
    }

    /// Whether a response is partly consumed (its head at least; interim heads are
    /// consumed with the final one).
    pub fn started(&self) -> bool {
        matches!(self.state, ReadState::Body { .. })
    }

    /// Read from `buf` (the unconsumed bytes) the rest of a response to `method`. `on_head`
    /// sees the final head's fields (for the Server header) when the head is parsed; a head
    /// `memo` already holds (the same bytes, method and limits) is taken from it unparsed,
    /// and `on_head` was called when it was parsed.
    pub fn advance(
        &mut self,
        buf: &[u8],
        (method, limits): (RequestMethod, &Limits),
        memo: &mut HeadMemo,
        on_head: impl FnOnce(&[httparse::Header<'_>]),
    ) -> Result<ReadStep, CodecError> {
        let mut used = 0;
        if let ReadState::Head = self.state {
            let head = match memo.get(buf, method, limits) {
                Some(known) => known,
                None => {
                    let mut headers = [httparse::EMPTY_HEADER; READER_MAX_HEADERS];
                    let head = match parse_final_response(buf, &mut headers, method, limits)? {
                        Status::Complete(head) => head,
                        Status::Partial => return Ok(ReadStep::More(0)),
                    };
                    on_head(head.headers);
                    let known = KnownHead::of(&head);
                    memo.keep(&buf[..known.head_len], method, limits, known);
                    known
                }
            };
            used = head.head_len;
            self.wire += head.head_len as u64;
            match head.body {
                // A tunnel's bytes are not a body; `keep_alive` is already false for it.
                BodyKind::Empty | BodyKind::Length(0) | BodyKind::Tunnel => {
                    let done = self.finish(head.status, head.keep_alive, 0);
                    return Ok(ReadStep::Done(used, done));
                }
                kind => {
                    self.state = ReadState::Body {
                        decoder: BodyDecoder::new(kind, limits),
                        status: head.status,
                        keep_alive: head.keep_alive,
                        body_len: 0,
                    }
                }
            }
        }
        self.read_body(buf, used)
    }

    /// Decode body bytes from `buf[used..]` until the body ends or the input runs out.
    fn read_body(&mut self, buf: &[u8], mut used: usize) -> Result<ReadStep, CodecError> {
        while used < buf.len() {
            let ReadState::Body { decoder, .. } = &mut self.state else {
                break;
            };
            let d = decoder.decode(&buf[used..])?;
            used += d.consumed;
            if let Some(done) = self.counted(d.consumed as u64, d.data.len() as u64, d.done) {
                return Ok(ReadStep::Done(used, done));
            }
            if d.consumed == 0 {
                break;
            }
        }
        Ok(ReadStep::More(used))
    }

    /// `wire` bytes of the body went by, `payload` of them the body's own: counted. The
    /// response, when `done` (the body ended).
    fn counted(&mut self, wire: u64, payload: u64, done: bool) -> Option<Response> {
        let ReadState::Body {
            status,
            keep_alive,
            body_len,
            ..
        } = &mut self.state
        else {
            return None;
        };
        self.wire += wire;
        *body_len += payload;
        if !done {
            return None;
        }
        let (s, ka, n) = (*status, *keep_alive, *body_len);
        Some(self.finish(s, ka, n))
    }

    /// Body bytes of the current response that may be dropped unread (see
    /// [`BodyDecoder::skippable`]): 0 unless a Content-Length body is being read.
    pub fn skippable(&self) -> u64 {
        match &self.state {
            ReadState::Body { decoder, .. } => decoder.skippable(),
            ReadState::Head => 0,
        }
    }

    /// `n` body bytes, at most [`ResponseReader::skippable`], went by unread: counted as if
    /// read. The response, when they ended it.
    pub fn skip(&mut self, n: u64) -> Option<Response> {
        let ReadState::Body { decoder, .. } = &mut self.state else {
            return None;
        };
        let n = n.min(decoder.skippable());
        let done = decoder.skip(n);
        self.counted(n, n, done)
    }

    /// The peer closed: a close-delimited body ends here; anything else is truncated.
    pub fn eof(&mut self) -> Result<Response, CodecError> {
        match &mut self.state {
            ReadState::Body {
                decoder,
                status,
                body_len,
                ..
            } => {
                decoder.finish()?;
                let (s, n) = (*status, *body_len);
                Ok(self.finish(s, false, n))
            }
            ReadState::Head => Err(CodecError::UnexpectedEof),
        }
    }

    fn finish(&mut self, status: u16, keep_alive: bool, body_len: u64) -> Response {
        let r = Response {
            status,
            keep_alive,
            body_len,
            wire_len: self.wire,
        };
        self.state = ReadState::Head;
        self.wire = 0;
        r
    }
}
