//! File mode: `proxy --config proxy.toml`. The TOML schema, its defaults (from `config.rs`),
//! and the checks that turn it into a [`Config`].
//!
//! Every error names the file, and the line and key where the file is at fault:
//! - syntax errors, unknown keys and bad values (`3x` as a duration, weight 0) come from the
//!   deserializer, which knows both (through `shared::config::parse_toml`);
//! - checks that relate keys to each other (a route naming an unknown group, a listen address
//!   given twice) or to the world (a host name that does not resolve) use the spans `toml`
//!   records for the values involved.
//!
//! `proxy.example.toml` at the crate root shows and explains every key.

use crate::cli::{parse_listen, resolve_upstream, split_upstream};
use crate::config::{
    Balance, Config, HeaderOptions, Listener, ProxyLimits, Route, Server, Timeouts, UpstreamGroup,
    DEFAULT_BACKLOG, DEFAULT_FAIL_TIMEOUT, DEFAULT_KEEPALIVE, DEFAULT_KEEPALIVE_REQUESTS,
    DEFAULT_KEEPALIVE_TIMEOUT, DEFAULT_MAX_FAILS,
};
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use shared::config::ConfigError;
use shared::http::limits::MAX_HEADERS_CAP;
use shared::http::Limits;
use shared::runtime::{DriverChoice, RuntimeConfig};
use shared::units::serde_units::{
    de_duration, de_positive_duration, scalar, size_of, Scalar, SIZE,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::{NonZeroU16, NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// Read, parse and check a config file.
pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: file.clone(),
        source,
    })?;
    config_from_toml(&file, &text)
}

/// Parse and check config text; `file` names it in errors.
pub fn config_from_toml(file: &str, text: &str) -> Result<Config, ConfigError> {
    let raw: FileConfig = shared::config::parse_toml(file, text)?;
    Checker { file, text }.build(raw)
}

// ---- The schema. Field names are the file's keys; defaults come from config.rs. ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    listen: Vec<Spanned<ListenEntry>>,
    #[serde(default)]
    upstream: BTreeMap<String, Spanned<GroupEntry>>,
    #[serde(default)]
    route: Vec<Spanned<RouteEntry>>,
    #[serde(default)]
    timeouts: TimeoutsEntry,
    #[serde(default)]
    headers: HeadersEntry,
    #[serde(default)]
    limits: LimitsEntry,
    #[serde(default)]
    runtime: RuntimeEntry,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListenEntry {
    #[serde(deserialize_with = "de_listen")]
    addr: SocketAddr,
    #[serde(default = "default_backlog")]
    backlog: NonZeroU32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupEntry {
    servers: Vec<Spanned<ServerEntry>>,
    #[serde(default)]
    balance: BalanceName,
    #[serde(default = "default_keepalive")]
    keepalive: usize,
    #[serde(
        default = "default_keepalive_timeout",
        deserialize_with = "de_positive_duration"
    )]
    keepalive_timeout: Duration,
    #[serde(default = "default_keepalive_requests")]
    keepalive_requests: NonZeroU64,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum BalanceName {
    #[default]
    RoundRobin,
    LeastConn,
    Random2,
}

/// A server: `"10.0.0.1:80"`, or `{ addr = "10.0.0.1:80", weight = 2, ... }`.
#[derive(Debug)]
struct ServerEntry {
    addr: String,
    weight: NonZeroU32,
    max_fails: u32,
    fail_timeout: Duration,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerTable {
    #[serde(deserialize_with = "de_upstream_addr")]
    addr: String,
    #[serde(default = "default_weight")]
    weight: NonZeroU32,
    #[serde(default = "default_max_fails")]
    max_fails: u32,
    #[serde(
        default = "default_fail_timeout",
        deserialize_with = "de_positive_duration"
    )]
    fail_timeout: Duration,
}

