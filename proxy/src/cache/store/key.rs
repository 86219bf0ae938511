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

/// RFC 9111 4.4: the target (path and query) a `Location` or `Content-Location` value names
/// when it has the same origin as `key` ("only ... if the host part is the same"): a path, or
/// an absolute URI of the same scheme and authority. `None`: another origin, or not a URI the
/// cache keys.
pub fn same_origin_target<'a>(key: Key<'_>, uri: &'a [u8]) -> Option<&'a [u8]> {
    let uri = shared::http::framing::trim_ows(uri);
    if uri.starts_with(b"/") && !uri.starts_with(b"//") {
        return Some(uri);
    }
    let scheme = uri.iter().position(|&b| b == b':')?;
    let https = match &uri[..scheme] {
        s if s.eq_ignore_ascii_case(b"https") => true,
        s if s.eq_ignore_ascii_case(b"http") => false,
        _ => return None,
    };
    let rest = uri[scheme + 1..].strip_prefix(b"//")?;
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let other = Key::new(https, &rest[..end], b"");
    let same = other.https == key.https && other.host.eq_ignore_ascii_case(key.host);
    match &rest[end..] {
        _ if !same => None,
        b"" => Some(b"/"),
        t if t.starts_with(b"/") => Some(t),
        _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_origin_targets() {
        let key = Key::new(false, b"Cache.test", b"/a");
        let cases: [(&str, Option<&str>); 9] = [
            ("/b?x=1", Some("/b?x=1")),
            ("http://cache.test/c", Some("/c")),
            ("HTTP://CACHE.TEST:80/c", Some("/c")),
            ("http://cache.test", Some("/")),
            ("https://cache.test/c", None),
            ("http://other.test/c", None),
            ("http://cache.test:8080/c", None),
            ("//cache.test/c", None),
            ("c", None),
        ];
        for (uri, want) in cases {
            let got = same_origin_target(key, uri.as_bytes());
            assert_eq!(got, want.map(str::as_bytes), "{uri}");
        }
    }
}
