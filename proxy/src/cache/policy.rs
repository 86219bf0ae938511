//! What the cache does with a request and with the response to it, decided from the heads and
//! the route's settings, with time passed in (RFC 9111 sections quoted where they decide).

use super::directives::{RequestDirectives, ResponseDirectives, DELTA_MAX};
use super::vary::{VarySpec, VaryStar};
use super::Millis;
use crate::config::cache::CacheEntry;

/// What a request on a cached route does with the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestClass {
    /// GET or HEAD: look the key up. A HEAD miss fills the entry with a GET, as nginx does.
    Lookup {
        /// What the request accepts of a stored response.
        accepts: Accepts,
        /// `only-if-cached`: a miss is answered 504 (5.2.1.7).
        only_if_cached: bool,
    },
    /// Forwarded without touching the cache (`X-Cache: BYPASS`).
    Bypass(Bypass),
    /// A method not known to be safe (RFC 9110 9.2.1: POST, PUT, DELETE, PATCH, and any
    /// extension method such as `M-SEARCH`): forwarded; a non-error answer invalidates the key
    /// (RFC 9111 4.4).
    Invalidate,
    /// `PURGE`: remove the key on every worker (when the client is in `purge_from`).
    Purge,
}

/// Why a request bypassed the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bypass {
    /// A safe method the cache does not serve (OPTIONS, TRACE): neither looked up nor
    /// invalidating.
    Method,
    /// `Authorization` or `Cookie` on a route without `allow_credentials`.
    Credentials,
    /// `Cache-Control: no-store` (5.2.1.5: "a cache MUST NOT store any part of either this
    /// request or any response to it").
    NoStore,
}

/// Classify a request on a cached route.
pub fn classify(method: &str, headers: &[httparse::Header<'_>], cfg: &CacheEntry) -> RequestClass {
    match method {
        "GET" | "HEAD" => {}
        "PURGE" => return RequestClass::Purge,
        // RFC 9110 9.2.1: GET, HEAD, OPTIONS and TRACE are the safe methods; every other one,
        // an extension method included, may change the resource.
        "OPTIONS" | "TRACE" => return RequestClass::Bypass(Bypass::Method),
        _ => return RequestClass::Invalidate,
    }
    let credentials = headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("authorization") || h.name.eq_ignore_ascii_case("cookie")
    });
    if credentials && !cfg.allow_credentials {
        return RequestClass::Bypass(Bypass::Credentials);
    }
    let d = RequestDirectives::scan(headers);
    if d.no_store {
        return RequestClass::Bypass(Bypass::NoStore);
    }
    let ms = |secs: u64| secs.saturating_mul(1000);
    RequestClass::Lookup {
        accepts: Accepts {
            revalidate: d.no_cache,
            max_age: d.max_age,
            min_fresh: d.min_fresh.map_or(0, ms),
            max_stale: d.max_stale.map(ms),
        },
        only_if_cached: d.only_if_cached,
    }
}

/// What a request accepts of a stored response without validation (RFC 9111 5.2.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accepts {
    /// `no-cache` (or `max-age=0`, or `Pragma: no-cache`): nothing; go to the origin, and
    /// store what it answers (5.2.1.4: "does not want to use a stored response without
    /// successful validation").
    pub revalidate: bool,
    /// `max-age=N`: whole seconds of age at most.
    pub max_age: Option<u64>,
    /// `min-fresh=N`: fresh for at least this much longer.
    pub min_fresh: Millis,
    /// `max-stale[=N]`: stale by at most this much.
    pub max_stale: Option<Millis>,
}

impl Accepts {
    /// Whether the request's directives narrow or widen plain freshness.
    fn plain(&self) -> bool {
        self.max_age.is_none() && self.min_fresh == 0 && self.max_stale.is_none()
    }
}

impl From<bool> for Accepts {
    /// Plain freshness, or (`true`) nothing without validation.
    fn from(revalidate: bool) -> Accepts {
        Accepts {
            revalidate,
            ..Accepts::default()
        }
    }
}

/// 4.4: "A cache MUST invalidate the target URI ... when it receives a non-error status code
/// in response to an unsafe request method."
pub fn invalidates(status: u16) -> bool {
    (200..400).contains(&status)
}

