//! Upstream request heads rewritten on plain inputs: tables of the client's head and the
//! exact head the upstream gets.

use super::*;
use shared::http::Limits;
use std::sync::Arc;

/// The client's address in every case.
const IP: &str = "10.0.0.9";

fn opts() -> HeaderOptions {
    HeaderOptions::default()
}

/// The upstream head written for the request `wire`, with `(Host written?)` when it was.
fn upstream(wire: &str, opts: &HeaderOptions) -> String {
    let mut storage = [httparse::EMPTY_HEADER; 32];
    let head = match parse_request(wire.as_bytes(), &mut storage, &Limits::default()) {
        Ok(Status::Complete(h)) => h,
        other => panic!("{wire:?}: {other:?}"),
    };
    let target = origin_form(head.target);
    let websocket = head.is_websocket_upgrade();
    let mut out = BytesMut::from(&b"left over"[..]);
    let ip = ClientAddr::new(IpText::new(IP.parse().unwrap()));
    let host = write_upstream_head(
        (&head, wire.as_bytes()),
        &target,
        websocket,
        (opts, None),
        &ip,
        &mut out,
    );
    let text = String::from_utf8(out.to_vec()).unwrap();
    if host.host_written {
        text
    } else {
        format!("{text}(no Host)")
    }
}

