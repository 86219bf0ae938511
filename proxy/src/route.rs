//! Request routing: Host and path prefix to a route (and so to its action).
//!
//! Rules, decided once at start:
//! - A route with a host matches that host only: case-insensitively, ignoring a port
//!   (`Example.COM:8080` matches `example.com`) and a trailing dot (`example.com.`).
//! - A wildcard host `*.example.com` matches every subdomain of example.com at any depth
//!   (`a.example.com`, `a.b.example.com`), not `example.com` itself (nginx's `*.` names).
//! - Order: the exact host's routes, then the wildcards that match from the most specific
//!   (longest suffix: `*.b.example.com` before `*.example.com`), then the host-less routes;
//!   within each set the longest path prefix wins. A set with no matching prefix falls
//!   through to the next (as a HAProxy rule list falls through to `default_backend`); to
//!   fence a host in, give it a route with the prefix `/`.
//! - Prefixes are plain byte prefixes of the request's decoded path (`/api` matches
//!   `/apiary`; write `/api/` to match a directory), compared case-sensitively, as nginx's
//!   `location` does. The caller decodes the path as an origin that decodes it does
//!   (`shared::http::target::route_path`: every escape decoded once, `%2F` a separator and
//!   `%40` an `@`, dot segments resolved, slashes merged, no query), so no other spelling of a
//!   path gets past its route; the prefixes are decoded the same way here, once.
//! - No match: `None`, and the caller answers 404.
//!
//! Lookups allocate nothing: the tables are built in [`Router::new`], hosts sorted for a
//! binary search that lowers the case as it compares, and only read afterwards.

use crate::config::{Route, RouteId, Table};
use crate::host::strip_port;
use crate::route_key::{normal_prefix, normalize_host};
use std::cmp::Ordering;

/// One path prefix and the route it leads to.
#[derive(Debug, Clone)]
struct Prefix {
    prefix: Box<[u8]>,
    route: RouteId,
}

/// The routes of one host name (or one wildcard suffix), longest prefix first.
#[derive(Debug, Clone)]
struct HostRoutes {
    /// Lower-case, no port, no trailing dot; for a wildcard the suffix with its dot
    /// (`.example.com`).
    host: Box<[u8]>,
    prefixes: Vec<Prefix>,
}

/// Precomputed routing tables.
#[derive(Debug, Clone, Default)]
pub struct Router {
    /// Sorted by host.
    exact: Vec<HostRoutes>,
    /// Sorted by suffix.
    wildcard: Vec<HostRoutes>,
    /// Host-less routes, longest prefix first.
    any_host: Vec<Prefix>,
}

impl Router {
    /// Build the tables. Among routes with the same [`crate::route_key::match_key`] the first one wins: a file's
    /// check refuses such duplicates (`config::resolve`), a config built in code keeps the first.
    pub fn new(routes: &Table<RouteId, Route>) -> Router {
        let mut router = Router::default();
        let mut scratch = Vec::new();
        for (route, r) in routes.enumerate() {
            let p = Prefix {
                prefix: normal_prefix(&r.path_prefix, &mut scratch).into(),
                route,
            };
            let list = match &r.host {
                None => &mut router.any_host,
                Some(h) => match h.strip_prefix('*') {
                    Some(suffix) => {
                        host_list(&mut router.wildcard, normalize_host(suffix.as_bytes()))
                    }
                    None => host_list(&mut router.exact, normalize_host(h.as_bytes())),
                },
            };
            if !list.iter().any(|e| e.prefix == p.prefix) {
                list.push(p);
            }
        }
        for table in [&mut router.exact, &mut router.wildcard] {
            table.sort_by(|a, b| a.host.cmp(&b.host));
            // Stable sort: equal lengths keep file order.
            table.iter_mut().for_each(|h| {
                h.prefixes
                    .sort_by_key(|p| std::cmp::Reverse(p.prefix.len()))
            });
        }
        router
            .any_host
            .sort_by_key(|p| std::cmp::Reverse(p.prefix.len()));
        router
    }

