//! The request as the proxy reads it, once: the head parsed ([`prepare_request`]), its target
//! decoded and routed ([`route_of`]), and the route's action decided ([`Dispatch`]) with
//! what it sends prepared (the upstream head for a proxied route, the whole answer for a
//! `return`, the positions of the fields a static file needs). Everything after this works
//! from the [`RequestInfo`] it returns; nothing parses the head again.
//!
//! Upstream request (RFC 9110 7.6): origin-form target, HTTP/1.1, Host preserved by default,
//! `X-Forwarded-For` appended, `X-Real-IP` and `X-Forwarded-Proto` set, hop-by-hop fields
//! removed (Connection and every field it names, Keep-Alive, Proxy-Connection, TE, Trailer,
//! Transfer-Encoding, Upgrade: a WebSocket upgrade is sent as `Upgrade: websocket` alone),
//! `HTTP2-Settings` removed always (no h2c upgrade is forwarded), the client's
//! `X-Forwarded-Host` and `Forwarded` removed always (nothing a client says about the path a
//! request took is trusted), `Expect` removed (the proxy answers `100-continue` itself), and
//! the body framing written by us. Routing is on the target's decoded path
//! (`shared::http::target::route_path`); the target goes upstream as received when its path
//! has no dot segments, with them resolved on the raw path when it has
//! (`resolve_dot_segments`: the origin then sees the path the route was chosen on), and when
//! the route strips its prefix (`strip_prefix`) as the rest of the path's URL normal form,
//! the query as received. A route's `request_headers` replace or drop fields (every copy, any
//! case) and add their prepared block.

use crate::answer::AnswerCtx;
use crate::config::hash_key::HashKey;
use crate::config::route_opts::RouteOpts;
use crate::config::{Action, Balance, GroupId, HeaderOptions, RouteId};
use crate::error::ProxyError;
use crate::generation::{CacheId, Generation, SiteId};
use crate::io::offset_in;
pub use crate::ip_text::IpText;
use crate::static_files::StaticQuery;
use bytes::BytesMut;
pub use client_addr::ClientAddr;
use shared::http::encode::{copy_fields, write_header, write_header_u64, write_request_line};
use shared::http::framing::connection_tokens;
use shared::http::limits::MAX_HEADERS_CAP;
use shared::http::target::{
    after_route_prefix, normalize_path, origin_bytes, origin_form, resolve_dot_segments, route_path,
};
use shared::http::{
    parse_request, BodyKind, CodecError, Limits, RequestHead, RequestMethod, Status, Version,
};
use std::cell::RefCell;

/// Header slots tried first: enough for nearly every real head, and cheap to initialise
/// (a head with more fields is parsed again with all `max_headers` slots).
const FIRST_HEADERS: usize = 32;
/// Header storage kept on the stack for the common limits; larger limits use the heap.
const INLINE_HEADERS: usize = 128;

/// What the exchange needs to know about a parsed request once its bytes are released.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo {
    pub method: RequestMethod,
    /// GET, HEAD, PUT, DELETE, OPTIONS, TRACE: safe to send twice (RFC 9110 9.2.2).
    pub idempotent: bool,
    pub version: Version,
    pub body: BodyKind,
    pub keep_alive: bool,
    pub expect_continue: bool,
    pub websocket: bool,
    pub head_len: usize,
    /// The upstream head (in the caller's buffer) already has its Host field; otherwise
    /// the server's name is written per attempt.
    pub host_written: bool,
    /// Bytes of a next (pipelined) request had already arrived behind this one, body
    /// included, when its head was parsed: a graceful shutdown still serves them, so this
    /// response keeps the connection open.
    pub pipelined: bool,
    /// The route, in the request's generation.
    pub route: RouteId,
    /// What the route's action does with the request, decided once.
    pub dispatch: Dispatch,
    /// The target's path and query (`shared::http::target::origin_bytes`: empty for an
    /// absolute-form target without a path, or one that names no path), in the client buffer
    /// (valid until the exchange consumes the head): for a cache key.
    pub target: Span,
    /// The target's path has dot segments: it went upstream with them resolved
    /// (`shared::http::target::resolve_dot_segments`), and the cache keys it so.
    pub dot_segments: bool,
    /// The authority (absolute-form target, else Host), in the client buffer likewise.
    pub authority: Option<Span>,
    /// The hash of the group's `hash_key` for a group with `balance = "hash"` (0 otherwise):
    /// taken here, from the one parse, while the head's bytes are at hand.
    pub balance_key: u64,
}

