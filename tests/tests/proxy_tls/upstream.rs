//! HTTPS upstreams: the proxy as a TLS client of a TLS origin (the built-in origin with a
//! certificate made here), its connections pooled and its sessions resumed, on every driver.

use proxy::config::{Config, GroupId, ServerId};
use shared::origin::{Origin, OriginConfig};
use shared::runtime::DriverKind;
use shared::tls::server::{server_config, CertFiles, ServerTlsSpec};
use std::path::Path;
use tests::inproc::{config, Proxy};
use tests::tls::Ca;

/// An HTTPS origin serving a leaf of `ca` for `names`.
fn tls_origin(ca: &Ca, dir: &Path, names: &[&str]) -> Origin {
    let (cert, key) = ca.leaf_files(dir, "origin", names);
    let spec = ServerTlsSpec {
        default: CertFiles { cert, key },
        sni: Vec::new(),
    };
    let tls = server_config(&spec).expect("origin tls").config;
    Origin::start(OriginConfig {
        tls: Some(tls),
        capture: true,
        ..OriginConfig::default()
    })
    .expect("origin starts")
}

fn tls_counts(o: &Origin) -> (u64, u64) {
    let s = o.stats();
    (
        s.iter().map(|s| s.tls_handshakes.get()).sum(),
        s.iter().map(|s| s.tls_resumed.get()).sum(),
    )
}

/// A config file for a group `tls_table` over `servers`, on driver `d`, loaded from `dir`.
fn proxy_from_file(dir: &Path, d: DriverKind, servers: &str, tls_table: &str) -> Config {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[upstream.app]\nservers = [{servers}]\n\
         keepalive = 0\n{tls_table}\n\n[[route]]\nupstream = \"app\"\n"
    );
    let path = dir.join("p.toml");
    std::fs::write(&path, text).unwrap();
    let mut cfg = proxy::config::load(&path).expect("config loads");
    cfg.runtime.workers = 1;
    cfg.runtime.pin = false;
    cfg.runtime.driver = tests::driver_choice(d);
    cfg
}

#[test]
fn proxies_to_a_tls_origin_pooled_and_resumed() {
    let ca = Ca::new();
    let dir = tests::temp_dir("upstream");
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let o = tls_origin(&ca, &dir, &["localhost"]);
    let port = o.addr().port();
    for d in tests::drivers() {
        // Pooled: one TLS connection for many requests, SNI and verification by host name.
        let mut cfg = config(&[o.addr()]);
        cfg.runtime.driver = tests::driver_choice(d);
        let file = proxy_from_file(
            &dir,
            d,
            &format!("\"https://localhost:{port}\""),
            "tls = { ca = \"ca.pem\" }",
        );
        cfg.groups = file.groups.clone();
        cfg.groups[GroupId::new(0)].keepalive = 64;
        let (hs0, _) = tls_counts(&o);
        let p = Proxy::start(cfg);
        let mut c = p.connect();
        for size in [10usize, 100_000, 0] {
            let r = c.get(&format!("/?size={size}"));
            assert_eq!(r.status, 200, "{d}");
            assert_eq!(r.body.len(), size, "{d}");
        }
        let req = String::from_utf8_lossy(o.captured().last().unwrap()).into_owned();
        assert!(req.contains("X-Forwarded-Proto: http\r\n"), "{d}: {req}");
        assert_eq!(tls_counts(&o).0 - hs0, 1, "{d}: one pooled TLS connection");
        p.stop();

        // Not pooled: a connection per request, the second and later ones resumed.
        let cfg = proxy_from_file(
            &dir,
            d,
            &format!("\"https://localhost:{port}\""),
            "tls = { ca = \"ca.pem\" }",
        );
        let (hs0, res0) = tls_counts(&o);
        let p = Proxy::start(cfg);
        let mut c = p.connect();
        for _ in 0..4 {
            assert_eq!(c.get("/").status, 200, "{d}");
        }
        let (hs, res) = tls_counts(&o);
        assert_eq!((hs - hs0, res - res0), (4, 3), "{d}: full then resumed");
        p.stop();
    }
}

#[test]
fn certificates_are_verified_unless_insecure() {
    let ca = Ca::new();
    let other = Ca::new();
    let dir = tests::temp_dir("verify");
    std::fs::write(dir.join("other.pem"), other.pem()).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let o = tls_origin(&ca, &dir, &["localhost"]);
    let port = o.addr().port();
    let d = tests::drivers()[0];
    let server = format!("\"https://localhost:{port}\"");
    for (table, want) in [
        // A CA that did not sign it: 502.
        ("tls = { ca = \"other.pem\" }", 502),
        // The right CA but another name (sni): 502.
        ("tls = { ca = \"ca.pem\", sni = \"elsewhere.test\" }", 502),
        ("tls = { ca = \"ca.pem\" }", 200),
        ("tls = { insecure = true }", 200),
    ] {
        let cfg = proxy_from_file(&dir, d, &server, table);
        let p = Proxy::start(cfg);
        let mut c = p.connect();
        assert_eq!(c.get("/").status, want, "{table}");
        p.stop();
    }
    // A group with a tls table: servers without a scheme are TLS (443 by default).
    let cfg = proxy_from_file(
        &dir,
        d,
        &format!("\"localhost:{port}\""),
        "tls = { ca = \"ca.pem\" }",
    );
    let p = Proxy::start(cfg);
    assert_eq!(p.connect().get("/").status, 200);
    p.stop();
}

