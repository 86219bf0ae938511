//! What the cache does with one request, decided with no I/O: from the request's fields
//! (as its one parse found them), the route's settings and the worker's store.

use crate::cache::ranges::{from_stored, FromStored};
use crate::cache::validate;
use crate::cache::{classify, Handle, Held, Hit, Key, Lookup, Millis, RequestClass, Store};
use crate::config::cache::CacheEntry;
use crate::preconditions::Outcome;
use crate::request::RequestInfo;
use bytes::Bytes;
use shared::http::BodyKind;
use std::cell::RefCell;

/// What the cache does with one request, decided with no I/O.
pub(super) enum Decision {
    /// The store answers (`X-Cache: HIT`).
    Stored(FromStore),
    /// A fill of the key is under way: wait for it; if it takes too long, or its head
    /// answers none of its waiters (a pass, `Store::passes`), fetch on our own, falling back on `stale` (a stored response of the variant) if the upstream fails
    /// (`only_if_cached`: never fetch, 504 instead, RFC 9111 5.2.1.7).
    Wait {
        fill: Handle,
        stale: Option<Handle>,
        only_if_cached: bool,
    },
    /// Fetch from the upstream, filling `fill` (a miss) and falling back on `stale`;
    /// conditionally when `validates` holds a stored response with a validator.
    Fetch {
        fill: Option<Handle>,
        stale: Option<Handle>,
        validates: Option<(Handle, Hit)>,
    },
    /// Forward without the cache; `invalidate`: a non-error answer removes the key.
    Forward {
        invalidate: bool,
    },
    Purge,
    /// Only-if-cached and nothing is: 504 (RFC 9111 5.2.1.7).
    NotCached,
    /// A stale entry within its `stale-while-revalidate` (RFC 5861 3) answers at once
    /// (`X-Cache: STALE`); `refresh`: this request then revalidates it (no other fill of the
    /// key is under way).
    StaleWhileRevalidate {
        answer: FromStore,
        refresh: Option<Refill>,
    },
}

/// The one revalidation of a stale entry served while it runs: the fill that replaces it,
/// and the stored response (with a validator) a conditional request validates.
pub(super) struct Refill {
    /// The stale entry served.
    pub(super) entry: Handle,
    pub(super) fill: Handle,
    pub(super) validates: Option<(Handle, Hit)>,
}

/// What the store answers with.
pub(super) enum FromStore {
    Hit(Hit),
    /// A hit whose validators match the client's own conditional request: 304.
    NotModified(Hit),
    /// A hit (or a fill streaming) the client's If-Match or If-Unmodified-Since fails: 412,
    /// with the stored response's `age`.
    PreconditionFailed {
        age: u64,
    },
    /// 206: bytes `start..=end` of a stored response (a single `Range`), whose body holds
    /// its bytes from `held.start` of `held.total` (0 and the body's length when complete).
    Partial {
        hit: Hit,
        start: u64,
        end: u64,
        held: Held,
    },
    /// 416: the `Range` asks for no byte of the stored body (`len` bytes; the stored
    /// response's `age`).
    Unsatisfiable {
        len: u64,
        age: u64,
    },
    /// An entry filling with a declared length, streamed as it fills.
    Stream {
        entry: Handle,
        head: Bytes,
        age: u64,
        len: u64,
    },
}

