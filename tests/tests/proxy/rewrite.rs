//! A proxied route's own upstream options (issue 27 c) end to end: `strip_prefix` (the origin
//! sees the rewritten target), `request_headers` (byte-exact at the origin),
//! `response_headers` (byte-exact at the client, relayed and from the cache), per-route
//! `timeouts`, `retry` and the worker's retry budget (exact counts from the origins and
//! `/metrics`), `request_buffering` (what the origin holds while the client holds the rest).

use shared::origin::{Origin, OriginConfig};
use std::net::SocketAddr;
use tests::raw::{self, Client, End, WAIT};
use tests::scrape::{scrape, value};
use tests::strict::captured_text;
use tests::toml_proxy::{ask, start};

fn capturing(cfg: OriginConfig) -> Origin {
    Origin::start(OriginConfig {
        capture: true,
        ..cfg
    })
    .expect("origin starts")
}

fn upstream(name: &str, servers: &[String]) -> String {
    let list: Vec<String> = servers.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[upstream.{name}]\nservers = [{}]\n", list.join(", "))
}

/// One request on a new connection (`Connection: close`), its whole reply.
fn once(addr: SocketAddr, req: &str) -> raw::Reply {
    let r = raw::exchange(addr, req.as_bytes(), WAIT);
    assert_eq!(r.end, End::Closed, "{req:?}: {}", raw::show(&r));
    r
}

