//! The upstream's response head rewritten for the client, into a reused buffer (the request
//! side is `crate::request`).
//!
//! Client response: interim heads skipped (`shared::http::parse_final_response`), hop-by-hop
//! fields removed and the framing decided here: a known length is passed on; chunked and
//! close-delimited bodies are re-framed as chunked for HTTP/1.1 clients and sent
//! close-delimited to HTTP/1.0 clients; a 101 is tunnelled only to a WebSocket upgrade and
//! only when it switched to websocket alone (else 502). The head is written when it is
//! parsed, all but its Connection field, which [`end_client_head`] adds once the exchange
//! knows whether the client connection stays (an early answer closes it): the head is
//! parsed once.
//!
//! The rewriting itself (`response_info`, `write_client_head`) takes plain inputs, a parsed
//! head and options, and is tested by tables in `forward/tests.rs`.

use crate::config::route_opts::HeaderEdits;
use crate::error::ProxyError;
use crate::request::{eq, with_headers, FieldSpans, Named, RequestInfo, Span};
use crate::response_memo::{ClientKey, ResponseMemo};
use bytes::BytesMut;
use shared::http::encode::{copy_fields, write_header, write_header_u64, write_status_line};
use shared::http::framing::{is_hop_by_hop, trim_ows};
/// Whether a buffer starts with an interim head: the codec's own look (leading empty lines
/// skipped), so that every interim head the final head's parse skips is one passed on here.
pub use shared::http::response::starts_interim;
use shared::http::{
    parse_final_response, parse_final_response_memo, BodyKind, CodecError, RequestMethod,
    ResponseHead, Status, Version,
};

/// How the response body reaches the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFraming {
    /// No body (HEAD, 204, 304): the head only.
    Empty,
    /// Content-Length, passed through byte for byte.
    Length,
    /// Re-framed as chunked (from chunked or close-delimited upstream bodies).
    Chunked,
    /// Close-delimited: HTTP/1.0 clients when the length is unknown.
    Close,
    /// 101 to a WebSocket upgrade: bytes both ways.
    Tunnel,
}

/// A parsed upstream response head, reduced to what the relay needs.
#[derive(Debug, Clone, Copy)]
pub struct ResponseInfo {
    /// The final status (a 304 ends a revalidation; an answer to an unsafe method that is
    /// not an error invalidates a cached key).
    pub status: u16,
    /// Bytes of the read buffer the head took (skipped 1xx heads included).
    pub head_len: usize,
    pub body: BodyKind,
    pub framing: ClientFraming,
    /// The upstream connection may carry another request after this body.
    pub upstream_keep_alive: bool,
    /// The client connection stays open after this response.
    pub client_keep_alive: bool,
    /// The client's HTTP version (an HTTP/1.0 client is told it may keep the connection).
    pub client_version: Version,
    /// The client's head gets a Date: a final response came without one (RFC 9110 6.6.1:
    /// "A recipient with a clock ... MUST ... append a corresponding Date header field"),
    /// and the route's `response_headers` do not name it. Set by [`prepare_response`].
    pub add_date: bool,
}

/// Whether the client connection stays open after a response framed as `framing` to `req`.
/// `drained`: the proxy is draining and no request was received behind this one (pipelined
/// requests already in are served first, then the connection closes).
fn keeps_client(req: &RequestInfo, drained: bool, framing: ClientFraming) -> bool {
    req.keep_alive && !drained && !matches!(framing, ClientFraming::Close | ClientFraming::Tunnel)
}

impl ResponseInfo {
    /// Requests arrived behind `req`'s body while it was read (`RequestInfo::pipelined` saw
    /// only what was behind the head): received before this answer, so a drain serves them
    /// too.
    pub fn pipelined_behind_body(&mut self, req: &RequestInfo) {
        self.client_keep_alive = keeps_client(req, false, self.framing);
    }

