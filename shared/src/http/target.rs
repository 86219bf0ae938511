//! Request targets (RFC 9112 3.2): the absolute-form a client sends to a proxy, or a URL a
//! user gives the loader, split into its authority and the origin-form sent to a server; the
//! path a router matches ([`route_path`]), the target forwarded when the path has dot segments
//! ([`resolve_dot_segments`]), and the URL normal form of a path ([`normalize_path`]).

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

/// Why a request path cannot be routed (or has no normal form). Each is a 400.
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
    /// A control character decoded (`%01`-`%1F`, `%7F`): no route or file name holds one,
    /// and origins that trim them (Java's `String.trim`) would read another path.
    #[error("encoded control character in the path")]
    EncodedControl,
    /// `\` or `%5C`: RFC 3986 has no such path character, and the WHATWG URL parser
    /// (browsers, Node's `new URL`) reads it as `/`, a separator the router would not see.
    #[error("backslash in the path")]
    Backslash,
    /// A dot segment that an encoded slash (`%2F`) makes or hides: one next to it
    /// (`/a%2F..%2Fb`), or a `..` over a segment holding one (`/a%2Fb/../c`). An origin that
    /// decodes first and one that resolves dot segments first read two different paths.
    #[error("dot segment next to or over an encoded slash")]
    EncodedSlashAndDots,
    /// A dot segment with path parameters (`..;`, `.;x`): a Servlet origin strips the
    /// parameters first and resolves it (Tomcat's `/x/..;/admin` is `/admin`), another
    /// origin reads a plain name.
    #[error("dot segment with path parameters")]
    ParameterDots,
}

impl From<PathError> for CodecError {
    fn from(_: PathError) -> CodecError {
        CodecError::InvalidTarget
    }
}

/// The URL normal form of an origin-form target's path (RFC 3986 6.2.2, nginx's
/// `merge_slashes on`): still a URL path, so what a route that strips its prefix forwards and
/// what a static directory redirect names; routing matches [`route_path`]. Without the query;
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

/// What routing matches a request on ([`route_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutePath<'a> {
    /// The path, every escape decoded once, dot segments removed and slashes merged.
    pub path: &'a [u8],
    /// The raw path has `.` or `..` segments (any spelling), or starts with `//`: an origin
    /// reading it raw would see another path than `path` (or a host), so it goes upstream as
    /// [`resolve_dot_segments`] writes it.
    pub dot_segments: bool,
}

/// The path routing matches for an origin-form target, as an origin that decodes the path
/// reads it: without the query; every percent-escape decoded once (`%61` is `a`, `%40` is `@`,
/// `%2F` a separator, `%252e` the three bytes `%2e`); then dot segments removed (RFC 3986
/// 5.2.4) and empty segments merged (`//a` is `/a`; a trailing slash stays). Not a URL any
/// more: it is matched, never forwarded. A target that is not a path (`*`) is returned as it
/// is. Refused ([`PathError`]): a `\\` (raw or `%5C`), a malformed escape, `%00` or another
/// control character, a `..` above the root, and a dot segment next to an encoded slash or a
/// `..` over a segment holding one (where the raw path and the decoded one differ).
///
/// Fast path, the common case: a path with no `%`, no `\\`, no empty segment (`//`) and no `.`
/// or `..` segment is already in this form and is returned borrowed from `target`, after one
/// pass over it and nothing written. Otherwise the form is written into `scratch` (cleared
/// first; it never grows longer than the path, so a reused buffer stops allocating once it
/// has held the longest one) and borrowed from there.
pub fn route_path<'a>(
    target: &'a [u8],
    scratch: &'a mut Vec<u8>,
) -> Result<RoutePath<'a>, PathError> {
    let clean = |path| RoutePath {
        path,
        dot_segments: false,
    };
    if target.first() != Some(&b'/') {
        return Ok(clean(target));
    }
    let mut segment = 1;
    for (i, &b) in target.iter().enumerate().skip(1) {
        match b {
            b'/' if !is_dot_or_empty(&target[segment..i]) => segment = i + 1,
            b'?' => return route_fast(target, segment, i, scratch),
            b'/' | b'%' | b'\\' | b';' => {
                let end = query_start(target, i);
                return decode_into(&target[..end], scratch);
            }
            _ => {}
        }
    }
    route_fast(target, segment, target.len(), scratch)
}