/// The request line the origin got for each request, in order.
fn lines(o: &Origin) -> Vec<String> {
    captured_text(o)
        .iter()
        .map(|r| r.lines().next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn strip_prefix_sends_the_rest_of_the_normal_path_and_the_query_as_received() {
    let o = capturing(OriginConfig::default());
    let a = o.addr().to_string();
    let p = start(&format!(
        "{}\n[[route]]\npath = \"/api/\"\nupstream = \"app\"\nstrip_prefix = true\n\
         [[route]]\npath = \"/v2\"\nupstream = \"app\"\nstrip_prefix = true\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\n",
        upstream("app", &[a])
    ));
    let mut c = p.connect();
    let asks = [
        ("/api/users?x=1", "/users?x=1"),
        ("/api/", "/"),
        ("/api/?q=%2F", "/?q=%2F"),
        ("/%61pi//a/./b%2fc?z", "/a/b%2Fc?z"),
        ("/v2/users", "/users"),
        ("/v2", "/"),
        ("/v2?k=v", "/?k=v"),
        ("/other/x?y", "/other/x?y"),
        // Matched decoded (`/api/users/me`), the prefix taken off the normal form.
        ("/api%2Fusers%2Fme?x", "/users%2Fme?x"),
        // No prefix stripped: dot segments resolved, the rest as sent.
        ("/other/%2e%2e/x%20y", "/x%20y"),
    ];
    for (target, _) in asks {
        let r = ask(
            &mut c,
            &format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n"),
            false,
        );
        assert_eq!(r.status, 200, "{target}");
    }
    let want: Vec<String> = asks
        .iter()
        .map(|(_, up)| format!("GET {up} HTTP/1.1"))
        .collect();
    assert_eq!(lines(&o), want);
    // The rest of the head is untouched: byte-exact.
    assert_eq!(
        captured_text(&o)[0],
        "GET /users?x=1 HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 127.0.0.1\r\n\
         X-Real-IP: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n\r\n"
    );
}

#[test]
fn strip_prefix_on_a_cached_route_keys_the_cache_by_the_clients_url() {
    let o = capturing(OriginConfig::default());
    let p = start(&format!(
        "{}\n[[route]]\npath = \"/c/\"\nupstream = \"app\"\nstrip_prefix = true\n\
         cache = {{ ttl = \"60s\" }}\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\ncache = {{ ttl = \"60s\" }}\n",
        upstream("app", &[o.addr().to_string()])
    ));
    let mut c = p.connect();
    let get = |c: &mut Client, path: &str| {
        ask(c, &format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"), false)
    };
    let first = get(&mut c, "/c/x");
    assert_eq!(first.header("X-Cache"), Some("MISS"));
    let again = get(&mut c, "/c/x");
    assert_eq!(again.header("X-Cache"), Some("HIT"));
    // `/x` is another URL to the cache, though the origin got the same target for `/c/x`.
    let other = get(&mut c, "/x");
    assert_eq!(other.header("X-Cache"), Some("MISS"));
    assert_eq!(lines(&o), ["GET /x HTTP/1.1", "GET /x HTTP/1.1"]);
}

#[test]
fn request_headers_set_and_remove_every_copy_byte_exact_at_the_origin() {
    let o = capturing(OriginConfig::default());
    let p = start(&format!(
        "{}\n[[route]]\nupstream = \"app\"\n\
         request_headers = {{ set = {{ \"X-Env\" = \"prod\", \"Host\" = \"app.internal\" }}, \
         remove = [\"X-Debug\", \"X-Real-IP\"] }}\n",
        upstream("app", &[o.addr().to_string()])
    ));
    let mut c = p.connect();
    let r = ask(
        &mut c,
        "POST /p HTTP/1.1\r\nHost: client.example\r\nx-env: dev\r\nX-Debug: 1\r\nAccept: */*\r\n\
         X-ENV: staging\r\nx-debug: 2\r\nX-Real-IP: 6.6.6.6\r\nContent-Length: 2\r\n\r\nhi",
        false,
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        captured_text(&o),
        [
            "POST /p HTTP/1.1\r\nAccept: */*\r\nX-Forwarded-For: 127.0.0.1\r\n\
          X-Forwarded-Proto: http\r\nHost: app.internal\r\nX-Env: prod\r\n\
          Content-Length: 2\r\n\r\nhi"
        ]
    );
}

#[test]
fn response_headers_set_and_remove_on_a_relayed_answer_and_a_cache_hit() {
    let o = Origin::start(OriginConfig {
        headers: vec![
            ("Server".into(), "origin".into()),
            ("X-Keep".into(), "1".into()),
            ("server".into(), "again".into()),
            ("x-frame-options".into(), "ALLOW".into()),
        ],
        ..OriginConfig::default()
    })
    .expect("origin starts");
    let edits = "response_headers = { set = { \"X-Frame-Options\" = \"DENY\", \
                 \"Strict-Transport-Security\" = \"max-age=63072000\" }, remove = [\"Server\"] }";
    let p = start(&format!(
        "{}\n[[route]]\npath = \"/c/\"\nupstream = \"app\"\ncache = {{ ttl = \"60s\" }}\n{edits}\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\n{edits}\n",
        upstream("app", &[o.addr().to_string()])
    ));
    // The origin sends no Date: the proxy adds one (RFC 9110 6.6.1), whose value is the
    // time; the other fields are compared as they are.
    let fields = |r: &raw::Response| -> Vec<(String, String)> {
        let dates: Vec<&str> = r
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("date"))
            .map(|(_, v)| v.as_str())
            .collect();
        assert!(
            matches!(dates[..], [d] if d.ends_with(" GMT") && d.len() == 29),
            "one Date: {:?}",
            r.headers
        );
        let mut rest = r.headers.clone();
        rest.retain(|(n, _)| !n.eq_ignore_ascii_case("date"));
        rest
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    let relayed = &once(
        p.addr,
        "GET /r HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .responses()[0];
    assert_eq!(relayed.status, 200);
    assert_eq!(
        fields(relayed),
        [
            pair("X-Keep", "1"),
            pair("Strict-Transport-Security", "max-age=63072000"),
            pair("X-Frame-Options", "DENY"),
            pair("Content-Length", "64"),
            pair("Connection", "close"),
        ]
    );
    let req = "GET /c/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let miss = &once(p.addr, req).responses()[0];
    let hit = &once(p.addr, req).responses()[0];
    assert_eq!(miss.header("X-Cache"), Some("MISS"));
    assert_eq!(hit.header("X-Cache"), Some("HIT"));
    for r in [miss, hit] {
        let mut got = fields(r);
        // The cache's own, which differ between the two: checked above.
        got.retain(|(n, _)| n != "X-Cache" && n != "Age");
        assert_eq!(
            got,
            [
                pair("X-Keep", "1"),
                pair("Strict-Transport-Security", "max-age=63072000"),
                pair("X-Frame-Options", "DENY"),
                pair("Content-Length", "64"),
                pair("Connection", "close"),
            ],
            "{}",
            r.status_line
        );
        assert!(r.is_pattern(64));
    }
    assert_eq!(o.requests(), 2, "the hit came from the store");
}

#[test]
fn response_headers_apply_to_a_return_too() {
    let p = start(
        "[[route]]\nreturn = { status = 302, location = \"/new\", body = \"moved\" }\n\
         response_headers = { set = { \"Cache-Control\" = \"no-store\", \"Location\" = \"/newer\" }, \
         remove = [\"Content-Type\"] }\n",
    );
    let r = once(
        p.addr,
        "GET /old HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let resp = &r.responses()[0];
    assert_eq!(resp.status, 302, "{}", r.text());
    assert_eq!(resp.body, b"moved");
    let mut names: Vec<&str> = resp.headers.iter().map(|(n, _)| n.as_str()).collect();
    names.retain(|n| *n != "Date");
    assert_eq!(
        names,
        ["Content-Length", "Connection", "Cache-Control", "Location"],
        "{}",
        r.text()
    );
    assert_eq!(resp.header("Location"), Some("/newer"));
    assert_eq!(resp.header("Cache-Control"), Some("no-store"));
}

/// nginx's `add_header` applies to files too: a `static` route's `response_headers` edit its
/// 200s and 304s.
#[test]
fn response_headers_apply_to_a_static_file_too() {
    let root = tests::temp_dir("rewrite-static");
    std::fs::write(root.join("f.txt"), b"file body").unwrap();
    let p = start(&format!(
        "[[route]]\nstatic = {{ root = {:?} }}\n\
         response_headers = {{ set = {{ \"Cache-Control\" = \"max-age=60\" }}, \
         remove = [\"ETag\"] }}\n",
        root.to_str().unwrap()
    ));
    let r = once(
        p.addr,
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let resp = &r.responses()[0];
    assert_eq!(resp.status, 200, "{}", r.text());
    assert_eq!(resp.body, b"file body");
    assert_eq!(resp.header("Cache-Control"), Some("max-age=60"));
    assert_eq!(resp.header("ETag"), None, "{}", r.text());
    let modified = resp
        .header("Last-Modified")
        .expect("Last-Modified")
        .to_string();
    let r = once(
        p.addr,
        &format!(
            "GET /f.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: {modified}\r\n\
             Connection: close\r\n\r\n"
        ),
    );
    let resp = &r.responses()[0];
    assert_eq!(resp.status, 304, "{}", r.text());
    assert_eq!(resp.header("Cache-Control"), Some("max-age=60"));
    assert_eq!(resp.header("ETag"), None);
}

/// As nginx's `add_header` (without `always`): a static route's edits go on 200, 206, 301
/// and 304, never on its 403, 404, 405, 412 or 416 (a year's `Cache-Control` on a missing
/// asset's 404 would keep it missing in every cache for a year).
#[test]
fn a_static_routes_response_headers_stay_off_its_error_answers() {
    let dir = tests::temp_dir("rewrite-static-errors");
    let root = dir.join("www");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::write(root.join("f.txt"), b"file body").unwrap();
    std::fs::write(dir.join("outside.txt"), b"x").unwrap();
    std::os::unix::fs::symlink("../outside.txt", root.join("out-link")).unwrap();
    let p = start(&format!(
        "[[route]]\nstatic = {{ root = {:?} }}\n\
         response_headers = {{ set = {{ \"Cache-Control\" = \"public, max-age=31536000, immutable\" }} }}\n",
        root.to_str().unwrap()
    ));
    let ask = |method: &str, path: &str, extra: &str| {
        let r = once(
            p.addr,
            &format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n"),
        );
        let resp = &r.responses()[0];
        (
            resp.status,
            resp.header("Cache-Control").map(str::to_string),
        )
    };
    let modified = {
        let r = once(
            p.addr,
            "GET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        r.responses()[0]
            .header("Last-Modified")
            .unwrap()
            .to_string()
    };
    let cases = [
        ("GET", "/f.txt", String::new(), 200, true),
        ("GET", "/f.txt", "Range: bytes=0-1\r\n".into(), 206, true),
        ("GET", "/dir", String::new(), 301, true),
        (
            "GET",
            "/f.txt",
            format!("If-Modified-Since: {modified}\r\n"),
            304,
            true,
        ),
        ("GET", "/missing.css", String::new(), 404, false),
        ("GET", "/out-link", String::new(), 403, false),
        ("DELETE", "/f.txt", String::new(), 405, false),
        (
            "GET",
            "/f.txt",
            "If-Match: \"other\"\r\n".into(),
            412,
            false,
        ),
        ("GET", "/f.txt", "Range: bytes=100-\r\n".into(), 416, false),
    ];
    for (method, path, extra, status, edited) in cases {
        let (got, cc) = ask(method, path, &extra);
        assert_eq!(got, status, "{method} {path} {extra:?}");
        assert_eq!(
            cc.is_some(),
            edited,
            "{method} {path} {extra:?}: {status} {cc:?}"
        );
    }
}

#[test]
fn a_routes_own_read_timeout_applies_to_it_alone() {
    let o = tests::origin();
    let p = start(&format!(
        "{}\n[[route]]\npath = \"/quick/\"\nupstream = \"app\"\ntimeouts = {{ read = \"150ms\" }}\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\n",
        upstream("app", &[o.addr().to_string()])
    ));
    let slow = |path: &str| {
        once(
            p.addr,
            &format!("GET {path}?delay=600ms HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        )
        .responses()[0]
            .status
    };
    assert_eq!(slow("/quick/a"), 504, "the route's 150 ms read timeout");
    assert_eq!(slow("/other"), 200, "the global 60 s one");
}

#[test]
fn a_routes_own_connect_timeout_applies_to_it_alone() {
    // A listener with backlog 0 and one connection queued, never accepted: the kernel drops
    // further SYNs, so a connect to it hangs like one to a dead host.
    use socket2::{Domain, Socket, Type};
    let hole = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    hole.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    hole.listen(0).unwrap();
    let addr = hole.local_addr().unwrap().as_socket().unwrap();
    let _filler = std::net::TcpStream::connect(addr).unwrap();
    // The global connect timeout is the default 5 s; the route's own is 100 ms.
    let p = start(&format!(
        "{}\n[[route]]\npath = \"/quick/\"\nupstream = \"app\"\ntimeouts = {{ connect = \"100ms\" }}\n",
        upstream("app", &[addr.to_string()])
    ));
    let r = once(
        p.addr,
        "GET /quick/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.responses()[0].status, 504, "{}", r.text());
    assert!(
        r.elapsed < std::time::Duration::from_secs(4),
        "the route's timeout, not the global 5 s: {:?}",
        r.elapsed
    );
}

/// Origins answering 503 (first in the group) and 200, and a proxy whose route retries
/// with `retry`; with an admin listener.
fn retrying(retry: &str, first: SocketAddr, second: SocketAddr) -> tests::inproc::Proxy {
    start(&format!(
        "[admin]\naddr = \"127.0.0.1:0\"\n{}\n[[route]]\nupstream = \"app\"\nretry = {retry}\n",
        upstream("app", &[first.to_string(), second.to_string()])
    ))
}

fn unavailable() -> Origin {
    Origin::start(OriginConfig {
        status: 503,
        ..OriginConfig::default()
    })
    .expect("origin starts")
}

#[test]
fn a_503_is_retried_on_the_next_server_and_counted() {
    let (bad, good) = (unavailable(), tests::origin());
    let p = retrying("{ tries = 2, on = [\"503\"] }", bad.addr(), good.addr());
    let r = once(
        p.addr,
        "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let resp = &r.responses()[0];
    assert_eq!(resp.status, 200, "{}", r.text());
    assert!(resp.is_pattern(64));
    assert_eq!((bad.requests(), good.requests()), (1, 1));
    let m = scrape(p.running().admin_addr().unwrap());
    let key =
        |reason: &str| format!("proxy_upstream_retries_total{{route=\"/\",reason=\"{reason}\"}}");
    assert_eq!(value(&m, &key("status")), 1.0);
    assert_eq!(value(&m, &key("connect")), 0.0);
    assert_eq!(m["proxy_retry_budget_exhausted_total"], 0.0);
}

#[test]
fn a_post_is_not_retried_on_a_503_but_is_on_a_refused_connect() {
    let (bad, good) = (unavailable(), tests::origin());
    let p = retrying(
        "{ tries = 2, on = [\"connect\", \"503\"] }",
        bad.addr(),
        good.addr(),
    );
    let post = "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
    let r = once(p.addr, post);
    assert_eq!(r.responses()[0].status, 503, "the last answer as it is");
    assert_eq!((bad.requests(), good.requests()), (1, 0));

    let dead = tests::ClosedPort::new();
    let good = tests::origin();
    let p = retrying(
        "{ tries = 2, on = [\"connect\", \"503\"] }",
        dead.addr(),
        good.addr(),
    );
    let r = once(p.addr, post);
    assert_eq!(r.responses()[0].status, 200, "{}", r.text());
    assert_eq!(good.requests(), 1);
    let m = scrape(p.running().admin_addr().unwrap());
    assert_eq!(
        m[r#"proxy_upstream_retries_total{route="/",reason="connect"}"#],
        1.0
    );
    // `methods = "all"`: the 503 goes to the next server too.
    let (bad, good) = (unavailable(), tests::origin());
    let p = retrying(
        "{ tries = 2, on = [\"503\"], methods = \"all\" }",
        bad.addr(),
        good.addr(),
    );
    let r = once(p.addr, post);
    assert_eq!(r.responses()[0].status, 200, "{}", r.text());
    assert_eq!((bad.requests(), good.requests()), (1, 1));
}

#[test]
fn no_retry_once_bytes_of_the_answer_reached_the_client() {
    let (bad, good) = (unavailable(), tests::origin());
    let p = retrying("{ tries = 2, on = [\"503\"] }", bad.addr(), good.addr());
    // The 103 goes to the client before the 503 arrives: the 503 is the answer.
    let r = once(
        p.addr,
        "GET /a?interim=103 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let got: Vec<u16> = r.responses().iter().map(|x| x.status).collect();
    assert_eq!(got, [103, 503], "{}", r.text());
    assert_eq!((bad.requests(), good.requests()), (1, 0));
}

#[test]
fn the_retry_budget_caps_retries_at_a_fifth_of_the_requests_plus_three() {
    let (d1, d2) = (tests::ClosedPort::new(), tests::ClosedPort::new());
    // Never skipped: every request tries one refusing server, then may retry the other.
    let p = start(&format!(
        "[admin]\naddr = \"127.0.0.1:0\"\n[upstream.app]\nservers = [\
         {{ addr = \"{}\", max_fails = 0 }}, {{ addr = \"{}\", max_fails = 0 }}]\n\
         [[route]]\nupstream = \"app\"\nretry = {{ tries = 2, on = [\"connect\"] }}\n",
        d1.addr(),
        d2.addr()
    ));
    let n = 40;
    for i in 0..n {
        // A 502 closes its connection: one each.
        let r = once(p.addr, &format!("GET /{i} HTTP/1.1\r\nHost: t\r\n\r\n"));
        assert_eq!(r.responses()[0].status, 502, "request {i}: {}", r.text());
    }
    let m = scrape(p.running().admin_addr().unwrap());
    let retried = proxy::retry_budget::retried_of(n);
    assert_eq!(retried, 3 + n / 5);
    assert_eq!(
        m[r#"proxy_upstream_retries_total{route="/",reason="connect"}"#],
        retried as f64
    );
    assert_eq!(
        m["proxy_retry_budget_exhausted_total"],
        (n - retried) as f64
    );
}

#[test]
fn a_timeout_is_retried_where_the_route_asks_and_only_for_idempotent_requests() {
    let slow = Origin::start(OriginConfig {
        delay: std::time::Duration::from_millis(600),
        ..OriginConfig::default()
    })
    .expect("origin starts");
    let good = tests::origin();
    let p = start(&format!(
        "[admin]\naddr = \"127.0.0.1:0\"\n{}\n[[route]]\nupstream = \"app\"\n\
         timeouts = {{ read = \"150ms\" }}\nretry = {{ tries = 2, on = [\"timeout\"] }}\n",
        upstream("app", &[slow.addr().to_string(), good.addr().to_string()])
    ));
    let r = once(
        p.addr,
        "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.responses()[0].status, 200, "{}", r.text());
    assert_eq!(good.requests(), 1);
    let m = scrape(p.running().admin_addr().unwrap());
    assert_eq!(
        m[r#"proxy_upstream_retries_total{route="/",reason="timeout"}"#],
        1.0
    );
    // A POST that timed out may be running on the server: 504, not sent again. (The slow
    // server is marked failed now: a fresh proxy, so that it is asked first again.)
    let p = start(&format!(
        "{}\n[[route]]\nupstream = \"app\"\n\
         timeouts = {{ read = \"150ms\" }}\nretry = {{ tries = 2, on = [\"timeout\"] }}\n",
        upstream("app", &[slow.addr().to_string(), good.addr().to_string()])
    ));
    let post = "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
    let r = once(p.addr, post);
    assert_eq!(r.responses()[0].status, 504, "{}", r.text());
    assert_eq!(good.requests(), 1, "not sent to the second server");
}

/// What a [`hinting_origin`] does after its 103.
#[derive(Debug, Clone, Copy)]
enum AfterHint {
    /// Nothing more until the proxy closes the connection.
    Stall,
    Close,
    Answer(&'static [u8]),
}

/// An origin that answers every request with a 103 carrying its own `Link` (`</LINK>`), then
/// does `then`. The requests it got, counted as each head arrives.
fn hinting_origin(
    link: &'static str,
    then: AfterHint,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().unwrap();
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let count = count.clone();
            std::thread::spawn(move || {
                // Bounds the stall, should the proxy never close.
                s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                    .unwrap();
                let mut pending = Vec::new();
                while raw::read_request_head(&mut s, &mut pending).is_ok() {
                    count.fetch_add(1, Ordering::SeqCst);
                    let hint =
                        format!("HTTP/1.1 103 Early Hints\r\nLink: </{link}>; rel=preload\r\n\r\n");
                    if s.write_all(hint.as_bytes()).is_err() {
                        return;
                    }
                    match then {
                        AfterHint::Answer(rest) if s.write_all(rest).is_ok() => {}
                        AfterHint::Stall => {
                            // Held open until the proxy gives up on it.
                            let _ = raw::read_once(&mut s, &mut pending);
                            return;
                        }
                        _ => return,
                    }
                }
            });
        }
    });
    (addr, seen)
}

#[test]
fn no_retry_on_a_timeout_or_a_close_once_an_interim_head_reached_the_client() {
    use std::sync::atomic::Ordering::SeqCst;
    let ok: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let get = "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let post = "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
    // (first server after its 103, methods, request) -> the client's answer after the 103.
    let cases = [
        (AfterHint::Stall, "", get, 504),
        (AfterHint::Stall, ", methods = \"all\"", post, 504),
        (AfterHint::Close, "", get, 502),
        (AfterHint::Close, ", methods = \"all\"", post, 502),
    ];
    for (then, methods, req, want) in cases {
        let (first, stalls) = hinting_origin("first.css", then);
        let (second, answers) = hinting_origin("second.css", AfterHint::Answer(ok));
        // A fresh proxy each time: round-robin asks the first server first.
        let p = start(&format!(
            "{}\n[[route]]\nupstream = \"app\"\ntimeouts = {{ read = \"300ms\" }}\n\
             retry = {{ tries = 2, on = [\"timeout\", \"reset\", \"503\"]{methods} }}\n",
            upstream("app", &[first.to_string(), second.to_string()])
        ));
        let r = once(p.addr, req);
        let what = format!("{req:?} after {then:?}: {}", raw::show(&r));
        let responses = r.responses();
        let got: Vec<(u16, Option<&str>)> = responses
            .iter()
            .map(|x| (x.status, x.header("link")))
            .collect();
        let hint = Some("</first.css>; rel=preload");
        assert_eq!(got, [(103, hint), (want, None)], "{what}");
        assert_eq!(
            (stalls.load(SeqCst), answers.load(SeqCst)),
            (1, 0),
            "{what}"
        );
    }
}

#[test]
fn a_global_retry_serves_routes_without_their_own() {
    let (bad, good) = (unavailable(), tests::origin());
    let p = start(&format!(
        "[retry]\ntries = 2\non = [\"503\"]\n{}\n[[route]]\nupstream = \"app\"\n",
        upstream("app", &[bad.addr().to_string(), good.addr().to_string()])
    ));
    let r = once(
        p.addr,
        "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.responses()[0].status, 200, "{}", r.text());
    assert_eq!((bad.requests(), good.requests()), (1, 1));
}

/// What a [`two_part_origin`] received, or why it stopped (a timeout, a close).
type Report = std::sync::mpsc::Receiver<Result<String, String>>;

/// An origin for one request whose body comes in two parts: it reads until it holds `first`
/// (the end of the head and the body's first part) and reports what it got then on the first
/// channel; then reads until it holds `whole` and answers 200 "ok". The second channel has
/// everything it received. A read that times out (10 s) or a close is reported as an error.
fn two_part_origin(first: &'static [u8], whole: &'static [u8]) -> (SocketAddr, Report, Report) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().unwrap();
    let (early_tx, early) = std::sync::mpsc::channel();
    let (all_tx, all) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        let mut until = |end: &[u8], got: &mut Vec<u8>| -> Result<String, String> {
            let mut buf = [0u8; 4096];
            while !got.ends_with(end) {
                match s.read(&mut buf) {
                    Ok(0) => return Err(format!("closed after {:?}", tests::text(got))),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => return Err(format!("{e} after {:?}", tests::text(got))),
                }
            }
            Ok(tests::text(got))
        };
        let r = until(first, &mut got);
        let ok = r.is_ok();
        let _ = early_tx.send(r);
        if !ok {
            return;
        }
        let r = until(whole, &mut got);
        if r.is_ok() {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
        let _ = all_tx.send(r);
    });
    (addr, early, all)
}

#[test]
fn request_buffering_false_streams_a_small_body_from_its_first_byte() {
    // A Content-Length body and a chunked one, each far under the 64 KiB read whole by
    // default: with `request_buffering = false` the origin has the head and the first part
    // while the client still holds the rest (nginx's `proxy_request_buffering off`); the
    // chunked one goes as it came (not joined under a Content-Length).
    // (framing field, the body's two parts as sent, what the origin holds after the first
    // part and at the end)
    type Case = (&'static str, [&'static [u8]; 2], [&'static [u8]; 2]);
    let cases: [Case; 2] = [
        (
            "Content-Length: 10\r\n",
            [b"hello", b"world"],
            [b"\r\n\r\nhello", b"\r\n\r\nhelloworld"],
        ),
        (
            "Transfer-Encoding: chunked\r\n",
            [b"5\r\nhello\r\n", b"5\r\nworld\r\n0\r\n\r\n"],
            [b"\r\n\r\n5\r\nhello\r\n", b"5\r\nworld\r\n0\r\n\r\n"],
        ),
    ];
    for (framing, [part1, part2], [first, whole]) in cases {
        let (origin, early, all) = two_part_origin(first, whole);
        let p = start(&format!(
            "{}\n[[route]]\npath = \"/\"\nupstream = \"app\"\nrequest_buffering = false\n",
            upstream("app", &[origin.to_string()])
        ));
        let mut c = Client::connect(p.addr);
        let head = format!("POST /up HTTP/1.1\r\nHost: h\r\n{framing}\r\n");
        c.send(head.as_bytes()).expect("head sent");
        c.send(part1).expect("first part sent");
        let at_origin = early
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| {
                panic!("{framing}: the origin got nothing while the client held the rest")
            })
            .unwrap_or_else(|e| panic!("{framing}: {e}"));
        assert!(
            at_origin.starts_with("POST /up HTTP/1.1\r\n"),
            "{at_origin:?}"
        );
        assert!(at_origin.contains(framing), "{framing}: {at_origin:?}");
        c.send(part2).expect("second part sent");
        let r = c
            .response_to(false, WAIT)
            .unwrap_or_else(|r| panic!("{framing}: no answer: {}", raw::show(&r)));
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"ok"[..]),
            "{framing}"
        );
        let got = all
            .recv_timeout(WAIT)
            .expect("the origin reports")
            .unwrap_or_else(|e| panic!("{framing}: {e}"));
        assert!(got.ends_with(&tests::text(whole)), "{framing}: {got:?}");
    }
}

#[test]
fn request_buffering_true_reads_a_small_body_whole_first() {
    // The default, said out loud: the origin's first read has the whole body (a chunked one
    // joined under its Content-Length), sent with the head once all of it came.
    let (origin, early, all) =
        two_part_origin(b"Content-Length: 10\r\n\r\nhelloworld", b"helloworld");
    let p = start(&format!(
        "{}\n[[route]]\npath = \"/\"\nupstream = \"app\"\nrequest_buffering = true\n",
        upstream("app", &[origin.to_string()])
    ));
    let mut c = Client::connect(p.addr);
    c.send(b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        .expect("first part sent");
    c.send(b"5\r\nworld\r\n0\r\n\r\n")
        .expect("second part sent");
    let r = c
        .response_to(false, WAIT)
        .unwrap_or_else(|r| panic!("no answer: {}", raw::show(&r)));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    let first = early.recv_timeout(WAIT).expect("the origin reports");
    assert!(first.is_ok(), "{first:?}");
    assert!(all.recv_timeout(WAIT).expect("the origin reports").is_ok());
}

/// A retry is counted, and taken from the worker's budget, only when another attempt goes
/// out: a group with one server has nowhere to retry, and a group of two whose both servers
/// failed has nowhere to go after the second. A budget drained by retries never made would
/// refuse real ones to every other route of the worker.
#[test]
fn a_retry_with_no_server_left_is_neither_counted_nor_spent() {
    let lone = tests::origin();
    let dead = tests::ClosedPort::new();
    let live = tests::origin();
    let p = start(&format!(
        "[admin]\naddr = \"127.0.0.1:0\"\n{}{}\
         [[route]]\npath = \"/one/\"\nupstream = \"one\"\nstrip_prefix = true\n\
         [[route]]\npath = \"/two/\"\nupstream = \"two\"\nstrip_prefix = true\n",
        upstream("one", &[lone.addr().to_string()]),
        upstream("two", &[dead.addr().to_string(), live.addr().to_string()]),
    ));
    let n = 5;
    for i in 0..n {
        // The origin reads the request and closes without an answer.
        let r = once(
            p.addr,
            &format!("GET /one/{i}?drop HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(r.responses()[0].status, 502, "request {i}: {}", r.text());
    }
    assert_eq!(lone.requests(), n, "one attempt each: nowhere to retry");
    let m = scrape(p.running().admin_addr().unwrap());
    assert_eq!(
        value(
            &m,
            r#"proxy_upstream_retries_total{route="/one/",reason="reset"}"#
        ),
        0.0
    );
    assert_eq!(value(&m, "proxy_retry_budget_exhausted_total"), 0.0);
    // The budget is whole: the refused connect is retried on the live server.
    let r = once(
        p.addr,
        "GET /two/a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.responses()[0].status, 200, "{}", r.text());
    assert_eq!(live.requests(), 1);

    // Two servers that both close: two attempts, one retry.
    let (a, b) = (tests::origin(), tests::origin());
    let p = retrying("{ on = [\"reset\", \"503\"] }", a.addr(), b.addr());
    let r = once(
        p.addr,
        "GET /x?drop HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.responses()[0].status, 502, "{}", r.text());
    assert_eq!((a.requests(), b.requests()), (1, 1));
    let m = scrape(p.running().admin_addr().unwrap());
    assert_eq!(
        value(
            &m,
            r#"proxy_upstream_retries_total{route="/",reason="reset"}"#
        ),
        1.0
    );
}
