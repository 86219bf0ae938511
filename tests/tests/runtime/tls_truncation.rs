//! A TLS peer that ends a close-delimited response (no Content-Length, not chunked: the body
//! ends at EOF) by closing TCP without a close_notify has cut it, or someone did (RFC 8446
//! section 6.1): neither the proxy nor the loader passes such a response off as complete.
//! The same response ended by a close_notify is complete. On every driver here.
//!
//! The server is a small blocking rustls one of this test's own: the built-in origin always
//! ends a connection with a close_notify.

use rustls::{ServerConnection, StreamOwned};
use shared::runtime::DriverKind;
use shared::shutdown::ShutdownFlag;
use shared::tls::{ClientTlsOptions, Trust};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tests::inproc::Proxy;
use tests::tls_server::Issued;

const BODY_LEN: usize = 1000;

/// An HTTPS server on 127.0.0.1:0 answering each connection's request with a 200 whose
/// `BODY_LEN`-byte body is close-delimited, then closing TCP: after a close_notify when
/// `close_notify`, without one otherwise. Threads end with the process.
fn close_delimited_server(cert: &Issued, close_notify: bool) -> SocketAddr {
    let cfg = Arc::new(cert.server_config());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            let cfg = cfg.clone();
            std::thread::spawn(move || {
                let mut tls = StreamOwned::new(ServerConnection::new(cfg).unwrap(), tcp);
                let mut head = Vec::new();
                let mut chunk = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut chunk) {
                        Ok(n) if n > 0 => head.extend_from_slice(&chunk[..n]),
                        _ => return,
                    }
                }
                let mut resp = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
                resp.extend(std::iter::repeat_n(b'x', BODY_LEN));
                if tls.write_all(&resp).is_err() {
                    return;
                }
                if close_notify {
                    tls.conn.send_close_notify();
                }
                let _ = tls.flush();
                // Dropping the stream closes TCP (no close_notify unless queued above).
            });
        }
    });
    addr
}

/// A proxy on driver `d` over one HTTPS upstream at `port` verified with the CA at `ca`.
fn proxy_to(ca: &Path, port: u16, d: DriverKind) -> Proxy {
    Proxy::start(proxy_config_to(ca, port, d))
}

/// The config `proxy_to` starts.
fn proxy_config_to(ca: &Path, port: u16, d: DriverKind) -> proxy::config::Config {
    let dir = ca.parent().unwrap();
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[upstream.app]\n\
         servers = [\"https://localhost:{port}\"]\nkeepalive = 0\n\
         tls = {{ ca = \"{}\" }}\n\n[[route]]\nupstream = \"app\"\n",
        ca.display()
    );
    let path = dir.join("p.toml");
    std::fs::write(&path, text).unwrap();
    let mut cfg = proxy::config::load(&path).expect("config loads");
    cfg.runtime.workers = 1;
    cfg.runtime.pin = false;
    cfg.runtime.driver = tests::driver_choice(d);
    cfg
}

fn loader_run(ca: &Path, port: u16, d: DriverKind, n: u64) -> loader::stats::RunResult {
    let url = format!("https://localhost:{port}/");
    let mut o = loader::RunOptions::for_urls(&[url.as_str()]).expect("valid URL");
    o.connections = 1;
    o.requests = Some(n);
    o.runtime.workers = 1;
    o.runtime.pin = false;
    o.runtime.driver = tests::driver_choice(d);
    o.quiet = true;
    o.timeout = Duration::from_secs(10);
    o.tls = ClientTlsOptions {
        trust: Trust::CaFile(ca.to_owned()),
        resumption: true,
    };
    loader::run(&o, ShutdownFlag::new()).expect("run starts")
}

#[test]
fn proxy_does_not_end_a_cut_close_delimited_response() {
    let (ca, leaf) = tests::tls_server::ca_and_leaf();
    let cut = close_delimited_server(&leaf, false).port();
    let clean = close_delimited_server(&leaf, true).port();
    let body = "x".repeat(BODY_LEN);
    for d in tests::drivers() {
        // Cut: the client gets the head (re-framed as chunked for an HTTP/1.1 client) and
        // the body's bytes as one chunk, then the connection closes with no last chunk.
        let p = proxy_to(&ca, cut, d);
        let mut c = p.connect();
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        let got = String::from_utf8_lossy(&c.read_to_close()).into_owned();
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{d}: {got}");
        assert!(
            got.to_ascii_lowercase()
                .contains("transfer-encoding: chunked\r\n"),
            "{d}: {got}"
        );
        let (_, payload) = got.split_once("\r\n\r\n").expect("a head");
        assert_eq!(
            payload,
            format!("{BODY_LEN:x}\r\n{body}\r\n"),
            "{d}: no last chunk"
        );
        assert_eq!(p.running().stats()[0].upstream_errors.get(), 1, "{d}");
        p.stop();

        // With close_notify: complete.
        let p = proxy_to(&ca, clean, d);
        let mut c = p.connect();
        let r = c.get("/");
        assert_eq!((r.status, r.body.len()), (200, BODY_LEN), "{d}");
        assert_eq!(p.running().stats()[0].upstream_errors.get(), 0, "{d}");
        p.stop();
    }
}

