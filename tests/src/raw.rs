//! Raw-socket clients for wire-level tests: send exact bytes, read exactly what comes back,
//! and parse it with a small parser of our own: the oracle that checks the codec, so it is
//! independent of it (its own head, field, length and chunk parsing). The one decision it
//! takes from `shared` is which statuses have no body
//! ([`shared::http::framing::status_has_no_body`], RFC 9112 6.3 step 1): a table, decided once
//! for the whole project, not parsing.
//!
//! Reads retry EINTR: a thread that created an io_uring (a driver probe, a runtime) sees its
//! next blocking socket call with a timeout interrupted once when the ring is torn down.

use shared::http::framing::status_has_no_body;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Default patience for anything that should happen promptly.
pub const WAIT: Duration = Duration::from_secs(5);

/// How reading ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The peer closed (EOF).
    Closed,
    /// The peer reset the connection.
    Reset,
    /// Nothing more arrived before the deadline; the connection is still open.
    TimedOut,
}

/// Everything a connection received until it ended.
#[derive(Debug)]
pub struct Reply {
    pub bytes: Vec<u8>,
    pub end: End,
    /// From the start of the read (after the request was sent).
    pub elapsed: Duration,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// The responses in `bytes`, in order; the last may be incomplete.
    pub fn responses(&self) -> Vec<Response> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < self.bytes.len() {
            match parse_response(&self.bytes[at..], self.end != End::TimedOut) {
                Parse::Complete(r, used) => {
                    at += used;
                    out.push(r);
                }
                Parse::Incomplete(r) => {
                    out.extend(r);
                    break;
                }
                Parse::Invalid(_) => break,
            }
        }
        out
    }
}

/// How a response body was delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Length(usize),
    Chunked,
    /// Neither: the body runs to the end of the connection.
    Close,
}

/// One parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// The status line without its CRLF.
    pub status_line: String,
    pub headers: Vec<(String, String)>,
    pub framing: Framing,
    /// The payload (chunk framing removed).
    pub body: Vec<u8>,
    /// The body arrived in full: its length, its last chunk, or a close after a
    /// close-delimited body.
    pub complete: bool,
}

impl Response {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// Whether the body is the origin's pattern body of `len` bytes.
    pub fn is_pattern(&self, len: usize) -> bool {
        self.body == shared::origin::expected_body(len)
    }

    /// Whether a `Connection` header lists `token`.
    pub fn connection_has(&self, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }
}

/// The first value of the field `name` (case-insensitive) in `headers`.
pub fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// What [`parse_response`] found.
#[derive(Debug)]
pub enum Parse {
    /// A complete response and the bytes it took.
    Complete(Response, usize),
    /// Not all there yet; at EOF, the head if it was complete (`complete == false`).
    Incomplete(Option<Response>),
    /// Not HTTP/1.x as a server should send it.
    Invalid(String),
}

/// Parse the response at the start of `buf`. `eof`: nothing more will arrive (a
/// close-delimited body is then complete). Strict: CRLF line endings, one status line,
/// `name: value` fields, hex chunk sizes. Responses to HEAD are not supported.
pub fn parse_response(buf: &[u8], eof: bool) -> Parse {
    parse_response_to(buf, eof, false)
}