/// Why a response was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStored {
    /// Not a final, complete response (1xx, 206, 304).
    Status,
    /// No explicit freshness, and not a status the route's ttl covers (200, 301, 404).
    NoFreshness,
    NoStore,
    Private,
    /// `no-cache` without a validator: every use would need a whole new response.
    NoCache,
    SetCookie,
    /// 3.5: a request with Authorization, and none of public, s-maxage, must-revalidate.
    Authorization,
    VaryStar,
    /// Content-Length over `max_object`.
    TooLarge,
}

/// When a response was fetched: the request's send time and the response's arrival time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetched {
    pub request_time: Millis,
    pub response_time: Millis,
}

/// A stored response's age and lifetime (4.2), all in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    pub response_time: Millis,
    pub corrected_initial_age: Millis,
    pub lifetime: Millis,
    /// A directive forbids serving it stale (see [`ResponseDirectives::forbids_stale`]).
    pub forbids_stale: bool,
    /// RFC 5861 3, from the response: how long past its lifetime it may be served while a
    /// revalidation runs (0: not at all).
    pub stale_while_revalidate: Millis,
    /// RFC 5861 4, from the response: how long past its lifetime it may be served when the
    /// origin fails; `None`: the response says nothing (the route's setting decides).
    pub stale_if_error: Option<Millis>,
}

impl Freshness {
    /// 4.2.3: "resident_time = now - response_time; current_age = corrected_initial_age +
    /// resident_time".
    pub fn current_age(&self, now: Millis) -> Millis {
        self.corrected_initial_age
            .saturating_add(now.saturating_sub(self.response_time))
    }

    /// 4.2: "response_is_fresh = (freshness_lifetime > current_age)".
    pub fn is_fresh(&self, now: Millis) -> bool {
        self.lifetime > self.current_age(now)
    }

    /// Whether it answers, without validation, a request that accepts `a` (5.2.1.1-3): fresh
    /// for `a.min_fresh` more, or stale by at most `a.max_stale` where no directive forbids
    /// stale use (4.2.4); and never older than `a.max_age`.
    pub fn serves(&self, now: Millis, a: &Accepts) -> bool {
        if a.revalidate || a.plain() {
            return !a.revalidate && self.is_fresh(now);
        }
        let age = self.current_age(now);
        let young = a.max_age.is_none_or(|n| self.age_secs(now) <= n);
        let fresh = self.lifetime > age.saturating_add(a.min_fresh);
        let stale_ok = a
            .max_stale
            .is_some_and(|n| !self.forbids_stale && age <= self.lifetime.saturating_add(n));
        young && (fresh || stale_ok)
    }

    /// The `Age` field value (5.1: delta-seconds), whole seconds.
    pub fn age_secs(&self, now: Millis) -> u64 {
        (self.current_age(now) / 1000).min(DELTA_MAX)
    }

    /// Whether it may be served, stale, when the origin fails: within the route's
    /// `stale_if_error` past its lifetime, or if the route sets none (0) within the response's
    /// own `stale-if-error` (RFC 5861 4; as nginx, the configured value comes first), unless a
    /// directive forbids stale use (4.2.4).
    pub fn usable_on_error(&self, now: Millis, stale_if_error: Millis) -> bool {
        let window = match stale_if_error {
            0 => self.stale_if_error.unwrap_or(0),
            route => route,
        };
        window > 0
            && !self.forbids_stale
            && self.current_age(now) <= self.lifetime.saturating_add(window)
    }

    /// Whether, stale, it may be served at once while one revalidation runs (RFC 5861 3:
    /// within `stale-while-revalidate` past its lifetime), unless a directive forbids stale
    /// use (4.2.4).
    pub fn usable_while_revalidating(&self, now: Millis) -> bool {
        self.stale_while_revalidate > 0
            && !self.forbids_stale
            && self.current_age(now) <= self.lifetime.saturating_add(self.stale_while_revalidate)
    }
}

/// A response the cache will store: its freshness and the variant it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storable {
    pub freshness: Freshness,
    pub vary: VarySpec,
}

/// The fields of a response that storing and freshness look at, from one pass.
#[derive(Default)]
struct ResponseScan {
    cc: ResponseDirectives,
    expires: Option<Option<u64>>,
    date: Option<u64>,
    age: Option<u64>,
    last_modified: Option<u64>,
    etag: bool,
    set_cookie: bool,
}

