//! A fetch from the upstream through the cache: filling an entry (a storable answer's head
//! and body), revalidating a stored one (a 304 refreshes it), invalidating a key, or falling
//! back on a stale entry when the upstream fails.

use super::super::client_watch::{Wanted, Watch};
use super::super::outcome::Answered;
use super::super::response_head::Head;
use super::super::{relay_response, start_tunnel, upstream_answer, Serving};
use super::decide::FromStore;
use super::hit::{send_stored, Stored};
use super::unsent::for_the_others;
use super::{fail_with, from_store, now_millis, sync_stats};
use crate::cache::{self, validate, CacheStatus, Fetched, Handle, Hit, Millis, OwnedKey, Store};
use crate::config::cache::CacheEntry;
use crate::config::GroupId;
use crate::conn::{ClientConn, Next};
use crate::error::ProxyError;
use crate::forward::{end_client_head, ClientFraming};
use crate::generation::Generation;
use crate::relay::FillSink;
use crate::request::{Named, RequestInfo};
use crate::worker::ProxyWorker;
use bytes::{Buf, Bytes, BytesMut};
use shared::http::encode::{write_header, write_header_u64, write_status_line};
use shared::http::framing::is_hop_by_hop;
use shared::http::{BodyKind, RequestMethod, Version};
use std::cell::RefCell;

/// How a fetch from the upstream relates to the cache.
pub(super) struct Fetch<'s> {
    pub(super) status: CacheStatus,
    /// The entry to fill (a storable answer fills it; otherwise it is abandoned).
    pub(super) fill: Option<(&'s RefCell<Store>, Handle, &'s CacheEntry)>,
    /// The route's store and settings, when the request looked the key up.
    pub(super) cache: Option<(&'s RefCell<Store>, &'s CacheEntry)>,
    /// A stale entry to serve when the upstream fails (with `cache`).
    pub(super) stale: Option<Handle>,
    /// The stored entry (and its response) a conditional request validates (with `cache`).
    pub(super) validates: Option<(Handle, Hit)>,
    /// A non-error answer invalidates the key everywhere.
    pub(super) invalidate: bool,
    pub(super) request_time: Millis,
    /// The route's targeted cache-control fields, never sent on to the client.
    pub(super) targeted: &'s [String],
}

impl<'s> Fetch<'s> {
    /// A fetch that only forwards (with `X-Cache: status`) on the route of `cfg`, asked at
    /// `request_time` (its answer's Age counts the response delay from it).
    pub(super) fn plain(status: CacheStatus, cfg: &'s CacheEntry, request_time: Millis) -> Self {
        Fetch {
            targeted: &cfg.targeted,
            status,
            fill: None,
            cache: None,
            stale: None,
            validates: None,
            invalidate: false,
            request_time,
        }
    }
}

/// [`fetch`] in an allocation of its own. Its state (an upstream exchange, a fill, a
/// revalidation) is most of a cached route's: inline, every client connection's task would
/// carry those 6-7 KB, idle or serving hits, for a cost a miss pays once (one allocation
/// beside an upstream exchange).
pub(super) fn fetch_apart<'a>(
    c: &'a mut ClientConn,
    req: &'a RequestInfo,
    group: crate::config::GroupId,
    key: &'a OwnedKey,
    f: Fetch<'a>,
) -> std::pin::Pin<Box<impl std::future::Future<Output = Next> + 'a>> {
    Box::pin(fetch(c, req, group, key, f))
}

