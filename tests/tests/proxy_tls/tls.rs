//! HTTPS listeners: TLS termination in front of a plain origin, on every driver this machine
//! has. Certificates are made by the tests (rcgen); the client is rustls.

use proxy::config::{Config, ListenerTls};
use shared::runtime::DriverKind;
use shared::tls::server::{server_config, CertFiles, ServerTlsSpec, SniCert};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;
use tests::inproc::{config, Proxy};
use tests::tls::{client_config, Ca, TlsClient};

fn tls_of(spec: ServerTlsSpec) -> ListenerTls {
    let built = server_config(&spec).expect("server config");
    ListenerTls { spec, built }
}

fn files(cert: &Path, key: &Path) -> CertFiles {
    CertFiles {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
    }
}

/// Certificates for default.test, a.test and *.w.test, made in `dir`, and a spec whose two
/// sni entries name the last two `a` and `w`: the spec and the (certificate, key) files, in
/// that order.
fn three_certs(
    ca: &Ca,
    dir: &Path,
    a: &str,
    w: &str,
) -> (ServerTlsSpec, [(std::path::PathBuf, std::path::PathBuf); 3]) {
    let (dc, dk) = ca.leaf_files(dir, "default", &["default.test"]);
    let (ac, ak) = ca.leaf_files(dir, "a", &["a.test"]);
    let (wc, wk) = ca.leaf_files(dir, "w", &["*.w.test"]);
    let entry = |name: &str, c: &Path, k: &Path| SniCert {
        names: vec![name.into()],
        files: files(c, k),
    };
    let spec = ServerTlsSpec {
        default: files(&dc, &dk),
        sni: vec![entry(a, &ac, &ak), entry(w, &wc, &wk)],
    };
    (spec, [(dc, dk), (ac, ak), (wc, wk)])
}

/// A one-worker HTTPS proxy in front of `origin` on driver `d`, serving `spec`.
fn https_proxy(origin: std::net::SocketAddr, d: DriverKind, spec: ServerTlsSpec) -> Proxy {
    let mut cfg: Config = config(&[origin]);
    cfg.runtime.driver = tests::driver_choice(d);
    cfg.listeners[0].tls = Some(tls_of(spec));
    Proxy::start(cfg)
}

fn single(dir: &Path, ca: &Ca) -> ServerTlsSpec {
    let (c, k) = ca.leaf_files(dir, "default", &["localhost"]);
    ServerTlsSpec {
        default: files(&c, &k),
        sni: Vec::new(),
    }
}

fn counters(p: &Proxy) -> (u64, u64, u64, u64) {
    let s = &p.running().stats()[0];
    (
        s.tls_handshakes.get(),
        s.tls_resumed.get(),
        s.tls_failed.get(),
        s.tls_plain_http.get(),
    )
}

#[test]
fn terminates_tls_in_front_of_a_plain_origin() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("terminate");
    for d in tests::drivers() {
        let p = https_proxy(o.addr(), d, single(&dir, &ca));
        for only12 in [false, true] {
            let cfg = client_config(&ca.der(), only12);
            let mut c = TlsClient::connect(p.addr, &cfg, "localhost").expect("handshake");
            assert_eq!(c.s.conn.alpn_protocol(), Some(&b"http/1.1"[..]), "{d}");
            let want = if only12 { "TLSv1_2" } else { "TLSv1_3" };
            let v = format!("{:?}", c.s.conn.protocol_version().unwrap());
            assert_eq!(v, want, "{d}");
            // AES-128-GCM, the server's preference, though the client lists AES-256 first.
            let suite = format!("{:?}", c.s.conn.negotiated_cipher_suite().unwrap().suite());
            let want = if only12 {
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
            } else {
                "TLS13_AES_128_GCM_SHA256"
            };
            assert_eq!(suite, want, "{d}");
            // Keep-alive: several requests on one connection, bodies small and large.
            for size in [0usize, 64, 100_000] {
                let r = c.get(&format!("/?size={size}"));
                assert_eq!(r.status, 200, "{d}");
                assert!(r.complete, "{d}");
                assert_eq!(r.body.len(), size, "{d}");
            }
        }
        let req = String::from_utf8_lossy(o.captured().last().unwrap()).into_owned();
        assert!(req.contains("X-Forwarded-Proto: https\r\n"), "{d}: {req}");
        let (hs, _, failed, _) = counters(&p);
        assert_eq!((hs, failed), (2, 0), "{d}");
        p.stop();
    }
}

