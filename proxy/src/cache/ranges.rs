//! What a GET or HEAD gets from a complete stored response: its preconditions (RFC 9110
//! 13.2.2, as `validate::precondition`), then, for a GET, its `Range` (RFC 9110 14.2, RFC 9111
//! 3.4: a cache may answer a range from a stored complete response). One pass over the
//! request's fields; the stored head is read only when the request has a conditional or a
//! range field, so a plain hit costs what it did.
//!
//! A single `bytes=` range is served 206 (`Content-Range: bytes first-last/length`); several
//! ranges get the whole 200 (14.2: a server MAY ignore Range); a range no byte of which exists
//! gets 416 with `Content-Range: bytes */length`; a malformed field or another unit, or an
//! `If-Range` the stored response fails (13.1.5: a strong ETag match, or exactly its
//! Last-Modified date), is ignored: 200.

use super::validate::validators;
use crate::http_date::parse_http_date;
use crate::preconditions::{evaluate, Conditions, Outcome};
use crate::static_files::decide::{parse_range, RangeSpec};

/// A 206's `Content-Range: bytes first-last/complete` (RFC 9110 14.4), with a known complete
/// length and `first <= last < complete`; `None` for anything else (`*`, another unit).
pub fn content_range(v: &[u8]) -> Option<(u64, u64, u64)> {
    let v = std::str::from_utf8(v).ok()?.trim();
    let rest = v.strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let num = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let (a, b, total) = (num(a)?, num(b)?, num(total)?);
    (a <= b && b < total).then_some((a, b, total))
}

/// The answer a stored response gives a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromStored {
    /// The whole stored response.
    Full,
    NotModified,
    PreconditionFailed,
    /// 206 with body bytes `start..=end`.
    Partial {
        start: u64,
        end: u64,
    },
    /// 416: no byte of the range exists.
    Unsatisfiable,
}

