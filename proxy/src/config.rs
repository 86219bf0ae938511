//! The proxy's immutable configuration, as handed to the workers after `validate()`.
//!
//! Two ways in, one result: quick mode flags (`cli.rs`) and TOML files (`file.rs`) both build a
//! [`Config`]. Defaults live in the `Default` impls here, once.

use shared::http::Limits;
use std::net::SocketAddr;
use std::time::Duration;

/// Everything the proxy needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub runtime: shared::runtime::RuntimeConfig,
    pub listeners: Vec<Listener>,
    pub groups: Vec<UpstreamGroup>,
    /// Routes in file order; matching picks the longest path prefix among those whose host
    /// matches (exact host before the default `host = None`).
    pub routes: Vec<Route>,
    pub timeouts: Timeouts,
    pub headers: HeaderOptions,
    pub limits: ProxyLimits,
    /// Where the config came from (file name or "command line"), for messages.
    pub source: String,
}

#[derive(Debug, Clone)]
pub struct Listener {
    pub addr: SocketAddr,
    /// listen(2) backlog. Default 4096.
    pub backlog: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Balance {
    /// Smooth weighted round-robin (nginx's algorithm).
    #[default]
    RoundRobin,
    /// Fewest active requests on this worker, weighted.
    LeastConn,
    /// Power of two random choices by active requests.
    Random2,
}

#[derive(Debug, Clone)]
pub struct UpstreamGroup {
    pub name: String,
    pub servers: Vec<Server>,
    pub balance: Balance,
    /// Idle keep-alive connections kept per worker per server. Default 64. 0 disables reuse.
    pub keepalive: usize,
    /// Idle pooled connections are closed after this. Default 30 s (shorter than typical origins).
    pub keepalive_timeout: Duration,
    /// Requests per upstream connection before it is retired. Default 1000 (nginx's default).
    pub keepalive_requests: u64,
}

#[derive(Debug, Clone)]
pub struct Server {
    /// As written by the user (`127.0.0.1:9001`, `app.internal:80`), for messages.
    pub name: String,
    /// Resolved at start.
    pub addr: SocketAddr,
    /// Default 1.
    pub weight: u32,
    /// Failures within `fail_timeout` before the server is skipped. Default 1 (nginx). 0: never.
    pub max_fails: u32,
    /// Default 10 s (nginx).
    pub fail_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct Route {
    /// `None`: any host.
    pub host: Option<String>,
    /// Path prefix, e.g. `/` or `/api/`.
    pub path_prefix: String,
    /// Index into `Config::groups`.
    pub group: usize,
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    /// Upstream connect. Default 5 s.
    pub connect: Duration,
    /// Upstream: between two successful reads (nginx's proxy_read_timeout). Default 60 s.
    pub read: Duration,
    /// Upstream: one write may not stall longer than this. Default 60 s.
    pub upstream_send: Duration,
    /// Client: the whole request head must arrive within this. Default 10 s.
    pub header: Duration,
    /// Client: between two reads of a request body. Default 60 s.
    pub body: Duration,
    /// Client: one write may not stall longer than this (a client that never reads cannot
    /// hold an upstream connection forever). Default 60 s.
    pub send: Duration,
    /// Client: idle keep-alive connection. Default 75 s (nginx's keepalive_timeout).
    pub idle: Duration,
    /// Graceful shutdown: in-flight requests get this long. Default 10 s.
    pub shutdown: Duration,
}

#[derive(Debug, Clone)]
pub struct HeaderOptions {
    /// Keep the client's Host (default) instead of the upstream's address.
    pub preserve_host: bool,
    pub x_forwarded_for: bool,
    pub x_real_ip: bool,
    pub x_forwarded_proto: bool,
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
            send: Duration::from_secs(60),
            idle: Duration::from_secs(75),
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

pub const DEFAULT_BACKLOG: u32 = 4096;
pub const DEFAULT_KEEPALIVE: usize = 64;
pub const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_KEEPALIVE_REQUESTS: u64 = 1000;
pub const DEFAULT_MAX_FAILS: u32 = 1;
pub const DEFAULT_FAIL_TIMEOUT: Duration = Duration::from_secs(10);
