//! Request and response heads, parsed with httparse into borrowed views: no allocation per
//! header. The caller owns the header storage (`[httparse::Header; N]`, N >= limits.max_headers).
//!
//! Rules enforced beyond httparse (RFC 9112): bare LF line endings, obs-fold, whitespace before
//! the colon, NUL/bare CR in values, Host presence and uniqueness for HTTP/1.1 requests,
//! absolute-form authority winning over Host, versions other than 1.0/1.1 (505) told apart
//! from the HTTP/2 preface and from garbage, and the framing headers (see `framing`).

use super::{framing::BodyKind, CodecError, Limits, Status, Version};

/// A parsed request head, borrowing the read buffer.
#[derive(Debug)]
pub struct RequestHead<'h, 'b> {
    pub method: &'b str,
    /// The request target as sent (origin-form, absolute-form, authority-form or `*`).
    pub target: &'b str,
    pub version: Version,
    pub headers: &'h [httparse::Header<'b>],
    /// Bytes of the buffer the head took, final CRLFCRLF included; the body starts here.
    pub head_len: usize,
    /// The authority: from an absolute-form target if present (it wins), else the Host value.
    pub authority: Option<&'b [u8]>,
    /// How the request body is framed: `Empty`, `Length(n)` or `Chunked` (never close-delimited).
    pub body: BodyKind,
    /// Whether the client wants the connection kept after this exchange (RFC 9112 9.3).
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
    /// `Connection: upgrade` with an `Upgrade` header was sent (value in `upgrade`).
    pub upgrade: Option<&'b [u8]>,
}

/// A parsed response head, borrowing the read buffer.
#[derive(Debug)]
pub struct ResponseHead<'h, 'b> {
    pub version: Version,
    pub status: u16,
    pub reason: &'b str,
    pub headers: &'h [httparse::Header<'b>],
    pub head_len: usize,
    /// Framing, decided from the request method and the status (RFC 9112 6.3).
    pub body: BodyKind,
    /// Whether the server lets the connection be reused after this response.
    pub keep_alive: bool,
}

/// What framing of a response depends on besides its own head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestMethod {
    Head,
    Connect,
    Other,
}

/// Parse a request head. `Partial` while the head is incomplete and within limits.
pub fn parse_request<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
    limits: &Limits,
) -> Result<Status<RequestHead<'h, 'b>>, CodecError> {
    let _ = (buf, headers, limits);
    todo!("codec helper")
}

/// Parse a response head to a request made with `method`. 1xx heads (other than 101) parse as
/// complete with `BodyKind::Empty`: the caller skips them and parses again.
pub fn parse_response<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
    method: RequestMethod,
    limits: &Limits,
) -> Result<Status<ResponseHead<'h, 'b>>, CodecError> {
    let _ = (buf, headers, method, limits);
    todo!("codec helper")
}
