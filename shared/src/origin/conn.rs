//! One client connection of the origin: read heads and bodies (any framing, pipelined),
//! answer each request in order as its [`Script`] says.
//!
//! Responses accumulate in one write buffer that is flushed only before the connection
//! reads again, sleeps or closes, so pipelined requests are answered with one write.

use super::script::{Script, ScriptError};
use super::{pattern, websocket, Framing, OriginConfig, OriginWorker};
use crate::http::{encode, parse_request, BodyDecoder, BodyKind, CodecError, Status, Version};
use crate::stream::Stream;
use bytes::{Bytes, BytesMut};
use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use std::io;
use std::rc::Rc;
use std::time::Duration;

/// Header slots per request head (the parser's `max_headers` is capped to this). Above the
/// usual 100: a proxy adds a few of its own to what its client sent.
pub const MAX_HEADERS: usize = 128;
/// Free space kept in the read buffer before each read.
const READ_SPACE: usize = 8 * 1024;
/// Body pieces up to this size are copied into the write buffer; larger ones are written
/// straight from the static pattern.
const INLINE_BODY: usize = 16 * 1024;
/// Flush the write buffer once it holds this much.
const FLUSH_AT: usize = 64 * 1024;

/// The default response for a plain GET (HTTP/1.1, keep-alive), serialized once per worker;
/// `None` when the config's behaviour is more than a plain response.
pub(crate) fn prepare_default(cfg: &OriginConfig) -> Option<Bytes> {
    let s = Script::from_config(cfg);
    let plain = s.framing == Framing::Length
        && s.delay.is_zero()
        && s.abort_after.is_none()
        && !(s.hang || s.drop || s.reset || s.echo || s.close || cfg.capture);
    if !plain {
        return None;
    }
    let mut out = BytesMut::new();
    write_head(
        &mut out,
        cfg,
        &s,
        Framing::Length,
        s.body_size,
        ConnHeader::None,
    );
    if has_body(s.status) {
        out.extend_from_slice(&pattern::expected_body(s.body_size));
    }
    Some(out.freeze())
}

/// Which `Connection` header a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnHeader {
    None,
    KeepAlive,
    Close,
}

/// 1xx, 204 and 304 responses have no body and no framing headers (RFC 9112 6.3).
fn has_body(status: u16) -> bool {
    !crate::http::framing::status_has_no_body(status)
}

/// The script's interim responses (a 103 with a `Link` field), before its head.
fn write_interims(out: &mut BytesMut, statuses: &[u16]) {
    for &status in statuses {
        encode::write_status_line(out, Version::Http11, status, encode::reason_phrase(status));
        if status == 103 {
            encode::write_header(out, b"Link", b"</hint.css>; rel=preload");
        }
        out.extend_from_slice(b"\r\n");
    }
}

fn write_head(
    out: &mut BytesMut,
    cfg: &OriginConfig,
    s: &Script,
    framing: Framing,
    body_len: usize,
    conn: ConnHeader,
) {
    encode::write_status_line(
        out,
        Version::Http11,
        s.status,
        encode::reason_phrase(s.status),
    );
    for (n, v) in cfg.headers.iter().chain(&s.extra_headers) {
        encode::write_header(out, n.as_bytes(), v.as_bytes());
    }
    if has_body(s.status) {
        match framing {
            Framing::Length => {
                encode::write_header(out, b"Content-Length", body_len.to_string().as_bytes())
            }
            Framing::Chunked { .. } => encode::write_header(out, b"Transfer-Encoding", b"chunked"),
            Framing::Close => {}
        }
    }
    match conn {
        ConnHeader::None => {}
        ConnHeader::KeepAlive => encode::write_header(out, b"Connection", b"keep-alive"),
        ConnHeader::Close => encode::write_header(out, b"Connection", b"close"),
    }
    encode::end_head(out);
}

/// What the head parser found.
enum Parsed {
    Partial,
    Bad(CodecError),
    Request(Request),
}