/// One pass over a response's fields. With a valid targeted field (RFC 9213, `targeted`
/// names them in order) its directives replace Cache-Control's, and Expires is ignored.
fn scan(headers: &[httparse::Header<'_>], targeted: &[String]) -> ResponseScan {
    let mut s = scan_fields(headers);
    if let Some(cc) = super::targeted::directives(headers, targeted) {
        s.cc = cc;
        s.expires = None;
    }
    s
}

fn scan_fields(headers: &[httparse::Header<'_>]) -> ResponseScan {
    let mut s = ResponseScan::default();
    for h in headers {
        let is = |n: &str| h.name.eq_ignore_ascii_case(n);
        if is("cache-control") {
            s.cc.add(h.value);
        } else if is("expires") {
            // 5.3: "A cache recipient MUST interpret invalid date formats, especially the
            // value "0", as representing a time in the past". The first field counts.
            s.expires
                .get_or_insert(crate::http_date::parse_http_date(h.value));
        } else if is("date") {
            s.date = s.date.or(crate::http_date::parse_http_date(h.value));
        } else if is("age") && s.age.is_none() {
            s.age = age_value(h.value);
        } else if is("etag") {
            s.etag = true;
        } else if is("last-modified") {
            s.last_modified = s
                .last_modified
                .or(crate::http_date::parse_http_date(h.value));
        } else if is("set-cookie") {
            s.set_cookie = true;
        }
    }
    s
}

/// An `Age` field line's value: its first element (a line `7200, 0` is a list some caches
/// send; 5.1 asks for one value, and the first one of the first line is the one kept, as for
/// any singleton field a recipient finds repeated), delta-seconds saturating at 2^31. `None`:
/// not a number (the field is ignored).
fn age_value(v: &[u8]) -> Option<u64> {
    let first = v.split(|&b| b == b',').next().unwrap_or_default();
    let first = shared::http::framing::trim_ows(first);
    if first.is_empty() || !first.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(first.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10)
            .saturating_add(u64::from(d - b'0'))
            .min(DELTA_MAX)
    }))
}