/// What `request` (a GET when `get`, else a HEAD) gets from a stored response of `status`
/// with head `head` and a body of `len` bytes. Its preconditions apply to a 2xx only (RFC 9110
/// 13.2.1) and its range to a 200 only (14.2: "only if the result in absence of the Range
/// header field would be a 200"): a stored 404 or 301 is served as it is.
pub fn from_stored(
    request: &[httparse::Header<'_>],
    (status, head): (u16, &[u8]),
    len: u64,
    get: bool,
) -> FromStored {
    if !crate::cache::validate::is_success(status) {
        return FromStored::Full;
    }
    let mut c = Conditions::default();
    let (mut range, mut if_range) = (None, None);
    for h in request {
        if c.take(h) {
            continue;
        }
        if h.name.len() == 5 && h.name.eq_ignore_ascii_case("range") {
            range.get_or_insert(h.value);
        } else if h.name.len() == 8 && h.name.eq_ignore_ascii_case("if-range") {
            if_range.get_or_insert(h.value);
        }
    }
    c.fields = request;
    let range = range.filter(|_| get && status == 200);
    if !c.any() && range.is_none() {
        return FromStored::Full;
    }
    let v = validators(head);
    if c.any() {
        match evaluate(&c, &crate::cache::validate::current(head)) {
            Outcome::Failed => return FromStored::PreconditionFailed,
            Outcome::NotModified => return FromStored::NotModified,
            Outcome::Proceed => {}
        }
    }
    let Some(range) = range else {
        return FromStored::Full;
    };
    if !if_range_holds(if_range, v.etag, head) {
        return FromStored::Full;
    }
    match parse_range(range, len) {
        RangeSpec::One { start, end } => FromStored::Partial { start, end },
        RangeSpec::Unsatisfiable => FromStored::Unsatisfiable,
        RangeSpec::Ignore => FromStored::Full,
    }
}

/// `If-Range` (RFC 9110 13.1.5) against the stored head `head` (ETag `etag`): a strong entity
/// tag equal to the stored one, or a date equal to its Last-Modified when that is a strong
/// validator (8.8.2.2: at least 60 s before the stored Date); a weak tag, or a date of a weak
/// Last-Modified, never holds.
fn if_range_holds(if_range: Option<&[u8]>, etag: Option<&[u8]>, head: &[u8]) -> bool {
    let Some(r) = if_range.map(<[u8]>::trim_ascii) else {
        return true;
    };
    if r.starts_with(b"\"") {
        return etag.is_some_and(|e| e == r);
    }
    if r.starts_with(b"W/") {
        return false;
    }
    let lm = super::validate::strong_last_modified(head);
    lm.is_some() && parse_http_date(r) == lm
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Its Last-Modified a minute before its Date: a strong validator (RFC 9110 8.8.2.2).
    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nETag: \"v1\"\r\n\
Last-Modified: Tue, 14 Nov 2023 22:13:20 GMT\r\nDate: Tue, 14 Nov 2023 22:14:20 GMT\r\n";

    #[test]
    fn ranges_and_conditions_against_a_stored_response() {
        use FromStored::*;
        let h = |n: &'static str, v: &'static str| httparse::Header {
            name: n,
            value: v.as_bytes(),
        };
        let cases: Vec<(Vec<httparse::Header<'static>>, bool, FromStored)> = vec![
            (vec![], true, Full),
            (
                vec![h("Range", "bytes=0-1")],
                true,
                Partial { start: 0, end: 1 },
            ),
            (
                vec![h("range", "bytes=1-")],
                true,
                Partial { start: 1, end: 9 },
            ),
            (
                vec![h("Range", "bytes=-1")],
                true,
                Partial { start: 9, end: 9 },
            ),
            (
                vec![h("Range", "bytes=5-100")],
                true,
                Partial { start: 5, end: 9 },
            ),
            // HEAD: no range.
            (vec![h("Range", "bytes=0-1")], false, Full),
            // Several ranges: the whole response; malformed or another unit: ignored.
            (vec![h("Range", "bytes=0-1,4-5")], true, Full),
            (vec![h("Range", "bytes=x-1")], true, Full),
            (vec![h("Range", "items=0-1")], true, Full),
            (vec![h("Range", "bytes=10-")], true, Unsatisfiable),
            (vec![h("Range", "bytes=-0")], true, Unsatisfiable),
            // If-Range: a strong match or the exact date holds; otherwise the whole.
            (
                vec![h("Range", "bytes=0-1"), h("If-Range", "\"v1\"")],
                true,
                Partial { start: 0, end: 1 },
            ),
            (
                vec![h("Range", "bytes=0-1"), h("If-Range", "\"v2\"")],
                true,
                Full,
            ),
            (
                vec![h("Range", "bytes=0-1"), h("If-Range", "W/\"v1\"")],
                true,
                Full,
            ),
            (
                vec![
                    h("Range", "bytes=0-1"),
                    h("If-Range", "Tue, 14 Nov 2023 22:13:20 GMT"),
                ],
                true,
                Partial { start: 0, end: 1 },
            ),
            (
                vec![
                    h("Range", "bytes=0-1"),
                    h("If-Range", "Tue, 14 Nov 2023 22:13:21 GMT"),
                ],
                true,
                Full,
            ),
            // Preconditions come first.
            (
                vec![h("Range", "bytes=0-1"), h("If-None-Match", "\"v1\"")],
                true,
                NotModified,
            ),
            (
                vec![h("If-Match", "\"v2\""), h("Range", "bytes=0-1")],
                true,
                PreconditionFailed,
            ),
            (
                vec![h("If-None-Match", "\"v2\""), h("Range", "bytes=0-1")],
                true,
                Partial { start: 0, end: 1 },
            ),
        ];
        for (request, get, want) in cases {
            assert_eq!(
                from_stored(&request, (200, HEAD), 10, get),
                want,
                "{request:?} get={get}"
            );
        }
    }

    #[test]
    fn an_if_range_date_holds_only_for_a_strong_last_modified() {
        // RFC 9110 13.1.5: a date that is not a strong validator makes the condition false.
        let request = [
            httparse::Header {
                name: "Range",
                value: b"bytes=0-1",
            },
            httparse::Header {
                name: "If-Range",
                value: b"Tue, 14 Nov 2023 22:13:20 GMT",
            },
        ];
        let weak = b"HTTP/1.1 200 OK\r\nLast-Modified: Tue, 14 Nov 2023 22:13:20 GMT\r\n\
Date: Tue, 14 Nov 2023 22:14:19 GMT\r\n";
        let undated = b"HTTP/1.1 200 OK\r\nLast-Modified: Tue, 14 Nov 2023 22:13:20 GMT\r\n";
        let cases: [(&[u8], FromStored); 3] = [
            (HEAD, FromStored::Partial { start: 0, end: 1 }),
            (weak, FromStored::Full),
            (undated, FromStored::Full),
        ];
        for (head, want) in cases {
            let got = from_stored(&request, (200, head), 10, true);
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn a_stored_answer_other_than_a_200_takes_no_range_and_other_than_a_2xx_no_precondition() {
        // RFC 9110 13.2.1 and 14.2: a stored 404 or 301 is the answer whatever the request's
        // preconditions and range say; a stored 204 (or 203) takes preconditions, no range.
        use FromStored::*;
        let h = |n: &'static str, v: &'static str| httparse::Header {
            name: n,
            value: v.as_bytes(),
        };
        let fields = [
            vec![h("Range", "bytes=0-3")],
            vec![h("Range", "bytes=100-")],
            vec![h("If-None-Match", "*")],
            vec![h("If-None-Match", "\"v1\"")],
            vec![h("If-Match", "\"abc\"")],
            vec![h("If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")],
        ];
        for status in [301, 404, 410, 500] {
            for request in &fields {
                assert_eq!(
                    from_stored(request, (status, HEAD), 10, true),
                    Full,
                    "{status} {request:?}"
                );
            }
        }
        let expect = [
            Full,
            Full,
            NotModified,
            NotModified,
            PreconditionFailed,
            PreconditionFailed,
        ];
        for (request, want) in fields.iter().zip(expect) {
            assert_eq!(
                from_stored(request, (204, HEAD), 10, true),
                want,
                "204 {request:?}"
            );
        }
    }

    #[test]
    fn content_range_of_a_206() {
        type Parsed = Option<(u64, u64, u64)>;
        let table: [(&str, Parsed); 10] = [
            ("bytes 0-4/10", Some((0, 4, 10))),
            (" bytes 7-9/10 ", Some((7, 9, 10))),
            ("bytes 0-0/1", Some((0, 0, 1))),
            ("bytes 0-4/*", None),
            ("bytes */10", None),
            ("bytes 5-4/10", None),
            ("bytes 0-10/10", None),
            ("items 0-4/10", None),
            ("bytes 0-+4/10", None),
            ("bytes 0-4/99999999999999999999999", None),
        ];
        for (v, want) in table {
            assert_eq!(content_range(v.as_bytes()), want, "{v:?}");
        }
    }
}
