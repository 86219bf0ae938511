//! Request and response heads, parsed with httparse into borrowed views: no allocation per
//! header. The caller owns the header storage (`[httparse::Header; N]`, N >= limits.max_headers).
//!
//! Rules enforced beyond httparse (RFC 9112): bare LF line endings, obs-fold, whitespace before
//! the colon, NUL/bare CR in values, Host presence and uniqueness for HTTP/1.1 requests,
//! absolute-form authority winning over Host, versions `HTTP/1.2` to `HTTP/1.9` read as 1.1
//! (RFC 9112 2.3; httparse knows only 1.0 and 1.1: see `minor`), other versions (505) told apart
//! from the HTTP/2 preface and from garbage, and the framing headers (see `framing`).
//! Request-smuggling hardening on top: Host and authorities to a strict `host[:port]`
//! grammar, only `http(s)` absolute-form, no fragment in a target, `head`/`connect` in the
//! wrong case rejected (a case-blind back end would frame the response differently),
//! Upgrade ignored in HTTP/1.0 (RFC 9110 7.8).
//!
//! Cost on the success path: one httparse pass, then O(headers) work: bare LF is found by
//! looking at the two bytes before each header name and at the last four bytes of the head
//! (every line ending in a head is one of those), and the framing fields are summarised in
//! the same loop; the target is searched once for `#` and the Host value checked.
//! Classifying *why* httparse failed rescans the bytes, but only on error.

use super::framing::{is_tchar, request_body_kind, response_body_kind, FieldScan};
use super::{framing::BodyKind, CodecError, Limits, Status, Version};

pub use super::framing::RequestMethod;

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
    /// The authority: from an absolute-form target if present (it wins), the target itself
    /// for CONNECT (authority-form), else the Host value.
    pub authority: Option<&'b [u8]>,
    /// How the request body is framed: `Empty`, `Length(n)` or `Chunked` (never close-delimited).
    pub body: BodyKind,
    /// Whether the client wants the connection kept after this exchange (RFC 9112 9.3).
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
    /// `Connection: upgrade` with an `Upgrade` header was sent: the first Upgrade line's
    /// value (with `upgrade_lines`, others follow in `headers`).
    pub upgrade: Option<&'b [u8]>,
    /// More than one Upgrade field line: together they are one list (RFC 9110 5.3).
    pub upgrade_lines: bool,
    /// A Connection field lists something other than `close` and `keep-alive`: the fields it
    /// names are hop-by-hop (RFC 9110 7.6.1). False for the usual head, which spares a proxy
    /// a second look at every field.
    pub connection_names: bool,
}

impl RequestHead<'_, '_> {
    /// The method as framing of the response needs it.
    pub fn request_method(&self) -> RequestMethod {
        RequestMethod::from_method(self.method)
    }

    /// Whether this is a WebSocket opening handshake: see [`is_websocket_upgrade`]. Several
    /// Upgrade lines are one list (RFC 9110 5.3), `websocket` in any of them, whatever their
    /// order.
    pub fn is_websocket_upgrade(&self) -> bool {
        if self.upgrade_lines && self.upgrade.is_some() {
            return self.websocket_in_any_upgrade_line();
        }
        is_websocket_upgrade(self.method, self.upgrade)
    }

    /// [`RequestHead::is_websocket_upgrade`] over every Upgrade line: a rare head, read again.
    #[cold]
    fn websocket_in_any_upgrade_line(&self) -> bool {
        self.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("upgrade"))
            .any(|h| is_websocket_upgrade(self.method, Some(h.value)))
    }
}

/// The one rule for a WebSocket upgrade, for the proxy and the origin alike: a GET (RFC 6455
/// 4.1) whose Connection has the `upgrade` token and whose Upgrade list (RFC 9110 7.8: a
/// comma-separated list of protocols, in order of preference) names `websocket`.
/// `upgrade` is [`RequestHead::upgrade`]: present only when Connection has the `upgrade`
/// token in an HTTP/1.1 request.
pub fn is_websocket_upgrade(method: &str, upgrade: Option<&[u8]>) -> bool {
    method == "GET"
        && upgrade.is_some_and(|u| {
            super::framing::list_elements(u).any(|p| p.eq_ignore_ascii_case(b"websocket"))
        })
}