/// Forward the request, with `X-Cache` on the answer; fill, invalidate or fall back on a
/// stale entry as `f` says.
pub(super) async fn fetch(
    c: &mut ClientConn,
    req: &RequestInfo,
    group: crate::config::GroupId,
    key: &OwnedKey,
    f: Fetch<'_>,
) -> Next {
    let w = c.w.clone();
    let g = c.g.clone();
    // The record's cache status (a validation's is decided by its answer, below).
    c.rec.cache = Some(f.status);
    let head_only = req.method == RequestMethod::Head;
    let fetch_req = filling_request(&mut c.to_upstream, req, f.fill.is_some());
    if let Some((_, stored)) = &f.validates {
        validate::make_conditional(&mut c.to_upstream, validate::validators(&stored.head));
    }
    let sent = c.to_upstream.len();
    // Storing decides on the request's fields (Authorization, Vary): its head stays at the
    // front of `from_client` until the answer is stored (such a request has no body).
    let stores = f.fill.is_some() || f.validates.is_some();
    // Storing, refreshing and invalidating read the response's fields where its parse found them.
    c.response_fields.want(stores || f.invalidate);
    // A client that leaves while the head is awaited abandons the fetch (499), unless other
    // requests wait on its fill (collapsed forwarding): then it goes on for them.
    let wanted = f.fill.map(|(store, h, _)| Wanted::new(store, h));
    let how = Serving {
        interim: true,
        keep_head: stores,
        watch: wanted.as_ref().map_or(Watch::Abandon, Watch::UnlessWanted),
        // Filling, revalidating and falling back on a stale entry may end without relaying
        // the answer: an early one there stops a streamed body, as before.
        duplex: f.fill.is_none() && f.validates.is_none() && f.stale.is_none(),
    };
    let answered = upstream_answer(c, &w, &g, &fetch_req, group, how).await;
    c.response_fields.want(false);
    if wanted.as_ref().is_some_and(|w| w.left()) {
        return for_the_others(c, req, group, answered, &f).await;
    }
    let not_modified =
        f.validates.is_some() && matches!(&answered, Ok(a) if a.head.resp.status == 304);
    // A validation counts as a miss unless the origin answers 304.
    if f.validates.is_some() {
        c.rec.cache = Some(match not_modified {
            true => CacheStatus::Revalidated,
            false => CacheStatus::Miss,
        });
    }
    let a = match answered {
        Ok(a) => a,
        Err(e) => {
            consume_head(c, req, stores);
            if let Some((store, h, _)) = f.fill {
                store.borrow_mut().abandon(h);
            }
            return upstream_failed(c, req, &f, e).await;
        }
    };
    if f.stale.is_some() && is_error_status(a.head.resp.status) {
        // The origin answered with an error: a stale entry within stale-if-error serves
        // instead (the error's body is not read: its upstream connection is not reused).
        if let Some(hit) = stale_for_error(&f) {
            if let Some((store, h, _)) = f.fill {
                store.borrow_mut().abandon(h);
            }
            consume_head(c, req, stores);
            w.buffers.give_buf(a.head.ub);
            return send_stale(c, req, hit).await;
        }
    }
    if not_modified {
        return revalidated(c, req, (group, key), a, f, sent).await;
    }
    if a.head.resp.status == 206 {
        update_from_partial(c, &a, &f, req.head_len);
    }
    let fill = f.fill.map(|(store, h, _)| {
        let resp = Response {
            info: &a.head.resp,
            ub: &a.head.ub,
        };
        let kept = c.fields.with(&c.from_client[..req.head_len], |_, request| {
            fill_head(request, &resp, &c.response_fields, &w, &g, &f)
        });
        FillSink {
            store,
            handle: kept.then_some(h),
            head_only,
            silent: false,
        }
    });
    consume_head(c, req, stores);
    if f.invalidate && crate::cache::policy::invalidates(a.head.resp.status) {
        invalidate(c, &w, key, &a.head.ub);
    }
    cache_fields(&mut c.to_client, &f);
    end_client_head(&mut c.to_client, &a.head.resp);
    if a.head.resp.framing == ClientFraming::Tunnel {
        return start_tunnel(c, req, a).await;
    }
    let started = fill.as_ref().and_then(|s| s.handle.map(|h| (s.store, h)));
    let (next, filled) = relay_response(c, a, group, fill).await;
    if let Some((store, h)) = started {
        finish_fill(store, h, filled, &w, &g);
    }
    next
}

/// The client head's cache fields: the targeted ones gone (RFC 9213: for this cache only),
/// `X-Cache`, and `Age`: the age the response has on arrival, which a hit of it counts on
/// from (RFC 9111 4.2.3), in place of the upstream's Age (5.1: one that is not
/// delta-seconds is not passed on as it is).
fn cache_fields(head: &mut BytesMut, f: &Fetch<'_>) {
    if !f.targeted.is_empty() {
        drop_fields(head, f.targeted);
    }
    write_header(head, b"X-Cache", f.status.as_str().as_bytes());
    let at = Fetched {
        request_time: f.request_time,
        response_time: now_millis(),
    };
    let (age, upstream_age) = arrived_age(head, at);
    if upstream_age {
        drop_fields(head, &["age"]);
    }
    write_header_u64(head, b"Age", age);
}

