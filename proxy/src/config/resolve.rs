//! The resolve-and-check step: a file-layer value and the command-line overrides in, the
//! runtime [`Config`] or one error out. Pure but for name lookups (`shared::net::resolve`), so
//! a reload can run it again on a file read anew, with the overrides kept from the start.
//!
//! Errors name the file, line and key where the file is at fault (from the spans the file
//! layer keeps), or the flag where a flag is.

use super::cache::CacheEntry;
use super::dns::{Entry, Resolve};
use super::route_opts::RouteOpts;
use super::schema::{
    FileConfig, GroupEntry, LimitsEntry, Origin, ReturnEntry, RouteEntry, RuntimeEntry, StaticEntry,
};
use super::{
    validate, Action, Config, GroupId, Listener, ListenerTls, ProxyLimits, Route, RouteId, Server,
    ServerId, Table, UpstreamGroup, UpstreamTls, DEFAULT_BACKLOG,
};
use crate::answer::ReturnAction;
use crate::static_files::StaticSite;
use shared::config::ConfigError;
use shared::http::Limits;
use shared::runtime::{available_cpus, RuntimeConfig};
use shared::tls::server::{server_config, CertFiles, ServerTlsSpec, SniCert};
use shared::tls::{ClientTls, ClientTlsOptions, Trust};
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;

pub use super::overrides::{Edit, HeaderSlot, Overrides, TimeoutSlot};

/// Why no configuration came out. Either way the binary exits 2.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value given on the command line, or the command line as a whole.
    #[error("{}", shared::config::escape_controls(.0))]
    Usage(String),
    /// The config file, with its line and key where known.
    #[error(transparent)]
    File(#[from] ConfigError),
}

/// Turn a file-layer value and the overrides into the runtime config.
pub fn resolve(file: &FileConfig, overrides: &Overrides) -> Result<Config, Error> {
    let r = Resolver { file, overrides };
    r.head_limits()?;
    let listeners = r.listeners()?;
    let groups = r.groups()?;
    let routes = r.routes(&groups)?;
    let mut cfg = Config {
        runtime: runtime_config(&file.runtime),
        splice: file.runtime.splice,
        steer: file.runtime.steer,
        listeners,
        groups,
        routes,
        timeouts: file.timeouts.clone(),
        headers: file.headers.clone(),
        limits: proxy_limits(&file.limits),
        admin: file.admin.as_ref().map(|a| a.addr),
        access_log: overrides
            .access_log
            .clone()
            .or_else(|| file.access_log.clone()),
        source: file.origin.describe().to_string(),
        client_limits: file
            .client_limits
            .resolve()
            .map_err(|(key, m)| r.error(At::Missing(key), m))?,
        client_steering: false,
        retry: file.retry.clone(),
    };
    for edit in &overrides.edits {
        edit.apply(&mut cfg);
    }
    super::route_opts::merge_route_timeouts(&mut cfg);
    validate(&cfg).map_err(|m| r.error(At::Whole, m))?;
    Ok(cfg)
}

fn runtime_config(r: &RuntimeEntry) -> RuntimeConfig {
    let mut rt = RuntimeConfig {
        workers: r
            .workers
            .map_or_else(available_cpus, |n| usize::from(n.get())),
        driver: r.driver,
        multishot: r.multishot,
        ..RuntimeConfig::default()
    };
    rt.set_pin_mode(r.pin);
    rt
}

fn proxy_limits(l: &LimitsEntry) -> ProxyLimits {
    let d = ProxyLimits::default();
    ProxyLimits {
        codec: Limits {
            max_request_line: l
                .max_request_line
                .as_ref()
                .map_or(d.codec.max_request_line, |s| s.get_ref().0),
            max_head: l
                .max_head
                .as_ref()
                .map_or(d.codec.max_head, |s| s.get_ref().0),
            max_headers: l.max_headers.unwrap_or(d.codec.max_headers),
            max_chunk_line: l.max_chunk_line.unwrap_or(d.codec.max_chunk_line),
            max_trailers: l.max_trailers.unwrap_or(d.codec.max_trailers),
        },
        max_body: l.max_body.unwrap_or(d.max_body),
        max_connections: l.max_connections.map_or(d.max_connections, |n| n.get()),
    }
}

