//! A TLS listener with the PROXY protocol (issue 27): the header is read before the
//! handshake and nothing past it (the ClientHello, sent in the same segment, is the
//! handshake's), on every driver; the header's address is the client's; a TLS client
//! without a header is closed, its handshake never started.

use proxy::config::{Config, ListenerTls};
use shared::proxy_protocol::write_v2;
use shared::tls::server::{server_config, CertFiles, ServerTlsSpec};
use tests::inproc::{config, Proxy};
use tests::raw::{assert_closed, Client};
use tests::tls::{client_config, Ca, TlsClient};

#[test]
fn the_header_is_read_before_the_handshake_and_nothing_past_it() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("pp-tls");
    let (cert, key) = ca.leaf_files(&dir, "default", &["localhost"]);
    let spec = ServerTlsSpec {
        default: CertFiles { cert, key },
        sni: Vec::new(),
    };
    let built = server_config(&spec).expect("server config");
    let tls = client_config(&ca.der(), false);
    let mut want = Vec::new();
    for d in tests::drivers() {
        let mut cfg: Config = config(&[o.addr()]);
        cfg.runtime.driver = tests::driver_choice(d);
        cfg.listeners[0].tls = Some(ListenerTls {
            spec: spec.clone(),
            built: built.clone(),
        });
        cfg.listeners[0].proxy_protocol = true;
        let p = Proxy::start(cfg);
        let v1 = b"PROXY TCP4 192.0.2.7 10.0.0.1 40000 443\r\n";
        let mut c = TlsClient::connect_after(p.addr, &tls, "localhost", v1).expect("handshake");
        assert_eq!(c.get("/").status, 200, "{d}");
        assert_eq!(c.get("/").status, 200, "{d}");
        let mut v2 = Vec::new();
        write_v2(
            &mut v2,
            "[2001:db8::9]:1".parse().unwrap(),
            "[::1]:443".parse().unwrap(),
        );
        let mut c = TlsClient::connect_after(p.addr, &tls, "localhost", &v2).expect("handshake");
        assert_eq!(c.get("/").status, 200, "{d}");
        want.extend(["192.0.2.7", "192.0.2.7", "2001:db8::9"]);
        // A TLS client without a header: its ClientHello is not a header; closed.
        let mut bare = Client::connect(p.addr);
        let mut hello = Vec::new();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut conn = rustls::ClientConnection::new(tls.clone(), name).unwrap();
        conn.write_tls(&mut hello).unwrap();
        bare.send(&hello).unwrap();
        assert_closed(&mut bare, "no header");
        let s = &p.running().stats()[0];
        assert_eq!(s.proxy_protocol[0].get(), 1, "{d}");
        assert_eq!((s.tls_handshakes.get(), s.tls_failed.get()), (2, 0), "{d}");
        p.stop();
    }
    let real: Vec<String> = o
        .captured()
        .iter()
        .map(|r| {
            let t = String::from_utf8_lossy(r).into_owned();
            let l = t
                .lines()
                .find(|l| l.starts_with("x-real-ip: ") || l.starts_with("X-Real-IP: "));
            l.map_or_else(String::new, |l| l[11..].to_string())
        })
        .collect();
    assert_eq!(real, want);
}