/// The age at `at` ([`cache::fetched_age`]: the corrected initial age from the first Age
/// and Date fields) of the response whose client head is being built in `head` (status
/// line and field lines), and whether it has an Age field.
fn arrived_age(head: &[u8], at: Fetched) -> (u64, bool) {
    const NAMES: [&str; 2] = ["Age", "Date"];
    let mut found: [Option<&[u8]>; 2] = [None, None];
    for line in head.split(|&b| b == b'\n').skip(1) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = &line[..colon];
        let Some(i) = NAMES
            .iter()
            .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
        else {
            continue;
        };
        let value = &line[colon + 1..];
        let value = value.strip_suffix(b"\r").unwrap_or(value);
        found[i].get_or_insert(shared::http::framing::trim_ows(value));
    }
    let mut fields = [httparse::EMPTY_HEADER; 2];
    let mut n = 0;
    for (name, value) in NAMES.into_iter().zip(found) {
        if let Some(value) = value {
            fields[n] = httparse::Header { name, value };
            n += 1;
        }
    }
    (cache::fetched_age(&fields[..n], at), found[0].is_some())
}

/// A 206 `a` to the conditional request of `f`, with the stored response's strong validator:
/// the stored fields are updated from it as from a 304 (RFC 9111 3.4, 4.3.4), its framing and
/// a multipart/byteranges type (the 206's own) aside; the client gets the 206 as sent. The
/// request's head (`head_len` bytes) is still at the front of `from_client`.
fn update_from_partial(c: &ClientConn, a: &Answered<'_>, f: &Fetch<'_>, head_len: usize) {
    let (Some((store, cfg)), Some((entry, stored))) = (f.cache, &f.validates) else {
        return;
    };
    c.fields.with(&c.from_client[..head_len], |_, request| {
        c.response_fields.with(&a.head.ub, |_, new| {
            if !validate::same_strong_validator(&stored.head, new) {
                return;
            }
            let multipart = |h: &httparse::Header<'_>| {
                h.name.eq_ignore_ascii_case("content-type")
                    && h.value.len() >= 20
                    && h.value[..20].eq_ignore_ascii_case(b"multipart/byteranges")
            };
            let new: Vec<httparse::Header<'_>> =
                new.iter().filter(|h| !multipart(h)).copied().collect();
            let to = Refresh {
                store,
                entry: *entry,
                cfg,
                request,
                request_time: f.request_time,
            };
            refresh(&to, stored, &new);
        })
    });
}

/// RFC 9111 4.4: a non-error answer to an unsafe method invalidates its target URI, and the
/// URIs in its Location and Content-Location fields when they have the same origin, on every
/// worker. `ub` holds the answer's head, whose fields the connection's `ResponseFields` locate.
fn invalidate(c: &ClientConn, w: &ProxyWorker, key: &OwnedKey, ub: &[u8]) {
    crate::worker::invalidate_everywhere(w, key);
    let k = key.key();
    let mut also: [Option<OwnedKey>; 2] = [None, None];
    c.response_fields.with(ub, |_, fields| {
        let named = fields.iter().filter(|h| {
            h.name.eq_ignore_ascii_case("location")
                || h.name.eq_ignore_ascii_case("content-location")
        });
        for (slot, h) in also.iter_mut().zip(named) {
            *slot = cache::same_origin_target(k, h.value)
                .map(|target| OwnedKey::new(cache::Key { target, ..k }));
        }
    });
    for other in also.iter().flatten().filter(|o| *o != key) {
        crate::worker::invalidate_everywhere(w, other);
    }
}

/// Consume the request head a fetch kept at the front of `from_client` (`kept`), once the
/// answer no longer needs its fields.
pub(super) fn consume_head(c: &mut ClientConn, req: &RequestInfo, kept: bool) {
    if kept {
        c.from_client.advance(req.head_len);
    }
}

