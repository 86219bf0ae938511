//! `balance = "hash"` end to end (issue 27): the same key always reaches the same origin (on
//! either of two workers: every worker builds the same ring), different keys spread over
//! every origin, a down origin's keys go to the others and come back with it; the key read
//! as `uri`, `header:NAME` and `remote_addr`; and `--check-config` on the keys.

use shared::origin::{Origin, OriginConfig};
use std::collections::BTreeMap;
use std::time::Duration;
use tests::raw::{assert_well_formed, Client};
use tests::toml_proxy::ask;
use tests::ClosedPort;

/// An origin that names itself in an `X-Origin` field, on `port`'s address when given (so it
/// can stop and come back on the same one).
fn named(name: &str, port: Option<&ClosedPort>) -> Origin {
    let cfg = OriginConfig {
        headers: vec![("X-Origin".into(), name.into())],
        ..OriginConfig::default()
    };
    match port {
        Some(p) => Origin::start_on(cfg, p.addr(), 1).expect("origin starts"),
        None => Origin::start(cfg).expect("origin starts"),
    }
}

/// Two workers, one group over `servers` (TOML values) balanced by `key`.
fn proxy(servers: &[String], key: &str) -> tests::inproc::Proxy {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 2\npin = false\n\
         [timeouts]\nshutdown = \"1s\"\n[upstream.app]\nservers = [{}]\nbalance = \"hash\"\n\
         hash_key = \"{key}\"\n",
        servers.join(", ")
    );
    let cfg = proxy::config::from_toml("hash.toml", &text).expect("valid config");
    tests::inproc::Proxy::start(cfg)
}

/// Which origin answered `GET path` (with `extra` fields), on a new connection each time (so
/// either worker may take it).
fn served_by(p: &tests::inproc::Proxy, path: &str, extra: &str) -> String {
    let mut c = Client::connect(p.addr);
    let r = ask(
        &mut c,
        &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n"),
        false,
    );
    assert_well_formed(&r, 200);
    r.header("x-origin").expect("X-Origin").to_string()
}

fn spread(homes: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for h in homes.values() {
        *n.entry(h.clone()).or_insert(0) += 1;
    }
    n
}

#[test]
fn the_same_uri_reaches_the_same_origin_and_a_down_ones_keys_move_and_come_back() {
    let (a, b) = (named("a", None), named("b", None));
    let port = ClosedPort::new();
    let mut c = Some(named("c", Some(&port)));
    let servers = vec![
        format!("\"{}\"", a.addr()),
        format!("\"{}\"", b.addr()),
        // Back in rotation 200 ms after a failure.
        format!("{{ addr = \"{}\", fail_timeout = \"200ms\" }}", port.addr()),
    ];
    let p = proxy(&servers, "uri");
    let paths: Vec<String> = (0..60).map(|i| format!("/item/{i}?v=1")).collect();
    let homes: BTreeMap<String, String> = paths
        .iter()
        .map(|path| (path.clone(), served_by(&p, path, "")))
        .collect();
    // Again, a few times: the same origin, whichever worker takes the connection.
    for _ in 0..3 {
        for (path, home) in &homes {
            assert_eq!(&served_by(&p, path, ""), home, "{path}");
        }
    }
    let n = spread(&homes);
    assert_eq!(n.len(), 3, "every origin has keys: {n:?}");
    // The query is part of the key (the target as received).
    let moved = paths
        .iter()
        .filter(|path| served_by(&p, &path.replace("v=1", "v=2"), "") != homes[*path])
        .count();
    assert!(moved > 0, "another query, another key");

    // c goes down: its keys go to a and b (each key to one of them, every time), the
    // others stay where they were.
    c.take().unwrap().stop();
    let mut moved_to = BTreeMap::new();
    for (path, home) in &homes {
        let now = served_by(&p, path, "");
        if home == "c" {
            assert_ne!(now, "c");
            moved_to.insert(path.clone(), now);
        } else {
            assert_eq!(&now, home, "{path} stays on its origin");
        }
    }
    for (path, to) in &moved_to {
        assert_eq!(&served_by(&p, path, ""), to, "{path}: its new home holds");
    }
    // c comes back on its address: after its fail_timeout, its keys are its own again.
    let _c = named("c", Some(&port));
    let back = tests::eventually(Duration::from_secs(5), || {
        moved_to.keys().all(|path| served_by(&p, path, "") == "c")
    });
    assert!(back, "c's keys come back to c");
    for (path, home) in &homes {
        assert_eq!(&served_by(&p, path, ""), home, "{path}");
    }
}

#[test]
fn a_header_or_the_client_address_as_key() {
    let origins: Vec<Origin> = ["a", "b", "c"].iter().map(|n| named(n, None)).collect();
    let servers: Vec<String> = origins
        .iter()
        .map(|o| format!("\"{}\"", o.addr()))
        .collect();
    let p = proxy(&servers, "header:X-User");
    let mut homes = BTreeMap::new();
    for u in 0..40 {
        let user = format!("X-User: user{u}\r\n");
        let home = served_by(&p, "/any", &user);
        // Whatever the path, the user's origin.
        for path in ["/", "/x", "/y?z=1"] {
            assert_eq!(served_by(&p, path, &user), home, "user{u} {path}");
        }
        // The first value counts.
        let two = format!("{user}X-User: other\r\n");
        assert_eq!(served_by(&p, "/", &two), home, "user{u}, first value");
        homes.insert(u.to_string(), home);
    }
    assert_eq!(spread(&homes).len(), 3, "{homes:?}");
    // Without the field: the empty string's origin, every time.
    let none = served_by(&p, "/a", "");
    for path in ["/b", "/c", "/d"] {
        assert_eq!(served_by(&p, path, ""), none);
    }

    // The client address: one client, one origin, whatever it asks.
    let p = proxy(&servers, "remote_addr");
    let home = served_by(&p, "/", "");
    for i in 0..20 {
        assert_eq!(served_by(&p, &format!("/p{i}"), ""), home);
    }
}

#[test]
fn check_config_names_the_hash_keys_errors() {
    let base =
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "balance = \"hash\"\nhash_key = \"url\"\n",
            ":7:",
            &["upstream.app.hash_key", "`url` is not a hash key"],
        ),
        (
            "balance = \"hash\"\nhash_key = \"header:X Y\"\n",
            ":7:",
            &["upstream.app.hash_key", "not a header field name"],
        ),
        (
            "hash_key = \"uri\"\n",
            ":6:",
            &["upstream.app.hash_key", "balance = \"hash\" only"],
        ),
        (
            "balance = \"hashed\"\n",
            ":6:",
            &["upstream.app.balance", "hashed"],
        ),
    ];
    let dir = tests::temp_dir("hash-check");
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
    // The good forms pass.
    for extra in [
        "balance = \"hash\"\n",
        "balance = \"hash\"\nhash_key = \"header:X-User\"\n",
    ] {
        let path = dir.join("good.toml");
        std::fs::write(&path, format!("{base}{extra}")).unwrap();
        let out = std::process::Command::new(tests::bin("proxy"))
            .args(["--check-config", path.to_str().unwrap()])
            .output()
            .expect("run proxy");
        assert_eq!(out.status.code(), Some(0), "{extra}");
    }
}
