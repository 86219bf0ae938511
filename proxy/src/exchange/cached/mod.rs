//! A request on a cached route: the I/O around the cache's sans-IO core (`crate::cache`).
//!
//! - The time is read once per request; the request head is not parsed again: its fields are
//!   read where the one parse found them (`request::HeadFields`, on the connection). The
//!   decision ([`decide`]) takes them, the route's settings and the worker's store, and no
//!   borrow of the store outlives it.
//! - Hit: the stored head (no hop-by-hop fields, no framing, no Age or X-Cache) with `Age`,
//!   `X-Cache: HIT` and `Content-Length`, then the body (head only for HEAD): from memory, or
//!   with sendfile from the worker's body file for bodies of 4 KiB and more
//!   (`cache::memfd`). A client's own If-None-Match / If-Modified-Since that the stored
//!   validators match gets a 304.
//! - Validation: a `no-cache` request, or a stale entry, with an ETag or Last-Modified is
//!   fetched with a conditional request ([`validate`]); a 304 refreshes the entry (RFC 9111
//!   4.3.4) and serves it as a hit would, through the same decision (`decide::answer`: the
//!   request's preconditions and range; `X-Cache: REVALIDATED`), a 200 replaces it (MISS); a 304 whose
//!   ETag selects no stored response updates nothing, and the request goes again without a
//!   validator (MISS).
//! - Stream: a request collapsed on a fill that declared its length streams the entry as it
//!   fills. Wait: a fill without a head (or without a length) is under way; wait for it to
//!   change and decide again.
//! - Miss/Stale: `begin_fill`, fetch upstream (with GET for a HEAD, as nginx does), and copy
//!   the body into the entry while it streams to the client; on upstream error or timeout a
//!   stale entry within `stale_if_error` is served (`X-Cache: STALE`), else 502/504.
//! - Unsafe methods with a non-error answer invalidate the key here and on every other worker
//!   (through the workers' inbox); `PURGE` from `purge_from` does the same at once: 200 when
//!   this worker had the key, 404 when it did not (the other workers are told either way);
//!   from elsewhere 403 (ngx_cache_purge's answer to a client outside `purge_allowed`).
//! - The proxy's own answers carry X-Cache too ([`fail_with`]): MISS after a lookup (a failed
//!   fill, only-if-cached with nothing stored), BYPASS when the cache was not used (unsafe
//!   methods, credentials, a body over `max_body`, PURGE answers). Age only when a stored
//!   response answers (a 412 or 416 from it carries its age): an error has no age to give.
//!
//! # Layout
//! - this file: [`run`], the entry point (the decision, then its one action), and what the
//!   parts share;
//! - `decide`: the decision, sans-IO; `hit`: answers from the store; `filling`: a filling
//!   entry streamed; `fetch`: a fetch that fills, revalidates, invalidates or falls back on a
//!   stale entry; `background`: a stale-while-revalidate revalidation, as a task of its own;
//!   `purge`: PURGE.

use crate::cache::{CacheStatus, Handle, Key, Millis, OwnedKey, Store};
use crate::conn::{respond_error_with, ClientConn, Next};
use crate::error::ProxyError;
use crate::generation::{CacheId, CachedRoute, Generation};
use crate::request::{body_too_large, RequestInfo};
use crate::worker::ProxyWorker;
use bytes::Buf;
use std::cell::RefCell;
use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

mod background;
mod decide;
mod fetch;
mod filling;
mod hit;
mod purge;
mod unsent;

use decide::{decide, Decision, FromStore};
use fetch::{fetch_apart, Fetch};
use filling::stream_entry;
use hit::{
    send_hit, send_not_modified, send_partial, send_precondition_failed, send_unsatisfiable, Stored,
};
use purge::purge;

/// How many times a request waits for a fill of its key before fetching on its own.
const MAX_WAITS: usize = 8;

/// The time every cache decision of a request is made at.
pub fn now_millis() -> Millis {
    shared::clock::coarse_unix().as_millis() as Millis
}