/// The cache's decision for the request whose method and fields are `head` (as its one parse
/// found them: `request::HeadFields`).
pub(super) fn decide(
    (method, fields): (&str, &[httparse::Header<'_>]),
    req: &RequestInfo,
    cfg: &CacheEntry,
    store: &RefCell<Store>,
    key: Key<'_>,
    now: Millis,
) -> Decision {
    let class = classify(method, fields, cfg);
    let has_body = !matches!(req.body, BodyKind::Empty | BodyKind::Length(0));
    match class {
        RequestClass::Lookup { .. } if has_body || req.websocket => {
            Decision::Forward { invalidate: false }
        }
        RequestClass::Lookup {
            accepts,
            only_if_cached,
        } => {
            let mut s = store.borrow_mut();
            match s.lookup(key, fields, accepts, now) {
                Lookup::Hit(hit) => Decision::Stored(answer(fields, method, hit)),
                Lookup::Stream {
                    entry,
                    status,
                    head,
                    age,
                    len,
                } => match validate::precondition(fields, status, &head) {
                    Outcome::Proceed => Decision::Stored(FromStore::Stream {
                        entry,
                        head,
                        age,
                        len,
                    }),
                    Outcome::NotModified => Decision::Stored(FromStore::NotModified(Hit {
                        status,
                        head,
                        body: Bytes::new(),
                        age,
                        file: None,
                        interim: Bytes::new(),
                    })),
                    Outcome::Failed => Decision::Stored(FromStore::PreconditionFailed { age }),
                },
                Lookup::Revalidate {
                    hit,
                    entry,
                    revalidating,
                } => {
                    let refresh = match revalidating {
                        true => None,
                        false => s.begin_fill(key).map(|fill| Refill {
                            entry,
                            fill,
                            validates: s
                                .stored(entry, now)
                                .filter(|hit| validate::validators(&hit.head).any())
                                .map(|hit| (entry, hit)),
                        }),
                    };
                    Decision::StaleWhileRevalidate {
                        answer: answer(fields, method, hit),
                        refresh,
                    }
                }
                Lookup::Wait(fill) => {
                    // What `revalidate` finds is any complete entry of the variant.
                    let stale = match s.lookup(key, fields, true, now) {
                        Lookup::Stale(h) => Some(h),
                        _ => None,
                    };
                    Decision::Wait {
                        fill,
                        stale,
                        only_if_cached,
                    }
                }
                Lookup::Held { hit, held } => match from_held(fields, method, hit, held) {
                    Some(answer) => Decision::Stored(answer),
                    None if only_if_cached => Decision::NotCached,
                    None => Decision::Fetch {
                        fill: s.begin_fill(key),
                        stale: None,
                        validates: None,
                    },
                },
                _ if only_if_cached => Decision::NotCached,
                Lookup::Stale(h) => Decision::Fetch {
                    validates: validating(&s, h, now),
                    fill: s.begin_fill(key),
                    stale: Some(h),
                },
                Lookup::Miss => Decision::Fetch {
                    fill: s.begin_fill(key),
                    stale: None,
                    validates: None,
                },
            }
        }
        RequestClass::Bypass(_) => Decision::Forward { invalidate: false },
        RequestClass::Invalidate => Decision::Forward { invalidate: true },
        RequestClass::Purge => Decision::Purge,
    }
}

/// The stored response of entry `h` with its handle, for a conditional request to validate
/// it, if it has a validator.
pub(super) fn validating(s: &Store, h: Handle, now: Millis) -> Option<(Handle, Hit)> {
    s.stored(h, now)
        .filter(|hit| validate::validators(&hit.head).any())
        .map(|hit| (h, hit))
}

/// What the request (`method`, `fields`) gets from the complete stored response `hit`: its
/// preconditions, then its range (`cache::ranges`). A hit's answer, and a revalidated one's
/// (`fetch::revalidated`).
pub(super) fn answer(fields: &[httparse::Header<'_>], method: &str, hit: Hit) -> FromStore {
    let len = hit.body.len() as u64;
    match from_stored(fields, (hit.status, &hit.head), len, method == "GET") {
        FromStored::Full => FromStore::Hit(hit),
        FromStored::NotModified => FromStore::NotModified(hit),
        FromStored::PreconditionFailed => FromStore::PreconditionFailed { age: hit.age },
        FromStored::Partial { start, end } => FromStore::Partial {
            hit,
            start,
            end,
            held: Held {
                start: 0,
                total: len,
            },
        },
        FromStored::Unsatisfiable => FromStore::Unsatisfiable { len, age: hit.age },
    }
}

/// What the request gets from the stored part `hit` (`held`) of a response: a range within
/// it, or what its preconditions decide; `None`: it needs bytes not held (fetch).
fn from_held(
    fields: &[httparse::Header<'_>],
    method: &str,
    hit: Hit,
    held: Held,
) -> Option<FromStore> {
    let end = held.start + hit.body.len() as u64;
    match from_stored(fields, (hit.status, &hit.head), held.total, method == "GET") {
        FromStored::Partial { start, end: last } if start >= held.start && last < end => {
            Some(FromStore::Partial {
                hit,
                start,
                end: last,
                held,
            })
        }
        FromStored::NotModified => Some(FromStore::NotModified(hit)),
        FromStored::PreconditionFailed => Some(FromStore::PreconditionFailed { age: hit.age }),
        FromStored::Unsatisfiable => Some(FromStore::Unsatisfiable {
            len: held.total,
            age: hit.age,
        }),
        FromStored::Partial { .. } | FromStored::Full => None,
    }
}
