// The proxy's request path as a whole (head -> route -> action -> forwarded head): never
// panic; one request in, at most one request out; nothing the client sent that the proxy must
// strip survives (hop-by-hop fields, fields its Connection names, X-Forwarded-Host, Forwarded,
// HTTP2-Settings, Expect); the body keeps its framing; a `return` answer is one response.
//
// Shared by the libFuzzer target (`fuzz_targets/request_path.rs`) and the seed replay in
// `cargo test` (`proxy/src/request_path.rs`), both through `include!`: plain `//` comments
// only, no inner attributes. The decision is the proxy's own code (`proxy::request_path`);
// what it produced is read back with the codec, as an origin would read it.

use proxy::request_path::{Prepared, RequestPath, UPSTREAM_HOST};
use shared::http::framing::connection_tokens;
use shared::http::limits::MAX_HEADERS_CAP;
use shared::http::target::{origin_form, resolve_dot_segments, route_path};
use shared::http::{
    parse_final_response, parse_request, BodyKind, Limits, RequestHead, Status, Version,
};

// A route of each action: answers, a fenced path, a cached host, files, the default upstream.
const CONFIG: &str = r#"
[[listen]]
addr = "127.0.0.1:0"
[upstream.app]
servers = ["127.0.0.1:9"]
[[route]]
path = "/admin/"
return = { status = 403 }
[[route]]
path = "/r"
return = { status = 302, location = "https://{host}{request_uri}?n={random:1-9}", body = "{path} {query}" }
[[route]]
host = "cached.test"
upstream = "app"
cache = {}
[[route]]
path = "/s/"
static = { root = "/nonexistent-fuzz-root" }
[[route]]
path = "/"
upstream = "app"
"#;

thread_local! {
    static PATH: RequestPath =
        RequestPath::new(proxy::config::from_toml("fuzz.toml", CONFIG).expect("the fuzz config"));
}

const CLIENT: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 7));

pub fn check(data: &[u8]) {
    let decided = PATH.with(|p| p.decide(data, CLIENT, false));
    // An error is an answer of the proxy's own; an incomplete head waits for more.
    let Ok(Some(d)) = decided else { return };
    // The same bytes again: a proxied head comes from the worker's memo this time (if the
    // first call did not already take it from there), and is decided the same way (a
    // `return` may draw another random number). One peer and one configuration: the memo
    // against the plain parse, across peers, schemes and configurations, is
    // `request::tests::a_repeated_head_is_decided_as_its_parse_decides_it`.
    if let Prepared::Upstream { .. } = d.action {
        let again = PATH.with(|p| p.decide(data, CLIENT, false));
        let again = format!("{again:?}");
        assert_eq!(again, format!("{:?}", Ok::<_, ()>(Some(&d))), "decided again");
    }
    let limits = Limits::default();
    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    // One request in: the head the proxy decided on is the one the codec reads.
    let client = match parse_request(data, &mut storage, &limits) {
        Ok(Status::Complete(h)) => h,
        other => panic!("the proxy decided on a head the codec reads as {other:?}"),
    };
    assert_eq!(client.head_len, d.head_len);
    match &d.action {
        Prepared::Upstream { head, websocket } => upstream(&client, head, *websocket),
        Prepared::Answer(a) => answer(&client, a),
        Prepared::Static => assert!(d.route.index() == 3, "only /s/ serves files"),
    }
}

// The upstream head: exactly one request, the client's method, target (its dot segments
// resolved) and body framing, nothing the proxy must strip; and the origin, decoding the
// target it gets, reads the path the route was chosen on.
fn upstream(client: &RequestHead<'_, '_>, head: &[u8], websocket: bool) {
    let limits = Limits {
        max_head: head.len() + 1,
        max_request_line: head.len() + 1,
        max_headers: MAX_HEADERS_CAP,
        ..Limits::default()
    };
    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    let up = match parse_request(head, &mut storage, &limits) {
        Ok(Status::Complete(h)) => h,
        other => panic!("the upstream head does not parse: {other:?}\n{}", String::from_utf8_lossy(head)),
    };
    assert_eq!(up.head_len, head.len(), "one request out, nothing after it");
    assert_eq!(up.version, Version::Http11);
    assert_eq!(up.method, client.method);
    let sent = origin_form(client.target);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    let routed = route_path(sent.as_bytes(), &mut a).expect("a routed path");
    let want = match routed.dot_segments {
        true => resolve_dot_segments(sent.as_bytes(), &mut b),
        false => sent.as_bytes(),
    };
    assert_eq!(up.target.as_bytes(), want);
    let seen = route_path(up.target.as_bytes(), &mut c).expect("the origin's path");
    assert_eq!((seen.path, seen.dot_segments), (routed.path, false));
    match client.body {
        BodyKind::Empty => assert!(matches!(up.body, BodyKind::Empty | BodyKind::Length(0))),
        kind => assert_eq!(up.body, kind, "the body keeps its framing"),
    }
    let named: Vec<Vec<u8>> = connection_tokens(client.headers)
        .map(<[u8]>::to_ascii_lowercase)
        .collect();
    let mut hosts = 0;
    for h in up.headers {
        let name = h.name.to_ascii_lowercase();
        let value = h.value;
        match name.as_str() {
            "keep-alive" | "proxy-connection" | "te" | "trailer" | "x-forwarded-host"
            | "forwarded" | "http2-settings" | "expect" => {
                panic!("{name} went upstream: {}", String::from_utf8_lossy(head))
            }
            "connection" => assert!(websocket && value == b"upgrade", "Connection: {value:?}"),
            "upgrade" => assert!(websocket && value == b"websocket", "Upgrade: {value:?}"),
            "transfer-encoding" => assert!(client.body == BodyKind::Chunked && value == b"chunked"),
            "host" => {
                hosts += 1;
                let want = client.authority.unwrap_or(UPSTREAM_HOST.as_bytes());
                assert_eq!(value, want, "Host");
            }
            "x-real-ip" => assert_eq!(value, b"192.0.2.7"),
            "x-forwarded-proto" => assert_eq!(value, b"http"),
            "x-forwarded-for" => assert!(value.ends_with(b"192.0.2.7"), "{value:?}"),
            _ => {}
        }
        // The fields the proxy writes itself (checked above) go whatever the client's
        // Connection names: a client cannot strip Host or the forwarding fields.
        let ours = matches!(
            name.as_str(),
            "host" | "x-forwarded-for" | "x-real-ip" | "x-forwarded-proto" | "content-length"
                | "transfer-encoding"
        ) || (websocket && (name == "upgrade" || name == "connection"));
        assert!(
            ours || !named.iter().any(|n| n == name.as_bytes()),
            "{name}, named by the client's Connection, went upstream"
        );
    }
    assert_eq!(hosts, 1, "one Host upstream");
}

// A `return` answer: exactly one well-framed response.
fn answer(client: &RequestHead<'_, '_>, a: &[u8]) {
    let limits = Limits {
        max_head: a.len() + 1,
        ..Limits::default()
    };
    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    let resp = match parse_final_response(a, &mut storage, client.request_method(), &limits) {
        Ok(Status::Complete(h)) => h,
        other => panic!("the answer does not parse: {other:?}\n{}", String::from_utf8_lossy(a)),
    };
    let body = match resp.body {
        BodyKind::Empty => 0,
        BodyKind::Length(n) => n as usize,
        other => panic!("an answer framed {other:?}"),
    };
    assert_eq!(resp.head_len + body, a.len(), "one response, nothing after it");
}
