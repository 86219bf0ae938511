//! The proxy's configuration: the immutable [`Config`] the workers share (one `Arc`, read
//! only), and the two steps that make it.
//!
//! - [`schema`]: the file layer, serde-derived once. A TOML file parses into a
//!   [`schema::FileConfig`]; quick mode (`--listen`/`--upstream`, `cli.rs`) builds the same
//!   value. Values that need nothing else are checked as they are read, with file, line and key.
//! - [`resolve()`]: one pure step from a file-layer value and the command-line [`Overrides`] to a
//!   [`Config`]: host names resolved (`shared::net::resolve`, the one address rule), groups
//!   named by routes turned into ids (`ids::GroupId`), checks across keys. A reload calls it again with the
//!   same overrides.
//!
//! Sections that need no resolving (`[timeouts]`, `[headers]`) are read straight into their
//! runtime types below. Defaults live here, once: in `Default` impls and the `DEFAULT_*`
//! constants, which the file layer and the flags' `--help` both use.
//!
//! Adding a key: its field in the file-layer type (or here, for a section read directly), its
//! check (a value parser on the field, or a step in `resolve`), `proxy.example.toml` (a test
//! fails if a key is missing from it), and a test.

pub mod cache;
pub mod client_limits;
pub mod dns;
pub mod hash_key;
pub mod health;
pub mod ids;
mod overrides;
mod real_ip;
pub mod route_opts;
pub mod schema;
pub mod send_proxy;

mod resolve;
#[cfg(test)]
pub(crate) mod tests;

pub use ids::{GroupId, RouteId, ServerId, Table};
pub use resolve::{resolve, Edit, Error, HeaderSlot, Overrides, TimeoutSlot};

use serde::Deserialize;
use shared::http::Limits;
use shared::units::serde_units::{de_duration, de_positive_duration};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Read, parse, resolve and check a config file, with no command-line overrides.
pub fn load(path: impl AsRef<Path>) -> Result<Config, Error> {
    resolve(&schema::load(path.as_ref())?, &Overrides::default())
}

/// [`load`] for text in hand; `file` names it in errors.
pub fn from_toml(file: &str, text: &str) -> Result<Config, Error> {
    resolve(&schema::parse(file, text)?, &Overrides::default())
}

/// Everything the proxy needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub runtime: shared::runtime::RuntimeConfig,
    /// `[runtime] splice`: large plain response bodies go from socket to socket with splice(2)
    /// (`splice.rs`).
    pub splice: bool,
    /// `[runtime] steer`: how connections are spread over the workers (`limit::steering`);
    /// steering by client address for exact limits comes first.
    pub steer: Steer,
    pub listeners: Vec<Listener>,
    pub groups: Table<GroupId, UpstreamGroup>,
    /// Routes in file order; matching picks the longest path prefix among those whose host
    /// matches (exact host, then wildcards from the most specific, then `host = None`).
    pub routes: Table<RouteId, Route>,
    pub timeouts: Timeouts,
    pub headers: HeaderOptions,
    pub limits: ProxyLimits,
    /// `[admin] addr` / `--admin`: where `/metrics`, `/status` and `/healthz` are served.
    pub admin: Option<SocketAddr>,
    /// `access_log`: off unless set.
    pub access_log: Option<AccessLogConfig>,
    /// `[retry]`: the retry policy of proxied routes without a `retry` of their own; `None`:
    /// the built-in rule (`RetryPolicy::BUILT_IN`).
    pub retry: Option<route_opts::RetryPolicy>,
    /// Where the config came from (file name or "command line"), for messages.
    pub source: String,
    /// `[client_limits]`: per client address rates and connections.
    pub client_limits: client_limits::ClientLimits,
    /// Set by the start (kept by reloads): the listeners steer each client address to one
    /// worker (`shared::net::steer_by_source`), so a worker's count of a client is the
    /// client's whole count. Otherwise each worker enforces 1/workers of every limit.
    pub client_steering: bool,
}

