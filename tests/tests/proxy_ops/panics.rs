//! A panic inside one connection's handling ends that connection alone (docs/ARCHITECTURE.md,
//! "Panics"), end to end: the proxy's test-only fault injection (the `fault-injection`
//! feature, on in this crate's dev build only) makes a request for a chosen target panic on
//! the worker, after its head was read. The worker's other clients, on their keep-alive
//! connections, are still answered; the panicking client's connection is closed with nothing
//! sent; the panic is counted; its slot and the open-connection gauge are given back.

use std::net::SocketAddr;
use tests::raw::{self, Client, WAIT};
use tests::scrape::{scrape, value};
use tests::toml_proxy::{config_parts, WITH_ADMIN};

/// One worker (every connection on it), at most 4 client connections: a slot the panic kept
/// would leave no room for the last client below.
fn config(origin: SocketAddr) -> proxy::config::Config {
    let rest = format!(
        r#"
[limits]
max_connections = 4

[upstream.app]
servers = ["{origin}"]

[[route]]
path = "/"
upstream = "app"
"#
    );
    let text = config_parts(WITH_ADMIN, &rest);
    proxy::config::from_toml("panics.toml", &text).expect("config")
}

fn get(c: &mut Client, path: &str, what: &str) -> u16 {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap_or_else(|e| panic!("{what}: send: {e}"));
    raw::response(c, what).status
}

#[test]
fn a_panicking_connection_ends_alone_and_the_worker_serves_on() {
    const BOOM: &str = "/fault-injection/panic";
    proxy::fault_injection::panic_on(BOOM);
    let o = tests::origin();
    let p = proxy::start(config(o.addr())).expect("proxy");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    let mut others: Vec<Client> = (0..3).map(|_| Client::connect(addr)).collect();
    for (i, c) in others.iter_mut().enumerate() {
        assert_eq!(get(c, "/?size=10", &format!("client {i}")), 200);
    }
    let m = scrape(admin);
    assert_eq!(value(&m, "proxy_client_connections_open"), 3.0, "{m:?}");
    // The fourth connection, the last slot: its request panics in its handling.
    let mut doomed = Client::connect(addr);
    doomed
        .send(format!("GET {BOOM} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
    raw::assert_closed(&mut doomed, "the panicking connection");
    let m = scrape(admin);
    assert_eq!(value(&m, "proxy_connection_panics_total"), 1.0, "{m:?}");
    assert!(
        tests::eventually(WAIT, || value(
            &scrape(admin),
            "proxy_client_connections_open"
        ) == 3.0),
        "the open-connection gauge stays up: {:?}",
        scrape(admin)
    );
    // The worker goes on: the other clients' keep-alive connections answer, and the slot
    // is free again for a new client (the fourth of four).
    for (i, c) in others.iter_mut().enumerate() {
        assert_eq!(get(c, "/?size=10", &format!("client {i} after")), 200);
    }
    let mut fresh = Client::connect(addr);
    assert_eq!(get(&mut fresh, "/?size=10", "a new client"), 200);
    let m = scrape(admin);
    assert_eq!(value(&m, "proxy_connection_panics_total"), 1.0, "{m:?}");
    assert_eq!(value(&m, "proxy_client_connections_open"), 4.0, "{m:?}");
    p.shutdown().unwrap();
}