    /// This response answers a request whose body was not all sent (the upstream answered
    /// early, a 413 or a 401): the rest of the client's body is never read, so the client
    /// connection closes after it, and the upstream connection, which got part of a body, is
    /// not reused. A switch to a tunnel then makes no sense.
    pub fn answered_early(self) -> Result<Self, ProxyError> {
        if self.framing == ClientFraming::Tunnel {
            return Err(ProxyError::BadResponse(CodecError::InvalidStatus));
        }
        Ok(ResponseInfo {
            upstream_keep_alive: false,
            client_keep_alive: false,
            ..self
        })
    }
}

/// Where a final response head's reason and fields lie in the upstream buffer, recorded by
/// its one parse ([`prepare_response`]) when a cache fetch asks for them ([`Self::want`]):
/// storing a response and refreshing an entry with a 304 read them there, without parsing
/// the head again. The connection's, reused (no allocation once it held the longest head);
/// other exchanges record nothing.
#[derive(Debug, Default)]
pub struct ResponseFields {
    wanted: bool,
    reason: Span,
    fields: FieldSpans,
}

impl ResponseFields {
    /// Record the next final head parsed (`true`, set before a cache fetch's exchange), or
    /// not (`false`, set after it).
    pub fn want(&mut self, on: bool) {
        self.wanted = on;
    }

    fn record(&mut self, head: &ResponseHead<'_, '_>, buf: &[u8]) {
        if self.wanted {
            self.reason = Span::of(buf, head.reason.as_bytes());
            self.fields.record(head.headers, buf);
        }
    }