/// What is worth saying at start but does not stop it: a static root that is not a
/// directory (yet; its requests get 404 until it is). `--check-config` and the start-up
/// print these, as nginx prints `[warn]` lines.
pub fn warnings(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for g in cfg
        .groups
        .iter()
        .filter(|g| g.tls.as_ref().is_some_and(|t| t.insecure))
    {
        out.push(format!(
            "{}: upstream {}: tls insecure = true: the servers' certificates are not verified \
             (labs only)",
            cfg.source, g.name
        ));
    }
    for l in &cfg.listeners {
        if let Some(t) = &l.tls {
            let w = t.built.warnings.iter();
            out.extend(w.map(|m| format!("{}: listen {}: {m}", cfg.source, l.addr)));
        }
    }
    for (i, r) in cfg.routes.iter().enumerate() {
        if let Action::Static(site) = &r.action {
            if !site.root.is_dir() {
                out.push(format!(
                    "{}: route[{i}] ({} {}): static root {} is not a directory (yet): \
                     its requests get 404 until it is",
                    cfg.source,
                    r.host.as_deref().unwrap_or("any host"),
                    r.path_prefix,
                    site.root.display()
                ));
            }
        }
    }
    out
}

/// Whether a connection to the public listener `listen` could reach an admin socket bound to
/// `admin` (both bound SO_REUSEPORT by the same user, the kernel lets the admin socket join
/// the port beside the listener's group, where it takes part of its connections): the same
/// port, and the same IP or a wildcard of the other's family. A listener's IPv6 socket is
/// v6-only; the admin socket takes the system's default, dual-stack, so an admin `[::]`
/// covers every IPv4 address of its port and a v4-mapped admin address is its IPv4 one.
fn admin_overlaps(listen: SocketAddr, admin: SocketAddr) -> bool {
    use std::net::IpAddr;
    if listen.port() != admin.port() {
        return false;
    }
    match (listen.ip(), admin.ip().to_canonical()) {
        (l, a) if l == a => true,
        (IpAddr::V4(l), IpAddr::V4(a)) => l.is_unspecified() || a.is_unspecified(),
        (IpAddr::V6(l), IpAddr::V6(a)) => l.is_unspecified() || a.is_unspecified(),
        (IpAddr::V4(_), IpAddr::V6(a)) => a.is_unspecified(),
        (IpAddr::V6(_), IpAddr::V4(_)) => false,
    }
}

