//! The `return` action: a response the proxy writes itself, as nginx's `return` does.
//!
//! - Built once at start ([`ReturnAction::new`]): templates parsed, random ranges numbered,
//!   the status checked (200-599; no body for 204 and 304).
//! - Rendered per request into the connection's head buffer ([`ReturnAction::render`]):
//!   status line, `Date`, `Content-Type`, `Content-Length`, `Location`, `Connection`, body.
//!   Nothing is allocated once the buffer has grown to the response's size.
//! - A status of 300 or more without a `body` gets a tiny HTML page naming the status, as
//!   nginx's does (`<center><h1>302 Found</h1></center>`); a 2xx without one has an empty
//!   body. HEAD gets the head only, with the length the body would have had.
//! - A request body that already arrived whole is skipped and the connection kept; one still
//!   on its way (or chunked) is not waited for: the answer says `Connection: close`.
//!
//! # Layout
//! - [`template`]: `{variable}` templates; `rng`: the per-worker generator for
//!   `{random:A-B}`. The `Date` value is `crate::http_date`'s.

mod rng;
pub mod template;

pub use rng::Rng;

use bytes::BytesMut;
use shared::http::encode::{end_head, reason_phrase, write_header, write_header_u64};
use shared::http::{BodyKind, RequestHead, RequestMethod, Version};
use template::{Context, Template, Vars};

/// Distinct `{random:A-B}` ranges one action may use.
pub const MAX_RANGES: usize = 8;

/// A route's `return`, ready to render.
#[derive(Debug, Clone)]
pub struct ReturnAction {
    status: u16,
    /// `HTTP/1.1 302 Found\r\n`, written once.
    status_line: Box<[u8]>,
    location: Option<Template>,
    body: Template,
    content_type: Option<Box<[u8]>>,
    ranges: Box<[(u64, u64)]>,
}

/// How the response is framed for this request.
#[derive(Debug, Clone, Copy)]
pub struct Framing {
    pub version: Version,
    pub keep_alive: bool,
    /// HEAD: the head only.
    pub head_only: bool,
}

impl ReturnAction {
    /// Check and parse a `return = { ... }` table's values. The error is one line.
    pub fn new(
        status: u16,
        location: Option<&str>,
        body: Option<&str>,
        content_type: Option<&str>,
    ) -> Result<ReturnAction, String> {
        if !(200..=599).contains(&status) {
            return Err(format!("status {status}: expected 200 to 599"));
        }
        // RFC 9110 15.3.6 and 15.4.5: a 205 or 304 carries no content; a 204 has none at all.
        if matches!(status, 204 | 205 | 304) && body.is_some_and(|b| !b.is_empty()) {
            return Err(format!("a {status} response has no body"));
        }
        if let Some(c) = content_type {
            if c.is_empty() || c.chars().any(|ch| ch.is_control()) {
                return Err(format!("content_type `{c}` is not a media type"));
            }
        }
        let mut location = location
            .map(|l| Template::parse(l, Context::HeaderValue).map_err(|e| format!("location: {e}")))
            .transpose()?;
        let (mut body, content_type) = match body {
            Some(b) => (
                Template::parse(b, Context::Body).map_err(|e| format!("body: {e}"))?,
                Some(content_type.unwrap_or("text/plain")),
            ),
            None if status >= 300 && status != 304 => (
                Template::text(tiny_page(status).as_bytes()),
                Some(content_type.unwrap_or("text/html")),
            ),
            None => (Template::text(b""), content_type),
        };
        let mut ranges = Vec::new();
        if let Some(l) = &mut location {
            l.bind_ranges(&mut ranges);
        }
        body.bind_ranges(&mut ranges);
        if ranges.len() > MAX_RANGES {
            return Err(format!(
                "{} different {{random:A-B}} ranges: at most {MAX_RANGES}",
                ranges.len()
            ));
        }
        let reason = reason_phrase(status);
        Ok(ReturnAction {
            status,
            status_line: format!("HTTP/1.1 {status} {reason}\r\n")
                .into_bytes()
                .into(),
            location,
            body,
            content_type: content_type.map(|c| c.as_bytes().into()),
            ranges: ranges.into(),
        })
    }

