//! The command line: quick mode (`--listen` and `--upstream`, no file), file mode
//! (`--config FILE`, with flags overriding the file where given), and `--check-config FILE`.
//!
//! Both modes produce the same two values, a file-layer [`FileConfig`] (quick mode builds one
//! group, `default`, with one route, `/`) and the [`Overrides`] the flags given make, and hand
//! them to `config::resolve`. Every check that can be done on a single value is done by clap's
//! value parsers, so a bad value is clap's one-line error naming the flag; what needs the whole
//! command line (a missing `--upstream`, a host name that does not resolve) is a [`CliError`].

pub use crate::config::Error as CliError;

use crate::config::schema::{
    self, parse_listen, split_upstream, FileConfig, GroupEntry, GroupTlsEntry, RouteEntry,
    ServerEntry, StaticEntry,
};
use crate::config::{
    resolve, AccessLogConfig, Balance, Config, Edit, HeaderSlot, LogFormat, Overrides, ProxyLimits,
    TimeoutSlot, Timeouts, DEFAULT_BACKLOG, DEFAULT_FAIL_TIMEOUT, DEFAULT_KEEPALIVE,
    DEFAULT_KEEPALIVE_REQUESTS, DEFAULT_KEEPALIVE_TIMEOUT, DEFAULT_MAX_FAILS,
};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use shared::runtime::RuntimeArgs;
use shared::units::{format_duration, parse_duration, parse_size};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

const ABOUT: &str = "An io_uring, thread-per-core HTTP/1.1 reverse proxy.";

const AFTER_HELP: &str = "\
Quick mode:  proxy --listen 127.0.0.1:8080 --upstream 127.0.0.1:9001 --upstream 127.0.0.1:9002
Files:       proxy --listen 127.0.0.1:8080 --static ./www
File mode:   proxy --config proxy.toml   (flags given as well override the file)
Check:       proxy --check-config proxy.toml
Reload:      kill -HUP PID   (the file is read again; flags given at start still apply)
Takeover:    proxy --config proxy.toml --takeover-socket /run/proxy.sock             (the running one)
             proxy --config proxy.toml --takeover-socket /run/proxy.sock --takeover  (the new binary)
Durations: 500ms, 3s, 2m (a bare number is seconds). Sizes: 512, 32KiB, 1MiB, 1GiB.
Every key of the file is explained in proxy.example.toml.";

/// Command-line flags. Defaults shown by `--help` come from `config.rs`.
#[derive(Debug, Parser)]
#[command(name = "proxy", version, about = ABOUT, after_help = AFTER_HELP,
          // The shared flag's help has no default to show; say it here.
          mut_arg("no_pin", |a| a.help("Do not pin workers to cores: --pin off [default: --pin auto]")),
          mut_arg("no_multishot", |a| a.help("Read connections (clients from their second request, pooled plain upstreams) with a receive submitted per read, not one multishot receive each into the worker's buffer ring [default: multishot where the driver is io_uring with its fast flags]")))]
pub struct Args {
    /// Address to accept clients on, IP:PORT or a port (repeatable) [default: none]
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub listen: Vec<SocketAddr>,

    /// Upstream server, IP:PORT, [IPv6]:PORT or HOST:PORT resolved at start (repeatable) [default: none]
    #[arg(long, value_name = "ADDR", value_parser = upstream_syntax, conflicts_with_all = ["config", "check_config"])]
    pub upstream: Vec<String>,

    /// Serve the files of this directory (quick mode without upstreams; no directory listings) [default: none]
    #[arg(long = "static", value_name = "DIR", conflicts_with_all = ["upstream", "config", "check_config"])]
    pub static_dir: Option<PathBuf>,

    /// Read the configuration from a TOML file; flags given as well override it [default: none]
    #[arg(long, value_name = "FILE", conflicts_with = "check_config")]
    pub config: Option<PathBuf>,

    /// Check a configuration file and exit: 0 if valid and a start could open what it names (listeners, admin address, access log, TLS files), else 2 and the error (a file error with its file, line and key) [default: none]
    #[arg(long, value_name = "FILE")]
    pub check_config: Option<PathBuf>,