/// A request on the cached route `cache` (of the connection's generation).
pub async fn run(
    c: &mut ClientConn,
    req: &RequestInfo,
    cache: CacheId,
    group: crate::config::GroupId,
) -> Next {
    let g = c.g.clone();
    let CachedRoute { cfg, store, .. } = g.cached(cache);
    let store: &RefCell<Store> = store;
    // Refused here on a cached route, so the answer carries X-Cache.
    if body_too_large(req.body, g.cfg.limits.max_body) {
        c.rec.cache = Some(CacheStatus::Bypass);
        return fail_with(c, req, ProxyError::BodyTooLarge, CacheStatus::Bypass).await;
    }
    let mut waits = 0;
    let mut now = now_millis();
    let https = c.stream.is_tls();
    // Where a target without its `/` gets one (an absolute-form target with an empty path:
    // rare, and empty otherwise, which allocates nothing).
    let mut slashed = Vec::new();
    loop {
        // The key is read from the client buffer for the decision (no copy on a hit), and
        // copied only for what outlives the head: a fetch, a purge.
        let d = c
            .fields
            .with(&c.from_client[..req.head_len], |method, fields| {
                let key = key_of(&c.from_client, req, https, &mut slashed);
                decide((method, fields), req, cfg, store, key, now)
            });
        let key = || OwnedKey::new(key_of(&c.from_client, req, https, &mut Vec::new()));
        match d {
            Decision::Stored(answer) => {
                c.rec.cache = Some(CacheStatus::Hit);
                c.from_client.advance(req.head_len);
                return from_store(c, req, store, answer, CacheStatus::Hit).await;
            }
            Decision::StaleWhileRevalidate { answer, refresh } => {
                c.rec.cache = Some(CacheStatus::Stale);
                // The revalidation runs apart (`background`): this client is answered now and
                // its next request is read at once.
                if let Some(r) = refresh {
                    background::start(c, req, (cache, group), r, now_millis());
                }
                c.from_client.advance(req.head_len);
                return from_store(c, req, store, answer, CacheStatus::Stale).await;
            }
            Decision::Wait {
                fill,
                stale,
                only_if_cached,
            } => {
                // The fill reads its upstream under the route's read timeout: wait as long.
                let read = g.cfg.routes[req.route].timeouts(&g.cfg.timeouts).read;
                let woken = waits < MAX_WAITS && wait_change(store, fill, read).await;
                if woken {
                    waits += 1;
                    now = now_millis();
                    if !store.borrow().passes(fill, now) {
                        continue;
                    }
                }
                // What the fill did not store in time, or cannot answer with, is not stored
                // for this client.
                if only_if_cached {
                    return not_cached(c, req).await;
                }
                let key = key();
                let route = (store, cfg.as_ref());
                return fetch_alone(c, req, group, route, &key, (stale, woken), now).await;
            }
            Decision::Fetch {
                fill,
                stale,
                validates,
            } => {
                let f = Fetch {
                    status: CacheStatus::Miss,
                    fill: fill.map(|h| (store, h, cfg.as_ref())),
                    cache: Some((store, cfg.as_ref())),
                    stale,
                    validates,
                    invalidate: false,
                    request_time: now,
                    targeted: &cfg.targeted,
                };
                let key = key();
                return fetch_apart(c, req, group, &key, f).await;
            }
            Decision::Forward { invalidate } => {
                c.rec.cache = Some(CacheStatus::Bypass);
                let f = Fetch {
                    invalidate,
                    ..Fetch::plain(CacheStatus::Bypass, cfg, now)
                };
                let key = key();
                return fetch_apart(c, req, group, &key, f).await;
            }
            Decision::Purge => {
                let key = key();
                return purge(c, req, cfg, &key).await;
            }
            Decision::NotCached => return not_cached(c, req).await,
        }
    }
}

/// A request that waited on a fill of its key fetches on its own, without storing: the fill
/// takes too long, or its answer is none to this request (`passed`: the requests the fill
/// woke go upstream together, [`Store::passes`]). A stale entry (`stale`) still serves if the
/// upstream fails; after a pass it is validated, as a lookup finding it would.
async fn fetch_alone(
    c: &mut ClientConn,
    req: &RequestInfo,
    group: crate::config::GroupId,
    (store, cfg): (&RefCell<Store>, &crate::config::cache::CacheEntry),
    key: &OwnedKey,
    (stale, passed): (Option<Handle>, bool),
    now: Millis,
) -> Next {
    c.rec.cache = Some(CacheStatus::Miss);
    let validates = stale
        .filter(|_| passed)
        .and_then(|h| decide::validating(&store.borrow(), h, now));
    let f = Fetch {
        cache: Some((store, cfg)),
        stale,
        validates,
        ..Fetch::plain(CacheStatus::Miss, cfg, now)
    };
    fetch_apart(c, req, group, key, f).await
}

/// Only-if-cached and nothing is stored: 504 (RFC 9111 5.2.1.7).
async fn not_cached(c: &mut ClientConn, req: &RequestInfo) -> Next {
    c.from_client.advance(req.head_len);
    fail_with(c, req, ProxyError::UpstreamTimeout, CacheStatus::Miss).await
}

/// Answer a request the store answers (`X-Cache: HIT`): a hit, a 304 or a 412 from a stored
/// response, or an entry streamed as it fills.
async fn from_store(
    c: &mut ClientConn,
    req: &RequestInfo,
    store: &RefCell<Store>,
    answer: FromStore,
    status: CacheStatus,
) -> Next {
    match answer {
        FromStore::Hit(hit) => send_hit(c, req, hit, status).await,
        FromStore::NotModified(hit) => send_not_modified(c, req, &hit, status).await,
        FromStore::PreconditionFailed { age } => {
            send_precondition_failed(c, req, status, age).await
        }
        FromStore::Partial {
            hit,
            start,
            end,
            held,
        } => send_partial(c, req, hit, (start, end, held), status).await,
        FromStore::Unsatisfiable { len, age } => {
            send_unsatisfiable(c, req, (len, age), status).await
        }
        FromStore::Stream {
            entry,
            head,
            age,
            len,
        } => {
            let out = Stored::new(&head, age, status, len);
            stream_entry(c, req, store, entry, out).await
        }
    }
}

