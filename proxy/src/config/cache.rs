//! `cache = { ... }` on a `[[route]]`: the file layer of the response cache (issue 10).
//!
//! ```toml
//! cache = { ttl = "60s", max_bytes = "64MiB", max_object = "1MiB", stale_if_error = "5m", purge_from = ["127.0.0.1", "10.0.0.0/8"] }
//! ```
//!
//! Every value that can be checked alone is checked as it is read (so errors name file, line
//! and key); the one check across keys (`max_object` at most `max_bytes`) is [`CacheEntry::check`].
//! The same type is the runtime value: nothing needs resolving, so there is no second struct to
//! copy fields into. `max_bytes` is per worker (workers share nothing): a proxy with N workers
//! may hold N times `max_bytes` of cached responses.

use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use shared::units::serde_units::{de_duration, scalar, size_of, SIZE};
use std::net::IpAddr;
use std::time::Duration;

pub const DEFAULT_TTL: Duration = Duration::from_secs(600);
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
pub const DEFAULT_MAX_OBJECT: u64 = 1 << 20;
/// Varnish keeps no bound and warns past 10 variants; a response that varies on a field
/// clients fill freely (`Vary: User-Agent`) would otherwise grow one key without end.
pub const DEFAULT_MAX_VARIANTS: usize = 16;

/// A route's cache settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheEntry {
    /// Freshness of 200, 301 and 404 responses that carry none of their own (nginx's
    /// `proxy_cache_valid`). Zero: no default freshness, only what the response says
    /// (nginx's `proxy_cache` without `proxy_cache_valid`).
    #[serde(default = "default_ttl", deserialize_with = "de_duration")]
    pub ttl: Duration,
    /// The byte bound of each worker's store (LRU beyond it).
    #[serde(default = "default_max_bytes", deserialize_with = "de_positive_size")]
    pub max_bytes: u64,
    /// Larger bodies are never stored; a fill that grows past it midway is dropped.
    #[serde(default = "default_max_object", deserialize_with = "de_positive_size")]
    pub max_object: u64,
    /// How long past its freshness a stored response may still be served when the upstream
    /// fails or times out. Zero (the default): never.
    #[serde(default, deserialize_with = "de_duration")]
    pub stale_if_error: Duration,
    /// Clients allowed to send `PURGE`; empty (the default): nobody.
    #[serde(default, deserialize_with = "de_cidrs")]
    pub purge_from: Vec<Cidr>,
    /// Cache answers to requests that carry `Authorization` or `Cookie` (default: such
    /// requests bypass the cache, RFC 9111 3.5).
    #[serde(default)]
    pub allow_credentials: bool,
    /// Bodies of 4 KiB and more kept in a per-worker memfd and sent with sendfile(2), as
    /// nginx's `sendfile on` (see `cache::memfd`); `false`: every body from memory.
    #[serde(default = "default_sendfile")]
    pub sendfile: bool,
    /// Stored responses (variants, and fills under way) one key may have; a new one makes
    /// the oldest go, so a lookup never walks more than this many.
    #[serde(
        default = "default_max_variants",
        deserialize_with = "de_positive_count"
    )]
    pub max_variants: usize,
    /// Targeted cache-control fields (RFC 9213) this cache obeys, first valid one wins: it
    /// replaces Cache-Control and Expires for storing and freshness, and none of these
    /// fields is sent on to clients. Default `["CDN-Cache-Control"]`; `[]`: none.
    #[serde(default = "default_targeted", deserialize_with = "de_field_names")]
    pub targeted: Vec<String>,
    /// Store responses that carry Set-Cookie (and serve the cookie to every client that hits
    /// them). Default false: they are passed on unstored, as nginx and Varnish do.
    #[serde(default)]
    pub store_set_cookie: bool,
}

impl Default for CacheEntry {
    fn default() -> Self {
        CacheEntry {
            ttl: DEFAULT_TTL,
            max_bytes: DEFAULT_MAX_BYTES,
            max_object: DEFAULT_MAX_OBJECT,
            stale_if_error: Duration::ZERO,
            purge_from: Vec::new(),
            allow_credentials: false,
            sendfile: true,
            max_variants: DEFAULT_MAX_VARIANTS,
            targeted: default_targeted(),
            store_set_cookie: false,
        }
    }
}

