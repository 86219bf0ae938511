//! The file layer: `proxy --config proxy.toml` parses into a [`FileConfig`], and quick mode
//! builds the same value from its flags. Field names are the file's keys; defaults come from
//! `config.rs`; `proxy.example.toml` at the crate root shows and explains every key.
//!
//! Every value that can be checked alone is checked here, as it is read, so its error names the
//! file, the line and the key (through `shared::config::parse_toml`): syntax, unknown keys, bad
//! values (`3x` as a duration, weight 0). What relates keys to each other or to the world (a
//! route naming an unknown group, a host name that does not resolve) is `resolve`'s, which
//! finds lines through the spans kept here.

use crate::config::{
    Balance, HeaderOptions, Timeouts, DEFAULT_BACKLOG, DEFAULT_FAIL_TIMEOUT, DEFAULT_KEEPALIVE,
    DEFAULT_KEEPALIVE_CHECK, DEFAULT_KEEPALIVE_REQUESTS, DEFAULT_KEEPALIVE_TIMEOUT,
    DEFAULT_MAX_FAILS, MAX_WEIGHT,
};
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use shared::config::ConfigError;
use shared::http::limits::MAX_HEADERS_CAP;
use shared::runtime::{DriverChoice, PinMode};
use shared::units::serde_units::{de_positive_duration, scalar, size_of, Scalar, SIZE};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::{NonZeroU16, NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// Read and parse a config file.
pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
    let name = path.display().to_string();
    let limit = shared::bounded_read::MAX_SMALL_FILE;
    let text = shared::bounded_read::read_capped_text(path, limit).map_err(|source| {
        ConfigError::Read {
            file: name.clone(),
            source,
        }
    })?;
    parse(&name, &text)
}

/// Parse config text; `name` names it in errors.
pub fn parse(name: &str, text: &str) -> Result<FileConfig, ConfigError> {
    let mut file: FileConfig = shared::config::parse_toml(name, text)?;
    file.origin = Origin::File {
        name: name.to_string(),
        text: text.to_string(),
    };
    Ok(file)
}

/// Where a file-layer value came from: errors found later name the file and line, or the flag.
#[derive(Debug, Clone, Default)]
pub enum Origin {
    /// Quick mode: every value is a flag's.
    #[default]
    CommandLine,
    /// A file, kept whole so spans turn into line numbers.
    File { name: String, text: String },
}

impl Origin {
    /// The file name, or "command line", for messages.
    pub fn describe(&self) -> &str {
        match self {
            Origin::CommandLine => "command line",
            Origin::File { name, .. } => name,
        }
    }
}

/// The whole file. Quick mode fills `upstream` and leaves the rest at its defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(skip)]
    pub origin: Origin,
    #[serde(default)]
    pub listen: Vec<Spanned<ListenEntry>>,
    #[serde(default)]
    pub upstream: BTreeMap<String, Spanned<GroupEntry>>,
    #[serde(default)]
    pub route: Vec<Spanned<RouteEntry>>,
    #[serde(default)]
    pub timeouts: Timeouts,
    #[serde(default)]
    pub headers: HeaderOptions,
    #[serde(default)]
    pub limits: LimitsEntry,
    #[serde(default)]
    pub runtime: RuntimeEntry,
    #[serde(default)]
    pub admin: Option<AdminEntry>,
    #[serde(default)]
    pub access_log: Option<crate::config::AccessLogConfig>,
    /// Per client address limits (issue 27).
    #[serde(default)]
    pub client_limits: super::client_limits::ClientLimitsEntry,
    /// `[retry]`: the retry policy of proxied routes without their own (issue 27 c).
    #[serde(default, deserialize_with = "super::route_opts::de_retry")]
    pub retry: Option<super::route_opts::RetryPolicy>,
}

/// `[admin]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminEntry {
    #[serde(deserialize_with = "de_listen")]
    pub addr: SocketAddr,
}