/// [`finish_fast`] for [`route_path`].
fn route_fast<'a>(
    target: &'a [u8],
    segment: usize,
    end: usize,
    scratch: &'a mut Vec<u8>,
) -> Result<RoutePath<'a>, PathError> {
    let path = &target[..end];
    if matches!(&path[segment..], b"." | b"..") {
        return decode_into(path, scratch);
    }
    Ok(RoutePath {
        path,
        dot_segments: false,
    })
}

/// The slow path of [`route_path`]: `path` (query already cut) raw segment by raw segment
/// into `out`, each decoded (a decoded `/` splits it, merged with its neighbours), then kept,
/// dropped (`.`, empty) or popping its parent (`..`).
#[cold]
fn decode_into<'a>(path: &[u8], out: &'a mut Vec<u8>) -> Result<RoutePath<'a>, PathError> {
    out.clear();
    // A leading `//` goes upstream merged too: a WHATWG parser (Node's `new URL(path,
    // base)`) reads `//x/admin` as host `x`, path `/admin`, not the `/x/admin` routed here.
    let mut dots = path.starts_with(b"//");
    // The raw segments kept so far, as `resolve_dot_segments` keeps them (every non-empty,
    // non-dot one): how many, and for the first 64 whether each held `%2F`. A `..` over one
    // that did pops a raw segment upstream but only its last piece here.
    let (mut depth, mut held_slash) = (0usize, 0u64);
    // A kept segment deeper than 64 decoded a `/`: a `..` that deep is then refused (the
    // bits above hold the first 64 only).
    let mut deep_slash = false;
    let mut segments = path[1..].split(|&b| b == b'/').peekable();
    while let Some(mut raw) = segments.next() {
        // Path parameters (`;jsessionid=...`) are not matched: a Servlet origin strips them
        // from each segment before it reads the path (a raw `;` only; `%3B` is a name byte).
        if let Some(at) = raw.iter().position(|&b| b == b';') {
            if dots_in(&raw[..at]) > 0 {
                return Err(PathError::ParameterDots);
            }
            raw = &raw[..at];
        }
        // A segment that ended in `%2F` left its slash, which this one's separator merges.
        if out.last() == Some(&b'/') {
            out.pop();
        }
        let start = out.len();
        out.push(b'/');
        let slash = decode_all(raw, out)?;
        if slash
            && out[start + 1..]
                .split(|&b| b == b'/')
                .any(|piece| matches!(piece, b"." | b".."))
        {
            return Err(PathError::EncodedSlashAndDots);
        }
        match &out[start + 1..] {
            b"" if !slash => out.truncate(start),
            b"." => {
                dots = true;
                out.truncate(start);
            }
            b".." => {
                dots = true;
                out.truncate(start);
                depth = depth.checked_sub(1).ok_or(PathError::AboveRoot)?;
                let held = if depth >= 64 {
                    deep_slash
                } else {
                    held_slash >> depth & 1 == 1
                };
                if held {
                    return Err(PathError::EncodedSlashAndDots);
                }
                let parent = out.iter().rposition(|&b| b == b'/');
                out.truncate(parent.ok_or(PathError::AboveRoot)?);
            }
            kept => {
                if depth < 64 {
                    held_slash = held_slash & !(1 << depth) | (slash as u64) << depth;
                } else {
                    deep_slash |= slash;
                }
                depth += 1;
                // Only slashes (`%2F`): nothing here, but a raw segment upstream.
                if !kept.is_empty() {
                    continue;
                }
                out.truncate(start);
            }
        }
        // A dropped last segment leaves its slash: `/a/.` and `/a/b/..` are `/a/`.
        if segments.peek().is_none() {
            out.push(b'/');
        }
    }
    Ok(RoutePath {
        path: out,
        dot_segments: dots,
    })
}