/// Whether a server of group `g` is TLS: its scheme says, or without one the group's `tls`
/// table (quick mode's `--upstream-ca`/`--upstream-insecure`).
fn server_is_tls(g: &GroupEntry, addr: &str) -> bool {
    super::schema::upstream_scheme(addr)
        .0
        .unwrap_or(g.tls.is_some())
}

/// Where a problem is, as the user wrote it.
enum At {
    /// A value in the file: its key and where it is.
    Value { key: String, span: Range<usize> },
    /// A key the file lacks (no line to show).
    Missing(&'static str),
    /// A flag and the value given to it.
    Flag(&'static str, String),
    /// The config as a whole.
    Whole,
}

struct Resolver<'a> {
    file: &'a FileConfig,
    overrides: &'a Overrides,
}

impl Resolver<'_> {
    fn error(&self, at: At, message: String) -> Error {
        let (file, text) = match (&self.file.origin, &at) {
            (_, At::Flag(flag, value)) => {
                return Error::Usage(format!("{flag} {value}: {message}"))
            }
            (Origin::CommandLine, _) => return Error::Usage(message),
            (Origin::File { name, text }, _) => (name.clone(), text),
        };
        Error::File(match at {
            At::Value { key, span } => ConfigError::Parse {
                file,
                line: text[..span.start.min(text.len())].matches('\n').count() + 1,
                key: Some(key),
                message,
            },
            At::Missing(key) => ConfigError::Invalid {
                file,
                key: Some(key.to_string()),
                message,
            },
            At::Whole | At::Flag(..) => ConfigError::Invalid {
                file,
                key: None,
                message,
            },
        })
    }

    /// Why a group's servers are not all plain or all TLS, naming one of each: a server
    /// without a scheme is what the `tls` table says, so it cannot sit beside an `https://`
    /// one without the table (it would be TLS on the plain port, 80 by default).
    fn mixed_schemes(&self, g: &GroupEntry) -> Option<String> {
        let addrs = || g.servers.iter().map(|s| s.get_ref().addr.as_str());
        let plain = addrs().find(|a| !server_is_tls(g, a))?;
        let table = match self.file.origin {
            Origin::CommandLine => "--upstream-ca or --upstream-insecure",
            Origin::File { .. } => "a tls table",
        };
        let Some(tls) = addrs().find(|a| server_is_tls(g, a)) else {
            // Every server plain: only an `http://` one can be, with the table there (which
            // would make the group TLS).
            return g.tls.is_some().then(|| {
                format!(
                    "mixes plain and TLS servers: `{plain}` is plain (http://) beside {table}: \
                     a group is all plain or all TLS"
                )
            });
        };
        let why = match g.tls.is_some() {
            true => format!(" (no scheme, with {table})"),
            false => format!(" (no scheme, without {table})"),
        };
        let why = |a: &str| match super::schema::upstream_scheme(a).0 {
            None => why.clone(),
            Some(_) => String::new(),
        };
        Some(format!(
            "mixes plain and TLS servers: `{plain}` is plain{}, `{tls}` is TLS{}: a group is all \
             plain or all TLS",
            why(plain),
            why(tls)
        ))
    }

    /// A group's TLS: `https://` servers or a `tls` table; never a mix of plain and TLS.
    fn group_tls(
        &self,
        name: &str,
        g: &GroupEntry,
        servers: &Table<ServerId, Server>,
        span: Range<usize>,
    ) -> Result<Option<UpstreamTls>, Error> {
        let at = |key: &str| At::Value {
            key: format!("upstream.{name}.{key}"),
            span: span.clone(),
        };
        if let Some(m) = self.mixed_schemes(g) {
            return Err(self.error(at("servers"), m));
        }
        let tls = g
            .servers
            .iter()
            .any(|s| server_is_tls(g, &s.get_ref().addr));
        if !tls {
            return Ok(None);
        }
        let e = g.tls.as_ref();
        let insecure = e.is_some_and(|t| t.insecure);
        let ca = e
            .and_then(|t| t.ca.as_ref())
            .map(|p| absolute(&self.base_dir().join(p)));
        let trust = match (insecure, ca) {
            (true, _) => Trust::Insecure,
            (false, Some(p)) => Trust::CaFile(p),
            (false, None) => Trust::System,
        };
        let opts = ClientTlsOptions {
            trust,
            resumption: true,
        };
        let client = ClientTls::new(&opts).map_err(|m| self.error(at("tls"), m.to_string()))?;
        // Each worker makes its own from `client`: make sure one can be made.
        client
            .config()
            .map_err(|m| self.error(at("tls"), m.to_string()))?;
        let sni = e.and_then(|t| t.sni.as_deref());
        let mut names = Table::new();
        for s in servers {
            let n = super::dns::tls_name(sni, &s.host).map_err(|m| self.error(at("tls"), m))?;
            names.push(n);
        }
        Ok(Some(UpstreamTls {
            client,
            names,
            insecure,
        }))
    }

