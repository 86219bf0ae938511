//! `[upstream.NAME] proxy_protocol = "v1" | "v2"` (issue 27): each upstream connection starts
//! with a PROXY protocol header naming the client and the address it reached the proxy at,
//! byte for byte; such a connection carries one response and is closed (never pooled, never
//! another client's); health checks send v1 UNKNOWN / v2 LOCAL (HAProxy's checks).

use shared::proxy_protocol::{write_v1, write_v2, V1_UNKNOWN, V2_LOCAL};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

use tests::inproc::Proxy;
use tests::raw::{response, Client, WAIT};

/// Per connection: the bytes received, and whether it ended (EOF from the proxy).
type Conns = Arc<Mutex<Vec<(Vec<u8>, bool)>>>;

/// An origin that records every connection's bytes, from its first byte to its end, and
/// answers each request head with a 200 (keep-alive).
struct RawOrigin {
    addr: SocketAddr,
    conns: Conns,
}

impl RawOrigin {
    fn start() -> RawOrigin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let conns: Conns = Arc::new(Mutex::new(Vec::new()));
        let all = conns.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let all = all.clone();
                let i = {
                    let mut v = all.lock().unwrap();
                    v.push((Vec::new(), false));
                    v.len() - 1
                };
                std::thread::spawn(move || {
                    let mut answered = 0;
                    let mut buf = [0u8; 4096];
                    loop {
                        let n = s.read(&mut buf).unwrap_or(0);
                        let mut v = all.lock().unwrap();
                        if n == 0 {
                            v[i].1 = true;
                            return;
                        }
                        v[i].0.extend_from_slice(&buf[..n]);
                        let heads = v[i].0.windows(4).filter(|w| w == b"\r\n\r\n").count();
                        drop(v);
                        while answered < heads {
                            answered += 1;
                            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        }
                    }
                });
            }
        });
        RawOrigin { addr, conns }
    }

    fn conns(&self) -> Vec<(Vec<u8>, bool)> {
        self.conns.lock().unwrap().clone()
    }
}

fn start(listen_extra: &str, group_extra: &str, origin: SocketAddr) -> Proxy {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n{listen_extra}\
         [runtime]\nworkers = 1\npin = false\n[timeouts]\nshutdown = \"1s\"\n\
         [upstream.app]\nservers = [\"{origin}\"]\n{group_extra}\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\n"
    );
    Proxy::start(proxy::config::from_toml("send.toml", &text).expect("valid config"))
}

const GET: &[u8] = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n";

#[test]
fn each_upstream_connection_starts_with_its_clients_header_and_is_never_shared() {
    for version in ["v1", "v2"] {
        let origin = RawOrigin::start();
        let p = start("", &format!("proxy_protocol = \"{version}\""), origin.addr);
        let header = |client: SocketAddr| {
            let mut h = Vec::new();
            let write = if version == "v1" { write_v1 } else { write_v2 };
            write(&mut h, client, p.addr);
            h
        };
        // Client A: two keep-alive requests; then client B.
        let mut a = Client::connect(p.addr);
        let a_addr = a.stream.local_addr().unwrap();
        for _ in 0..2 {
            a.send(GET).unwrap();
            assert_eq!(response(&mut a, "A").status, 200, "{version}");
        }
        let mut b = Client::connect(p.addr);
        let b_addr = b.stream.local_addr().unwrap();
        b.send(GET).unwrap();
        assert_eq!(response(&mut b, "B").status, 200, "{version}");
        // Every connection ended after its one response (the proxy closed it).
        assert!(
            tests::eventually(WAIT, || {
                let c = origin.conns();
                c.len() == 3 && c.iter().all(|(_, ended)| *ended)
            }),
            "{version}: {:?}",
            origin.conns()
        );
        let want: Vec<Vec<u8>> = [a_addr, a_addr, b_addr]
            .iter()
            .map(|&client| {
                let mut bytes = header(client);
                bytes.extend_from_slice(b"GET /x HTTP/1.1\r\nHost: t\r\n");
                bytes
            })
            .collect();
        for ((got, _), want) in origin.conns().iter().zip(&want) {
            assert_eq!(
                String::from_utf8_lossy(&got[..want.len()]),
                String::from_utf8_lossy(want),
                "{version}"
            );
        }
        p.stop();
    }
}

/// Behind a PROXY listener the header sent on is the received one's client (the address the
/// proxy took it at stays the destination).
#[test]
fn a_received_header_is_passed_on() {
    let origin = RawOrigin::start();
    let p = start(
        "proxy_protocol = true\n",
        "proxy_protocol = \"v1\"",
        origin.addr,
    );
    let mut c = Client::connect(p.addr);
    c.send(&[&b"PROXY TCP6 2001:db8::7 ::1 40000 443\r\n"[..], GET].concat())
        .unwrap();
    assert_eq!(response(&mut c, "proxied").status, 200);
    let want = format!(
        "PROXY TCP6 2001:db8::7 ::ffff:127.0.0.1 40000 {}\r\nGET /x",
        p.addr.port()
    );
    assert!(tests::eventually(WAIT, || origin.conns().len() == 1));
    let got = origin.conns()[0].0.clone();
    assert_eq!(String::from_utf8_lossy(&got[..want.len()]), want);
    p.stop();
}

/// Health checks of such servers start with the group's own header: v1 UNKNOWN, v2 LOCAL.
#[test]
fn health_checks_send_the_proxys_own_header() {
    for (version, own) in [("v1", V1_UNKNOWN), ("v2", &V2_LOCAL[..])] {
        let origin = RawOrigin::start();
        let p = start(
            "",
            &format!(
                "proxy_protocol = \"{version}\"\n\
                 health = {{ path = \"/healthz\", interval = \"100ms\", timeout = \"100ms\" }}"
            ),
            origin.addr,
        );
        assert!(
            tests::eventually(WAIT, || !origin.conns().is_empty()
                && origin.conns()[0].0.len() > own.len() + 12),
            "{version}: no check"
        );
        let got = origin.conns()[0].0.clone();
        assert_eq!(&got[..own.len()], own, "{version}");
        assert!(
            got[own.len()..].starts_with(b"GET /healthz HTTP/1.1\r\n"),
            "{version}"
        );
        p.stop();
    }
}