/// The parts of a request head the response needs, copied out of the read buffer.
struct Request {
    head_len: usize,
    body: BodyKind,
    version: Version,
    keep_alive: bool,
    is_head: bool,
    expect_continue: bool,
    websocket: bool,
    websocket_key: Option<Vec<u8>>,
    script: Result<Script, ScriptError>,
    /// If-None-Match and If-Modified-Since of a GET or HEAD (copied only when present).
    conditional: Option<Box<Conditional>>,
}

/// A conditional GET's fields, answered 304 when they match the response's validators.
struct Conditional {
    if_none_match: Option<Vec<u8>>,
    if_modified_since: Option<Vec<u8>>,
}

impl Conditional {
    fn of(method: &str, headers: &[httparse::Header<'_>]) -> Option<Box<Conditional>> {
        if method != "GET" && method != "HEAD" {
            return None;
        }
        let field = |name: &str| {
            headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| h.value.trim_ascii().to_vec())
        };
        let c = Conditional {
            if_none_match: field("if-none-match"),
            if_modified_since: field("if-modified-since"),
        };
        (c.if_none_match.is_some() || c.if_modified_since.is_some()).then(|| Box::new(c))
    }

    /// Whether a 200 with header fields `fields` is answered 304 instead (RFC 9110 13.2.2:
    /// If-None-Match with the weak comparison, or `*`; without it, If-Modified-Since equal
    /// to Last-Modified, as nginx's default `if_modified_since exact`).
    fn not_modified<'a>(&self, mut fields: impl Iterator<Item = &'a (String, String)>) -> bool {
        let (mut etag, mut lm) = (None, None);
        for (n, v) in &mut fields {
            if n.eq_ignore_ascii_case("etag") {
                etag = Some(v.trim().as_bytes());
            } else if n.eq_ignore_ascii_case("last-modified") {
                lm = Some(v.trim().as_bytes());
            }
        }
        let weak = |t: &[u8]| {
            let t = t.trim_ascii();
            t.strip_prefix(b"W/").unwrap_or(t).to_vec()
        };
        match (&self.if_none_match, &self.if_modified_since) {
            (Some(inm), _) => etag.is_some_and(|e| {
                inm.as_slice() == b"*" || inm.split(|&b| b == b',').any(|t| weak(t) == weak(e))
            }),
            (None, Some(ims)) => lm == Some(ims.as_slice()),
            (None, None) => false,
        }
    }
}

/// How reading a request body ended.
enum BodyEnd {
    Done,
    /// The client closed before the body was complete.
    Eof,
    Bad(CodecError),
}

/// Where body bytes come from.
enum Source {
    Pattern,
    Echo(Vec<u8>),
}

pub(crate) struct Conn {
    stream: Stream,
    w: Rc<OriginWorker>,
    inbuf: Vec<u8>,
    /// Start of the unconsumed input in `inbuf`.
    pos: usize,
    out: BytesMut,
}

impl Conn {
    pub(crate) fn new(stream: Stream, w: Rc<OriginWorker>) -> Conn {
        Conn {
            stream,
            w,
            inbuf: Vec::with_capacity(READ_SPACE),
            pos: 0,
            out: BytesMut::with_capacity(READ_SPACE),
        }
    }

    /// Serve until the client closes, an error, or a scripted close. I/O errors just end
    /// the connection: the origin has nobody to report them to.
    pub(crate) async fn run(mut self) {
        let _ = self.serve().await;
    }

    async fn serve(&mut self) -> io::Result<()> {
        loop {
            match self.parse() {
                Parsed::Partial => {
                    self.flush().await?;
                    if self.fill().await? == 0 {
                        if self.pos < self.inbuf.len() {
                            self.capture(self.inbuf[self.pos..].to_vec());
                        }
                        return Ok(());
                    }
                }
                Parsed::Bad(e) => {
                    self.capture(self.inbuf[self.pos..].to_vec());
                    encode::write_simple_response(&mut self.out, Version::Http11, e.status(), true);
                    return self.flush().await;
                }
                Parsed::Request(req) => {
                    if !self.handle(req).await? {
                        return self.flush().await;
                    }
                }
            }
        }
    }

