//! The admin listener with 2 workers: `/metrics` counts a known set of requests exactly (each
//! request once, summed over the workers), `/status` has the same totals per worker and in
//! all, `/healthz` says 200 while serving and 503 while draining, when `/metrics` still
//! answers. The admin endpoints are never on the public listener.

use shared::origin::{Origin, OriginConfig};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;
use tests::raw::{self, End, WAIT};
use tests::toml_proxy::{config_parts, Parts, WITH_ADMIN};

fn config(origin: SocketAddr, extra: &str) -> proxy::config::Config {
    let rest = format!(
        r#"
[upstream.app]
servers = ["{origin}"]

[[route]]
path = "/ret"
return = {{ status = 404, body = "no" }}

[[route]]
path = "/"
upstream = "app"
{extra}
"#
    );
    let parts = Parts {
        workers: 2,
        timeouts: "shutdown = \"3s\"\n",
        ..WITH_ADMIN
    };
    let text = config_parts(parts, &rest);
    proxy::config::from_toml("metrics.toml", &text).expect("config")
}

/// GET `path` from the admin listener: (status, body).
pub(crate) fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: admin\r\n\r\n");
    let r = raw::exchange(addr, req.as_bytes(), WAIT);
    assert_eq!(r.end, End::Closed, "admin {path}: {}", raw::show(&r));
    let resp = r.responses().into_iter().next().expect("a response");
    (
        resp.status,
        String::from_utf8_lossy(&resp.body).into_owned(),
    )
}

/// The samples of a scrape: `name{labels}` -> value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("sample line");
            (k.to_string(), v.parse().expect("sample value"))
        })
        .collect()
}

pub(crate) fn scrape(admin: SocketAddr) -> HashMap<String, f64> {
    let (status, body) = admin_get(admin, "/metrics");
    assert_eq!(status, 200, "{body}");
    samples(&body)
}

/// Send `req` on a connection of its own and read until the proxy closes it: what the client
/// received, in bytes.
fn one(addr: SocketAddr, req: &[u8], status: u16) -> usize {
    let r = raw::exchange(addr, req, WAIT);
    assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
    let resps = r.responses();
    assert_eq!(resps.len(), 1, "{}", raw::show(&r));
    assert_eq!(resps[0].status, status, "{}", raw::show(&r));
    r.bytes.len()
}