/// `[[listen]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenEntry {
    #[serde(deserialize_with = "de_listen")]
    pub addr: SocketAddr,
    #[serde(default = "default_backlog")]
    pub backlog: NonZeroU32,
    /// HTTPS: `tls = { cert = "...", key = "...", sni = [...] }`.
    #[serde(default)]
    pub tls: Option<Spanned<TlsEntry>>,
    /// Connections start with a PROXY protocol header (v1 or v2), read before anything else.
    #[serde(default)]
    pub proxy_protocol: bool,
}

/// A listener's `tls` table: the default certificate and key, and certificates by SNI name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsEntry {
    pub cert: PathBuf,
    pub key: PathBuf,
    #[serde(default)]
    pub sni: Vec<Spanned<SniEntry>>,
}

/// `{ names = ["a.example", "*.example"], cert = "...", key = "..." }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SniEntry {
    pub names: Vec<String>,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// `[upstream.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupEntry {
    pub servers: Vec<Spanned<ServerEntry>>,
    #[serde(default)]
    pub balance: Balance,
    /// What `balance = "hash"` hashes (issue 27; `config::hash_key`).
    #[serde(default)]
    pub hash_key: Option<Spanned<super::hash_key::HashKey>>,
    /// Look the servers' names up again this often (issue 27; `config::dns`).
    #[serde(default, deserialize_with = "de_resolve")]
    pub resolve: Option<Duration>,
    #[serde(default = "default_keepalive")]
    pub keepalive: usize,
    #[serde(
        default = "default_keepalive_timeout",
        deserialize_with = "de_positive_duration"
    )]
    pub keepalive_timeout: Duration,
    #[serde(default = "default_keepalive_requests")]
    pub keepalive_requests: NonZeroU64,
    #[serde(
        default = "default_keepalive_check",
        deserialize_with = "de_positive_duration"
    )]
    pub keepalive_check: Duration,
    /// Active health checks (issue 12); off unless given.
    #[serde(default)]
    pub health: Option<Spanned<super::health::HealthCheck>>,
    /// HTTPS to the servers: `tls = { ca = "...", sni = "...", insecure = false }`.
    #[serde(default)]
    pub tls: Option<GroupTlsEntry>,
    /// `"v1"` or `"v2"`: a PROXY protocol header first on each new connection.
    #[serde(default)]
    pub proxy_protocol: Option<super::send_proxy::SendProxy>,
}

/// A group's `tls` table: how its servers' certificates are verified and the SNI name sent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupTlsEntry {
    /// PEM CA certificates to verify against, instead of the system's store.
    pub ca: Option<PathBuf>,
    /// The name sent (SNI) and verified, instead of each server's host name.
    pub sni: Option<String>,
    /// Do not verify the certificates (labs only; warned about at start).
    #[serde(default)]
    pub insecure: bool,
}

/// A server: `"10.0.0.1:80"`, or `{ addr = "10.0.0.1:80", weight = 2, ... }`. The address is
/// checked for syntax here and resolved by `resolve`.
///
/// The derive (`remote = "Self"`) reads the table form as an inherent `deserialize`; the
/// `Deserialize` impl below takes either form.
#[derive(Debug, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ServerEntry {
    #[serde(deserialize_with = "de_upstream_addr")]
    pub addr: String,
    #[serde(default = "default_weight", deserialize_with = "de_weight")]
    pub weight: NonZeroU32,
    #[serde(default = "default_max_fails")]
    pub max_fails: u32,
    #[serde(
        default = "default_fail_timeout",
        deserialize_with = "de_positive_duration"
    )]
    pub fail_timeout: Duration,
    /// Requests in flight on this server at once, from the whole proxy (nginx's `max_conns`,
    /// HAProxy's `maxconn`); 0: no limit.
    #[serde(default)]
    pub max_conns: u32,
}