/// End fill `h` after its relay: complete if the body filled it (`filled`), else abandoned.
pub(super) fn finish_fill(
    store: &RefCell<Store>,
    h: Handle,
    filled: Option<Handle>,
    w: &ProxyWorker,
    g: &Generation,
) {
    {
        let mut s = store.borrow_mut();
        let done = filled.is_some_and(|h| s.finish(h));
        if !done {
            s.abandon(h);
        }
    }
    sync_stats(w, g);
}

/// The upstream gave no answer: a stale entry within `stale_if_error`, else the error.
pub(super) async fn upstream_failed(
    c: &mut ClientConn,
    req: &RequestInfo,
    f: &Fetch<'_>,
    e: Option<ProxyError>,
) -> Next {
    // The client left while the answer was awaited (the fetch was abandoned): 499.
    let Some(e) = e else {
        c.rec.failed(ProxyError::ClientGone);
        return Next::Close;
    };
    // The stale entry serves whether or not a fill could be started.
    if let Some(next) = serve_stale(c, req, f).await {
        return next;
    }
    fail_with(c, req, e, f.status).await
}

/// Serve the stale entry of `f` (`X-Cache: STALE`) if it may be served on an error now.
/// `None`: there is none.
async fn serve_stale(c: &mut ClientConn, req: &RequestInfo, f: &Fetch<'_>) -> Option<Next> {
    let hit = stale_for_error(f)?;
    Some(send_stale(c, req, hit).await)
}

/// The stale entry of `f`, if it may be served on an error now (RFC 5861 4: within the
/// route's `stale_if_error`, else the response's `stale-if-error`).
fn stale_for_error(f: &Fetch<'_>) -> Option<Hit> {
    let (Some(h), Some((store, cfg))) = (f.stale, f.cache) else {
        return None;
    };
    let route = cfg.stale_if_error.as_millis() as Millis;
    store.borrow_mut().stale_hit(h, now_millis(), route)
}

async fn send_stale(c: &mut ClientConn, req: &RequestInfo, hit: Hit) -> Next {
    c.rec.cache = Some(CacheStatus::Stale);
    let len = hit.body.len() as u64;
    let out = Stored::new(&hit.head, hit.age, CacheStatus::Stale, len);
    send_stored(c, req, out, Some(hit.body)).await
}

/// RFC 5861 4: "an error is any situation that would result in a 500, 502, 503, or 504 HTTP
/// response status code being returned".
fn is_error_status(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
}

/// The origin answered our conditional request 304: the stored entry's head and freshness
/// are updated from it (RFC 9111 4.3.4) and the client gets what a hit of the refreshed
/// response would give it (`X-Cache: REVALIDATED`): its preconditions, then its range (a
/// 304, 412, 206 or 416, else the whole response). A 304 whose ETag selects no stored
/// response updates nothing (4.3.4), and validated nothing the client could be answered
/// with: the request goes again without a validator (its upstream head is the first `sent`
/// bytes of `to_upstream`), filling `f`'s entry as a miss would.
pub(super) async fn revalidated(
    c: &mut ClientConn,
    req: &RequestInfo,
    (group, key): (GroupId, &OwnedKey),
    a: Answered<'_>,
    f: Fetch<'_>,
    sent: usize,
) -> Next {
    let answer = apply_304(c, group, a, &f, req.head_len);
    let (Some(answer), Some((store, _))) = (answer, f.cache) else {
        // Dropped for the request asked again, as an answer a route retries on is: an
        // answer of its server all the same.
        if let Some(s) = c.rec.upstream {
            let status = c.rec.upstream_status;
            c.w.count_server(&c.g, (s.group, s.server), |m| m.answered(status));
        }
        c.to_upstream.truncate(sent);
        validate::make_unconditional(&mut c.to_upstream);
        let again = Fetch {
            status: CacheStatus::Miss,
            validates: None,
            ..f
        };
        return Box::pin(fetch(c, req, group, key, again)).await;
    };
    if let Some((store, h, _)) = f.fill {
        // Refreshed, but not fresh (no-cache, max-age=0) or no longer stored: no answer to
        // the requests waiting on this validation; they validate on their own, at once.
        let mut s = store.borrow_mut();
        let answers = f
            .validates
            .as_ref()
            .is_some_and(|&(entry, _)| s.is_fresh(entry, now_millis()));
        match answers {
            true => s.abandon(h),
            false => s.pass(h),
        }
    }
    consume_head(c, req, true);
    from_store(c, req, store, answer, CacheStatus::Revalidated).await
}

