//! Request targets (RFC 9112 3.2): the absolute-form a client sends to a proxy, or a URL a
//! user gives the loader, split into its authority and the origin-form sent to a server; and
//! the normalised path a router matches ([`normalize_path`]).

use super::head::UNRESERVED;
use super::CodecError;
use std::borrow::Cow;

/// Split an absolute-form target (`scheme "://" authority path-abempty ["?" query]`) into
/// its authority and its origin-form (path and query, `/` when the path is empty). `None`
/// when `target` has no `://`. A fragment is not removed: request targets have none (the
/// codec rejects them), and URL callers cut it first.
pub fn split_absolute(target: &str) -> Option<(&str, Cow<'_, str>)> {
    let rest = &target[target.find("://")? + 3..];
    Some(match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], Cow::Borrowed(&rest[i..])),
        // "http://host?q": the path is empty, so "/" and the query (RFC 9112 3.2.1, 3.3).
        // Rare enough (absolute-form is for proxies) that allocating here is fine.
        Some(i) => (&rest[..i], Cow::Owned(format!("/{}", &rest[i..]))),
        None => (rest, Cow::Borrowed("/")),
    })
}

/// The path and query of a request target, borrowed from it: an origin-form target as it
/// is, an absolute-form one after its authority (empty when its path is empty: the root,
/// which [`origin_form`] writes `/`). `None` for a target that names no path (`*`). The one
/// reading of a target's origin-form: routing, the cache key and static files all take it.
pub fn origin_bytes(target: &[u8]) -> Option<&[u8]> {
    if target.starts_with(b"/") {
        return Some(target);
    }
    let at = target.windows(3).position(|w| w == b"://")? + 3;
    let rest = &target[at..];
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    Some(&rest[end..])
}

/// The origin-form of a request target, for routing and for the upstream request line:
/// origin-form and `*` as they are, absolute-form reduced ([`origin_bytes`], with `/` for an
/// empty path).
pub fn origin_form(target: &str) -> Cow<'_, str> {
    match origin_bytes(target.as_bytes()) {
        Some(path) if path.first() == Some(&b'/') => {
            let from = target.len() - path.len();
            Cow::Borrowed(&target[from..])
        }
        // "http://host?q": the path is empty, so "/" and the query (RFC 9112 3.2.1, 3.3).
        // Rare enough (absolute-form is for proxies) that allocating here is fine.
        Some(path) if !path.is_empty() => {
            let from = target.len() - path.len();
            Cow::Owned(format!("/{}", &target[from..]))
        }
        Some(_) => Cow::Borrowed("/"),
        None => Cow::Borrowed(target),
    }
}

/// Why a request path has no normal form. Each is a 400: nginx answers 400 to all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A `%` not followed by two hex digits.
    #[error("malformed percent-encoding in the path")]
    MalformedEscape,
    /// `%00`: no file or route name holds a NUL, and C-string back ends would cut there.
    #[error("encoded NUL in the path")]
    EncodedNul,
    /// More `..` segments than there are segments above them (`/../x`).
    #[error("the path climbs above the root")]
    AboveRoot,
}

impl From<PathError> for CodecError {
    fn from(_: PathError) -> CodecError {
        CodecError::InvalidTarget
    }
}

/// The path of an origin-form target, normalised as origins normalise it before they look a
/// path up (RFC 3986 6.2.2, nginx's `merge_slashes on`), for routing: without the query;
/// percent-encoded unreserved characters decoded (`%61` is `a`, `%2e` is `.`) and the hex of
/// the other escapes upper-cased (`%2f` and `%2F` are one path; they stay encoded, so an
/// encoded slash never becomes a separator); then dot segments removed (RFC 3986 5.2.4, so
/// `%2e%2e` counts) and empty segments merged (`//a` is `/a`; a trailing slash stays).
/// A target that is not a path (`*`) is returned as it is.
///
/// Fast path, the common case: a path with no `%`, no empty segment (`//`) and no `.` or
/// `..` segment is already normal and is returned borrowed from `target`, after one pass
/// over it and nothing written. Otherwise the normal form is written into `scratch`
/// (cleared first; it never grows longer than the path, so a reused buffer stops
/// allocating once it has held the longest one) and borrowed from there.
pub fn normalize_path<'a>(
    target: &'a [u8],
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], PathError> {
    if target.first() != Some(&b'/') {
        return Ok(target);
    }
    let mut segment = 1;
    for (i, &b) in target.iter().enumerate().skip(1) {
        match b {
            b'/' if !is_dot_or_empty(&target[segment..i]) => segment = i + 1,
            b'?' => return finish_fast(target, segment, i, scratch),
            b'/' | b'%' => {
                let end = query_start(target, i);
                return normalize_into(&target[..end], scratch);
            }
            _ => {}
        }
    }
    finish_fast(target, segment, target.len(), scratch)
}