impl<'de> Deserialize<'de> for ServerEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ServerEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"HOST:PORT\" or a table { addr = \"HOST:PORT\", weight = N, ... }")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ServerEntry, E> {
                split_upstream(s).map_err(E::custom)?;
                Ok(ServerEntry {
                    addr: s.to_string(),
                    weight: default_weight(),
                    max_fails: DEFAULT_MAX_FAILS,
                    fail_timeout: DEFAULT_FAIL_TIMEOUT,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ServerEntry, A::Error> {
                let t =
                    ServerTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(ServerEntry {
                    addr: t.addr,
                    weight: t.weight,
                    max_fails: t.max_fails,
                    fail_timeout: t.fail_timeout,
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteEntry {
    #[serde(default, deserialize_with = "de_host")]
    host: Option<String>,
    #[serde(default = "default_path", deserialize_with = "de_path")]
    path: String,
    upstream: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct TimeoutsEntry {
    #[serde(deserialize_with = "de_positive_duration")]
    connect: Duration,
    #[serde(deserialize_with = "de_positive_duration")]
    read: Duration,
    #[serde(deserialize_with = "de_positive_duration")]
    upstream_send: Duration,
    #[serde(deserialize_with = "de_positive_duration")]
    header: Duration,
    #[serde(deserialize_with = "de_positive_duration")]
    body: Duration,
    #[serde(deserialize_with = "de_positive_duration")]
    send: Duration,
    #[serde(deserialize_with = "de_positive_duration")]
    idle: Duration,
    /// Zero is allowed: stop at once.
    #[serde(deserialize_with = "de_duration")]
    shutdown: Duration,
}

impl Default for TimeoutsEntry {
    fn default() -> Self {
        let t = Timeouts::default();
        TimeoutsEntry {
            connect: t.connect,
            read: t.read,
            upstream_send: t.upstream_send,
            header: t.header,
            body: t.body,
            send: t.send,
            idle: t.idle,
            shutdown: t.shutdown,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct HeadersEntry {
    preserve_host: bool,
    x_forwarded_for: bool,
    x_real_ip: bool,
    x_forwarded_proto: bool,
}

impl Default for HeadersEntry {
    fn default() -> Self {
        let h = HeaderOptions::default();
        HeadersEntry {
            preserve_host: h.preserve_host,
            x_forwarded_for: h.x_forwarded_for,
            x_real_ip: h.x_real_ip,
            x_forwarded_proto: h.x_forwarded_proto,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct LimitsEntry {
    #[serde(deserialize_with = "de_max_body")]
    max_body: Option<u64>,
    max_connections: NonZeroUsize,
    #[serde(deserialize_with = "de_positive_size")]
    max_request_line: usize,
    #[serde(deserialize_with = "de_positive_size")]
    max_head: usize,
    #[serde(deserialize_with = "de_max_headers")]
    max_headers: usize,
    #[serde(deserialize_with = "de_positive_size")]
    max_chunk_line: usize,
    #[serde(deserialize_with = "de_positive_size")]
    max_trailers: usize,
}

impl Default for LimitsEntry {
    fn default() -> Self {
        let l = ProxyLimits::default();
        LimitsEntry {
            max_body: l.max_body,
            max_connections: NonZeroUsize::new(l.max_connections).unwrap_or(NonZeroUsize::MIN),
            max_request_line: l.codec.max_request_line,
            max_head: l.codec.max_head,
            max_headers: l.codec.max_headers,
            max_chunk_line: l.codec.max_chunk_line,
            max_trailers: l.codec.max_trailers,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RuntimeEntry {
    #[serde(deserialize_with = "de_workers")]
    workers: Option<NonZeroU16>,
    driver: DriverName,
    pin: bool,
}

impl Default for RuntimeEntry {
    fn default() -> Self {
        RuntimeEntry {
            workers: None,
            driver: DriverName::Auto,
            pin: true,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum DriverName {
    Auto,
    #[serde(alias = "io_uring", alias = "iouring")]
    IoUring,
    Epoll,
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

// ---- Value checks run by the deserializer, so their errors carry the line and key. ----

fn de_listen<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    parse_listen(&String::deserialize(d)?).map_err(D::Error::custom)
}

fn de_upstream_addr<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    split_upstream(&s).map_err(D::Error::custom)?;
    Ok(s)
}

fn de_positive_size<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    match usize::try_from(size_of::<D::Error>(scalar(d, SIZE)?)?) {
        Ok(0) => Err(D::Error::custom("must be greater than zero")),
        Ok(v) => Ok(v),
        Err(_) => Err(D::Error::custom("too large")),
    }
}

fn de_max_headers<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let v = i64::deserialize(d)?;
    if !(1..=MAX_HEADERS_CAP as i64).contains(&v) {
        return Err(D::Error::custom(format!(
            "must be between 1 and {MAX_HEADERS_CAP}"
        )));
    }
    Ok(v as usize)
}

/// A size, or `"unlimited"`.
fn de_max_body<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    const WHAT: &str = "a size such as \"1MiB\", a number of bytes, or \"unlimited\"";
    match scalar(d, WHAT)? {
        Scalar::Str(s) if s.eq_ignore_ascii_case("unlimited") => Ok(None),
        Scalar::Str(s) => shared::units::parse_size(&s)
            .map(Some)
            .map_err(|e| D::Error::custom(format!("{e}, or \"unlimited\""))),
        Scalar::Int(n) => u64::try_from(n)
            .map(Some)
            .map_err(|_| D::Error::custom(format!("expected {WHAT}"))),
    }
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

fn de_host<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let h = String::deserialize(d)?;
    let ok = !h.is_empty()
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b));
    if !ok {
        return Err(D::Error::custom(format!(
            "`{h}` is not a host name (e.g. example.com)"
        )));
    }
    let h = h.to_ascii_lowercase();
    Ok(Some(h.strip_suffix('.').unwrap_or(&h).to_string()))
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

// ---- Checks across keys, with lines from spans. ----

struct Checker<'a> {
    file: &'a str,
    text: &'a str,
}

impl Checker<'_> {
    fn at(&self, span: std::ops::Range<usize>, key: String, message: String) -> ConfigError {
        let end = span.start.min(self.text.len());
        ConfigError::Parse {
            file: self.file.to_string(),
            line: self.text[..end].matches('\n').count() + 1,
            key: Some(key),
            message,
        }
    }

    fn invalid(&self, key: &str, message: &str) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_string(),
            key: Some(key.to_string()),
            message: message.to_string(),
        }
    }

    fn build(&self, raw: FileConfig) -> Result<Config, ConfigError> {
        let listeners = self.listeners(&raw.listen)?;
        let groups = self.groups(&raw.upstream)?;
        let routes = self.routes(&raw.route, &groups)?;
        let t = raw.timeouts;
        let h = raw.headers;
        let l = raw.limits;
        let r = raw.runtime;
        let mut runtime = RuntimeConfig::default();
        if let Some(n) = r.workers {
            runtime.workers = usize::from(n.get());
        }
        runtime.pin = r.pin;
        runtime.driver = match r.driver {
            DriverName::Auto => DriverChoice::Auto,
            DriverName::IoUring => DriverChoice::IoUring,
            DriverName::Epoll => DriverChoice::Epoll,
        };
        Ok(Config {
            runtime,
            listeners,
            groups,
            routes,
            timeouts: Timeouts {
                connect: t.connect,
                read: t.read,
                upstream_send: t.upstream_send,
                header: t.header,
                body: t.body,
                send: t.send,
                idle: t.idle,
                shutdown: t.shutdown,
            },
            headers: HeaderOptions {
                preserve_host: h.preserve_host,
                x_forwarded_for: h.x_forwarded_for,
                x_real_ip: h.x_real_ip,
                x_forwarded_proto: h.x_forwarded_proto,
            },
            limits: ProxyLimits {
                codec: Limits {
                    max_request_line: l.max_request_line,
                    max_head: l.max_head,
                    max_headers: l.max_headers,
                    max_chunk_line: l.max_chunk_line,
                    max_trailers: l.max_trailers,
                },
                max_body: l.max_body,
                max_connections: l.max_connections.get(),
            },
            source: self.file.to_string(),
        })
    }

    fn listeners(&self, entries: &[Spanned<ListenEntry>]) -> Result<Vec<Listener>, ConfigError> {
        if entries.is_empty() {
            return Err(self.invalid(
                "listen",
                "no listen address: add a [[listen]] table with addr = \"IP:PORT\"",
            ));
        }
        let mut out: Vec<Listener> = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let addr = e.get_ref().addr;
            // Port 0 asks for any free port: several are fine.
            if addr.port() != 0 && out.iter().any(|l| l.addr == addr) {
                return Err(self.at(
                    e.span(),
                    format!("listen[{i}].addr"),
                    format!("{addr} is already listed"),
                ));
            }
            out.push(Listener {
                addr,
                backlog: e.get_ref().backlog.get(),
            });
        }
        Ok(out)
    }

    fn groups(
        &self,
        entries: &BTreeMap<String, Spanned<GroupEntry>>,
    ) -> Result<Vec<UpstreamGroup>, ConfigError> {
        if entries.is_empty() {
            return Err(self.invalid(
                "upstream",
                "no upstream group: add [upstream.NAME] with servers = [\"HOST:PORT\"]",
            ));
        }
        let mut out = Vec::with_capacity(entries.len());
        for (name, g) in entries {
            let span = g.span();
            let g = g.get_ref();
            if g.servers.is_empty() {
                return Err(self.at(
                    span,
                    format!("upstream.{name}.servers"),
                    "a group needs at least one server".into(),
                ));
            }
            let mut servers = Vec::with_capacity(g.servers.len());
            for (i, s) in g.servers.iter().enumerate() {
                let key = format!("upstream.{name}.servers[{i}]");
                let addr = resolve_upstream(&s.get_ref().addr)
                    .map_err(|m| self.at(s.span(), key.clone(), m))?;
                if servers.iter().any(|x: &Server| x.addr == addr) {
                    return Err(self.at(
                        s.span(),
                        key,
                        format!(
                            "{addr} is already a server of this group (raise its weight instead)"
                        ),
                    ));
                }
                let s = s.get_ref();
                servers.push(Server {
                    name: s.addr.clone(),
                    addr,
                    weight: s.weight.get(),
                    max_fails: s.max_fails,
                    fail_timeout: s.fail_timeout,
                });
            }
            out.push(UpstreamGroup {
                name: name.clone(),
                servers,
                balance: match g.balance {
                    BalanceName::RoundRobin => Balance::RoundRobin,
                    BalanceName::LeastConn => Balance::LeastConn,
                    BalanceName::Random2 => Balance::Random2,
                },
                keepalive: g.keepalive,
                keepalive_timeout: g.keepalive_timeout,
                keepalive_requests: g.keepalive_requests.get(),
            });
        }
        Ok(out)
    }

    fn routes(
        &self,
        entries: &[Spanned<RouteEntry>],
        groups: &[UpstreamGroup],
    ) -> Result<Vec<Route>, ConfigError> {
        if entries.is_empty() {
            // One group and no routes: everything goes to it.
            if groups.len() == 1 {
                return Ok(vec![Route {
                    host: None,
                    path_prefix: "/".into(),
                    group: 0,
                }]);
            }
            return Err(self.invalid(
                "route",
                "several upstream groups but no [[route]]: add routes \
                 (a route with path = \"/\" and no host is the default)",
            ));
        }
        let mut out: Vec<Route> = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let r = e.get_ref();
            let wanted = r.upstream.get_ref();
            let Some(group) = groups.iter().position(|g| g.name == *wanted) else {
                let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
                return Err(self.at(
                    r.upstream.span(),
                    format!("route[{i}].upstream"),
                    format!(
                        "no upstream group named `{wanted}` (defined: {})",
                        names.join(", ")
                    ),
                ));
            };
            if out
                .iter()
                .any(|o| o.host == r.host && o.path_prefix == r.path)
            {
                return Err(self.at(
                    e.span(),
                    format!("route[{i}]"),
                    format!(
                        "a route for host {} and path `{}` is already defined",
                        r.host.as_deref().unwrap_or("(any)"),
                        r.path
                    ),
                ));
            }
            out.push(Route {
                host: r.host.clone(),
                path_prefix: r.path.clone(),
                group,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../proxy.example.toml");

    const MINIMAL: &str =
        "[[listen]]\naddr = \"127.0.0.1:8080\"\n\n[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";

    #[test]
    fn example_parses_with_every_key() {
        let cfg = config_from_toml("proxy.example.toml", EXAMPLE).unwrap();
        assert_eq!(cfg.listeners.len(), 2);
        assert_eq!(cfg.listeners[1].addr, "[::1]:8080".parse().unwrap());
        assert_eq!(cfg.groups.len(), 2);
        let app = &cfg.groups[0];
        assert_eq!(app.name, "app");
        assert_eq!(app.servers.len(), 3);
        assert_eq!(app.servers[0].weight, 2);
        assert_eq!(app.servers[2].name, "127.0.0.1:9003");
        assert_eq!(app.servers[2].weight, 1);
        assert_eq!(cfg.groups[1].balance, Balance::LeastConn);
        assert_eq!(cfg.routes.len(), 3);
        assert_eq!(cfg.routes[0].host.as_deref(), Some("static.example.com"));
        assert_eq!(cfg.routes[0].group, 1);
        assert_eq!(cfg.routes[2].group, 0);
        assert_eq!(cfg.limits.max_body, None);
        assert_eq!(cfg.source, "proxy.example.toml");
        crate::cli::validate(&cfg).unwrap();
    }

    #[test]
    fn example_values_are_the_defaults() {
        // The example documents the defaults: the minimal file must give the same values.
        let ex = config_from_toml("x", EXAMPLE).unwrap();
        let min = config_from_toml("x", MINIMAL).unwrap();
        assert_eq!(format!("{:?}", ex.timeouts), format!("{:?}", min.timeouts));
        assert_eq!(format!("{:?}", ex.headers), format!("{:?}", min.headers));
        assert_eq!(format!("{:?}", ex.limits), format!("{:?}", min.limits));
        assert_eq!(format!("{:?}", ex.runtime), format!("{:?}", min.runtime));
        assert_eq!(ex.listeners[0].backlog, min.listeners[0].backlog);
        let (e, m) = (&ex.groups[0], &min.groups[0]);
        assert_eq!(
            (
                e.balance,
                e.keepalive,
                e.keepalive_timeout,
                e.keepalive_requests
            ),
            (
                m.balance,
                m.keepalive,
                m.keepalive_timeout,
                m.keepalive_requests
            )
        );
        let (e, m) = (&e.servers[0], &m.servers[0]);
        assert_eq!((e.max_fails, e.fail_timeout), (m.max_fails, m.fail_timeout));
    }

    #[test]
    fn minimal_file_gets_defaults_and_a_default_route() {
        let cfg = config_from_toml("p.toml", MINIMAL).unwrap();
        assert_eq!(cfg.listeners[0].backlog, DEFAULT_BACKLOG);
        assert_eq!(cfg.routes.len(), 1);
        assert_eq!(cfg.routes[0].path_prefix, "/");
        assert_eq!(cfg.routes[0].group, 0);
        let s = &cfg.groups[0].servers[0];
        assert_eq!(
            (s.weight, s.max_fails, s.fail_timeout),
            (1, DEFAULT_MAX_FAILS, DEFAULT_FAIL_TIMEOUT)
        );
        assert_eq!(cfg.timeouts.header, Timeouts::default().header);
        assert_eq!(cfg.limits.codec, Limits::default());
        assert!(cfg.runtime.pin);
    }

    #[test]
    fn values_are_read() {
        let text = format!(
            "{MINIMAL}[timeouts]\nread = \"250ms\"\nshutdown = 0\n[limits]\nmax_body = \"1MiB\"\nmax_headers = 20\n\
             [runtime]\nworkers = 3\ndriver = \"epoll\"\npin = false\n[headers]\nx_real_ip = false\n"
        );
        let cfg = config_from_toml("p.toml", &text).unwrap();
        assert_eq!(cfg.timeouts.read, Duration::from_millis(250));
        assert_eq!(cfg.timeouts.shutdown, Duration::ZERO);
        assert_eq!(cfg.limits.max_body, Some(1 << 20));
        assert_eq!(cfg.limits.codec.max_headers, 20);
        assert_eq!(cfg.runtime.workers, 3);
        assert_eq!(cfg.runtime.driver, DriverChoice::Epoll);
        assert!(!cfg.runtime.pin);
        assert!(!cfg.headers.x_real_ip);
        assert!(cfg.headers.x_forwarded_for);
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let e = load("/nonexistent/proxy.toml").unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/proxy.toml: "), "{e}");
    }
}
