//! The response cache's sans-IO core (issue 10): what is stored, for how long, under which
//! key and variant, and what a request gets — decided from heads, the route's
//! [`CacheEntry`](crate::config::cache::CacheEntry) and a time passed in. No I/O, no clock,
//! no runtime: the connection code reads the clock, calls these and does the I/O.
//!
//! - [`policy`]: request classes (lookup, bypass, invalidate, purge), storability and
//!   freshness (RFC 9111 3, 4.2, 5.2), the age of a stored response.
//! - [`vary`]: variants (4.1), with `Accept-Encoding` and `Accept-Language` normalised where
//!   the meaning is the same.
//! - [`validate`]: conditional requests for stored responses, 304 updates, and clients'
//!   own conditionals answered from the store (4.3).
//! - [`directives`]: Cache-Control and Pragma; [`date`]: HTTP-date.
//! - [`store`]: one worker's store: LRU bounded by bytes, entries that fill while they stream,
//!   request collapsing, stale entries kept for `stale_if_error`.
//!
//! Per worker, shared-nothing: each worker owns a [`Store`] (no `Rc`, no `RefCell` inside);
//! `max_bytes` bounds each worker's store, so N workers may hold N times it. A purge or an
//! invalidation reaches the other workers through `shared::inbox`.
//!
//! The `X-Cache` value of every response of a cached route: [`CacheStatus`]. `Age` is sent on
//! hits and stale hits ([`Hit::age`]), on misses and bypasses the age the response arrived with
//! ([`policy::fetched_age`]: its Date's age or its Age plus the time in transit, whichever is
//! more; 0 for a response straight from an origin whose clock agrees), in place of the
//! upstream's Age field.

pub mod directives;
pub mod memfd;
pub mod policy;
pub mod ranges;
pub mod store;
pub mod targeted;
pub mod validate;
pub mod vary;

#[cfg(test)]
mod memfd_tests;
#[cfg(test)]
mod rfc_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod validate_tests;

pub use policy::{
    classify, fetched_age, storable, Accepts, Bypass, Fetched, Freshness, NotStored, RequestClass,
    Storable,
};
pub use store::{
    same_origin_target, Append, Handle, Held, Hit, Key, Lookup, OwnedKey, Read, Store, StoreStats,
};

/// Milliseconds since the Unix epoch: the time every decision is made at, read by the caller.
pub type Millis = u64;

/// The `X-Cache` field of a response on a cached route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    /// Served from the store, or streamed from an entry another request is filling.
    Hit,
    /// Looked up, fetched from the upstream (stored or not).
    Miss,
    /// Not looked up: a method the cache does not serve, credentials, request no-store.
    Bypass,
    /// A stale entry served because the upstream failed or timed out.
    Stale,
    /// A stored entry validated with the origin (a 304 to our conditional request) and
    /// served (nginx's `$upstream_cache_status` says REVALIDATED too).
    Revalidated,
}

impl CacheStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Hit => "HIT",
            CacheStatus::Miss => "MISS",
            CacheStatus::Bypass => "BYPASS",
            CacheStatus::Stale => "STALE",
            CacheStatus::Revalidated => "REVALIDATED",
        }
    }
}
