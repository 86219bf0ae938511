//! Request target -> path under the site root, with nginx's `root` meaning: the whole
//! (decoded) request path is appended to the root, so `/static/a.txt` under root `www` is
//! `www/static/a.txt`.
//!
//! What is refused, never turned into a file name (the kernel's `RESOLVE_BENEATH` checks
//! again at open time, so a rule missed here still cannot leave the root):
//! - a `..` segment, literal or percent-encoded (`%2e%2e`, `.%2E`): 403; nginx resolves
//!   `/a/../b` inside the root, we refuse it outright (no client needs it, and one rule less
//!   to get wrong);
//! - an encoded slash (`%2F`) or backslash (`%5C`, or a literal `\`): 403, so a segment can
//!   never become two after decoding, and Windows-style separators never mean anything;
//! - NUL and other control bytes, encoded or not: 403;
//! - a malformed escape (`%`, `%4`, `%zz`): 400, as nginx does.
//!
//! Decoding happens once: `%252e` is the three characters `%2e`, a file name like any other
//! (nginx does the same), never a dot; it can only name a file inside the root.
//! Empty segments (`//`) and `.` segments are dropped, as nginx's `merge_slashes` does.
//!
//! The route was chosen on the decoded path (`shared::http::target::route_path`): a path that
//! climbs above the root, a `\`, `%00` or another control character and a malformed escape
//! are 400 before any route. This decoder still reads the raw path (it refuses what routing
//! resolves or merges into a separator: `..`, `%2F`) and is never laxer: whatever it resolves
//! is the file the routed path names (the test at the end of this file).

/// Longest path (bytes, after decoding) we look up; longer ones are 404 (no such file can
/// exist: Linux's PATH_MAX is 4096).
pub const MAX_PATH: usize = 4096;

/// Why a target names no file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// A malformed percent-escape, or a target that is not a path: 400.
    BadRequest,
    /// A traversal attempt or a byte no file name here may contain: 403.
    Forbidden,
    /// Too long to be a file: 404.
    TooLong,
}

impl PathError {
    pub fn status(self) -> u16 {
        match self {
            PathError::BadRequest => 400,
            PathError::Forbidden => 403,
            PathError::TooLong => 404,
        }
    }
}

/// A decoded path, relative to the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// The target ended with `/` (a directory is asked for: serve its index).
    pub dir: bool,
}

/// The path and query parts of an origin-form target (`/a/b?x=1` -> `/a/b`, `x=1`).
pub fn split_query(target: &[u8]) -> (&[u8], Option<&[u8]>) {
    match target.iter().position(|&b| b == b'?') {
        Some(i) => (&target[..i], Some(&target[i + 1..])),
        None => (target, None),
    }
}

/// Decode `path` (the path part of the target, starting with `/`) into `out` as a path
/// relative to the root: segments joined by `/`, no leading slash; empty for the root
/// itself. `out` is cleared first and reused (no allocation once it has grown).
pub fn resolve(path: &[u8], out: &mut Vec<u8>) -> Result<Resolved, PathError> {
    out.clear();
    if path.first() != Some(&b'/') {
        return Err(PathError::BadRequest);
    }
    let dir = path.ends_with(b"/");
    for raw in path[1..].split(|&b| b == b'/') {
        let start = out.len();
        decode_segment(raw, out)?;
        let seg = &out[start..];
        match seg {
            b"" | b"." => {
                out.truncate(start);
                continue;
            }
            b".." => return Err(PathError::Forbidden),
            _ => {}
        }
        if out.len() > MAX_PATH {
            return Err(PathError::TooLong);
        }
        out.push(b'/');
    }
    // Drop the separator after the last segment.
    if out.last() == Some(&b'/') {
        out.pop();
    }
    Ok(Resolved { dir })
}

/// Append one decoded segment to `out`.
fn decode_segment(raw: &[u8], out: &mut Vec<u8>) -> Result<(), PathError> {
    let mut i = 0;
    while i < raw.len() {
        let b = match raw[i] {
            b'%' => {
                let hi = raw.get(i + 1).and_then(|&h| hex(h));
                let lo = raw.get(i + 2).and_then(|&l| hex(l));
                let (Some(hi), Some(lo)) = (hi, lo) else {
                    return Err(PathError::BadRequest);
                };
                i += 3;
                hi << 4 | lo
            }
            b => {
                i += 1;
                b
            }
        };
        if b == b'/' || b == b'\\' || b < 0x20 || b == 0x7f {
            return Err(PathError::Forbidden);
        }
        out.push(b);
    }
    Ok(())
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Static routes resolve the raw path with the decoder above, not the router's decoded form
/// (`shared::http::target::route_path`, which resolves `..` where this refuses it, and reads
/// `%2F` as a separator where this refuses it). The two must agree on what a path names
/// (issue 22, item 5): the file is the routed path, less its slashes at both ends.
#[cfg(test)]
mod agreement_with_the_router {
    use super::*;
    use shared::http::target::route_path;

    #[test]
    fn a_file_served_is_the_file_the_routed_path_names() {
        let targets = [
            "/",
            "/a.txt",
            "//a//b",
            "/./a",
            "/a/./b/",
            "/%61.txt",
            "/a%20b",
            "/%7euser/x",
            "/dir/.",
            "/a/../b",
            "/a/%2e%2e/b",
            "/%2e%2e/x",
            "/../x",
            "/%00",
            "/a%00b",
            "/%zz",
            "/%4",
            "/a%2fb",
            "/..%2fx",
            "/%252e%252e/x",
            "/%c3%a9",
            "/a\\b",
            "/a%5cb",
            "/a%0ab",
            "/a%40b/%3f",
            "/.%2e",
        ];
        let (mut scratch, mut raw_rel) = (Vec::new(), Vec::new());
        for target in targets {
            let raw = resolve(target.as_bytes(), &mut raw_rel);
            let Ok(routed) = route_path(target.as_bytes(), &mut scratch) else {
                // What the router refuses never reaches a static route; refused here too.
                assert!(
                    raw.is_err(),
                    "{target}: the router refuses it, static serves it"
                );
                continue;
            };
            if raw.is_ok() {
                let file = routed.path.strip_prefix(b"/").unwrap_or(routed.path);
                let file = file.strip_suffix(b"/").unwrap_or(file);
                assert_eq!(raw_rel, file, "{target}: another file than its route's");
            }
        }
    }
}