#[test]
fn sni_picks_the_certificate_and_unknown_names_get_the_default() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("sni");
    let (spec, [(dc, _), (ac, _), (wc, _)]) = three_certs(&ca, &dir, "a.test", "*.w.test");
    for d in tests::drivers() {
        let p = https_proxy(o.addr(), d, spec.clone());
        let cfg = client_config(&ca.der(), false);
        for (sni, cert) in [("a.test", &ac), ("x.w.test", &wc), ("default.test", &dc)] {
            let mut c = TlsClient::connect(p.addr, &cfg, sni).expect("handshake");
            assert_eq!(c.server_cert(), pem_der(cert), "{d}: {sni}");
            assert_eq!(c.get("/").status, 200, "{d}: {sni}");
        }
        // A name no entry has: the default certificate, which the client rejects for that name.
        let e = TlsClient::connect(p.addr, &cfg, "other.test")
            .err()
            .expect("rejected");
        assert!(e.contains("not valid for name"), "{d}: {e}");
        p.stop();
    }
}

/// An `sni` name written as a fully qualified name (`A.Test.`): clients send no trailing dot
/// (rustls hands the name over without one), so it is matched as `a.test`, as routes match
/// hosts. It was stored with its dot and never chosen: the default certificate went out.
#[test]
fn an_sni_name_written_with_a_trailing_dot_is_chosen() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("sni-dot");
    let (spec, [(dc, dk), (ac, ak), (wc, _)]) = three_certs(&ca, &dir, "A.Test.", "*.w.test.");
    let built = server_config(&spec).expect("server config");
    assert!(built.warnings.is_empty(), "{:?}", built.warnings);
    let d = tests::drivers()[0];
    let p = https_proxy(o.addr(), d, spec);
    let cfg = client_config(&ca.der(), false);
    for (sni, cert) in [("a.test", &ac), ("x.w.test", &wc)] {
        let mut c = TlsClient::connect(p.addr, &cfg, sni)
            .unwrap_or_else(|e| panic!("{sni}: the default certificate? {e}"));
        assert_eq!(c.server_cert(), pem_der(cert), "{sni}");
        assert_eq!(c.get("/").status, 200, "{sni}");
    }
    p.stop();
    // One dot only, as for a route's host: `a.test..` is no host name.
    let mut bad = spec_with(&dc, &dk, &ac, &ak, "a.test..");
    let e = server_config(&bad).unwrap_err();
    assert!(
        e.message.contains("`a.test..`") && e.message.contains("not a host name"),
        "{e}"
    );
    assert_eq!(e.entry, Some(0), "{e}");
    bad.sni[0].names = vec!["*.".into()];
    let e = server_config(&bad).unwrap_err();
    assert!(
        e.message.contains("`*.`") && e.message.contains("wildcard"),
        "{e}"
    );
    assert_eq!(e.entry, Some(0), "{e}");
}

/// A default certificate and one `sni` entry of one name.
fn spec_with(dc: &Path, dk: &Path, c: &Path, k: &Path, name: &str) -> ServerTlsSpec {
    ServerTlsSpec {
        default: files(dc, dk),
        sni: vec![SniCert {
            names: vec![name.into()],
            files: files(c, k),
        }],
    }
}

fn pem_der(p: &Path) -> rustls::pki_types::CertificateDer<'static> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_file(p).unwrap()
}