    /// Serve HTTPS on every listener with this PEM certificate chain (needs --tls-key) [default: none]
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert: PKCS#8, RSA (PKCS#1) or EC (SEC1) [default: none]
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Listen on this Unix socket for a new proxy taking over the listening sockets (then drain and exit); with --check-config, its directory is checked [default: none]
    #[arg(long, value_name = "PATH")]
    pub takeover_socket: Option<PathBuf>,

    /// Take the listening sockets over from the proxy at --takeover-socket (no connection refused), which then drains and exits [default: bind them]
    #[arg(long, requires = "takeover_socket")]
    pub takeover: bool,

    /// Print the completion script for SHELL (bash, zsh, fish, elvish, powershell) and exit [default: none]
    #[arg(long, value_name = "SHELL", exclusive = true)]
    pub completions: Option<clap_complete::Shell>,

    #[command(flatten)]
    pub runtime: RuntimeArgs,

    /// Relay large plain response bodies through the relay buffer, never with splice(2) from socket to socket [default: splice Content-Length bodies of 16 KiB and more]
    #[arg(long)]
    pub no_splice: bool,

    /// How connections are spread over the workers: kernel (its hash of addresses and ports) or cpu (to the worker pinned to the CPU that handled the connection's first packet: for network cards that spread flows over the cores; connections arriving on one core all go to one worker) [default: kernel]
    #[arg(long, value_enum, value_name = "HOW")]
    pub steer: Option<crate::config::Steer>,

    /// Every listener's connections start with a PROXY protocol header, v1 or v2 (nginx `listen ... proxy_protocol`, HAProxy `accept-proxy`); one without a valid header is closed [default: off]
    #[arg(long)]
    pub proxy_protocol: bool,