    /// `max_head` and `max_request_line` together: a head holds its request line. At the line
    /// of `max_head` when the file gives it, else of `max_request_line`.
    fn head_limits(&self) -> Result<(), Error> {
        let l = &self.file.limits;
        let codec = proxy_limits(l).codec;
        let Some(m) = super::head_too_small_for_request_line(&codec) else {
            return Ok(());
        };
        let at = match (&l.max_head, &l.max_request_line) {
            (Some(s), _) => At::Value {
                key: "limits.max_head".into(),
                span: s.span(),
            },
            (None, Some(s)) => At::Value {
                key: "limits.max_request_line".into(),
                span: s.span(),
            },
            // Both defaults: they fit (a test says so); were they not, the file is not at fault.
            (None, None) => At::Whole,
        };
        Err(self.error(at, m))
    }

    /// `--listen` if given, else the file's `[[listen]]`.
    fn listeners(&self) -> Result<Vec<Listener>, Error> {
        let given: Vec<(Listener, At)> = if self.overrides.listen.is_empty() {
            let entries = self.file.listen.iter().enumerate();
            entries
                .map(|(i, e)| {
                    let l = Listener {
                        addr: e.get_ref().addr,
                        backlog: e.get_ref().backlog.get(),
                        tls: None,
                        proxy_protocol: e.get_ref().proxy_protocol,
                    };
                    let key = format!("listen[{i}].addr");
                    (
                        l,
                        At::Value {
                            key,
                            span: e.span(),
                        },
                    )
                })
                .collect::<Vec<_>>()
        } else {
            let flags = self.overrides.listen.iter();
            flags
                .map(|&addr| {
                    let l = Listener {
                        addr,
                        backlog: DEFAULT_BACKLOG,
                        tls: None,
                        proxy_protocol: false,
                    };
                    (l, At::Flag("--listen", addr.to_string()))
                })
                .collect()
        };
        if given.is_empty() {
            let m = "no listen address: add a [[listen]] table with addr = \"IP:PORT\"";
            return Err(self.error(At::Missing("listen"), m.into()));
        }
        let mut out: Vec<Listener> = Vec::with_capacity(given.len());
        for (i, (mut l, at)) in given.into_iter().enumerate() {
            // Port 0 asks for any free port: several are fine.
            if l.addr.port() != 0 && out.iter().any(|o| o.addr == l.addr) {
                return Err(self.error(at, format!("{} is already listed", l.addr)));
            }
            l.tls = self.listener_tls(i)?;
            out.push(l);
        }
        Ok(out)
    }

