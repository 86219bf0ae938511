//! Which response a GET or HEAD of a file gets, from the file's validators and the request's
//! conditional and range fields (RFC 9110 13 and 14), decided in one plain function.
//!
//! Order (RFC 9110 13.2.2): the preconditions (`crate::preconditions`: If-Match, else
//! If-Unmodified-Since, then If-None-Match, else If-Modified-Since), then `Range` (only for
//! GET, only when `If-Range`, if sent, still matches). Ranges: a single `bytes=` range is served as 206; several ranges get the
//! whole file as 200, since we send no `multipart/byteranges` (nginx does; a client must
//! accept a 200 for any range request, RFC 9110 14.2); a range the file cannot satisfy is
//! 416 with `Content-Range: bytes */size`; a malformed `Range` is ignored (RFC 9110 14.2).

use crate::http_date::parse_http_date;
use crate::preconditions::{self, Outcome};

/// The request method as a file server sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    /// Anything else: 405 with `Allow: GET, HEAD`.
    Other,
}

impl Method {
    pub fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            _ => Method::Other,
        }
    }
}

/// The request fields that make a response conditional or partial.
#[derive(Debug, Clone, Copy, Default)]
pub struct Conditions<'a> {
    pub preconditions: preconditions::Conditions<'a>,
    pub range: Option<&'a [u8]>,
    pub if_range: Option<&'a [u8]>,
}

/// What identifies the file's current content.
#[derive(Debug, Clone, Copy)]
pub struct Validators<'a> {
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: i64,
    /// With its quotes.
    pub etag: &'a [u8],
}

/// The response for a GET or HEAD of an existing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// 304: the client's copy is current.
    NotModified,
    /// 412: If-Match or If-Unmodified-Since failed.
    PreconditionFailed,
    /// 200 with the whole file.
    Full,
    /// 206 with bytes `start..=end`.
    Partial { start: u64, end: u64 },
    /// 416: no byte of the range exists.
    Unsatisfiable,
}

pub fn decide(method: Method, c: &Conditions<'_>, v: &Validators<'_>) -> Reply {
    let current = preconditions::Validators {
        etag: Some(v.etag),
        last_modified: u64::try_from(v.mtime).ok(),
        stored_date: None,
    };
    match preconditions::evaluate(&c.preconditions, &current) {
        Outcome::Failed => return Reply::PreconditionFailed,
        Outcome::NotModified => return Reply::NotModified,
        Outcome::Proceed => {}
    }
    let Some(range) = c.range else {
        return Reply::Full;
    };
    if method != Method::Get || !if_range_holds(c.if_range, v) {
        return Reply::Full;
    }
    match parse_range(range, v.size) {
        RangeSpec::One { start, end } => Reply::Partial { start, end },
        RangeSpec::Unsatisfiable => Reply::Unsatisfiable,
        RangeSpec::Ignore => Reply::Full,
    }
}

/// `If-Range` (RFC 9110 13.1.5): the range applies only if the tag matches strongly or the
/// date is exactly the Last-Modified date.
fn if_range_holds(if_range: Option<&[u8]>, v: &Validators<'_>) -> bool {
    let Some(r) = if_range.map(<[u8]>::trim_ascii) else {
        return true;
    };
    if r.starts_with(b"\"") {
        return r == v.etag;
    }
    parse_http_date(r).map(|d| d as i64) == Some(v.mtime)
}

/// A `Range` field read against a file size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeSpec {
    /// Serve `start..=end`.
    One { start: u64, end: u64 },
    /// 416.
    Unsatisfiable,
    /// Serve the whole file: malformed, another unit, or several ranges.
    Ignore,
}

/// Parse `bytes=first-last`, `bytes=first-` or `bytes=-suffix` against `size`.
pub fn parse_range(field: &[u8], size: u64) -> RangeSpec {
    let field = field.trim_ascii();
    let Some(set) = field
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case(b"bytes="))
        .map(|_| &field[6..])
    else {
        return RangeSpec::Ignore;
    };
    if set.contains(&b',') {
        return RangeSpec::Ignore;
    }
    let set = set.trim_ascii();
    let Some(dash) = set.iter().position(|&b| b == b'-') else {
        return RangeSpec::Ignore;
    };
    let (first, last) = (&set[..dash], &set[dash + 1..]);
    match (number(first), number(last)) {
        // bytes=-N: the last N bytes.
        (None, Some(n)) if first.is_empty() => {
            if n == 0 || size == 0 {
                RangeSpec::Unsatisfiable
            } else {
                RangeSpec::One {
                    start: size - n.min(size),
                    end: size - 1,
                }
            }
        }
        (Some(a), b) if b.is_some() || last.is_empty() => {
            if b.is_some_and(|b| b < a) {
                return RangeSpec::Ignore;
            }
            if a >= size {
                return RangeSpec::Unsatisfiable;
            }
            RangeSpec::One {
                start: a,
                end: b.map_or(size - 1, |b| b.min(size - 1)),
            }
        }
        _ => RangeSpec::Ignore,
    }
}

/// A decimal number (digits only: no sign, no spaces), `u64::MAX` for one past it: a
/// position that large is past any file's length, which decides the range (RFC 9110
/// 14.1.2: a last-pos there means to the end, a first-pos there is unsatisfiable, a
/// suffix that long is the whole file) as well as the exact number would.
fn number(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |acc, &b| {
        acc.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}
