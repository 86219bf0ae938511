//! Table tests of the sans-IO core, and of opening beneath a root on a real directory.

use super::decide::{decide, parse_range, Conditions, Method, RangeSpec, Reply, Validators};
use super::meta::{content_type, etag, DEFAULT_TYPE, EXT_MAX, TYPES};
use super::open::{open_beneath, open_root, stat, Kind, OpenError, Resolver};
use super::path::{resolve, split_query, PathError, Resolved, MAX_PATH};
use super::respond::{self, Conn};
use super::StaticQuery;
use bytes::BytesMut;
use shared::http::target::origin_bytes;
use shared::http::Version;
use std::os::fd::AsFd;

#[test]
fn paths_resolve_under_the_root_or_are_refused() {
    use PathError::*;
    let ok = |rel: &str, dir: bool| Ok::<_, PathError>((rel.to_string(), dir));
    type Want = Result<(String, bool), PathError>;
    let cases: &[(&str, Want)] = &[
        ("/", ok("", true)),
        ("/a.txt", ok("a.txt", false)),
        ("/static/a.txt", ok("static/a.txt", false)),
        ("/dir/", ok("dir", true)),
        ("/dir", ok("dir", false)),
        ("//a//b", ok("a/b", false)),
        ("/./a/./b/.", ok("a/b", false)),
        ("/a%20b.txt", ok("a b.txt", false)),
        ("/%41%62", ok("Ab", false)),
        ("/caf%C3%A9", ok("caf\u{e9}", false)),
        ("/%2e", ok("", false)),
        ("/%252e%252e/x", ok("%2e%2e/x", false)),
        ("/%2e%2e%2e", ok("...", false)),
        ("/..a/b..", ok("..a/b..", false)),
        ("/..", Err(Forbidden)),
        ("/../x", Err(Forbidden)),
        ("/a/../b", Err(Forbidden)),
        ("/%2e%2e/x", Err(Forbidden)),
        ("/%2E%2e/x", Err(Forbidden)),
        ("/.%2e/x", Err(Forbidden)),
        ("/a%2fb", Err(Forbidden)),
        ("/a%2Fb", Err(Forbidden)),
        ("/a%5cb", Err(Forbidden)),
        ("/a\\b", Err(Forbidden)),
        ("/a%00b", Err(Forbidden)),
        ("/a%0ab", Err(Forbidden)),
        ("/a%7f", Err(Forbidden)),
        ("/a\tb", Err(Forbidden)),
        ("/a%", Err(BadRequest)),
        ("/a%4", Err(BadRequest)),
        ("/a%zz", Err(BadRequest)),
        ("/a%%32e", Err(BadRequest)),
        ("a.txt", Err(BadRequest)),
        ("", Err(BadRequest)),
    ];
    let mut out = Vec::new();
    for (path, want) in cases {
        let got = resolve(path.as_bytes(), &mut out)
            .map(|Resolved { dir }| (String::from_utf8(out.clone()).unwrap(), dir));
        assert_eq!(&got, want, "{path}");
    }
    let long = format!("/{}", "a".repeat(MAX_PATH + 1));
    assert_eq!(resolve(long.as_bytes(), &mut out), Err(TooLong));
}

#[test]
fn targets_split_into_path_and_query() {
    assert_eq!(split_query(b"/a?b=1"), (&b"/a"[..], Some(&b"b=1"[..])));
    assert_eq!(split_query(b"/a"), (&b"/a"[..], None));
    assert_eq!(origin_bytes(b"/x?y"), Some(&b"/x?y"[..]));
    assert_eq!(origin_bytes(b"http://h:80/p?q"), Some(&b"/p?q"[..]));
    assert_eq!(origin_bytes(b"http://h?q"), Some(&b"?q"[..]));
    assert_eq!(origin_bytes(b"http://h"), Some(&b""[..]));
    assert_eq!(origin_bytes(b"*"), None);
}