impl ServerEntry {
    /// A server with every default but its address.
    pub fn new(addr: String) -> ServerEntry {
        ServerEntry {
            addr,
            weight: default_weight(),
            max_fails: DEFAULT_MAX_FAILS,
            fail_timeout: DEFAULT_FAIL_TIMEOUT,
            max_conns: 0,
        }
    }
}

impl<'de> Deserialize<'de> for ServerEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct StringOrTable;
        impl<'de> serde::de::Visitor<'de> for StringOrTable {
            type Value = ServerEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"HOST:PORT\" or a table { addr = \"HOST:PORT\", weight = N, ... }")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ServerEntry, E> {
                split_upstream(s).map_err(E::custom)?;
                Ok(ServerEntry::new(s.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ServerEntry, A::Error> {
                ServerEntry::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_any(StringOrTable)
    }
}

/// `[[route]]`: a host and path, and exactly one action (`upstream`, `return` or `static`;
/// `resolve` checks that one is there).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteEntry {
    #[serde(default, deserialize_with = "de_host")]
    pub host: Option<String>,
    #[serde(default = "default_path", deserialize_with = "de_path")]
    pub path: String,
    #[serde(default)]
    pub upstream: Option<Spanned<String>>,
    #[serde(default, rename = "return")]
    pub return_: Option<Spanned<ReturnEntry>>,
    #[serde(default, rename = "static")]
    pub static_: Option<Spanned<StaticEntry>>,
    /// A response cache in front of a proxied route's upstream (issue 10).
    #[serde(default)]
    pub cache: Option<Spanned<super::cache::CacheEntry>>,
    /// Access rules and this route's own per client rate limit (issue 27).
    #[serde(default, deserialize_with = "super::client_limits::de_cidrs")]
    pub allow: Option<crate::cidr::CidrList>,
    #[serde(default, deserialize_with = "super::client_limits::de_cidrs")]
    pub deny: Option<crate::cidr::CidrList>,
    #[serde(default)]
    pub limit: Option<super::client_limits::RouteLimitEntry>,
    // Issue 27 (c): a proxied route's own upstream options (`config::route_opts`).
    #[serde(default)]
    pub strip_prefix: Option<Spanned<bool>>,
    #[serde(default, deserialize_with = "super::route_opts::de_request_edits")]
    pub request_headers: Option<super::route_opts::HeaderEdits>,
    #[serde(default, deserialize_with = "super::route_opts::de_response_edits")]
    pub response_headers: Option<super::route_opts::HeaderEdits>,
    #[serde(default)]
    pub timeouts: Option<Spanned<super::route_opts::RouteTimeouts>>,
    #[serde(default, deserialize_with = "super::route_opts::de_retry")]
    pub retry: Option<super::route_opts::RetryPolicy>,
    /// `request_buffering = false`: request bodies stream from their first byte (nginx's
    /// `proxy_request_buffering off`).
    #[serde(default)]
    pub request_buffering: Option<Spanned<bool>>,
}

impl RouteEntry {
    /// A route with only its action: quick mode's.
    pub fn new(upstream: Option<String>, static_: Option<StaticEntry>) -> RouteEntry {
        RouteEntry {
            host: None,
            path: default_path(),
            upstream: upstream.map(|u| Spanned::new(0..0, u)),
            return_: None,
            static_: static_.map(|s| Spanned::new(0..0, s)),
            cache: None,
            allow: None,
            deny: None,
            limit: None,
            strip_prefix: None,
            request_headers: None,
            response_headers: None,
            timeouts: None,
            retry: None,
            request_buffering: None,
        }
    }
}

/// `return = { status = 302, location = "...", body = "...", content_type = "..." }`.
/// Templates are parsed by `resolve` (into `answer::ReturnAction`), so their errors name the
/// route's line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReturnEntry {
    pub status: u16,
    pub location: Option<String>,
    pub body: Option<String>,
    pub content_type: Option<String>,
}

/// `static = { root = "www", index = "index.html" }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticEntry {
    pub root: std::path::PathBuf,
    #[serde(default = "default_index", deserialize_with = "de_index")]
    pub index: String,
}