#[test]
fn upstream_heads() {
    let off = HeaderOptions {
        preserve_host: false,
        x_forwarded_for: false,
        x_real_ip: false,
        x_forwarded_proto: false,
        ..HeaderOptions::default()
    };
    let fwd = "X-Forwarded-For: 10.0.0.9\r\nX-Real-IP: 10.0.0.9\r\nX-Forwarded-Proto: http\r\n";
    let table: Vec<(&str, String, HeaderOptions, String)> = vec![
        (
            "the plainest request",
            "GET /a?b HTTP/1.1\r\nHost: example.com\r\n\r\n".into(),
            opts(),
            format!("GET /a?b HTTP/1.1\r\nHost: example.com\r\n{fwd}"),
        ),
        (
            "hop-by-hop fields removed (RFC 9110 7.6.1), end-to-end ones kept in order",
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\
             Proxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\nUpgrade: h2c\r\n\
             Accept: */*\r\nX-B: 2\r\n\r\n"
                .into(),
            opts(),
            format!("GET / HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nX-B: 2\r\n{fwd}"),
        ),
        (
            "fields named in Connection removed, in any case, across Connection fields",
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: X-Secret, close\r\nConnection: x-other\r\n\
             x-secret: 1\r\nX-OTHER: 2\r\nX-Kept: 3\r\n\r\n"
                .into(),
            opts(),
            format!("GET / HTTP/1.1\r\nHost: h\r\nX-Kept: 3\r\n{fwd}"),
        ),
        (
            "X-Forwarded-For: every received list, in order, empty ones dropped, then the client",
            "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For:\r\n\
             x-forwarded-for:  2.2.2.2, 3.3.3.3 \r\n\r\n"
                .into(),
            opts(),
            "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.9\r\n\
             X-Real-IP: 10.0.0.9\r\nX-Forwarded-Proto: http\r\n"
                .into(),
        ),
        (
            "X-Real-IP and X-Forwarded-Proto from the client are replaced",
            "GET / HTTP/1.1\r\nHost: h\r\nX-Real-IP: 6.6.6.6\r\nX-Forwarded-Proto: https\r\n\r\n"
                .into(),
            opts(),
            format!("GET / HTTP/1.1\r\nHost: h\r\n{fwd}"),
        ),
        (
            "forwarding fields off: the client's pass through untouched, none added",
            "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1\r\nX-Real-IP: 6.6.6.6\r\n\
             X-Forwarded-Proto: https\r\n\r\n"
                .into(),
            off.clone(),
            "GET / HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1\r\nX-Real-IP: 6.6.6.6\r\n\
             X-Forwarded-Proto: https\r\n(no Host)"
                .into(),
        ),
        // Issue 22, item 3b: the proxy trusts nothing a client says about where a request
        // came from or was addressed to; these two are never passed on.
        (
            "X-Forwarded-Host and Forwarded from the client are removed",
            "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-Host: admin.internal\r\n\
             Forwarded: for=1.2.3.4;host=admin.internal;proto=https\r\nX-A: 1\r\n\
             x-forwarded-host: b\r\nFORWARDED: for=5.6.7.8\r\n\r\n"
                .into(),
            opts(),
            format!("GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n{fwd}"),
        ),
        (
            "X-Forwarded-Host and Forwarded are removed with the forwarding fields off too",
            "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-Host: a\r\nForwarded: for=1.2.3.4\r\n\r\n"
                .into(),
            off.clone(),
            "GET / HTTP/1.1\r\n(no Host)".into(),
        ),
        (
            "Host not preserved: left to each attempt (the server's name)",
            "GET / HTTP/1.1\r\nHost: h\r\n\r\n".into(),
            off.clone(),
            "GET / HTTP/1.1\r\n(no Host)".into(),
        ),
        (
            "an absolute-form target: origin-form upstream, its authority is the Host",
            "GET http://abs.example:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n".into(),
            opts(),
            format!("GET /p?q HTTP/1.1\r\nHost: abs.example:8080\r\n{fwd}"),
        ),
        (
            "HTTP/1.0 without Host: HTTP/1.1 upstream, Host per attempt",
            "GET / HTTP/1.0\r\n\r\n".into(),
            opts(),
            format!("GET / HTTP/1.1\r\n{fwd}(no Host)"),
        ),
        (
            "our own framing: Content-Length rewritten, Expect answered by the proxy",
            "PUT /u HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\nExpect: 100-continue\r\n\r\n"
                .into(),
            opts(),
            format!("PUT /u HTTP/1.1\r\nHost: h\r\n{fwd}Content-Length: 7\r\n"),
        ),
        (
            "a chunked body stays chunked (Transfer-Encoding is hop-by-hop, written by us)",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n".into(),
            off.clone(),
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n(no Host)".into(),
        ),
        (
            "a POST without a body gets Content-Length: 0",
            "POST / HTTP/1.1\r\nHost: h\r\n\r\n".into(),
            off.clone(),
            "POST / HTTP/1.1\r\nContent-Length: 0\r\n(no Host)".into(),
        ),
        (
            "a WebSocket upgrade says Connection: upgrade and Upgrade: websocket",
            "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\n\
             Upgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n"
                .into(),
            off.clone(),
            "GET /ws HTTP/1.1\r\nSec-WebSocket-Key: k\r\nConnection: upgrade\r\n\
             Upgrade: websocket\r\n(no Host)"
                .into(),
        ),
        // Issue 22, item 16: a back end that picks h2c from the list would give the client
        // a raw HTTP/2 channel past routing, header rewriting and the cache.
        (
            "a WebSocket upgrade that also offers h2c: only websocket goes upstream",
            "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n\
             Upgrade: h2c, websocket\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\
             Sec-WebSocket-Key: k\r\n\r\n"
                .into(),
            off.clone(),
            "GET /ws HTTP/1.1\r\nSec-WebSocket-Key: k\r\nConnection: upgrade\r\n\
             Upgrade: websocket\r\n(no Host)"
                .into(),
        ),
        (
            "HTTP2-Settings goes even when Connection does not name it",
            "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n\
             Upgrade: WebSocket, h2c\r\nhttp2-settings: AAMAAABk\r\nSec-WebSocket-Key: k\r\n\r\n"
                .into(),
            off.clone(),
            "GET /ws HTTP/1.1\r\nSec-WebSocket-Key: k\r\nConnection: upgrade\r\n\
             Upgrade: websocket\r\n(no Host)"
                .into(),
        ),
        (
            "HTTP2-Settings on a plain request is dropped too",
            "GET / HTTP/1.1\r\nHost: h\r\nHTTP2-Settings: AAMAAABk\r\nX-A: 1\r\n\r\n".into(),
            off.clone(),
            "GET / HTTP/1.1\r\nX-A: 1\r\n(no Host)".into(),
        ),
        (
            "an upgrade to something else is dropped",
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n".into(),
            off,
            "GET / HTTP/1.1\r\n(no Host)".into(),
        ),
    ];
    for (what, wire, opts, want) in table {
        assert_eq!(upstream(&wire, &opts), want, "{what}");
    }
}

#[test]
fn ip_text() {
    assert_eq!(
        IpText::new("127.0.0.1".parse().unwrap()).as_bytes(),
        b"127.0.0.1"
    );
    assert_eq!(IpText::new("::1".parse().unwrap()).as_bytes(), b"::1");
    assert_eq!(
        IpText::new("::ffff:10.0.0.1".parse().unwrap()).as_bytes(),
        b"10.0.0.1"
    );
}

/// A cached route's fields, read back where the one parse found them: the same method,
/// names and values, in order, for a short head and for one past the inline storage.
#[test]
fn head_fields_read_back_as_parsed() {
    for n in [0, 3, 150] {
        let mut wire = String::from("PURGE /p HTTP/1.1\r\nHost: h\r\n");
        for i in 0..n {
            wire.push_str(&format!("X-F{i}: v{i}\r\n"));
        }
        wire.push_str("\r\n");
        let limits = Limits {
            max_headers: 200,
            ..Limits::default()
        };
        let mut storage = vec![httparse::EMPTY_HEADER; 200];
        let head = match parse_request(wire.as_bytes(), &mut storage, &limits) {
            Ok(Status::Complete(h)) => h,
            other => panic!("{n}: {other:?}"),
        };
        let mut fields = HeadFields::default();
        fields.record(&head, wire.as_bytes());
        let want: Vec<(String, Vec<u8>)> = head
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect();
        let got = fields.with(wire.as_bytes(), |method, headers| {
            assert_eq!(method, "PURGE");
            headers
                .iter()
                .map(|h| (h.name.to_string(), h.value.to_vec()))
                .collect::<Vec<_>>()
        });
        assert_eq!(got, want, "{n}");
        assert_eq!(got.len(), n + 1);
    }
}

/// The upstream head for `wire` on a route with `route`'s options (default forwarding off).
fn upstream_on(wire: &str, route: &RouteOpts) -> String {
    let mut storage = [httparse::EMPTY_HEADER; 32];
    let head = match parse_request(wire.as_bytes(), &mut storage, &Limits::default()) {
        Ok(Status::Complete(h)) => h,
        other => panic!("{wire:?}: {other:?}"),
    };
    let target = origin_form(head.target);
    let off = HeaderOptions {
        preserve_host: true,
        x_forwarded_for: false,
        x_real_ip: false,
        x_forwarded_proto: false,
        ..HeaderOptions::default()
    };
    let mut out = BytesMut::new();
    let ip = ClientAddr::new(IpText::new(IP.parse().unwrap()));
    write_upstream_head(
        (&head, wire.as_bytes()),
        &target,
        false,
        (&off, Some(route)),
        &ip,
        &mut out,
    );
    String::from_utf8(out.to_vec()).unwrap()
}

fn strip(prefix: &str) -> RouteOpts {
    let mut scratch = Vec::new();
    let n = route_path(prefix.as_bytes(), &mut scratch)
        .unwrap()
        .path
        .len();
    RouteOpts {
        strip: Some(n),
        ..RouteOpts::default()
    }
}

#[test]
fn strip_prefix_removes_the_routes_prefix_from_the_normal_path() {
    // (route prefix, client target, upstream target)
    let table = [
        ("/api/", "/api/users?x=1", "/users?x=1"),
        ("/api/", "/api/", "/"),
        ("/api/", "/api/?q", "/?q"),
        ("/api/", "/api/a/b/", "/a/b/"),
        ("/api", "/api/users", "/users"),
        ("/api", "/api", "/"),
        ("/api", "/api?x=%41", "/?x=%41"),
        // A plain byte prefix, as routing is: `/api` matches `/apiary`.
        ("/api", "/apiary", "/ary"),
        // The normal form routing used: escapes of unreserved characters decoded, dot
        // segments and repeated slashes gone; other escapes kept (hex upper-cased).
        ("/api/", "/%61pi/x%2fy", "/x%2Fy"),
        ("/api/", "//api//a/./b/../c", "/a/c"),
        ("/api/", "/api/%7euser?a=%2f", "/~user?a=%2f"),
        // The prefix is matched decoded (`%2F` a separator, `%40` an `@`): what makes it is
        // taken off the normal form, whose other escapes stay.
        ("/api/", "/api%2Fx%2Fy?q", "/x%2Fy?q"),
        ("/@in/", "/%40in/a%2fb", "/a%2Fb"),
        ("/", "/x/y", "/x/y"),
        // Absolute-form: the origin-form part.
        ("/api/", "http://h/api/v?1", "/v?1"),
    ];
    for (prefix, target, want) in table {
        let wire = format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n");
        let got = upstream_on(&wire, &strip(prefix));
        let line = got.lines().next().unwrap();
        assert_eq!(line, format!("GET {want} HTTP/1.1"), "{prefix} {target}");
    }
}

#[test]
fn request_headers_set_replaces_every_copy_and_remove_drops_every_copy() {
    use crate::config::route_opts::{header_edits, Side};
    let set = [("X-Env", "prod"), ("X-Forwarded-For", "fixed")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let edits = header_edits(&set, &["X-Debug".into()], Side::Request).unwrap();
    let route = RouteOpts {
        request: Some(edits),
        ..RouteOpts::default()
    };
    let wire = "POST /p HTTP/1.1\r\nHost: h\r\nx-env: dev\r\nX-Debug: 1\r\nA: 1\r\n\
                X-ENV: test\r\nx-debug: 2\r\nX-Forwarded-For: 1.2.3.4\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(
        upstream_on(wire, &route),
        "POST /p HTTP/1.1\r\nHost: h\r\nA: 1\r\nX-Env: prod\r\nX-Forwarded-For: fixed\r\n\
         Content-Length: 0\r\n"
    );
    // Host set: the client's is replaced (and counts as written).
    let host: std::collections::BTreeMap<String, String> =
        [("Host".to_string(), "app.internal".to_string())].into();
    let route = RouteOpts {
        request: Some(header_edits(&host, &[], Side::Request).unwrap()),
        ..RouteOpts::default()
    };
    let wire = "GET / HTTP/1.1\r\nHost: client.example\r\nB: 2\r\n\r\n";
    assert_eq!(
        upstream_on(wire, &route),
        "GET / HTTP/1.1\r\nB: 2\r\nHost: app.internal\r\n"
    );
}

/// A trusted peer's X-Forwarded-For names the client: X-Real-IP says it; X-Forwarded-For keeps
/// the client's list and appends the peer, the hop the request came from (nginx's
/// `$proxy_add_x_forwarded_for` would append the derived address, repeating it).
#[test]
fn real_ip_from_a_trusted_peer() {
    let opts = HeaderOptions {
        real_ip_from: vec![crate::cidr::Cidr::parse("10.0.0.0/8").unwrap()],
        ..HeaderOptions::default()
    };
    for (wire, real, xff) in [
        (
            "X-Forwarded-For: 198.51.100.1\r\n",
            "198.51.100.1",
            "198.51.100.1, 10.0.0.9",
        ),
        (
            "X-Forwarded-For: 1.1.1.1, 198.51.100.1, 10.0.0.3\r\n",
            "198.51.100.1",
            "1.1.1.1, 198.51.100.1, 10.0.0.3, 10.0.0.9",
        ),
        ("", "10.0.0.9", "10.0.0.9"),
    ] {
        let wire = format!("GET / HTTP/1.1\r\nHost: a\r\n{wire}\r\n");
        let mut storage = [httparse::EMPTY_HEADER; 32];
        let Ok(Status::Complete(head)) =
            parse_request(wire.as_bytes(), &mut storage, &Limits::default())
        else {
            panic!("{wire:?}")
        };
        let mut ip = ClientAddr::new(IpText::new(IP.parse().unwrap()));
        ip.derive(&opts, head.headers);
        assert_eq!(ip.as_bytes(), real.as_bytes());
        assert_eq!(ip.peer().as_bytes(), IP.as_bytes());
        let mut out = BytesMut::new();
        write_upstream_head(
            (&head, wire.as_bytes()),
            "/",
            false,
            (&opts, None),
            &ip,
            &mut out,
        );
        let text = String::from_utf8(out.to_vec()).unwrap();
        let want = format!("X-Forwarded-For: {xff}\r\nX-Real-IP: {real}\r\n");
        assert!(text.contains(&want), "{text}");
        ip.forget_real();
        assert_eq!(ip.as_bytes(), IP.as_bytes());
    }
}

/// The address record every idle connection holds (`client::Parked`): the port sits in its
/// padding.
#[test]
fn the_address_record_stays_small() {
    assert!(
        std::mem::size_of::<IpText>() <= 80,
        "{}",
        std::mem::size_of::<IpText>()
    );
    let t = IpText::of("[::ffff:10.0.0.1]:4711".parse().unwrap());
    assert_eq!(
        (t.as_bytes(), t.addr()),
        (&b"10.0.0.1"[..], "10.0.0.1:4711".parse().unwrap())
    );
}

/// A config with a route for each part of the decision a repeated head takes from the memo:
/// forwarding fields (with a trusted peer, `real_ip_from`, when `real_ip`), a cached route
/// (fields' positions), a stripped prefix, edited fields, groups hashed by a field and by the
/// client's address, a rate limit.
fn memo_config(preserve_host: bool, real_ip: bool) -> Arc<crate::config::Config> {
    let trusted = if real_ip { "[\"10.0.0.0/8\"]" } else { "[]" };
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\
         [headers]\nreal_ip_from = {trusted}\npreserve_host = {preserve_host}\n\
         [upstream.app]\nservers = [\"127.0.0.1:9\"]\n\
         [upstream.hashed]\nservers = [\"127.0.0.1:9\", \"127.0.0.1:10\"]\n\
         balance = \"hash\"\nhash_key = \"header:X-User\"\n\
         [upstream.by_addr]\nservers = [\"127.0.0.1:9\", \"127.0.0.1:10\"]\n\
         balance = \"hash\"\nhash_key = \"remote_addr\"\n\
         [[route]]\npath = \"/ha/\"\nupstream = \"by_addr\"\n\
         [[route]]\npath = \"/acl/\"\nupstream = \"app\"\nallow = [\"10.0.0.0/8\"]\n\
         [[route]]\npath = \"/xff-only/\"\nupstream = \"app\"\n\
         request_headers = {{ remove = [\"X-Real-IP\"] }}\n\
         [[route]]\nhost = \"cached.test\"\nupstream = \"app\"\ncache = {{}}\n\
         [[route]]\npath = \"/api/\"\nupstream = \"app\"\nstrip_prefix = true\n\
         [[route]]\npath = \"/edit/\"\nupstream = \"app\"\n\
         request_headers = {{ set = {{ \"X-Env\" = \"prod\" }}, remove = [\"X-Drop\"] }}\n\
         [[route]]\npath = \"/h/\"\nupstream = \"hashed\"\n\
         [[route]]\npath = \"/limited/\"\nupstream = \"app\"\nlimit = {{ rate = \"1/m\", burst = 1 }}\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\n"
    );
    Arc::new(crate::config::from_toml("memo.toml", &text).expect("the memo test's config"))
}

/// Everything a decision leaves for the exchange, as text: the request's record, the upstream
/// head (or answer), the client's address, the cached route's fields.
fn decision(
    r: Result<Option<RequestInfo>, ProxyError>,
    buf: &[u8],
    ip: &ClientAddr,
    out: &BytesMut,
    fields: &HeadFields,
) -> String {
    let fields = fields.with(buf, |m, f| {
        let f: Vec<_> = f.iter().map(|h| (h.name, h.value)).collect();
        format!("{m} {f:?}")
    });
    format!(
        "{r:?}\n{}\nclient {} peer {}\nfields {fields}",
        String::from_utf8_lossy(out),
        String::from_utf8_lossy(ip.as_bytes()),
        String::from_utf8_lossy(ip.peer().as_bytes()),
    )
}

/// Every combination of `radix` (each coordinate from 0 to its radix), each differing from the
/// one before in one coordinate alone (a reflected mixed-radix Gray code).
fn one_change_at_a_time(radix: &[usize]) -> Vec<Vec<usize>> {
    let Some((&first, rest)) = radix.split_first() else {
        return vec![vec![]];
    };
    let inner = one_change_at_a_time(rest);
    let mut all = vec![];
    for i in 0..first {
        let mut tails = inner.clone();
        if i % 2 == 1 {
            tails.reverse();
        }
        all.extend(tails.into_iter().map(|t| [vec![i], t].concat()));
    }
    all
}

/// A head repeated byte for byte is decided from the memo: exactly as its parse decides it,
/// whatever else changed since the memo kept it (the peer, its scheme, the configuration, the
/// bytes behind the head), a refusal by the route's access rule included. The inputs come in
/// an order where each differs from the one before in one of those alone, then in the
/// reverse order; each runs twice (the second from the memo).
#[test]
fn a_repeated_head_is_decided_as_its_parse_decides_it() {
    let gens = [
        Generation::new(1, memo_config(true, true), 1),
        Generation::new(2, memo_config(false, true), 1),
        Generation::new(3, memo_config(true, false), 1),
    ];
    let rng = crate::answer::Rng::new(1);
    let w = || AnswerCtx {
        rng: &rng,
        draining: false,
    };
    let heads = [
        "GET /a?b HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 198.51.100.1\r\nX-Real-IP: 6.6.6.6\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: cached.test\r\nAccept: */*\r\nCache-Control: no-cache\r\n\r\n",
        "GET /api/v1/x?q HTTP/1.1\r\nHost: h\r\n\r\n",
        "POST /edit/x HTTP/1.1\r\nHost: h\r\nX-Drop: 1\r\nX-Env: dev\r\nContent-Length: 3\r\n\r\n",
        "GET /h/x HTTP/1.1\r\nHost: h\r\nX-User: ann\r\nConnection: X-User, keep-alive\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\n",
        "GET /ha/x HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /acl/x HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /xff-only/x HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1\r\n\r\n",
    ];
    let peers = ["10.0.0.9", "192.0.2.7", "2001:db8::1", "::ffff:192.0.2.9"];
    let tails = ["", "abc", "GET / HTTP/1.1\r\n"];
    let order = one_change_at_a_time(&[heads.len(), gens.len(), peers.len(), 2, tails.len()]);
    assert_eq!(order.len(), 9 * 3 * 4 * 2 * 3);
    // Forwards, then backwards: each change made in both directions (a proxied request then a
    // refused one, and the other way round).
    for c in order.iter().chain(order.iter().rev()) {
        let (head, g, peer, https, tail) = (
            heads[c[0]],
            &gens[c[1]],
            peers[c[2]],
            c[3] == 1,
            tails[c[4]],
        );
        let buf = format!("{head}{tail}");
        let buf = buf.as_bytes();
        let run = |fresh: bool| {
            let mut text = IpText::new(peer.parse().unwrap());
            text.set_https(https);
            let mut ip = ClientAddr::new(text);
            let mut out = BytesMut::from(&b"left over"[..]);
            let mut fields = HeadFields::default();
            let r = if fresh {
                let spots = &mut AddrSpots::default();
                parse_and_decide(w(), g, buf, &mut ip, (&mut out, spots), &mut fields)
            } else {
                prepare_request(w(), g, buf, &mut ip, &mut out, &mut fields)
            };
            decision(r, buf, &ip, &out, &fields)
        };
        let want = run(true);
        let case = format!("{head:?} + {tail:?}, config {}, {peer} https {https}", c[1]);
        assert_eq!(run(false), want, "{case}");
        assert_eq!(run(false), want, "{case}, repeated");
    }
}

/// The guards run for every request, the repeated ones too: a rate limit of one a minute
/// proxies the first of three alike requests and refuses the next two (decided from the
/// memo) with a 429; another client's alike request is proxied, with its own address.
#[test]
fn a_repeated_head_still_meets_the_rate_limit() {
    let g = Generation::new(1, memo_config(true, true), 1);
    let rng = crate::answer::Rng::new(1);
    let buf = b"GET /limited/x HTTP/1.1\r\nHost: h\r\n\r\n";
    let mut statuses = vec![];
    for _ in 0..3 {
        let mut ip = ClientAddr::new(IpText::new("192.0.2.7".parse().unwrap()));
        let mut out = BytesMut::new();
        let w = AnswerCtx {
            rng: &rng,
            draining: false,
        };
        let info = prepare_request(w, &g, buf, &mut ip, &mut out, &mut HeadFields::default())
            .expect("a good head")
            .expect("a whole head");
        statuses.push(match info.dispatch {
            Dispatch::Proxy { .. } => "proxied".to_string(),
            Dispatch::Refused { why, .. } => {
                let answer = String::from_utf8_lossy(&out);
                format!("{why:?} {}", answer.lines().next().unwrap_or(""))
            }
            other => format!("{other:?}"),
        });
        assert!(!info.websocket && info.head_len == buf.len());
    }
    assert_eq!(statuses[0], "proxied");
    for s in &statuses[1..] {
        assert!(
            s.starts_with("Limited") && s.ends_with("429 Too Many Requests"),
            "{statuses:?}"
        );
    }
    // Another client of the same head is not limited by the first one's count.
    let mut ip = ClientAddr::new(IpText::new("192.0.2.8".parse().unwrap()));
    let mut out = BytesMut::new();
    let w = AnswerCtx {
        rng: &rng,
        draining: false,
    };
    let info = prepare_request(w, &g, buf, &mut ip, &mut out, &mut HeadFields::default());
    assert!(
        matches!(
            info,
            Ok(Some(RequestInfo {
                dispatch: Dispatch::Proxy { .. },
                ..
            }))
        ),
        "{info:?}"
    );
    assert!(String::from_utf8_lossy(&out).contains("X-Real-IP: 192.0.2.8\r\n"));
}

/// Where no peer is trusted to name the client and no group hashes its address, a head
/// repeated by another peer is decided from the memo too (clients that each open a
/// connection for one request send the same head from many addresses): its address is
/// written where the kept peer's stood. Where a peer may name the client, it is not.
#[test]
fn a_head_repeated_by_another_peer_comes_from_the_memo_where_the_peer_decides_nothing() {
    let rng = crate::answer::Rng::new(1);
    let buf = b"GET /a HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 198.51.100.1\r\n\r\n";
    let from = |peer: &str| ClientAddr::new(IpText::new(peer.parse().unwrap()));
    for (real_ip, path, reused) in [
        (false, "/a", true),
        (true, "/a", false),
        (false, "/ha/", false),
    ] {
        let g = Generation::new(1, memo_config(true, real_ip), 1);
        let buf = String::from_utf8_lossy(buf).replace("/a", path);
        let buf = buf.as_bytes();
        let w = AnswerCtx {
            rng: &rng,
            draining: false,
        };
        let mut out = BytesMut::new();
        let mut fields = HeadFields::default();
        let first = prepare_request(w, &g, buf, &mut from("192.0.2.7"), &mut out, &mut fields);
        assert!(matches!(first, Ok(Some(_))), "{first:?}");
        let mut ip = from("2001:db8::1");
        let recalled = memo::recall(&g.cfg, buf, &mut ip, &mut out, &mut fields);
        assert_eq!(recalled.is_some(), reused, "real_ip {real_ip}, {path}");
        if reused {
            let text = String::from_utf8_lossy(&out);
            assert!(
                text.contains(
                    "X-Forwarded-For: 198.51.100.1, 2001:db8::1\r\nX-Real-IP: 2001:db8::1\r\n"
                ),
                "{text}"
            );
        }
    }
}