    pub fn status(&self) -> u16 {
        self.status
    }

    /// Write the whole response into `out` (appended). `vars.randoms` is filled here.
    pub fn render(
        &self,
        vars: Vars<'_>,
        framing: Framing,
        rng: &Rng,
        date: &[u8],
        out: &mut BytesMut,
    ) {
        let mut drawn = [0u64; MAX_RANGES];
        for (slot, &(lo, hi)) in self.ranges.iter().enumerate() {
            drawn[slot] = rng.between(lo, hi);
        }
        let vars = Vars {
            randoms: &drawn[..self.ranges.len()],
            ..vars
        };
        let body_len = self.body.len(&vars);
        out.reserve(160 + body_len + self.location.as_ref().map_or(0, |l| l.len(&vars)));
        out.extend_from_slice(&self.status_line);
        write_header(out, b"Date", date);
        if let Some(ct) = &self.content_type {
            write_header(out, b"Content-Type", ct);
        }
        // RFC 9110 8.6: no Content-Length in a 204; a 304's would describe the unsent body.
        if !matches!(self.status, 204 | 304) {
            write_header_u64(out, b"Content-Length", body_len as u64);
        }
        if let Some(l) = &self.location {
            out.extend_from_slice(b"Location: ");
            l.render(&vars, out);
            out.extend_from_slice(b"\r\n");
        }
        if !framing.keep_alive {
            write_header(out, b"Connection", b"close");
        } else if framing.version == Version::Http10 {
            write_header(out, b"Connection", b"keep-alive");
        }
        end_head(out);
        if !framing.head_only {
            self.body.render(&vars, out);
        }
    }
}

/// nginx's page for a status it answers itself, without its signature line.
fn tiny_page(status: u16) -> String {
    let title = format!("{status} {}", reason_phrase(status));
    let title = title.trim_end();
    format!(
        "<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n</body>\r\n</html>\r\n"
    )
}

/// What rendering an answer needs of its worker: the generator of `{random:A-B}`, and
/// whether the worker is draining (an answer then closes its connection).
#[derive(Clone, Copy)]
pub struct AnswerCtx<'a> {
    pub rng: &'a Rng,
    pub draining: bool,
}

/// How a rendered answer is sent: `skip`, the request body to drop (`None`: it has not
/// arrived whole and the connection closes); `close`, the answer said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sending {
    pub skip: Option<usize>,
    pub close: bool,
}

/// Render `r`'s answer to the parsed request `head` (origin-form `target`, from the client
/// address `ip` as text, with `arrived` bytes after the head already read) into `out`, and
/// say how it is sent.
pub fn prepare(
    w: AnswerCtx<'_>,
    r: &ReturnAction,
    head: &RequestHead<'_, '_>,
    target: &str,
    ip: &[u8],
    arrived: usize,
    out: &mut BytesMut,
) -> Sending {
    let skip = body_skippable(head.body, arrived);
    // Draining: close after this answer unless requests pipelined behind it arrived.
    let pipelined = skip.is_some_and(|n| arrived > n);
    let close = !head.keep_alive || skip.is_none() || (w.draining && !pipelined);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let vars = Vars {
        host: head.authority.unwrap_or_default(),
        path: path.as_bytes(),
        query: query.as_bytes(),
        remote_addr: ip,
        randoms: &[],
    };
    let framing = Framing {
        version: head.version,
        keep_alive: !close,
        head_only: head.request_method() == RequestMethod::Head,
    };
    out.clear();
    r.render(vars, framing, w.rng, &crate::http_date::now(), out);
    Sending { skip, close }
}

/// The request body an answer can skip so the connection stays usable: none, or a body
/// that arrived whole (`arrived` bytes follow the head). `None`: not without reading it.
pub fn body_skippable(body: BodyKind, arrived: usize) -> Option<usize> {
    match body {
        BodyKind::Empty => Some(0),
        BodyKind::Length(n) if n <= arrived as u64 => Some(n as usize),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