impl RequestInfo {
    /// A decision the head's bytes, the peer and the configuration make alone ([`memo`]):
    /// a proxied request's (a `return` may draw random numbers, a file is looked up anew).
    fn memorable(&self) -> bool {
        matches!(
            self.dispatch,
            Dispatch::Proxy { .. } | Dispatch::Cached { .. }
        )
    }
}

/// What a routed request leads to: one match per request in the client loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// Forward to this upstream group (the upstream head is in the connection's `to_upstream`).
    Proxy { group: GroupId },
    /// Forward through the response cache of a cached route (its settings and store:
    /// `Generation::cached`).
    Cached { cache: CacheId, group: GroupId },
    /// A `return`: the whole answer is in `to_upstream`. `skip`: the request body to drop (`None`:
    /// it has not arrived whole and the connection closes); `close`: the answer said so.
    Answered { skip: Option<usize>, close: bool },
    /// Serve a file from a static site (`Generation::site`); `query` holds what the file
    /// server needs of the head (positions in the client buffer).
    Static { site: SiteId, query: StaticQuery },
    /// Refused by the route's access rules or a rate limit (`crate::limit`): the 403 or 429
    /// is in `to_upstream`, sent as a `return`'s answer is (`skip`, `close` likewise).
    Refused {
        skip: Option<usize>,
        close: bool,
        why: crate::limit::Refusal,
    },
}

/// Where a part of the request head lies in the client buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub len: u32,
}

impl Span {
    /// `part` must be a sub-slice of `whole` (head parts are: heads are at most `max_head`).
    pub(crate) fn of(whole: &[u8], part: &[u8]) -> Span {
        Span {
            start: offset_in(whole, part) as u32,
            len: part.len() as u32,
        }
    }

    /// The bytes in `buf` (the buffer the head was parsed from, not yet advanced).
    pub fn get(self, buf: &[u8]) -> &[u8] {
        let start = self.start as usize;
        buf.get(start..start + self.len as usize)
            .unwrap_or_default()
    }
}

/// Where a head's fields lie in the buffer it was parsed from, recorded by its one parse: read
/// again by name without parsing the head again. The vector is the connection's, reused: it
/// stops allocating once it held the longest head.
#[derive(Debug, Default, Clone)]
pub struct FieldSpans(Vec<(Span, Span)>);