/// [`parse_response`] for the answer to a HEAD request (`head_request`): no body,
/// whatever the framing headers say.
pub fn parse_response_to(buf: &[u8], eof: bool, head_request: bool) -> Parse {
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Parse::Incomplete(None);
    };
    let Ok(head) = std::str::from_utf8(&buf[..head_end]) else {
        return Parse::Invalid("head is not UTF-8".into());
    };
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default().to_string();
    let status = match status_line.split(' ').collect::<Vec<_>>()[..] {
        [v, code, ..] if v.starts_with("HTTP/1.") && code.len() == 3 => code.parse().ok(),
        _ => None,
    };
    let Some(status) = status else {
        return Parse::Invalid(format!("bad status line {status_line:?}"));
    };
    let mut headers = Vec::new();
    for l in lines {
        match l.split_once(':') {
            Some((n, v)) if !n.is_empty() && !n.contains([' ', '\t', '\n', '\r']) => {
                headers.push((n.to_string(), v.trim().to_string()))
            }
            _ => return Parse::Invalid(format!("bad header line {l:?}")),
        }
    }
    let mut resp = Response {
        status,
        status_line,
        headers,
        framing: Framing::Close,
        body: Vec::new(),
        complete: false,
    };
    let body = &buf[head_end + 4..];
    let chunked = resp.header("transfer-encoding").is_some_and(|te| {
        te.rsplit(',')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case("chunked")
    });
    let no_body = head_request || status_has_no_body(status);
    if no_body {
        resp.framing = Framing::Length(0);
    } else if chunked {
        resp.framing = Framing::Chunked;
    } else if let Some(cl) = resp.header("content-length") {
        match cl.parse() {
            Ok(n) => resp.framing = Framing::Length(n),
            Err(_) => return Parse::Invalid(format!("bad Content-Length {cl:?}")),
        }
    }
    let used = match resp.framing {
        Framing::Length(n) if body.len() >= n => {
            resp.body = body[..n].to_vec();
            head_end + 4 + n
        }
        Framing::Length(_) => {
            resp.body = body.to_vec();
            return Parse::Incomplete(eof.then_some(resp));
        }
        Framing::Close if eof => {
            resp.body = body.to_vec();
            buf.len()
        }
        Framing::Close => return Parse::Incomplete(None),
        Framing::Chunked => match dechunk(body, &mut resp.body) {
            Ok(Some(n)) => head_end + 4 + n,
            Ok(None) => return Parse::Incomplete(eof.then_some(resp)),
            Err(e) => return Parse::Invalid(e),
        },
    };
    resp.complete = true;
    Parse::Complete(resp, used)
}

/// Decode a chunked body into `out`. `Ok(Some(n))`: complete in `n` bytes (empty trailers
/// only); `Ok(None)`: incomplete.
fn dechunk(mut b: &[u8], out: &mut Vec<u8>) -> Result<Option<usize>, String> {
    let total = b.len();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&b[..eol]).map_err(|_| "chunk line not UTF-8")?;
        let size = line.split(';').next().unwrap_or("");
        let n = usize::from_str_radix(size, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
        b = &b[eol + 2..];
        if n == 0 {
            return Ok(b.starts_with(b"\r\n").then(|| total - b.len() + 2));
        }
        if b.len() < n + 2 {
            out.extend_from_slice(&b[..n.min(b.len())]);
            return Ok(None);
        }
        if &b[n..n + 2] != b"\r\n" {
            return Err("chunk data not followed by CRLF".into());
        }
        out.extend_from_slice(&b[..n]);
        b = &b[n + 2..];
    }
}

/// A client connection with its unparsed input.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
    /// Set once the connection ended (EOF or reset).
    pub ended: Option<End>,
}