/// A 304 to the conditional request of `f` (its upstream answer `a`): the stored entry
/// refreshed from it (RFC 9111 4.3.4), the upstream connection pooled when clean. What the
/// refreshed response answers the client's request with (`decide::answer`, as a hit's);
/// `None`: the 304's ETag selects no stored response ([`validate::selects`]), it updates
/// nothing. The request's head (`head_len` bytes) is still at the front of `from_client`.
pub(super) fn apply_304(
    c: &mut ClientConn,
    group: GroupId,
    a: Answered<'_>,
    f: &Fetch<'_>,
    head_len: usize,
) -> Option<FromStore> {
    // The 304 has no body: its head ends the exchange, which the log times as nginx does.
    c.upstream_ended();
    let req_head = &c.from_client[..head_len];
    let (Some((store, cfg)), Some((entry, stored))) = (f.cache, &f.validates) else {
        return None;
    };
    let Answered {
        server,
        body,
        head: Head { resp, ub, .. },
        ..
    } = a;
    let g = c.g.clone();
    let response = &c.response_fields;
    let answer = c.fields.with(req_head, |method, request| {
        response.with(&ub, |_, new| {
            if !validate::selects(validate::validators(&stored.head).etag, new) {
                return None;
            }
            let to = Refresh {
                store,
                entry: *entry,
                cfg,
                request,
                request_time: f.request_time,
            };
            let hit = refresh(&to, stored, new);
            Some(super::decide::answer(request, method, hit))
        })
    });
    // A 304 has no body: the upstream connection is clean unless more bytes followed it.
    // A connection that began with a client's PROXY header is that client's alone.
    let own = g.cfg.groups[group].proxy_protocol.is_none();
    if resp.upstream_keep_alive && ub.len() == resp.head_len && own {
        g.pool(group, server)
            .borrow_mut()
            .put(body.into_upstream(), std::time::Instant::now());
    }
    c.w.buffers.give_buf(ub);
    answer
}

/// The entry a 304 refreshes, and what storing decides with.
pub(super) struct Refresh<'a> {
    pub(super) store: &'a RefCell<Store>,
    pub(super) entry: Handle,
    pub(super) cfg: &'a CacheEntry,
    pub(super) request: &'a [httparse::Header<'a>],
    pub(super) request_time: Millis,
}

/// Update the stored response `stored` with the fields of a 304 (`new`): the response to
/// serve, and the entry refreshed (or removed, if the updated head is no longer storable).
pub(super) fn refresh(to: &Refresh<'_>, stored: &Hit, new: &[httparse::Header<'_>]) -> Hit {
    let merged = validate::updated_fields(&stored.head, new);
    // A 304 without a Date gets the time it was received (RFC 9110 6.6.1), as its update
    // would have carried: the stored one, older, would age the entry by the time since.
    let dated = new.iter().any(|h| h.name.eq_ignore_ascii_case("date"));
    let fields: Vec<httparse::Header<'_>> = merged
        .iter()
        .filter(|(n, _)| dated || !n.eq_ignore_ascii_case(b"date"))
        .filter_map(|&(n, value)| {
            let name = std::str::from_utf8(n).ok()?;
            Some(httparse::Header { name, value })
        })
        .collect();
    let line = stored
        .head
        .split(|&b| b == b'\r')
        .next()
        .unwrap_or_default();
    // "HTTP/1.1 200 OK": the reason is what follows the status code.
    let reason = line.splitn(3, |&b| b == b' ').nth(2).unwrap_or_default();
    let reason = std::str::from_utf8(reason).unwrap_or_default();
    let at = Fetched {
        request_time: to.request_time,
        response_time: now_millis(),
    };
    let head = stored_head(
        stored.status,
        reason,
        &fields,
        &to.cfg.targeted,
        at.response_time,
    );
    let len = Some(stored.body.len() as u64);
    let age = match cache::storable(to.request, stored.status, &fields, len, at, to.cfg) {
        Ok(st) => {
            let age = st.freshness.age_secs(at.response_time);
            if !to.store.borrow_mut().refresh(to.entry, head.clone(), st) {
                to.store.borrow_mut().abandon(to.entry);
            }
            age
        }
        Err(_) => {
            to.store.borrow_mut().abandon(to.entry);
            cache::fetched_age(&fields, at)
        }
    };
    // Served from memory: the entry's file range may be gone with the entry. The fields only
    // the cache reads stay behind.
    let served = crate::cache::store::served_len(&head);
    Hit {
        status: stored.status,
        head: head.slice(..served),
        body: stored.body.clone(),
        age,
        file: None,
        interim: stored.interim.clone(),
    }
}