/// Append `raw` (one raw segment) to `out`, every escape decoded; a decoded `/` is written
/// only after another byte than `/` (slashes merged). Whether it decoded a `/`.
fn decode_all(raw: &[u8], out: &mut Vec<u8>) -> Result<bool, PathError> {
    let mut slash = false;
    let mut i = 0;
    while i < raw.len() {
        let b = match raw[i] {
            b'%' => {
                let hex = |at: usize| raw.get(at).and_then(|&h| (h as char).to_digit(16));
                let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) else {
                    return Err(PathError::MalformedEscape);
                };
                i += 3;
                match (hi << 4 | lo) as u8 {
                    0 => return Err(PathError::EncodedNul),
                    b'/' => {
                        slash = true;
                        if out.last() != Some(&b'/') {
                            out.push(b'/');
                        }
                        continue;
                    }
                    b if b < 0x20 || b == 0x7f => return Err(PathError::EncodedControl),
                    b => b,
                }
            }
            b => {
                i += 1;
                b
            }
        };
        if b == b'\\' {
            return Err(PathError::Backslash);
        }
        out.push(b);
    }
    Ok(slash)
}

/// The origin-form `target` as it goes upstream when [`route_path`] found dot segments in
/// it: its raw path with those resolved (RFC 3986 5.2.4 on the segments between raw `/`, a
/// segment counting as a dot segment in any spelling, `%2E` and `%2e` included) and empty
/// segments merged, as routing read it; every other byte as sent, then the query as sent.
/// Written into `out` (cleared first). Only for a target [`route_path`] accepted: one with
/// a `..` above the root has nothing above to climb to and keeps the root.
pub fn resolve_dot_segments<'a>(target: &[u8], out: &'a mut Vec<u8>) -> &'a [u8] {
    out.clear();
    let end = query_start(target, 0);
    let path = target.get(1..end).unwrap_or_default();
    let mut segments = path.split(|&b| b == b'/').peekable();
    while let Some(raw) = segments.next() {
        let start = out.len();
        out.push(b'/');
        match dots_in(raw) {
            0 if !raw.is_empty() => {
                out.extend_from_slice(raw);
                continue;
            }
            2 => {
                out.truncate(start);
                let parent = out.iter().rposition(|&b| b == b'/').unwrap_or(0);
                out.truncate(parent);
            }
            _ => out.truncate(start),
        }
        if segments.peek().is_none() {
            out.push(b'/');
        }
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(&target[end..]);
    out
}

/// 1 for a `.` segment, 2 for `..`, in any spelling (`%2e`, `.%2E`); 0 for any other.
fn dots_in(raw: &[u8]) -> u8 {
    let mut n = 0;
    let mut rest = raw;
    while !rest.is_empty() {
        rest = match rest {
            [b'.', r @ ..] => r,
            [b'%', b'2', e, r @ ..] if e | 0x20 == b'e' => r,
            _ => return 0,
        };
        n += 1;
    }
    if n > 2 {
        0
    } else {
        n
    }
}

