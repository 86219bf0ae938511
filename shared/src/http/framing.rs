//! Message body framing, decided once per message in RFC 9112 section 6.3 order, and the
//! keep-alive rules of section 9.3.
//!
//! The framing-relevant fields (Host, Content-Length, Transfer-Encoding, Connection, Upgrade,
//! Expect) are gathered in one pass over the parsed headers (`FieldScan`); the decision
//! functions then look only at that summary.

use super::{CodecError, Version};

/// How a message body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body (HEAD responses, 1xx, 204, 304, requests without CL/TE).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Responses only: the body runs until the server closes the connection.
    CloseDelimited,
    /// 101 Switching Protocols, or a 2xx answer to CONNECT: after the head the connection
    /// is a byte tunnel.
    Tunnel,
}

/// Whether `name` is a hop-by-hop field that a proxy never forwards as is (RFC 9110 7.6.1):
/// Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade.
/// Fields *named* by Connection are hop-by-hop too: see [`connection_tokens`].
#[inline]
pub fn is_hop_by_hop(name: &str) -> bool {
    let n = name.as_bytes();
    // Dispatch on length first: most end-to-end names are rejected by one comparison.
    match n.len() {
        2 => n.eq_ignore_ascii_case(b"te"),
        7 => n.eq_ignore_ascii_case(b"trailer") || n.eq_ignore_ascii_case(b"upgrade"),
        10 => n.eq_ignore_ascii_case(b"connection") || n.eq_ignore_ascii_case(b"keep-alive"),
        16 => n.eq_ignore_ascii_case(b"proxy-connection"),
        17 => n.eq_ignore_ascii_case(b"transfer-encoding"),
        _ => false,
    }
}

/// The comma-separated tokens of every Connection field, trimmed of whitespace, in order.
pub fn connection_tokens<'h, 'b: 'h>(
    headers: &'h [httparse::Header<'b>],
) -> impl Iterator<Item = &'b [u8]> + 'h {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| list_elements(h.value))
}

/// The non-empty elements of a comma-separated list (RFC 9110 5.6.1), trimmed of OWS.
pub fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|e| !e.is_empty())
}

/// `value` without leading and trailing spaces and tabs.
pub fn trim_ows(value: &[u8]) -> &[u8] {
    let start = value.iter().position(|&b| b != b' ' && b != b'\t');
    let Some(start) = start else { return &[] };
    let end = value
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    &value[start..end]
}

/// What one pass over a head's fields found, for framing and connection management.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FieldScan<'b> {
    pub host_count: u32,
    pub host: Option<&'b [u8]>,
    /// The agreed Content-Length, if any field was present and valid.
    pub content_length: Option<u64>,
    /// The first problem with Content-Length fields (invalid beats conflicting).
    pub content_length_error: Option<CodecError>,
    pub has_content_length: bool,
    pub te: TransferCodings,
    pub conn_close: bool,
    pub conn_keep_alive: bool,
    pub conn_upgrade: bool,
    /// A Connection token other than `close` and `keep-alive` (names a hop-by-hop field).
    pub connection_names: bool,
    /// The first Upgrade field line's value.
    pub upgrade: Option<&'b [u8]>,
    /// More than one Upgrade line: they form one list (RFC 9110 5.3), read from the fields
    /// when it matters (`RequestHead::is_websocket_upgrade`), not joined here.
    pub upgrade_lines: bool,
    pub expect_continue: bool,
    /// A Date field is present (a proxy adds one to a response without: RFC 9110 6.6.1).
    pub date: bool,
}

/// The transfer codings of every Transfer-Encoding field, summarised.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TransferCodings {
    pub present: bool,
    /// Number of codings listed over all fields.
    pub count: u32,
    pub chunked_count: u32,
    pub last_is_chunked: bool,
    pub unknown: bool,
    /// A list element that is not a bare token: parameters (`chunked;q=1`, which RFC 9112
    /// 7 does not define for chunked), quotes, inner spaces, non-ASCII.
    pub malformed: bool,
}

impl TransferCodings {
    /// Some Transfer-Encoding element named a coding other than chunked (gzip, or anything).
    pub fn names_other_than_chunked(&self) -> bool {
        self.count > self.chunked_count
    }
}