/// An upstream's final response head: what its one parse made of it (`info`), and the buffer
/// it was parsed from (`ub`), in which the connection's `ResponseFields` locate its fields.
pub(super) struct Response<'a> {
    pub(super) info: &'a crate::forward::ResponseInfo,
    pub(super) ub: &'a [u8],
}

/// Decide whether the answer is stored and, if so, give the entry its head. `false`: the
/// fill was abandoned.
pub(super) fn fill_head(
    request: &[httparse::Header<'_>],
    resp: &Response<'_>,
    fields: &crate::forward::ResponseFields,
    w: &ProxyWorker,
    g: &Generation,
    f: &Fetch<'_>,
) -> bool {
    let Some((store, h, cfg)) = f.fill else {
        return false;
    };
    let status = resp.info.status;
    let declared = match resp.info.body {
        BodyKind::Length(n) => Some(n),
        BodyKind::Empty => Some(0),
        _ => None,
    };
    let at = Fetched {
        request_time: f.request_time,
        response_time: now_millis(),
    };
    fields.with(resp.ub, |reason, headers| {
        // A 206 for a key with nothing stored keeps its part (RFC 9111 3.3), stored as the
        // 200 it is part of.
        let held = match (status, &f.stale, &f.validates) {
            (206, None, None) => partial_content(headers, declared),
            _ => None,
        };
        let (status, reason) = match held {
            Some(_) => (200, "OK"),
            None => (status, reason),
        };
        match cache::storable(request, status, headers, declared, at, cfg) {
            Ok(st) => {
                let head = stored_head(status, reason, headers, &cfg.targeted, at.response_time);
                let hints = early_hints(resp.ub, &g.cfg.limits.codec);
                let mut s = store.borrow_mut();
                let kept = s.fill_head(h, status, head, st, declared)
                    && held.is_none_or(|part| s.hold(h, part))
                    && (hints.is_empty() || s.set_interim(h, hints));
                drop(s);
                sync_stats(w, g);
                kept
            }
            Err(_) => {
                store.borrow_mut().pass(h);
                false
            }
        }
    })
}

/// The most bytes of 103 Early Hints heads kept with an entry (more: none kept).
pub(super) const MAX_HINTS: usize = 4096;

/// The 103 Early Hints heads at the front of an upstream's buffer `ub` (before its final
/// head), rewritten as a client gets them (`forward::write_interims`), to send again on a hit
/// (RFC 8297: a cache may); empty when there are none, or more than [`MAX_HINTS`] bytes.
/// Other interim responses (102) were about that exchange only.
pub(super) fn early_hints(ub: &[u8], limits: &shared::http::Limits) -> Bytes {
    if !crate::forward::starts_interim(ub) {
        return Bytes::new();
    }
    let mut all = BytesMut::new();
    if crate::forward::write_interims(ub, limits, &mut all).is_err() {
        return Bytes::new();
    }
    let mut hints = BytesMut::new();
    let mut rest = &all[..];
    while let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
        let (head, after) = rest.split_at(end + 4);
        if head.starts_with(b"HTTP/1.1 103 ") {
            hints.extend_from_slice(head);
        }
        rest = after;
    }
    if hints.len() > MAX_HINTS {
        return Bytes::new();
    }
    hints.freeze()
}