impl CacheEntry {
    /// Quick mode's `--cache SIZE`: a cache of that size per worker, every other key default
    /// (`max_object` shrinks to the size when the size is smaller).
    pub fn quick(max_bytes: u64) -> CacheEntry {
        CacheEntry {
            max_bytes,
            max_object: DEFAULT_MAX_OBJECT.min(max_bytes),
            ..CacheEntry::default()
        }
    }

    /// The check across keys; the message names the keys (the caller adds file and route).
    pub fn check(&self) -> Result<(), String> {
        if self.max_object > self.max_bytes {
            return Err(format!(
                "cache: max_object ({} bytes) is larger than max_bytes ({} bytes): no response could ever be stored",
                self.max_object, self.max_bytes
            ));
        }
        Ok(())
    }

    /// Whether `ip` may send PURGE.
    pub fn may_purge(&self, ip: IpAddr) -> bool {
        self.purge_from.iter().any(|c| c.contains(ip))
    }
}

/// The one parser of address blocks (`crate::cidr`), as `purge_from` names it.
pub use crate::cidr::Cidr;

fn default_targeted() -> Vec<String> {
    vec!["CDN-Cache-Control".to_string()]
}

/// Field names (RFC 9110 5.1: tokens); `Cache-Control` itself is not a targeted field.
fn de_field_names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    for n in &names {
        let token = !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(D::Error::custom(format!("`{n}` is not a field name")));
        }
        if n.eq_ignore_ascii_case("cache-control") {
            return Err(D::Error::custom(
                "`Cache-Control` is not a targeted field (it is always read, as the fallback)",
            ));
        }
    }
    Ok(names)
}

fn default_sendfile() -> bool {
    true
}
fn default_ttl() -> Duration {
    DEFAULT_TTL
}
fn default_max_bytes() -> u64 {
    DEFAULT_MAX_BYTES
}
fn default_max_variants() -> usize {
    DEFAULT_MAX_VARIANTS
}

/// A whole number of at least 1.
fn de_positive_count<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    match usize::deserialize(d)? {
        0 => Err(D::Error::custom("must be at least 1")),
        n => Ok(n),
    }
}

fn default_max_object() -> u64 {
    DEFAULT_MAX_OBJECT
}

fn de_positive_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match size_of::<D::Error>(scalar(d, SIZE)?)? {
        0 => Err(D::Error::custom("must be greater than zero")),
        v => Ok(v),
    }
}