/// Whether two listeners' addresses cannot both be bound (besides being equal): the same
/// port, one of them the wildcard of the other's family (a listener's IPv6 socket is
/// v6-only, so `[::]` leaves IPv4 alone).
fn listens_cover(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && a.port() != 0
        && a.is_ipv4() == b.is_ipv4()
        && a.ip() != b.ip()
        && (a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// The checks every configuration passes before it is used, however it was built (the file
/// and the flags check most values where they are read, with better messages; this is the
/// last word, and covers configs built in code).
pub fn validate(cfg: &Config) -> Result<(), String> {
    if cfg.listeners.is_empty() {
        return Err("no listen address".into());
    }
    for (i, l) in cfg.listeners.iter().enumerate() {
        if l.addr.port() != 0 && cfg.listeners[..i].iter().any(|o| o.addr == l.addr) {
            return Err(format!("listen address {} given twice", l.addr));
        }
        if let Some(o) = cfg.listeners[..i]
            .iter()
            .find(|o| listens_cover(o.addr, l.addr))
        {
            return Err(format!(
                "listen addresses {} and {} overlap (the same port, and a wildcard address \
                 takes every address of its family): keep the wildcard alone, or name the \
                 addresses one by one",
                o.addr, l.addr
            ));
        }
        if l.backlog == 0 {
            return Err(format!(
                "listen address {}: backlog must be at least 1",
                l.addr
            ));
        }
    }
    if let Some(a) = cfg.admin.filter(|a| a.port() != 0) {
        if let Some(l) = cfg.listeners.iter().find(|l| admin_overlaps(l.addr, a)) {
            return Err(format!(
                "admin address {a} overlaps listen address {} (the same port, and one address \
                 covers the other): the admin endpoints are never served on the public \
                 listeners; give the admin listener a port of its own",
                l.addr
            ));
        }
    }
    for g in &cfg.groups {
        if g.servers.is_empty() {
            return Err(format!("upstream group `{}` has no server", g.name));
        }
        if let Some(s) = g.servers.iter().find(|s| s.weight == 0) {
            return Err(format!(
                "upstream group `{}`: server {} has weight 0",
                g.name, s.name
            ));
        }
        // A file's weight is checked as it is read; this catches a config built otherwise.
        if let Some(s) = g.servers.iter().find(|s| s.weight > MAX_WEIGHT) {
            return Err(format!(
                "upstream group `{}`: server {} has weight {}, at most {MAX_WEIGHT}",
                g.name, s.name, s.weight
            ));
        }
        if let Some(s) = g.servers.iter().find(|s| s.addrs.is_empty()) {
            return Err(format!(
                "upstream group `{}`: server {} has no address",
                g.name, s.name
            ));
        }
        if let Some(s) = g
            .servers
            .iter()
            .find(|s| s.addrs.iter().any(|a| a.port() == 0))
        {
            return Err(format!(
                "upstream group `{}`: server {} has port 0",
                g.name, s.name
            ));
        }
        if let Some(h) = &g.health {
            h.check()
                .map_err(|m| format!("upstream group `{}`: {m}", g.name))?;
        }
        if g.keepalive_requests == 0 {
            return Err(format!(
                "upstream group `{}`: keepalive_requests must be at least 1",
                g.name
            ));
        }
    }
    if cfg.routes.is_empty() {
        return Err("no route".into());
    }
    for r in &cfg.routes {
        if let Action::Proxy { group, .. } = r.action {
            if cfg.groups.get(group).is_none() {
                return Err(format!(
                    "route {} names group #{} which does not exist",
                    r.path_prefix,
                    group.index()
                ));
            }
        }
    }
    if let Some(r) = cfg.routes.iter().find(|r| !r.path_prefix.starts_with('/')) {
        return Err(format!(
            "route path `{}` must start with `/`",
            r.path_prefix
        ));
    }
    let t = &cfg.timeouts;
    for (name, d) in [
        ("connect", t.connect),
        ("read", t.read),
        ("upstream send", t.upstream_send),
        ("header", t.header),
        ("body", t.body),
        ("send", t.send),
        ("idle", t.idle),
    ] {
        if d.is_zero() {
            return Err(format!("the {name} timeout must be greater than zero"));
        }
    }
    let l = &cfg.limits;
    if l.max_connections == 0 {
        return Err("max_connections must be at least 1".into());
    }
    let c = &l.codec;
    if c.max_headers == 0 || c.max_headers > shared::http::limits::MAX_HEADERS_CAP {
        return Err(format!(
            "max_headers must be between 1 and {}",
            shared::http::limits::MAX_HEADERS_CAP
        ));
    }
    if c.max_request_line == 0 || c.max_head == 0 || c.max_chunk_line == 0 || c.max_trailers == 0 {
        return Err("header and chunk size limits must be greater than zero".into());
    }
    // A file's limits are checked as it is read (naming the line); this catches a config built
    // otherwise.
    if let Some(m) = head_too_small_for_request_line(c) {
        return Err(m);
    }
    if cfg.runtime.workers == 0 {
        return Err("workers must be at least 1".into());
    }
    Ok(())
}

/// Why `max_head` cannot hold a request line `max_request_line` allows, if it cannot: such a
/// line would get 431 where the limit meant for it promises to take it.
fn head_too_small_for_request_line(c: &shared::http::Limits) -> Option<String> {
    (c.max_head < c.max_request_line).then(|| {
        format!(
            "max_head ({} bytes) is smaller than max_request_line ({} bytes): a head holds its \
             request line; raise max_head or lower max_request_line",
            c.max_head, c.max_request_line
        )
    })
}

/// `access_log = { path = "...", format = "combined" | "json" }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessLogConfig {
    pub path: std::path::PathBuf,
    #[serde(default)]
    pub format: LogFormat,
}

/// How a listener's connections are spread over the workers (`[runtime] steer`, `--steer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Steer {
    /// The kernel's hash of each connection's addresses and ports
    #[default]
    Kernel,
    /// To the worker pinned to the CPU that handled the connection's first packet (needs
    /// workers pinned one per CPU; for network cards spreading flows over the cores)
    Cpu,
}

impl Steer {
    pub fn name(self) -> &'static str {
        match self {
            Steer::Kernel => "kernel",
            Steer::Cpu => "cpu",
        }
    }
}

/// The access log's line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// nginx's `combined`.
    #[default]
    Combined,
    /// One JSON object per line with every field of the outcome record.
    Json,
}

impl LogFormat {
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Combined => "combined",
            LogFormat::Json => "json",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Listener {
    pub addr: SocketAddr,
    /// listen(2) backlog. Default 4096.
    pub backlog: u32,
    /// HTTPS: what the listener serves. `None`: plain HTTP.
    pub tls: Option<ListenerTls>,
    /// Each connection starts with a PROXY protocol header (`crate::proxy_header`): its
    /// source address is the client's.
    pub proxy_protocol: bool,
}

/// A TLS listener: the files, and the server configuration built from them (one `Arc` for
/// every worker: the session ticket keys and the session cache are shared). A reload builds
/// it again with `shared::tls::server::server_config(&spec)`.
#[derive(Debug, Clone)]
pub struct ListenerTls {
    pub spec: shared::tls::server::ServerTlsSpec,
    pub built: shared::tls::server::ServerTls,
}

/// How a group spreads requests. One spelling (kebab-case) for the file and `--balance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Smooth weighted round-robin (nginx's)
    #[default]
    RoundRobin,
    /// Fewest active requests on this worker
    LeastConn,
    /// Power of two random choices
    Random2,
    /// Consistent hashing of `hash_key` (ketama: nginx's `hash ... consistent`)
    Hash,
}