    fn parse(&self) -> Parsed {
        let buf = &self.inbuf[self.pos..];
        if buf.is_empty() {
            return Parsed::Partial;
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let head = match parse_request(buf, &mut headers, &self.w.cfg.limits) {
            Ok(Status::Complete(h)) => h,
            Ok(Status::Partial) => return Parsed::Partial,
            Err(e) => return Parsed::Bad(e),
        };
        let websocket = head.is_websocket_upgrade();
        let websocket_key = websocket
            .then(|| {
                head.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("sec-websocket-key"))
                    .map(|h| h.value.trim_ascii().to_vec())
            })
            .flatten();
        Parsed::Request(Request {
            head_len: head.head_len,
            body: head.body,
            version: head.version,
            keep_alive: head.keep_alive,
            is_head: head.method == "HEAD",
            expect_continue: head.expect_continue,
            websocket,
            websocket_key,
            script: Script::resolve(&self.w.cfg, head.target),
            conditional: Conditional::of(head.method, head.headers),
        })
    }

    /// One request, head parsed. `Ok(false)`: close the connection (after flushing).
    async fn handle(&mut self, req: Request) -> io::Result<bool> {
        let w = self.w.clone();
        w.stats.requests.incr();
        if let Some(p) = &w.pacer {
            // Wait for this request's slot; what is buffered for earlier ones goes out first.
            let now = std::time::Instant::now();
            let at = p.borrow_mut().reserve(now);
            if at > now {
                self.flush().await?;
                monoio::time::sleep(at - now).await;
            }
        }
        let info = req_info(&req);
        let wants_raw = w.cfg.capture || matches!(&req.script, Ok(s) if s.echo);
        let mut raw = wants_raw.then(|| self.inbuf[self.pos..self.pos + req.head_len].to_vec());
        self.pos += req.head_len;

        let mut script = match req.script {
            Ok(s) => s,
            Err(e) => {
                self.capture_opt(raw);
                self.write_text(400, &e.to_string());
                return Ok(false);
            }
        };
        // A WebSocket upgrade gets its 101, unless the query scripts another answer (to test
        // a refused upgrade).
        if req.websocket && (script.is_default || script.status == 101) {
            self.capture_opt(raw);
            self.websocket(req.websocket_key).await?;
            return Ok(false);
        }
        if let Some(c) = &req.conditional {
            if script.status == 200
                && c.not_modified(w.cfg.headers.iter().chain(&script.extra_headers))
            {
                script.status = 304;
                script.is_default = false;
            }
        }
        let plain = script.is_default
            && req.body == BodyKind::Empty
            && !req.is_head
            && req.version == Version::Http11
            && req.keep_alive;
        if let (true, Some(p)) = (plain, &w.prepared) {
            w.stats.complete.incr();
            if p.len() <= INLINE_BODY {
                self.out.extend_from_slice(p);
            } else {
                self.flush().await?;
                let (res, _) = self.stream.write_all(p.clone()).await;
                res?;
            }
            return Ok(true);
        }

        if req.expect_continue && req.body != BodyKind::Empty && self.pos == self.inbuf.len() {
            self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            self.flush().await?;
        }
        match self.read_body(req.body, raw.as_mut()).await? {
            BodyEnd::Done => {}
            BodyEnd::Eof => {
                self.capture_opt(raw);
                return Ok(false);
            }
            BodyEnd::Bad(e) => {
                self.capture_opt(raw);
                encode::write_simple_response(&mut self.out, Version::Http11, e.status(), true);
                return Ok(false);
            }
        }
        w.stats.complete.incr();
        let source = match raw {
            Some(r) if script.echo => {
                if w.cfg.capture {
                    self.capture(r.clone());
                }
                Source::Echo(r)
            }
            r => {
                self.capture_opt(r);
                Source::Pattern
            }
        };

        if script.hang {
            self.flush().await?;
            self.hang().await;
            return Ok(false);
        }
        if script.drop || (script.reset && script.abort_after.is_none()) {
            self.flush().await?;
            if script.reset {
                self.set_reset();
            }
            return Ok(false);
        }
        write_interims(&mut self.out, &script.interim);
        if !script.delay.is_zero() {
            self.flush().await?;
            monoio::time::sleep(script.delay).await;
        }
        self.respond(&info, &script, source).await
    }