/// ALPN: a client offering only `http/1.0` gets it (nginx selects it too); it failed the
/// handshake with alert 120 (no_application_protocol), the server offering `http/1.1` alone.
/// A client offering both gets `http/1.1`, the server's first.
#[test]
fn alpn_selects_http_1_0_for_a_client_that_offers_only_it() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("alpn");
    let p = https_proxy(o.addr(), tests::drivers()[0], single(&dir, &ca));
    for (offered, want) in [
        (&[&b"http/1.0"[..]][..], &b"http/1.0"[..]),
        (&[&b"http/1.0"[..], &b"http/1.1"[..]][..], &b"http/1.1"[..]),
        (&[&b"http/1.1"[..], &b"http/1.0"[..]][..], &b"http/1.1"[..]),
    ] {
        let mut cfg = (*client_config(&ca.der(), false)).clone();
        cfg.alpn_protocols = offered.iter().map(|a| a.to_vec()).collect();
        let cfg = std::sync::Arc::new(cfg);
        let what = String::from_utf8_lossy(&offered.concat()).into_owned();
        let mut c = TlsClient::connect(p.addr, &cfg, "localhost")
            .unwrap_or_else(|e| panic!("offering {what}: {e}"));
        assert_eq!(c.s.conn.alpn_protocol(), Some(want), "offering {what}");
        c.send(b"GET / HTTP/1.0\r\nHost: t\r\n\r\n");
        assert_eq!(c.response().status, 200, "offering {what}");
    }
    p.stop();
}

#[test]
fn sessions_resume_and_are_counted() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("resume");
    for d in tests::drivers() {
        let p = https_proxy(o.addr(), d, single(&dir, &ca));
        for only12 in [false, true] {
            // One client config: its session store carries the ticket (or the 1.2 session).
            let cfg = client_config(&ca.der(), only12);
            let mut first = TlsClient::connect(p.addr, &cfg, "localhost").unwrap();
            assert!(!first.resumed());
            // TLS 1.3 tickets arrive after the handshake: a response proves they were read.
            assert_eq!(first.get("/").status, 200);
            for i in 0..3 {
                let mut c = TlsClient::connect(p.addr, &cfg, "localhost").unwrap();
                assert!(
                    c.resumed(),
                    "{d}: tls1.2 only {only12}: connection {i} resumed"
                );
                assert_eq!(c.get("/").status, 200);
            }
        }
        let (hs, resumed, failed, _) = counters(&p);
        assert_eq!((hs, resumed, failed), (8, 6, 0), "{d}");
        p.stop();
    }
}

#[test]
fn plain_http_to_the_tls_port_gets_400_and_a_close() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("plain");
    for d in tests::drivers() {
        let p = https_proxy(o.addr(), d, single(&dir, &ca));
        let r = tests::raw::exchange(
            p.addr,
            b"GET / HTTP/1.1\r\nHost: t\r\n\r\n",
            tests::raw::WAIT,
        );
        let text = String::from_utf8_lossy(&r.bytes).into_owned();
        assert!(text.starts_with("HTTP/1.1 400 "), "{d}: {text}");
        assert!(
            text.ends_with("The plain HTTP request was sent to HTTPS port\r\n"),
            "{d}: {text}"
        );
        assert_ne!(r.end, tests::raw::End::TimedOut, "{d}: closed");
        // Other clients are not disturbed.
        let cfg = client_config(&ca.der(), false);
        let mut c = TlsClient::connect(p.addr, &cfg, "localhost").unwrap();
        assert_eq!(c.get("/").status, 200, "{d}");
        let (hs, _, failed, plain) = counters(&p);
        assert_eq!((hs, failed, plain), (1, 1, 1), "{d}");
        p.stop();
    }
}

