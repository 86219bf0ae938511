//! Helpers for the active health checks' end-to-end tests: origins whose `/healthz` a test
//! switches, what each origin received, and traffic through the proxy.

use shared::origin::switch::StatusSwitch;
use shared::origin::{Origin, OriginConfig};
use std::net::SocketAddr;
use tests::raw::{get, Client};

/// A capturing origin whose `/healthz` answers what the returned switch says (200 first).
pub fn switched_origin() -> (Origin, StatusSwitch) {
    switched(OriginConfig::default())
}

/// [`switched_origin`] with the rest of its settings from `cfg`.
pub fn switched(cfg: OriginConfig) -> (Origin, StatusSwitch) {
    let switch = StatusSwitch::new("/healthz", 200);
    let o = Origin::start(OriginConfig {
        capture: true,
        switch: Some(switch.clone()),
        ..cfg
    })
    .expect("origin starts");
    (o, switch)
}

/// Requests the origin received whose target starts with `path`.
pub fn hits(o: &Origin, path: &str) -> usize {
    let line = format!("GET {path}");
    o.captured()
        .iter()
        .filter(|r| r.starts_with(line.as_bytes()))
        .count()
}

/// `n` requests for `/x` on one keep-alive connection, each answered 200.
pub fn traffic(addr: SocketAddr, n: usize) {
    let mut c = Client::connect(addr);
    for i in 0..n {
        c.send(&get("/x")).expect("send");
        let r = tests::strict::response(&mut c, &format!("request {i}"));
        assert_eq!(r.status, 200, "request {i}: {r:?}");
    }
}
