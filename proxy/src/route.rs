//! Request routing: Host and path prefix to an upstream group.
//!
//! Rules, decided once at start:
//! - A route with a host matches that host only: case-insensitively, ignoring a port
//!   (`Example.COM:8080` matches `example.com`) and a trailing dot (`example.com.`).
//! - Routes with a host are tried before host-less ones; within each set the longest path prefix
//!   wins. A request whose host has routes but none of whose prefixes match falls through to the
//!   host-less routes (as a HAProxy rule list falls through to `default_backend`); to fence a host
//!   in, give it a route with the prefix `/`.
//! - Prefixes are plain byte prefixes of the request target (`/api` matches `/apiary`; write
//!   `/api/` to match a directory), compared case-sensitively, as nginx's `location` does.
//! - No match: `None`, and the caller answers 404.
//!
//! Lookups allocate nothing: the tables are built in [`Router::new`] and only read afterwards.

use crate::config::Route;

/// One path prefix and the group it leads to.
#[derive(Debug, Clone)]
struct Prefix {
    prefix: Box<[u8]>,
    group: usize,
}

/// The routes of one host, longest prefix first.
#[derive(Debug, Clone)]
struct HostRoutes {
    /// Lower-case, no port, no trailing dot.
    host: Box<[u8]>,
    prefixes: Vec<Prefix>,
}

/// Precomputed routing tables.
#[derive(Debug, Clone, Default)]
pub struct Router {
    hosts: Vec<HostRoutes>,
    /// Host-less routes, longest prefix first.
    any_host: Vec<Prefix>,
}

impl Router {
    /// Build the tables. Among routes with the same host and prefix the first one wins
    /// (validation rejects such duplicates anyway).
    pub fn new(routes: &[Route]) -> Router {
        let mut router = Router::default();
        for r in routes {
            let p = Prefix {
                prefix: r.path_prefix.as_bytes().into(),
                group: r.group,
            };
            let list = match &r.host {
                None => &mut router.any_host,
                Some(h) => {
                    let host = normalize_host(h.as_bytes());
                    let pos = match router.hosts.iter().position(|e| *e.host == *host) {
                        Some(pos) => pos,
                        None => {
                            router.hosts.push(HostRoutes {
                                host: host.into(),
                                prefixes: Vec::new(),
                            });
                            router.hosts.len() - 1
                        }
                    };
                    &mut router.hosts[pos].prefixes
                }
            };
            if !list.iter().any(|e| e.prefix == p.prefix) {
                list.push(p);
            }
        }
        // Stable sort: equal lengths keep file order.
        router.hosts.iter_mut().for_each(|h| {
            h.prefixes
                .sort_by_key(|p| std::cmp::Reverse(p.prefix.len()))
        });
        router
            .any_host
            .sort_by_key(|p| std::cmp::Reverse(p.prefix.len()));
        router
    }

    /// The group for a request, or `None` (404). `host` is the Host header (or the authority of
    /// an absolute-form target) as received; `path` is the request target.
    pub fn route(&self, host: Option<&[u8]>, path: &[u8]) -> Option<usize> {
        if let Some(host) = host.map(strip_port) {
            let found = self
                .hosts
                .iter()
                .find(|h| h.host.eq_ignore_ascii_case(host))
                .and_then(|h| longest_prefix(&h.prefixes, path));
            if found.is_some() {
                return found;
            }
        }
        longest_prefix(&self.any_host, path)
    }
}

fn longest_prefix(prefixes: &[Prefix], path: &[u8]) -> Option<usize> {
    prefixes
        .iter()
        .find(|p| path.starts_with(&p.prefix))
        .map(|p| p.group)
}

/// `example.com:8080` → `example.com`, `[::1]:80` → `[::1]`, `example.com.` → `example.com`.
fn strip_port(host: &[u8]) -> &[u8] {
    let host = if host.first() == Some(&b'[') {
        match host.iter().position(|&b| b == b']') {
            Some(end) => &host[..=end],
            None => host,
        }
    } else {
        match host.iter().position(|&b| b == b':') {
            Some(colon) => &host[..colon],
            None => host,
        }
    };
    host.strip_suffix(b".").unwrap_or(host)
}

fn normalize_host(host: &[u8]) -> Vec<u8> {
    strip_port(host).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(host: Option<&str>, prefix: &str, group: usize) -> Route {
        Route {
            host: host.map(str::to_string),
            path_prefix: prefix.to_string(),
            group,
        }
    }

    fn router() -> Router {
        Router::new(&[
            route(None, "/", 0),
            route(None, "/api/", 1),
            route(None, "/api/v2/", 2),
            route(Some("example.com"), "/", 3),
            route(Some("Static.Example.com"), "/img/", 4),
            route(Some("[::1]"), "/", 5),
        ])
    }

    #[test]
    fn table() {
        let r = router();
        let cases: &[(Option<&str>, &str, Option<usize>)] = &[
            (None, "/", Some(0)),
            (None, "/index.html", Some(0)),
            (None, "/api/x", Some(1)),
            (None, "/api/v2/x?q=1", Some(2)),
            (None, "/api", Some(0)),
            (Some("other.org"), "/api/v2/", Some(2)),
            (Some("example.com"), "/api/v2/", Some(3)),
            (Some("EXAMPLE.com:8080"), "/anything", Some(3)),
            (Some("example.com."), "/", Some(3)),
            (Some("static.example.com"), "/img/a.png", Some(4)),
            // Host routes without a matching prefix fall through to the host-less ones.
            (Some("static.example.com"), "/api/x", Some(1)),
            (Some("[::1]:8080"), "/api/", Some(5)),
            (Some("[::1]"), "/", Some(5)),
            (Some("example.com.evil"), "/", Some(0)),
            (Some(""), "/", Some(0)),
            (Some(":80"), "/api/", Some(1)),
        ];
        for &(host, path, want) in cases {
            assert_eq!(
                r.route(host.map(str::as_bytes), path.as_bytes()),
                want,
                "{host:?} {path}"
            );
        }
    }

    #[test]
    fn no_match_is_none() {
        let r = Router::new(&[route(None, "/api/", 0), route(Some("example.com"), "/", 1)]);
        assert_eq!(r.route(None, b"/"), None);
        assert_eq!(r.route(Some(b"other.org"), b"/static"), None);
        assert_eq!(r.route(Some(b"example.com"), b"/static"), Some(1));
        assert_eq!(Router::new(&[]).route(None, b"/"), None);
        // A request target that is not origin-form does not match a `/` prefix.
        assert_eq!(r.route(None, b"*"), None);
    }

    #[test]
    fn equal_prefixes_keep_file_order() {
        let r = Router::new(&[route(None, "/a", 0), route(None, "/a", 1)]);
        assert_eq!(r.route(None, b"/a"), Some(0));
    }
}