/// The fast scan reached the path's `end` with the last segment starting at `segment`: a
/// dot segment there still needs the full treatment (an empty one is a trailing slash).
fn finish_fast<'a>(
    target: &'a [u8],
    segment: usize,
    end: usize,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], PathError> {
    let path = &target[..end];
    if matches!(&path[segment..], b"." | b"..") {
        return normalize_into(path, scratch);
    }
    Ok(path)
}

fn is_dot_or_empty(segment: &[u8]) -> bool {
    matches!(segment, b"" | b"." | b"..")
}

/// Where the query starts (the first `?` from `from` on), or the target's end.
fn query_start(target: &[u8], from: usize) -> usize {
    target[from..]
        .iter()
        .position(|&b| b == b'?')
        .map_or(target.len(), |i| from + i)
}

/// The slow path of [`normalize_path`]: `path` (query already cut) segment by segment into
/// `out`, each decoded, then kept, dropped (`.`, empty) or popping its parent (`..`).
#[cold]
fn normalize_into<'a>(path: &[u8], out: &'a mut Vec<u8>) -> Result<&'a [u8], PathError> {
    out.clear();
    let mut segments = path[1..].split(|&b| b == b'/').peekable();
    while let Some(raw) = segments.next() {
        let start = out.len();
        out.push(b'/');
        decode_unreserved(raw, out)?;
        match &out[start + 1..] {
            b"" | b"." => out.truncate(start),
            b".." => {
                out.truncate(start);
                let parent = out.iter().rposition(|&b| b == b'/');
                out.truncate(parent.ok_or(PathError::AboveRoot)?);
            }
            _ => continue,
        }
        // A dropped last segment leaves its slash: `/a/.` and `/a/b/..` are `/a/`.
        if segments.peek().is_none() {
            out.push(b'/');
        }
    }
    Ok(out)
}

