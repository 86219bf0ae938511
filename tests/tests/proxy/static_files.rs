//! Static files end to end: a one-worker proxy whose every request is answered from a
//! directory (`proxy --static DIR`), raw clients on 127.0.0.1.
//!
//! Each test builds its own tree under the system temp dir: a root with files, a directory
//! with and one without an index, symlinks inside and out of the root, and a secret file
//! beside the root that must never be served.

use shared::runtime::DriverKind;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tests::raw::{Client, End, Response, WAIT};
use tests::strict::{assert_closed, wait_for};

const SECRET: &[u8] = b"SECRET-OUTSIDE-THE-ROOT";

/// A tree under the temp dir, removed on drop.
struct Tree {
    dir: PathBuf,
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Tree {
    fn root(&self) -> PathBuf {
        self.dir.join("www")
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| b"0123456789abcdefghij"[i % 20]).collect()
}

fn tree(name: &str) -> Tree {
    use std::os::unix::fs::symlink;
    let dir = std::env::temp_dir().join(format!("proxy-static-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("www");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(dir.join("secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("index.html"), b"<h1>home</h1>\n").unwrap();
    std::fs::write(root.join("dir/index.html"), b"<h1>dir</h1>\n").unwrap();
    std::fs::write(root.join("a.txt"), pattern(1000)).unwrap();
    std::fs::write(root.join("big.bin"), pattern(300_000)).unwrap();
    std::fs::write(root.join("noext"), b"x").unwrap();
    symlink("a.txt", root.join("inside-link.txt")).unwrap();
    symlink("../secret.txt", root.join("out-link")).unwrap();
    symlink(dir.join("secret.txt"), root.join("abs-link")).unwrap();
    symlink("..", root.join("up")).unwrap();
    Tree { dir }
}

/// A one-worker proxy on driver `d` serving `root` (`--static`, as a user starts it).
struct Server {
    running: Option<proxy::Running>,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().expect("proxy stops");
        }
    }
}

fn serve(root: &Path, d: Option<DriverKind>) -> Server {
    let root = root.to_str().expect("a UTF-8 temporary path");
    let mut args = vec!["--static", root];
    if let Some(d) = d {
        args.extend(["--driver", tests::driver_flag(d)]);
    }
    let (running, addr) = tests::start_proxy(&[], &args);
    Server {
        running: Some(running),
        addr,
    }
}

/// Send `req` on `c` and read one response (the head only for HEAD).
fn ask(c: &mut Client, req: &str) -> Response {
    c.send(req.as_bytes()).unwrap();
    let head = req.starts_with("HEAD ");
    match c.response_to(head, WAIT) {
        Ok(r) => r,
        Err(reply) => panic!("{req:?}: no complete response: {}", reply.text()),
    }
}

