//! `resolve = "..."` end to end (issue 27): a group's host names looked up again on the DNS
//! thread. With a resolver the test controls (`Running::set_resolver`): requests move to a
//! name's new address, the old address's pooled connections close, a failing lookup keeps the
//! last good address and is counted in /metrics, several addresses are several servers. With
//! the real resolver: `localhost` stays served and makes no new generation. And
//! `--check-config` on the key.

use shared::origin::{Origin, OriginConfig};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tests::inproc::Proxy;
use tests::raw::{assert_well_formed, Client};
use tests::scrape::{scrape, value};
use tests::toml_proxy::ask;

const WAIT: Duration = Duration::from_secs(10);

fn named(name: &str) -> Origin {
    Origin::start(OriginConfig {
        headers: vec![("X-Origin".into(), name.into())],
        ..OriginConfig::default()
    })
    .expect("origin starts")
}

/// One worker, an admin listener, group `app` over `servers` looked up every 50 ms.
fn proxy(servers: &str) -> Proxy {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[admin]\naddr = \"127.0.0.1:0\"\n[runtime]\n\
         workers = 1\npin = false\n[timeouts]\nshutdown = \"1s\"\n[upstream.app]\n\
         servers = [{servers}]\nresolve = \"50ms\"\n"
    );
    let cfg = proxy::config::from_toml("dns.toml", &text).expect("valid config");
    Proxy::start(cfg)
}