impl Client {
    /// Connect (TCP_NODELAY, 5 s write timeout).
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_nodelay(true).unwrap();
        stream.set_write_timeout(Some(WAIT)).unwrap();
        Client::from_stream(stream)
    }

    /// [`Client::connect`] with a receive buffer of `rcvbuf` bytes (SO_RCVBUF, set before
    /// the connection, so the window it offers stays that small): a longer answer cannot
    /// leave the server's socket until the client reads.
    pub fn connect_small_window(addr: SocketAddr, rcvbuf: usize) -> Client {
        use socket2::{Domain, Socket, Type};
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, None).expect("socket");
        s.set_recv_buffer_size(rcvbuf).expect("SO_RCVBUF");
        s.connect(&addr.into())
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        let stream: TcpStream = s.into();
        stream.set_nodelay(true).unwrap();
        stream.set_write_timeout(Some(WAIT)).unwrap();
        Client::from_stream(stream)
    }

    /// Wrap a connected stream as it is (no socket option changed).
    pub fn from_stream(stream: TcpStream) -> Client {
        Client {
            stream,
            buf: Vec::new(),
            ended: None,
        }
    }

    /// The bytes received and not parsed yet.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// Drop the first `n` buffered bytes (a parser took them).
    pub fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
    }

    /// Take the bytes received and not parsed yet (after a tunnel's 101, for example).
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Read once onto the buffer, within the read timeout the stream has: the count of
    /// new bytes, or how the connection ended ([`read_once`]'s outcomes).
    pub fn fill(&mut self) -> Result<usize, End> {
        if let Some(end) = self.ended {
            return Err(end);
        }
        let read = read_once(&mut self.stream, &mut self.buf);
        if let Err(end @ (End::Closed | End::Reset)) = read {
            self.ended = Some(end);
        }
        read
    }

    /// Write all of `bytes`. Errors are returned, not panics: a peer may close early.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Read once into the buffer, waiting until `deadline`. `false` when the connection
    /// ended or the deadline passed.
    fn read_some(&mut self, deadline: Instant) -> bool {
        if self.ended.is_some() {
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        self.stream.set_read_timeout(Some(left)).unwrap();
        self.fill().is_ok()
    }

    /// The next complete response, waiting up to `wait`. `Err` carries what had arrived
    /// (an incomplete or invalid response, or nothing) and how the connection ended.
    pub fn response(&mut self, wait: Duration) -> Result<Response, Reply> {
        self.response_to(false, wait)
    }

    /// [`Client::response`] for a HEAD request when `head_request`: the head only.
    pub fn response_to(&mut self, head_request: bool, wait: Duration) -> Result<Response, Reply> {
        let start = Instant::now();
        let deadline = start + wait;
        loop {
            let eof = self.ended.is_some();
            match parse_response_to(&self.buf, eof, head_request) {
                Parse::Complete(r, used) => {
                    self.buf.drain(..used);
                    return Ok(r);
                }
                Parse::Invalid(_) => break,
                Parse::Incomplete(_) if eof => break,
                Parse::Incomplete(_) => {}
            }
            if !self.read_some(deadline) && self.ended.is_none() {
                break;
            }
        }
        Err(Reply {
            bytes: std::mem::take(&mut self.buf),
            end: self.ended.unwrap_or(End::TimedOut),
            elapsed: start.elapsed(),
        })
    }

    /// Everything (buffered first) until the connection ends or `wait` passes.
    pub fn until_close(&mut self, wait: Duration) -> Reply {
        let start = Instant::now();
        let deadline = start + wait;
        while self.read_some(deadline) {}
        Reply {
            bytes: std::mem::take(&mut self.buf),
            end: self.ended.unwrap_or(End::TimedOut),
            elapsed: start.elapsed(),
        }
    }
}

/// Read once from `stream` (within its read timeout) onto `into`: the count of bytes
/// (never 0), or how the connection ended. The one place a read outcome is classified:
/// EOF is [`End::Closed`], a reset (or abort, or broken pipe) [`End::Reset`], the read
/// timeout [`End::TimedOut`] (the connection is still open); EINTR is retried (see the
/// module's doc), and any other error fails the test rather than pass for an end.
/// Read from `stream` (an origin's side) until `pending` holds a whole request head, through
/// its empty line: the head, taken off `pending` (what came after it stays). How the stream
/// ended instead, if it did first.
pub fn read_request_head(stream: &mut TcpStream, pending: &mut Vec<u8>) -> Result<Vec<u8>, End> {
    loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(pending.drain(..i + 4).collect());
        }
        read_once(stream, pending)?;
    }
}

pub fn read_once(stream: &mut TcpStream, into: &mut Vec<u8>) -> Result<usize, End> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        return match stream.read(&mut chunk) {
            Ok(0) => Err(End::Closed),
            Ok(n) => {
                into.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e) => match e.kind() {
                ErrorKind::Interrupted => continue,
                ErrorKind::WouldBlock | ErrorKind::TimedOut => Err(End::TimedOut),
                ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe => Err(End::Reset),
                _ => panic!("reading from {:?}: {e}", stream.peer_addr()),
            },
        };
    }
}

