//! What the router tells routes apart by, with no part of the config: the config's check
//! refuses a route with the key of an earlier one ([`match_key`]), and the router builds its
//! tables from the same forms.

use crate::host::strip_port;
use shared::http::target::route_path;

/// What the router tells routes apart by: the host as it is looked up (lower case, no
/// trailing dot; a wildcard keeps its `*`) and the prefix's match form ([`normal_prefix`]).
/// A route with the key of an earlier one is never chosen.
pub fn match_key(host: Option<&str>, prefix: &str) -> (Option<Vec<u8>>, Vec<u8>) {
    let host = host.map(|h| match h.strip_prefix('*') {
        Some(suffix) => [&b"*"[..], &normalize_host(suffix.as_bytes())].concat(),
        None => normalize_host(h.as_bytes()),
    });
    (host, normal_prefix(prefix, &mut Vec::new()))
}

/// A configured prefix in the form request paths are matched in: `/%61pi//` is `/api/`,
/// `/%40x/` is `/@x/`. One that `route_path` refuses, or with a `?` (paths have no query),
/// matches no request: its match form starts with a NUL, which no matched path holds
/// (`%00` is refused). Kept as written, a `?` would now meet a decoded `%3F`.
pub(crate) fn normal_prefix(prefix: &str, scratch: &mut Vec<u8>) -> Vec<u8> {
    let raw = prefix.as_bytes();
    match route_path(raw, scratch) {
        Ok(p) if !raw.contains(&b'?') => p.path.to_vec(),
        _ => [&b"\0"[..], raw].concat(),
    }
}

/// A host as it is looked up: lower case, without a port or a trailing dot.
pub(crate) fn normalize_host(host: &[u8]) -> Vec<u8> {
    strip_port(host).to_ascii_lowercase()
}