/// `[limits]`: flat in the file; `resolve` puts the codec's keys into `shared::http::Limits`.
/// `None`: not in the file, the default applies.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsEntry {
    #[serde(deserialize_with = "de_max_body")]
    pub max_body: Option<Option<u64>>,
    pub max_connections: Option<NonZeroUsize>,
    /// Spanned, as `max_head`: the two are checked together (`resolve`).
    pub max_request_line: Option<Spanned<PositiveSize>>,
    pub max_head: Option<Spanned<PositiveSize>>,
    #[serde(deserialize_with = "de_max_headers")]
    pub max_headers: Option<usize>,
    #[serde(deserialize_with = "de_positive_size")]
    pub max_chunk_line: Option<usize>,
    #[serde(deserialize_with = "de_positive_size")]
    pub max_trailers: Option<usize>,
}

/// `[runtime]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeEntry {
    /// `None`: "auto", the CPUs this process may run on.
    #[serde(deserialize_with = "de_workers")]
    pub workers: Option<NonZeroU16>,
    #[serde(deserialize_with = "de_driver")]
    pub driver: DriverChoice,
    /// "auto", "on", "off"; true and false (on and off) as before there was `auto`.
    #[serde(deserialize_with = "de_pin")]
    pub pin: PinMode,
    pub multishot: bool,
    /// Large plain response bodies spliced from socket to socket (`splice.rs`).
    pub splice: bool,
    /// "kernel" or "cpu" (`crate::config::Steer`).
    pub steer: crate::config::Steer,
}

impl Default for RuntimeEntry {
    fn default() -> Self {
        RuntimeEntry {
            workers: None,
            driver: DriverChoice::Auto,
            pin: PinMode::Auto,
            multishot: true,
            splice: true,
            steer: crate::config::Steer::Kernel,
        }
    }
}

/// Most workers a file may ask for (the same bound as `--workers`).
const MAX_WORKERS: u16 = 1024;

fn default_backlog() -> NonZeroU32 {
    NonZeroU32::new(DEFAULT_BACKLOG).unwrap_or(NonZeroU32::MIN)
}
fn default_keepalive() -> usize {
    DEFAULT_KEEPALIVE
}
fn default_keepalive_timeout() -> Duration {
    DEFAULT_KEEPALIVE_TIMEOUT
}
fn default_keepalive_check() -> Duration {
    DEFAULT_KEEPALIVE_CHECK
}
fn default_keepalive_requests() -> NonZeroU64 {
    NonZeroU64::new(DEFAULT_KEEPALIVE_REQUESTS).unwrap_or(NonZeroU64::MIN)
}
fn default_weight() -> NonZeroU32 {
    NonZeroU32::MIN
}
fn default_max_fails() -> u32 {
    DEFAULT_MAX_FAILS
}
fn default_fail_timeout() -> Duration {
    DEFAULT_FAIL_TIMEOUT
}
fn default_path() -> String {
    "/".into()
}
pub fn default_index() -> String {
    "index.html".into()
}

// ---- Value syntax, shared with the flags. ----

/// A listen address: `IP:PORT`, `[IPv6]:PORT`, `*:PORT` or a bare port (all IPv4 addresses).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let port = s.strip_prefix("*:").unwrap_or(s);
    match port.parse::<u16>() {
        Ok(p) => Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p)),
        Err(_) => Err(format!(
            "`{s}` is not a listen address: expected IP:PORT (127.0.0.1:8080, [::1]:8080) or a port"
        )),
    }
}

