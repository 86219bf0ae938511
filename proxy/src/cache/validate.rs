//! Validation (RFC 9111 4.3): the conditional request a cache sends for a stored response,
//! what a 304 does to the stored head, and whether a client's own conditional request is
//! answered 304 from a stored response. Sans-IO: heads in, heads out.
//!
//! Stored heads are the ones `exchange::cached` writes (a status line, then `Name: value`
//! lines with CRLF, no empty line), so they are read here line by line.

use crate::http_date::parse_http_date;
use crate::preconditions::{Conditions, Outcome};
use bytes::BytesMut;
use shared::http::encode::write_header;
use shared::http::framing::{is_hop_by_hop, trim_ows};

/// The validators of a stored response (4.3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Validators<'a> {
    pub etag: Option<&'a [u8]>,
    pub last_modified: Option<&'a [u8]>,
}

impl Validators<'_> {
    pub fn any(&self) -> bool {
        self.etag.is_some() || self.last_modified.is_some()
    }
}

/// The fields of a stored head, after its status line: (name, value) pairs.
pub fn stored_fields(head: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    head.split(|&b| b == b'\n').skip(1).filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        Some((&line[..colon], trim_ows(&line[colon + 1..])))
    })
}

/// The first field `name` of a stored head.
fn stored_field<'a>(head: &'a [u8], name: &str) -> Option<&'a [u8]> {
    stored_fields(head)
        .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v)
}

/// The ETag and Last-Modified of a stored head.
pub fn validators(head: &[u8]) -> Validators<'_> {
    Validators {
        etag: stored_field(head, "etag"),
        last_modified: stored_field(head, "last-modified"),
    }
}

/// The request fields a conditional request of the cache's own replaces (the client's
/// conditionals answer the client, not the cache: nginx clears them too when it caches).
fn is_client_conditional(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"if-none-match") || name.eq_ignore_ascii_case(b"if-modified-since")
}

/// The request fields whose answer is for the client that sent them alone: its
/// preconditions and its range. An answer to them (a 304, 412, 206 or 416) is not the
/// response to the key's plain GET.
fn is_client_only(name: &[u8]) -> bool {
    is_client_conditional(name)
        || [
            &b"if-match"[..],
            b"if-unmodified-since",
            b"range",
            b"if-range",
        ]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
}

/// The upstream request head in `out` (request line and fields, no empty line) without the
/// fields `drop` names.
fn drop_request_fields(out: &mut BytesMut, drop: impl Fn(&[u8]) -> bool) {
    let mut kept = BytesMut::with_capacity(out.len() + 128);
    for (i, line) in out[..].split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        if i > 0 && drop(name) {
            continue;
        }
        kept.extend_from_slice(line);
        kept.extend_from_slice(b"\n");
    }
    // Back into the connection's buffer, which keeps its capacity.
    out.clear();
    out.extend_from_slice(&kept);
}

/// Make the upstream request head in `out` a request of the cache's own, which no client
/// sees the answer to (a background revalidation): none of the client's preconditions nor
/// its range (their answers would replace the stored response for everyone); conditional on
/// the stored response's validators `v`, if it has them (as [`make_conditional`]).
pub fn make_own_request(out: &mut BytesMut, v: Option<Validators<'_>>) {
    drop_request_fields(out, is_client_only);
    add_validators(out, v.unwrap_or_default());
}

/// The upstream request head in `out` (request line and fields, no empty line) without a
/// Range or If-Range: a HEAD's fill asks for the whole response (RFC 9110 14.2: Range is for
/// GET only; nginx drops it for a HEAD too).
pub fn make_whole(out: &mut BytesMut) {
    drop_request_fields(out, |n| {
        n.eq_ignore_ascii_case(b"range") || n.eq_ignore_ascii_case(b"if-range")
    });
}