impl FieldSpans {
    pub(crate) fn record(&mut self, headers: &[httparse::Header<'_>], buf: &[u8]) {
        self.0.clear();
        self.0.extend(
            headers
                .iter()
                .map(|h| (Span::of(buf, h.name.as_bytes()), Span::of(buf, h.value))),
        );
    }

    fn copy_from(&mut self, other: &FieldSpans) {
        self.0.clear();
        self.0.extend_from_slice(&other.0);
    }

    /// Run `f` with the fields, as slices of `buf` (the buffer the head was parsed from, or
    /// a copy of its head): storage for the field list on the stack up to the common limits,
    /// as the parse had.
    pub fn with<T>(&self, buf: &[u8], f: impl FnOnce(&[httparse::Header<'_>]) -> T) -> T {
        let n = self.0.len();
        let field = |&(name, value): &(Span, Span)| httparse::Header {
            name: std::str::from_utf8(name.get(buf)).unwrap_or_default(),
            value: value.get(buf),
        };
        if n <= INLINE_HEADERS {
            let mut storage = [httparse::EMPTY_HEADER; INLINE_HEADERS];
            for (slot, s) in storage.iter_mut().zip(&self.0) {
                *slot = field(s);
            }
            f(&storage[..n])
        } else {
            let storage: Vec<httparse::Header<'_>> = self.0.iter().map(field).collect();
            f(&storage)
        }
    }
}

/// Where a cached route's request head lies in the buffer it was parsed from, recorded by the
/// one parse ([`prepare_request`]): its method and every field. The cache reads fields by
/// name (Cache-Control, the preconditions, and whatever a stored response's `Vary` names,
/// at lookup and again when the response is stored) without parsing the head again.
#[derive(Debug, Default, Clone)]
pub struct HeadFields {
    method: Span,
    fields: FieldSpans,
}

impl HeadFields {
    fn record(&mut self, head: &RequestHead<'_, '_>, buf: &[u8]) {
        self.method = Span::of(buf, head.method.as_bytes());
        self.fields.record(head.headers, buf);
    }

    /// Take `other`'s positions, reusing this one's storage.
    fn copy_from(&mut self, other: &HeadFields) {
        self.method = other.method;
        self.fields.copy_from(&other.fields);
    }

    /// Run `f` with the method and the fields, as slices of `buf` (see [`FieldSpans::with`]).
    pub fn with<T>(&self, buf: &[u8], f: impl FnOnce(&str, &[httparse::Header<'_>]) -> T) -> T {
        let method = std::str::from_utf8(self.method.get(buf)).unwrap_or_default();
        self.fields.with(buf, |fields| f(method, fields))
    }
}

/// Run a parse with header storage: first with a few slots, then, only if the head has more
/// fields than that, with all `max` slots.
pub(crate) fn with_headers<'b, T>(
    max: usize,
    mut parse: impl FnMut(&mut [httparse::Header<'b>]) -> Result<T, ProxyError>,
) -> Result<T, ProxyError> {
    let max = max.clamp(1, MAX_HEADERS_CAP);
    let first = max.min(FIRST_HEADERS);
    let mut few: [httparse::Header<'b>; FIRST_HEADERS] = [httparse::EMPTY_HEADER; FIRST_HEADERS];
    match parse(&mut few[..first]) {
        Err(ProxyError::Request(CodecError::TooManyHeaders))
        | Err(ProxyError::BadResponse(CodecError::TooManyHeaders))
            if max > first => {}
        done => return done,
    }
    if max <= INLINE_HEADERS {
        let mut storage: [httparse::Header<'b>; INLINE_HEADERS] =
            [httparse::EMPTY_HEADER; INLINE_HEADERS];
        parse(&mut storage[..max])
    } else {
        let mut storage: Vec<httparse::Header<'b>> = vec![httparse::EMPTY_HEADER; max];
        parse(&mut storage)
    }
}

/// Names listed in Connection fields, collected once per message (a few at most in practice).
pub(crate) struct Named<'b> {
    inline: [&'b [u8]; 8],
    n: usize,
    overflow: bool,
}

impl<'b> Named<'b> {
    const NONE: Named<'b> = Named {
        inline: [&[]; 8],
        n: 0,
        overflow: false,
    };

    pub(crate) fn collect(headers: &[httparse::Header<'b>]) -> Self {
        let mut s = Self::NONE;
        for t in connection_tokens(headers) {
            // These name no end-to-end field we would otherwise forward.
            if t.eq_ignore_ascii_case(b"close") || t.eq_ignore_ascii_case(b"keep-alive") {
                continue;
            }
            if s.n < s.inline.len() {
                s.inline[s.n] = t;
                s.n += 1;
            } else {
                s.overflow = true;
            }
        }
        s
    }

    /// [`Named::collect`] for a head the codec parsed, which says whether Connection listed
    /// any name (`connection_names`): the usual head lists none, and nothing is looked at.
    pub(crate) fn of(listed: bool, headers: &[httparse::Header<'b>]) -> Self {
        if listed {
            Self::collect(headers)
        } else {
            Self::NONE
        }
    }

    #[inline]
    pub(crate) fn contains(&self, name: &str, headers: &[httparse::Header<'b>]) -> bool {
        if self.n == 0 && !self.overflow {
            return false;
        }
        let name = name.as_bytes();
        if self.inline[..self.n]
            .iter()
            .any(|t| t.eq_ignore_ascii_case(name))
        {
            return true;
        }
        self.overflow && connection_tokens(headers).any(|t| t.eq_ignore_ascii_case(name))
    }
}

pub(crate) fn eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.eq_ignore_ascii_case(b)
}

/// Parse a request head from `buf`, route it, and prepare what its action sends: for a
/// proxied request the upstream head in `out` (without the final CRLF, and without Host
/// unless `host_written`), and for a cached one its fields' positions in `fields` too; for a
/// `return` the whole answer in `out`. `Ok(None)`: the head is incomplete. A proxied
/// request's head repeated byte for byte is decided once ([`memo`]); the guards run for
/// every request.
pub fn prepare_request(
    w: AnswerCtx<'_>,
    g: &Generation,
    buf: &[u8],
    ip: &mut ClientAddr,
    out: &mut BytesMut,
    fields: &mut HeadFields,
) -> Result<Option<RequestInfo>, ProxyError> {
    let Some(mut info) = memo::recall(&g.cfg, buf, ip, out, fields) else {
        let mut spots = AddrSpots::default();
        let decided = parse_and_decide(w, g, buf, ip, (out, &mut spots), fields)?;
        if let Some(info) = decided.as_ref().filter(|i| i.memorable()) {
            memo::keep(&g.cfg, buf, ip, info, (out, spots), fields);
        }
        return Ok(decided);
    };
    info.pipelined = pipelined(info.body, info.head_len, buf.len());
    if let Some(why) = guard(g, info.route, ip) {
        // As the parse leaves a refused request: nothing of the proxied path decided.
        info.websocket = false;
        info.host_written = false;
        info.balance_key = 0;
        info.dispatch = refuse_with(w, g, why, &info, buf.len(), out);
    }
    Ok(Some(info))
}

/// The refusal of the route's access rules or rate limits (`crate::limit`), if any: one test
/// when none is configured.
fn guard(g: &Generation, route: RouteId, ip: &ClientAddr) -> Option<crate::limit::Refusal> {
    let guards = g.guards.as_ref()?;
    guards.check(&g.cfg, route, ip.ip(), shared::clock::loop_now())
}

/// Whether bytes after this request's (body included) had arrived in `have` bytes (a
/// streamed body: what follows it is not known yet).
fn pipelined(body: BodyKind, head_len: usize, have: usize) -> bool {
    match body {
        BodyKind::Empty => have > head_len,
        BodyKind::Length(n) => (have - head_len) as u64 > n,
        _ => false,
    }
}

/// [`prepare_request`] without the memo: the one parse.
fn parse_and_decide(
    w: AnswerCtx<'_>,
    g: &Generation,
    buf: &[u8],
    ip: &mut ClientAddr,
    (out, spots): (&mut BytesMut, &mut AddrSpots),
    fields: &mut HeadFields,
) -> Result<Option<RequestInfo>, ProxyError> {
    let limits = &g.cfg.limits.codec;
    with_headers(limits.max_headers, |storage| {
        let head = match parse_request(buf, storage, limits) {
            Ok(Status::Complete(h)) => h,
            Ok(Status::Partial) => return Ok(None),
            Err(e) => return Err(ProxyError::Request(e)),
        };
        ip.derive(&g.cfg.headers, head.headers);
        let ip = &*ip;
        let method = head.request_method();
        if method == RequestMethod::Connect {
            return Err(ProxyError::MethodNotSupported);
        }
        let target = origin_form(head.target);
        let (route, dot_segments) = route_of(g, head.authority, target.as_bytes())?;
        let t = head.target.as_bytes();
        let mut info = RequestInfo {
            method,
            idempotent: matches!(
                head.method,
                "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE"
            ),
            version: head.version,
            body: head.body,
            keep_alive: head.keep_alive,
            expect_continue: head.expect_continue,
            websocket: false,
            head_len: head.head_len,
            host_written: false,
            pipelined: pipelined(head.body, head.head_len, buf.len()),
            route,
            dispatch: Dispatch::Answered {
                skip: None,
                close: true,
            },
            // A target naming no path (`*`): its empty start, still in `buf`.
            target: Span::of(buf, origin_bytes(t).unwrap_or(&t[..0])),
            dot_segments,
            authority: head.authority.map(|a| Span::of(buf, a)),
            balance_key: 0,
        };
        if let Some(why) = guard(g, route, ip) {
            info.dispatch = refuse_with(w, g, why, &info, buf.len(), out);
            return Ok(Some(info));
        }
        let action = &g.cfg.routes[route].action;
        // On every route, as nginx's `client_max_body_size` in every location; a cached
        // route answers it itself, with its X-Cache field.
        let cached = matches!(action, Action::Proxy { cache: Some(_), .. });
        if !cached && body_too_large(head.body, g.cfg.limits.max_body) {
            return Err(ProxyError::BodyTooLarge);
        }
        match action {
            Action::Proxy { group, cache } => {
                let grp = &g.cfg.groups[*group];
                if grp.balance == Balance::Hash {
                    info.balance_key = balance_key(&grp.hash_key, &head, ip);
                }
                info.websocket = head.is_websocket_upgrade();
                let route_opts = g.cfg.routes[route].opts.as_deref();
                let how = (&g.cfg.headers, route_opts);
                let written = with_forwarded(&target, dot_segments, |sent| {
                    write_upstream_head((&head, buf), sent, info.websocket, how, ip, out)
                });
                info.host_written = written.host_written;
                *spots = written.spots;
                info.dispatch = match cache {
                    None => Dispatch::Proxy { group: *group },
                    Some(_) => {
                        fields.record(&head, buf);
                        Dispatch::Cached {
                            cache: g.cache_id(route),
                            group: *group,
                        }
                    }
                };
            }
            Action::Return(r) => {
                let arrived = buf.len() - head.head_len;
                let a = crate::answer::prepare(w, r, &head, &target, ip.as_bytes(), arrived, out);
                // nginx's `add_header` applies to a `return` too.
                if let Some(e) = g.cfg.routes[route].response_edits() {
                    e.apply_to_head(out, 0);
                }
                info.dispatch = Dispatch::Answered {
                    skip: a.skip,
                    close: a.close,
                };
            }
            Action::Static(_) => {
                let query = StaticQuery::from_head(&head, buf);
                let site = g.site_id(route);
                info.dispatch = Dispatch::Static { site, query };
            }
        }
        Ok(Some(info))
    })
}

/// A refused request's answer (403 or 429), rendered as a `return`'s is: the body skipped
/// when it arrived whole (`have` bytes in the buffer), else the connection closes after it.
fn refuse_with(
    w: AnswerCtx<'_>,
    g: &Generation,
    why: crate::limit::Refusal,
    req: &RequestInfo,
    have: usize,
    out: &mut BytesMut,
) -> Dispatch {
    let arrived = have - req.head_len;
    let cached = matches!(
        g.cfg.routes[req.route].action,
        Action::Proxy { cache: Some(_), .. }
    );
    let (skip, close) = refuse::render(w, why, cached, req, arrived, out);
    Dispatch::Refused { skip, close, why }
}

/// The hash of what `key` names in `head` (`balance = "hash"`; see `config::hash_key`): the
/// target as received (origin-form: path and query), the client address, or a field's first
/// value (a missing field hashes the empty string, as nginx's empty variable does).
fn balance_key(key: &HashKey, head: &RequestHead<'_, '_>, ip: &ClientAddr) -> u64 {
    let bytes: &[u8] = match key {
        HashKey::Uri => origin_bytes(head.target.as_bytes()).unwrap_or_default(),
        HashKey::RemoteAddr => ip.as_bytes(),
        HashKey::Header(name) => head
            .headers
            .iter()
            .find(|h| eq(h.name, name))
            .map_or(&[][..], |h| h.value),
    };
    crate::balance::ring::hash_key(bytes)
}

/// A declared request body over `max_body` (`limits.max_body`): a 413 before any byte of it
/// is read.
pub fn body_too_large(body: BodyKind, max_body: Option<u64>) -> bool {
    match (body, max_body) {
        (BodyKind::Length(n), Some(max)) => n > max,
        _ => false,
    }
}

thread_local! {
    /// The worker's buffer for paths that need rewriting to be routed (grown once to the
    /// longest such path, then reused: no allocation per request).
    static PATH_SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Likewise for the target forwarded when its path has dot segments.
    static FORWARD_SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The route for `target` (origin-form) at `authority`, chosen on the decoded path
/// (`shared::http::target::route_path`), as an origin that decodes it reads it: `/%61dmin/`,
/// `//admin/`, `/x/../admin/` and `/admin%2F` are all under `/admin/`; and whether the path
/// has dot segments (then it goes upstream resolved: [`with_forwarded`]). A path routing
/// cannot read as the origin will (`/../x`, `%00`, a bad escape, a `\`) is a 400.
fn route_of(
    g: &Generation,
    authority: Option<&[u8]>,
    target: &[u8],
) -> Result<(RouteId, bool), ProxyError> {
    // RFC 9112 3.2.4: `*` (the codec takes it for OPTIONS alone) asks about the server as a
    // whole, which no route, a path prefix, stands for: 400, as nginx answers.
    if target == b"*" {
        return Err(ProxyError::Request(CodecError::InvalidTarget));
    }
    PATH_SCRATCH.with_borrow_mut(|scratch| {
        let p = route_path(target, scratch).map_err(|e| ProxyError::Request(e.into()))?;
        let route = g
            .router
            .route(authority, p.path)
            .ok_or(ProxyError::NoRoute)?;
        Ok((route, p.dot_segments))
    })
}

/// Run `f` with the target as it goes upstream: `target` itself, or, when its path has
/// `dot_segments`, with them resolved: an origin that reads the raw path (Express's router)
/// would otherwise run the handler of `/admin/` for `/admin/../x`, routed as `/x`.
fn with_forwarded<T>(target: &str, dot_segments: bool, f: impl FnOnce(&str) -> T) -> T {
    if !dot_segments {
        return f(target);
    }
    FORWARD_SCRATCH.with_borrow_mut(|scratch| {
        let sent = resolve_dot_segments(target.as_bytes(), scratch);
        // Cut only at ASCII `/` and `?` out of a `str`: still UTF-8. Were it not, the root,
        // never the raw target with its dot segments (fail closed).
        f(std::str::from_utf8(sent).unwrap_or("/"))
    })
}

/// Write the upstream request head for `head` into `out` (cleared first): the request line
/// with `target` (origin-form as it goes upstream, dot segments already resolved; the route's
/// prefix removed from its normal form when the route strips it), the end-to-end fields, the
/// forwarding fields `opts` asks for with the client's address `ip`, the route's
/// `request_headers`, the upgrade fields when `websocket`, and our own framing. Without the final CRLF; says whether Host was written (else it is written
/// per attempt) and where the client's address went.
pub(crate) fn write_upstream_head<'b>(
    (head, buf): (&RequestHead<'_, 'b>, &'b [u8]),
    target: &str,
    websocket: bool,
    (opts, route): (&HeaderOptions, Option<&RouteOpts>),
    ip: &ClientAddr,
    out: &mut BytesMut,
) -> UpstreamHead {
    let mut spots = AddrSpots::default();
    out.clear();
    match route.and_then(|r| r.strip) {
        None => write_request_line(out, head.method, target, Version::Http11),
        Some(n) => write_stripped_line(out, head.method, target, n),
    }
    let edits = route.and_then(|r| r.request.as_ref());
    // The route's own fields replace the client's, and the proxy's forwarding ones.
    let edited = |n: &str| edits.is_some_and(|e| e.drops(n));
    let set_host = edits.is_some_and(|e| e.sets_host);
    let host_written = set_host || (opts.preserve_host && head.authority.is_some());
    if let (false, true, Some(a)) = (set_host, host_written, head.authority) {
        write_header(out, b"Host", a);
    }
    let named = Named::of(head.connection_names, head.headers);
    let mut xff_seen = false;
    copy_fields(out, buf, head.headers, |h| {
        let n = h.name;
        if crate::sent_fields::never_forwarded(n)
            || eq(n, "host")
            || eq(n, "content-length")
            || (opts.x_forwarded_for && eq(n, "x-forwarded-for"))
            || (opts.x_real_ip && eq(n, "x-real-ip"))
            || (opts.x_forwarded_proto && eq(n, "x-forwarded-proto"))
            || named.contains(n, head.headers)
            || edited(n)
        {
            xff_seen |= eq(n, "x-forwarded-for");
            return false;
        }
        true
    });
    if opts.x_forwarded_for && !edited("x-forwarded-for") {
        write_forwarded_for(out, xff_seen.then_some(head.headers), ip.peer());
        // The peer's address ends the line.
        spots.add(out.len() - 2 - ip.peer().as_bytes().len());
    }
    if opts.x_real_ip && !edited("x-real-ip") {
        write_header(out, b"X-Real-IP", ip.as_bytes());
        spots.add(out.len() - 2 - ip.as_bytes().len());
    }
    if opts.x_forwarded_proto && !edited("x-forwarded-proto") {
        write_header(out, b"X-Forwarded-Proto", ip.scheme());
    }
    if let Some(e) = edits {
        out.extend_from_slice(&e.block);
    }
    if websocket {
        // Only websocket, whatever else the client's list offered (`h2c, websocket`): a back
        // end that picked h2c would give the client an HTTP/2 channel past routing, header
        // rewriting and the cache.
        write_header(out, b"Connection", b"upgrade");
        write_header(out, b"Upgrade", b"websocket");
    }
    match head.body {
        BodyKind::Length(n) => write_header_u64(out, b"Content-Length", n),
        BodyKind::Chunked => write_header(out, b"Transfer-Encoding", b"chunked"),
        _ if matches!(head.method, "POST" | "PUT" | "PATCH") => {
            write_header(out, b"Content-Length", b"0")
        }
        _ => {}
    }
    UpstreamHead {
        host_written,
        spots,
    }
}

/// What [`write_upstream_head`] says of the head it wrote.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpstreamHead {
    pub host_written: bool,
    pub spots: AddrSpots,
}

/// Where an upstream head holds the client's address (`X-Forwarded-For`'s last hop, the
/// peer; `X-Real-IP`, the client, which is the peer unless a trusted peer named another):
/// the memo writes another peer's there ([`memo`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AddrSpots {
    at: [usize; 2],
    n: u8,
}

impl AddrSpots {
    fn add(&mut self, at: usize) {
        if let Some(slot) = self.at.get_mut(self.n as usize) {
            *slot = at;
            self.n += 1;
        }
    }

    /// The addresses' places in the head, in the order written.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.at[..self.n as usize].iter().copied()
    }
}

/// The request line of a route that strips its prefix (nginx's `proxy_pass http://app/;`):
/// the path's URL normal form (`normalize_path`: unreserved escapes decoded, dot segments and
/// repeated slashes gone; other escapes kept, so still a URL), less what makes the route's
/// `prefix` (that many bytes of the decoded path routing matched: `after_route_prefix`),
/// always starting with `/`, then the query as received.
fn write_stripped_line(out: &mut BytesMut, method: &str, target: &str, prefix: usize) {
    let query = target.find('?').map_or("", |i| &target[i..]);
    PATH_SCRATCH.with_borrow_mut(|scratch| {
        // Routing read this target already: it has a normal form. Were it not, the root,
        // never the raw path (fail closed).
        let path = normalize_path(target.as_bytes(), scratch).unwrap_or(b"/");
        let rest = after_route_prefix(path, prefix);
        out.extend_from_slice(method.as_bytes());
        out.extend_from_slice(b" ");
        if rest.first() != Some(&b'/') {
            out.extend_from_slice(b"/");
        }
        out.extend_from_slice(rest);
        out.extend_from_slice(query.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
    });
}

/// `X-Forwarded-For`: the client's own list (every such field, in order, empty ones
/// dropped) with the client's address appended, in one field.
fn write_forwarded_for(out: &mut BytesMut, received: Option<&[httparse::Header<'_>]>, ip: &IpText) {
    out.extend_from_slice(b"X-Forwarded-For: ");
    for h in received
        .unwrap_or_default()
        .iter()
        .filter(|h| eq(h.name, "x-forwarded-for"))
    {
        let v = h.value.trim_ascii();
        if !v.is_empty() {
            out.extend_from_slice(v);
            out.extend_from_slice(b", ");
        }
    }
    out.extend_from_slice(ip.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Whether `buf`, of which the first `parsed` bytes were parsed as an incomplete head, is
/// worth parsing again: only when the new bytes may end the head (an empty line; a bare-LF
/// one too, for the codec to reject) or cross a limit. A head trickling in a few bytes per
/// read is then parsed a few times, not once per read (quadratic work a slow client could
/// make the proxy do: a 60 KB head sent 4 bytes at a time cost seconds of CPU). The first
/// bytes are always parsed, so garbage (a TLS handshake, a bad method) is refused at once.
pub(crate) fn worth_parsing(buf: &[u8], parsed: usize, limits: &Limits) -> bool {
    if parsed == 0 || buf.len() >= limits.max_head {
        return true;
    }
    if parsed < limits.max_request_line && buf.len() >= limits.max_request_line {
        return true;
    }
    // "\n\r\n" or "\n\n", possibly straddling the old end.
    let from = parsed.saturating_sub(2);
    buf[from..]
        .windows(2)
        .any(|w| w[0] == b'\n' && (w[1] == b'\n' || w[1] == b'\r'))
}

mod client_addr;
mod memo;
mod real_ip;
mod refuse;
#[cfg(test)]
mod tests;
