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

/// Whether `buf` starts with an interim head, judged from the status it announces before
/// it is parsed (leading empty lines skipped, see `peek_status`): the one rule by which
/// [`parse_final_response`] skips interim heads, for callers that pass them on themselves
/// (a proxy), so that no head skipped here goes unseen there. `false` until the status
/// digits have arrived.
pub fn starts_interim(buf: &[u8]) -> bool {
    peek_status(buf).is_some_and(is_interim)
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
        if !starts_interim(rest) {
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

/// The last final head parsed through it, kept with its bytes. A head is a pure function of
/// its bytes, the request's method and the limits, so a response whose head is the same
/// bytes (same method, same limits) reads the same without a parse: a comparison of its
/// bytes instead of httparse and the field scan. A server repeats its head as long as the
/// representation and its `Date` (once a second) stay the same: a load generator reads one
/// head over and over, a proxy relays a hot object's. One memo serves any number of readers
/// (a connection's, a worker's, a server's).
#[derive(Debug, Default)]
pub struct HeadMemo {
    bytes: Vec<u8>,
    /// Each field's name and value, as `[start, end)` pairs in `bytes`.
    fields: Vec<[u16; 4]>,
    /// The head kept, with the method and limits it was parsed for; `None` while `bytes`
    /// holds nothing worth comparing.
    kept: Option<(RequestMethod, Limits, KeptHead)>,
    /// Changes each time a head is parsed through the memo (kept or not): what a caller
    /// derived from a head taken from the memo holds for every head taken while it stays.
    kept_id: u64,
}

/// A final head as a [`HeadMemo`] keeps it: [`ResponseHead`] with its borrowed parts as
/// places in the kept bytes (the fields are the memo's `fields`).
#[derive(Debug, Clone, Copy)]
struct KeptHead {
    known: KnownHead,
    version: super::Version,
    reason: [u16; 2],
    other_coding: bool,
    content_length: Option<u64>,
    connection_names: bool,
    has_date: bool,
}

impl HeadMemo {
    /// The kept head, when `buf` starts with its bytes, `method` and `limits` are the ones it
    /// was parsed with, and a parse into `slots` header slots would have held its fields (a
    /// parse refuses a head with more fields than its slots: so must the memo).
    fn get(
        &self,
        buf: &[u8],
        (method, limits): (RequestMethod, &Limits),
        slots: usize,
    ) -> Option<&KeptHead> {
        let (m, l, head) = self.kept.as_ref()?;
        let same = *m == method && l == limits && self.fields.len() <= slots;
        (same && buf.starts_with(&self.bytes)).then_some(head)
    }

    /// Which head the memo holds: the same number as before means that every head taken
    /// from the memo since was that one (the same bytes, method and limits), so what was
    /// derived from it (a proxy's rewritten head) holds for this one too.
    pub fn kept_id(&self) -> u64 {
        self.kept_id
    }

    /// Bytes of the head kept, if one is.
    #[cfg(test)]
    pub(crate) fn kept_len(&self) -> Option<usize> {
        self.kept.map(|_| self.bytes.len())
    }

    /// Whether a read of `buf` for `method` within `limits` is taken from the memo.
    #[cfg(test)]
    pub(crate) fn answers(&self, buf: &[u8], method: RequestMethod, limits: &Limits) -> bool {
        self.get(buf, (method, limits), usize::MAX).is_some()
    }

    /// Keep `head`, parsed from `buf` (which starts with it) for `method` within `limits`.
    /// A head too long to keep, behind interim heads, or with a part outside `buf`, leaves the
    /// memo empty.
    fn keep(&mut self, buf: &[u8], method: RequestMethod, limits: &Limits, head: &ResponseHead) {
        self.kept_id = self.kept_id.wrapping_add(1);
        self.bytes.clear();
        self.fields.clear();
        self.kept = None;
        // Interim heads are rare (103 Early Hints), and a parse needs slots for their fields
        // too, which the memo does not count: not kept.
        if starts_interim(buf) {
            return;
        }
        let Some(bytes) = buf
            .get(..head.head_len)
            .filter(|b| b.len() <= MEMO_MAX_HEAD)
        else {
            return;
        };
        for h in head.headers {
            match (place(bytes, h.name.as_bytes()), place(bytes, h.value)) {
                (Some([a, b]), Some([c, d])) => self.fields.push([a, b, c, d]),
                _ => return,
            }
        }
        let Some(reason) = place(bytes, head.reason.as_bytes()) else {
            return;
        };
        self.bytes.extend_from_slice(bytes);
        let kept = KeptHead {
            known: KnownHead::of(head),
            version: head.version,
            reason,
            other_coding: head.other_coding,
            content_length: head.content_length,
            connection_names: head.connection_names,
            has_date: head.has_date,
        };
        self.kept = Some((method, *limits, kept));
    }

    /// The kept head (`get`'s), read from `buf` (which starts with its bytes) into
    /// `headers`, which has a slot for each of its fields (`get` saw to it).
    fn head<'h, 'b>(
        &self,
        kept: &KeptHead,
        buf: &'b [u8],
        headers: &'h mut [httparse::Header<'b>],
    ) -> ResponseHead<'h, 'b> {
        // The bytes are the kept ones, whose names and reason were text when kept: this
        // never reads "". One look at a whole head of text costs a fraction of one per part;
        // a head with other bytes in a value (obs-text) takes a look per part.
        let all = std::str::from_utf8(&buf[..kept.known.head_len]).ok();
        let text = |[a, b]: [u16; 2]| {
            let (a, b) = (a as usize, b as usize);
            match all {
                Some(all) => all.get(a..b),
                None => std::str::from_utf8(&buf[a..b]).ok(),
            }
            .unwrap_or("")
        };
        let slots = &mut headers[..self.fields.len()];
        for (slot, &[a, b, c, d]) in slots.iter_mut().zip(&self.fields) {
            slot.name = text([a, b]);
            slot.value = &buf[c as usize..d as usize];
        }
        ResponseHead {
            version: kept.version,
            status: kept.known.status,
            reason: text(kept.reason),
            headers: slots,
            head_len: kept.known.head_len,
            body: kept.known.body,
            keep_alive: kept.known.keep_alive,
            other_coding: kept.other_coding,
            content_length: kept.content_length,
            connection_names: kept.connection_names,
            has_date: kept.has_date,
        }
    }
}

/// Where `part` lies in `bytes`, as `[start, end)`; `None` when it is not inside them (an
/// empty part lies anywhere).
fn place(bytes: &[u8], part: &[u8]) -> Option<[u16; 2]> {
    if part.is_empty() {
        return Some([0, 0]);
    }
    let start = (part.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
    let end = start + part.len();
    (end <= bytes.len()).then_some([start as u16, end as u16])
}

/// [`parse_final_response`], taken from `memo` when `buf` starts with the head it keeps
/// (parsed for the same method within the same limits); a head parsed here is kept in it.
/// The result is the parse's, whichever way it came.
pub fn parse_final_response_memo<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
    (method, limits): (RequestMethod, &Limits),
    memo: &mut HeadMemo,
) -> Result<Status<ResponseHead<'h, 'b>>, CodecError> {
    if let Some(&kept) = memo.get(buf, (method, limits), headers.len()) {
        return Ok(Status::Complete(memo.head(&kept, buf, headers)));
    }
    let head = parse_final_response(buf, headers, method, limits)?;
    if let Status::Complete(h) = &head {
        memo.keep(buf, method, limits, h);
    }
    Ok(head)
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
            let head = match memo.get(buf, (method, limits), READER_MAX_HEADERS) {
                Some(kept) => kept.known,
                None => {
                    let mut headers = [httparse::EMPTY_HEADER; READER_MAX_HEADERS];
                    let head = match parse_final_response(buf, &mut headers, method, limits)? {
                        Status::Complete(head) => head,
                        Status::Partial => return Ok(ReadStep::More(0)),
                    };
                    on_head(head.headers);
                    memo.keep(buf, method, limits, &head);
                    KnownHead::of(&head)
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
