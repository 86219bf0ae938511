//! What the per-server counters and the access log say of upstream answers and of the bytes
//! sent, one worker, a JSON log: the origin's own status (not the client's: a 304 that
//! revalidated a stored answer, a 200 whose client had gone), an answer dropped for a retry on
//! its status, interim heads and the bytes of a write a send timeout cut.

use super::metrics::scrape;
use shared::origin::{Origin, OriginConfig};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::mpsc;
use tests::raw::{self, WAIT};
use tests::reload::Scratch;
use tests::toml_proxy::{access_log, config_parts, Parts, WITH_ADMIN};

/// A one-worker proxy with an admin listener and a JSON access log at `log`; `rest`: its
/// upstreams, routes and anything else.
fn start(log: &Path, rest: &str) -> proxy::Running {
    start_with(log, WITH_ADMIN, rest)
}

/// [`start`] with `parts`' `[runtime]` and `[timeouts]` lines (its `top` is the log's).
fn start_with(log: &Path, parts: Parts, rest: &str) -> proxy::Running {
    let top = access_log(log, "json");
    let text = config_parts(Parts { top: &top, ..parts }, rest);
    let cfg = proxy::config::from_toml("accounting.toml", &text).expect("config");
    proxy::start(cfg).expect("proxy starts")
}

/// The scrape once `n` requests are counted (each request's record is finished when its
/// connection is done with it, which may come after the client saw its answer).
fn counted(admin: SocketAddr, n: f64) -> HashMap<String, f64> {
    let total = |m: &HashMap<String, f64>| -> f64 {
        m.iter()
            .filter(|(k, _)| k.starts_with("proxy_request_duration_seconds_count"))
            .map(|(_, v)| v)
            .sum()
    };
    let mut m = scrape(admin);
    let done = tests::eventually(WAIT, || {
        m = scrape(admin);
        total(&m) == n
    });
    assert!(done, "{} requests counted, {n} expected", total(&m));
    m
}

/// The log's lines, once the proxy's shutdown flushed them.
fn log_lines(p: proxy::Running, log: &Path) -> Vec<serde_json::Value> {
    p.shutdown().expect("shutdown");
    let text = std::fs::read_to_string(log).expect("the log exists");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The line of the request for `path` (with any query).
fn line_of<'a>(lines: &'a [serde_json::Value], path: &str) -> &'a serde_json::Value {
    let target = |l: &serde_json::Value| {
        let t = l["request"].as_str()?.split(' ').nth(1)?;
        Some(t.split_once('?').map_or(t, |(p, _)| p) == path)
    };
    lines
        .iter()
        .find(|l| target(l) == Some(true))
        .unwrap_or_else(|| panic!("no line for {path}: {lines:#?}"))
}

/// `name{group="g",server="s"<more>}`'s value in `m` (0 when absent).
fn server_count(
    m: &HashMap<String, f64>,
    name: &str,
    (g, s): (&str, SocketAddr),
    more: &str,
) -> f64 {
    let key = format!(r#"{name}{{group="{g}",server="{s}"{more}}}"#);
    m.get(&key).copied().unwrap_or(0.0)
}

fn get(path: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n").into_bytes()
}

/// An origin for one request: it sends a 200 head for a 5-byte body, says so on the first
/// channel, and once told on the second sends the body, or closes without it when `cut`.
fn held_origin(cut: bool) -> (SocketAddr, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (sent, head_sent) = mpsc::channel();
    let (go, told) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let Ok((mut s, _)) = l.accept() else { return };
        if raw::read_request_head(&mut s, &mut Vec::new()).is_err() {
            return;
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
        let _ = sent.send(());
        let _ = told.recv();
        if cut {
            return;
        }
        let _ = s.write_all(b"hello");
        let _ = s.read_to_end(&mut Vec::new());
    });
    (addr, head_sent, go)
}