    /// Run `f` with the reason and the fields of the head last recorded, as slices of `buf`
    /// (the upstream buffer that head was parsed from).
    pub fn with<T>(&self, buf: &[u8], f: impl FnOnce(&str, &[httparse::Header<'_>]) -> T) -> T {
        let reason = std::str::from_utf8(self.reason.get(buf)).unwrap_or_default();
        self.fields.with(buf, |fields| f(reason, fields))
    }
}

/// Parse the upstream's final response head in `buf` (after any interim heads) and write the
/// client's head into `out`, all but its Connection field and final CRLF: [`end_client_head`]
/// writes those once the exchange knows whether the client connection stays. The head's
/// fields go to `fields` when it wants them. `Ok(None)`: incomplete. A head `memo` holds
/// (the server's last, the same bytes) is taken from it unparsed, and its client head with
/// it; a head parsed goes into it.
///
/// `interim`: the interim heads from `buf[n..]` on that the client has not had yet go before
/// the final head (see [`write_interims`]); `None`: none is forwarded (an HTTP/1.0 client).
pub fn prepare_response(
    shutting_down: bool,
    (limits, mut memo): (&shared::http::Limits, Option<&mut ResponseMemo>),
    (buf, interim): (&[u8], Option<usize>),
    req: &RequestInfo,
    out: &mut BytesMut,
    fields: &mut ResponseFields,
    edits: Option<&HeaderEdits>,
) -> Result<Option<ResponseInfo>, ProxyError> {
    with_headers(limits.max_headers, |storage| {
        let parsed = match memo.as_deref_mut() {
            Some(m) => parse_final_response_memo(buf, storage, (req.method, limits), &mut m.head),
            None => parse_final_response(buf, storage, req.method, limits),
        };
        let head = match parsed {
            Ok(Status::Complete(h)) => h,
            Ok(Status::Partial) => return Ok(None),
            Err(e) => return Err(ProxyError::BadResponse(e)),
        };
        let info = ResponseInfo {
            add_date: head.status >= 200
                && !head.has_date
                && !edits.is_some_and(|e| e.drops("date")),
            ..response_info(&head, req, shutting_down)?
        };
        out.clear();
        if let Some(from) = interim.filter(|&n| starts_interim(&buf[n..])) {
            write_interims(&buf[from..], limits, out)?;
        }
        match memo.as_deref_mut() {
            // Interim heads are never kept: a head behind them is written anew.
            Some(m) if out.is_empty() => {
                let key = ClientKey {
                    kept: m.head.kept_id(),
                    version: req.version,
                    websocket: req.websocket,
                    edits_at: edits.map_or(0, |e| std::ptr::from_ref(e) as usize),
                };
                m.client_head(key, out, |out| {
                    append_client_head((&head, buf), info.framing, edits, out)
                });
            }
            _ => append_client_head((&head, buf), info.framing, edits, out),
        }
        fields.record(&head, buf);
        Ok(Some(info))
    })
}

/// The complete interim heads at the start of `buf`, rewritten for the client into `out`
/// (appended): RFC 9110 15.2, a proxy forwards 1xx responses (103 Early Hints, 102
/// Processing, ...) to an HTTP/1.1 client, with their end-to-end fields. Not 100 Continue (the
/// proxy answers `Expect` itself) nor 101 (a final switch). The bytes they took; they end at
/// the first head that is not interim or not complete.
pub fn write_interims(
    buf: &[u8],
    limits: &shared::http::Limits,
    out: &mut BytesMut,
) -> Result<usize, ProxyError> {
    let mut at = 0;
    while starts_interim(&buf[at..]) {
        let done = with_headers(limits.max_headers, |storage| {
            let rest = &buf[at..];
            let head =
                match shared::http::parse_response(rest, storage, RequestMethod::Other, limits) {
                    Ok(Status::Complete(h)) if shared::http::response::is_interim(h.status) => h,
                    Ok(_) => return Ok(None),
                    Err(e) => return Err(ProxyError::BadResponse(e)),
                };
            if head.status != 100 {
                write_status_line(out, Version::Http11, head.status, head.reason);
                let named = Named::of(head.connection_names, head.headers);
                copy_fields(out, rest, head.headers, |h| {
                    !is_hop_by_hop(h.name)
                        && !is_interim_framing(h.name)
                        && !named.contains(h.name, head.headers)
                });
                out.extend_from_slice(b"\r\n");
            }
            Ok(Some(head.head_len))
        })?;
        match done {
            Some(n) => at += n,
            None => break,
        }
    }
    Ok(at)
}

/// A framing field, which an interim head never carries: RFC 9110 8.6, "A server MUST NOT
/// send a Content-Length header field in any response with a status code of 1xx" (its
/// value, malformed or conflicting as it may be, must not reach a client or a proxy in
/// front that would frame by it); Transfer-Encoding is hop-by-hop anyway.
fn is_interim_framing(name: &str) -> bool {
    eq(name, "content-length") || eq(name, "transfer-encoding")
}

/// What a final response head means for the relay: how its body reaches the client and
/// which connections stay open.
pub(crate) fn response_info(
    head: &ResponseHead<'_, '_>,
    req: &RequestInfo,
    shutting_down: bool,
) -> Result<ResponseInfo, ProxyError> {
    // A coding other than chunked would be lost when the body is re-framed (the client would
    // get, say, gzip bytes with nothing saying so): refuse it, as nginx does ("upstream sent
    // unknown Transfer-Encoding").
    if head.other_coding {
        return Err(ProxyError::BadResponse(CodecError::UnknownTransferCoding));
    }
    let framing = match head.body {
        BodyKind::Empty => ClientFraming::Empty,
        BodyKind::Length(_) => ClientFraming::Length,
        BodyKind::Chunked | BodyKind::CloseDelimited if req.version == Version::Http11 => {
            ClientFraming::Chunked
        }
        BodyKind::Chunked | BodyKind::CloseDelimited => ClientFraming::Close,
        BodyKind::Tunnel
            if req.websocket && head.status == 101 && switched_to_websocket(head.headers) =>
        {
            ClientFraming::Tunnel
        }
        BodyKind::Tunnel => return Err(ProxyError::BadResponse(CodecError::InvalidStatus)),
    };
    Ok(ResponseInfo {
        status: head.status,
        head_len: head.head_len,
        body: head.body,
        framing,
        upstream_keep_alive: head.keep_alive,
        // Draining: close after this response, unless requests the client pipelined behind it
        // were already received (they are served, then the connection closes).
        client_keep_alive: keeps_client(req, shutting_down && !req.pipelined, framing),
        client_version: req.version,
        add_date: false,
    })
}

/// A 101 switched to WebSocket: one Upgrade field, and it names exactly `websocket` (RFC 6455
/// 4.2.2), the one protocol the proxy sent. A back end that answers `Upgrade: h2c` (or a list)
/// would get a raw channel of another protocol tunnelled to the client: 502 instead.
fn switched_to_websocket(headers: &[httparse::Header<'_>]) -> bool {
    let mut upgrades = headers.iter().filter(|h| eq(h.name, "upgrade"));
    match (upgrades.next(), upgrades.next()) {
        (Some(u), None) => trim_ows(u.value).eq_ignore_ascii_case(b"websocket"),
        _ => false,
    }
}

/// Write the client's response head for `head` into `out` (cleared first), relayed with
/// `framing`: status line, end-to-end fields, our own framing field; no Connection field and
/// no final CRLF (see [`end_client_head`]).
///
/// Content-Length is always written by us, never copied: the body's length when it has one;
/// on a head without a body (RFC 9110 8.6) never on a 1xx or a 204 ("A server MUST NOT send
/// a Content-Length header field in any response with a status code of 1xx or 204"), and on
/// a 304 or an answer to HEAD only the origin's length when it is valid (it is the selected
/// representation's, which 8.6 lets them carry; nginx passes it), as one plain number. So no
/// malformed, conflicting or misplaced length reaches a client, or a proxy in front of it
/// that would frame the next response by it.
#[cfg(test)]
pub(crate) fn write_client_head<'b>(
    head: (&ResponseHead<'_, 'b>, &'b [u8]),
    framing: ClientFraming,
    out: &mut BytesMut,
) {
    out.clear();
    append_client_head(head, framing, None, out);
}

/// [`write_client_head`] after what `out` holds (interim heads), with the route's
/// `response_headers` applied when it has them.
fn append_client_head<'b>(
    (head, buf): (&ResponseHead<'_, 'b>, &'b [u8]),
    framing: ClientFraming,
    edits: Option<&HeaderEdits>,
    out: &mut BytesMut,
) {
    write_status_line(out, Version::Http11, head.status, head.reason);
    let named = Named::of(head.connection_names, head.headers);
    let tunnel = framing == ClientFraming::Tunnel;
    copy_fields(out, buf, head.headers, |h| {
        let n = h.name;
        let keep_upgrade = tunnel && eq(n, "upgrade");
        let hop = is_hop_by_hop(n) || eq(n, "content-length") || named.contains(n, head.headers);
        (keep_upgrade || !hop) && !edits.is_some_and(|e| e.drops(n))
    });
    if let Some(e) = edits {
        out.extend_from_slice(&e.block);
    }
    match head.body {
        BodyKind::Length(n) => write_header_u64(out, b"Content-Length", n),
        BodyKind::Empty => {
            let may_have_length = head.status >= 200 && head.status != 204;
            if let (true, Some(n)) = (may_have_length, head.content_length) {
                write_header_u64(out, b"Content-Length", n);
            }
        }
        _ if framing == ClientFraming::Chunked => {
            write_header(out, b"Transfer-Encoding", b"chunked")
        }
        _ => {}
    }
}

/// End the client's head begun by [`write_client_head`]: the Date and Connection fields
/// `resp` calls for, then the empty line. (Not in the head a `ResponseMemo` keeps: the date
/// changes while the upstream's bytes do not.)
pub fn end_client_head(out: &mut BytesMut, resp: &ResponseInfo) {
    if resp.add_date {
        write_header(out, b"Date", &crate::http_date::now());
    }
    if resp.framing == ClientFraming::Tunnel {
        write_header(out, b"Connection", b"upgrade");
    } else if !resp.client_keep_alive {
        write_header(out, b"Connection", b"close");
    } else if resp.client_version == Version::Http10 {
        write_header(out, b"Connection", b"keep-alive");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests;