#[test]
fn a_stalled_handshake_is_closed_at_the_header_timeout() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("stall");
    for d in tests::drivers() {
        let mut cfg: Config = config(&[o.addr()]);
        cfg.runtime.driver = tests::driver_choice(d);
        cfg.timeouts.header = Duration::from_millis(300);
        cfg.listeners[0].tls = Some(tls_of(single(&dir, &ca)));
        let p = Proxy::start(cfg);
        // The first bytes of a ClientHello record header, then nothing.
        let mut s = std::net::TcpStream::connect(p.addr).unwrap();
        s.write_all(&[0x16, 0x03, 0x01]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 64];
        let t = std::time::Instant::now();
        match s.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("{d}: unexpected {n} bytes"),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{d}: {e}"),
        }
        assert!(
            t.elapsed() < Duration::from_secs(9),
            "{d}: closed by the proxy"
        );
        assert!(
            tests::eventually(Duration::from_secs(5), || counters(&p).2 == 1),
            "{d}: counted as failed"
        );
        p.stop();
    }
}

#[test]
fn websocket_over_tls() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("ws");
    for d in tests::drivers() {
        let p = https_proxy(o.addr(), d, single(&dir, &ca));
        let cfg = client_config(&ca.der(), false);
        let mut c = TlsClient::connect(p.addr, &cfg, "localhost").unwrap();
        c.send(
            b"GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        );
        // The 101 has no body: read its head alone.
        let mut head = c.take_buffered();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let mut tmp = [0u8; 4096];
            let n = c.s.read(&mut tmp).unwrap();
            assert!(n > 0, "{d}");
            head.extend_from_slice(&tmp[..n]);
        }
        let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert!(head.starts_with(b"HTTP/1.1 101 "), "{d}");
        assert_eq!(end, head.len(), "{d}: nothing after the 101 yet");
        for msg in [&b"hello"[..], &vec![7u8; 200_000][..]] {
            c.s.write_all(msg).unwrap();
            let mut got = vec![0u8; msg.len()];
            c.s.read_exact(&mut got).unwrap();
            assert_eq!(got, msg, "{d}");
        }
        // The client ends its side: the tunnel ends and the proxy closes (close_notify).
        c.s.conn.send_close_notify();
        c.s.flush().unwrap();
        let rest = c.read_to_end();
        assert!(rest.is_empty(), "{d}");
        p.stop();
    }
}

#[test]
fn static_files_over_tls() {
    let ca = Ca::new();
    let dir = tests::temp_dir("static");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    // Larger than the relay buffer and the in-memory file limit: read and sent in pieces.
    let big: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(www.join("big.bin"), &big).unwrap();
    std::fs::write(www.join("small.txt"), b"small\n").unwrap();
    ca.leaf_files(&dir, "site", &["localhost"]);
    let toml = dir.join("s.toml");
    std::fs::write(
        &toml,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[listen.tls]\ncert = \"site.crt\"\nkey = \"site.key\"\n\n\
         [[route]]\nstatic = { root = \"www\" }\n",
    )
    .unwrap();
    for d in tests::drivers() {
        let mut cfg = proxy::config::load(&toml).unwrap();
        cfg.runtime.workers = 1;
        cfg.runtime.pin = false;
        cfg.runtime.driver = tests::driver_choice(d);
        let p = Proxy::start(cfg);
        let cc = client_config(&ca.der(), false);
        let mut c = TlsClient::connect(p.addr, &cc, "localhost").unwrap();
        let r = c.get("/big.bin");
        assert_eq!(r.status, 200, "{d}");
        assert!(r.body == big, "{d}: the whole file, byte for byte");
        let r = c.get("/small.txt");
        assert_eq!(r.body, b"small\n", "{d}");
        c.send(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=100000-100009\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 206, "{d}");
        assert_eq!(r.body, &big[100_000..100_010], "{d}");
        p.stop();
    }
}