    /// The route for a request, or `None` (404). `host` is the
    /// Host header (or the authority of an absolute-form target) as received; `path` is the
    /// request's decoded path (`route_path` of the origin-form target).
    pub fn route(&self, host: Option<&[u8]>, path: &[u8]) -> Option<RouteId> {
        if let Some(host) = host.map(strip_port).filter(|h| !h.is_empty()) {
            let exact = find(&self.exact, host).and_then(|h| longest_prefix(&h.prefixes, path));
            if exact.is_some() {
                return exact;
            }
            if !self.wildcard.is_empty() {
                // Suffixes from the longest: `.b.example.com`, then `.example.com`, ... A dot
                // in first place would leave an empty label: no match there.
                let dots = host.iter().enumerate().skip(1).filter(|(_, &b)| b == b'.');
                for (i, _) in dots {
                    let found = find(&self.wildcard, &host[i..])
                        .and_then(|h| longest_prefix(&h.prefixes, path));
                    if found.is_some() {
                        return found;
                    }
                }
            }
        }
        longest_prefix(&self.any_host, path)
    }
}

/// The prefix list for `host` in `table`, added if new.
fn host_list(table: &mut Vec<HostRoutes>, host: Vec<u8>) -> &mut Vec<Prefix> {
    let pos = match table.iter().position(|e| *e.host == *host) {
        Some(pos) => pos,
        None => {
            table.push(HostRoutes {
                host: host.into(),
                prefixes: Vec::new(),
            });
            table.len() - 1
        }
    };
    &mut table[pos].prefixes
}

/// Binary search of a sorted table for `host` in any case.
fn find<'t>(table: &'t [HostRoutes], host: &[u8]) -> Option<&'t HostRoutes> {
    table
        .binary_search_by(|e| cmp_lowered(&e.host, host))
        .ok()
        .map(|i| &table[i])
}

/// `lower` (already lower-case) against `other` lowered, byte by byte.
fn cmp_lowered(lower: &[u8], other: &[u8]) -> Ordering {
    lower
        .iter()
        .copied()
        .cmp(other.iter().map(u8::to_ascii_lowercase))
}

