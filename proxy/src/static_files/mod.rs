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
//! - [`send`]: the body, from memory, `sendfile(2)` or `pread` + write;
//! - this file: [`StaticSite`], [`StaticQuery`] and [`serve`], the entry point.

pub mod cache;
pub mod decide;
pub mod meta;
pub mod open;
pub mod path;
pub mod respond;
mod send;
#[cfg(test)]
mod tests;

use crate::client::{linger_close, ClientConn};
use crate::exchange::Next;
use crate::forward::RequestInfo;
use crate::io::offset_in;
use bytes::Buf;
use cache::Found;
use decide::{decide, Conditions, Method, Validators};
use respond::{Body, Conn};
use shared::http::target::normalize_path;
use shared::http::{BodyKind, RequestHead};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

/// A static route's settings, resolved: `root` is absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticSite {
    pub root: PathBuf,
    /// The file served for a directory (`index.html` by default).
    pub index: String,
}

/// Where a part of the request head lies in the client's read buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
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

    fn get(self, buf: &[u8]) -> &[u8] {
        &buf[self.start as usize..(self.start + self.len) as usize]
    }
}

/// What a static response needs of the request head, taken while it is parsed, as
/// positions in the read buffer (`Copy`, nothing allocated; the buffer keeps the bytes
/// until [`serve`] consumes the head).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaticQuery {
    method: Option<Method>,
    /// Path and query (origin-form); `None`: a target that names no path (`*`).
    target: Option<Span>,
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
            target: origin_path(head.target.as_bytes()).map(|t| Span::of(buf, t)),
            ..StaticQuery::default()
        };
        q.take_fields(head.headers, buf);
        q
    }

    /// Take the fields from a request head the codec already accepted, parsing it again
    /// (for a caller that did not keep the parsed head: the test-only whole-site mode).
    pub fn reparse(head: &[u8]) -> StaticQuery {
        let mut few = [httparse::EMPTY_HEADER; 64];
        match Self::reparse_with(head, &mut few) {
            Some(q) => q,
            None => {
                let cap = shared::http::limits::MAX_HEADERS_CAP;
                let mut all = vec![httparse::EMPTY_HEADER; cap];
                Self::reparse_with(head, &mut all).unwrap_or_default()
            }
        }
    }

    /// `None`: more fields than `storage` holds.
    fn reparse_with<'b>(
        head: &'b [u8],
        storage: &mut [httparse::Header<'b>],
    ) -> Option<StaticQuery> {
        let mut req = httparse::Request::new(storage);
        match req.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            Err(httparse::Error::TooManyHeaders) => return None,
            _ => return Some(StaticQuery::default()),
        }
        let mut q = StaticQuery {
            method: req.method.map(|m| Method::from_bytes(m.as_bytes())),
            target: req
                .path
                .and_then(|t| origin_path(t.as_bytes()))
                .map(|t| Span::of(head, t)),
            ..StaticQuery::default()
        };
        q.take_fields(req.headers, head);
        Some(q)
    }

    fn take_fields(&mut self, headers: &[httparse::Header<'_>], buf: &[u8]) {
        for h in headers {
            let eq = |n: &str| h.name.eq_ignore_ascii_case(n);
            let slot = match h.name.len() {
                5 if eq("range") => &mut self.range,
                8 if eq("if-range") => &mut self.if_range,
                8 if eq("if-match") => &mut self.if_match,
                13 if eq("if-none-match") => &mut self.if_none_match,
                17 if eq("if-modified-since") => &mut self.if_modified_since,
                19 if eq("if-unmodified-since") => &mut self.if_unmodified_since,
                _ => continue,
            };
            // A repeated Range or If-* field: the first counts (a list field's repeats
            // would need joining; clients do not send them).
            if slot.is_none() {
                *slot = Some(Span::of(buf, h.value));
            }
        }
    }

    fn conditions<'b>(&self, buf: &'b [u8]) -> Conditions<'b> {
        let get = |s: Option<Span>| s.map(|s| s.get(buf));
        Conditions {
            preconditions: crate::preconditions::Conditions {
                if_match: get(self.if_match),
                if_unmodified_since: get(self.if_unmodified_since),
                if_none_match: get(self.if_none_match),
                if_modified_since: get(self.if_modified_since),
            },
            range: get(self.range),
            if_range: get(self.if_range),
        }
    }
}

/// The path-and-query part of a target: origin-form as it is, absolute-form after its
/// authority (empty when it has no path: the root).
fn origin_path(target: &[u8]) -> Option<&[u8]> {
    if target.starts_with(b"/") {
        return Some(target);
    }
    let at = target.windows(3).position(|w| w == b"://")? + 3;
    let rest = &target[at..];
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    Some(&rest[end..])
}

thread_local! {
    /// The decoded path of the request being answered (grown once, then reused).
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(256));
    /// The normalised path of a directory redirect (grown once, then reused).
    static LOCATION: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Answer one request from `site`. The request head is `req.head_len` bytes at the front of