/// The part of its representation a 206 with fields `fields` and a body of `declared` bytes
/// is, when it may be stored: one range (`Content-Range` with the complete length, not
/// multipart), as long as its body, and a strong validator to combine it by (RFC 9111 3.4).
fn partial_content(fields: &[httparse::Header<'_>], declared: Option<u64>) -> Option<cache::Held> {
    let mut ranges = fields
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-range"));
    let (first, last, total) = cache::ranges::content_range(ranges.next()?.value)?;
    let one = ranges.next().is_none() && declared == Some(last - first + 1);
    (one && validate::has_strong_validator(fields)).then_some(cache::Held {
        start: first,
        total,
    })
}

/// The head kept with an entry: status line and end-to-end fields, without hop-by-hop
/// fields, framing, Age or X-Cache (a hit writes its own), nor the `targeted` fields (RFC
/// 9213: for this cache only), which follow the others after an empty line, kept for a 304's
/// update (`Store` serves the head up to it). Without a Date, one of the time it was
/// `received` (RFC 9110 6.6.1: "MUST record the time it was received and append a
/// corresponding Date header field ... if it is cached"), so hits carry it.
pub(super) fn stored_head(
    status: u16,
    reason: &str,
    fields: &[httparse::Header<'_>],
    targeted: &[String],
    received: Millis,
) -> Bytes {
    let mut out = BytesMut::with_capacity(256);
    write_status_line(&mut out, Version::Http11, status, reason);
    let named = Named::collect(fields);
    let is_targeted = |n: &str| targeted.iter().any(|t| t.eq_ignore_ascii_case(n));
    let mut hidden = false;
    for h in fields {
        let n = h.name;
        if is_hop_by_hop(n)
            || n.eq_ignore_ascii_case("content-length")
            || n.eq_ignore_ascii_case("content-range")
            || n.eq_ignore_ascii_case("age")
            || n.eq_ignore_ascii_case("x-cache")
            || named.contains(n, fields)
        {
            continue;
        }
        if is_targeted(n) {
            hidden = true;
            continue;
        }
        write_header(&mut out, n.as_bytes(), h.value);
    }
    if !fields.iter().any(|h| h.name.eq_ignore_ascii_case("date")) {
        write_header(
            &mut out,
            b"Date",
            &crate::http_date::imf_fixdate(received / 1000),
        );
    }
    if hidden {
        out.extend_from_slice(b"\r\n");
        for h in fields.iter().filter(|h| is_targeted(h.name)) {
            write_header(&mut out, h.name.as_bytes(), h.value);
        }
    }
    out.freeze()
}

/// Remove the fields named in `names` from a client head being built (status line and
/// field lines, no empty line yet): targeted cache control is for this cache only.
pub(super) fn drop_fields<N: AsRef<[u8]>>(head: &mut BytesMut, names: &[N]) {
    let mut at = match head.windows(2).position(|w| w == b"\r\n") {
        Some(i) => i + 2,
        None => return,
    };
    while at < head.len() {
        let end = head[at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(head.len(), |i| at + i + 2);
        let line = &head[at..end];
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        if names.iter().any(|n| n.as_ref().eq_ignore_ascii_case(name)) {
            head.copy_within(end.., at);
            head.truncate(head.len() - (end - at));
        } else {
            at = end;
        }
    }
}

/// The request a fetch sends for `req` (whose upstream head is in `to_upstream`): a HEAD that
/// `fills` an entry fills it with a GET of the whole response (the HEAD's Range and If-Range
/// dropped), and its client gets the 200's head, as a hit would give it.
pub(super) fn filling_request(
    to_upstream: &mut BytesMut,
    req: &RequestInfo,
    fills: bool,
) -> RequestInfo {
    if !fills || req.method != RequestMethod::Head {
        return *req;
    }
    to_get(to_upstream);
    validate::make_whole(to_upstream);
    RequestInfo {
        method: RequestMethod::Other,
        ..*req
    }
}

/// Turn the upstream request line `HEAD ...` in `to_upstream` into `GET ...`.
pub(super) fn to_get(to_upstream: &mut BytesMut) {
    if to_upstream.starts_with(b"HEAD ") {
        let rest = to_upstream.split_off(5);
        to_upstream.clear();
        to_upstream.extend_from_slice(b"GET ");
        to_upstream.unsplit(rest);
    }
}