/// Whether the request whose first bytes are `buf` is a HEAD, from its method token alone
/// (after the empty lines RFC 9112 2.2 lets a server skip): for an answer to a request the
/// parse refused or never finished, which must still carry no body to a HEAD (RFC 9110
/// 9.3.2). Methods are case-sensitive (RFC 9110 9.1): `head` is not HEAD.
pub fn starts_head_request(buf: &[u8]) -> bool {
    let lead = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    buf[lead..].starts_with(b"HEAD ")
}

/// A parsed response head, borrowing the read buffer.
#[derive(Debug)]
pub struct ResponseHead<'h, 'b> {
    pub version: Version,
    pub status: u16,
    pub reason: &'b str,
    pub headers: &'h [httparse::Header<'b>],
    /// Bytes of the buffer the head took, final CRLFCRLF included; from
    /// [`parse_final_response`](super::parse_final_response), the interim heads before it too.
    pub head_len: usize,
    /// Framing, decided from the request method and the status (RFC 9112 6.3).
    pub body: BodyKind,
    /// Whether the connection can carry another response after this one, decided once:
    /// false for close-delimited and tunnel bodies, `Connection: close`, HTTP/1.0 without
    /// `keep-alive` (RFC 9112 9.3), and framing fields that contradict each other.
    pub keep_alive: bool,
    /// The body is framed by Transfer-Encoding (chunked or read until close) and a coding
    /// other than chunked was named: a proxy that re-frames the body would lose it.
    pub other_coding: bool,
    /// The Content-Length the fields declare, when it is valid (plain decimal numbers that
    /// agree, at most 2^63-1), whatever `body` is: on a 304 or an answer to HEAD it is the
    /// selected representation's length (RFC 9110 8.6) and frames nothing.
    pub content_length: Option<u64>,
    /// A Connection field lists something other than `close` and `keep-alive`: the fields it
    /// names are hop-by-hop (RFC 9110 7.6.1). False for the usual head, which spares a proxy
    /// a second look at every field.
    pub connection_names: bool,
    /// The head has a Date field: a recipient with a clock adds one to a response without
    /// that it forwards or stores (RFC 9110 6.6.1).
    pub has_date: bool,
}

/// The HTTP/2 connection preface (RFC 9113 3.4); its first line parses as an HTTP/1 request
/// line with version `HTTP/2.0`.
pub const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Parse a request head. `Partial` while the head is incomplete and within limits.
pub fn parse_request<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
    limits: &Limits,
) -> Result<Status<RequestHead<'h, 'b>>, CodecError> {
    let n = limits.max_headers.min(headers.len());
    let storage: &'h mut [httparse::Header<'b>] = &mut headers[..n];
    // httparse never sees more than max_head bytes, so its work is bounded too.
    let window = &buf[..buf.len().min(limits.max_head)];
    let mut req = httparse::Request::new(storage);
    let parsed = match req.parse(window) {
        Ok(httparse::Status::Complete(len)) => {
            let httparse::Request {
                method,
                path,
                version,
                headers,
            } = req;
            let (Some(method), Some(target), Some(minor)) = (method, path, version) else {
                return Err(CodecError::InvalidStartLine); // httparse sets all three on Complete
            };
            let version = if minor == 0 {
                Version::Http10
            } else {
                Version::Http11
            };
            Ok(httparse::Status::Complete((
                method, target, version, &*headers, len,
            )))
        }
        Err(httparse::Error::Version) => super::minor::request(window, req),
        other => other.map(|_| httparse::Status::Partial),
    };
    let (method, target, version, headers, head_len) = match parsed {
        Ok(httparse::Status::Complete(parts)) => parts,
        Ok(httparse::Status::Partial) => {
            if request_line_too_long(buf, limits.max_request_line) {
                return Err(CodecError::RequestLineTooLong);
            }
            if buf.len() >= limits.max_head {
                return Err(CodecError::HeadTooLarge);
            }
            return Ok(Status::Partial);
        }
        Err(e) => {
            if request_line_too_long(buf, limits.max_request_line) {
                return Err(CodecError::RequestLineTooLong);
            }
            return match classify_request_error(window, e) {
                Some(err) => Err(err),
                None if buf.len() >= limits.max_head => Err(CodecError::HeadTooLarge),
                // The head is bad, but which rule it breaks shows only in bytes still to
                // come: wait for them so every split of the input gives the same error.
                None => Ok(Status::Partial),
            };
        }
    };

    // Start-line checks: leading empty lines must be CRLF, the line within its limit.
    let base = buf.as_ptr() as usize;
    let start = method.as_ptr() as usize - base;
    check_leading_crlf(&buf[..start])?;
    let target_off = target.as_ptr() as usize - base;
    // " HTTP/1.x" follows the target.
    if target_off + target.len() + 9 - start > limits.max_request_line {
        return Err(CodecError::RequestLineTooLong);
    }
    check_head_end(buf, head_len)?;

    check_framing_method(method)?;
    let scan = FieldScan::scan(buf, headers)?;
    let authority = request_authority(method, target, &scan, version)?;
    let body = request_body_kind(&scan, version)?;
    Ok(Status::Complete(RequestHead {
        method,
        target,
        version,
        headers,
        head_len,
        authority,
        body,
        keep_alive: scan.keep_alive(version),
        expect_continue: scan.expect_continue && version == Version::Http11,
        // RFC 9110 7.8: "A server MUST ignore an Upgrade header field that is received in
        // an HTTP/1.0 request."
        upgrade: if scan.conn_upgrade && version == Version::Http11 {
            scan.upgrade
        } else {
            None
        },
        upgrade_lines: scan.upgrade_lines,
        connection_names: scan.connection_names,
    }))
}