/// A list of addresses or CIDR blocks; a single string is a list of one.
pub(crate) fn de_cidrs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Cidr>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    let list = match OneOrMany::deserialize(d)
        .map_err(|_| D::Error::custom("expected an address or CIDR block, or a list of them"))?
    {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    };
    list.iter()
        .map(|s| Cidr::parse(s).map_err(D::Error::custom))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parse `cache = { ... }` the way the route table will, through the shared TOML reader.
    fn parse(inline: &str) -> Result<CacheEntry, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Route {
            cache: CacheEntry,
        }
        shared::config::parse_toml::<Route>("t.toml", &format!("cache = {inline}\n"))
            .map(|r| r.cache)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults() {
        let c = parse("{}").unwrap();
        assert_eq!(c, CacheEntry::default());
        assert_eq!(c.ttl, Duration::from_secs(600));
        assert_eq!(c.max_bytes, 64 * 1024 * 1024);
        assert_eq!(c.max_object, 1024 * 1024);
        assert_eq!(c.stale_if_error, Duration::ZERO);
        assert!(c.purge_from.is_empty() && !c.allow_credentials);
        assert_eq!(c.max_variants, 16);
        c.check().unwrap();
    }

    #[test]
    fn every_key_read() {
        let c = parse(concat!(
            r#"{ ttl = "60s", max_bytes = "8MiB", max_object = 4096, stale_if_error = "5m", "#,
            r#"purge_from = ["127.0.0.1", "10.0.0.0/8", "::1"], allow_credentials = true, "#,
            r#"max_variants = 4, targeted = ["Proxy-Cache-Control", "CDN-Cache-Control"], "#,
            r#"store_set_cookie = true }"#
        ))
        .unwrap();
        assert_eq!(c.max_variants, 4);
        assert_eq!(c.targeted, ["Proxy-Cache-Control", "CDN-Cache-Control"]);
        assert!(c.store_set_cookie);
        assert_eq!(c.ttl, Duration::from_secs(60));
        assert_eq!(c.max_bytes, 8 << 20);
        assert_eq!(c.max_object, 4096);
        assert_eq!(c.stale_if_error, Duration::from_secs(300));
        assert_eq!(c.purge_from.len(), 3);
        assert!(c.allow_credentials);
        let one = parse(r#"{ purge_from = "192.168.0.0/16" }"#).unwrap();
        assert_eq!(one.purge_from[0].prefix(), 16);
        assert_eq!(parse(r#"{ ttl = "0s" }"#).unwrap().ttl, Duration::ZERO);
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (
                r#"{ ttl = "3x" }"#,
                "key `cache.ttl`: invalid duration '3x'",
            ),
            (
                r#"{ max_bytes = 0 }"#,
                "key `cache.max_bytes`: must be greater than zero",
            ),
            (
                r#"{ max_object = "1ZB" }"#,
                "key `cache.max_object`: invalid size '1ZB'",
            ),
            (
                r#"{ stale_if_error = -1 }"#,
                "key `cache.stale_if_error`: expected a duration",
            ),
            (r#"{ purge_from = ["10.0.0.1/8"] }"#, "host bits are set"),
            (
                r#"{ purge_from = ["10.0.0.0/33"] }"#,
                "prefix length must be 0 to 32",
            ),
            (
                r#"{ purge_from = ["localhost"] }"#,
                "`localhost` is not an address or CIDR",
            ),
            (r#"{ purge_from = 7 }"#, "expected an address or CIDR block"),
            (r#"{ size = "1MiB" }"#, "unknown field `size`"),
            (
                r#"{ targeted = ["CDN Cache"] }"#,
                "key `cache.targeted`: `CDN Cache` is not a field name",
            ),
            (
                r#"{ targeted = ["cache-control"] }"#,
                "is not a targeted field",
            ),
            (
                r#"{ max_variants = 0 }"#,
                "key `cache.max_variants`: must be at least 1",
            ),
            (r#"{ max_variants = "x" }"#, "key `cache.max_variants`"),
        ];
        for (input, want) in cases {
            let err = parse(input).unwrap_err();
            assert!(err.starts_with("t.toml:1: "), "{input}: {err}");
            assert!(err.contains(want), "{input}: {err}");
        }
    }

    #[test]
    fn max_object_over_max_bytes_is_refused() {
        let c = parse(r#"{ max_bytes = "1KiB", max_object = "2KiB" }"#).unwrap();
        let err = c.check().unwrap_err();
        assert!(err.contains("max_object (2048 bytes) is larger than max_bytes (1024 bytes)"));
        assert_eq!(CacheEntry::quick(1000).max_object, 1000);
        CacheEntry::quick(1000).check().unwrap();
        assert_eq!(CacheEntry::quick(64 << 20).max_object, DEFAULT_MAX_OBJECT);
    }

    #[test]
    fn cidr_membership() {
        let c = |s| Cidr::parse(s).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let cases = [
            ("10.0.0.0/8", "10.255.1.2", true),
            ("10.0.0.0/8", "11.0.0.1", false),
            ("127.0.0.1", "127.0.0.1", true),
            ("127.0.0.1", "127.0.0.2", false),
            ("0.0.0.0/0", "203.0.113.9", true),
            ("0.0.0.0/0", "::1", false),
            ("127.0.0.0/8", "::ffff:127.0.0.5", true),
            ("::1", "::1", true),
            ("fd00::/8", "fd12::1", true),
            ("fd00::/8", "fe80::1", false),
            ("::/0", "2001:db8::1", true),
        ];
        for (block, addr, want) in cases {
            assert_eq!(c(block).contains(ip(addr)), want, "{block} {addr}");
        }
        let e = CacheEntry {
            purge_from: vec![c("127.0.0.1")],
            ..CacheEntry::default()
        };
        assert!(e.may_purge(ip("127.0.0.1")) && !e.may_purge(ip("127.0.0.2")));
        assert!(!CacheEntry::default().may_purge(ip("127.0.0.1")));
    }
}