impl<'b> FieldScan<'b> {
    /// One pass over the fields of a complete head that lies in `buf`. It also checks the
    /// line ending before each field name (see `head::check_head_end`): httparse accepts
    /// a bare LF there, we don't.
    pub fn scan(buf: &[u8], headers: &[httparse::Header<'b>]) -> Result<Self, CodecError> {
        let mut s = FieldScan::default();
        let base = buf.as_ptr() as usize;
        for h in headers {
            let at = (h.name.as_ptr() as usize).wrapping_sub(base);
            if buf.get(at.wrapping_sub(2)) != Some(&b'\r') {
                return Err(CodecError::BareLf);
            }
            let name = h.name.as_bytes();
            // Dispatch on (length, first letter) so that an ordinary field costs two compares.
            let first = name.first().map_or(0, |b| b | 0x20);
            match (name.len(), first) {
                (4, b'h') if eq_lower(name, b"host") => {
                    s.host_count += 1;
                    s.host = Some(h.value);
                }
                (6, b'e') if eq_lower(name, b"expect") => {
                    s.expect_continue |= eq_lower(h.value, b"100-continue");
                }
                (4, b'd') if eq_lower(name, b"date") => s.date = true,
                (7, b'u') if eq_lower(name, b"upgrade") => {
                    s.upgrade_lines |= s.upgrade.is_some();
                    s.upgrade.get_or_insert(h.value);
                }
                (10, b'c') if eq_lower(name, b"connection") => s.connection(h.value),
                // `Content_Length` / `Transfer_Encoding`: back ends that map field names to
                // CGI-style variables (`_` and `-` alike) would take these for the framing
                // fields that this side ignored. Only names of the same length and initial
                // reach the second compare, so it is off the common path.
                (14, b'c') => {
                    if eq_lower(name, b"content-length") {
                        s.content_length(h.value);
                    } else if eq_framing_underscored(name, b"content-length") {
                        return Err(CodecError::InvalidHeaderName);
                    }
                }
                (17, b't') => {
                    if eq_lower(name, b"transfer-encoding") {
                        s.transfer_encoding(h.value);
                    } else if eq_framing_underscored(name, b"transfer-encoding") {
                        return Err(CodecError::InvalidHeaderName);
                    }
                }
                _ => {}
            }
        }
        Ok(s)
    }

    fn connection(&mut self, value: &[u8]) {
        // The common single-token values skip the list split.
        if eq_lower(value, b"keep-alive") {
            self.conn_keep_alive = true;
            return;
        }
        if eq_lower(value, b"close") {
            self.conn_close = true;
            return;
        }
        for token in list_elements(value) {
            if token.eq_ignore_ascii_case(b"close") {
                self.conn_close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") {
                self.conn_keep_alive = true;
            } else {
                self.connection_names = true;
                self.conn_upgrade |= token.eq_ignore_ascii_case(b"upgrade");
            }
        }
    }

    fn transfer_encoding(&mut self, value: &[u8]) {
        self.te.present = true;
        // Empty list elements are ignored (RFC 9110 5.6.1); every other element must be a
        // bare token. A coding with parameters is not guessed at: `chunked;q=1` is chunked
        // to some parsers and an unknown coding to others.
        for coding in list_elements(value) {
            self.te.count += 1;
            if !coding.iter().all(|&b| is_tchar(b)) {
                self.te.malformed = true;
                self.te.last_is_chunked = false;
                continue;
            }
            let chunked = eq_lower(coding, b"chunked");
            self.te.chunked_count += u32::from(chunked);
            self.te.last_is_chunked = chunked;
            self.te.unknown |= !chunked && !is_known_coding(coding);
        }
    }

    /// One Content-Length field: a list of plain decimal numbers that must all agree
    /// (RFC 9112 6.3 step 5; identical duplicates such as `5, 5` are accepted as one), each
    /// at most [`MAX_LENGTH`].
    fn content_length(&mut self, value: &[u8]) {
        self.has_content_length = true;
        // Fast path: one plain number, the first Content-Length seen.
        if self.content_length.is_none() && self.content_length_error.is_none() {
            if let Some(n) = parse_length(value) {
                self.content_length = Some(n);
                return;
            }
        }
        let mut any = false;
        for element in value.split(|&b| b == b',').map(trim_ows) {
            any = true;
            match parse_length(element) {
                None => {
                    self.content_length_error = Some(CodecError::InvalidContentLength);
                }
                Some(n) => match self.content_length {
                    Some(prev) if prev != n => {
                        if self.content_length_error.is_none() {
                            self.content_length_error = Some(CodecError::ConflictingContentLength);
                        }
                    }
                    _ => self.content_length = Some(n),
                },
            }
        }
        if !any {
            self.content_length_error = Some(CodecError::InvalidContentLength);
        }
    }

    /// RFC 9112 9.3: HTTP/1.1 persists unless `close`; HTTP/1.0 only with `keep-alive`.
    pub fn keep_alive(&self, version: Version) -> bool {
        !self.conn_close && (version == Version::Http11 || self.conn_keep_alive)
    }

    /// A response whose framing fields contradict each other or its status: its body is
    /// delimited by the RFC's rules all the same, but the connection is not trusted with
    /// another response (bytes the server meant as body would be read as the next head).
    /// - Transfer-Encoding with Content-Length (RFC 9112 6.3 step 3: "ought to be handled
    ///   as an error");
    /// - a 204 with Transfer-Encoding (RFC 9112 6.1: MUST NOT) or with a Content-Length
    ///   other than 0 (RFC 9110 8.6: MUST NOT; `0` is common and harmless).
    pub fn response_framing_suspect(&self, status: u16) -> bool {
        (self.te.present && self.has_content_length)
            || (status == 204
                && (self.te.present || (self.has_content_length && self.content_length != Some(0))))
    }
}

/// `name` equals `lower` (a framing field name) with at least one `-` written as `_`.
#[cold]
fn eq_framing_underscored(name: &[u8], lower: &[u8]) -> bool {
    name.len() == lower.len()
        && name.contains(&b'_')
        && name
            .iter()
            .zip(lower)
            .all(|(&x, &y)| (x == b'_' && y == b'-') || x.to_ascii_lowercase() == y)
}

/// `tchar` (RFC 9110 5.6.2).
pub fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

/// Case-insensitive equality of a header name or value with `lower`, a lowercase ASCII
/// constant made of letters, digits and `-`. Comparing `byte | 0x20` is exact here: the
/// only other bytes that map onto those are control characters, which httparse has already
/// rejected in names and values. No early exit, so it compiles to a few wide compares.
#[inline(always)]
fn eq_lower(a: &[u8], lower: &[u8]) -> bool {
    a.len() == lower.len()
        && a.iter()
            .zip(lower)
            .fold(0u8, |d, (&x, &y)| d | ((x | 0x20) ^ y))
            == 0
}

/// Transfer codings registered with IANA besides chunked (RFC 9110 8.4.1, RFC 9112 7).
fn is_known_coding(name: &[u8]) -> bool {
    ["gzip", "x-gzip", "deflate", "compress", "x-compress"]
        .iter()
        .any(|known| name.eq_ignore_ascii_case(known.as_bytes()))
}

/// `token` (RFC 9110 5.6.2): one or more `tchar`. Methods and field names are tokens.
pub fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// A field-value byte (RFC 9110 5.5): HTAB, SP, VCHAR, obs-text; no other control character.
pub fn is_field_value_byte(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7f)
}

