//! Item 2: every route action that answers by itself consumes or refuses the request body
//! before the next request is read. A body carrying `GET /secret ...` must never be parsed
//! as a request of its own: one request in, one response out, and the origin never sees the
//! smuggled request.

use shared::origin::Origin;
use std::net::SocketAddr;
use tests::raw::{Client, End, WAIT};

const SMUGGLED: &str = "GET /secret HTTP/1.1\r\nHost: t\r\n\r\n";

/// A proxy with a cached route (PURGE allowed from loopback), a `return`, a static route and
/// a proxied default, all in front of one capturing origin.
fn setup(files: &std::path::Path, origin: &Origin) -> tests::inproc::Proxy {
    std::fs::create_dir_all(files.join("files")).unwrap();
    std::fs::write(files.join("files/a.txt"), "static file\n").unwrap();
    crate::start(&format!(
        "[upstream.o]\nservers = [\"{}\"]\n\
         [[route]]\npath = \"/cached/\"\nupstream = \"o\"\n\
         cache = {{ ttl = \"60s\", purge_from = [\"127.0.0.1\"] }}\n\
         [[route]]\npath = \"/ret\"\nreturn = {{ status = 200, body = \"ok\\n\" }}\n\
         [[route]]\npath = \"/files/\"\nstatic = {{ root = \"{}\" }}\n\
         [[route]]\npath = \"/\"\nupstream = \"o\"\n",
        origin.addr(),
        files.display()
    ))
}

/// `method path` with the smuggled request as its body, then a sentinel request: the first
/// response, and proof that nothing answered the smuggled one (the connection closed with
/// nothing more, or the next response is the sentinel's).
fn send_with_smuggled_body(addr: SocketAddr, method: &str, path: &str) -> u16 {
    let mut c = Client::connect(addr);
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{SMUGGLED}",
        SMUGGLED.len()
    );
    c.send(req.as_bytes()).expect("request sent");
    let first = c
        .response_to(method == "HEAD", WAIT)
        .unwrap_or_else(|r| panic!("{method} {path}: no response: {}", tests::raw::show(&r)));
    // The sentinel may meet a closed connection: that is one of the two good outcomes.
    let _ = c.send(b"GET /ret HTTP/1.1\r\nHost: t\r\n\r\n");
    match c.response(WAIT) {
        Ok(next) => assert_eq!(
            (next.status, next.body.as_slice()),
            (200, &b"ok\n"[..]),
            "{method} {path}: the response after the first must be the sentinel's, \
             not one to the smuggled request: {next:?}"
        ),
        Err(r) => assert!(
            r.bytes.is_empty() && matches!(r.end, End::Closed | End::Reset),
            "{method} {path}: after the first response, expected the sentinel's or a close; \
             got {}",
            tests::raw::show(&r)
        ),
    }
    first.status
}

fn smuggled_reached(origin: &Origin) -> bool {
    origin
        .captured()
        .iter()
        .any(|r| r.starts_with(b"GET /secret"))
}

#[test]
fn actions_that_answer_themselves_never_read_a_body_as_the_next_request() {
    let origin = tests::capturing_origin();
    let dir = tests::temp_dir("body-desync");
    let p = setup(&dir, &origin);
    // Prime the cache: the PURGE and the hit below find an entry.
    let mut c = Client::connect(p.addr);
    let miss = crate::ask(&mut c, "GET /cached/x HTTP/1.1\r\nHost: t\r\n\r\n", false);
    assert_eq!(miss.header("x-cache"), Some("MISS"));
    let hit = crate::ask(&mut c, "GET /cached/x HTTP/1.1\r\nHost: t\r\n\r\n", false);
    assert_eq!(hit.header("x-cache"), Some("HIT"));
    let cases = [
        ("GET", "/ret", 200),
        ("POST", "/ret", 200),
        ("GET", "/files/a.txt", 200),
        ("GET", "/cached/x", 200),
        ("PURGE", "/cached/x", 200),
        ("PURGE", "/cached/x", 404),
    ];
    for (method, path, status) in cases {
        assert_eq!(
            send_with_smuggled_body(p.addr, method, path),
            status,
            "{method} {path}"
        );
        assert!(
            !smuggled_reached(&origin),
            "{method} {path}: the body's request reached the origin"
        );
    }
    // PURGE whose body has not all arrived: answered, and the rest never parsed.
    let mut c = Client::connect(p.addr);
    let head = "PURGE /cached/x HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n";
    c.send(format!("{head}{SMUGGLED}").as_bytes()).unwrap();
    let r = c.response(WAIT).expect("an answer to the PURGE");
    assert!(
        r.connection_has("close"),
        "the rest of the body is not read: {r:?}"
    );
    crate::assert_closed(&mut c, "PURGE with a body still on its way");
    assert!(!smuggled_reached(&origin));
    let _ = std::fs::remove_dir_all(&dir);
}