    /// Listener `i`'s TLS: `--tls-cert`/`--tls-key` for every listener, else its `tls` table
    /// (file mode without `--listen`). Files are loaded and checked here, so `--check-config`
    /// and the start name the file and the problem.
    fn listener_tls(&self, i: usize) -> Result<Option<ListenerTls>, Error> {
        if let Some(files) = &self.overrides.tls {
            let spec = ServerTlsSpec {
                default: files.clone(),
                sni: Vec::new(),
            };
            let at = At::Flag("--tls-cert", files.cert.display().to_string());
            let built = server_config(&spec).map_err(|e| self.error(at, e.message))?;
            return Ok(Some(ListenerTls { spec, built }));
        }
        if !self.overrides.listen.is_empty() {
            return Ok(None);
        }
        let Some(t) = &self.file.listen[i].get_ref().tls else {
            return Ok(None);
        };
        let base = self.base_dir();
        let files = |cert: &Path, key: &Path| CertFiles {
            cert: absolute(&base.join(cert)),
            key: absolute(&base.join(key)),
        };
        let entries = &t.get_ref().sni;
        let spec = ServerTlsSpec {
            default: files(&t.get_ref().cert, &t.get_ref().key),
            sni: entries
                .iter()
                .map(|s| SniCert {
                    names: s.get_ref().names.clone(),
                    files: files(&s.get_ref().cert, &s.get_ref().key),
                })
                .collect(),
        };
        let built = server_config(&spec).map_err(|e| {
            // The line of the `sni` entry at fault, else the table's.
            let at = match e.entry.and_then(|j| Some((j, entries.get(j)?))) {
                Some((j, s)) => At::Value {
                    key: format!("listen[{i}].tls.sni[{j}]"),
                    span: s.span(),
                },
                None => At::Value {
                    key: format!("listen[{i}].tls"),
                    span: t.span(),
                },
            };
            self.error(at, e.message)
        })?;
        Ok(Some(ListenerTls { spec, built }))
    }

    /// The config file's folder (the working directory for the command line): what relative
    /// paths in the file are relative to.
    fn base_dir(&self) -> PathBuf {
        match &self.file.origin {
            Origin::File { name, .. } => Path::new(name)
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            Origin::CommandLine => PathBuf::new(),
        }
    }

    /// The groups; none is fine when no route proxies (`routes` says what is missing).
    fn groups(&self) -> Result<Table<GroupId, UpstreamGroup>, Error> {
        let mut out = Table::new();
        for (name, g) in &self.file.upstream {
            let span = g.span();
            let g = g.get_ref();
            if g.servers.is_empty() {
                let key = format!("upstream.{name}.servers");
                let m = "a group needs at least one server".to_string();
                return Err(self.error(At::Value { key, span }, m));
            }
            if let Some(h) = &g.health {
                if let Err(m) = h.get_ref().check() {
                    let key = format!("upstream.{name}.health");
                    return Err(self.error(
                        At::Value {
                            key,
                            span: h.span(),
                        },
                        m,
                    ));
                }
            }
            let hash_key = self.hash_key(name, g)?;
            let (servers, resolve) = self.servers(name, g)?;
            let tls = self.group_tls(name, g, &servers, span)?;
            out.push(UpstreamGroup {
                name: name.clone(),
                servers,
                balance: g.balance,
                hash_key,
                resolve,
                keepalive: g.keepalive,
                keepalive_timeout: g.keepalive_timeout,
                keepalive_requests: g.keepalive_requests.get(),
                keepalive_check: g.keepalive_check,
                health: g.health.as_ref().map(|h| h.get_ref().clone()),
                tls,
                proxy_protocol: g.proxy_protocol,
            });
        }
        Ok(out)
    }

    /// `hash_key`: only with `balance = "hash"` (else it would silently do nothing).
    fn hash_key(&self, name: &str, g: &GroupEntry) -> Result<super::hash_key::HashKey, Error> {
        match &g.hash_key {
            None => Ok(Default::default()),
            Some(k) if g.balance == super::Balance::Hash => Ok(k.get_ref().clone()),
            Some(k) => {
                let key = format!("upstream.{name}.hash_key");
                let m = format!(
                    "hash_key applies to balance = \"hash\" only (this group balances {})",
                    g.balance.name()
                );
                Err(self.error(
                    At::Value {
                        key,
                        span: k.span(),
                    },
                    m,
                ))
            }
        }
    }

