//! The URLs a run loads ([`Target`]): parsed and resolved once, before any worker starts, from
//! the command line or a `--urls` file.

use crate::LoadError;
use shared::http::target::split_absolute;
use std::net::SocketAddr;

/// A parsed `http://` or `https://` URL, resolved once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// As given.
    pub url: String,
    /// `https://`: the connection speaks TLS, SNI and certificate name from `host`.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, never empty (`/` by default); the fragment is dropped.
    pub path: String,
    /// The address connected to: the first of `addrs` until [`crate::plan::settle_addresses`] picks the
    /// first that accepts.
    pub addr: SocketAddr,
    /// Every address of `host`, in the order to try them (`shared::net::resolve`, the address
    /// rule the proxy uses too: IPv4 first, then IPv6). Never empty.
    pub addrs: Vec<SocketAddr>,
}

impl Target {
    /// Parse and resolve `http[s]://host[:port][/path][?query]` (ports 80 and 443 by default).
    pub fn parse(url: &str) -> Result<Target, LoadError> {
        let bad = |reason| LoadError::InvalidUrl {
            url: url.to_string(),
            reason,
        };
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        let tls = lower.starts_with("https://");
        if !tls && !lower.starts_with("http://") {
            return Err(bad("expected http[s]://host[:port]/path"));
        }
        let default_port = if tls { 443 } else { 80 };
        let without_fragment = url.split('#').next().unwrap_or("");
        let Some((authority, path)) = split_absolute(without_fragment) else {
            return Err(bad("expected http[s]://host[:port]/path"));
        };
        let path = percent_encode_non_ascii(&path);
        if authority.contains('@') {
            return Err(bad("user info in URLs is not supported"));
        }
        if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(bad("the path contains spaces or control characters"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6
                .find(']')
                .ok_or_else(|| bad("unclosed '[' in the host"))?;
            let port = match &v6[end + 1..] {
                "" => default_port,
                p => p
                    .strip_prefix(':')
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| bad("invalid port"))?,
            };
            (v6[..end].to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().map_err(|_| bad("invalid port"))?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if port == 0 {
            return Err(bad("port 0"));
        }
        let addrs = resolve(&host, port)?;
        Ok(Target {
            url: url.to_string(),
            tls,
            host,
            port,
            path,
            addr: addrs[0],
            addrs,
        })
    }

    /// The Host header value: `host`, or `host:port` when the port is not the scheme's.
    pub fn host_header(&self) -> String {
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.default_port() {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }
}

impl Target {
    /// 443 for `https://`, 80 for `http://`.
    pub fn default_port(&self) -> u16 {
        if self.tls {
            443
        } else {
            80
        }
    }
}

/// A path typed with raw UTF-8 (`/café`) as it goes on the wire: every byte above 0x7f
/// percent-encoded (RFC 3986 2.1, as curl and browsers send it); ASCII is left as given.
fn percent_encode_non_ascii(path: &str) -> String {
    if path.is_ascii() {
        return path.to_string();
    }
    let mut out = String::with_capacity(path.len() * 2);
    for b in path.bytes() {
        if b.is_ascii() {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `shared::net::resolve` with the loader's error.
fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, LoadError> {
    use shared::net::ResolveError;
    shared::net::resolve(host, port).map_err(|e| {
        let source = match e {
            ResolveError::Lookup { source, .. } => source,
            ResolveError::NoAddress { .. } => {
                std::io::Error::new(std::io::ErrorKind::NotFound, "no address")
            }
        };
        LoadError::Resolve {
            host: host.to_string(),
            source,
        }
    })
}

/// Read a `--urls` file: one URL a line; blank lines and `#` comments skipped. A bad URL is
/// reported with the file and the line it is on.
pub fn read_url_file(path: &std::path::Path) -> Result<Vec<Target>, LoadError> {
    let text = crate::input::read_capped_text(path, crate::input::MAX_INPUT).map_err(|source| {
        LoadError::File {
            flag: "--urls",
            path: path.display().to_string(),
            source,
        }
    })?;
    let mut targets = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let t = Target::parse(line)
            .map_err(|e| LoadError::Invalid(format!("--urls {}:{}: {e}", path.display(), i + 1)))?;
        targets.push(t);
    }
    Ok(targets)
}