#[test]
fn loader_counts_a_cut_close_delimited_response_as_a_read_error() {
    let (ca, leaf) = tests::tls_server::ca_and_leaf();
    let cut = close_delimited_server(&leaf, false).port();
    let clean = close_delimited_server(&leaf, true).port();
    for d in tests::drivers() {
        let r = loader_run(&ca, cut, d, 5);
        let t = &r.totals;
        assert_eq!((t.attempts, t.completed), (5, 0), "{d}: {t:?}");
        assert_eq!(t.failures.read, 5, "{d}: {t:?}");
        assert_eq!(t.failures.total(), 5, "{d}: {t:?}");
        assert!(t.status.is_empty(), "{d}: no 2xx: {t:?}");

        let r = loader_run(&ca, clean, d, 5);
        let t = &r.totals;
        assert_eq!((t.attempts, t.completed), (5, 5), "{d}: {t:?}");
        assert_eq!(t.failures.total(), 0, "{d}: {t:?}");
        assert_eq!(t.status, vec![(200, 5)], "{d}");
        assert_eq!(t.body_bytes, 5 * BODY_LEN as u64, "{d}");
    }
}

#[test]
fn a_tls_client_gone_between_requests_without_close_notify_ends_quietly() {
    use tests::tls::{client_config, Ca, TlsClient};
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("truncation-client");
    let (cert, key) = ca.leaf_files(&dir, "default", &["localhost"]);
    let spec = shared::tls::server::ServerTlsSpec {
        default: shared::tls::server::CertFiles { cert, key },
        sni: Vec::new(),
    };
    let built = shared::tls::server::server_config(&spec).expect("server config");
    for d in tests::drivers() {
        let mut cfg = tests::inproc::config(&[o.addr()]);
        cfg.runtime.driver = tests::driver_choice(d);
        cfg.listeners[0].tls = Some(proxy::config::ListenerTls {
            spec: spec.clone(),
            built: built.clone(),
        });
        let p = Proxy::start(cfg);
        let mut c = TlsClient::connect(p.addr, &client_config(&ca.der(), false), "localhost")
            .expect("handshake");
        assert_eq!(c.get("/").status, 200, "{d}");
        // The client's TCP write side ends with no close_notify; the proxy's close of the
        // connection (EOF on the raw socket) is the event that it handled it.
        c.s.sock.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        c.s.sock
            .read_to_end(&mut rest)
            .expect("the proxy closes the connection (no reset, no timeout)");
        let s = &p.running().stats()[0];
        assert_eq!(s.client_errors.get(), 0, "{d}: not counted as an error");
        assert_eq!(s.upstream_errors.get(), 0, "{d}");
        assert_eq!((s.requests.get(), s.tls_failed.get()), (1, 0), "{d}");
        p.stop();
    }
}

/// An HTTP/1.0 client over TLS gets the cut body close-delimited: the proxy closes without a
/// close_notify, so the client's TLS sees the cut (rustls: `UnexpectedEof`); cleanly ended,
/// the response ends with the proxy's close_notify.
#[test]
fn an_http10_tls_client_sees_the_cut_as_a_tls_truncation() {
    use tests::tls::{client_config, Ca, TlsClient};
    let (ca_pem, leaf) = tests::tls_server::ca_and_leaf();
    let cut = close_delimited_server(&leaf, false).port();
    let clean = close_delimited_server(&leaf, true).port();
    let ca = Ca::new();
    let dir = tests::temp_dir("truncation-http10");
    let (cert, key) = ca.leaf_files(&dir, "default", &["localhost"]);
    let spec = shared::tls::server::ServerTlsSpec {
        default: shared::tls::server::CertFiles { cert, key },
        sni: Vec::new(),
    };
    let built = shared::tls::server::server_config(&spec).expect("server config");
    for d in tests::drivers() {
        for (port, want) in [
            (cut, Some(std::io::ErrorKind::UnexpectedEof)),
            (clean, None),
        ] {
            let mut cfg = proxy_config_to(&ca_pem, port, d);
            cfg.listeners[0].tls = Some(proxy::config::ListenerTls {
                spec: spec.clone(),
                built: built.clone(),
            });
            let p = Proxy::start(cfg);
            let mut c = TlsClient::connect(p.addr, &client_config(&ca.der(), false), "localhost")
                .expect("handshake");
            c.send(b"GET / HTTP/1.0\r\nHost: a\r\n\r\n");
            let mut got = Vec::new();
            let end = c.s.read_to_end(&mut got).err().map(|e| e.kind());
            assert_eq!(end, want, "{d} port {port}");
            let got = String::from_utf8_lossy(&got).into_owned();
            assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{d}: {got}");
            let body = got.split_once("\r\n\r\n").expect("a head").1;
            assert_eq!(
                body,
                "x".repeat(BODY_LEN),
                "{d}: the bytes the upstream sent"
            );
            p.stop();
        }
    }
}
