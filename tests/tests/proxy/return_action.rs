//! The `return` action end to end: the random redirect stays in its range and covers it,
//! every template variable, HEAD, request bodies, HTTP/1.0, pipelining, drain, and `return`
//! beside proxied routes on one connection.

use shared::origin::expected_body;
use tests::raw::{assert_well_formed, Client, WAIT};
use tests::toml_proxy::{ask, assert_closed, body, get, start};

const AVATAR: &str = "[[route]]\npath = \"/avatar\"\n\
    return = { status = 302, location = \"http://img.example.com/{random:1-21}.png\" }\n";

#[test]
fn random_redirect_stays_in_range_and_covers_it() {
    let p = start(AVATAR);
    let mut c = Client::connect(p.addr);
    let mut seen = [0u32; 22];
    for i in 0..1000 {
        let r = get(&mut c, "x", "/avatar");
        assert_well_formed(&r, 302);
        let loc = r.header("location").expect("Location");
        let n: usize = loc
            .strip_prefix("http://img.example.com/")
            .and_then(|l| l.strip_suffix(".png"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("request {i}: Location {loc:?}"));
        assert!((1..=21).contains(&n), "request {i}: {n} out of 1-21");
        seen[n] += 1;
        assert_eq!(r.header("content-type"), Some("text/html"));
        assert_eq!(
            body(&r),
            "<html>\r\n<head><title>302 Found</title></head>\r\n<body>\r\n\
             <center><h1>302 Found</h1></center>\r\n</body>\r\n</html>\r\n"
        );
        assert!(r.header("connection").is_none(), "keep-alive: {r:?}");
        let date = r.header("date").expect("Date");
        assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
    }
    // 1000 draws over 21 values: each expected ~48 times; a value never drawn (p < 1e-20
    // for a fair generator) means the range is not covered.
    assert!(
        seen[1..].iter().all(|&n| n > 0),
        "every value drawn: {seen:?}"
    );
}

#[test]
fn every_template_variable() {
    let p = start(
        "[[route]]\npath = \"/v/\"\n\
         return = { status = 200, body = \"h={host} p={path} q={query} ip={remote_addr} r={random:7-7}\\n\", \
         content_type = \"text/plain; charset=utf-8\" }\n\
         [[route]]\npath = \"/go\"\n\
         return = { status = 301, location = \"https://{host}{path}?{query}\", body = \"moved\" }\n",
    );
    let mut c = Client::connect(p.addr);
    let r = get(&mut c, "Foo.Example.COM.:8080", "/v/a%2Fb/c?x=1&y=%20");
    assert_well_formed(&r, 200);
    assert_eq!(
        body(&r),
        "h=foo.example.com p=/v/a%2Fb/c q=x=1&y=%20 ip=127.0.0.1 r=7\n"
    );
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    // No query, no Host (HTTP/1.0): empty values.
    let r = ask(
        &mut c,
        "GET /v/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        false,
    );
    assert_eq!(body(&r), "h= p=/v/ q= ip=127.0.0.1 r=7\n");
    assert!(r.connection_has("keep-alive"), "{r:?}");
    // Absolute-form: the authority is the host, the path is the target's path.
    let r = ask(
        &mut c,
        "GET http://Abs.Example:81/v/x?q HTTP/1.1\r\nHost: other\r\n\r\n",
        false,
    );
    assert_eq!(body(&r), "h=abs.example p=/v/x q=q ip=127.0.0.1 r=7\n");
    let r = get(&mut c, "site.example", "/go/deep?a=b");
    assert_well_formed(&r, 301);
    assert_eq!(
        r.header("location"),
        Some("https://site.example/go/deep?a=b")
    );
    assert_eq!(body(&r), "moved");
}

#[test]
fn head_gets_the_length_without_the_body() {
    let p = start(AVATAR);
    let mut c = Client::connect(p.addr);
    let full = get(&mut c, "x", "/avatar");
    let head = ask(&mut c, "HEAD /avatar HTTP/1.1\r\nHost: x\r\n\r\n", true);
    assert_eq!(head.status, 302);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), full.header("content-length"));
    // The connection is still in step: the next answer is whole.
    assert_well_formed(&get(&mut c, "x", "/avatar"), 302);
}

#[test]
fn request_bodies_skipped_or_the_connection_closed() {
    let p = start("[[route]]\nreturn = { status = 200, body = \"ok\" }\n");
    let mut c = Client::connect(p.addr);
    // A body that arrived whole, with a pipelined request behind it: both answered.
    c.send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    for i in 0..2 {
        let r = c.response(WAIT).unwrap_or_else(|r| panic!("{i}: {r:?}"));
        assert_well_formed(&r, 200);
        assert_eq!(body(&r), "ok");
        assert!(r.header("connection").is_none(), "{r:?}");
    }
    // A body still on its way: answered, `Connection: close`, and closed.
    let r = ask(
        &mut c,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial",
        false,
    );
    assert_well_formed(&r, 200);
    assert!(r.connection_has("close"), "{r:?}");
    assert_closed(&mut c, "after an unread body");
    // Chunked: the same.
    let mut c = Client::connect(p.addr);
    let r = ask(
        &mut c,
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        false,
    );
    assert!(r.connection_has("close"), "{r:?}");
    assert_closed(&mut c, "after a chunked body");
}