fn longest_prefix(prefixes: &[Prefix], path: &[u8]) -> Option<RouteId> {
    prefixes
        .iter()
        .find(|p| path.starts_with(&p.prefix))
        .map(|p| p.route)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A route; the tests number routes so that `group` is also the route's index.
    fn route(host: Option<&str>, prefix: &str, group: usize) -> Route {
        Route {
            host: host.map(str::to_string),
            path_prefix: prefix.to_string(),
            action: crate::config::Action::Proxy {
                group: crate::config::GroupId::new(group),
                cache: None,
            },
            access: None,
            opts: None,
        }
    }

    fn router() -> Router {
        Router::new(&Table::from(vec![
            route(None, "/", 0),
            route(None, "/api/", 1),
            route(None, "/api/v2/", 2),
            route(Some("example.com"), "/", 3),
            route(Some("Static.Example.com"), "/img/", 4),
            route(Some("[::1]"), "/", 5),
        ]))
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
                r.route(host.map(str::as_bytes), path.as_bytes())
                    .map(RouteId::index),
                want,
                "{host:?} {path}"
            );
        }
    }

    #[test]
    fn no_match_is_none() {
        let r = Router::new(&Table::from(vec![
            route(None, "/api/", 0),
            route(Some("example.com"), "/", 1),
        ]));
        assert_eq!(r.route(None, b"/").map(RouteId::index), None);
        assert_eq!(
            r.route(Some(b"other.org"), b"/static").map(RouteId::index),
            None
        );
        assert_eq!(
            r.route(Some(b"example.com"), b"/static")
                .map(RouteId::index),
            Some(1)
        );
        assert_eq!(Router::new(&Table::new()).route(None, b"/"), None);
        // A request target that is not origin-form does not match a `/` prefix.
        assert_eq!(r.route(None, b"*").map(RouteId::index), None);
    }

    /// Issue 22, item 5: the router compares decoded paths, so its prefixes are decoded
    /// too (reserved escapes included: `%2f` is `/`, `%40` is `@`); one that cannot be
    /// matches nothing, not even the decoded path that spells it.
    #[test]
    fn prefixes_are_decoded_like_paths() {
        let r = Router::new(&Table::from(vec![
            route(None, "/", 0),
            route(None, "/%61pi//", 1),
            route(None, "/a%2fb/", 2),
            route(None, "/x?y", 3),
            route(None, "/../z/", 4),
            route(None, "/%40in/", 5),
            route(None, "/b\\c", 6),
        ]));
        assert_eq!(r.route(None, b"/api/v1").map(RouteId::index), Some(1));
        assert_eq!(r.route(None, b"/a/b/c").map(RouteId::index), Some(2));
        assert_eq!(r.route(None, b"/@in/x").map(RouteId::index), Some(5));
        for path in ["/x", "/x?y", "/z/", "/../z/", "/b\\c"] {
            assert_eq!(
                r.route(None, path.as_bytes()).map(RouteId::index),
                Some(0),
                "{path}"
            );
        }
    }

    #[test]
    fn equal_prefixes_keep_file_order() {
        let r = Router::new(&Table::from(vec![
            route(None, "/a", 0),
            route(None, "/a", 1),
        ]));
        assert_eq!(r.route(None, b"/a").map(RouteId::index), Some(0));
    }

    #[test]
    fn wildcards_match_subdomains_most_specific_first() {
        let r = Router::new(&Table::from(vec![
            route(None, "/", 0),
            route(Some("*.example.com"), "/", 1),
            route(Some("*.b.example.com"), "/b/", 2),
            route(Some("example.com"), "/", 3),
            route(Some("x.b.example.com"), "/", 4),
            route(Some("*.example.com"), "/api/", 5),
            route(Some("*.b.example.com"), "/img/", 6),
            route(Some("y.example.com"), "/only/", 7),
        ]));
        let cases: &[(&str, &str, usize)] = &[
            ("example.com", "/", 3),
            ("a.example.com", "/", 1),
            ("A.Example.COM:8080", "/x", 1),
            ("a.example.com.", "/", 1),
            ("a.example.com", "/api/x", 5),
            ("b.example.com", "/b/", 1),
            ("a.b.example.com", "/b/x", 2),
            ("z.a.b.example.com", "/img/1", 6),
            // The exact host wins over every wildcard.
            ("x.b.example.com", "/img/1", 4),
            // The most specific wildcard has no matching prefix: the next one serves.
            ("a.b.example.com", "/", 1),
            ("a.b.example.com", "/api/x", 5),
            // So does an exact host without one.
            ("y.example.com", "/only/x", 7),
            ("y.example.com", "/other", 1),
            // Not subdomains of example.com.
            ("badexample.com", "/", 0),
            (".example.com", "/", 0),
            ("example.com.evil", "/", 0),
            ("com", "/", 0),
        ];
        for &(host, path, want) in cases {
            assert_eq!(
                r.route(Some(host.as_bytes()), path.as_bytes()),
                Some(RouteId::new(want)),
                "{host} {path}"
            );
        }
    }

    #[test]
    fn many_exact_hosts_are_found_by_search() {
        let mut routes: Table<RouteId, Route> = (0..200)
            .map(|i| route(Some(&format!("h{i:03}.example.org")), "/", i))
            .collect();
        routes.push(route(None, "/", 200));
        let r = Router::new(&routes);
        for i in 0..200 {
            let host = format!("H{i:03}.Example.ORG");
            assert_eq!(
                r.route(Some(host.as_bytes()), b"/"),
                Some(RouteId::new(i)),
                "{host}"
            );
        }
        assert_eq!(
            r.route(Some(b"h200.example.org"), b"/").map(RouteId::index),
            Some(200)
        );
    }
}