/// A value a sender is about to put in a field, checked: a CR or LF would end the field and
/// start another (a header injected), and the other control characters are refused by
/// servers or read differently by each. The error names the first such character.
pub fn check_field_value(value: &str) -> Result<(), String> {
    match value.bytes().find(|&b| !is_field_value_byte(b)) {
        Some(b) => Err(format!(
            "control character '{}' in the value",
            char::from(b).escape_debug()
        )),
        None => Ok(()),
    }
}

/// Statuses whose responses never have a body, whatever their fields say (RFC 9112 6.3
/// step 1): 1xx (Informational), 204 (No Content) and 304 (Not Modified).
pub fn status_has_no_body(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

/// The largest message body length or chunk size accepted: 2^63-1, nginx's bound. A back
/// end that reads lengths into a signed 64-bit integer sees the same number as we do; a
/// longer one would be negative or wrapped there while we framed it as huge.
pub const MAX_LENGTH: u64 = i64::MAX as u64;

/// A Content-Length element: `1*DIGIT` no larger than [`MAX_LENGTH`].
fn parse_length(digits: &[u8]) -> Option<u64> {
    parse_decimal(digits).filter(|&n| n <= MAX_LENGTH)
}

/// `1*DIGIT` into a u64; `None` on anything else (sign, space, empty, overflow).
pub fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(n)
}