/// What is left of `normal` (a path's [`normalize_path`] form, which keeps reserved escapes
/// such as `%2F` and `%40` encoded) once the bytes that make the first `matched` bytes of its
/// [`route_path`] form are taken off: a route's prefix, matched decoded, removed from the
/// form that is forwarded. Each escape is one byte there, a `/` after a `/` (`/%2F`) none,
/// and path parameters (`;...` up to the segment's end) none.
pub fn after_route_prefix(normal: &[u8], matched: usize) -> &[u8] {
    let (mut i, mut taken, mut last) = (0, 0, 0u8);
    while taken < matched && i < normal.len() {
        if normal[i] == b';' {
            i += normal[i..]
                .iter()
                .position(|&b| b == b'/')
                .unwrap_or(normal.len() - i);
            continue;
        }
        let b = match &normal[i..] {
            [b'%', h, l, ..] if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => {
                i += 3;
                let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                hex(*h) << 4 | hex(*l)
            }
            _ => {
                i += 1;
                normal[i - 1]
            }
        };
        if !(b == b'/' && last == b'/') {
            taken += 1;
        }
        last = b;
    }
    &normal[i..]
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

    /// What routing matches: every escape decoded once (reserved ones too, so `%2F` is a
    /// separator and `%40` is `@`), then dot segments removed and slashes merged; whether the
    /// raw path had dot segments; and what cannot be matched safely refused.
    #[test]
    fn route_paths_decode_every_escape_once() {
        use PathError::*;
        // (target, Ok((the path matched, dot segments in the raw path)) or the refusal)
        type Row = (&'static str, Result<(&'static str, bool), PathError>);
        let table: &[Row] = &[
            ("/", Ok(("/", false))),
            ("/api/v2/users?id=7", Ok(("/api/v2/users", false))),
            ("/a.b/..c/.d/", Ok(("/a.b/..c/.d/", false))),
            ("/a?b\\c", Ok(("/a", false))),
            ("*", Ok(("*", false))),
            ("/%61dmin/", Ok(("/admin/", false))),
            ("/admin%2Fsecret", Ok(("/admin/secret", false))),
            ("/admin%2fsecret", Ok(("/admin/secret", false))),
            ("/%40internal/", Ok(("/@internal/", false))),
            ("/a/%2F/b", Ok(("/a/b", false))),
            ("/a%2F%2F/b", Ok(("/a/b", false))),
            ("/%2Fa", Ok(("/a", false))),
            ("/a%2F", Ok(("/a/", false))),
            ("/a%20b%3f", Ok(("/a b?", false))),
            ("/%25", Ok(("/%", false))),
            ("/%252e%252e/", Ok(("/%2e%2e/", false))),
            ("/%c3%a9", Ok(("/\u{e9}", false))),
            // A leading `//` is rewritten upstream (a host to a WHATWG parser).
            ("//admin//", Ok(("/admin/", true))),
            ("/admin//x", Ok(("/admin/x", false))),
            ("/x/../admin/", Ok(("/admin/", true))),
            ("/x/%2e%2E/admin/", Ok(("/admin/", true))),
            ("/a/.", Ok(("/a/", true))),
            ("/a//../b", Ok(("/b", true))),
            ("/.", Ok(("/", true))),
            ("/a/..?x", Ok(("/", true))),
            ("/admin\\secret", Err(Backslash)),
            ("/a/b\\", Err(Backslash)),
            ("/%2e/a\\b", Err(Backslash)),
            ("/admin%5Csecret", Err(Backslash)),
            ("/admin%5c", Err(Backslash)),
            ("/a%0a", Err(EncodedControl)),
            ("/a%1F", Err(EncodedControl)),
            ("/a%7f", Err(EncodedControl)),
            ("/a%00", Err(EncodedNul)),
            ("/%zz", Err(MalformedEscape)),
            ("/..", Err(AboveRoot)),
            ("/a%2F..%2Fb", Err(EncodedSlashAndDots)),
            ("/a/..%2Fb", Err(EncodedSlashAndDots)),
            ("/a%2Fb/../c", Err(EncodedSlashAndDots)),
            ("/a/%2F/../b", Err(EncodedSlashAndDots)),
            ("/a%2F.", Err(EncodedSlashAndDots)),
            // Apart, they read alike decoded first or resolved first.
            ("/./a%2Fb", Ok(("/a/b", true))),
            ("/x/../a%2Fb/", Ok(("/a/b/", true))),
            ("/a%2Fb/c/../d", Ok(("/a/b/d", true))),
            ("/a/%2F/./b", Ok(("/a/b", true))),
            ("/a/%2F", Ok(("/a/", false))),
            // Path parameters are matched without their `;...` (Servlet origins strip them
            // before they read the path): a fence on `/admin/` holds `/admin;x/secret`.
            ("/admin;/secret", Ok(("/admin/secret", false))),
            (
                "/admin;jsessionid=AB12/secret",
                Ok(("/admin/secret", false)),
            ),
            ("/%61dmin;a=b/x", Ok(("/admin/x", false))),
            ("/a%3Bb/c", Ok(("/a;b/c", false))),
            ("/x;y", Ok(("/x", false))),
            // A dot segment with parameters reads as a dot segment to one origin and not to
            // another (Tomcat's `..;/`): refused.
            ("/x/..;/admin/secret", Err(ParameterDots)),
            ("/x/.;a/y", Err(ParameterDots)),
            ("/x/%2e%2e;/y", Err(ParameterDots)),
        ];
        let mut scratch = Vec::new();
        for &(target, want) in table {
            let got = route_path(target.as_bytes(), &mut scratch)
                .map(|r| (String::from_utf8_lossy(r.path).into_owned(), r.dot_segments));
            let want = want.map(|(p, d)| (p.to_string(), d));
            assert_eq!(got, want, "{target}");
        }
    }

    /// A `..` may pop any segment, however deep: only one over a segment that decoded a `/`
    /// is refused (past 64 segments, once any of them did). It was refused past the 64th.
    #[test]
    fn a_dot_dot_deep_in_a_long_path_resolves() {
        let deep: String = (0..70).map(|i| format!("/s{i}")).collect();
        let mut scratch = Vec::new();
        let target = format!("{deep}/../z");
        let want: String = (0..69).map(|i| format!("/s{i}")).collect::<String>() + "/z";
        let got = route_path(target.as_bytes(), &mut scratch).map(|r| r.path.to_vec());
        assert_eq!(got, Ok(want.into_bytes()));
        let slashed = format!("{deep}/a%2Fb/../z");
        let got = route_path(slashed.as_bytes(), &mut scratch).map(|r| r.path.len());
        assert_eq!(got, Err(PathError::EncodedSlashAndDots));
    }

    /// The common case is borrowed, written nowhere.
    #[test]
    fn clean_route_paths_are_borrowed() {
        let mut scratch = Vec::new();
        for target in ["/", "/api/v2/users?id=7", "/a.b/c..d/", "/q?x=%2e%2e/\\"] {
            let t = target.as_bytes();
            let got = route_path(t, &mut scratch).unwrap();
            assert_eq!(got.path.as_ptr(), t.as_ptr(), "{target} borrowed");
            assert!(!got.dot_segments);
        }
        assert_eq!(scratch.capacity(), 0, "nothing written for clean paths");
    }

    /// A target with dot segments goes upstream with them resolved on its raw segments and
    /// its empty segments merged, as routing read it; every other byte as sent.
    #[test]
    fn dot_segments_are_resolved_on_the_raw_path() {
        let table = [
            ("/admin/%2e%2e/x", "/x"),
            ("/admin/../x", "/x"),
            ("/admin/.%2E/x?q=/../a", "/x?q=/../a"),
            ("/a/%2E./b/", "/b/"),
            ("/admin/..", "/"),
            ("/.", "/"),
            ("/a/./", "/a/"),
            ("/a/b/..", "/a/"),
            ("/public/./x//y/../z", "/public/x/z"),
            ("/a//../b", "/b"),
            ("/%7e/./b%20c%3F", "/%7e/b%20c%3F"),
            ("/a/.../..%2e/./b", "/a/.../..%2e/b"),
            ("/a/..?", "/?"),
            ("/x/../a%2Fb/", "/a%2Fb/"),
            ("/a%2Fb/c/../d", "/a%2Fb/d"),
            ("/a/%2F/./b", "/a/%2F/b"),
        ];
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        for (target, want) in table {
            let routed = route_path(target.as_bytes(), &mut scratch).unwrap();
            assert!(routed.dot_segments, "{target}");
            let routed = routed.path.to_vec();
            let got = resolve_dot_segments(target.as_bytes(), &mut out);
            assert_eq!(String::from_utf8_lossy(got), want, "{target}");
            // The origin then reads the path the route was chosen on.
            let again = route_path(got, &mut scratch).unwrap();
            assert_eq!(
                (again.path, again.dot_segments),
                (&routed[..], false),
                "{target}"
            );
        }
    }

    /// A route prefix matched in the decoded form, taken off the URL normal form.
    #[test]
    fn route_prefixes_come_off_the_normal_form() {
        let table = [
            ("/api/", "/api/x", "x"),
            ("/api", "/apiary", "ary"),
            ("/api/", "/api%2Fx", "x"),
            ("/api/", "/api%2F%2Fx", "%2Fx"),
            ("/@in/", "/%40in/x%2Fy", "x%2Fy"),
            ("/", "/x", "x"),
            ("/a/", "/a/", ""),
            // Path parameters are not in the routed form: not counted, dropped with it.
            ("/api/", "/api;x=1/users", "users"),
            ("/api/", "/api/users;v=2", "users;v=2"),
        ];
        let (mut scratch, mut normal) = (Vec::new(), Vec::new());
        for (prefix, target, want) in table {
            let matched = route_path(prefix.as_bytes(), &mut scratch)
                .unwrap()
                .path
                .len();
            let n = normalize_path(target.as_bytes(), &mut normal).unwrap();
            let got = after_route_prefix(n, matched);
            assert_eq!(String::from_utf8_lossy(got), want, "{prefix} {target}");
        }
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
