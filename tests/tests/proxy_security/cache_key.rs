//! Item 3: the cache key is the scheme, the normalised authority (lower-case host, the port
//! kept unless it is the scheme's default) and the target, because the origin sees all of
//! them (`X-Forwarded-Proto` per listener, `Host` with its port): a response fetched for one
//! must never be served for another.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tests::raw::{Client, Response};
use tests::tls::{client_config, Ca, TlsClient};

/// An origin that answers every request with what it was asked through: `proto=<X-Forwarded-
/// Proto> host=<Host>`, fresh for a minute (as an application that builds absolute URLs or
/// redirects to https from those fields would). `.1` counts the requests.
fn echo_origin() -> (SocketAddr, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let count = Arc::new(AtomicU64::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || serve_echo(s, &counted));
        }
    });
    (addr, count)
}

fn serve_echo(s: TcpStream, count: &AtomicU64) {
    crate::answer_each_head(s, |head| {
        count.fetch_add(1, Ordering::SeqCst);
        let field = |name| crate::head_field(head, name);
        crate::Answer {
            fields: String::new(),
            body: format!(
                "proto={} host={}",
                field("x-forwarded-proto"),
                field("host")
            ),
        }
    })
}

fn body(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn get(addr: SocketAddr, host: &str) -> Response {
    let mut c = Client::connect(addr);
    crate::ask(
        &mut c,
        &format!("GET /p HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        false,
    )
}

#[test]
fn a_response_is_never_served_to_another_scheme_or_port() {
    let dir = tests::temp_dir("cache-key");
    let ca = Ca::new();
    let (cert, key) = ca.leaf_files(&dir, "site", &["site"]);
    let (origin, _) = echo_origin();
    let p = crate::start(&format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[listen.tls]\ncert = \"{}\"\nkey = \"{}\"\n\
         [upstream.o]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"o\"\ncache = {{ ttl = \"60s\" }}\n",
        cert.display(),
        key.display()
    ));
    let addrs = p.running().listen_addrs();
    let (plain, tls) = (addrs[0], addrs[1]);

    // Plain HTTP first: stored as http.
    let r = get(plain, "site");
    assert_eq!(
        (body(&r).as_str(), r.header("x-cache")),
        ("proto=http host=site", Some("MISS"))
    );
    assert_eq!(get(plain, "site").header("x-cache"), Some("HIT"));

    // The same URL over HTTPS is another resource to the origin: not the http answer.
    let mut t = TlsClient::connect(tls, &client_config(&ca.der(), false), "site").unwrap();
    t.send(b"GET /p HTTP/1.1\r\nHost: site\r\n\r\n");
    let r = t.response();
    assert_eq!(
        body(&r),
        "proto=https host=site",
        "an HTTPS client got the answer fetched for plain HTTP (X-Cache {:?})",
        r.header("x-cache")
    );

    // A port the origin sees is part of the key; the default port and the case are not.
    let r = get(plain, "site:1337");
    assert_eq!(
        body(&r),
        "proto=http host=site:1337",
        "Host site:1337 got the entry of Host site (X-Cache {:?})",
        r.header("x-cache")
    );
    let r = get(plain, "site");
    assert_eq!(
        (body(&r).as_str(), r.header("x-cache")),
        ("proto=http host=site", Some("HIT")),
        "the entry of Host site was replaced by the one of site:1337"
    );
    let r = get(plain, "SITE:80");
    assert_eq!(
        (body(&r).as_str(), r.header("x-cache")),
        ("proto=http host=site", Some("HIT")),
        "SITE:80 is site on http"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scripted answer: 200 with `fields` and `body`.
fn answer(fields: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\n{fields}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn ask(addr: SocketAddr, req: &str) -> (String, String) {
    let mut c = Client::connect(addr);
    let r = crate::ask(&mut c, req, false);
    let cache = r.header("x-cache").unwrap_or("(none)").to_string();
    (body(&r), cache)
}

/// `GET http://a.test?q=1` goes upstream as `GET /?q=1` (RFC 9112 3.2.1: an empty path is
/// `/`): it is the same resource as an origin-form `/?q=1`, one entry, which an unsafe method
/// on `/?q=1` invalidates. Seen failing before the fix: it was keyed `?q=1`, so the
/// origin-form request missed it and the POST left it in place.
#[test]
fn an_absolute_form_target_without_a_path_is_keyed_as_forwarded() {
    let fresh = "Cache-Control: max-age=600\r\n";
    let origin = crate::scripted::Scripted::start(vec![
        answer(fresh, "v1"),
        answer("", "updated"),
        answer(fresh, "v2"),
    ]);
    let p = crate::start(&format!(
        "[upstream.o]\nservers = [\"{}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"o\"\ncache = {{ ttl = \"60s\" }}\n",
        origin.addr()
    ));
    let absolute = "GET http://a.test?q=1 HTTP/1.1\r\nHost: a.test\r\n\r\n";
    let origin_form = "GET /?q=1 HTTP/1.1\r\nHost: a.test\r\n\r\n";
    assert_eq!(ask(p.addr, absolute), ("v1".into(), "MISS".into()));
    assert_eq!(ask(p.addr, origin_form), ("v1".into(), "HIT".into()));
    let post = "POST /?q=1 HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(ask(p.addr, post).0, "updated");
    assert_eq!(
        ask(p.addr, absolute),
        ("v2".into(), "MISS".into()),
        "the POST to /?q=1 left the entry of http://a.test?q=1"
    );
    let lines: Vec<String> = origin
        .heads()
        .iter()
        .map(|h| {
            String::from_utf8_lossy(h)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(
        lines,
        [
            "GET /?q=1 HTTP/1.1",
            "POST /?q=1 HTTP/1.1",
            "GET /?q=1 HTTP/1.1"
        ]
    );
}

/// An empty Host (RFC 9112 3.2: a target without an authority) goes upstream as it is; a
/// request without any (HTTP/1.0) goes with the server's name: two requests to the origin,
/// two entries. Seen failing before the fix: both were keyed on the empty host, and the
/// HTTP/1.0 request got the empty Host's answer as a HIT.
#[test]
fn an_empty_host_and_no_host_are_different_keys() {
    let (origin, count) = echo_origin();
    let p = crate::start(&format!(
        "[upstream.o]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"o\"\ncache = {{ ttl = \"60s\" }}\n"
    ));
    let empty = "GET /h HTTP/1.1\r\nHost:\r\n\r\n";
    let none = "GET /h HTTP/1.0\r\n\r\n";
    let sent = format!("proto=http host={origin}");
    assert_eq!(
        ask(p.addr, empty),
        ("proto=http host=".into(), "MISS".into())
    );
    let r = ask(p.addr, none);
    assert_eq!(r.0, sent, "X-Cache {}", r.1);
    assert_eq!(
        ask(p.addr, empty),
        ("proto=http host=".into(), "HIT".into())
    );
    assert_eq!(ask(p.addr, none), (sent, "HIT".into()));
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

/// The key is the target as it went upstream: `/a/../p` goes to the origin as `/p` (its dot
/// segments resolved, so the origin sees the path it was routed on), and is `/p`'s entry.
/// Keyed as received, it was a second copy of `/p` that a PURGE of `/p` never reached.
#[test]
fn a_target_with_dot_segments_is_keyed_as_forwarded() {
    let (origin, count) = echo_origin();
    let p = crate::start(&format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\
         [upstream.o]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"o\"\ncache = {{ ttl = \"60s\" }}\n"
    ));
    let addr = p.running().listen_addrs()[0];
    let ask = |target: &str| {
        let mut c = Client::connect(addr);
        let r = crate::ask(
            &mut c,
            &format!("GET {target} HTTP/1.1\r\nHost: site\r\n\r\n"),
            false,
        );
        r.header("x-cache").map(str::to_string)
    };
    assert_eq!(ask("/p").as_deref(), Some("MISS"));
    for target in ["/a/../p", "/./p", "/a/%2E%2e/p"] {
        assert_eq!(ask(target).as_deref(), Some("HIT"), "{target}");
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
}