#[test]
fn metrics_and_status_count_each_request_once() {
    let origin = Origin::start(OriginConfig {
        body_size: 100,
        ..OriginConfig::default()
    })
    .expect("origin");
    let p = proxy::start(config(origin.addr(), "")).expect("proxy starts");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin address"));
    assert_ne!(addr, admin);
    let proxied = b"GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let answered = b"GET /ret HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let (mut sent, mut received) = (0, 0);
    // Connections of their own: the kernel spreads them over both workers.
    for _ in 0..5 {
        received += one(addr, proxied, 200);
        sent += proxied.len();
    }
    for _ in 0..3 {
        received += one(addr, answered, 404);
        sent += answered.len();
    }
    // Not HTTP: refused before routing, its bytes counted as read.
    let garbage = b"\x16\x03\x01 garbage\r\n\r\n";
    received += one(addr, garbage, 400);
    sent += garbage.len();
    // The bad request's record is finished once the proxy's lingering close sees the client
    // go: wait for that count, then every other count must be exact.
    let total = |m: &HashMap<String, f64>| -> f64 {
        m.iter()
            .filter(|(k, _)| k.starts_with("proxy_request_duration_seconds_count"))
            .map(|(_, v)| v)
            .sum()
    };
    let mut m = scrape(admin);
    assert!(
        tests::eventually(WAIT, || {
            m = scrape(admin);
            total(&m) == 9.0
        }),
        "requests counted: {}",
        total(&m)
    );
    let server = origin.addr().to_string();
    let want = [
        (
            r#"proxy_requests_total{route="/",code="2xx"}"#.to_string(),
            5.0,
        ),
        (r#"proxy_requests_total{route="/",code="5xx"}"#.into(), 0.0),
        (
            r#"proxy_requests_total{route="/ret",code="4xx"}"#.into(),
            3.0,
        ),
        (
            r#"proxy_requests_total{route="(none)",code="4xx"}"#.into(),
            1.0,
        ),
        (
            r#"proxy_request_faults_total{kind="bad_request"}"#.into(),
            1.0,
        ),
        ("proxy_sent_bytes_total".into(), received as f64),
        ("proxy_received_bytes_total".into(), sent as f64),
        ("proxy_client_connections_accepted_total".into(), 9.0),
        ("proxy_client_connections_open".into(), 0.0),
        (
            format!(r#"proxy_upstream_requests_total{{group="app",server="{server}"}}"#),
            5.0,
        ),
        (
            format!(
                r#"proxy_upstream_responses_total{{group="app",server="{server}",code="2xx"}}"#
            ),
            5.0,
        ),
        (
            format!(r#"proxy_upstream_up{{group="app",server="{server}"}}"#),
            1.0,
        ),
        ("proxy_upstream_header_duration_seconds_count".into(), 5.0),
        // Per route, with its group (none for a `return` or before routing).
        (
            r#"proxy_request_duration_seconds_bucket{route="/",group="app",le="+Inf"}"#.into(),
            5.0,
        ),
        (
            r#"proxy_request_duration_seconds_count{route="/ret",group=""}"#.into(),
            3.0,
        ),
        (
            r#"proxy_request_duration_seconds_count{route="(none)",group=""}"#.into(),
            1.0,
        ),
        ("proxy_config_generation".into(), 1.0),
        ("proxy_config_last_reload_successful".into(), 1.0),
        ("proxy_workers".into(), 2.0),
    ];
    for (k, v) in want {
        assert_eq!(m.get(&k), Some(&v), "{k}");
    }
    // The process series every exporter has, read at the scrape.
    for (k, least) in [
        ("process_cpu_seconds_total", 0.0),
        ("process_resident_memory_bytes", 1e6),
        ("process_open_fds", 5.0),
        ("process_start_time_seconds", 1.7e9),
        ("proxy_config_last_reload_success_timestamp_seconds", 1.7e9),
    ] {
        assert!(m.get(k).is_some_and(|v| *v >= least), "{k}: {:?}", m.get(k));
    }
    let build = m
        .keys()
        .find(|k| k.starts_with("proxy_build_info{"))
        .expect("build info");
    assert!(
        build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))),
        "{build}"
    );
    assert!(build.contains("commit=\""), "{build}");
    // Both workers took connections (the test means "summed over workers"), and /status
    // agrees with /metrics per worker and in all.
    let (status, body) = admin_get(admin, "/status");
    assert_eq!(status, 200, "{body}");
    let s: serde_json::Value = serde_json::from_str(&body).expect("status is JSON");
    assert_eq!(s["state"], "serving");
    assert_eq!(s["total"]["requests"], 9);
    assert_eq!(s["total"]["responses"]["2xx"], 5);
    assert_eq!(s["total"]["responses"]["4xx"], 4);
    assert_eq!(s["total"]["bytes_out"], received as u64);
    let workers = s["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 2);
    let per: Vec<u64> = workers
        .iter()
        .map(|w| w["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(per.iter().sum::<u64>(), 9, "{per:?}");
    assert_eq!(s["upstreams"][0]["requests"], 5);
    // The public listener does not serve the admin paths: /metrics there is proxied.
    let on_public = raw::exchange(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        WAIT,
    );
    assert!(!on_public.text().contains("proxy_requests_total"));
    assert_eq!(admin_get(admin, "/nothing").0, 404);
    p.shutdown().expect("shutdown");
}

/// An origin that never answers: a request to it stays in flight, and a drain lasts until
/// the shutdown timeout.
fn hanging_origin() -> Origin {
    Origin::start(OriginConfig {
        hang: true,
        capture: true,
        ..OriginConfig::default()
    })
    .expect("origin")
}

#[test]
fn healthz_says_503_while_draining_and_metrics_still_answer() {
    // The origin never answers: the request stays in flight and the drain lasts until the
    // shutdown timeout.
    let origin = hanging_origin();
    let p = proxy::start(config(origin.addr(), "")).expect("proxy starts");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().unwrap());
    assert_eq!(admin_get(admin, "/healthz"), (200, "ok\n".into()));
    let mut held = raw::Client::connect(addr);
    held.send(&raw::get("/held")).unwrap();
    assert!(
        tests::eventually(WAIT, || origin.captured().len() == 1),
        "the request never reached the origin"
    );
    p.trigger_shutdown();
    assert_eq!(admin_get(admin, "/healthz"), (503, "draining\n".into()));
    let m = scrape(admin);
    assert_eq!(m["proxy_client_connections_open"], 1.0);
    let (status, body) = admin_get(admin, "/status");
    assert_eq!(status, 200);
    assert!(body.contains(r#""state":"draining""#), "{body}");
    drop(held);
    p.join().expect("join");
    // The admin listener is gone with the workers.
    assert!(std::net::TcpStream::connect_timeout(&admin, Duration::from_secs(1)).is_err());
}

/// With two workers, the one without a request in flight finishes its drain at once while
/// the other still waits on its request: `/metrics` and `/status` go on answering 200 with
/// the exact totals (the drained worker's final counts stand for it), and `/status` says which
/// worker is done.
#[test]
fn a_worker_done_draining_leaves_its_final_counts_to_the_scrapes() {
    let origin = hanging_origin();
    let p = proxy::start(config(origin.addr(), "")).expect("proxy starts");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().unwrap());
    let answered = b"GET /ret HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    for _ in 0..4 {
        one(addr, answered, 404);
    }
    let requests = |s: &serde_json::Value| s["total"]["requests"].as_u64();
    let status = || {
        let (code, body) = admin_get(admin, "/status");
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).expect("status is JSON")
    };
    assert!(tests::eventually(WAIT, || requests(&status()) == Some(4)));
    let mut held = raw::Client::connect(addr);
    held.send(&raw::get("/held")).unwrap();
    assert!(
        tests::eventually(WAIT, || origin.captured().len() == 1),
        "the request never reached the origin"
    );
    p.trigger_shutdown();
    let mut last = serde_json::Value::Null;
    let one_drained = tests::eventually(WAIT, || {
        let m = scrape(admin);
        let counted: f64 = m
            .iter()
            .filter(|(k, _)| k.starts_with("proxy_request_duration_seconds_count"))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(counted, 4.0, "{m:?}");
        assert_eq!(m["proxy_client_connections_open"], 1.0, "{m:?}");
        last = status();
        assert_eq!(requests(&last), Some(4), "{last}");
        assert_eq!(last["state"], "draining", "{last}");
        let workers = last["workers"].as_array().expect("workers");
        assert_eq!(workers.len(), 2, "{last}");
        workers.iter().any(|w| w["state"] == "drained")
    });
    assert!(one_drained, "no worker said it was done draining: {last}");
    let states: Vec<&serde_json::Value> = last["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| &w["state"])
        .collect();
    assert!(states.contains(&&serde_json::json!("draining")), "{last}");
    drop(held);
    p.join().expect("join");
}

#[test]
fn failed_attempts_are_counted_by_server_and_kind() {
    let origin = tests::origin();
    let dead = tests::ClosedPort::new();
    // The refusing server first: round-robin tries it first, then the live one.
    let extra = format!(
        "\n[upstream.two]\nservers = [\"{}\", \"{}\"]\n\n[[route]]\npath = \"/two\"\nupstream = \"two\"\n",
        dead.addr(),
        origin.addr()
    );
    let p = proxy::start(config(origin.addr(), &extra)).expect("proxy starts");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().unwrap());
    one(
        addr,
        b"GET /two HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        200,
    );
    let m = scrape(admin);
    let (d, o) = (dead.addr(), origin.addr());
    let want = [
        (
            format!(
                r#"proxy_upstream_failures_total{{group="two",server="{d}",kind="upstream_refused"}}"#
            ),
            1.0,
        ),
        (
            format!(r#"proxy_upstream_connects_total{{group="two",server="{d}"}}"#),
            1.0,
        ),
        (
            format!(r#"proxy_upstream_requests_total{{group="two",server="{d}"}}"#),
            0.0,
        ),
        (
            format!(r#"proxy_upstream_requests_total{{group="two",server="{o}"}}"#),
            1.0,
        ),
        (
            format!(
                r#"proxy_upstream_failures_total{{group="two",server="{o}",kind="upstream_refused"}}"#
            ),
            0.0,
        ),
        (
            r#"proxy_upstream_retries_total{route="/two",reason="connect"}"#.into(),
            1.0,
        ),
        (
            r#"proxy_upstream_retries_total{route="/two",reason="status"}"#.into(),
            0.0,
        ),
        (r#"proxy_retry_budget_exhausted_total"#.into(), 0.0),
        // Marked failed (max_fails 1) on the worker that tried it.
        (
            format!(r#"proxy_upstream_up{{group="two",server="{d}"}}"#),
            0.0,
        ),
        (
            format!(r#"proxy_upstream_up{{group="two",server="{o}"}}"#),
            1.0,
        ),
        (
            r#"proxy_requests_total{route="/two",code="2xx"}"#.into(),
            1.0,
        ),
        (
            r#"proxy_request_faults_total{kind="upstream_refused"}"#.into(),
            0.0,
        ),
    ];
    for (k, v) in want {
        assert_eq!(m.get(&k), Some(&v), "{k}");
    }
    // The process series every exporter has, read at the scrape.
    for (k, least) in [
        ("process_cpu_seconds_total", 0.0),
        ("process_resident_memory_bytes", 1e6),
        ("process_open_fds", 5.0),
        ("process_start_time_seconds", 1.7e9),
        ("proxy_config_last_reload_success_timestamp_seconds", 1.7e9),
    ] {
        assert!(m.get(k).is_some_and(|v| *v >= least), "{k}: {:?}", m.get(k));
    }
    let build = m
        .keys()
        .find(|k| k.starts_with("proxy_build_info{"))
        .expect("build info");
    assert!(
        build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))),
        "{build}"
    );
    assert!(build.contains("commit=\""), "{build}");
    p.shutdown().expect("shutdown");
}

/// An origin that answers each request with a head for 1,000 bytes, sends 10 of them and
/// closes.
fn cutting_origin() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            use std::io::Write;
            if raw::read_request_head(&mut s, &mut Vec::new()).is_ok() {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
            }
        }
    });
    addr
}