    /// Resolve each server's name (the one address rule: `shared::net::resolve`). A group
    /// with a `tls` table: a server without a scheme is `https://` (443). A group with
    /// `resolve`: each address of a name is a server (`config::dns`), and how to find them
    /// again is kept.
    fn servers(
        &self,
        group: &str,
        g: &GroupEntry,
    ) -> Result<(Table<ServerId, Server>, Option<Resolve>), Error> {
        let mut entries = Vec::with_capacity(g.servers.len());
        let mut found = Vec::with_capacity(g.servers.len());
        for (i, e) in g.servers.iter().enumerate() {
            let s = e.get_ref();
            let at = || match self.file.origin {
                Origin::CommandLine => At::Flag("--upstream", s.addr.clone()),
                Origin::File { .. } => At::Value {
                    key: format!("upstream.{group}.servers[{i}]"),
                    span: e.span(),
                },
            };
            let addr = match super::schema::upstream_scheme(&s.addr) {
                (None, a) if g.tls.is_some() => format!("https://{a}"),
                _ => s.addr.clone(),
            };
            let (host, port) =
                super::schema::split_upstream(&addr).map_err(|m| self.error(at(), m))?;
            let addrs =
                shared::net::resolve(&host, port).map_err(|m| self.error(at(), m.to_string()))?;
            let literal = host.parse::<std::net::IpAddr>().is_ok();
            let first = addrs[0];
            let dup = found
                .iter()
                .zip(&entries)
                .any(|(f, e): (&Vec<SocketAddr>, &Entry)| {
                    f[0] == first && (g.resolve.is_none() || (e.literal && literal))
                });
            if dup {
                let m =
                    format!("{first} is already a server of this group (raise its weight instead)");
                return Err(self.error(at(), m));
            }
            entries.push(Entry {
                // The address without its scheme: messages, and the Host field sent.
                host: super::schema::upstream_scheme(&s.addr).1.to_string(),
                lookup: (host, port),
                literal,
                weight: s.weight.get(),
                max_fails: s.max_fails,
                fail_timeout: s.fail_timeout,
                max_conns: s.max_conns,
            });
            found.push(addrs);
        }
        let Some(every) = g.resolve else {
            let servers = entries.iter().zip(found).map(|(e, addrs)| Server {
                name: e.host.clone(),
                host: e.host.clone(),
                addrs,
                weight: e.weight,
                max_fails: e.max_fails,
                fail_timeout: e.fail_timeout,
                max_conns: e.max_conns,
            });
            return Ok((servers.collect(), None));
        };
        let servers = super::dns::servers_of(&entries, &found);
        let sni = g.tls.as_ref().and_then(|t| t.sni.clone());
        Ok((
            servers,
            Some(Resolve {
                every,
                entries,
                sni,
            }),
        ))
    }