    /// Load balancing across the upstream servers
    #[arg(long, value_enum, value_name = "ALGORITHM", default_value_t = Balance::RoundRobin,
          conflicts_with_all = ["config", "check_config"])]
    pub balance: Balance,

    /// Upstream connect timeout
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(Timeouts::default().connect))]
    pub connect_timeout: Dur,

    /// Upstream: longest wait between two reads of a response (nginx's proxy_read_timeout); 504 if no response head arrived
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(Timeouts::default().read))]
    pub read_timeout: Dur,

    /// Upstream: longest stall of one write of a request
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(Timeouts::default().upstream_send))]
    pub upstream_send_timeout: Dur,

    /// Client: the whole request head must arrive within this (408 otherwise)
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(Timeouts::default().header))]
    pub header_timeout: Dur,

    /// Client: longest wait between two reads of a request body
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(Timeouts::default().body))]
    pub body_timeout: Dur,

    /// Client: least average rate of a request body once the body timeout has passed (408 and the upstream connection closed below it; "0": off)
    #[arg(long, value_name = "RATE", value_parser = body_rate, default_value_t = Rate(Timeouts::default().body_min_rate))]
    pub body_min_rate: Rate,

    /// Client: longest stall of one write of a response (a client that never reads is dropped)
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(Timeouts::default().send))]
    pub send_timeout: Dur,

    /// Client: idle keep-alive connections are closed after this
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(Timeouts::default().idle))]
    pub idle_timeout: Dur,

    /// On SIGINT/SIGTERM/SIGQUIT, in-flight requests get this long to finish
    #[arg(long, value_name = "DURATION", value_parser = any_duration, default_value_t = Dur(Timeouts::default().shutdown))]
    pub shutdown_timeout: Dur,

    /// Request body limit, 413 beyond it (a size of 1 or more, or "unlimited"; 0 is refused, as it is nginx's "no limit") [default: unlimited]
    #[arg(long, value_name = "SIZE", value_parser = max_body)]
    pub max_body: Option<MaxBody>,

    /// Client connections per worker; past it, new ones wait in the backlog
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), default_value_t = ProxyLimits::default().max_connections as u64)]
    pub max_connections: u64,

    /// listen(2) backlog of every listener
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), default_value_t = DEFAULT_BACKLOG)]
    pub backlog: u32,

    /// Idle keep-alive connections kept per worker and upstream server at rest; a burst's
    /// surplus is closed after a second idle (0: no reuse)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEEPALIVE, conflicts_with_all = ["config", "check_config"])]
    pub keepalive: usize,

    /// Idle pooled upstream connections are closed after this
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(DEFAULT_KEEPALIVE_TIMEOUT),
          conflicts_with_all = ["config", "check_config"])]
    pub keepalive_timeout: Dur,

    /// Requests per upstream connection before it is retired
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), default_value_t = DEFAULT_KEEPALIVE_REQUESTS,
          conflicts_with_all = ["config", "check_config"])]
    pub keepalive_requests: u64,

    /// Requests in flight on each upstream server at once, from the whole proxy; beyond it
    /// requests wait for one to finish, within the connect timeout (0: no limit)
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with_all = ["config", "check_config"])]
    pub max_conns: u32,

    /// Failures within --fail-timeout before a server is skipped (0: never skipped)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_FAILS, conflicts_with_all = ["config", "check_config"])]
    pub max_fails: u32,

    /// How long a failed server is skipped, and the window in which failures count
    #[arg(long, value_name = "DURATION", value_parser = positive_duration, default_value_t = Dur(DEFAULT_FAIL_TIMEOUT),
          conflicts_with_all = ["config", "check_config"])]
    pub fail_timeout: Dur,

    /// Send the upstream server's address as Host [default: the client's Host is kept]
    #[arg(long)]
    pub no_preserve_host: bool,

    /// Do not append the client's address to X-Forwarded-For [default: appended]
    #[arg(long)]
    pub no_x_forwarded_for: bool,

    /// Do not set X-Real-IP to the client's address [default: set]
    #[arg(long)]
    pub no_x_real_ip: bool,

    /// Do not set X-Forwarded-Proto [default: set]
    #[arg(long)]
    pub no_x_forwarded_proto: bool,

    /// A response cache of SIZE per worker in front of the --upstream servers (ttl 10m for
    /// responses without their own freshness) [default: no cache]
    #[arg(long, value_name = "SIZE", value_parser = cache_size, requires = "upstream",
          conflicts_with_all = ["config", "check_config"])]
    pub cache: Option<u64>,

    /// Serve /metrics (Prometheus), /status (JSON) and /healthz on ADDR, never on the public
    /// listeners [default: off; the file's `[admin] addr`]
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub admin: Option<SocketAddr>,

    /// Write an access log to PATH (each worker buffers its lines; SIGUSR1 reopens the file)
    /// [default: off; the file's `access_log`]
    #[arg(long, value_name = "PATH")]
    pub access_log: Option<PathBuf>,

    /// The access log's format
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Combined, requires = "access_log")]
    pub access_log_format: LogFormat,

    /// Verify the --upstream servers' certificates against the PEM CA certificates in FILE;
    /// servers without a scheme are then https:// [default: https:// servers checked against
    /// the system's store]
    #[arg(
        long,
        value_name = "FILE",
        requires = "upstream",
        conflicts_with_all = ["upstream_insecure", "config", "check_config"]
    )]
    pub upstream_ca: Option<PathBuf>,

    /// Do not verify the --upstream servers' certificates (a lab's self-signed origin; warned
    /// about at start); servers without a scheme are then https:// [default: verified]
    #[arg(long, requires = "upstream", conflicts_with_all = ["config", "check_config"])]
    pub upstream_insecure: bool,

    /// Active health checks on the --upstream servers: GET PATH every 2s (timeout 1s), out
    /// after 3 failed in a row, back after 2 passed; 2xx and 3xx pass [default: no active checks]
    #[arg(long, value_name = "PATH", value_parser = health_path, requires = "upstream",
          conflicts_with_all = ["config", "check_config"])]
    pub health_check: Option<String>,

    /// With --cache: send every cached body from memory, none with sendfile(2) from the
    /// worker's memfd [default: bodies of 4 KiB and more with sendfile]
    #[arg(long, requires = "cache")]
    pub cache_no_sendfile: bool,
}

/// A duration that prints the way it is written (`5s`, `500ms`), for `--help` defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

/// `--body-min-rate`: bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(pub u64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::config::format_rate(self.0))
    }
}