/// Split an upstream address into host and port without resolving it: `IP:PORT`,
/// `[IPv6]:PORT`, `HOST:PORT`; a missing port means 80, as in nginx's `server`.
pub fn split_upstream(s: &str) -> Result<(String, u16), String> {
    let bad = |why: &str| format!("`{s}` is not an upstream address: {why}");
    let (scheme, s) = upstream_scheme(s);
    let default_port = if scheme == Some(true) { 443 } else { 80 };
    let (host, port) = if let Ok(a) = s.parse::<SocketAddr>() {
        (a.ip().to_string(), a.port())
    } else if let Ok(ip) = s.parse::<IpAddr>() {
        (ip.to_string(), default_port)
    } else if let Some(v6) = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|r| r.parse::<std::net::Ipv6Addr>().ok())
    {
        // `[::1]` without a port: 80 (443 for https://), as for every other form.
        (v6.to_string(), default_port)
    } else {
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| bad("the port must be a number from 1 to 65535"))?,
            ),
            None => (s, default_port),
        };
        let valid = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !valid {
            return Err(bad("expected IP:PORT, [IPv6]:PORT or HOST:PORT"));
        }
        (host.to_string(), port)
    };
    if port == 0 {
        return Err(bad("port 0 is not a server's port"));
    }
    Ok((host, port))
}

/// An upstream address's scheme and the rest: `https://api.internal` is `(Some(true),
/// "api.internal")`, `http://x` `(Some(false), "x")`, no scheme `(None, s)`. One trailing `/`
/// is allowed (`https://api.internal/`).
pub fn upstream_scheme(s: &str) -> (Option<bool>, &str) {
    let (tls, rest) = if let Some(r) = s.strip_prefix("https://") {
        (Some(true), r)
    } else if let Some(r) = s.strip_prefix("http://") {
        (Some(false), r)
    } else {
        (None, s)
    };
    (tls, rest.strip_suffix('/').unwrap_or(rest))
}

// ---- Deserializers for values the types alone do not check. ----

fn de_listen<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    parse_listen(&String::deserialize(d)?).map_err(D::Error::custom)
}

fn de_resolve<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_positive_duration(d).map(Some)
}

fn de_upstream_addr<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    split_upstream(&s).map_err(D::Error::custom)?;
    Ok(s)
}

fn de_positive_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    PositiveSize::deserialize(d).map(|s| Some(s.0))
}

/// A size in bytes greater than zero: `16384` or `"16KiB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PositiveSize(pub usize);

impl<'de> Deserialize<'de> for PositiveSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match usize::try_from(size_of::<D::Error>(scalar(d, SIZE)?)?) {
            Ok(0) => Err(D::Error::custom("must be greater than zero")),
            Ok(v) => Ok(PositiveSize(v)),
            Err(_) => Err(D::Error::custom("too large")),
        }
    }
}

fn de_max_headers<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let v = i64::deserialize(d)?;
    if !(1..=MAX_HEADERS_CAP as i64).contains(&v) {
        return Err(D::Error::custom(format!(
            "must be between 1 and {MAX_HEADERS_CAP}"
        )));
    }
    Ok(Some(v as usize))
}

/// Why a `max_body` of 0 is refused: nginx reads `client_max_body_size 0` as no limit, a limit
/// of 0 bytes would answer 413 to every body, and "unlimited" says no limit here.
pub const MAX_BODY_ZERO: &str = "0 is not a limit here (nginx's client_max_body_size 0 is \
                                 none): write \"unlimited\" for no limit, or a size of 1 or more";

/// A size of at least 1, or `"unlimited"`.
fn de_max_body<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<u64>>, D::Error> {
    const WHAT: &str = "a size such as \"1MiB\", a number of bytes, or \"unlimited\"";
    let limit = match scalar(d, WHAT)? {
        Scalar::Str(s) if s.eq_ignore_ascii_case("unlimited") => None,
        Scalar::Str(s) => Some(
            shared::units::parse_size(&s)
                .map_err(|e| D::Error::custom(format!("{e}, or \"unlimited\"")))?,
        ),
        Scalar::Int(n) => {
            Some(u64::try_from(n).map_err(|_| D::Error::custom(format!("expected {WHAT}")))?)
        }
    };
    if limit == Some(0) {
        return Err(D::Error::custom(MAX_BODY_ZERO));
    }
    Ok(Some(limit))
}