#[test]
fn http10_and_connection_close_end_the_connection() {
    let p = start(AVATAR);
    for req in [
        "GET /avatar HTTP/1.0\r\n\r\n",
        "GET /avatar HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ] {
        let mut c = Client::connect(p.addr);
        let r = ask(&mut c, req, false);
        assert_well_formed(&r, 302);
        assert!(r.connection_has("close"), "{req:?}: {r:?}");
        assert_closed(&mut c, req);
    }
}

#[test]
fn return_and_proxy_routes_share_a_connection() {
    let o = tests::origin();
    let p = start(&format!(
        "[upstream.app]\nservers = [\"{}\"]\n\
         [[route]]\npath = \"/api/\"\nupstream = \"app\"\n\
         [[route]]\npath = \"/\"\nreturn = {{ status = 404, body = \"nothing at {{path}}\\n\" }}\n",
        o.addr()
    ));
    let mut c = Client::connect(p.addr);
    for _ in 0..3 {
        let r = get(&mut c, "x", "/api/x");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, expected_body(64));
        let r = get(&mut c, "x", "/missing");
        assert_well_formed(&r, 404);
        assert_eq!(body(&r), "nothing at /missing\n");
    }
    assert_eq!(
        o.requests(),
        3,
        "only the proxied requests reach the origin"
    );
}

#[test]
fn pipelined_answers_come_in_order() {
    let p = start(
        "[[route]]\npath = \"/a\"\nreturn = { status = 200, body = \"A\" }\n\
         [[route]]\npath = \"/b\"\nreturn = { status = 410 }\n",
    );
    let mut c = Client::connect(p.addr);
    let mut reqs = String::new();
    for i in 0..20 {
        let path = if i % 2 == 0 { "/a" } else { "/b" };
        reqs.push_str(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
    c.send(reqs.as_bytes()).unwrap();
    for i in 0..20 {
        let r = c.response(WAIT).unwrap_or_else(|r| panic!("{i}: {r:?}"));
        if i % 2 == 0 {
            assert_well_formed(&r, 200);
            assert_eq!(body(&r), "A");
        } else {
            assert_well_formed(&r, 410);
            assert!(body(&r).contains("<h1>410 Gone</h1>"));
        }
    }
}

#[test]
fn bad_requests_still_get_the_codec_errors() {
    let p = start(AVATAR);
    let mut c = Client::connect(p.addr);
    c.send(b"GET /avatar HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
        .unwrap();
    let r = c.response(WAIT).expect("an error response");
    assert_eq!(r.status, 400);
    assert_closed(&mut c, "after a 400");
    // No route: 404 from the proxy itself.
    let mut c = Client::connect(p.addr);
    let r = get(&mut c, "x", "/elsewhere");
    assert_eq!(r.status, 404);
}

#[test]
fn a_closing_answer_arrives_whole_even_with_bytes_left_unread() {
    // The last answer before a close is held back and sent with the FIN (one segment). Bytes
    // the client sent after it and the proxy never read make close(2) reset the connection:
    // the answer must have gone out before that, whole, with the FIN.
    let p = start(AVATAR);
    for junk in [0usize, 64 * 1024] {
        let mut c = Client::connect(p.addr);
        let mut req = b"GET /avatar HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec();
        req.resize(req.len() + junk, b'x');
        c.send(&req).expect("request sent");
        let r = c
            .response(WAIT)
            .unwrap_or_else(|r| panic!("{junk} bytes after: no complete answer: {r:?}"));
        assert_well_formed(&r, 302);
        assert!(r.connection_has("close"), "{r:?}");
        let rest = c.until_close(WAIT);
        assert!(
            rest.end != tests::raw::End::TimedOut && rest.bytes.is_empty(),
            "{junk} bytes after: expected the connection to end, got {rest:?}"
        );
    }
}

/// `[limits] max_body` holds on every route, as nginx's `client_max_body_size` does in every
/// location: a declared body over it is refused with a 413 and a close before any of it is
/// read, on a `return` route and a static one as on a proxied one; a body within it is
/// answered as before.
#[test]
fn max_body_refuses_a_larger_body_on_return_and_static_routes() {
    let dir = tests::temp_dir("max-body");
    std::fs::write(dir.join("a.txt"), "file").unwrap();
    let p = start(&format!(
        "[limits]\nmax_body = \"1k\"\n\
         [[route]]\npath = \"/files/\"\nstatic = {{ root = \"{}\" }}\n\
         [[route]]\nreturn = {{ status = 200, body = \"ok\" }}\n",
        dir.display()
    ));
    for path in ["/", "/files/a.txt"] {
        // 10 MB declared, the first KiB sent: the answer comes without the rest.
        let mut c = Client::connect(p.addr);
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n{}",
            "x".repeat(1024)
        );
        let r = ask(&mut c, &req, false);
        assert_well_formed(&r, 413);
        assert!(r.connection_has("close"), "{path}: {r:?}");
        assert_closed(&mut c, "after a 413");
    }
    // Within the limit: answered (the static route allows no POST).
    let mut c = Client::connect(p.addr);
    for (path, status) in [("/", 200), ("/files/a.txt", 405)] {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n{}",
            "x".repeat(1024)
        );
        let r = ask(&mut c, &req, false);
        assert_eq!(r.status, status, "{path}: {r:?}");
    }
}