impl Balance {
    /// The name the file and `--balance` use (clap's kebab-case, as serde's).
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}

#[derive(Debug, Clone)]
pub struct UpstreamGroup {
    pub name: String,
    pub servers: Table<ServerId, Server>,
    pub balance: Balance,
    /// What `Balance::Hash` hashes (`uri` unless given).
    pub hash_key: hash_key::HashKey,
    /// `resolve`: the servers' names are looked up again this often (`crate::dns`); `None`:
    /// at start and at each reload only.
    pub resolve: Option<dns::Resolve>,
    /// Idle keep-alive connections kept per worker per server at rest (a burst's surplus goes
    /// after `pool::SURPLUS_IDLE`). Default 64. 0 disables reuse.
    pub keepalive: usize,
    /// Idle pooled connections are closed after this. Default 30 s (shorter than typical origins).
    pub keepalive_timeout: Duration,
    /// Requests per upstream connection before it is retired. Default 1000 (nginx's default).
    pub keepalive_requests: u64,
    /// A pooled connection idle this long (or half `keepalive_timeout`, if shorter) is
    /// checked before reuse. Default 1 s.
    pub keepalive_check: Duration,
    /// Active health checks; `None`: off (only the passive max_fails/fail_timeout apply).
    pub health: Option<health::HealthCheck>,
    /// HTTPS to the servers. `None`: plain HTTP.
    pub tls: Option<UpstreamTls>,
    /// Each new connection starts with a PROXY protocol header naming the client; such
    /// connections are never pooled. `None`: off.
    pub proxy_protocol: Option<send_proxy::SendProxy>,
}

/// A TLS group: the trust its servers are verified against (each worker makes its own rustls
/// config from it: its own session store) and, per server, the name sent as SNI and verified.
#[derive(Debug, Clone)]
pub struct UpstreamTls {
    pub client: shared::tls::ClientTls,
    /// Per server.
    pub names: Table<ServerId, rustls::pki_types::ServerName<'static>>,
    /// `insecure = true`: certificates not verified.
    pub insecure: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    /// As written by the user (`127.0.0.1:9001`, `app.internal:80`); in a group with
    /// `resolve`, one of a name's addresses is `app.internal:80 (10.0.0.7:80)` (`config::dns`).
    /// What metrics, logs, health changes and the hash ring know the server by.
    pub name: String,
    /// The entry as written, without its scheme: the Host field sent when the client's is not
    /// kept, a health check's Host, the TLS name (the same as `name` but in a `resolve` group).
    pub host: String,
    /// Resolved at start, in the order connects try them (`shared::net::connect_order`).
    /// Never empty.
    pub addrs: Vec<SocketAddr>,
    /// Default 1; 1 to [`MAX_WEIGHT`].
    pub weight: u32,
    /// Failures within `fail_timeout` before the server is skipped. Default 1 (nginx). 0: never.
    pub max_fails: u32,
    /// Default 10 s (nginx).
    pub fail_timeout: Duration,
    /// Requests in flight on this server at once, from the whole proxy: each worker takes
    /// its share (`balance::per_worker`), and a request that finds every server of its group
    /// at its share waits for one to finish (`balance::queue`). 0: no limit (the default, as
    /// nginx's `max_conns` and HAProxy's `maxconn`).
    pub max_conns: u32,
}

#[derive(Debug, Clone)]
pub struct Route {
    /// `None`: any host.
    pub host: Option<String>,
    /// Path prefix, e.g. `/` or `/api/`.
    pub path_prefix: String,
    pub action: Action,
    /// `allow`, `deny` and `limit`; `None`: none of them.
    pub access: Option<Arc<client_limits::Access>>,
    /// A proxied route's own options (`strip_prefix`, header edits, timeouts, retry);
    /// `None`: none is set.
    pub opts: Option<Arc<route_opts::RouteOpts>>,
}