#[test]
fn group_tls_errors_and_warnings() {
    let dir = tests::temp_dir("groupcfg");
    let load = |servers: &str, table: &str| {
        let text = format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[upstream.app]\nservers = [{servers}]\n{table}\n"
        );
        let path = dir.join("g.toml");
        std::fs::write(&path, text).unwrap();
        proxy::config::load(&path).map_err(|e| e.to_string())
    };
    let e = load("\"https://127.0.0.1:1\", \"http://127.0.0.1:2\"", "").unwrap_err();
    assert!(
        e.contains("upstream.app.servers") && e.contains("all plain or all TLS"),
        "{e}"
    );
    let e = load("\"http://127.0.0.1:2\"", "tls = { insecure = true }").unwrap_err();
    assert!(e.contains("all plain or all TLS"), "{e}");
    let e = load("\"https://127.0.0.1:1\"", "tls = { ca = \"missing.pem\" }").unwrap_err();
    assert!(e.contains("missing.pem"), "{e}");
    let cfg = load("\"https://127.0.0.1:1\"", "tls = { insecure = true }").unwrap();
    let w = proxy::config::warnings(&cfg);
    assert!(w.iter().any(|w| w.contains("not verified")), "{w:?}");
    // https:// alone: port 443, the system's roots.
    let cfg = load("\"https://127.0.0.1\"", "").unwrap();
    assert_eq!(
        cfg.groups[GroupId::new(0)].servers[ServerId::new(0)].addrs[0].port(),
        443
    );
    assert_eq!(
        cfg.groups[GroupId::new(0)].servers[ServerId::new(0)].name,
        "127.0.0.1"
    );
}

#[test]
fn an_idle_pooled_tls_connection_is_checked_and_reused() {
    let ca = Ca::new();
    let dir = tests::temp_dir("idle");
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let o = tls_origin(&ca, &dir, &["localhost"]);
    let port = o.addr().port();
    for d in tests::drivers() {
        let mut cfg = proxy_from_file(
            &dir,
            d,
            &format!("\"https://localhost:{port}\""),
            "tls = { ca = \"ca.pem\" }",
        );
        // Checked before reuse once idle 50 ms (the group's `keepalive_check`, 1 s by
        // default); the 10 s timeout leaves a loaded machine plenty of margin.
        cfg.groups[GroupId::new(0)].keepalive = 8;
        cfg.groups[GroupId::new(0)].keepalive_timeout = std::time::Duration::from_secs(10);
        cfg.groups[GroupId::new(0)].keepalive_check = std::time::Duration::from_millis(50);
        let (hs0, _) = tls_counts(&o);
        let p = Proxy::start(cfg);
        let mut c = p.connect();
        assert_eq!(c.get("/").status, 200, "{d}");
        // Idle past the check threshold, not past the timeout: the check reads the session's
        // pending bytes (none, or tickets) and finds it alive.
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert_eq!(c.get("/").status, 200, "{d}");
        assert_eq!(
            tls_counts(&o).0 - hs0,
            1,
            "{d}: the pooled connection was reused"
        );
        p.stop();
    }
}

/// Quick mode's `--upstream-ca` and `--upstream-insecure`: what a file's `tls = { ca }` and
/// `tls = { insecure = true }` say, a server without a scheme then being https://.
#[test]
fn quick_mode_flags_verify_or_skip_verifying_upstream_certificates() {
    let ca = Ca::new();
    let other = Ca::new();
    let dir = tests::temp_dir("quick");
    let (ca_pem, other_pem) = (dir.join("ca.pem"), dir.join("other.pem"));
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    std::fs::write(&other_pem, other.pem()).unwrap();
    let o = tls_origin(&ca, &dir, &["localhost"]);
    let up = format!("localhost:{}", o.addr().port());
    let ca_s = ca_pem.to_str().unwrap();
    let other_s = other_pem.to_str().unwrap();
    let cases: [(Vec<&str>, u16); 4] = [
        (vec!["--upstream-ca", ca_s], 200),
        (vec!["--upstream-ca", other_s], 502),
        (vec!["--upstream-insecure"], 200),
        // No flag and a self-signed origin: the system's store does not know it.
        (vec![], 502),
    ];
    for (flags, want) in cases {
        let https = format!("https://{up}");
        // Without a flag the scheme says TLS; with one, the bare name is enough.
        let server = if flags.is_empty() { &https } else { &up };
        let mut args = vec!["proxy", "--listen", "127.0.0.1:0", "--upstream", server];
        args.extend(["--workers", "1", "--no-pin", "--keepalive", "0"]);
        args.extend(&flags);
        let cfg = proxy::cli::config_from_args(&args).expect("config");
        assert_eq!(
            cfg.groups[GroupId::new(0)].tls.as_ref().map(|t| t.insecure),
            Some(flags == ["--upstream-insecure"])
        );
        let p = Proxy::start(cfg);
        let mut c = p.connect();
        assert_eq!(c.get("/").status, want, "{flags:?}");
        p.stop();
    }
    // One line each for what cannot be: both flags, a plain server beside them, no upstream.
    let plain = format!("http://{up}");
    for (args, says) in [
        (
            vec![
                "--upstream",
                up.as_str(),
                "--upstream-ca",
                ca_s,
                "--upstream-insecure",
            ],
            "cannot be used with",
        ),
        (
            vec!["--upstream", plain.as_str(), "--upstream-insecure"],
            "mixes plain",
        ),
        (vec!["--static", ca_s, "--upstream-insecure"], "--upstream"),
    ] {
        let argv = [&["proxy", "--listen", "127.0.0.1:0"][..], &args].concat();
        let e = proxy::cli::config_from_args(&argv).expect_err("refused");
        assert!(e.contains(says) && !e.contains('\n'), "{args:?}: {e}");
    }
}