#[test]
fn content_types_by_extension() {
    let cases = [
        ("a/index.html", "text/html; charset=utf-8"),
        ("A.HTML", "text/html; charset=utf-8"),
        ("x.css", "text/css; charset=utf-8"),
        ("x.js", "text/javascript; charset=utf-8"),
        ("x.json", "application/json"),
        ("x.png", "image/png"),
        ("x.JPG", "image/jpeg"),
        ("x.svg", "image/svg+xml"),
        ("x.woff2", "font/woff2"),
        ("x.wasm", "application/wasm"),
        ("x.tar.gz", "application/gzip"),
        ("noext", DEFAULT_TYPE),
        ("dir.d/noext", DEFAULT_TYPE),
        ("x.", DEFAULT_TYPE),
        ("x.unknown", DEFAULT_TYPE),
        ("x.averyverylongextension", DEFAULT_TYPE),
        // nginx's mime.types beyond the common web ones.
        ("live/index.m3u8", "application/vnd.apple.mpegurl"),
        ("live/seg1.ts", "video/mp2t"),
        ("x.mov", "video/quicktime"),
        ("x.m4a", "audio/x-m4a"),
        ("x.m4v", "video/x-m4v"),
        ("x.mpeg", "video/mpeg"),
        ("x.MPG", "video/mpeg"),
        ("x.tif", "image/tiff"),
        ("x.tiff", "image/tiff"),
        ("x.xhtml", "application/xhtml+xml"),
        ("x.eot", "application/vnd.ms-fontobject"),
        (
            "x.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
        (
            "x.xlsx",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ),
        (
            "x.pptx",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        ),
        ("x.7z", "application/x-7z-compressed"),
        ("x.rar", "application/x-rar-compressed"),
        ("x.jardiff", "application/x-java-archive-diff"),
        ("x.svgz", "image/svg+xml"),
        ("x.avi", "video/x-msvideo"),
    ];
    for (name, want) in cases {
        assert_eq!(content_type(name.as_bytes()), want, "{name}");
    }
}

#[test]
fn the_type_table_is_sorted_lower_case_and_within_the_longest_extension() {
    for pair in TYPES.windows(2) {
        assert!(pair[0].0 < pair[1].0, "{pair:?}: sorted, no repeats");
    }
    for (ext, _) in TYPES {
        assert!(ext.len() <= EXT_MAX, "{ext}");
        assert_eq!(ext.to_ascii_lowercase(), *ext);
    }
}

#[test]
fn etags_in_nginx_form() {
    assert_eq!(etag(0x5f5e_1000, 1000).as_bytes(), b"\"5f5e1000-3e8\"");
    assert_eq!(etag(0, 0).as_bytes(), b"\"0-0\"");
}

#[test]
fn ranges_against_a_size() {
    use RangeSpec::*;
    let cases: &[(&str, u64, RangeSpec)] = &[
        ("bytes=0-9", 100, One { start: 0, end: 9 }),
        ("bytes=10-", 100, One { start: 10, end: 99 }),
        ("bytes=-10", 100, One { start: 90, end: 99 }),
        ("bytes=-500", 100, One { start: 0, end: 99 }),
        ("bytes=50-500", 100, One { start: 50, end: 99 }),
        ("BYTES=1-1", 100, One { start: 1, end: 1 }),
        (" bytes= 2-3 ", 100, One { start: 2, end: 3 }),
        ("bytes=100-", 100, Unsatisfiable),
        ("bytes=100-200", 100, Unsatisfiable),
        ("bytes=-0", 100, Unsatisfiable),
        ("bytes=0-", 0, Unsatisfiable),
        ("bytes=-1", 0, Unsatisfiable),
        ("bytes=0-1,3-4", 100, Ignore),
        ("bytes=5-1", 100, Ignore),
        ("bytes=-", 100, Ignore),
        ("bytes=a-b", 100, Ignore),
        ("bytes=+1-2", 100, Ignore),
        // A position past u64 is past any length (RFC 9110 14.1.2): a last-pos means to
        // the end, a first-pos is unsatisfiable, a suffix is the whole file.
        (
            "bytes=0-99999999999999999999",
            100,
            One { start: 0, end: 99 },
        ),
        (
            "bytes=5-000000000000000000000007",
            100,
            One { start: 5, end: 7 },
        ),
        (
            "bytes=-99999999999999999999",
            100,
            One { start: 0, end: 99 },
        ),
        ("bytes=99999999999999999999-", 100, Unsatisfiable),
        ("bytes=18446744073709551616-", 100, Unsatisfiable),
        ("items=0-1", 100, Ignore),
        ("bytes", 100, Ignore),
    ];
    for (field, size, want) in cases {
        assert_eq!(
            parse_range(field.as_bytes(), *size),
            *want,
            "{field} of {size}"
        );
    }
}

#[test]
fn decisions_follow_rfc_9110_order() {
    let v = Validators {
        size: 100,
        mtime: 784_111_777,
        etag: b"\"2ebc0a21-64\"",
    };
    let lm = "Sun, 06 Nov 1994 08:49:37 GMT";
    let earlier = "Sun, 06 Nov 1994 08:49:36 GMT";
    type S = Option<&'static str>;
    let c = |inm: S, ims: S, range: S, if_range: S| Conditions {
        preconditions: crate::preconditions::Conditions {
            if_none_match: inm.map(str::as_bytes),
            if_modified_since: ims.map(str::as_bytes),
            ..Default::default()
        },
        range: range.map(str::as_bytes),
        if_range: if_range.map(str::as_bytes),
    };
    use Method::*;
    use Reply::*;
    let part = Partial { start: 0, end: 0 };
    let cases: &[(Method, Conditions, Reply)] = &[
        (Get, c(None, None, None, None), Full),
        (Head, c(None, None, None, None), Full),
        (
            Get,
            c(Some("\"2ebc0a21-64\""), None, None, None),
            NotModified,
        ),
        (
            Get,
            c(Some("W/\"2ebc0a21-64\""), None, None, None),
            NotModified,
        ),
        (
            Get,
            c(Some("\"a\" , \"2ebc0a21-64\""), None, None, None),
            NotModified,
        ),
        (Get, c(Some("*"), None, None, None), NotModified),
        (Head, c(Some("*"), None, None, None), NotModified),
        (Get, c(Some("\"a\""), None, None, None), Full),
        (Get, c(Some("\"a\""), Some(lm), None, None), Full),
        (Get, c(None, Some(lm), None, None), NotModified),
        (Get, c(None, Some(earlier), None, None), Full),
        (Get, c(None, Some("garbage"), None, None), Full),
        (Get, c(None, None, Some("bytes=0-0"), None), part),
        (Head, c(None, None, Some("bytes=0-0"), None), Full),
        (
            Get,
            c(None, None, Some("bytes=0-0"), Some("\"2ebc0a21-64\"")),
            part,
        ),
        (Get, c(None, None, Some("bytes=0-0"), Some(lm)), part),
        (Get, c(None, None, Some("bytes=0-0"), Some("\"old\"")), Full),
        (Get, c(None, None, Some("bytes=0-0"), Some(earlier)), Full),
        (Get, c(None, None, Some("bytes=100-"), None), Unsatisfiable),
        (
            Get,
            c(Some("*"), None, Some("bytes=100-"), None),
            NotModified,
        ),
    ];
    for (i, (m, cond, want)) in cases.iter().enumerate() {
        assert_eq!(decide(*m, cond, &v), *want, "case {i}: {m:?} {cond:?}");
    }
}

#[test]
fn simple_responses_are_complete_and_say_how_the_connection_goes_on() {
    let conn = |version, keep_alive| Conn {
        version,
        keep_alive,
    };
    let text = |status, location: Option<&[&[u8]]>, head, c| {
        let mut b = BytesMut::new();
        respond::simple(&mut b, status, location, head, c);
        String::from_utf8(b.to_vec()).unwrap()
    };
    let r = text(405, None, false, conn(Version::Http11, true));
    assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
    assert!(r.contains("\r\nAllow: GET, HEAD\r\n"), "{r}");
    assert!(r.contains("\r\nContent-Length: 23\r\n"), "{r}");
    assert!(r.ends_with("\r\n\r\n405 Method Not Allowed\n"), "{r}");
    assert!(!r.contains("Connection"), "{r}");
    let r = text(404, None, true, conn(Version::Http11, false));
    assert!(
        r.contains("\r\nContent-Length: 14\r\nConnection: close\r\n\r\n"),
        "{r}"
    );
    assert!(r.ends_with("\r\n\r\n"), "HEAD: no body: {r}");
    let loc: &[&[u8]] = &[b"/dir", b"/", b"?", b"a=1"];
    let r = text(301, Some(loc), false, conn(Version::Http10, true));
    assert!(r.starts_with("HTTP/1.0 301 Moved Permanently\r\n"), "{r}");
    assert!(r.contains("\r\nLocation: /dir/?a=1\r\n"), "{r}");
    assert!(r.contains("\r\nConnection: keep-alive\r\n"), "{r}");
}

#[test]
fn content_ranges_are_written_whole_up_to_the_largest_numbers() {
    let range = |r, size| {
        let mut b = BytesMut::new();
        respond::write_range(&mut b, r, size);
        String::from_utf8(b.to_vec()).unwrap()
    };
    assert_eq!(range(Some((0, 9)), 10), "Content-Range: bytes 0-9/10\r\n");
    assert_eq!(range(None, 0), "Content-Range: bytes */0\r\n");
    let m = u64::MAX;
    assert_eq!(
        range(Some((m - 1, m - 1)), m),
        format!("Content-Range: bytes {}-{}/{m}\r\n", m - 1, m - 1)
    );
    assert_eq!(range(None, m), format!("Content-Range: bytes */{m}\r\n"));
}

#[test]
fn queries_are_taken_from_the_head_as_positions() {
    let head = b"GET /a.txt?x HTTP/1.1\r\nHost: h\r\nrange: bytes=1-2\r\nIf-None-Match: \"e\"\r\nIf-Modified-Since: d\r\nIf-Range: r\r\nRange: ignored\r\nIf-Match: m\r\nIf-Unmodified-Since: u\r\n\r\n";
    // From the codec's parsed head, the one parse of a request.
    let mut storage = [httparse::EMPTY_HEADER; 16];
    let limits = shared::http::Limits::default();
    let Ok(shared::http::Status::Complete(parsed)) =
        shared::http::parse_request(head, &mut storage, &limits)
    else {
        panic!("parses")
    };
    let q = StaticQuery::from_head(&parsed, head);
    let c = q.conditions(head);
    assert_eq!(q.method, Some(Method::Get));
    assert_eq!(q.target.map(|t| t.get(head)), Some(&b"/a.txt?x"[..]));
    assert_eq!(c.range, Some(&b"bytes=1-2"[..]), "the first Range counts");
    let p = c.preconditions;
    assert_eq!(p.if_none_match, Some(&b"\"e\""[..]));
    assert_eq!(p.if_modified_since, Some(&b"d"[..]));
    assert_eq!(p.if_match, Some(&b"m"[..]));
    assert_eq!(p.if_unmodified_since, Some(&b"u"[..]));
    assert_eq!(c.if_range, Some(&b"r"[..]));
}

/// A scratch tree: `root/{f.txt, d/g.txt, in -> f.txt, out -> ../secret, up -> ..}`.
fn scratch_tree(name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::symlink;
    let dir = std::env::temp_dir().join(format!("static-open-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(dir.join("secret"), b"s").unwrap();
    std::fs::write(root.join("f.txt"), b"f").unwrap();
    std::fs::write(root.join("d/g.txt"), b"gg").unwrap();
    symlink("f.txt", root.join("in")).unwrap();
    symlink("../secret", root.join("out")).unwrap();
    symlink(dir.join("secret"), root.join("abs")).unwrap();
    symlink("..", root.join("up")).unwrap();
    dir
}

#[test]
fn opening_beneath_the_root_refuses_every_way_out_with_both_resolvers() {
    let dir = scratch_tree("beneath");
    let root = open_root(&dir.join("root")).unwrap();
    use OpenError::*;
    // (path, openat2, walk): the walk refuses every symlink, even one that stays inside.
    type Size = Result<u64, OpenError>;
    let cases: &[(&str, Size, Size)] = &[
        ("f.txt", Ok(1), Ok(1)),
        ("d/g.txt", Ok(2), Ok(2)),
        ("in", Ok(1), Err(Forbidden)),
        ("out", Err(Forbidden), Err(Forbidden)),
        ("abs", Err(Forbidden), Err(Forbidden)),
        // A symlinked directory on the way: O_DIRECTORY | O_NOFOLLOW says ENOTDIR.
        ("up/secret", Err(Forbidden), Err(NotFound)),
        ("up/root/f.txt", Err(Forbidden), Err(NotFound)),
        ("../secret", Err(Forbidden), Err(Forbidden)),
        ("d/../../secret", Err(Forbidden), Err(Forbidden)),
        ("missing", Err(NotFound), Err(NotFound)),
        ("f.txt/x", Err(NotFound), Err(NotFound)),
    ];
    for (path, with_openat2, with_walk) in cases {
        for (mut resolver, want) in [
            (Resolver::Openat2, with_openat2),
            (Resolver::Walk, with_walk),
        ] {
            let mut rel = path.as_bytes().to_vec();
            let got = open_beneath(root.as_fd(), &mut rel, &mut resolver)
                .map(|fd| stat(fd.as_fd()).unwrap().size);
            assert_eq!(&got, want, "{path} with {resolver:?}");
            assert_eq!(rel, path.as_bytes(), "the path is given back unchanged");
        }
    }
    let mut rel = Vec::new();
    let fd = open_beneath(root.as_fd(), &mut rel, &mut Resolver::Openat2).unwrap();
    assert_eq!(stat(fd.as_fd()).unwrap().kind, Kind::Dir, "empty: the root");
    assert_eq!(open_root(&dir.join("nope")).err(), Some(NotFound));
    let _ = std::fs::remove_dir_all(&dir);
}