/// A request head's parts, borrowed from the buffer: method, target, version, fields and
/// the head's length.
pub(super) type RequestParts<'h, 'b> =
    (&'b str, &'b str, Version, &'h [httparse::Header<'b>], usize);

/// Parse a response head to a request made with `method`. 1xx heads (other than 101) parse as
/// complete with `BodyKind::Empty`: the caller skips them and parses again.
pub fn parse_response<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
    method: RequestMethod,
    limits: &Limits,
) -> Result<Status<ResponseHead<'h, 'b>>, CodecError> {
    let n = limits.max_headers.min(headers.len());
    let storage: &'h mut [httparse::Header<'b>] = &mut headers[..n];
    let window = &buf[..buf.len().min(limits.max_head)];
    let mut res = httparse::Response::new(storage);
    let parsed = match res.parse(window) {
        Ok(httparse::Status::Complete(len)) => {
            let httparse::Response {
                version,
                code,
                reason,
                headers,
            } = res;
            let (Some(minor), Some(status)) = (version, code) else {
                return Err(CodecError::InvalidStartLine);
            };
            let version = if minor == 0 {
                Version::Http10
            } else {
                Version::Http11
            };
            Ok(httparse::Status::Complete((
                version, status, reason, &*headers, len,
            )))
        }
        Err(httparse::Error::Version) => super::minor::response(window, res.headers),
        other => other.map(|_| httparse::Status::Partial),
    };
    let (version, status, reason, headers, head_len) = match parsed {
        Ok(httparse::Status::Complete(parts)) => parts,
        Ok(httparse::Status::Partial) => {
            if buf.len() >= limits.max_head {
                return Err(CodecError::HeadTooLarge);
            }
            return Ok(Status::Partial);
        }
        Err(e) => {
            return match classify_response_error(window, e) {
                Some(err) => Err(err),
                None if buf.len() >= limits.max_head => Err(CodecError::HeadTooLarge),
                None => Ok(Status::Partial),
            };
        }
    };
    if status < 100 {
        return Err(CodecError::InvalidStatus);
    }
    let leading = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    check_leading_crlf(&buf[..leading])?;
    check_head_end(buf, head_len)?;

    let scan = FieldScan::scan(buf, headers)?;
    let body = response_body_kind(&scan, version, status, method)?;
    let keep_alive = scan.keep_alive(version)
        && !matches!(body, BodyKind::CloseDelimited | BodyKind::Tunnel)
        && !scan.response_framing_suspect(status);
    let other_coding = matches!(body, BodyKind::Chunked | BodyKind::CloseDelimited)
        && scan.te.names_other_than_chunked();
    Ok(Status::Complete(ResponseHead {
        version,
        status,
        reason: reason.unwrap_or(""),
        headers,
        head_len,
        body,
        keep_alive,
        other_coding,
        content_length: scan
            .content_length
            .filter(|_| scan.content_length_error.is_none()),
        connection_names: scan.connection_names,
        has_date: scan.date,
    }))
}

/// Leading empty lines before a start line (RFC 9112 2.2 lets a server skip them) must be
/// CRLF too.
fn check_leading_crlf(lead: &[u8]) -> Result<(), CodecError> {
    if lead.chunks(2).all(|pair| pair == b"\r\n") {
        Ok(())
    } else {
        Err(CodecError::BareLf)
    }
}