fn body_rate(s: &str) -> Result<Rate, String> {
    crate::config::parse_rate(s).map(Rate)
}

/// `--max-body`: a size or unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxBody(pub Option<u64>);

fn positive_duration(s: &str) -> Result<Dur, String> {
    match parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be greater than zero".into()),
        Ok(d) => Ok(Dur(d)),
        Err(e) => Err(e.hint.into()),
    }
}

fn health_path(s: &str) -> Result<String, String> {
    if s.starts_with('/') && s.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(s.to_string())
    } else {
        Err("expected a request path starting with `/` (no spaces or control characters)".into())
    }
}

fn any_duration(s: &str) -> Result<Dur, String> {
    parse_duration(s).map(Dur).map_err(|e| e.hint.into())
}

fn max_body(s: &str) -> Result<MaxBody, String> {
    if s.eq_ignore_ascii_case("unlimited") {
        return Ok(MaxBody(None));
    }
    match parse_size(s) {
        Ok(0) => Err(schema::MAX_BODY_ZERO.into()),
        Ok(n) => Ok(MaxBody(Some(n))),
        Err(e) => Err(format!("{}, or \"unlimited\"", e.hint)),
    }
}

fn cache_size(s: &str) -> Result<u64, String> {
    match parse_size(s) {
        Ok(0) => Err("a cache needs a size above 0".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.hint.to_string()),
    }
}

fn upstream_syntax(s: &str) -> Result<String, String> {
    split_upstream(s).map(|_| s.to_string())
}

/// The flags (clap ids) that describe the upstream servers or what is sent to them: a usage
/// error beside `--static`, which has none (rather than silently ignored).
const UPSTREAM_ONLY: [&str; 19] = [
    "balance",
    "connect_timeout",
    "read_timeout",
    "upstream_send_timeout",
    "keepalive",
    "keepalive_timeout",
    "keepalive_requests",
    "max_conns",
    "max_fails",
    "fail_timeout",
    "no_preserve_host",
    "no_x_forwarded_for",
    "no_x_real_ip",
    "no_x_forwarded_proto",
    "cache",
    "upstream_ca",
    "upstream_insecure",
    "health_check",
    "no_splice",
];

/// Parsed arguments, with clap's record of which values were given (for file overrides).
#[derive(Debug)]
pub struct Cli {
    pub args: Args,
    matches: ArgMatches,
}

