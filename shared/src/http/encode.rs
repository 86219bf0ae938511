//! Serializers: heads into a reusable `BytesMut`, chunk framing, canned responses.
//! Heads are written piecewise (start line, each header, end) so a proxy can copy the
//! headers it keeps and add its own without building an intermediate list.
//!
//! Nothing here allocates beyond growing `dst`; numbers are formatted on the stack.

use super::Version;
use bytes::BytesMut;

/// `METHOD SP target SP version CRLF`.
pub fn write_request_line(dst: &mut BytesMut, method: &str, target: &str, version: Version) {
    dst.reserve(method.len() + target.len() + 12);
    dst.extend_from_slice(method.as_bytes());
    dst.extend_from_slice(b" ");
    dst.extend_from_slice(target.as_bytes());
    dst.extend_from_slice(b" ");
    dst.extend_from_slice(version.as_str().as_bytes());
    dst.extend_from_slice(b"\r\n");
}

/// `version SP status SP reason CRLF`.
pub fn write_status_line(dst: &mut BytesMut, version: Version, status: u16, reason: &str) {
    dst.reserve(reason.len() + 15);
    dst.extend_from_slice(version.as_str().as_bytes());
    dst.extend_from_slice(b" ");
    let mut digits = [0u8; 20];
    dst.extend_from_slice(fmt_decimal(u64::from(status), &mut digits));
    dst.extend_from_slice(b" ");
    dst.extend_from_slice(reason.as_bytes());
    dst.extend_from_slice(b"\r\n");
}

/// `name: value CRLF`.
pub fn write_header(dst: &mut BytesMut, name: &[u8], value: &[u8]) {
    dst.reserve(name.len() + value.len() + 4);
    dst.extend_from_slice(name);
    dst.extend_from_slice(b": ");
    dst.extend_from_slice(value);
    dst.extend_from_slice(b"\r\n");
}

/// The field lines of a head the codec parsed from `buf` (`headers`, slices of it) that
/// `keep` accepts, copied as they arrived: each run of consecutive kept lines in one copy, so
/// a head whose fields mostly pass costs a copy or two instead of four appends per field. In
/// such a head the bytes from one field's name to the next field's name are exactly that
/// field's line: every line ends in CRLF (`FieldScan` refuses a bare LF) and none is folded
/// (httparse refuses obs-fold). The whitespace around a value passes as received (RFC 9110
/// 5.5: optional whitespace, no meaning).
pub fn copy_fields<'b>(
    dst: &mut BytesMut,
    buf: &'b [u8],
    headers: &[httparse::Header<'b>],
    mut keep: impl FnMut(&httparse::Header<'b>) -> bool,
) {
    let start_of =
        |h: &httparse::Header<'_>| (h.name.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    // The kept lines not yet copied: `buf[run.0..run.1]`.
    let mut run: Option<(usize, usize)> = None;
    for (i, h) in headers.iter().enumerate() {
        if !keep(h) {
            if let Some((s, e)) = run.take() {
                dst.extend_from_slice(&buf[s..e]);
            }
            continue;
        }
        let s = start_of(h);
        let e = match headers.get(i + 1) {
            Some(next) => start_of(next),
            // The last line ends at the LF after its value (past trailing whitespace).
            None => {
                let value_end = (h.value.as_ptr() as usize)
                    .wrapping_sub(buf.as_ptr() as usize)
                    .wrapping_add(h.value.len());
                let from = if (s..buf.len()).contains(&value_end) {
                    value_end
                } else {
                    s
                };
                buf[from.min(buf.len())..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(usize::MAX, |n| from + n + 1)
            }
        };
        if e > buf.len() || s > e {
            // Not a line of `buf` (never so for the codec's heads): written field by field.
            if let Some((s, e)) = run.take() {
                dst.extend_from_slice(&buf[s..e]);
            }
            write_header(dst, h.name.as_bytes(), h.value);
            continue;
        }
        run = Some((run.map_or(s, |(rs, _)| rs), e));
    }
    if let Some((s, e)) = run {
        dst.extend_from_slice(&buf[s..e]);
    }
}

/// `name: decimal CRLF`, e.g. a Content-Length, without formatting through a `String`.
pub fn write_header_u64(dst: &mut BytesMut, name: &[u8], value: u64) {
    let mut digits = [0u8; 20];
    write_header(dst, name, fmt_decimal(value, &mut digits));
}

/// The blank line that ends a head.
pub fn end_head(dst: &mut BytesMut) {
    dst.extend_from_slice(b"\r\n");
}

/// A chunk-size line for `len` payload bytes (hex, CRLF). `len` must not be 0.
pub fn write_chunk_header(dst: &mut BytesMut, len: usize) {
    debug_assert!(
        len != 0,
        "a zero-size chunk is the last chunk: use LAST_CHUNK"
    );
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 18];
    let mut i = 16;
    let mut n = len as u64;
    loop {
        i -= 1;
        buf[i] = HEX[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    buf[16] = b'\r';
    buf[17] = b'\n';
    dst.extend_from_slice(&buf[i..]);
}

/// CRLF after a chunk's payload.
pub const CHUNK_END: &[u8] = b"\r\n";
/// The last chunk with an empty trailer section.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The reason phrase for a status code ("" if unknown).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        102 => "Processing",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// A complete, well-formed response generated by a server itself (errors, 100 Continue
/// excluded): status line, `Content-Type: text/plain`, `Content-Length`, `Connection: close`
/// when `close`, and a one-line body naming the status.
pub fn write_simple_response(dst: &mut BytesMut, version: Version, status: u16, close: bool) {
    write_simple_response_with(dst, version, status, close, &[]);
}

/// [`write_simple_response`] with `fields` (name, value) added to its head (a proxy's own
/// answer on a cached route carries `X-Cache`).
pub fn write_simple_response_with(
    dst: &mut BytesMut,
    version: Version,
    status: u16,
    close: bool,
    fields: &[(&[u8], &[u8])],
) {
    write_simple_answer(dst, version, status, close, fields, false);
}

/// [`write_simple_response_with`], or its head alone when `head_only`: the answer to a HEAD
/// (RFC 9110 9.3.2: the fields a GET would get, its Content-Length too, and no body, which a
/// kept connection would read as the start of the next response).
pub fn write_simple_answer(
    dst: &mut BytesMut,
    version: Version,
    status: u16,
    close: bool,
    fields: &[(&[u8], &[u8])],
    head_only: bool,
) {
    let reason = reason_phrase(status);
    let mut digits = [0u8; 20];
    let code = fmt_decimal(u64::from(status), &mut digits);
    // Body: "404 Not Found\n" (or "599\n" when the reason is unknown).
    let body_len = code.len()
        + if reason.is_empty() {
            0
        } else {
            1 + reason.len()
        }
        + 1;
    dst.reserve(body_len + reason.len() + 96);
    write_status_line(dst, version, status, reason);
    write_header(dst, b"Content-Type", b"text/plain");
    write_header_u64(dst, b"Content-Length", body_len as u64);
    for (name, value) in fields {
        write_header(dst, name, value);
    }
    if close {
        write_header(dst, b"Connection", b"close");
    }
    end_head(dst);
    if head_only {
        return;
    }
    dst.extend_from_slice(code);
    if !reason.is_empty() {
        dst.extend_from_slice(b" ");
        dst.extend_from_slice(reason.as_bytes());
    }
    dst.extend_from_slice(b"\n");
}

/// Formats `n` in decimal into `buf`, returning the digits (no allocation: for heads and
/// templates rendered per request).
pub fn fmt_decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}