/// A reply for messages: how it ended, when, and the bytes as text.
pub fn show(r: &Reply) -> String {
    format!("{:?} after {:?}: {:?}", r.end, r.elapsed, r.text())
}

/// The next response on `c` (within [`WAIT`]), or a panic that shows what arrived and
/// how the read ended.
pub fn response(c: &mut Client, what: &str) -> Response {
    c.response(WAIT)
        .unwrap_or_else(|r| panic!("{what}: no complete response: {}", show(&r)))
}

/// The peer closes `c` (EOF or reset, within [`WAIT`]) with nothing more sent; a read
/// timeout fails.
pub fn assert_closed(c: &mut Client, what: &str) {
    assert_closed_within(c, WAIT, what);
}

/// [`assert_closed`] with the patience `wait`.
pub fn assert_closed_within(c: &mut Client, wait: Duration, what: &str) {
    let r = c.until_close(wait);
    assert!(
        r.end != End::TimedOut && r.bytes.is_empty(),
        "{what}: expected a close, got {}",
        show(&r)
    );
}

/// `c` is still open and silent: the peer neither sent anything nor closed within
/// `wait` (for "this connection is being held", where a close would be the failure).
pub fn assert_open_and_silent(c: &mut Client, wait: Duration, what: &str) {
    let r = c.until_close(wait);
    assert!(
        r.end == End::TimedOut && r.bytes.is_empty(),
        "{what}: expected an open, silent connection, got {}",
        show(&r)
    );
}

/// Connect, send `bytes` (without half-closing), and read until the peer closes or
/// `wait` passes.
pub fn exchange(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Reply {
    let mut c = Client::connect(addr);
    if let Err(e) = c.send(bytes) {
        // The peer may answer and close before taking every byte; nothing else is fine.
        assert!(
            matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
            "sending to {addr}: {e}"
        );
    }
    c.until_close(wait)
}

/// `GET path HTTP/1.1` with a Host header.
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
}

/// `HTTP/1.1 <status> <reason>`, the reason as the codec writes it.
pub fn status_line(status: u16) -> String {
    format!(
        "HTTP/1.1 {status} {}",
        shared::http::encode::reason_phrase(status)
    )
}

/// Assert a generated response's own form: the exact status line, a Content-Length that
/// matches the body, no Transfer-Encoding.
pub fn assert_well_formed(resp: &Response, status: u16) {
    assert_eq!(resp.status_line, status_line(status), "{resp:?}");
    assert!(resp.complete, "{resp:?}");
    match resp.header("content-length") {
        Some(cl) => assert_eq!(cl.parse::<usize>().ok(), Some(resp.body.len()), "{resp:?}"),
        None => panic!("generated response without Content-Length: {resp:?}"),
    }
    assert!(resp.header("transfer-encoding").is_none(), "{resp:?}");
}

/// Assert a response the proxy generated itself: exactly `HTTP/1.1 <status> <reason>`,
/// a Content-Length that matches the body, and, when `must_close`, `Connection: close`
/// followed by the connection actually closing. A response that says `Connection: close`
/// must also be followed by a close.
pub fn assert_generated(reply: &Reply, status: u16, must_close: bool) {
    let ctx = || {
        format!(
            "reply ({:?} after {:?}): {:?}",
            reply.end,
            reply.elapsed,
            reply.text()
        )
    };
    let want = status_line(status);
    let eof = reply.end != End::TimedOut;
    let (resp, used) = match parse_response(&reply.bytes, eof) {
        Parse::Complete(r, used) => (r, used),
        other => panic!(
            "expected a complete {status} response, got {other:?}; {}",
            ctx()
        ),
    };
    assert_eq!(resp.status_line, want, "{}", ctx());
    assert_well_formed(&resp, status);
    assert_eq!(
        used,
        reply.bytes.len(),
        "bytes after the response; {}",
        ctx()
    );
    if must_close {
        assert!(
            resp.connection_has("close"),
            "no `Connection: close`; {}",
            ctx()
        );
    }
    if must_close || resp.connection_has("close") {
        assert!(
            eof,
            "the connection stayed open after `Connection: close`; {}",
            ctx()
        );
    }
}