impl Cli {
    /// Parse argv (`argv[0]` first). `--help`, `--version` and bad flags are clap errors:
    /// hand them to `shared::config::exit_cli_error`.
    pub fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let matches = Args::command().try_get_matches_from(args)?;
        let args = Args::from_arg_matches(&matches)?;
        Ok(Cli { args, matches })
    }

    /// The file given to `--check-config`, if that is what was asked.
    pub fn check_file(&self) -> Option<&std::path::Path> {
        self.args.check_config.as_deref()
    }

    fn given(&self, id: &str) -> bool {
        self.matches.value_source(id) == Some(ValueSource::CommandLine)
    }

    /// The file given to `--config` or `--check-config`; `None` in quick mode.
    fn file(&self) -> Option<&Path> {
        let a = &self.args;
        a.config.as_deref().or(a.check_config.as_deref())
    }

    /// The validated configuration this command line asks for.
    pub fn config(&self) -> Result<Config, CliError> {
        resolve(&self.file_config()?, &self.overrides())
    }

    /// What a reload reads again: the file with this command line's overrides, or nothing in
    /// quick mode.
    pub fn reload_source(&self) -> crate::reload::Source {
        match &self.args.config {
            Some(path) => crate::reload::Source::File {
                path: path.clone(),
                overrides: self.overrides(),
            },
            None => crate::reload::Source::CommandLine,
        }
    }

    /// The file-layer value: the file's, or quick mode's built from the flags.
    pub fn file_config(&self) -> Result<FileConfig, CliError> {
        match self.file() {
            Some(path) => Ok(schema::load(path)?),
            None => self.quick_mode(),
        }
    }

    fn quick_mode(&self) -> Result<FileConfig, CliError> {
        let a = &self.args;
        if a.listen.is_empty() && a.upstream.is_empty() && a.static_dir.is_none() {
            return Err(CliError::Usage(
                "nothing to do: give --listen ADDR and --upstream ADDR (or --static DIR), \
                 or --config FILE (see --help)"
                    .into(),
            ));
        }
        if a.listen.is_empty() {
            return Err(CliError::Usage("no --listen address given".into()));
        }
        if let Some(dir) = &a.static_dir {
            // clap's `requires = "upstream"` does not refuse these beside --static, and most
            // have a default, so "given" is asked of clap's record.
            if let Some(id) = UPSTREAM_ONLY.iter().find(|id| self.given(id)) {
                let cmd = Args::command();
                let arg = cmd.get_arguments().find(|arg| arg.get_id() == *id);
                let flag = arg.and_then(|arg| arg.get_long()).unwrap_or(id);
                return Err(CliError::Usage(format!(
                    "--{flag} needs --upstream servers; --static serves files itself"
                )));
            }
            // One route, `/`, served from the directory (relative to the working directory).
            let site = StaticEntry {
                root: dir.clone(),
                index: schema::default_index(),
            };
            return Ok(FileConfig {
                route: vec![unspanned(RouteEntry::new(None, Some(site)))],
                ..FileConfig::default()
            });
        }
        if a.upstream.is_empty() {
            return Err(CliError::Usage("no --upstream server given".into()));
        }
        let servers = a.upstream.iter().map(|name| ServerEntry {
            max_fails: a.max_fails,
            fail_timeout: a.fail_timeout.0,
            max_conns: a.max_conns,
            ..ServerEntry::new(name.clone())
        });
        let group = GroupEntry {
            servers: servers.map(unspanned).collect(),
            balance: a.balance,
            hash_key: None,
            resolve: None,
            keepalive: a.keepalive,
            keepalive_timeout: a.keepalive_timeout.0,
            keepalive_requests: NonZeroU64::new(a.keepalive_requests).unwrap_or(NonZeroU64::MIN),
            keepalive_check: crate::config::DEFAULT_KEEPALIVE_CHECK,
            health: a.health_check.clone().map(|path| {
                unspanned(crate::config::health::HealthCheck {
                    path,
                    ..Default::default()
                })
            }),
            // What a file's `tls = { ca, insecure }` says.
            tls: (a.upstream_ca.is_some() || a.upstream_insecure).then(|| GroupTlsEntry {
                ca: a.upstream_ca.clone(),
                sni: None,
                insecure: a.upstream_insecure,
            }),
            // A file's key only.
            proxy_protocol: None,
        };
        // `--cache`: the one route quick mode has, `/`, with a cache.
        let route = a.cache.map(|size| {
            let mut r = RouteEntry::new(Some("default".into()), None);
            let mut c = crate::config::cache::CacheEntry::quick(size);
            c.sendfile = !a.cache_no_sendfile;
            r.cache = Some(unspanned(c));
            unspanned(r)
        });
        // `--listen` comes in through the overrides, as in file mode.
        Ok(FileConfig {
            upstream: BTreeMap::from([("default".to_string(), unspanned(group))]),
            route: route.into_iter().collect(),
            ..FileConfig::default()
        })
    }

    /// What the flags given change in the file's values. In quick mode the file-layer value
    /// holds the defaults, which are the flags' defaults too, so "given" is the rule in both.
    pub fn overrides(&self) -> Overrides {
        let a = &self.args;
        let mut edits = Vec::new();
        if self.given("backlog") {
            edits.push(Edit::Backlog(a.backlog));
        }
        if let Some(n) = a.runtime.workers {
            edits.push(Edit::Workers(usize::from(n)));
        }
        if self.given("driver") {
            edits.push(Edit::Driver(a.runtime.driver));
        }
        if a.runtime.no_pin {
            edits.push(Edit::NoPin);
        }
        if self.given("pin") {
            edits.push(Edit::Pin(a.runtime.pin));
        }
        if a.runtime.no_multishot {
            edits.push(Edit::NoMultishot);
        }
        if a.no_splice {
            edits.push(Edit::NoSplice);
        }
        if let Some(s) = a.steer {
            edits.push(Edit::Steer(s));
        }
        if a.proxy_protocol {
            edits.push(Edit::ProxyProtocol);
        }
        let timeouts: [(&str, Dur, TimeoutSlot); 8] = [
            ("connect_timeout", a.connect_timeout, |t| &mut t.connect),
            ("read_timeout", a.read_timeout, |t| &mut t.read),
            ("upstream_send_timeout", a.upstream_send_timeout, |t| {
                &mut t.upstream_send
            }),
            ("header_timeout", a.header_timeout, |t| &mut t.header),
            ("body_timeout", a.body_timeout, |t| &mut t.body),
            ("send_timeout", a.send_timeout, |t| &mut t.send),
            ("idle_timeout", a.idle_timeout, |t| &mut t.idle),
            ("shutdown_timeout", a.shutdown_timeout, |t| &mut t.shutdown),
        ];
        for (id, value, slot) in timeouts {
            if self.given(id) {
                edits.push(Edit::Timeout(slot, value.0));
            }
        }
        if self.given("body_min_rate") {
            edits.push(Edit::BodyMinRate(a.body_min_rate.0));
        }
        if let Some(MaxBody(limit)) = a.max_body {
            edits.push(Edit::MaxBody(limit));
        }
        if self.given("max_connections") {
            let n = usize::try_from(a.max_connections).unwrap_or(usize::MAX);
            edits.push(Edit::MaxConnections(n));
        }
        let headers: [(bool, HeaderSlot); 4] = [
            (a.no_preserve_host, |h| &mut h.preserve_host),
            (a.no_x_forwarded_for, |h| &mut h.x_forwarded_for),
            (a.no_x_real_ip, |h| &mut h.x_real_ip),
            (a.no_x_forwarded_proto, |h| &mut h.x_forwarded_proto),
        ];
        edits.extend(
            headers
                .into_iter()
                .filter(|h| h.0)
                .map(|h| Edit::HeaderOff(h.1)),
        );
        if let Some(addr) = a.admin {
            edits.push(Edit::Admin(addr));
        }
        let tls = a.tls_cert.clone().zip(a.tls_key.clone());
        Overrides {
            listen: a.listen.clone(),
            tls: tls.map(|(cert, key)| shared::tls::server::CertFiles { cert, key }),
            edits,
            access_log: a.access_log.clone().map(|path| AccessLogConfig {
                path,
                format: a.access_log_format,
            }),
        }
    }
}