    /// Write the scripted response. `Ok(false)`: close afterwards.
    async fn respond(&mut self, req: &ReqInfo, s: &Script, source: Source) -> io::Result<bool> {
        let mut framing = s.framing;
        if req.version == Version::Http10 && matches!(framing, Framing::Chunked { .. }) {
            framing = Framing::Close; // HTTP/1.0 has no chunked coding
        }
        let body = has_body(s.status);
        let body_len = match &source {
            Source::Echo(r) => r.len(),
            Source::Pattern => s.body_size,
        };
        let keep = req.keep_alive && !s.close && !(body && framing == Framing::Close);
        let conn = match (keep, req.version) {
            (false, _) => ConnHeader::Close,
            (true, Version::Http10) => ConnHeader::KeepAlive,
            (true, Version::Http11) => ConnHeader::None,
        };
        write_head(&mut self.out, &self.w.cfg, s, framing, body_len, conn);
        if body && !req.is_head {
            let limit = s.abort_after.map_or(body_len, |a| a.min(body_len));
            match framing {
                Framing::Length | Framing::Close => self.emit(&source, 0, limit).await?,
                Framing::Chunked { chunk_size } => {
                    let size = chunk_size.max(1);
                    let mut off = 0;
                    while off < body_len && off < limit {
                        if off > 0 && !s.chunk_delay.is_zero() {
                            self.flush().await?;
                            monoio::time::sleep(s.chunk_delay).await;
                        }
                        let n = size.min(body_len - off);
                        encode::write_chunk_header(&mut self.out, n);
                        let m = n.min(limit - off);
                        self.emit(&source, off, m).await?;
                        if m < n {
                            break; // cut inside this chunk
                        }
                        self.out.extend_from_slice(encode::CHUNK_END);
                        off += n;
                    }
                    if s.abort_after.is_none() {
                        self.out.extend_from_slice(encode::LAST_CHUNK);
                    }
                }
            }
        }
        if s.abort_after.is_some() {
            self.flush().await?;
            if s.reset {
                self.set_reset();
            }
            return Ok(false);
        }
        Ok(keep)
    }

    /// Body bytes `off..off + n` of `source`.
    async fn emit(&mut self, source: &Source, off: usize, n: usize) -> io::Result<()> {
        match source {
            Source::Echo(r) => self.out.extend_from_slice(&r[off..off + n]),
            Source::Pattern if n <= INLINE_BODY => {
                self.out.extend_from_slice(pattern::piece(off, n))
            }
            Source::Pattern => {
                self.flush().await?;
                let mut done = 0;
                while done < n {
                    let piece = pattern::piece(off + done, n - done);
                    let (res, _) = self.stream.write_all(piece).await;
                    res?;
                    done += piece.len();
                }
            }
        }
        if self.out.len() >= FLUSH_AT {
            self.flush().await?;
        }
        Ok(())
    }

    /// Read the request body to its end, counting payload bytes and keeping the raw bytes
    /// in `raw` when asked.
    async fn read_body(
        &mut self,
        kind: BodyKind,
        mut raw: Option<&mut Vec<u8>>,
    ) -> io::Result<BodyEnd> {
        if !matches!(kind, BodyKind::Length(n) if n > 0) && kind != BodyKind::Chunked {
            return Ok(BodyEnd::Done);
        }
        let mut dec = BodyDecoder::new(kind, &self.w.cfg.limits);
        loop {
            while self.pos < self.inbuf.len() {
                let input = &self.inbuf[self.pos..];
                let d = match dec.decode(input) {
                    Ok(d) => d,
                    Err(e) => return Ok(BodyEnd::Bad(e)),
                };
                self.w.stats.body_bytes.add(d.data.len() as u64);
                if let Some(r) = raw.as_deref_mut() {
                    r.extend_from_slice(&input[..d.consumed]);
                }
                self.pos += d.consumed;
                if d.done {
                    return Ok(BodyEnd::Done);
                }
                if d.consumed == 0 {
                    break;
                }
            }
            if self.fill().await? == 0 {
                return Ok(match dec.finish() {
                    Ok(()) => BodyEnd::Done,
                    Err(_) => BodyEnd::Eof,
                });
            }
        }
    }