/// `proxy_upstream_responses_total{code}` and the log's `upstream_status` are the status the
/// origin answered with, as nginx's `$upstream_status`: a stale answer revalidated with a 304
/// is a 3xx there (the client got 200), a 200 whose client reset before it could be written
/// is a 2xx (the client's 499 is `proxy_requests_total`'s). They were the client's status.
#[test]
fn upstream_responses_count_the_origins_status_not_the_clients() {
    let dir = Scratch::new("upstream-status");
    let log = dir.path("access.log");
    let origin = Origin::start(OriginConfig::default()).expect("origin");
    let (held, head_sent, go) = held_origin(false);
    let rest = format!(
        r#"
[upstream.app]
servers = ["{}"]

[upstream.held]
servers = ["{held}"]

[[route]]
path = "/ret"
return = {{ status = 404, body = "no" }}

[[route]]
path = "/held"
upstream = "held"

[[route]]
path = "/"
upstream = "app"
cache = {{ ttl = "60s" }}
"#,
        origin.addr()
    );
    let p = start(&log, &rest);
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    let page = "/page?header=ETag:%22v1%22";
    let first = raw::exchange(addr, &get(page, ""), WAIT);
    assert_eq!(first.responses()[0].header("x-cache"), Some("MISS"));
    let again = raw::exchange(addr, &get(page, "Cache-Control: no-cache\r\n"), WAIT);
    let again = &again.responses()[0];
    assert_eq!(
        (again.status, again.header("x-cache")),
        (200, Some("REVALIDATED"))
    );
    assert_eq!(
        raw::exchange(addr, &get("/ret", ""), WAIT).responses()[0].status,
        404
    );
    // The client resets once the origin's head is on its way: the proxy has it (the answer
    // wins over the client's end) and holds it for the short body, whose write then fails.
    let mut c = raw::Client::connect(addr);
    c.send(&get("/held", "")).expect("sent");
    head_sent.recv_timeout(WAIT).expect("the origin answered");
    socket2::SockRef::from(&c.stream)
        .set_linger(Some(std::time::Duration::ZERO))
        .unwrap();
    drop(c);
    go.send(()).unwrap();
    let m = counted(admin, 4.0);
    let responses = |group, server, code: &str| {
        let code = format!(r#",code="{code}""#);
        server_count(&m, "proxy_upstream_responses_total", (group, server), &code)
    };
    let o = origin.addr();
    assert_eq!(
        (responses("app", o, "2xx"), responses("app", o, "3xx")),
        (1.0, 1.0),
        "the miss's 200 and the revalidation's 304"
    );
    assert_eq!(
        (
            responses("held", held, "2xx"),
            responses("held", held, "4xx")
        ),
        (1.0, 0.0),
        "the origin's 200, whose client got nothing"
    );
    assert_eq!(
        m.get(r#"proxy_requests_total{route="/held",code="4xx"}"#),
        Some(&1.0)
    );
    let lines = log_lines(p, &log);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    let revalidated = lines
        .iter()
        .find(|l| l["cache"] == "REVALIDATED")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(
        (&revalidated["status"], &revalidated["upstream_status"]),
        (&200.into(), &serde_json::json!([304]))
    );
    let miss = lines.iter().find(|l| l["cache"] == "MISS").unwrap();
    assert_eq!(miss["upstream_status"], serde_json::json!([200]), "{miss}");
    let held_line = line_of(&lines, "/held");
    assert_eq!(
        (&held_line["status"], &held_line["upstream_status"]),
        (&499.into(), &serde_json::json!([200]))
    );
    assert_eq!(
        line_of(&lines, "/ret")["upstream_status"],
        serde_json::Value::Null
    );
}

/// The origin closes mid-body while its head waits for that short body, and the client has
/// reset: the head's write fails too. Both ends failed; the server's failure came first and
/// is the one the record and the counters keep: the fault `upstream_closed` (the client's
/// 499 is its status), a failure in the server's `failures_total`. The client's error took
/// its place: the fault was `client_gone` and the server's failure was neither counted nor
/// told of on stderr.
#[test]
fn a_body_cut_while_the_client_is_gone_is_the_servers_failure() {
    let dir = Scratch::new("cut-and-gone");
    let log = dir.path("access.log");
    let (held, head_sent, close) = held_origin(true);
    let rest = format!("\n[upstream.held]\nservers = [\"{held}\"]\n\n[[route]]\npath = \"/\"\nupstream = \"held\"\n");
    let p = start(&log, &rest);
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    // As in `upstream_responses_count_the_origins_status_not_the_clients`: the proxy has the
    // head before the client's reset (the answer wins over the client's end), and holds it for
    // the short body; then the origin closes instead of sending it.
    let mut c = raw::Client::connect(addr);
    c.send(&get("/cut", "")).expect("sent");
    head_sent.recv_timeout(WAIT).expect("the origin answered");
    socket2::SockRef::from(&c.stream)
        .set_linger(Some(std::time::Duration::ZERO))
        .unwrap();
    drop(c);
    close.send(()).unwrap();
    let m = counted(admin, 1.0);
    let faults = |kind: &str| {
        m.get(&format!(r#"proxy_request_faults_total{{kind="{kind}"}}"#))
            .copied()
    };
    assert_eq!(
        (faults("upstream_closed"), faults("client_gone")),
        (Some(1.0), Some(0.0)),
        "request faults: upstream_closed, client_gone"
    );
    let failed = server_count(
        &m,
        "proxy_upstream_failures_total",
        ("held", held),
        r#",kind="upstream_closed""#,
    );
    assert_eq!(failed, 1.0, "the server's failures");
    let lines = log_lines(p, &log);
    let l = line_of(&lines, "/cut");
    assert_eq!(
        (
            &l["status"],
            &l["upstream_status"],
            &l["fault"],
            &l["bytes_sent"]
        ),
        (
            &499.into(),
            &serde_json::json!([200]),
            &"upstream_closed".into(),
            &0.into()
        ),
        "{l}"
    );
}

/// A stored answer revalidated with a 304 (`cache: REVALIDATED`, the client gets the stored
/// 200) logs the 304's exchange as nginx does: `upstream_response_time` is the time spent on
/// it (the origin waits 100 ms before each answer), beside its `upstream_status` and
/// `upstream_addr`. It was null: only a relayed answer set it.
#[test]
fn a_revalidation_answered_304_logs_the_time_of_its_exchange() {
    let dir = Scratch::new("revalidated-time");
    let log = dir.path("access.log");
    let origin = tests::origin();
    let o = origin.addr();
    let rest = format!(
        "\n[upstream.app]\nservers = [\"{o}\"]\n\n[[route]]\npath = \"/\"\nupstream = \"app\"\ncache = {{ ttl = \"60s\" }}\n"
    );
    let p = start(&log, &rest);
    let addr = p.listen_addrs()[0];
    let page = "/page?header=ETag:%22v1%22&delay=100ms";
    let first = raw::exchange(addr, &get(page, ""), WAIT);
    assert_eq!(
        first.responses()[0].header("x-cache"),
        Some("MISS"),
        "{}",
        raw::show(&first)
    );
    let again = raw::exchange(addr, &get(page, "Cache-Control: no-cache\r\n"), WAIT);
    let again = &again.responses()[0];
    assert_eq!(
        (again.status, again.header("x-cache")),
        (200, Some("REVALIDATED"))
    );
    let lines = log_lines(p, &log);
    let l = lines
        .iter()
        .find(|l| l["cache"] == "REVALIDATED")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(
        (&l["upstream_status"], &l["upstream_addr"]),
        (&serde_json::json!([304]), &o.to_string().into()),
        "{l}"
    );
    let header = l["upstream_header_time"][0].as_f64();
    let spent = l["upstream_response_time"][0].as_f64();
    assert!(header.is_some_and(|h| h >= 0.1), "{l}");
    assert!(
        spent.is_some_and(|t| t >= header.unwrap_or(f64::MAX)),
        "{l}"
    );
}

/// An answer the route retries on (a 502, then another server) is a response of its server
/// (`responses_total{code="5xx"}`) and a failed attempt there (`failures_total{kind="status"}`,
/// as nginx counts a `proxy_next_upstream http_502` attempt unsuccessful). It was neither: the
/// server had a request and no answer.
#[test]
fn an_answer_dropped_for_a_retry_counts_against_its_server() {
    let dir = Scratch::new("retried-status");
    let log = dir.path("access.log");
    let bad = Origin::start(OriginConfig {
        status: 502,
        ..OriginConfig::default()
    })
    .expect("origin");
    let good = tests::origin();
    let (b, g) = (bad.addr(), good.addr());
    // The 502 server first: round-robin tries it first.
    let rest = format!(
        r#"
[upstream.two]
servers = ["{b}", "{g}"]

[[route]]
path = "/"
upstream = "two"
retry = {{ tries = 2, on = ["502"] }}
"#
    );
    let p = start(&log, &rest);
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    let r = raw::exchange(addr, &get("/a", ""), WAIT);
    assert_eq!(r.responses()[0].status, 200, "{}", raw::show(&r));
    let m = counted(admin, 1.0);
    let at = |server, name, more: &str| server_count(&m, name, ("two", server), more);
    let want = [
        (at(b, "proxy_upstream_requests_total", ""), 1.0),
        (
            at(b, "proxy_upstream_responses_total", r#",code="5xx""#),
            1.0,
        ),
        (
            at(b, "proxy_upstream_failures_total", r#",kind="status""#),
            1.0,
        ),
        (
            at(g, "proxy_upstream_responses_total", r#",code="2xx""#),
            1.0,
        ),
        (
            at(g, "proxy_upstream_failures_total", r#",kind="status""#),
            0.0,
        ),
    ];
    let got: Vec<f64> = want.iter().map(|w| w.0).collect();
    assert_eq!(
        got,
        want.map(|w| w.1),
        "502 server: requests, 5xx, failures; the other: 2xx, failures"
    );
    assert_eq!(
        m.get(r#"proxy_upstream_retries_total{route="/",reason="status"}"#),
        Some(&1.0)
    );
    let lines = log_lines(p, &log);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    // Both attempts, as nginx's `$upstream_status` and `$upstream_addr` list them.
    let line = &lines[0];
    assert_eq!(
        line["upstream_status"],
        serde_json::json!([502, 200]),
        "{line}"
    );
    assert_eq!(line["upstream_addr"], format!("{b}, {g}"), "{line}");
}

/// A 103 Early Hints relayed to the client is bytes it got: `bytes_sent` and
/// `proxy_sent_bytes_total` count it (as nginx's `$bytes_sent` counts every byte written).
/// They counted only the final response (99 of 152 bytes).
#[test]
fn early_hints_are_counted_in_the_bytes_sent() {
    let dir = Scratch::new("early-hints-bytes");
    let log = dir.path("access.log");
    let origin = tests::origin();
    let rest = format!(
        "\n[upstream.app]\nservers = [\"{}\"]\n\n[[route]]\npath = \"/\"\nupstream = \"app\"\n",
        origin.addr()
    );
    let p = start(&log, &rest);
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    let r = raw::exchange(addr, &get("/?interim=103&size=10", ""), WAIT);
    assert!(r.text().starts_with("HTTP/1.1 103 "), "{}", raw::show(&r));
    let got = r.bytes.len() as f64;
    let m = counted(admin, 1.0);
    assert_eq!(
        m.get("proxy_sent_bytes_total"),
        Some(&got),
        "{}",
        raw::show(&r)
    );
    let lines = log_lines(p, &log);
    assert_eq!(lines[0]["bytes_sent"], got, "{}", lines[0]);
    assert_eq!(lines[0]["body_bytes_sent"], 10, "{}", lines[0]);
    assert_eq!(lines[0]["status"], 200, "{}", lines[0]);
}

/// A client that stops reading a large response until the send timeout (300 ms) cuts it:
/// every byte the proxy's writes delivered is counted in `bytes_sent` and
/// `proxy_sent_bytes_total`, the part of the write the timeout cut included (the chunked
/// relay and a Content-Length body copied without splice). That part was lost (a client got
/// 3,284,992 bytes, 3,277,719 counted).
#[test]
fn bytes_of_a_write_cut_by_the_send_timeout_are_counted() {
    let dir = Scratch::new("cut-write-bytes");
    let log = dir.path("access.log");
    let origin = tests::origin();
    let rest = format!(
        "\n[upstream.app]\nservers = [\"{}\"]\n\n[[route]]\npath = \"/\"\nupstream = \"app\"\n",
        origin.addr()
    );
    let parts = Parts {
        runtime: "splice = false\n",
        timeouts: "send = \"300ms\"\n",
        ..WITH_ADMIN
    };
    let p = start_with(&log, parts, &rest);
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    let mut got = Vec::new();
    for (i, path) in ["/c?framing=chunked&size=4MiB", "/l?size=4MiB"]
        .iter()
        .enumerate()
    {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        // A small window, so that the proxy's writes stop partway.
        s.set_recv_buffer_size(8192).unwrap();
        s.connect(&addr.into()).unwrap();
        let mut c = raw::Client::from_stream(s.into());
        c.send(&get(path, "")).expect("sent");
        // Not a byte read until the proxy gave up on the client.
        counted(admin, i as f64 + 1.0);
        let r = c.until_close(WAIT);
        assert_ne!(r.end, raw::End::TimedOut, "{path}: no close");
        assert!(r.bytes.len() < 4 << 20, "{path}: the whole body went");
        got.push(r.bytes.len() as u64);
    }
    let m = counted(admin, 2.0);
    let total = (got[0] + got[1]) as f64;
    let lines = log_lines(p, &log);
    let logged: Vec<u64> = ["/c", "/l"]
        .iter()
        .map(|path| line_of(&lines, path)["bytes_sent"].as_u64().unwrap())
        .collect();
    assert_eq!(logged, got, "bytes_sent, chunked then length");
    assert_eq!(m.get("proxy_sent_bytes_total"), Some(&total));
}