/// The cache key of the request whose head is in `from_client`, from a client on a connection
/// that is HTTPS or not: the authority (absolute-form or Host; [`NO_AUTHORITY`] without one)
/// and the target's origin form, as the origin gets them ([`origin_target`], or with its dot
/// segments resolved when it had some, as it was forwarded; `slashed` holds it when the
/// client's bytes do not).
fn key_of<'a>(
    from_client: &'a [u8],
    req: &RequestInfo,
    https: bool,
    slashed: &'a mut Vec<u8>,
) -> Key<'a> {
    let host = req.authority.map_or(NO_AUTHORITY, |a| a.get(from_client));
    let target = req.target.get(from_client);
    let target = if req.dot_segments {
        shared::http::target::resolve_dot_segments(target, slashed)
    } else {
        origin_target(target, slashed)
    };
    Key::new(https, host, target)
}

/// The key's host for a request without an authority (HTTP/1.0 without Host). Upstream it
/// carries the server's name (`write_upstream_head` leaves Host to each attempt), while an
/// empty Host (RFC 9112 3.2: a target without an authority) is sent as it is: two requests
/// the origin tells apart, so two keys. Keyed, not refused: HTTP/1.0 clients stay cached as
/// before, at no cost to other requests. No authority the codec accepts can be this one (its
/// grammar has no `(`), nor any Host a client can send.
const NO_AUTHORITY: &[u8] = b"(none)";

/// The origin form of `target` (`RequestInfo::target`: the path and query as received), as
/// the upstream request line has it (`shared::http::target::origin_form`): an empty path is
/// `/` (RFC 9112 3.2.1), so `http://a.test?q=1` is `/?q=1`, the resource an origin-form
/// `/?q=1` names, and the one a POST or PURGE of `/?q=1` must reach. Borrowed when it starts
/// with `/`; otherwise written into `slashed`.
fn origin_target<'a>(target: &'a [u8], slashed: &'a mut Vec<u8>) -> &'a [u8] {
    if target.starts_with(b"/") {
        return target;
    }
    slashed.clear();
    slashed.push(b'/');
    slashed.extend_from_slice(target);
    slashed
}

/// Wait until entry `h` changes (or `limit` passes: `false`).
async fn wait_change(store: &RefCell<Store>, h: Handle, limit: Duration) -> bool {
    let mut subscribed = false;
    let changed = poll_fn(|cx| {
        let waits = if subscribed {
            // Woken: by the change, which took the waker off the entry, or by something
            // else, the deadline's timer included (`timeout` polls this future first).
            store.borrow().still_waits(h, cx.waker())
        } else {
            subscribed = true;
            store.borrow_mut().subscribe(h, cx.waker())
        };
        if waits {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    });
    monoio::time::timeout(limit, changed).await.is_ok()
}

fn next_after(keep: bool) -> Next {
    if keep {
        Next::KeepAlive
    } else {
        Next::Finished
    }
}

fn client_gone(rec: &mut crate::record::Record) -> Next {
    rec.failed(ProxyError::ClientGone);
    Next::Close
}

/// The proxy's own error answer to `req` on a cached route, with its `X-Cache` field: MISS
/// for a lookup that found nothing to serve (a failed fill, as nginx's
/// `$upstream_cache_status` says), BYPASS for a request that did not use the cache.
async fn fail_with(
    c: &mut ClientConn,
    req: &RequestInfo,
    e: ProxyError,
    status: CacheStatus,
) -> Next {
    let fields: [(&[u8], &[u8]); 1] = [(b"X-Cache", status.as_str().as_bytes())];
    let head_only = req.method == shared::http::RequestMethod::Head;
    respond_error_with(c, e, &fields, head_only).await;
    Next::Close
}

/// The store's eviction and drop counts, mirrored into the worker's counters.
/// (Summed over the stores of generation `g`, one per cached route; called on the miss path
/// only, with no store borrowed.)
fn sync_stats(w: &ProxyWorker, g: &Generation) {
    let (mut evicted, mut dropped) = (0, 0);
    for s in g.stores() {
        let st = s.borrow().stats();
        evicted += st.evicted + st.variants_evicted;
        dropped += st.dropped_too_large + st.dropped_no_room;
    }
    w.stats.cache_evicted.set(evicted);
    w.stats.cache_dropped.set(dropped);
}

#[cfg(test)]
mod tests {
    use super::origin_target;

    #[test]
    fn the_key_has_the_target_as_forwarded() {
        let cases: [(&str, &str); 4] = [
            ("/a?b", "/a?b"),
            ("", "/"),
            ("?q=1", "/?q=1"),
            ("//x", "//x"),
        ];
        for (received, forwarded) in cases {
            let mut slashed = Vec::new();
            let got = origin_target(received.as_bytes(), &mut slashed);
            assert_eq!(got, forwarded.as_bytes(), "{received:?}");
            let absolute = format!("http://h{received}");
            let origin_form = shared::http::target::origin_form(&absolute);
            assert_eq!(
                origin_form.as_bytes(),
                forwarded.as_bytes(),
                "upstream line"
            );
        }
    }
}