/// A TLS connection the proxy ends quietly (the client's own close_notify between requests,
/// or the idle timeout) ends with the proxy's close_notify (RFC 8446 6.1: each party sends
/// one before closing its write side): a client tells that clean end from a cut, which
/// rustls reports as `UnexpectedEof`.
#[test]
fn a_quiet_end_of_a_tls_connection_carries_the_proxys_close_notify() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("quiet_end");
    for d in tests::drivers() {
        let mut cfg: Config = config(&[o.addr()]);
        cfg.runtime.driver = tests::driver_choice(d);
        cfg.listeners[0].tls = Some(tls_of(single(&dir, &ca)));
        cfg.timeouts.idle = Duration::from_millis(300);
        cfg.timeouts.header = Duration::from_millis(300);
        let p = Proxy::start(cfg);
        let cc = client_config(&ca.der(), false);
        // The end read as it comes: Ok(0) is a close_notify, UnexpectedEof a bare FIN.
        let end = |c: &mut TlsClient, what: &str| {
            let mut tmp = [0u8; 64];
            match c.s.read(&mut tmp) {
                Ok(0) => {}
                Ok(n) => panic!("{d} {what}: {n} unexpected bytes"),
                Err(e) => panic!("{d} {what}: no close_notify from the proxy ({e})"),
            }
        };
        // The client's close_notify right after its answer (its connection still in its
        // request frame), and after a pause (parked, holding no buffers).
        for pause in [Duration::ZERO, Duration::from_millis(100)] {
            let mut c = TlsClient::connect(p.addr, &cc, "localhost").unwrap();
            assert_eq!(c.get("/?size=64").status, 200, "{d}");
            std::thread::sleep(pause);
            c.s.conn.send_close_notify();
            c.s.flush().unwrap();
            end(&mut c, &format!("client's close_notify after {pause:?}"));
        }
        // The idle timeout, between requests and before the first.
        let mut c = TlsClient::connect(p.addr, &cc, "localhost").unwrap();
        assert_eq!(c.get("/?size=64").status, 200, "{d}");
        end(&mut c, "idle timeout");
        let mut c = TlsClient::connect(p.addr, &cc, "localhost").unwrap();
        end(&mut c, "no first request");
        p.stop();
    }
}

/// A chunked upload written as the client's TLS records come from a chunk at a time: the
/// size line, 16 KiB of data, the CRLF, each a record. A read of the proxy then completes a
/// 16 KiB record and small ones behind it, more plaintext than rustls holds at once: the
/// upload was dropped without an answer ("received plaintext buffer full").
#[test]
fn an_upload_of_full_size_records_and_small_ones_goes_through_whole() {
    let o = tests::capturing_origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("records");
    const CHUNKS: usize = 64;
    for d in tests::drivers() {
        let p = https_proxy(o.addr(), d, single(&dir, &ca));
        let cc = client_config(&ca.der(), false);
        let mut c = TlsClient::connect(p.addr, &cc, "localhost").unwrap();
        let record = |c: &mut TlsClient, bytes: &[u8]| {
            c.s.write_all(bytes).unwrap();
            c.s.flush().unwrap();
        };
        record(
            &mut c,
            b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        for _ in 0..CHUNKS {
            record(&mut c, b"4000\r\n");
            record(&mut c, &[b'u'; 16384]);
            record(&mut c, b"\r\n");
        }
        record(&mut c, b"0\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200, "{d}");
        let last = o.captured().pop().expect("the origin's request");
        let body = last
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head")
            + 4;
        let got = last[body..].iter().filter(|&&b| b == b'u').count();
        assert_eq!(got, CHUNKS * 16384, "{d}: the whole body upstream");
        p.stop();
    }
}

/// A record that fails to decrypt after the handshake ends the connection with the fatal
/// alert it calls for (RFC 8446 5.2: bad_record_mac), not a bare TCP close.
#[test]
fn a_record_that_fails_to_decrypt_is_answered_with_its_alert() {
    let o = tests::origin();
    let ca = Ca::new();
    let dir = tests::temp_dir("bad_record");
    for (d, mid_body) in tests::drivers()
        .into_iter()
        .flat_map(|d| [(d, false), (d, true)])
    {
        let p = https_proxy(o.addr(), d, single(&dir, &ca));
        let cc = client_config(&ca.der(), false);
        let mut c = TlsClient::connect(p.addr, &cc, "localhost").unwrap();
        assert_eq!(c.get("/?size=64").status, 200, "{d}");
        // Between requests, and in a request's body.
        if mid_body {
            c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
            c.send(&[b'b'; 1000]);
        }
        // An application-data record of 32 zero bytes: no valid tag.
        let mut bad = vec![0x17, 3, 3, 0, 32];
        bad.extend([0u8; 32]);
        c.s.sock.write_all(&bad).unwrap();
        let mut tmp = [0u8; 64];
        match c.s.read(&mut tmp) {
            Err(e) => assert!(
                e.to_string().contains("BadRecordMac"),
                "{d} mid-body {mid_body}: {e} (not the alert)"
            ),
            Ok(n) => panic!("{d} mid-body {mid_body}: read {n} bytes"),
        }
        p.stop();
    }
}

/// An upstream that reads one request head, answers `413` with `Connection: close` at once
/// and then reads nothing more, its connection open until the test drops the receiver (the
/// proxy, not the upstream's end, must be what stops the upload).
fn refusing_upstream() -> (
    std::net::SocketAddr,
    std::sync::mpsc::Receiver<std::net::TcpStream>,
) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (keep, kept) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        if tests::raw::read_request_head(&mut s, &mut Vec::new()).is_ok() {
            let answer = b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big!";
            let _ = s.write_all(answer);
        }
        let _ = keep.send(s);
    });
    (addr, kept)
}