/// A value quick mode made: it has no place in a file.
fn unspanned<T>(value: T) -> Spanned<T> {
    Spanned::new(0..0, value)
}

/// Parse argv (`argv[0]` first) into a validated [`Config`] without exiting: the in-process
/// way for tests. Errors are the one line the binary would print.
pub fn config_from_args<I, T>(args: I) -> Result<Config, String>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::parse_from(args).map_err(|e| shared::config::one_line_error(&e))?;
    cli.config().map_err(|e| e.to_string())
}

/// What `main` does with a parsed command line that is not a run: report `--check-config`'s
/// verdict as `nginx -t` does, and return the exit code. `None`: not a check, go on.
pub fn check_config_report(cli: &Cli, result: &Result<Config, CliError>) -> Option<i32> {
    let file = cli.check_file()?.display().to_string();
    // What a start would open, opened too: a config that passes starts (`preflight`).
    let socket = cli.args.takeover_socket.as_deref();
    let opened = result.as_ref().map_err(|e| e.to_string()).and_then(|cfg| {
        crate::preflight::check(cfg, socket)
            .map(|()| cfg)
            .map_err(|e| e.to_string())
    });
    Some(match opened {
        Ok(cfg) => {
            print_warnings(cfg);
            shared::log!("proxy: configuration file {file} test is successful");
            0
        }
        Err(e) => {
            shared::log!("proxy: {e}");
            shared::log!("proxy: configuration file {file} test failed");
            2
        }
    })
}

/// The configuration's warnings on stderr, as nginx prints `[warn]` lines.
pub fn print_warnings(cfg: &Config) {
    for w in crate::config::warnings(cfg) {
        shared::log!("proxy: warning: {}", shared::config::escape_controls(&w));
    }
}

#[cfg(test)]
mod tests;