fn get(c: &mut Client, path: &str, extra: &str) -> Response {
    ask(c, &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n"))
}

#[test]
fn files_are_served_whole_with_type_length_and_validators_on_every_driver() {
    let t = tree("whole");
    for d in tests::drivers() {
        let s = serve(&t.root(), Some(d));
        let mut c = Client::connect(s.addr);
        for _ in 0..3 {
            let r = get(&mut c, "/a.txt", "");
            assert_eq!(r.status, 200, "{d}");
            assert_eq!(r.body, pattern(1000), "{d}");
            assert_eq!(r.header("content-length"), Some("1000"));
            assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
            assert_eq!(r.header("accept-ranges"), Some("bytes"));
            let etag = r.header("etag").expect("etag");
            let mtime = std::fs::metadata(t.root().join("a.txt"))
                .unwrap()
                .modified()
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            assert_eq!(etag, format!("\"{mtime:x}-3e8\""), "{d}: nginx's ETag form");
            let lm = r.header("last-modified").expect("last-modified");
            assert!(lm.ends_with(" GMT") && lm.len() == 29, "{lm}");
            assert!(r.header("date").is_some());
            assert!(
                r.header("connection").is_none(),
                "{d}: keep-alive by default"
            );
        }
        // Larger than what is kept in memory: sendfile (epoll) or pread + write (io_uring).
        for _ in 0..2 {
            let r = get(&mut c, "/big.bin", "");
            assert_eq!(r.status, 200, "{d}");
            assert_eq!(r.header("content-type"), Some("application/octet-stream"));
            assert!(r.body == pattern(300_000), "{d}: big body intact");
        }
        let r = get(&mut c, "/inside-link.txt", "");
        assert_eq!((r.status, r.body.len()), (200, 1000), "{d}: symlink inside");
        let r = get(&mut c, "/noext", "");
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    }
}

#[test]
fn traversal_attempts_never_serve_a_file_outside_the_root() {
    let t = tree("traversal");
    let s = serve(&t.root(), None);
    // Refused before routing when the decoded path would climb above the root, holds a NUL
    // (400, as nginx answers), a backslash or a dot segment next to an encoded slash (400:
    // routing cannot read those as every origin does), by the path rules (403), or, once
    // decoded a single time, names that do not exist (404); the symlinks are refused by the
    // kernel (openat2 RESOLVE_BENEATH: 403).
    let targets = [
        ("/../secret.txt", 400),
        ("/%2e%2e/secret.txt", 400),
        ("/%2E%2E/secret.txt", 400),
        ("/.%2e/secret.txt", 400),
        ("/%2e./secret.txt", 400),
        ("/dir/../../secret.txt", 400),
        ("/dir/%2e%2e/%2e%2e/secret.txt", 400),
        ("/..%2fsecret.txt", 400),
        ("/%2e%2e%2fsecret.txt", 400),
        ("/%2e%2e%2Fsecret.txt", 400),
        ("/..%5csecret.txt", 400),
        ("/..\\secret.txt", 400),
        ("/x%2fsecret.txt", 403),
        ("/%252e%252e/secret.txt", 404),
        ("/%252e%252e%252fsecret.txt", 404),
        ("/%c0%ae%c0%ae/secret.txt", 404),
        ("/a.txt%00.html", 400),
        ("/%00../secret.txt", 400),
        ("//../secret.txt", 400),
        ("/./../secret.txt", 400),
        ("/out-link", 403),
        ("/abs-link", 403),
        ("/up/secret.txt", 403),
        ("/up/www/a.txt", 403),
        ("http://t/../secret.txt", 400),
        ("http://t/%2e%2e/secret.txt", 400),
    ];
    assert!(targets.len() >= 15);
    for (target, status) in targets {
        let mut c = Client::connect(s.addr);
        let r = get(&mut c, target, "");
        assert_eq!(r.status, status, "{target}");
        assert!(
            !r.body.windows(SECRET.len()).any(|w| w == SECRET),
            "{target}: the secret was served"
        );
        assert!(r.body.len() < 64, "{target}: an error body, not a file");
    }
    // The root itself still answers.
    let mut c = Client::connect(s.addr);
    assert_eq!(get(&mut c, "/a.txt", "").status, 200);
}

#[test]
fn conditional_requests_get_304_without_a_body() {
    let t = tree("conditional");
    let s = serve(&t.root(), None);
    let mut c = Client::connect(s.addr);
    let r = get(&mut c, "/a.txt", "");
    let etag = r.header("etag").unwrap().to_string();
    let lm = r.header("last-modified").unwrap().to_string();
    let cases = [
        (format!("If-None-Match: {etag}\r\n"), 304),
        (format!("If-None-Match: W/{etag}\r\n"), 304),
        (format!("If-None-Match: \"x\", {etag}\r\n"), 304),
        ("If-None-Match: *\r\n".to_string(), 304),
        ("If-None-Match: \"other\"\r\n".to_string(), 200),
        (format!("If-Modified-Since: {lm}\r\n"), 304),
        (
            "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n".into(),
            304,
        ),
        (
            "If-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n".into(),
            200,
        ),
        ("If-Modified-Since: yesterday\r\n".into(), 200),
        // If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2).
        (
            format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {lm}\r\n"),
            200,
        ),
    ];
    for (fields, status) in cases {
        let r = get(&mut c, "/a.txt", &fields);
        assert_eq!(r.status, status, "{fields}");
        if status == 304 {
            assert!(r.body.is_empty(), "{fields}");
            assert_eq!(r.header("etag"), Some(etag.as_str()), "{fields}");
            assert!(r.header("content-length").is_none(), "{fields}");
        } else {
            assert_eq!(r.body, pattern(1000), "{fields}");
        }
    }
}

#[test]
fn a_single_range_is_206_an_unsatisfiable_one_416_and_several_the_whole_file() {
    let t = tree("range");
    for d in tests::drivers() {
        let s = serve(&t.root(), Some(d));
        let mut c = Client::connect(s.addr);
        let small = pattern(1000);
        let big = pattern(300_000);
        // (path, Range, status, Content-Range, body)
        type Case<'a> = (&'a str, &'a str, u16, Option<&'a str>, &'a [u8]);
        let cases: [Case; 10] = [
            (
                "/a.txt",
                "bytes=0-99999999999999999999",
                206,
                Some("bytes 0-999/1000"),
                &small[..],
            ),
            (
                "/a.txt",
                "bytes=10-19",
                206,
                Some("bytes 10-19/1000"),
                &small[10..20],
            ),
            (
                "/a.txt",
                "bytes=-5",
                206,
                Some("bytes 995-999/1000"),
                &small[995..],
            ),
            (
                "/a.txt",
                "bytes=990-",
                206,
                Some("bytes 990-999/1000"),
                &small[990..],
            ),
            (
                "/a.txt",
                "bytes=0-5000",
                206,
                Some("bytes 0-999/1000"),
                &small[..],
            ),
            ("/a.txt", "bytes=1000-", 416, Some("bytes */1000"), b""),
            ("/a.txt", "bytes=0-1,5-6", 200, None, &small[..]),
            ("/a.txt", "bytes=9-3", 200, None, &small[..]),
            ("/a.txt", "lines=1-2", 200, None, &small[..]),
            (
                "/big.bin",
                "bytes=100000-199999",
                206,
                Some("bytes 100000-199999/300000"),
                &big[100_000..200_000],
            ),
        ];
        for (path, range, status, content_range, body) in cases {
            let r = get(&mut c, path, &format!("Range: {range}\r\n"));
            assert_eq!(r.status, status, "{d}: {range}");
            assert_eq!(r.header("content-range"), content_range, "{d}: {range}");
            assert!(r.body == body, "{d}: {range}: body");
        }
        // If-Range with a stale validator: the whole file.
        let r = get(
            &mut c,
            "/a.txt",
            "Range: bytes=0-0\r\nIf-Range: \"old\"\r\n",
        );
        assert_eq!((r.status, r.body.len()), (200, 1000), "{d}");
    }
}

#[test]
fn head_gets_the_head_only_and_other_methods_405() {
    let t = tree("methods");
    let s = serve(&t.root(), None);
    let mut c = Client::connect(s.addr);
    let r = ask(&mut c, "HEAD /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("1000"));
    // The next response on the connection parses: no body bytes followed the HEAD's head.
    let r = get(&mut c, "/index.html", "");
    assert_eq!(r.body, b"<h1>home</h1>\n");
    for m in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
        let r = ask(
            &mut c,
            &format!("{m} /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"),
        );
        assert_eq!(r.status, 405, "{m}");
        assert_eq!(r.header("allow"), Some("GET, HEAD"), "{m}");
    }
    // The bodies were skipped: the connection still serves.
    assert_eq!(get(&mut c, "/a.txt", "").status, 200);
}

#[test]
fn directories_serve_their_index_redirect_without_slash_and_never_list() {
    let t = tree("dirs");
    let s = serve(&t.root(), None);
    let mut c = Client::connect(s.addr);
    let r = get(&mut c, "/", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"<h1>home</h1>\n"[..]));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let r = get(&mut c, "/dir/", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"<h1>dir</h1>\n"[..]));
    let r = get(&mut c, "/dir", "");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/dir/"));
    let r = get(&mut c, "/dir?x=1", "");
    assert_eq!(r.header("location"), Some("/dir/?x=1"));
    let r = get(&mut c, "/empty/", "");
    assert_eq!(r.status, 404, "no index, no listing");
    assert_eq!(get(&mut c, "/empty", "").status, 301);
    assert_eq!(get(&mut c, "/missing.txt", "").status, 404);
    assert_eq!(get(&mut c, "/a.txt/", "").status, 404);
}