impl Route {
    /// The upstream timeouts of this route: its own `timeouts` merged over `[timeouts]`.
    pub fn timeouts<'a>(&'a self, global: &'a Timeouts) -> &'a Timeouts {
        match self.opts.as_deref().and_then(|o| o.timeouts.as_ref()) {
            Some(t) => t,
            None => global,
        }
    }

    /// Whether a request body up to 64 KiB is read whole before an upstream is chosen (the
    /// default; `request_buffering = false` streams every body from its first byte).
    pub fn buffers_request_body(&self) -> bool {
        !self.opts.as_deref().is_some_and(|o| o.stream_body)
    }

    /// The route's `response_headers`, if any.
    pub fn response_edits(&self) -> Option<&route_opts::HeaderEdits> {
        self.opts.as_deref().and_then(|o| o.response.as_ref())
    }

    /// The route's retry policy: its own, else `[retry]`'s, else the built-in rule.
    pub fn retry<'a>(
        &'a self,
        global: Option<&'a route_opts::RetryPolicy>,
    ) -> &'a route_opts::RetryPolicy {
        self.opts
            .as_deref()
            .and_then(|o| o.retry.as_ref())
            .or(global)
            .unwrap_or(&route_opts::RetryPolicy::BUILT_IN)
    }
}

/// What a route does with the requests it matches; the client loop matches on it once per
/// request (through `request::Dispatch`).
#[derive(Debug, Clone)]
pub enum Action {
    /// Forward to this upstream group, through a response cache when `cache` is set.
    Proxy {
        group: GroupId,
        cache: Option<Arc<cache::CacheEntry>>,
    },
    /// Answer with a response the proxy writes itself (nginx's `return`).
    Return(crate::answer::ReturnAction),
    /// Serve files from a directory (nginx's `root`).
    Static(Arc<crate::static_files::StaticSite>),
}

impl Action {
    /// The group of a proxying route.
    pub fn group(&self) -> Option<GroupId> {
        match self {
            Action::Proxy { group, .. } => Some(*group),
            _ => None,
        }
    }
}

/// `[timeouts]`, read straight from the file. Every one must be greater than zero except
/// `shutdown`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// Upstream connect. Default 5 s.
    #[serde(deserialize_with = "de_positive_duration")]
    pub connect: Duration,
    /// Upstream: between two successful reads (nginx's proxy_read_timeout). Default 60 s.
    #[serde(deserialize_with = "de_positive_duration")]
    pub read: Duration,
    /// Upstream: one write may not stall longer than this. Default 60 s.
    #[serde(deserialize_with = "de_positive_duration")]
    pub upstream_send: Duration,
    /// Client: the whole request head must arrive within this. Default 10 s.
    #[serde(deserialize_with = "de_positive_duration")]
    pub header: Duration,
    /// Client: between two reads of a request body. Default 60 s. Also the grace before
    /// `body_min_rate` applies.
    #[serde(deserialize_with = "de_positive_duration")]
    pub body: Duration,
    /// Client: the least average rate of a request body, in bytes per second of waiting for
    /// it, once `body` has passed: the time spent waiting for the client's bytes may exceed
    /// `body` by one second per `body_min_rate` bytes received, no more (Apache's
    /// mod_reqtimeout `body=60,MinRate=500`). Time spent writing to the upstream does not
    /// count. 0: off. Default 500 B/s.
    #[serde(deserialize_with = "de_rate")]
    pub body_min_rate: u64,
    /// Client: one write may not stall longer than this (a client that never reads cannot
    /// hold an upstream connection forever), the TLS close_notify of a lingering close
    /// included. Default 60 s.
    #[serde(deserialize_with = "de_positive_duration")]
    pub send: Duration,
    /// Client: idle keep-alive connection. Default 75 s (nginx's keepalive_timeout).
    #[serde(deserialize_with = "de_positive_duration")]
    pub idle: Duration,
    /// Client: the lingering close after an answer whose request was not read whole
    /// (`crate::lingering`): what the client still sends is read and discarded for at most
    /// this long in all. Default 30 s (nginx's lingering_time).
    #[serde(deserialize_with = "de_positive_duration")]
    pub lingering_time: Duration,
    /// Client: the lingering close ends when nothing arrives for this long. Default 5 s
    /// (nginx's lingering_timeout).
    #[serde(deserialize_with = "de_positive_duration")]
    pub lingering_timeout: Duration,
    /// Graceful shutdown: in-flight requests get this long. Default 10 s. Zero: stop at once.
    #[serde(deserialize_with = "de_duration")]
    pub shutdown: Duration,
}