/// Which origin answered `GET /` (the client closes; the proxy keeps its upstream
/// connection pooled).
fn served_by(p: &Proxy) -> String {
    let mut c = Client::connect(p.addr);
    let r = ask(
        &mut c,
        "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_well_formed(&r, 200);
    r.header("x-origin").expect("X-Origin").to_string()
}

fn metric(p: &Proxy, name: &str) -> f64 {
    value(&scrape(p.running().admin_addr().expect("admin")), name)
}

/// A resolver whose answer for every name is what the test last set.
#[derive(Clone)]
struct Answer(Arc<Mutex<Result<Vec<SocketAddr>, String>>>);

impl Answer {
    fn install(p: &Proxy, first: Vec<SocketAddr>) -> Answer {
        let a = Answer(Arc::new(Mutex::new(Ok(first))));
        let me = a.clone();
        p.running()
            .set_resolver(Arc::new(move |_, _| me.0.lock().unwrap().clone()));
        a
    }

    fn set(&self, to: Result<Vec<SocketAddr>, String>) {
        *self.0.lock().unwrap() = to;
    }
}

#[test]
fn a_name_that_moves_takes_the_requests_along_and_a_failed_lookup_keeps_the_last_address() {
    let (a, b) = (named("a"), named("b"));
    // `localhost` resolves at start (the config's lookup is the system's).
    let p = proxy(&format!("\"localhost:{}\"", a.addr().port()));
    for _ in 0..3 {
        assert_eq!(served_by(&p), "a");
    }
    assert_eq!(a.open_connections(), 1, "a's connection is pooled");
    assert_eq!(metric(&p, "proxy_config_generation"), 1.0);

    // From now on the name is b's: requests follow, a's pooled connection is closed.
    let answer = Answer::install(&p, vec![b.addr()]);
    assert!(tests::eventually(WAIT, || served_by(&p) == "b"));
    assert!(metric(&p, "proxy_config_generation") > 1.0);
    assert!(metric(&p, "proxy_dns_changes_total") >= 1.0);
    for _ in 0..3 {
        assert_eq!(served_by(&p), "b");
    }
    assert!(
        tests::eventually(WAIT, || a.open_connections() == 0),
        "a's pooled connection closes ({} open)",
        a.open_connections()
    );
    let m = scrape(p.running().admin_addr().unwrap());
    let label = |o: &Origin| {
        format!(
            "proxy_upstream_requests_total{{group=\"app\",server=\"localhost:{} ({})\"}}",
            a.addr().port(),
            o.addr()
        )
    };
    assert_eq!(
        value(&m, &label(&b)),
        4.0,
        "b's server, named by its address: {m:?}"
    );
    assert!(!m.contains_key(&label(&a)), "a's server is gone");

    // The lookup fails: b stays, the failures are counted, no new generation.
    let failures = metric(&p, "proxy_dns_failures_total");
    let generation = metric(&p, "proxy_config_generation");
    answer.set(Err("SERVFAIL".into()));
    assert!(tests::eventually(WAIT, || {
        metric(&p, "proxy_dns_failures_total") >= failures + 2.0
    }));
    for _ in 0..3 {
        assert_eq!(served_by(&p), "b");
    }
    assert_eq!(metric(&p, "proxy_config_generation"), generation);

    // Two addresses: two servers, round-robin between them.
    answer.set(Ok(vec![a.addr(), b.addr()]));
    let both = tests::eventually(WAIT, || {
        let s: Vec<String> = (0..4).map(|_| served_by(&p)).collect();
        s.contains(&"a".to_string()) && s.contains(&"b".to_string())
    });
    assert!(both, "both addresses serve");
}

#[test]
fn a_request_in_flight_when_its_address_goes_finishes_there() {
    // a answers after 2 s: long enough for the name to move while its request waits.
    let a = Origin::start(OriginConfig {
        headers: vec![("X-Origin".into(), "a".into())],
        delay: Duration::from_secs(2),
        ..OriginConfig::default()
    })
    .expect("origin starts");
    let b = named("b");
    let p = proxy(&format!("\"localhost:{}\"", a.addr().port()));
    let mut c = Client::connect(p.addr);
    c.send(b"GET /slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .expect("request sent");
    assert!(
        tests::eventually(WAIT, || a.requests() == 1),
        "the request is at a"
    );
    let _answer = Answer::install(&p, vec![b.addr()]);
    assert!(tests::eventually(WAIT, || metric(
        &p,
        "proxy_dns_changes_total"
    ) >= 1.0));
    // The request on the previous generation finishes on a; new ones go to b.
    let r = c.response(WAIT).expect("the response in flight");
    assert_well_formed(&r, 200);
    assert_eq!(r.header("x-origin"), Some("a"));
    assert_eq!(served_by(&p), "b");
    // a's connection, back from its request, is not reused: closed with its generation.
    assert!(
        tests::eventually(WAIT, || a.open_connections() == 0),
        "a's connection closes ({} open)",
        a.open_connections()
    );
    assert_eq!(a.requests(), 1);
}

#[test]
fn localhost_through_the_system_resolver_stays_served_without_new_generations() {
    let a = named("a");
    let port = a.addr().port();
    let p = proxy(&format!("\"localhost:{port}\""));
    // Several lookups pass (one per 50 ms); the same addresses make no generation.
    assert_eq!(served_by(&p), "a");
    assert!(tests::eventually(WAIT, || metric(
        &p,
        "proxy_dns_lookups_total"
    ) >= 4.0));
    assert_eq!(served_by(&p), "a");
    assert_eq!(metric(&p, "proxy_dns_failures_total"), 0.0);
    assert_eq!(metric(&p, "proxy_dns_changes_total"), 0.0);
    assert_eq!(metric(&p, "proxy_config_generation"), 1.0);
    let m = scrape(p.running().admin_addr().unwrap());
    let v4 = format!(
        "proxy_upstream_requests_total{{group=\"app\",server=\"localhost:{port} (127.0.0.1:{port})\"}}"
    );
    assert!(
        value(&m, &v4) >= 1.0,
        "localhost's IPv4 address is a server: {m:?}"
    );
}

#[test]
fn check_config_names_resolve_errors() {
    let base = "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[upstream.app]\n";
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "servers = [\"127.0.0.1:9001\"]\nresolve = \"3x\"\n",
            ":6:",
            &["upstream.app.resolve", "3x"],
        ),
        (
            "servers = [\"127.0.0.1:9001\"]\nresolve = \"0s\"\n",
            ":6:",
            &["upstream.app.resolve"],
        ),
        (
            "servers = [\"no-such-host.invalid:80\"]\nresolve = \"30s\"\n",
            ":5:",
            &["upstream.app.servers[0]", "no-such-host.invalid"],
        ),
    ];
    let dir = tests::temp_dir("dns-check");
    for (i, (extra, line, words)) in cases.iter().enumerate() {
        let path = dir.join(format!("c{i}.toml"));
        std::fs::write(&path, format!("{base}{extra}")).unwrap();
        let path = path.to_str().unwrap();
        let out = std::process::Command::new(tests::bin("proxy"))
            .args(["--check-config", path])
            .output()
            .expect("run proxy");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("proxy: {path}{line}")),
            "{extra}: {first}"
        );
        for w in *words {
            assert!(first.contains(w), "{extra}: want {w:?} in {first:?}");
        }
    }
    let path = dir.join("good.toml");
    let good = "servers = [\"localhost:9001\"]\nresolve = \"30s\"\n";
    std::fs::write(&path, format!("{base}{good}")).unwrap();
    let out = std::process::Command::new(tests::bin("proxy"))
        .args(["--check-config", path.to_str().unwrap()])
        .output()
        .expect("run proxy");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `proxy` binary itself, not the library: its main thread waits for the workers
/// (`Running::join`) from the start, and that wait stopped the DNS thread at once: no name
/// was ever looked up again.
#[test]
fn the_binary_looks_names_up_again() {
    let a = named("a");
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let dir = tests::temp_dir("dns-binary");
    let file = dir.join("dns.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[admin]\naddr = \"{admin}\"\n[timeouts]\n\
             shutdown = \"1s\"\n[upstream.app]\nservers = [\"localhost:{}\"]\nresolve = \"50ms\"\n",
            a.addr().port()
        ),
    )
    .unwrap();
    let mut cmd = tests::process::ProxyProcess::command();
    cmd.arg("--config")
        .arg(&file)
        .args(["--workers", "1", "--no-pin"]);
    let p = tests::process::ProxyProcess::start(&mut cmd);
    assert!(
        tests::eventually(WAIT, || value(&scrape(admin), "proxy_dns_lookups_total")
            >= 2.0),
        "no lookup after the first: {:?}",
        scrape(admin).get("proxy_dns_lookups_total")
    );
    drop(p);
}
