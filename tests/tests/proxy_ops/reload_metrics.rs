//! Metrics across a reload (2 workers, in process, the reload `SIGHUP` runs): counts stay with
//! their route and server names when a reload reorders, adds and removes routes and servers,
//! and the scrape labels series with the running generation's names.

use proxy::reload::{Outcome, Source};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use tests::raw::{self, End, WAIT};

fn text(routes: &str, servers: &[SocketAddr]) -> String {
    let servers: Vec<String> = servers.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[admin]\naddr = \"127.0.0.1:0\"\n\n\
         [runtime]\nworkers = 2\npin = false\n\n[timeouts]\nshutdown = \"2s\"\n\n\
         [upstream.app]\nservers = [{}]\n\n{routes}",
        servers.join(", ")
    )
}

fn route(path: &str) -> String {
    format!("[[route]]\npath = \"{path}\"\nupstream = \"app\"\n\n")
}

fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write config");
    std::fs::rename(&tmp, path).expect("rename config");
}

fn get(addr: SocketAddr, path: &str) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = raw::exchange(addr, req.as_bytes(), WAIT);
    assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
    let resps = r.responses();
    assert_eq!(resps.len(), 1, "{}", raw::show(&r));
    assert_eq!(resps[0].status, 200, "{}", raw::show(&r));
}

fn scrape(admin: SocketAddr) -> HashMap<String, f64> {
    let r = raw::exchange(admin, b"GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n", WAIT);
    assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
    let text = r.text();
    let body = &text[text.find("\r\n\r\n").expect("a head") + 4..];
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("sample line");
            (k.to_string(), v.parse().expect("sample value"))
        })
        .collect()
}

fn requests(m: &HashMap<String, f64>, route: &str) -> f64 {
    let key = format!("proxy_requests_total{{route=\"{route}\",code=\"2xx\"}}");
    m.get(&key).copied().unwrap_or(0.0)
}

fn server_requests(m: &HashMap<String, f64>, server: SocketAddr) -> f64 {
    let key = format!("proxy_upstream_requests_total{{group=\"app\",server=\"{server}\"}}");
    m.get(&key).copied().unwrap_or(0.0)
}

