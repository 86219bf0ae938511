// The route and template layer: routes built from fuzzed hosts, path prefixes and `return`
// templates (a `Location` and a body with `{variables}`), then a fuzzed request routed and
// answered. The loader either refuses the routes with one line naming the file, or the
// router picks one of them and the answer is exactly one well-framed response whose
// `Location` is one field value. Never a panic.
//
// Input: route lines, a NUL byte, then the request. A route line is
// `host|path|location|body` (an empty host: any host; an empty location: a 200 with the
// body alone).
//
// Shared by the libFuzzer target (`fuzz_targets/route_template.rs`) and the seed replay in
// `cargo test` (`proxy/src/request_path.rs`), both through `include!`: plain `//` comments
// only, no inner attributes.

use proxy::request_path::{Prepared, RequestPath};
use shared::http::limits::MAX_HEADERS_CAP;
use shared::http::{parse_final_response, parse_request, BodyKind, Limits, Status};

// A TOML basic string holding `s` exactly.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// The config text for the route lines (at most 8 routes), and how many routes it has.
fn config_text(routes: &str) -> (String, usize) {
    let mut text = String::from(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[upstream.app]\nservers = [\"127.0.0.1:9\"]\n",
    );
    let mut n = 0;
    for line in routes.lines().take(8) {
        let mut f = line.splitn(4, '|');
        let (host, path) = (f.next().unwrap_or(""), f.next().unwrap_or("/"));
        let (location, body) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
        text.push_str("[[route]]\n");
        if !host.is_empty() {
            text.push_str(&format!("host = {}\n", toml_string(host)));
        }
        text.push_str(&format!("path = {}\n", toml_string(path)));
        if location.is_empty() {
            text.push_str(&format!("return = {{ status = 200, body = {} }}\n", toml_string(body)));
        } else {
            text.push_str(&format!(
                "return = {{ status = 302, location = {}, body = {} }}\n",
                toml_string(location),
                toml_string(body)
            ));
        }
        n += 1;
    }
    // Whatever matches no fuzzed route goes upstream.
    text.push_str("[[route]]\npath = \"/\"\nupstream = \"app\"\n");
    (text, n + 1)
}

pub fn check(data: &[u8]) {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(routes) = std::str::from_utf8(&data[..split]) else {
        return;
    };
    let request = data.get(split + 1..).unwrap_or(&[]);
    let (text, count) = config_text(routes);
    let cfg = match proxy::config::from_toml("fuzz.toml", &text) {
        Ok(cfg) => cfg,
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.contains('\n') && msg.starts_with("fuzz.toml:"), "{msg:?}");
            return;
        }
    };
    let path = RequestPath::new(cfg);
    let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 7));
    let Ok(Some(d)) = path.decide(request, ip, false) else {
        return;
    };
    let route = d.route.index();
    assert!(route < count, "route {route} of {count}");
    let Prepared::Answer(a) = d.action else {
        assert_eq!(route, count - 1, "only the last route goes upstream");
        return;
    };
    let limits = Limits {
        max_head: a.len() + 1,
        max_request_line: a.len() + 1,
        ..Limits::default()
    };
    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    let client = match parse_request(request, &mut storage, &Limits::default()) {
        Ok(Status::Complete(h)) => h.request_method(),
        other => panic!("the proxy answered a head the codec reads as {other:?}"),
    };
    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    let resp = match parse_final_response(&a, &mut storage, client, &limits) {
        Ok(Status::Complete(h)) => h,
        other => panic!("the answer does not parse: {other:?}\n{}", String::from_utf8_lossy(&a)),
    };
    let locations = resp
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("location"))
        .count();
    assert!(locations <= 1, "{} Location fields", locations);
    let body = match resp.body {
        BodyKind::Empty => 0,
        BodyKind::Length(n) => n as usize,
        other => panic!("an answer framed {other:?}"),
    };
    assert_eq!(resp.head_len + body, a.len(), "one response, nothing after it");
}