/// `[headers]`, read straight from the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeaderOptions {
    /// Keep the client's Host (default) instead of the upstream's address.
    pub preserve_host: bool,
    pub x_forwarded_for: bool,
    pub x_real_ip: bool,
    pub x_forwarded_proto: bool,
    /// Peers trusted to name the client in `real_ip_header` (`request::real_ip`); empty:
    /// none (the default), the field is never read.
    #[serde(deserialize_with = "cache::de_cidrs")]
    pub real_ip_from: Vec<crate::cidr::Cidr>,
    /// The field a trusted peer names the client in. Default `X-Forwarded-For`.
    #[serde(deserialize_with = "real_ip::de_header")]
    pub real_ip_header: String,
}

#[derive(Debug, Clone)]
pub struct ProxyLimits {
    pub codec: Limits,
    /// Request body limit (413 beyond it). `None`: unlimited (bodies stream).
    pub max_body: Option<u64>,
    /// Client connections per worker; past it, new ones wait in the backlog. Default 10000.
    pub max_connections: usize,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            read: Duration::from_secs(60),
            upstream_send: Duration::from_secs(60),
            header: Duration::from_secs(10),
            body: Duration::from_secs(60),
            body_min_rate: DEFAULT_BODY_MIN_RATE,
            send: Duration::from_secs(60),
            idle: Duration::from_secs(75),
            lingering_time: Duration::from_secs(30),
            lingering_timeout: Duration::from_secs(5),
            shutdown: Duration::from_secs(10),
        }
    }
}

impl Default for HeaderOptions {
    fn default() -> Self {
        HeaderOptions {
            preserve_host: true,
            x_forwarded_for: true,
            x_real_ip: true,
            x_forwarded_proto: true,
            real_ip_from: Vec::new(),
            real_ip_header: real_ip::DEFAULT_HEADER.to_string(),
        }
    }
}

impl Default for ProxyLimits {
    fn default() -> Self {
        ProxyLimits {
            codec: Limits::default(),
            max_body: None,
            max_connections: 10_000,
        }
    }
}

/// `[timeouts] body_min_rate`, in bytes per second: Apache's default MinRate. Counted only
/// over the time spent waiting for the client, after the body timeout's grace: a real upload
/// on the slowest mobile link sends ten times that.
pub const DEFAULT_BODY_MIN_RATE: u64 = 500;

/// A rate in bytes per second: a size with an optional `/s` (`"500B/s"`, `"1KiB/s"`,
/// `"1000"`), or `"0"` (off).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let size = t
        .strip_suffix("/s")
        .or_else(|| t.strip_suffix("/S"))
        .unwrap_or(t);
    shared::units::parse_size(size).map_err(|_| format!("invalid rate '{s}': {RATE}"))
}

/// A rate as `parse_rate` reads it back (`--help` defaults, messages).
pub fn format_rate(bytes_per_sec: u64) -> String {
    match bytes_per_sec {
        0 => "0".into(),
        n if n % (1 << 20) == 0 => format!("{}MiB/s", n >> 20),
        n if n % 1024 == 0 => format!("{}KiB/s", n >> 10),
        n => format!("{n}B/s"),
    }
}

const RATE: &str = "expected a rate such as \"500B/s\", \"1KiB/s\", a number of bytes per \
                    second, or 0 (off)";

fn de_rate<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::de::Error;
    use shared::units::serde_units::{scalar, Scalar};
    match scalar(d, RATE)? {
        Scalar::Int(n) => u64::try_from(n).map_err(|_| D::Error::custom(RATE)),
        Scalar::Str(s) => parse_rate(&s).map_err(D::Error::custom),
    }
}

pub const DEFAULT_BACKLOG: u32 = 4096;
pub const DEFAULT_KEEPALIVE: usize = 64;
pub const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_KEEPALIVE_REQUESTS: u64 = 1000;
pub const DEFAULT_KEEPALIVE_CHECK: Duration = Duration::from_secs(1);
pub const DEFAULT_MAX_FAILS: u32 = 1;
pub const DEFAULT_FAIL_TIMEOUT: Duration = Duration::from_secs(10);
/// The heaviest a server may weigh. Weights are relative: HAProxy stops at 256 and real
/// splits rarely pass 100; 1000 leaves room for a 0.1% canary (999 to 1). A cap keeps every
/// balancer's sums small; the hash ring's size has its own bound (`ring::MAX_POINTS`).
pub const MAX_WEIGHT: u32 = 1000;