/// Turn the upstream request head in `out` (request line and fields, no empty line) into a
/// conditional request for a stored response with validators `v`: the client's
/// If-None-Match and If-Modified-Since go, `If-None-Match: <etag>` and
/// `If-Modified-Since: <last-modified>` come (4.3.1: "MUST send the relevant entity tags
/// ... SHOULD send the Last-Modified value").
pub fn make_conditional(out: &mut BytesMut, v: Validators<'_>) {
    drop_request_fields(out, is_client_conditional);
    add_validators(out, v);
}

/// Take back what [`make_conditional`] added to the upstream request head in `out`: the
/// request asks again without a validator (the client's own If-None-Match and
/// If-Modified-Since are gone with it).
pub fn make_unconditional(out: &mut BytesMut) {
    drop_request_fields(out, is_client_conditional);
}

/// `If-None-Match: <etag>` and `If-Modified-Since: <last-modified>` for the validators `v`.
fn add_validators(out: &mut BytesMut, v: Validators<'_>) {
    if let Some(etag) = v.etag {
        write_header(out, b"If-None-Match", etag);
    }
    if let Some(lm) = v.last_modified {
        write_header(out, b"If-Modified-Since", lm);
    }
}

/// Fields a 304 never updates in a stored response (RFC 9111 3.2: "Content-Length ...
/// Content-Encoding, Content-Range ... Transfer-Encoding" and hop-by-hop fields), plus the
/// cache's own.
fn kept_on_update(name: &str) -> bool {
    is_hop_by_hop(name)
        || [
            "content-length",
            "content-encoding",
            "content-range",
            "x-cache",
        ]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
}