#[test]
fn counts_keep_their_names_across_a_reload_that_reorders_routes_and_servers() {
    let (a, b) = (tests::origin(), tests::origin());
    let dir = std::env::temp_dir().join(format!("reload-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("proxy.toml");
    let first = format!("{}{}{}", route("/a"), route("/b"), route("/"));
    write(&file, &text(&first, &[a.addr()]));
    let cfg = proxy::config::load(&file).expect("config");
    let p = proxy::start(cfg).expect("proxy starts");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin address"));
    for _ in 0..3 {
        get(addr, "/a");
    }
    for _ in 0..2 {
        get(addr, "/b");
    }
    let m = scrape(admin);
    assert_eq!(requests(&m, "/a"), 3.0);
    assert_eq!(requests(&m, "/b"), 2.0);
    assert_eq!(server_requests(&m, a.addr()), 5.0);

    // Generation 2: a new route first, /b before /a, and server B before A.
    let second = format!(
        "{}{}{}{}",
        route("/c"),
        route("/b"),
        route("/a"),
        route("/")
    );
    write(&file, &text(&second, &[b.addr(), a.addr()]));
    let source = Source::File {
        path: file.clone(),
        overrides: Default::default(),
    };
    let mut reloader = p.reloader(source);
    let outcome = reloader.reload();
    assert!(matches!(outcome, Outcome::Applied(_)), "{outcome}");
    get(addr, "/c");
    get(addr, "/a");
    let m = scrape(admin);
    assert_eq!(requests(&m, "/a"), 4.0, "{m:?}");
    assert_eq!(requests(&m, "/b"), 2.0, "{m:?}");
    assert_eq!(requests(&m, "/c"), 1.0, "{m:?}");
    // The duration histograms follow their route too.
    let times = |m: &HashMap<String, f64>, route: &str| {
        let key =
            format!("proxy_request_duration_seconds_count{{route=\"{route}\",group=\"app\"}}");
        m.get(&key).copied().unwrap_or(0.0)
    };
    assert_eq!(
        (times(&m, "/a"), times(&m, "/b"), times(&m, "/c")),
        (4.0, 2.0, 1.0)
    );
    assert_eq!(m.get("proxy_config_generation"), Some(&2.0));
    let (on_a, on_b) = (a.requests() as f64, b.requests() as f64);
    assert_eq!(on_a + on_b, 7.0);
    assert_eq!(server_requests(&m, a.addr()), on_a, "{m:?}");
    assert_eq!(server_requests(&m, b.addr()), on_b, "{m:?}");

    // Generation 3: /b is gone; its series ends, the others go on.
    let third = format!("{}{}", route("/a"), route("/"));
    write(&file, &text(&third, &[a.addr()]));
    let outcome = reloader.reload();
    assert!(matches!(outcome, Outcome::Applied(_)), "{outcome}");
    get(addr, "/a");
    let m = scrape(admin);
    assert_eq!(requests(&m, "/a"), 5.0, "{m:?}");
    assert!(!m.keys().any(|k| k.contains("route=\"/b\"")), "{m:?}");
    assert_eq!(m.get("proxy_config_generation"), Some(&3.0));
    assert_eq!(m.get("proxy_config_last_reload_successful"), Some(&1.0));
    let loaded = m["proxy_config_last_reload_success_timestamp_seconds"];

    // A broken file: rejected, generation 3 goes on, and the scrape says so.
    write(&file, "[[listen]\n");
    let outcome = reloader.reload();
    assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome}");
    let m = scrape(admin);
    assert_eq!(m.get("proxy_config_generation"), Some(&3.0));
    assert_eq!(m.get("proxy_config_last_reload_successful"), Some(&0.0));
    assert_eq!(
        m["proxy_config_last_reload_success_timestamp_seconds"],
        loaded
    );
    p.shutdown().expect("clean shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cache_counters_go_on_across_a_reload_that_replaces_the_store() {
    // A reload that changes a route's cache settings starts an empty store, but the route's
    // evictions (and the other counts its store kept) are counters of the same series: they
    // went back to 0 (38 -> 0 in one process, same labels) while proxy_cache_requests_total
    // of the same route went on.
    let o = tests::origin();
    let file = tests::TempFile::new("reload-cache-counters", "proxy.toml");
    let cached = |ttl: &str| {
        format!(
            "[[route]]\npath = \"/\"\nupstream = \"app\"\n\
             cache = {{ ttl = \"{ttl}\", max_bytes = \"1KiB\", max_object = \"512B\" }}\n"
        )
    };
    write(&file.path, &text(&cached("60s"), &[o.addr()]));
    let p = proxy::start(proxy::config::load(&file.path).expect("config")).expect("starts");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin address"));
    for i in 0..40 {
        get(addr, &format!("/p{i}"));
    }
    let evictions = |m: &HashMap<String, f64>| {
        m.get("proxy_cache_evictions_total{route=\"/\"}")
            .copied()
            .unwrap_or(0.0)
    };
    let before = evictions(&scrape(admin));
    assert!(before > 0.0, "40 objects in 1 KiB evicted nothing");
    write(&file.path, &text(&cached("30s"), &[o.addr()]));
    let source = Source::File {
        path: file.path.clone(),
        overrides: Default::default(),
    };
    let outcome = p.reloader(source).reload();
    assert!(matches!(outcome, Outcome::Applied(_)), "{outcome}");
    let m = scrape(admin);
    assert_eq!(evictions(&m), before, "{m:?}");
    for i in 0..40 {
        get(addr, &format!("/q{i}"));
    }
    assert!(evictions(&scrape(admin)) > before);
    p.shutdown().unwrap();
}
