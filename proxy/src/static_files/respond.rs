//! Response heads for files, redirects and errors, written into the connection's head
//! buffer. Plain functions over plain inputs, tested in `tests.rs`.

use super::cache::File;
use super::decide::Reply;
use bytes::BytesMut;
use shared::http::encode::{
    end_head, fmt_decimal, reason_phrase, write_header, write_header_u64, write_status_line,
};
use shared::http::Version;

/// How the connection goes on after the response: the Connection field it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    pub version: Version,
    pub keep_alive: bool,
}

impl Conn {
    fn write(self, dst: &mut BytesMut) {
        if !self.keep_alive {
            write_header(dst, b"Connection", b"close");
        } else if self.version == Version::Http10 {
            write_header(dst, b"Connection", b"keep-alive");
        }
    }
}

/// What follows the head of a file response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    None,
    /// Bytes `start..start + len` of the file.
    Bytes {
        start: u64,
        len: u64,
    },
}

/// The head of a response to a GET or HEAD of `file`, for `reply`; the body it announces
/// (none for HEAD, 304 and 416).
pub fn file_head(dst: &mut BytesMut, f: &File, reply: Reply, head: bool, conn: Conn) -> Body {
    let size = f.info.size;
    let status = status_of(reply);
    let body = match reply {
        Reply::PreconditionFailed => {
            simple(dst, status, None, head, conn);
            return Body::None;
        }
        Reply::NotModified | Reply::Unsatisfiable => Body::None,
        Reply::Full => Body::Bytes {
            start: 0,
            len: size,
        },
        Reply::Partial { start, end } => Body::Bytes {
            start,
            len: end - start + 1,
        },
    };
    write_status_line(dst, conn.version, status, reason_phrase(status));
    write_header(dst, b"Date", &crate::http_date::now());
    if status == 416 {
        write_range(dst, None, size);
        write_header(dst, b"Content-Type", b"text/plain");
        write_header_u64(dst, b"Content-Length", 0);
        conn.write(dst);
        end_head(dst);
        return Body::None;
    }
    write_header(dst, b"Last-Modified", &f.last_modified);
    write_header(dst, b"ETag", f.etag.as_bytes());
    if status != 304 {
        write_header(dst, b"Content-Type", f.content_type.as_bytes());
        if let Body::Bytes { start, len } = body {
            write_header_u64(dst, b"Content-Length", len);
            if status == 206 {
                write_range(dst, Some((start, start + len - 1)), size);
            }
        }
        write_header(dst, b"Accept-Ranges", b"bytes");
    }
    conn.write(dst);
    end_head(dst);
    if head {
        Body::None
    } else {
        body
    }
}

/// The status of the response `file_head` writes for `reply`.
pub fn status_of(reply: Reply) -> u16 {
    match reply {
        Reply::PreconditionFailed => 412,
        Reply::NotModified => 304,
        Reply::Full => 200,
        Reply::Partial { .. } => 206,
        Reply::Unsatisfiable => 416,
    }
}

/// Whether a route's `response_headers` edit an answer of `status`: nginx's `add_header`
/// (without `always`) applies to these alone, so an error answer keeps none of what was
/// meant for the content (a year's `Cache-Control` on a 404 would keep the file missing in
/// every cache for that year).
pub fn edits_apply(status: u16) -> bool {
    matches!(
        status,
        200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
    )
}

/// `Content-Range: bytes first-last/size`, or `bytes */size` for a 416.
pub fn write_range(dst: &mut BytesMut, range: Option<(u64, u64)>, size: u64) {
    let mut v = RangeValue::default();
    v.push(b"bytes ");
    match range {
        Some((a, b)) => {
            v.push_u64(a);
            v.push(b"-");
            v.push_u64(b);
        }
        None => v.push(b"*"),
    }
    v.push(b"/");
    v.push_u64(size);
    write_header(dst, b"Content-Range", v.as_bytes());
}

/// The longest Content-Range value: `bytes first-last/size`, three u64s of up to 20 digits.
const RANGE_MAX: usize = b"bytes -/".len() + 3 * 20;

/// A Content-Range value, built on the stack in a buffer sized for the longest, so every
/// value fits and nothing is formatted that could fail (a 64-byte one cut a 2^62-byte
/// file's range after the slash, and the error was dropped).
struct RangeValue {
    buf: [u8; RANGE_MAX],
    len: usize,
}

impl Default for RangeValue {
    fn default() -> Self {
        RangeValue {
            buf: [0; RANGE_MAX],
            len: 0,
        }
    }
}

impl RangeValue {
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn push(&mut self, s: &[u8]) {
        let end = self.len + s.len();
        self.buf[self.len..end].copy_from_slice(s);
        self.len = end;
    }

    fn push_u64(&mut self, v: u64) {
        let mut digits = [0u8; 20];
        self.push(fmt_decimal(v, &mut digits));
    }
}

/// A complete small response the server makes itself: `status` with a one-line body
/// (none for HEAD), plus `Allow` for a 405 and `Location` for a redirect.
pub fn simple(dst: &mut BytesMut, status: u16, location: Option<&[&[u8]]>, head: bool, conn: Conn) {
    let reason = reason_phrase(status);
    let mut digits = [0u8; 20];
    let code = fmt_decimal(u64::from(status), &mut digits);
    write_status_line(dst, conn.version, status, reason);
    write_header(dst, b"Date", &crate::http_date::now());
    write_header(dst, b"Content-Type", b"text/plain");
    // "404 Not Found\n"
    let body_len = code.len() + 1 + reason.len() + 1;
    write_header_u64(dst, b"Content-Length", body_len as u64);
    if status == 405 {
        write_header(dst, b"Allow", b"GET, HEAD");
    }
    if let Some(parts) = location {
        dst.extend_from_slice(b"Location: ");
        parts.iter().for_each(|p| dst.extend_from_slice(p));
        dst.extend_from_slice(b"\r\n");
    }
    conn.write(dst);
    end_head(dst);
    if !head {
        dst.extend_from_slice(code);
        dst.extend_from_slice(b" ");
        dst.extend_from_slice(reason.as_bytes());
        dst.extend_from_slice(b"\n");
    }
}