/// httparse accepts a bare LF wherever CRLF is due. Every line ending of a complete head
/// is either just before a header name (the start line's or the previous header's; checked
/// in `FieldScan::scan`, which walks the fields anyway) or one of the two at the very end,
/// checked here; so every bare LF is found without a pass over the bytes.
fn check_head_end(buf: &[u8], head_len: usize) -> Result<(), CodecError> {
    match head_len
        .checked_sub(4)
        .and_then(|start| buf.get(start..head_len))
    {
        Some(b"\r\n\r\n") => Ok(()),
        _ => Err(CodecError::BareLf),
    }
}

/// RFC 9110 9.1: methods are case-sensitive. `head` or `Connect` is not HEAD or CONNECT
/// to this codec (the response would be framed as having a body, or not as a tunnel), but
/// a back end that compares case-insensitively would take it for one, and the two sides
/// would then disagree on where the response ends. Only these two change framing.
fn check_framing_method(method: &str) -> Result<(), CodecError> {
    let near_miss = match method.len() {
        4 => method != "HEAD" && method.eq_ignore_ascii_case("HEAD"),
        7 => method != "CONNECT" && method.eq_ignore_ascii_case("CONNECT"),
        _ => false,
    };
    if near_miss {
        Err(CodecError::InvalidMethod)
    } else {
        Ok(())
    }
}

/// RFC 9112 3.2: an HTTP/1.1 request carries exactly one Host; 3.2.2: an absolute-form
/// target's authority wins over Host. 3.2.1-3.2.4: the target's form must fit the method.
fn request_authority<'b>(
    method: &str,
    target: &'b str,
    scan: &FieldScan<'b>,
    version: Version,
) -> Result<Option<&'b [u8]>, CodecError> {
    if scan.host_count > 1 {
        return Err(CodecError::DuplicateHost);
    }
    if scan.host_count == 0 && version == Version::Http11 {
        return Err(CodecError::MissingHost);
    }
    if let Some(host) = scan.host {
        // RFC 9112 3.2: an empty Host is allowed (a target without an authority).
        if !host.is_empty() && !valid_authority(host, false) {
            return Err(CodecError::InvalidHost);
        }
    }
    let t = target.as_bytes();
    if method == "CONNECT" {
        // authority-form (3.2.3): uri-host ":" port, nothing else.
        if !valid_authority(t, true) {
            return Err(CodecError::InvalidTarget);
        }
        return Ok(Some(t));
    }
    // 3.2: no form of request-target has a fragment, and back ends disagree on whether
    // `#` ends the path (a router and a back end could see different paths).
    // (A branch-free fold: it vectorizes, where memchr's setup dominates on short targets.)
    if t.iter().fold(false, |found, &b| found | (b == b'#')) {
        return Err(CodecError::InvalidTarget);
    }
    match t.first() {
        Some(b'/') => Ok(scan.host),
        Some(b'*') if t.len() == 1 && method == "OPTIONS" => Ok(scan.host),
        _ => match absolute_authority(t) {
            // RFC 9110 4.2.4: userinfo (`user@`) in an http(s) URI is an error; the
            // authority grammar leaves `@` out.
            Some(a) if valid_authority(a, false) => Ok(Some(a)),
            _ => Err(CodecError::InvalidTarget),
        },
    }
}

/// `uri-host [":" port]` (RFC 3986 3.2.2-3.2.3) with a non-empty host, and a non-empty
/// port when `port_required`. Stricter than RFC 3986 where that keeps routing on it
/// unambiguous: a reg-name is letters, digits, `-._~` and pct-encoded octets (no
/// sub-delims such as `,` `;` `*`, which no client puts in a host name); an IP literal is
/// an IPv6 address (hex digits, `:` and `.` in brackets; no IPvFuture or zone).
fn valid_authority(a: &[u8], port_required: bool) -> bool {
    let rest = if let Some(literal) = a.strip_prefix(b"[") {
        let Some(close) = literal.iter().position(|&b| b == b']') else {
            return false;
        };
        let inner = &literal[..close];
        if !inner.contains(&b':')
            || !inner
                .iter()
                .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return false;
        }
        &literal[close + 1..]
    } else {
        // One pass in the common case: the host is unreserved bytes up to `:` or the end.
        let end = match a.iter().position(|&b| !UNRESERVED[b as usize]) {
            Some(i) if a[i] == b'%' => {
                let end = a.iter().position(|&b| b == b':').unwrap_or(a.len());
                if !valid_pct_reg_name(&a[..end]) {
                    return false;
                }
                end
            }
            Some(i) => i,
            None => a.len(),
        };
        if end == 0 {
            return false;
        }
        &a[end..]
    };
    match rest {
        [] => !port_required,
        [b':', port @ ..] => {
            port.iter().all(u8::is_ascii_digit) && !(port_required && port.is_empty())
        }
        _ => false,
    }
}