/// Append `raw` (one segment) to `out`: escapes of unreserved characters decoded, every
/// other escape kept with its hex upper-cased.
fn decode_unreserved(raw: &[u8], out: &mut Vec<u8>) -> Result<(), PathError> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'%' {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        let hex = |at: usize| raw.get(at).and_then(|&h| (h as char).to_digit(16));
        let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) else {
            return Err(PathError::MalformedEscape);
        };
        let byte = (hi << 4 | lo) as u8;
        if byte == 0 {
            return Err(PathError::EncodedNul);
        }
        if UNRESERVED[byte as usize] {
            out.push(byte);
        } else {
            out.extend_from_slice(&[b'%', HEX[hi as usize], HEX[lo as usize]]);
        }
        i += 3;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_form_of_targets() {
        assert_eq!(origin_form("/a?b"), "/a?b");
        assert_eq!(origin_form("*"), "*");
        assert_eq!(origin_form("http://h:80/p?q"), "/p?q");
        assert_eq!(origin_form("http://h"), "/");
        assert_eq!(origin_form("http://h?q"), "/?q");
        assert_eq!(origin_form("http://h:8080?a=1/2"), "/?a=1/2");
        assert_eq!(origin_form("h:80"), "h:80");
        // The bytes every reader of a target's origin-form takes it from.
        let o = |t: &'static str| origin_bytes(t.as_bytes());
        assert_eq!(o("/a?b"), Some(&b"/a?b"[..]));
        assert_eq!(o("http://h:80/p?q"), Some(&b"/p?q"[..]));
        assert_eq!(o("http://h?q"), Some(&b"?q"[..]));
        assert_eq!(o("http://h"), Some(&b""[..]));
        assert_eq!((o("*"), o("h:80")), (None, None));
    }

    /// Issue 22, item 5: every spelling an origin would normalise to the same path is that
    /// path to the router, and what cannot be normalised is refused.
    #[test]
    fn paths_normalise_as_origins_read_them() {
        use PathError::*;
        let table: &[(&str, Result<&str, PathError>)] = &[
            // Already normal (the fast path).
            ("/", Ok("/")),
            ("/admin/", Ok("/admin/")),
            ("/a/b.c/..d/.e/", Ok("/a/b.c/..d/.e/")),
            ("/a?b", Ok("/a")),
            ("/a/?q=/../%2e//x", Ok("/a/")),
            ("/?", Ok("/")),
            ("*", Ok("*")),
            // Unreserved characters decoded, in either case of hex.
            ("/%61dmin/", Ok("/admin/")),
            ("/%61%64%6D%69%6e/", Ok("/admin/")),
            ("/%41%5a%30%2D%2e%5F%7e", Ok("/AZ0-._~")),
            // Other escapes kept, hex upper-cased: an encoded slash is not a separator.
            ("/a%2fb", Ok("/a%2Fb")),
            ("/a%2Fb", Ok("/a%2Fb")),
            ("/%c3%a9t%c3%A9", Ok("/%C3%A9t%C3%A9")),
            ("/a%20b%3f?x", Ok("/a%20b%3F")),
            ("/%25", Ok("/%25")),
            ("/%252e%252e/", Ok("/%252e%252e/")),
            // Slashes merged; a trailing slash stays.
            ("//admin/", Ok("/admin/")),
            ("///a//b///", Ok("/a/b/")),
            ("//", Ok("/")),
            // Dot segments removed (RFC 3986 5.2.4), decoded ones too.
            ("/./admin/", Ok("/admin/")),
            ("/x/../admin/", Ok("/admin/")),
            ("/x/%2e%2e/admin/", Ok("/admin/")),
            ("/x/.%2E/admin/", Ok("/admin/")),
            ("/%2e/admin/", Ok("/admin/")),
            ("/a/b/..", Ok("/a/")),
            ("/a/.", Ok("/a/")),
            ("/a/./", Ok("/a/")),
            ("/.", Ok("/")),
            ("/..a/b../...", Ok("/..a/b../...")),
            ("/a/b/../../c//./d/", Ok("/c/d/")),
            ("/a/..?x", Ok("/")),
            // Refused.
            ("/..", Err(AboveRoot)),
            ("/../x", Err(AboveRoot)),
            ("/a/../../x", Err(AboveRoot)),
            ("/%2e%2e/x", Err(AboveRoot)),
            ("//../x", Err(AboveRoot)),
            ("/%00", Err(EncodedNul)),
            ("/a%00b", Err(EncodedNul)),
            ("/%", Err(MalformedEscape)),
            ("/%4", Err(MalformedEscape)),
            ("/%zz", Err(MalformedEscape)),
            ("/%%32%65", Err(MalformedEscape)),
        ];
        assert!(table.len() >= 15);
        let mut scratch = Vec::new();
        for &(target, want) in table {
            let got = normalize_path(target.as_bytes(), &mut scratch);
            let got = got.map(|p| String::from_utf8_lossy(p).into_owned());
            assert_eq!(got.as_deref().map_err(|e| *e), want, "{target}");
        }
    }

    /// The common case borrows the target itself; only the rest write into the scratch
    /// buffer, which then stops growing.
    #[test]
    fn normal_paths_are_borrowed_and_scratch_is_reused() {
        let mut scratch = Vec::new();
        for target in ["/", "/api/v2/users?id=7", "/a.b/c..d/"] {
            let t = target.as_bytes();
            let got = normalize_path(t, &mut scratch).unwrap();
            assert_eq!(got.as_ptr(), t.as_ptr(), "{target} borrowed");
        }
        assert_eq!(scratch.capacity(), 0, "nothing written for normal paths");
        let long = "/%61".repeat(100);
        normalize_path(long.as_bytes(), &mut scratch).unwrap();
        let cap = scratch.capacity();
        for target in ["//x", "/./y/", &long] {
            normalize_path(target.as_bytes(), &mut scratch).unwrap();
        }
        assert_eq!(scratch.capacity(), cap, "reused, not grown");
    }

    #[test]
    fn absolute_form_splits_at_the_path_or_query() {
        let split = |t| split_absolute(t).map(|(a, p)| (a, p.into_owned()));
        assert_eq!(split("http://h:80/p?q"), Some(("h:80", "/p?q".into())));
        assert_eq!(split("http://[::1]:81"), Some(("[::1]:81", "/".into())));
        assert_eq!(split("http://h?a=/"), Some(("h", "/?a=/".into())));
        assert_eq!(split("/p"), None);
    }
}