/// Request framing, RFC 9112 6.3 (requests never read until close):
pub(crate) fn request_body_kind(
    scan: &FieldScan,
    version: Version,
) -> Result<BodyKind, CodecError> {
    if scan.te.present {
        if scan.te.malformed {
            return Err(CodecError::InvalidTransferEncoding);
        }
        // 6.3 step 4: "If a Transfer-Encoding header field is present in a request and the
        // chunked transfer coding is not the final encoding, [...] the server MUST respond
        // with the 400". 7.1: chunked MUST NOT be applied more than once. First: this MUST
        // wins over 6.1's SHOULD below (`chunked, x` is 400, as nginx answers it).
        if !scan.te.last_is_chunked || scan.te.chunked_count != 1 {
            return Err(CodecError::TransferEncodingNotChunked);
        }
        // 6.1: "A server that receives a request message with a transfer coding it does not
        // understand SHOULD respond with 501 (Not Implemented)." Only a coding under a final
        // chunked gets here (`x, chunked`).
        if scan.te.unknown {
            return Err(CodecError::UnknownTransferCoding);
        }
        // 6.3 step 3: "If a message is received with both a Transfer-Encoding and a
        // Content-Length header field, [...] a server MAY reject the request": we do, it is
        // the classic smuggling vector.
        if scan.has_content_length {
            return Err(CodecError::ContentLengthWithTransferEncoding);
        }
        // 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
        if version == Version::Http10 {
            return Err(CodecError::TransferEncodingHttp10);
        }
        // `gzip, chunked`: BodyKind has no room for the codings under chunked, so a
        // consumer would pass the body on decoded from chunked but still gzip-coded, with
        // nothing saying so. Nothing here implements them: 501, as 6.1 says.
        if scan.te.count != 1 {
            return Err(CodecError::UnknownTransferCoding);
        }
        return Ok(BodyKind::Chunked);
    }
    // 6.3 step 5: an invalid Content-Length is an unrecoverable error.
    if let Some(err) = scan.content_length_error {
        return Err(err);
    }
    // Step 6: with a valid Content-Length, that many octets; step 7: otherwise none.
    Ok(match scan.content_length {
        Some(0) | None => BodyKind::Empty,
        Some(n) => BodyKind::Length(n),
    })
}

/// What framing of a response depends on besides its own head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestMethod {
    Head,
    Connect,
    Other,
}

impl RequestMethod {
    /// Classifies a request's method token.
    pub fn from_method(method: &str) -> Self {
        match method {
            "HEAD" => RequestMethod::Head,
            "CONNECT" => RequestMethod::Connect,
            _ => RequestMethod::Other,
        }
    }
}

/// Response framing, RFC 9112 6.3, steps in order.
pub(crate) fn response_body_kind(
    scan: &FieldScan,
    version: Version,
    status: u16,
    method: RequestMethod,
) -> Result<BodyKind, CodecError> {
    // 101 switches protocols: what follows the head is no longer HTTP/1.1.
    if status == 101 {
        return Ok(BodyKind::Tunnel);
    }
    // Step 1: "Any response to a HEAD request and any response with a 1xx (Informational),
    // 204 (No Content), or 304 (Not Modified) status code is always terminated by the first
    // empty line after the header fields, regardless of the header fields present".
    if method == RequestMethod::Head || status_has_no_body(status) {
        return Ok(BodyKind::Empty);
    }
    // Step 2: "Any 2xx (Successful) response to a CONNECT request implies that the
    // connection will become a tunnel immediately after the empty line".
    if method == RequestMethod::Connect && (200..300).contains(&status) {
        return Ok(BodyKind::Tunnel);
    }
    // Step 3: Transfer-Encoding overrides Content-Length.
    if scan.te.present {
        return response_te_body_kind(&scan.te, version);
    }
    // Step 5: an invalid Content-Length in a response is an unrecoverable error (502).
    if let Some(err) = scan.content_length_error {
        return Err(err);
    }
    // Step 6: a valid Content-Length; step 8: otherwise read until close.
    Ok(match scan.content_length {
        Some(0) => BodyKind::Empty,
        Some(n) => BodyKind::Length(n),
        None => BodyKind::CloseDelimited,
    })
}

/// The body of a response with a body and Transfer-Encoding (RFC 9112 6.3 step 3): chunked
/// when chunked is the final coding, else read until the server closes ("If a
/// Transfer-Encoding header field is present in a response and the chunked transfer coding
/// is not the final encoding, the message body length is determined by reading the
/// connection until it is closed by the server"). Framing that no reading makes right is an
/// error (a proxy answers 502), never read until close: the chunk framing would then pass
/// for the payload.
fn response_te_body_kind(te: &TransferCodings, version: Version) -> Result<BodyKind, CodecError> {
    if te.malformed {
        return Err(CodecError::InvalidTransferEncoding);
    }
    // 7: "A sender MUST NOT apply the chunked transfer coding more than once to a message
    // body." Which `chunked` delimits the body is anyone's guess.
    if te.chunked_count > 1 {
        return Err(CodecError::ChunkedMoreThanOnce);
    }
    // 6.1: an HTTP/1.0 message with Transfer-Encoding is treated "as if the framing is
    // faulty": it "is likely to have been forwarded without proper handling of the chunked
    // transfer coding in transit".
    if version == Version::Http10 {
        return Err(CodecError::TransferEncodingHttp10);
    }
    Ok(if te.last_is_chunked {
        BodyKind::Chunked
    } else {
        BodyKind::CloseDelimited
    })
}
