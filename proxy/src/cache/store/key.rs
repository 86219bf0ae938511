//! The cache key, borrowed for lookups and owned for what outlives a request (a purge
//! message to the other workers, a fetch).

/// A cache key: everything of the URL the origin is told. GET and HEAD share it.
///
/// The scheme and the port are part of it because the origin sees both
/// (`X-Forwarded-Proto`, `Host` as sent): an origin that redirects plain HTTP to HTTPS, or
/// builds absolute URLs from `Host`, answers each differently, and one answer served for
/// the other is a poisoned cache. Normalised as RFC 3986 6.2.3 allows: the host compared
/// without case, the scheme's default port dropped ([`Key::new`]).
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    /// The client spoke HTTPS.
    pub https: bool,
    /// The authority (host and port) without the scheme's default port; empty without one.
    pub host: &'a [u8],
    /// Path and query, as forwarded.
    pub target: &'a [u8],
}

impl<'a> Key<'a> {
    /// The key of `target` at `authority` (as received: absolute-form or Host) over HTTPS
    /// or not: `Example.com:80` on plain HTTP is the key of `example.com`, `example.com:8080`
    /// stays itself.
    pub fn new(https: bool, authority: &'a [u8], target: &'a [u8]) -> Key<'a> {
        Key {
            https,
            host: without_default_port(authority, if https { 443 } else { 80 }),
            target,
        }
    }
}

/// `authority` without its port when that port is `default` or empty (`host:`).
fn without_default_port(authority: &[u8], default: u16) -> &[u8] {
    // The port follows the last colon, unless that colon is inside an IPv6 literal.
    let Some(colon) = authority.iter().rposition(|&b| b == b':') else {
        return authority;
    };
    if authority[colon..].contains(&b']') {
        return authority;
    }
    let port = &authority[colon + 1..];
    let value = port.iter().try_fold(0u32, |n, &d| {
        (d.is_ascii_digit() && n < 100_000).then(|| n * 10 + u32::from(d - b'0'))
    });
    match value {
        Some(p) if port.is_empty() || p == u32::from(default) => &authority[..colon],
        _ => authority,
    }
}

/// A cache key that outlives the request's buffer (a fetch, a purge sent to other workers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedKey {
    https: bool,
    /// Lower-case host, then the target.
    bytes: Box<[u8]>,
    host_len: usize,
}

impl OwnedKey {
    pub fn new(key: Key<'_>) -> OwnedKey {
        let mut bytes = Vec::with_capacity(key.host.len() + key.target.len());
        bytes.extend(key.host.iter().map(u8::to_ascii_lowercase));
        bytes.extend_from_slice(key.target);
        OwnedKey {
            https: key.https,
            bytes: bytes.into(),
            host_len: key.host.len(),
        }
    }

    pub fn key(&self) -> Key<'_> {
        Key {
            https: self.https,
            host: &self.bytes[..self.host_len],
            target: &self.bytes[self.host_len..],
        }
    }
}