/// A reg-name of unreserved bytes and well-formed pct-encodings.
#[cold]
fn valid_pct_reg_name(host: &[u8]) -> bool {
    let mut i = 0;
    while i < host.len() {
        match host[i] {
            b'%' => match host.get(i + 1..i + 3) {
                Some([h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => i += 3,
                _ => return false,
            },
            b if UNRESERVED[b as usize] => i += 1,
            _ => return false,
        }
    }
    true
}

/// `unreserved` (RFC 3986 2.3): ALPHA / DIGIT / "-" / "." / "_" / "~".
pub(crate) static UNRESERVED: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~');
        b += 1;
    }
    t
};

/// The authority of an absolute-form target `scheme "://" authority [path-abempty]...`,
/// or `None` if `t` is not one. Only `http` and `https` (any case) are accepted: this is
/// a server for those, and another scheme's authority would be routed as if it were one.
fn absolute_authority(t: &[u8]) -> Option<&[u8]> {
    let colon = t.iter().position(|&b| b == b':')?;
    let scheme = &t[..colon];
    if !scheme.eq_ignore_ascii_case(b"http") && !scheme.eq_ignore_ascii_case(b"https") {
        return None;
    }
    let rest = t[colon + 1..].strip_prefix(b"//")?;
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Whether the request line (after any leading empty lines) is longer than `limit`, looking
/// at no more than `limit + 2` bytes of it.
fn request_line_too_long(buf: &[u8], limit: usize) -> bool {
    let lead = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let line = &buf[lead..];
    let window = &line[..line.len().min(limit.saturating_add(2))];
    match window.iter().position(|&b| b == b'\n') {
        Some(lf) => {
            let len = if lf > 0 && window[lf - 1] == b'\r' {
                lf - 1
            } else {
                lf
            };
            len > limit
        }
        None => line.len() > limit.saturating_add(1),
    }
}

// ---- Error classification (slow path: only after httparse said no) ----
//
// Each classifier returns `None` when the bytes that decide which rule is broken have not
// all arrived yet (the caller answers `Partial`), so a head gives the same error however
// it is split across reads.

fn classify_request_error(buf: &[u8], e: httparse::Error) -> Option<CodecError> {
    let lead = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let line = &buf[lead..];
    match e {
        httparse::Error::Version => {
            if line.starts_with(&HTTP2_PREFACE[..14]) {
                return Some(CodecError::Http2Preface);
            }
            // The version is the third field of the request line.
            let mut fields = line.splitn(3, |&b| b == b' ');
            let version = fields.nth(2).unwrap_or(&[]);
            classify_version(version, |b| b == b'\r' || b == b'\n')
        }
        httparse::Error::Token => {
            let method_len = line.iter().take_while(|&&b| is_tchar(b)).count();
            match line.get(method_len) {
                None => None,
                Some(b' ') if method_len > 0 => Some(CodecError::InvalidTarget),
                Some(_) => Some(CodecError::InvalidMethod),
            }
        }
        httparse::Error::TooManyHeaders => Some(CodecError::TooManyHeaders),
        // Something other than CRLF right after the 8 bytes httparse took as the version.
        httparse::Error::NewLine => {
            let version = line.splitn(3, |&b| b == b' ').nth(2).unwrap_or(&[]);
            match classify_version(version, |b| b == b'\r' || b == b'\n') {
                Some(CodecError::UnsupportedVersion) => classify_field_error(buf, lead, e),
                other => other,
            }
        }
        _ => classify_field_error(buf, lead, e),
    }
}

fn classify_response_error(buf: &[u8], e: httparse::Error) -> Option<CodecError> {
    let lead = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    match e {
        httparse::Error::Version => classify_version(&buf[lead..], |b| b == b' '),
        httparse::Error::Status => Some(CodecError::InvalidStatus),
        httparse::Error::TooManyHeaders => Some(CodecError::TooManyHeaders),
        _ => classify_field_error(buf, lead, e),
    }
}

/// `HTTP/x.y` (or `HTTP/x`, as HTTP/2 and 3 write it) that is well formed but not one this
/// codec reads (1.0, 1.1, and in requests 1.2 to 1.9 as 1.1) is unsupported (505); anything
/// else is garbage (400). `field` starts at the version and
/// `is_end` tells the byte that ends it.
fn classify_version(field: &[u8], is_end: impl Fn(u8) -> bool) -> Option<CodecError> {
    let v = match field.iter().position(|&b| is_end(b)) {
        Some(end) => &field[..end],
        // A longer version is garbage whatever follows; a shorter one may still be HTTP/x.y.
        None if field.len() > 8 => return Some(CodecError::InvalidVersion),
        None => return None,
    };
    let well_formed = match v.strip_prefix(b"HTTP/") {
        Some([major]) => major.is_ascii_digit(),
        Some([major, b'.', minor]) => major.is_ascii_digit() && minor.is_ascii_digit(),
        _ => false,
    };
    Some(if well_formed {
        CodecError::UnsupportedVersion
    } else {
        CodecError::InvalidVersion
    })
}

/// httparse rejected something after the start line (or its line ending): find the first
/// offending line and name the rule it breaks.
fn classify_field_error(buf: &[u8], lead: usize, e: httparse::Error) -> Option<CodecError> {
    // A CR before the start line followed by something other than LF: decided here, not by
    // the lines after it (which would make a longer buffer look Partial again).
    if lead > 0 && buf[lead - 1] == b'\r' && lead < buf.len() {
        return Some(CodecError::InvalidStartLine);
    }
    let rest = &buf[lead..];
    let first_lf = rest.iter().position(|&b| b == b'\n');
    let first_cr = rest.iter().position(|&b| b == b'\r');
    match (first_cr, first_lf) {
        // A CR in the start line not followed by LF.
        (Some(cr), Some(lf)) if cr + 1 < lf => return Some(CodecError::InvalidStartLine),
        (Some(cr), None) if cr + 1 < rest.len() => return Some(CodecError::InvalidStartLine),
        (_, None) => return None,
        _ => {}
    }
    let mut pos = lead + first_lf? + 1;
    while pos < buf.len() {
        let line = &buf[pos..];
        match line[0] {
            b'\r' if line.len() == 1 => return None,
            b'\r' if line[1] != b'\n' => return Some(CodecError::InvalidHeaderName),
            b'\r' | b'\n' => break, // end of head
            b' ' | b'\t' => return Some(CodecError::ObsFold),
            _ => {}
        }
        let name_len = line.iter().take_while(|&&b| is_tchar(b)).count();
        match line.get(name_len) {
            None => return None,
            Some(b':') if name_len > 0 => {}
            Some(b' ' | b'\t') if name_len > 0 => {
                let ws = line[name_len..]
                    .iter()
                    .take_while(|&&b| b == b' ' || b == b'\t');
                return match line.get(name_len + ws.count()) {
                    None => None,
                    Some(b':') => Some(CodecError::WhitespaceBeforeColon),
                    Some(_) => Some(CodecError::InvalidHeaderName),
                };
            }
            Some(_) => return Some(CodecError::InvalidHeaderName),
        }
        let mut i = name_len + 1;
        loop {
            match line.get(i) {
                None => return None,
                Some(b'\n') => break,
                Some(b'\r') => match line.get(i + 1) {
                    None => return None,
                    Some(b'\n') => {
                        i += 1;
                        break;
                    }
                    Some(_) => return Some(CodecError::InvalidHeaderValue),
                },
                Some(&b) if b == b'\t' || (b >= 0x20 && b != 0x7f) => i += 1,
                Some(_) => return Some(CodecError::InvalidHeaderValue),
            }
        }
        pos += i + 1;
    }
    Some(map_httparse(e))
}

fn map_httparse(e: httparse::Error) -> CodecError {
    match e {
        httparse::Error::HeaderName => CodecError::InvalidHeaderName,
        httparse::Error::HeaderValue => CodecError::InvalidHeaderValue,
        httparse::Error::NewLine => CodecError::InvalidHeaderName,
        httparse::Error::Status => CodecError::InvalidStatus,
        httparse::Error::Token => CodecError::InvalidStartLine,
        httparse::Error::TooManyHeaders => CodecError::TooManyHeaders,
        httparse::Error::Version => CodecError::InvalidVersion,
    }
}