    /// Never answer: swallow input until the client closes (the caller's select ends this
    /// at shutdown).
    async fn hang(&mut self) {
        loop {
            self.inbuf.clear();
            self.pos = 0;
            match self.fill().await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }

    /// 101, then echo every byte back until either side closes.
    async fn websocket(&mut self, key: Option<Vec<u8>>) -> io::Result<()> {
        let Some(key) = key else {
            self.write_text(400, "WebSocket upgrade without Sec-WebSocket-Key");
            return Ok(());
        };
        self.out.extend_from_slice(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n",
        );
        encode::write_header(
            &mut self.out,
            b"Sec-WebSocket-Accept",
            websocket::accept_key(&key).as_bytes(),
        );
        encode::end_head(&mut self.out);
        self.out.extend_from_slice(&self.inbuf[self.pos..]);
        loop {
            self.flush().await?;
            self.inbuf.clear();
            self.pos = 0;
            if self.fill().await? == 0 {
                return Ok(());
            }
            self.out.extend_from_slice(&self.inbuf);
        }
    }

    /// A generated text response that closes the connection.
    fn write_text(&mut self, status: u16, msg: &str) {
        let body = format!("{msg}\n");
        encode::write_status_line(
            &mut self.out,
            Version::Http11,
            status,
            encode::reason_phrase(status),
        );
        encode::write_header(&mut self.out, b"Content-Type", b"text/plain");
        encode::write_header(
            &mut self.out,
            b"Content-Length",
            body.len().to_string().as_bytes(),
        );
        encode::write_header(&mut self.out, b"Connection", b"close");
        encode::end_head(&mut self.out);
        self.out.extend_from_slice(body.as_bytes());
    }

    fn capture(&self, raw: Vec<u8>) {
        if self.w.cfg.capture {
            let mut c = self
                .w
                .stats
                .captured
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            c.push(raw);
        }
    }

    fn capture_opt(&self, raw: Option<Vec<u8>>) {
        if let Some(r) = raw {
            self.capture(r);
        }
    }

    /// Make the coming close send RST (SO_LINGER 0).
    fn set_reset(&self) {
        use std::os::fd::{AsRawFd, BorrowedFd};
        // SAFETY: the fd is owned by `self.stream`, which outlives this borrow.
        let fd = unsafe { BorrowedFd::borrow_raw(self.stream.as_raw_fd()) };
        let _ = socket2::SockRef::from(&fd).set_linger(Some(Duration::ZERO));
    }

    async fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.out);
        let (res, mut buf) = self.stream.write_all(buf).await;
        buf.clear();
        self.out = buf;
        res.map(drop)
    }

    /// Read more input after what is unconsumed (compacting first). `Ok(0)`: end of stream.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.pos == self.inbuf.len() {
            self.inbuf.clear();
        } else if self.pos > 0 {
            self.inbuf.copy_within(self.pos.., 0);
            self.inbuf.truncate(self.inbuf.len() - self.pos);
        }
        self.pos = 0;
        if self.inbuf.capacity() - self.inbuf.len() < READ_SPACE / 2 {
            self.inbuf.reserve(READ_SPACE);
        }
        let buf = std::mem::take(&mut self.inbuf);
        let (len, cap) = (buf.len(), buf.capacity());
        let (res, slice) = self.stream.read(buf.slice_mut(len..cap)).await;
        self.inbuf = slice.into_inner();
        match res {
            // A TLS client's close without close_notify: for the origin, an end like any
            // other (request bodies are never close-delimited).
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
            r => r,
        }
    }
}

/// The request facts `respond` needs (the script is passed beside it).
struct ReqInfo {
    version: Version,
    keep_alive: bool,
    is_head: bool,
}

fn req_info(r: &Request) -> ReqInfo {
    ReqInfo {
        version: r.version,
        keep_alive: r.keep_alive,
        is_head: r.is_head,
    }
}