/// A server that cuts a body after its head was relayed failed the attempt: it is counted in
/// `proxy_upstream_failures_total` with the kind the access log's fault names, as a failure
/// before its answer is. It was not counted at all: a server that cut every body looked
/// healthy there.
#[test]
fn a_body_cut_by_its_server_is_counted_against_it() {
    let cut = cutting_origin();
    let p = proxy::start(config(cut, "")).expect("proxy starts");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().unwrap());
    let r = raw::exchange(addr, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", WAIT);
    let resp = r.responses();
    assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
    assert_eq!(resp.len(), 1, "{}", raw::show(&r));
    assert_eq!(
        (resp[0].status, resp[0].body.as_slice()),
        (200, &b"0123456789"[..])
    );
    let failures = format!(
        r#"proxy_upstream_failures_total{{group="app",server="{cut}",kind="upstream_closed"}}"#
    );
    let faults = r#"proxy_request_faults_total{kind="upstream_closed"}"#;
    let mut m = scrape(admin);
    // The request's own counts come when its connection is done with it.
    let counted = tests::eventually(WAIT, || {
        m = scrape(admin);
        m.get(faults) == Some(&1.0)
    });
    assert!(counted, "the request's fault: {:?}", m.get(faults));
    assert_eq!(m.get(&failures), Some(&1.0), "{failures}");
    p.shutdown().expect("shutdown");
}