/// `c.cin`, and `q` was taken from it; both are consumed here. Writes the whole response
/// and says whether the connection goes on.
///
/// A request body (rare on GET) is skipped when it arrived whole with the head; otherwise
/// the connection closes after the response (the body is not read).
pub async fn serve(
    c: &mut ClientConn,
    site: &StaticSite,
    req: &RequestInfo,
    q: &StaticQuery,
) -> Next {
    let w = c.w.clone();
    let after_head = c.cin.len() - req.head_len;
    let body_len = match req.body {
        BodyKind::Empty => Some(0),
        BodyKind::Length(n) if n <= after_head as u64 => Some(n as usize),
        _ => None,
    };
    let conn = Conn {
        version: req.version,
        keep_alive: req.keep_alive && body_len.is_some() && (!w.draining() || req.pipelined),
    };
    c.cout.clear();
    let plan = prepare(c, site, q, conn, std::time::Instant::now());
    c.cin.advance(req.head_len + body_len.unwrap_or(0));
    if !conn.keep_alive && body_len.is_some() {
        crate::client::cork_last_answer(c);
    }
    let sent = send::response(c, plan).await;
    match (sent, conn.keep_alive) {
        (Err(_), _) => Next::Close,
        (Ok(()), true) => Next::KeepAlive,
        (Ok(()), false) if body_len.is_none() => {
            linger_close(c).await;
            Next::Close
        }
        (Ok(()), false) => Next::Finished,
    }
}

/// A response decided: its head is in `cout`, and the body to follow.
pub(crate) struct Plan {
    file: Option<Rc<cache::File>>,
    body: Body,
}

/// Decide the response and write its head (and a small body) into `c.cout`.
fn prepare(
    c: &mut ClientConn,
    site: &StaticSite,
    q: &StaticQuery,
    conn: Conn,
    now: Instant,
) -> Plan {
    let buf = &c.cin[..];
    let out = &mut c.cout;
    let files = &c.g.statics;
    let method = q.method.unwrap_or(Method::Other);
    let head = method == Method::Head;
    let simple = |out: &mut _, status| {
        respond::simple(out, status, None, head, conn);
        Plan {
            file: None,
            body: Body::None,
        }
    };
    if method == Method::Other {
        return simple(out, 405);
    }
    let Some(target) = q.target.map(|t| t.get(buf)) else {
        return simple(out, 400);
    };
    let (path, query) = path::split_query(target);
    let path = if path.is_empty() { &b"/"[..] } else { path };
    SCRATCH.with(|scratch| {
        let rel = &mut *scratch.borrow_mut();
        let resolved = match path::resolve(path, rel) {
            Ok(r) => r,
            Err(e) => return simple(out, e.status()),
        };
        if resolved.dir {
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(site.index.as_bytes());
        }
        match files.lookup(&site.root, rel, now) {
            Err(e) => simple(out, e.status()),
            // A directory named like the index file is not an index.
            Ok(Found::Dir) if resolved.dir => simple(out, 404),
            Ok(Found::Dir) => redirect_to_dir(out, path, query, head, conn),
            Ok(Found::File(f)) => file_plan(out, f, method, &q.conditions(buf), conn),
        }
    })
}

/// `path` names a directory but does not end in `/`: a 301 to it with the slash (and the
/// query). The Location is the normalised path (`normalize_path`: slashes merged, dot
/// segments resolved, the router's view of it), so it starts with exactly one `/`: from the
/// raw path, `GET //images` answered `Location: //images/`, which a browser reads as the
/// host `images`. Escapes stay escaped (`/my%20dir/`).
fn redirect_to_dir(
    out: &mut bytes::BytesMut,
    path: &[u8],
    query: Option<&[u8]>,
    head: bool,
    conn: Conn,
) -> Plan {
    LOCATION.with_borrow_mut(|scratch| {
        // The router refused every path without a normal form before this route was chosen.
        match normalize_path(path, scratch) {
            Ok(dir) => {
                let slash: &[u8] = if dir.ends_with(b"/") { b"" } else { b"/" };
                let q: &[u8] = query.map_or(b"", |_| b"?");
                let location = [dir, slash, q, query.unwrap_or(b"")];
                respond::simple(out, 301, Some(&location), head, conn);
            }
            Err(_) => respond::simple(out, 400, None, head, conn),
        }
        Plan {
            file: None,
            body: Body::None,
        }
    })
}

fn file_plan(
    out: &mut bytes::BytesMut,
    f: Rc<cache::File>,
    method: Method,
    cond: &Conditions<'_>,
    conn: Conn,
) -> Plan {
    let v = Validators {
        size: f.info.size,
        mtime: f.info.mtime,
        etag: f.etag.as_bytes(),
    };
    let reply = decide(method, cond, &v);
    let body = respond::file_head(out, &f, reply, method == Method::Head, conn);
    Plan {
        file: Some(f),
        body,
    }
}
