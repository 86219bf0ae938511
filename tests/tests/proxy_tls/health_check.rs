//! Active health checks of an HTTPS group go over TLS, as the group's requests do: a TLS
//! origin passes its checks (each one a handshake), then leaves rotation when its `/healthz`
//! answers 500. A plain-HTTP check against it would fail from the start.

use shared::origin::switch::StatusSwitch;
use shared::origin::{Origin, OriginConfig};
use shared::tls::server::{server_config, CertFiles, ServerTlsSpec};
use tests::strict::{wait_for, READY};
use tests::tls::Ca;

fn probes(o: &Origin) -> usize {
    o.captured()
        .iter()
        .filter(|r| r.starts_with(b"GET /healthz "))
        .count()
}

#[test]
fn checks_of_a_tls_group_handshake() {
    let ca = Ca::new();
    let dir = tests::temp_dir("health");
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let (cert, key) = ca.leaf_files(&dir, "origin", &["localhost"]);
    let spec = ServerTlsSpec {
        default: CertFiles { cert, key },
        sni: Vec::new(),
    };
    let switch = StatusSwitch::new("/healthz", 200);
    let o = Origin::start(OriginConfig {
        tls: Some(server_config(&spec).expect("origin tls").config),
        capture: true,
        switch: Some(switch.clone()),
        ..OriginConfig::default()
    })
    .expect("origin starts");
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 1\npin = false\n\
         [upstream.app]\nservers = [\"localhost:{}\"]\ntls = {{ ca = \"ca.pem\" }}\n\
         health = {{ path = \"/healthz\", interval = \"400ms\", timeout = \"400ms\", rise = 2, fall = 3 }}\n",
        o.addr().port()
    );
    let path = dir.join("p.toml");
    std::fs::write(&path, text).unwrap();
    let p = proxy::start(proxy::config::load(&path).expect("config loads")).expect("starts");
    let handshakes = || -> u64 { o.stats().iter().map(|s| s.tls_handshakes.get()).sum() };
    // Checks arrive (decrypted: over TLS) and pass: no change.
    wait_for(READY, "checks over TLS", || probes(&o) >= 4);
    assert!(handshakes() >= 4, "{} handshakes", handshakes());
    assert_eq!(p.stats()[0].health_changes.get(), 0);
    switch.set(500);
    wait_for(READY, "the server going down", || {
        p.stats()[0].health_changes.get() >= 1
    });
    assert_eq!(p.stats()[0].health_changes.get(), 1);
    p.shutdown().unwrap();
}