/// Whether a 304 with fields `new` may update the stored response with ETag `stored`
/// (4.3.4): a strong ETag in the 304 selects a stored response with the same strong one, a
/// weak one a stored response it matches by weak comparison (RFC 9110 8.8.3.2: the same
/// opaque tag), and a 304 without one the response the request validated.
pub fn selects(stored: Option<&[u8]>, new: &[httparse::Header<'_>]) -> bool {
    let etag = new.iter().find(|h| h.name.eq_ignore_ascii_case("etag"));
    match (etag.map(|h| trim_ows(h.value)), stored) {
        (Some(n), Some(s)) if n.starts_with(b"W/") => n[2..] == *s.strip_prefix(b"W/").unwrap_or(s),
        (Some(n), Some(s)) => n == s,
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// Whether a response with fields `new` (a 206) has the same strong validator as the stored
/// response `stored` (RFC 9111 3.4, RFC 9110 8.8.1): the same strong ETag; or, when neither
/// has an ETag, the same Last-Modified that is strong for a cache (8.8.2.2: at least 60
/// seconds before the stored response's Date).
pub fn same_strong_validator(stored: &[u8], new: &[httparse::Header<'_>]) -> bool {
    let field = |name: &str| {
        new.iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| trim_ows(h.value))
    };
    let v = validators(stored);
    match (v.etag, field("etag")) {
        (Some(s), Some(n)) => !s.starts_with(b"W/") && s == n,
        (None, None) => {
            let (Some(s), Some(n)) = (v.last_modified, field("last-modified")) else {
                return false;
            };
            s == n && strong_last_modified(stored).is_some()
        }
        _ => false,
    }
}

/// The Last-Modified of the stored head `head` (seconds since the epoch) when it is a strong
/// validator for a cache (8.8.2.2: at least 60 seconds before the head's Date); `None`
/// without one, or when it is weak.
pub fn strong_last_modified(head: &[u8]) -> Option<u64> {
    let lm = validators(head).last_modified.and_then(parse_http_date)?;
    let date = stored_field(head, "date").and_then(parse_http_date);
    strong_for_a_cache(lm, date).then_some(lm)
}

/// Whether a Last-Modified of `lm` is strong for a cache in a response dated `date` (RFC
/// 9110 8.8.2.2: "at least 60 seconds before the Date value"; a response could change twice
/// within a second nearer its Date).
fn strong_for_a_cache(lm: u64, date: Option<u64>) -> bool {
    date.is_some_and(|d| lm.saturating_add(60) <= d)
}

/// Whether a response with fields `fields` has a strong validator (RFC 9110 8.8.1): a strong
/// ETag, or without an ETag a Last-Modified at least 60 seconds before its Date (8.8.2.2).
pub fn has_strong_validator(fields: &[httparse::Header<'_>]) -> bool {
    let field = |name: &str| {
        fields
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| trim_ows(h.value))
    };
    match field("etag") {
        Some(e) => !e.starts_with(b"W/"),
        None => {
            let lm = field("last-modified").and_then(parse_http_date);
            let date = field("date").and_then(parse_http_date);
            lm.is_some_and(|lm| strong_for_a_cache(lm, date))
        }
    }
}

/// The stored fields updated by a 304 (4.3.4: "use other header fields provided in the 304
/// (Not Modified) response to replace all instances of the corresponding header fields in the
/// stored response"), as (name, value) pairs.
pub fn updated_fields<'a>(
    stored: &'a [u8],
    new: &'a [httparse::Header<'a>],
) -> Vec<(&'a [u8], &'a [u8])> {
    let replaced = |n: &[u8]| {
        new.iter()
            .any(|h| !kept_on_update(h.name) && h.name.as_bytes().eq_ignore_ascii_case(n))
    };
    let mut out: Vec<(&[u8], &[u8])> = stored_fields(stored)
        .filter(|(n, _)| !replaced(n))
        .collect();
    out.extend(
        new.iter()
            .filter(|h| !kept_on_update(h.name))
            .map(|h| (h.name.as_bytes(), h.value)),
    );
    out
}

/// What a client's GET or HEAD (`request`) gets from the stored response of `status` with
/// head `head`: its preconditions evaluated as for any representation (RFC 9110 13.2.2,
/// see `crate::preconditions`): 412, 304, or the stored response. Only on a 2xx: 13.2.1, "a
/// server MUST ignore all received preconditions if its response to the same request
/// without those conditions ... would have been a status code other than a 2xx".
pub fn precondition(request: &[httparse::Header<'_>], status: u16, head: &[u8]) -> Outcome {
    let c = Conditions::of(request);
    if !c.any() || !is_success(status) {
        return Outcome::Proceed;
    }
    crate::preconditions::evaluate(&c, &current(head))
}

/// What a client's preconditions are evaluated against for the stored head `head`: its ETag,
/// its Last-Modified and its Date, which If-Modified-Since is compared with when there is
/// no Last-Modified (RFC 9111 4.3.2's second case; its third, the time the response came,
/// is the Date too: the store gives a response that came without one that time as its Date).
pub fn current(head: &[u8]) -> crate::preconditions::Validators<'_> {
    let v = validators(head);
    crate::preconditions::Validators {
        etag: v.etag,
        last_modified: v.last_modified.and_then(parse_http_date),
        stored_date: stored_field(head, "date").and_then(parse_http_date),
    }
}

/// The head of a 304 answering a client from a stored head: its status line replaced, and
/// without the representation fields a 304 does not carry (RFC 9110 15.4.5: Content-Type,
/// Content-Length and the like; ETag, Last-Modified, Cache-Control, Expires, Vary stay).
pub fn not_modified_head(stored: &[u8]) -> BytesMut {
    let mut out = BytesMut::with_capacity(stored.len() + 32);
    out.extend_from_slice(b"HTTP/1.1 304 Not Modified\r\n");
    for (n, v) in stored_fields(stored) {
        let drop = [
            &b"content-type"[..],
            b"content-language",
            b"content-encoding",
            b"content-length",
        ]
        .iter()
        .any(|d| n.eq_ignore_ascii_case(d));
        if !drop {
            write_header(&mut out, n, v);
        }
    }
    out
}

/// A 2xx status: the ones preconditions apply to (RFC 9110 13.2.1).
pub fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}