#[test]
fn active_health_state_is_shown() {
    let origin = tests::origin();
    let dead = tests::ClosedPort::new();
    let extra = format!(
        "\n[upstream.checked]\nservers = [\"{}\", \"{}\"]\nhealth = {{ path = \"/healthz\", interval = \"500ms\", timeout = \"500ms\", rise = 1, fall = 1, expect = \"2xx\" }}\n",
        dead.addr(),
        origin.addr()
    );
    let p = proxy::start(config(origin.addr(), &extra)).expect("proxy starts");
    let admin = p.admin_addr().unwrap();
    let (d, o) = (dead.addr(), origin.addr());
    let key = |server, state| {
        format!(r#"proxy_upstream_health{{group="checked",server="{server}",state="{state}"}}"#)
    };
    let mut m = scrape(admin);
    assert!(
        tests::eventually(WAIT, || {
            m = scrape(admin);
            m.get(&key(d, "down")) == Some(&1.0) && m.get(&key(o, "up")) == Some(&1.0)
        }),
        "health never settled: {:?}",
        m.iter()
            .filter(|(k, _)| k.starts_with("proxy_upstream_health"))
            .collect::<Vec<_>>()
    );
    assert_eq!(m[&key(d, "up")], 0.0);
    // A group without checks.
    let app = format!(
        r#"proxy_upstream_health{{group="app",server="{}",state="unchecked"}}"#,
        origin.addr()
    );
    assert_eq!(m[&app], 1.0);
    let (_, body) = admin_get(admin, "/status");
    let s: serde_json::Value = serde_json::from_str(&body).unwrap();
    let ups = s["upstreams"].as_array().unwrap();
    let dead_entry = ups
        .iter()
        .find(|u| u["server"] == d.to_string())
        .expect("the dead server in /status");
    assert_eq!(dead_entry["health"], "down");
    p.shutdown().expect("shutdown");
}

/// The admin listener's answers to requests it does not serve as GET: another method on one of
/// its paths is 405 with `Allow: GET, HEAD` (an unknown path stays 404); a request target in
/// absolute form is served as its path (RFC 9112 3.2.2: a server MUST accept it); more header
/// fields than it reads is 431, not 400.
#[test]
fn admin_answers_other_methods_the_absolute_form_and_too_many_fields() {
    let origin = tests::origin();
    let p = proxy::start(config(origin.addr(), "")).expect("proxy starts");
    let admin = p.admin_addr().unwrap();
    let first = |req: &[u8]| {
        let r = raw::exchange(admin, req, WAIT);
        let resp = r.responses().into_iter().next();
        resp.unwrap_or_else(|| panic!("no response: {}", raw::show(&r)))
    };
    for path in ["/metrics", "/status", "/healthz"] {
        let req = format!("POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
        let r = first(req.as_bytes());
        assert_eq!(r.status, 405, "POST {path}: {:?}", r.status_line);
        assert_eq!(r.header("allow"), Some("GET, HEAD"), "POST {path}");
    }
    let r = first(b"DELETE /nothing HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 404);

    let r = first(b"GET http://admin/metrics?x=1 HTTP/1.1\r\nHost: admin\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(
        String::from_utf8_lossy(&r.body).contains("proxy_client_connections_open"),
        "not the metrics"
    );
    let r = first(b"GET HTTP://admin:9901/healthz HTTP/1.1\r\nHost: admin\r\n\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"ok\n"[..]));

    let mut many = b"GET /healthz HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..40 {
        many.extend_from_slice(format!("X-F{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    let r = first(&many);
    assert_eq!(r.status, 431, "{:?}", r.status_line);
    p.shutdown().unwrap();
}