/// Decide whether the response to a GET (or the GET that fills for a HEAD) is stored, and
/// for how long it is fresh. `body_len` is the Content-Length when the framing gives one.
pub fn storable(
    request: &[httparse::Header<'_>],
    status: u16,
    response: &[httparse::Header<'_>],
    body_len: Option<u64>,
    at: Fetched,
    cfg: &CacheEntry,
) -> Result<Storable, NotStored> {
    // 3: "the response status code is final"; 3.3/3.4: partial content is not stored whole;
    // 304 completes a validation and is not a response to store. A 412 answers the request's
    // preconditions and a 416 its range, fields the key does not hold: stored, either would
    // answer every plain GET of the key (nginx's range and not-modified filters, Varnish's
    // delivery, evaluate those against a stored 200 instead).
    if status < 200 || matches!(status, 206 | 304 | 412 | 416) {
        return Err(NotStored::Status);
    }
    let s = scan(response, &cfg.targeted);
    // 3: "the no-store cache directive is not present in the response" (5.2.2.5), "if the
    // cache is shared: the private response directive is either not present or allows a
    // shared cache to store a modified response" (read here as not present).
    // 5.2.2.3: with must-understand, a status code the cache understands is stored by its
    // rules whatever no-store says, and one it does not understand is not stored.
    if s.cc.must_understand && !understood(status) {
        return Err(NotStored::Status);
    }
    let no_store = s.cc.no_store && !s.cc.must_understand;
    if no_store || RequestDirectives::scan(request).no_store {
        return Err(NotStored::NoStore);
    }
    if s.cc.private {
        return Err(NotStored::Private);
    }
    // 5.2.2.4: no-cache "MUST NOT be used to satisfy any other request without forwarding it
    // for validation": stored with no freshness when it has a validator (each use is then a
    // conditional request, a 304 costs no body), not stored without one.
    let validator = s.etag || s.last_modified.is_some();
    if s.cc.no_cache && !validator {
        return Err(NotStored::NoCache);
    }
    // 7.3 warns that Set-Cookie answers are per user; nginx and Varnish do not cache them
    // (a deliberate difference from 3, which allows it; `store_set_cookie` opts in).
    if s.set_cookie && !cfg.store_set_cookie {
        return Err(NotStored::SetCookie);
    }
    // 3.5: "A shared cache MUST NOT use a cached response to a request with an Authorization
    // header field ... unless ... must-revalidate, public, s-maxage".
    let authorized = request
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("authorization"));
    if authorized && !(s.cc.public || s.cc.must_revalidate || s.cc.s_maxage.is_some()) {
        return Err(NotStored::Authorization);
    }
    if body_len.is_some_and(|n| n > cfg.max_object) {
        return Err(NotStored::TooLarge);
    }
    let vary = VarySpec::new(response, request).map_err(|VaryStar| NotStored::VaryStar)?;
    let lifetime = match s.cc.no_cache {
        true => 0,
        false => lifetime(&s, status, at, cfg).ok_or(NotStored::NoFreshness)?,
    };
    Ok(Storable {
        freshness: Freshness {
            response_time: at.response_time,
            corrected_initial_age: initial_age(&s, at),
            lifetime,
            forbids_stale: s.cc.forbids_stale(),
            stale_while_revalidate: s
                .cc
                .stale_while_revalidate
                .unwrap_or(0)
                .saturating_mul(1000),
            stale_if_error: s.cc.stale_if_error.map(|n| n.saturating_mul(1000)),
        },
        vary,
    })
}

/// The `Age` (whole seconds) sent with a response fetched for this request (`X-Cache: MISS`
/// or `BYPASS`): the age it arrived with plus its time in transit, 4.2.3's corrected initial
/// age, so a response that passed through other caches is not made to look younger. A hit
/// sends [`Freshness::age_secs`] at the time it is served instead.
pub fn fetched_age(response: &[httparse::Header<'_>], at: Fetched) -> u64 {
    (initial_age(&scan_fields(response), at) / 1000).min(DELTA_MAX)
}

/// A heuristic lifetime without `ttl` to cap it (`ttl = "0s"`): a day, past which RFC 7234
/// 4.2.2 asked for a warning.
const HEURISTIC_MAX: Millis = 24 * 3600 * 1000;

/// 4.2.1, in its order: s-maxage (a shared cache), max-age, Expires minus Date; otherwise a
/// heuristic (4.2.2): with Last-Modified, 10% of the time since it for a heuristically
/// cacheable status (RFC 9110 15.1) or a `public` response, capped by the route's ttl; without
/// it, the route's ttl for 200, 301 and 404 (nginx's `proxy_cache_valid` default statuses).
fn lifetime(s: &ResponseScan, status: u16, at: Fetched, cfg: &CacheEntry) -> Option<Millis> {
    let secs = |n: u64| n.saturating_mul(1000);
    if let Some(n) = s.cc.s_maxage.or(s.cc.max_age) {
        return Some(secs(n));
    }
    let date = s.date.unwrap_or(at.response_time / 1000);
    if let Some(expires) = s.expires {
        // "If the Expires header field is present, use its value minus the value of the Date
        // header field (using the time the message was received if it is not present)".
        return Some(secs(expires.unwrap_or(0).saturating_sub(date)));
    }
    // `ttl = "0s"`: no default freshness (nginx's proxy_cache without proxy_cache_valid).
    let ttl = cfg.ttl.as_millis().min(u128::from(u64::MAX)) as u64;
    let heuristic = heuristically_cacheable(status) || s.cc.public;
    if let (true, Some(lm)) = (heuristic, s.last_modified.filter(|&lm| lm < date)) {
        // 4.2.2: "a typical setting of this fraction might be 10%".
        let tenth = secs(date - lm) / 10;
        return Some(tenth.min(if ttl > 0 { ttl } else { HEURISTIC_MAX }));
    }
    (ttl > 0 && matches!(status, 200 | 301 | 404)).then_some(ttl)
}

/// The final status codes whose caching semantics this cache implements (must-understand,
/// 5.2.2.3): the heuristically cacheable ones, redirects, and the errors it stores by their
/// explicit freshness.
fn understood(status: u16) -> bool {
    heuristically_cacheable(status)
        || matches!(
            status,
            302 | 303 | 307 | 400 | 403 | 451 | 500 | 502 | 503 | 504
        )
}

/// RFC 9110 15.1: the status codes "defined as heuristically cacheable" (206 aside: partial
/// content is not stored).
fn heuristically_cacheable(status: u16) -> bool {
    matches!(
        status,
        200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// 4.2.3: "apparent_age = max(0, response_time - date_value);
/// response_delay = response_time - request_time;
/// corrected_age_value = age_value + response_delay;
/// corrected_initial_age = max(apparent_age, corrected_age_value)".
fn initial_age(s: &ResponseScan, at: Fetched) -> Millis {
    let date = s.date.map_or(at.response_time, |d| d.saturating_mul(1000));
    let apparent = at.response_time.saturating_sub(date);
    let delay = at.response_time.saturating_sub(at.request_time);
    let corrected = s
        .age
        .unwrap_or(0)
        .saturating_mul(1000)
        .saturating_add(delay);
    apparent.max(corrected)
}