#[test]
fn a_missing_root_is_404_until_it_exists() {
    let t = tree("missing");
    let root = t.dir.join("later");
    let s = serve(&root, None);
    let mut c = Client::connect(s.addr);
    assert_eq!(get(&mut c, "/a.txt", "").status, 404);
    assert_eq!(get(&mut c, "/", "").status, 404);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), b"now").unwrap();
    // The root is looked for again once its cache entry expires (1 s).
    wait_for(WAIT, "the new root is served", || {
        get(&mut c, "/a.txt", "").status == 200
    });
    assert_eq!(get(&mut c, "/a.txt", "").body, b"now");
}

#[test]
fn http10_and_connection_close_end_the_connection_after_the_response() {
    let t = tree("close");
    let s = serve(&t.root(), None);
    let mut c = Client::connect(s.addr);
    let r = ask(&mut c, "GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!((r.status, r.body.len()), (200, 1000));
    assert_eq!(r.header("connection"), Some("close"));
    assert_closed(&mut c, "HTTP/1.0");
    let mut c = Client::connect(s.addr);
    let r = get(&mut c, "/big.bin", "Connection: close\r\n");
    assert_eq!(r.body.len(), 300_000);
    assert_closed(&mut c, "Connection: close");
    let mut c = Client::connect(s.addr);
    let r = ask(
        &mut c,
        "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    );
    assert_eq!(r.header("connection"), Some("keep-alive"));
    assert_eq!(get(&mut c, "/a.txt", "").status, 200);
}

/// Read one response with a Content-Length body from a plain socket: the head, then exactly
/// that many bytes (no re-parsing of a growing buffer: the body is many megabytes).
fn read_sized(s: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    use std::io::Read;
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).expect("head arrives");
        assert!(n > 0, "closed before the head ended");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a length")
        .trim()
        .parse()
        .unwrap();
    let mut body = buf.split_off(end);
    while body.len() < len {
        let n = s.read(&mut chunk).expect("body arrives");
        assert!(n > 0, "closed after {} of {len} body bytes", body.len());
        body.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(body.len(), len, "nothing beyond the body");
    (head, body)
}

#[test]
fn a_body_larger_than_the_socket_buffers_arrives_whole_on_every_driver() {
    use std::io::Write;
    let t = tree("large");
    // Far more than loopback's socket buffers hold: sendfile meets a full socket and waits.
    let big = pattern(24 << 20);
    std::fs::write(t.root().join("large.bin"), &big).unwrap();
    for d in tests::drivers() {
        let s = serve(&t.root(), Some(d));
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        for range in ["", "Range: bytes=1000-\r\n"] {
            let req = format!("GET /large.bin HTTP/1.1\r\nHost: t\r\n{range}\r\n");
            c.write_all(req.as_bytes()).unwrap();
            let (head, body) = read_sized(&mut c);
            let from = if range.is_empty() { 0 } else { 1000 };
            assert!(
                head.contains(if from == 0 { " 200 " } else { " 206 " }),
                "{d}: {head}"
            );
            assert!(body == big[from..], "{d}: {range:?}: the body is the file");
        }
    }
}

#[test]
fn special_files_are_404_without_blocking_and_changed_files_are_seen_again() {
    let t = tree("special");
    let fifo = std::ffi::CString::new(t.root().join("pipe").to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let s = serve(&t.root(), None);
    let mut c = Client::connect(s.addr);
    // A FIFO nobody writes to: opening it must not hang the worker, and it is not a file.
    assert_eq!(get(&mut c, "/pipe", "").status, 404);
    assert_eq!(
        get(&mut c, "/a.txt", "").body,
        pattern(1000),
        "the worker still serves"
    );
    // Replaced under the open-file cache: served as it was for at most its validity (1 s).
    std::fs::write(t.root().join("a.txt.new"), b"changed").unwrap();
    std::fs::rename(t.root().join("a.txt.new"), t.root().join("a.txt")).unwrap();
    wait_for(WAIT, "the new content", || {
        get(&mut c, "/a.txt", "").body == b"changed"
    });
    std::fs::remove_file(t.root().join("a.txt")).unwrap();
    wait_for(WAIT, "the removed file's 404", || {
        get(&mut c, "/a.txt", "").status == 404
    });
}

/// Rewrite `path` in place, as `cp` does: the same inode, truncated, then written.
fn rewrite_in_place(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}

/// A file sent from its descriptor (over `MEM_FILE_MAX`) and rewritten in place while the
/// open-file cache holds that descriptor: the next answers describe the new content (length,
/// ETag) and an If-Range with the old ETag gets the whole new file, never a 206 cut from
/// the new bytes at the old file's offsets.
#[test]
fn a_file_rewritten_in_place_is_served_with_its_new_length_and_validators() {
    let t = tree("inplace");
    for (i, d) in tests::drivers().into_iter().enumerate() {
        let path = t.root().join(format!("inplace-{i}.js"));
        let url = format!("/inplace-{i}.js");
        std::fs::write(&path, vec![b'A'; 100_000]).unwrap();
        let s = serve(&t.root(), Some(d));
        let mut c = Client::connect(s.addr);
        let r = get(&mut c, &url, "");
        assert_eq!(r.header("content-length"), Some("100000"), "{d}");
        let old = r.header("etag").expect("etag").to_string();
        rewrite_in_place(&path, &[b'B'; 200_000]);
        let r = get(&mut c, &url, "");
        assert_eq!(
            r.header("content-length"),
            Some("200000"),
            "{d}: new length"
        );
        assert_ne!(r.header("etag"), Some(old.as_str()), "{d}: new ETag");
        assert!(r.body.iter().all(|&b| b == b'B'), "{d}: new bytes");
        let r = get(
            &mut c,
            &url,
            &format!("Range: bytes=50000-\r\nIf-Range: {old}\r\n"),
        );
        assert_eq!(
            (r.status, r.header("content-range"), r.body.len()),
            (200, None, 200_000),
            "{d}: If-Range with the old ETag gets the whole new file"
        );
    }
}

/// A file that shrinks while its body is on the way cannot deliver the length announced:
/// the connection ends (EOF or reset) short of it, never with a complete-looking message.
#[test]
fn a_file_that_shrinks_while_sent_ends_the_connection_short() {
    use std::io::{Read, Write};
    let t = tree("shrink");
    // Far more than loopback's socket buffers hold: the send waits on the client.
    let len = 32 << 20;
    let path = t.root().join("shrink.bin");
    for d in tests::drivers() {
        std::fs::write(&path, pattern(len)).unwrap();
        let s = serve(&t.root(), Some(d));
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(WAIT)).unwrap();
        c.write_all(b"GET /shrink.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut got = vec![0u8; 64 * 1024];
        let n = c.read(&mut got).expect("the head arrives");
        got.truncate(n);
        let head_end = got
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head")
            + 4;
        let head = String::from_utf8_lossy(&got[..head_end]).into_owned();
        assert!(
            head.contains(&format!("Content-Length: {len}\r\n")),
            "{head}"
        );
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let mut body = got.len() - head_end;
        let mut chunk = vec![0u8; 1 << 20];
        let end = loop {
            match c.read(&mut chunk) {
                Ok(0) => break "EOF",
                Ok(n) => body += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break "reset",
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("{d}: after {body} body bytes, neither EOF nor reset: {e}"),
            }
        };
        assert!(
            body < len,
            "{d}: {body} bytes then {end}: the whole length arrived"
        );
    }
}

/// A sparse file as large as a file system here allows, from 2^62 bytes down (tmpfs takes
/// 2^62; ext4 stops at 16 TiB): its tree (under /dev/shm when there is one) and its size.
fn huge_sparse_file() -> (Tree, u64) {
    let base = Path::new("/dev/shm");
    let t = if base.is_dir() {
        let dir = base.join(format!("proxy-static-{}-sparse", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("www")).unwrap();
        Tree { dir }
    } else {
        tree("sparse")
    };
    let f = std::fs::File::create(t.root().join("sparse.bin")).unwrap();
    let size = (40..=62)
        .rev()
        .map(|bits| 1u64 << bits)
        .find(|&size| f.set_len(size).is_ok())
        .expect("a sparse file of 2^40 bytes at least");
    (t, size)
}

/// The Content-Range of a huge file's range is whole: three numbers of up to 19 digits (a
/// 2^62-byte file's `bytes=-10` is 4611686018427387894-4611686018427387903/4611686018427387904,
/// 65 bytes with "bytes ", which a 64-byte buffer cut after the slash).
#[test]
fn a_huge_files_content_range_is_written_whole() {
    let (t, size) = huge_sparse_file();
    let s = serve(&t.root(), None);
    let mut c = Client::connect(s.addr);
    let r = ask(&mut c, "HEAD /sparse.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.header("content-length"), Some(size.to_string().as_str()));
    let r = get(&mut c, "/sparse.bin", "Range: bytes=-10\r\n");
    assert_eq!(r.status, 206);
    let want = format!("bytes {}-{}/{size}", size - 10, size - 1);
    assert_eq!(
        r.header("content-range"),
        Some(want.as_str()),
        "size {size}"
    );
    assert_eq!(r.body, [0u8; 10], "a hole reads as zeros");
    let r = get(&mut c, "/sparse.bin", &format!("Range: bytes={size}-\r\n"));
    assert_eq!(r.status, 416);
    let want = format!("bytes */{size}");
    assert_eq!(r.header("content-range"), Some(want.as_str()));
}

/// A Unix socket in the root is no file to serve: open(2) fails with ENXIO, which is a 404
/// as every other non-regular file is, not a 500.
#[test]
fn a_unix_socket_in_the_root_is_404() {
    let t = tree("socket");
    let _listener = std::os::unix::net::UnixListener::bind(t.root().join("sock")).unwrap();
    let s = serve(&t.root(), None);
    let mut c = Client::connect(s.addr);
    assert_eq!(get(&mut c, "/sock", "").status, 404);
    assert_eq!(
        get(&mut c, "/a.txt", "").status,
        200,
        "the worker still serves"
    );
}

/// A repeated If-None-Match or If-Match is one list (RFC 9110 5.3: field lines of a list
/// field combine, comma-separated), whatever lies between its lines: the tag on the second
/// line counts as if it were on the first.
#[test]
fn repeated_if_none_match_and_if_match_lines_are_one_list() {
    let t = tree("repeated");
    let s = serve(&t.root(), None);
    let mut c = Client::connect(s.addr);
    let etag = get(&mut c, "/a.txt", "")
        .header("etag")
        .unwrap()
        .to_string();
    let cases = [
        (
            format!("If-None-Match: \"other\"\r\nIf-None-Match: {etag}\r\n"),
            304,
        ),
        (
            format!("If-None-Match: \"x\"\r\nAccept: */*\r\nif-none-match: \"y\", {etag}\r\n"),
            304,
        ),
        (
            "If-None-Match: \"x\"\r\nIf-None-Match: \"y\"\r\n".to_string(),
            200,
        ),
        (
            format!("If-Match: \"x\"\r\nX-Other: If-Match: \"y\"\r\nIf-Match: {etag}\r\n"),
            200,
        ),
        (format!("If-Match: \"x\"\r\nX-If-Match: {etag}\r\n"), 412),
        ("If-Match: \"x\"\r\nIf-Match: \"y\"\r\n".to_string(), 412),
    ];
    for (fields, status) in cases {
        assert_eq!(get(&mut c, "/a.txt", &fields).status, status, "{fields}");
    }
}

/// [`serve`] with `[timeouts] lingering_time` and `lingering_timeout` set.
fn serve_lingering(root: &Path, d: DriverKind, time: Duration, timeout: Duration) -> Server {
    let root = root.to_str().expect("a UTF-8 temporary path");
    let args = ["--static", root, "--driver", tests::driver_flag(d)];
    let mut cfg = tests::proxy_config(&[], &args);
    cfg.timeouts.lingering_time = time;
    cfg.timeouts.lingering_timeout = timeout;
    let running = proxy::start(cfg).expect("proxy starts");
    let addr = running.listen_addrs()[0];
    Server {
        running: Some(running),
        addr,
    }
}

/// Send `len` bytes of body on `up` in 64 KiB blocks, pausing `pause` after each: a client
/// uploading slowly. `Err`: what the sends got, after how much.
fn send_body(mut up: std::net::TcpStream, len: usize, pause: Duration) -> Result<usize, String> {
    use std::io::Write;
    let block = vec![b'x'; 64 << 10];
    let mut sent = 0;
    while sent < len {
        up.write_all(&block)
            .map_err(|e| format!("after {sent} body bytes: {e}"))?;
        sent += block.len();
        std::thread::sleep(pause);
    }
    Ok(sent)
}

/// A file answered to a request whose body is still arriving (never read: the connection
/// closes after the answer), longer than the client's small receive buffer takes at once,
/// while the client goes on sending its 2 MiB body slowly (64 KiB every 25 ms, about a
/// second) and reads only once it sent it all: the whole file arrives, then the end, and
/// every send succeeds. Before, the lingering close stopped reading after 1 MiB or 500 ms
/// and closed with the body unread: a reset, which discarded the answer's unsent tail, and
/// failed the client's sends. Now it reads on while the client sends (nginx's
/// lingering_close).
#[test]
fn a_file_answered_while_a_body_comes_slowly_arrives_whole_on_every_driver() {
    let t = tree("linger_slow");
    let file = pattern(27_019);
    std::fs::write(t.root().join("27k.txt"), &file).unwrap();
    const BODY: usize = 2 << 20;
    for d in tests::drivers() {
        // A pause between the client's blocks is far below the lingering timeout.
        let s = serve_lingering(
            &t.root(),
            d,
            Duration::from_secs(30),
            Duration::from_millis(500),
        );
        let mut c = Client::connect_small_window(s.addr, 4096);
        let head = format!("GET /27k.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {BODY}\r\n\r\n");
        c.send(head.as_bytes()).unwrap();
        let up = c.stream.try_clone().unwrap();
        let sender = std::thread::spawn(move || send_body(up, BODY, Duration::from_millis(25)));
        let sent = sender.join().expect("the sending thread");
        let reply = c.until_close(WAIT);
        let r = match tests::raw::parse_response(&reply.bytes, reply.end != End::TimedOut) {
            tests::raw::Parse::Complete(r, _) => r,
            _ => panic!(
                "{d}: no complete answer in {} bytes, then {:?} (the body: {sent:?})",
                reply.bytes.len(),
                reply.end
            ),
        };
        assert_eq!(r.status, 200, "{d}");
        assert!(r.body == file, "{d}: the body is the file");
        assert_eq!(reply.end, End::Closed, "{d}: after the answer");
        assert_eq!(sent, Ok(BODY), "{d}: the request body");
    }
}

/// The lingering close is bounded: a client that never stops sending is closed once
/// `lingering_time` has passed (its sends then fail: the proxy's socket is gone), and it had
/// the whole answer before.
#[test]
fn a_client_that_never_stops_sending_is_closed_after_the_lingering_time() {
    let t = tree("linger_bound");
    std::fs::write(t.root().join("a.txt"), b"hello").unwrap();
    for d in tests::drivers() {
        let s = serve_lingering(
            &t.root(),
            d,
            Duration::from_millis(300),
            Duration::from_secs(5),
        );
        let mut c = Client::connect(s.addr);
        let head = "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000000\r\n\r\n";
        c.send(head.as_bytes()).unwrap();
        let r = c
            .response_to(false, WAIT)
            .unwrap_or_else(|r| panic!("{d}: {}", r.text()));
        assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]), "{d}");
        // Sends until one fails; a write that stalls fails too (its timeout), and is told
        // apart below.
        let up = c.stream.try_clone().unwrap();
        up.set_write_timeout(Some(WAIT)).unwrap();
        let got = send_body(up, usize::MAX, Duration::from_millis(1)).unwrap_err();
        assert!(
            got.contains("reset") || got.contains("Broken pipe"),
            "{d}: the sends ended with {got}"
        );
    }
}
