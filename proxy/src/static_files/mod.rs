//! Static files: a route that answers from a directory, as nginx's `root` does.
//!
//! - The whole request path is appended to the root (`/static/a.txt` under `www` is
//!   `www/static/a.txt`); `/dir/` serves `dir/<index>`, `/dir` is a 301 to `/dir/` (the
//!   normalised path: `//dir` too, never `//dir/`, another host to a browser), a
//!   directory without its index is 404 (no listings).
//! - GET and HEAD; anything else is 405 with `Allow: GET, HEAD`.
//! - ETag (`"mtime-size"` in hex, as nginx), Last-Modified, `If-None-Match` and
//!   `If-Modified-Since` -> 304, a single `Range` -> 206, several -> 200 with the whole file
//!   (no multipart, unlike nginx), unsatisfiable -> 416.
//! - Nothing outside the root is ever opened: the decoded path is checked (`path`) and the
//!   kernel checks again (`open`: `openat2` with `RESOLVE_BENEATH`).
//! - A missing root is 404 at request time, and found again once it exists.
//!
//! # Layout
//! - [`path`]: target -> relative path, and what is refused (sans-IO);
//! - [`meta`]: Content-Type and ETag (sans-IO; HTTP dates are `crate::http_date`);
//! - [`decide`]: 200 / 206 / 304 / 416 from the validators and conditions (sans-IO);
//! - [`respond`]: the heads (sans-IO);
//! - [`open`]: opening beneath the root; [`cache`]: the open-file caches (per worker, per
//!   generation);
//! - this file: [`StaticSite`] and [`StaticQuery`] (what a request asks of a file).
//!
//! The I/O of answering (the entry point `serve`, and the body sent from memory,
//! `sendfile(2)` or `pread` + write) is `crate::static_serve`.

pub mod cache;
pub mod decide;
pub mod meta;
pub mod open;
pub mod path;
pub mod respond;
#[cfg(test)]
mod tests;

use crate::io::offset_in;
use decide::{Conditions, Method};
use shared::http::target::origin_bytes;
use shared::http::RequestHead;
use std::path::PathBuf;

/// A static route's settings, resolved: `root` is absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticSite {
    pub root: PathBuf,
    /// The file served for a directory (`index.html` by default).
    pub index: String,
}

/// Where a part of the request head lies in the client's read buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn of(buf: &[u8], part: &[u8]) -> Span {
        Span {
            start: offset_in(buf, part) as u32,
            len: part.len() as u32,
        }
    }

    pub(crate) fn get(self, buf: &[u8]) -> &[u8] {
        &buf[self.start as usize..(self.start + self.len) as usize]
    }
}

/// What a request field's second line makes of it.
#[derive(Clone, Copy)]
enum Repeat {
    List,
    Invalid,
    FirstCounts,
}

/// What a static response needs of the request head, taken while it is parsed, as
/// positions in the read buffer (`Copy`, nothing allocated; the buffer keeps the bytes
/// until [`serve`] consumes the head).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaticQuery {
    pub(crate) method: Option<Method>,
    /// Path and query (origin-form); `None`: a target that names no path (`*`).
    pub(crate) target: Option<Span>,
    if_match: Option<Span>,
    if_unmodified_since: Option<Span>,
    if_none_match: Option<Span>,
    if_modified_since: Option<Span>,
    range: Option<Span>,
    if_range: Option<Span>,
}

impl StaticQuery {
    /// Take the fields from a head parsed from `buf` (the client's read buffer).
    pub fn from_head(head: &RequestHead<'_, '_>, buf: &[u8]) -> StaticQuery {
        let mut q = StaticQuery {
            method: Some(Method::from_bytes(head.method.as_bytes())),
            target: origin_bytes(head.target.as_bytes()).map(|t| Span::of(buf, t)),
            ..StaticQuery::default()
        };
        q.take_fields(head.headers, buf);
        q
    }

    fn take_fields(&mut self, headers: &[httparse::Header<'_>], buf: &[u8]) {
        for h in headers {
            let eq = |n: &str| h.name.eq_ignore_ascii_case(n);
            // (where the value goes, what its repeats make of it)
            let (slot, repeat) = match h.name.len() {
                5 if eq("range") => (&mut self.range, Repeat::FirstCounts),
                8 if eq("if-range") => (&mut self.if_range, Repeat::FirstCounts),
                8 if eq("if-match") => (&mut self.if_match, Repeat::List),
                13 if eq("if-none-match") => (&mut self.if_none_match, Repeat::List),
                17 if eq("if-modified-since") => (&mut self.if_modified_since, Repeat::Invalid),
                19 if eq("if-unmodified-since") => (&mut self.if_unmodified_since, Repeat::Invalid),
                _ => continue,
            };
            let span = Span::of(buf, h.value);
            match (slot, repeat) {
                (slot @ None, _) => *slot = Some(span),
                // A list field's lines are one list (RFC 9110 5.3): its span grows to the
                // end of this value, over the lines between, which the preconditions skip
                // by name (`preconditions::field_values`). No copy, nothing allocated.
                (Some(first), Repeat::List) => first.len = span.start + span.len - first.start,
                // A date sent twice is a list of dates, which is no valid date: ignored
                // (RFC 9110 13.1.3, 13.1.4). An empty value parses as none.
                (Some(first), Repeat::Invalid) => first.len = 0,
                // Range and If-Range are no lists: the first line counts.
                (Some(_), Repeat::FirstCounts) => {}
            }
        }
    }

    pub(crate) fn conditions<'b>(&self, buf: &'b [u8]) -> Conditions<'b> {
        let get = |s: Option<Span>| s.map(|s| s.get(buf));
        Conditions {
            preconditions: crate::preconditions::Conditions {
                if_match: get(self.if_match),
                if_unmodified_since: get(self.if_unmodified_since),
                if_none_match: get(self.if_none_match),
                if_modified_since: get(self.if_modified_since),
                // The spans hold a repeated list's lines (`take_fields`).
                fields: &[],
            },
            range: get(self.range),
            if_range: get(self.if_range),
        }
    }
}