/// A server's weight: 1 to [`MAX_WEIGHT`].
fn de_weight<'de, D: Deserializer<'de>>(d: D) -> Result<NonZeroU32, D::Error> {
    let w = NonZeroU32::deserialize(d)?;
    if w.get() > MAX_WEIGHT {
        return Err(D::Error::custom(format!(
            "must be from 1 to {MAX_WEIGHT} (weights are relative: 3 against 1 is three times the share)"
        )));
    }
    Ok(w)
}

/// A number of workers, or `"auto"` (the CPUs this process may run on).
fn de_workers<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NonZeroU16>, D::Error> {
    const WHAT: &str = "a number of workers from 1 to 1024, or \"auto\"";
    match scalar(d, WHAT)? {
        Scalar::Str(s) if s == "auto" => Ok(None),
        Scalar::Int(n) if (1..=i64::from(MAX_WORKERS)).contains(&n) => {
            Ok(NonZeroU16::new(n as u16))
        }
        _ => Err(D::Error::custom(format!("expected {WHAT}"))),
    }
}

/// `--driver`'s names (one spelling, clap's), plus `io_uring` and `iouring`.
fn de_driver<'de, D: Deserializer<'de>>(d: D) -> Result<DriverChoice, D::Error> {
    use clap::ValueEnum;
    let s = String::deserialize(d)?;
    let name = match s.as_str() {
        "io_uring" | "iouring" => "io-uring",
        other => other,
    };
    DriverChoice::from_str(name, false).map_err(|_| {
        let names: Vec<String> = DriverChoice::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        D::Error::custom(format!(
            "unknown variant `{s}`, expected one of {}",
            names.join(", ")
        ))
    })
}

fn de_pin<'de, D: Deserializer<'de>>(d: D) -> Result<PinMode, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Pin {
        Bool(bool),
        Name(String),
    }
    let s = match Pin::deserialize(d)? {
        Pin::Bool(b) => b.to_string(),
        Pin::Name(s) => s,
    };
    PinMode::parse(&s).ok_or_else(|| {
        D::Error::custom(format!(
            "unknown value `{s}`, expected `auto`, `on` or `off` (or true / false)"
        ))
    })
}

/// A host name, or a wildcard `*.example.com` (subdomains of example.com, at any depth).
fn de_host<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let h = String::deserialize(d)?;
    let name = h.strip_prefix("*.").unwrap_or(&h);
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b));
    if !ok {
        return Err(D::Error::custom(format!(
            "`{h}` is not a host name (e.g. example.com) or a wildcard (*.example.com)"
        )));
    }
    if has_port(&h) {
        return Err(D::Error::custom(format!(
            "`{h}` has a port: a route's host matches on every port (the Host field is read \
             without its port); the port is the [[listen]] address's"
        )));
    }
    let h = h.to_ascii_lowercase();
    Ok(Some(h.strip_suffix('.').unwrap_or(&h).to_string()))
}

/// A `:` outside an IPv6 literal's brackets: `example.com:8443`, `[::1]:80`.
fn has_port(h: &str) -> bool {
    match h.strip_prefix('[') {
        Some(rest) => rest
            .split_once(']')
            .is_some_and(|(_, after)| !after.is_empty()),
        None => h.contains(':'),
    }
}

fn de_path<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let p = String::deserialize(d)?;
    if !p.starts_with('/')
        || p.bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(D::Error::custom(format!(
            "`{p}` is not a path prefix: it must start with `/` (e.g. \"/\" or \"/api/\")"
        )));
    }
    Ok(p)
}

/// An index file name: a plain name, no directory.
fn de_index<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let i = String::deserialize(d)?;
    if i.is_empty() || i == "." || i == ".." || i.contains(['/', '\\', '\0']) {
        return Err(D::Error::custom(format!(
            "`{i}` is not a file name (e.g. index.html)"
        )));
    }
    Ok(i)
}