/// An upload refused by the upstream's early answer: an HTTPS client, still sending its
/// body, reads the `413` and may go on sending for a moment, as a plain client may: the
/// proxy closes lingering (reading what still comes, up to 1 MiB for 500 ms), not at once,
/// which would reset the connection and could destroy the answer before the client read
/// it. Before, the body's read, dropped in flight inside the TLS stream, left the stream
/// unreadable, so the lingering ended at its first read: the client's next writes met a
/// reset (seen with the epoll driver; with io_uring the dropped receive, cancelled, still
/// held the socket a moment).
#[test]
fn an_https_upload_refused_early_is_closed_lingering() {
    let ca = Ca::new();
    let dir = tests::temp_dir("refused_upload");
    const MORE: usize = 256 << 10;
    for d in tests::drivers() {
        let (up, _upstream) = refusing_upstream();
        let p = https_proxy(up, d, single(&dir, &ca));
        let cc = client_config(&ca.der(), false);
        let mut c = TlsClient::connect(p.addr, &cc, "localhost").unwrap();
        c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\n\r\n");
        c.send(&[b'x'; 100]);
        let r = c.response();
        assert_eq!((r.status, &r.body[..]), (413, &b"too big!"[..]), "{d}");
        let block = [b'y'; 16 << 10];
        for sent in (0..MORE).step_by(block.len()) {
            let wrote = c.s.write_all(&block).and_then(|_| c.s.flush());
            assert!(
                wrote.is_ok(),
                "{d}: reset after {sent} more bytes: {wrote:?}"
            );
        }
        c.s.sock.shutdown(std::net::Shutdown::Write).unwrap();
        // What follows the answer: the proxy's close_notify, then the end of the stream,
        // read raw: a FIN once the lingering read the client's own end, not a reset.
        let mut tmp = [0u8; 4096];
        let end = loop {
            match c.s.sock.read(&mut tmp) {
                Ok(0) => break Ok(()),
                Ok(_) => continue,
                Err(e) => break Err(e),
            }
        };
        assert!(end.is_ok(), "{d}: the connection ended with {end:?}");
        p.stop();
    }
}