    fn routes(
        &self,
        groups: &Table<GroupId, UpstreamGroup>,
    ) -> Result<Table<RouteId, Route>, Error> {
        let entries = &self.file.route;
        if entries.is_empty() {
            // One group and no routes: everything goes to it.
            let m = match groups.len() {
                1 => {
                    let route = Route {
                        host: None,
                        path_prefix: "/".into(),
                        action: Action::Proxy {
                            group: GroupId::new(0),
                            cache: None,
                        },
                        access: None,
                        opts: None,
                    };
                    return Ok(Table::from(vec![route]));
                }
                0 => {
                    "no upstream group: add [upstream.NAME] with servers = [\"HOST:PORT\"] \
                      (or [[route]]s that answer with `return` or `static`)"
                }
                _ => {
                    "several upstream groups but no [[route]]: add routes \
                     (a route with path = \"/\" and no host is the default)"
                }
            };
            let key = if groups.is_empty() {
                "upstream"
            } else {
                "route"
            };
            return Err(self.error(At::Missing(key), m.into()));
        }
        let mut out: Table<RouteId, Route> = Table::new();
        // Each route's host and prefix as the router compares them: two spellings of one
        // (`/api/` and `/%61pi/`) would leave the second route dead.
        let mut keys = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let r = e.get_ref();
            let whole = || At::Value {
                key: format!("route[{i}]"),
                span: e.span(),
            };
            let key = crate::route_key::match_key(r.host.as_deref(), &r.path);
            if let Some(j) = keys.iter().position(|k| *k == key) {
                return Err(self.error(whole(), duplicate_route(r, j, &entries[j])));
            }
            keys.push(key);
            if let (Some(c), None) = (&r.cache, &r.upstream) {
                let key = format!("route[{i}].cache");
                let m =
                    "`cache` goes on a route with `upstream` (it caches that upstream's answers)";
                return Err(self.error(
                    At::Value {
                        key,
                        span: c.span(),
                    },
                    m.into(),
                ));
            }
            let action = match (&r.upstream, &r.return_, &r.static_) {
                (Some(u), None, None) => self.proxy_action(i, u, r.cache.as_ref(), groups)?,
                (None, Some(ret), None) => self.return_action(i, ret)?,
                (None, None, Some(st)) => Action::Static(Arc::new(self.static_site(st))),
                _ => {
                    let m = "a route needs exactly one of `upstream`, `return` and `static`";
                    return Err(self.error(whole(), m.into()));
                }
            };
            let opts = self.route_opts(i, e)?;
            out.push(Route {
                host: r.host.clone(),
                path_prefix: r.path.clone(),
                action,
                access: route_access(r),
                opts,
            });
        }
        Ok(out)
    }

    /// A route's own upstream options (`route_opts`): only on a route with `upstream`.
    fn route_opts(
        &self,
        i: usize,
        e: &Spanned<RouteEntry>,
    ) -> Result<Option<Arc<RouteOpts>>, Error> {
        RouteOpts::of(e.get_ref()).map_err(|(key, m)| {
            let key = format!("route[{i}].{key}");
            self.error(
                At::Value {
                    key,
                    span: e.span(),
                },
                m,
            )
        })
    }

    fn proxy_action(
        &self,
        i: usize,
        wanted: &Spanned<String>,
        cache: Option<&Spanned<CacheEntry>>,
        groups: &Table<GroupId, UpstreamGroup>,
    ) -> Result<Action, Error> {
        let name = wanted.get_ref();
        if let Some(c) = cache {
            if let Err(m) = c.get_ref().check() {
                let key = format!("route[{i}].cache");
                return Err(self.error(
                    At::Value {
                        key,
                        span: c.span(),
                    },
                    m,
                ));
            }
        }
        let cache = cache.map(|c| Arc::new(c.get_ref().clone()));
        match groups.position(|g| g.name == *name) {
            Some(group) => Ok(Action::Proxy { group, cache }),
            None => {
                let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
                let defined = if names.is_empty() {
                    "none is defined".to_string()
                } else {
                    format!("defined: {}", names.join(", "))
                };
                let key = format!("route[{i}].upstream");
                let m = format!("no upstream group named `{name}` ({defined})");
                let span = wanted.span();
                Err(self.error(At::Value { key, span }, m))
            }
        }
    }

    fn return_action(&self, i: usize, e: &Spanned<ReturnEntry>) -> Result<Action, Error> {
        let r = e.get_ref();
        ReturnAction::new(
            r.status,
            r.location.as_deref(),
            r.body.as_deref(),
            r.content_type.as_deref(),
        )
        .map(Action::Return)
        .map_err(|m| {
            let key = format!("route[{i}].return");
            self.error(
                At::Value {
                    key,
                    span: e.span(),
                },
                m,
            )
        })
    }

    /// A static root, relative to the config file's folder (the working directory for the
    /// command line), made absolute. Whether it exists is checked later, as a warning
    /// (`config::warnings`): it may be created after the start.
    fn static_site(&self, e: &Spanned<StaticEntry>) -> StaticSite {
        let s = e.get_ref();
        let base = self.base_dir();
        StaticSite {
            root: absolute(&base.join(&s.root)),
            index: s.index.clone(),
        }
    }
}

/// A route's `allow`, `deny` and `limit` (each checked as it was read).
fn route_access(r: &super::schema::RouteEntry) -> Option<Arc<super::client_limits::Access>> {
    if r.allow.is_none() && r.deny.is_none() && r.limit.is_none() {
        return None;
    }
    Some(Arc::new(super::client_limits::Access {
        deny: r.deny.clone().unwrap_or_default(),
        allow: r.allow.clone().unwrap_or_default(),
        limit: r.limit.as_ref().map(|l| l.limit()),
    }))
}

/// Route `r` matches what route `j` (`earlier`) does: one line naming both.
fn duplicate_route(
    r: &super::schema::RouteEntry,
    j: usize,
    earlier: &Spanned<super::schema::RouteEntry>,
) -> String {
    let e = earlier.get_ref();
    format!(
        "a route for host {} and path `{}` is already defined: route[{j}] (host {}, path `{}`) \
         matches the same requests",
        r.host.as_deref().unwrap_or("(any)"),
        r.path,
        e.host.as_deref().unwrap_or("(any)"),
        e.path
    )
}

/// `p` made absolute against the working directory (unchanged if that is unknown).
fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(p),
        Err(_) => p.to_path_buf(),
    }
}
