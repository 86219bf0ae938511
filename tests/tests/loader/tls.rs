//! The loader over HTTPS: exact counts, full and resumed handshakes counted on both sides,
//! certificates that do not verify (expired, wrong name, unknown issuer) rejected unless
//! `--insecure`, curl's `--cacert` rule for a self-signed server certificate, a stalled
//! handshake ending as a connect timeout; on io_uring and on epoll. Against the built-in origin
//! over TLS, and a small rustls server of the tests' own (`tests::tls_server`).

use crate::run;
use loader::stats::RunResult;
use loader::RunOptions;
use shared::runtime::DriverChoice;
use shared::shutdown::ShutdownFlag;
use shared::tls::{ClientTlsOptions, Trust};
use std::path::Path;
use std::time::Duration;
use tests::tls_server::{pem_file, self_signed, signed_by, silent_server, Spec, TlsServer};

const DRIVERS: [DriverChoice; 2] = [DriverChoice::Auto, DriverChoice::Epoll];

fn opts(url: &str, trust: Trust, driver: DriverChoice) -> RunOptions {
    let mut o = RunOptions::for_urls(&[url]).expect("valid URL");
    o.connections = 1;
    o.runtime.workers = 1;
    o.runtime.pin = false;
    o.runtime.driver = driver;
    o.quiet = true;
    o.timeout = Duration::from_secs(10);
    o.tls = ClientTlsOptions {
        trust,
        resumption: true,
    };
    o
}

fn ca_file(path: &Path) -> Trust {
    Trust::CaFile(path.to_owned())
}

/// A CA's PEM file, and a server with a certificate for localhost signed by it.
fn ca_and_server() -> (tests::TempFile, TlsServer) {
    let (ca, leaf) = tests::tls_server::ca_and_leaf();
    (ca, TlsServer::start(&leaf))
}

#[test]
fn keep_alive_counts_are_exact_over_https() {
    for driver in DRIVERS {
        let (ca, server) = ca_and_server();
        let mut o = opts(&server.url("localhost", "/"), ca_file(&ca), driver);
        o.connections = 4;
        o.requests = Some(200);
        let r = run(&o);
        let t = &r.totals;
        assert_eq!((t.attempts, t.completed), (200, 200), "{driver:?} {t:?}");
        assert_eq!(t.failures.total(), 0, "{driver:?} {t:?}");
        assert_eq!(t.status, vec![(200, 200)]);
        assert_eq!(t.body_bytes, 1000);
        let (conns, reqs, full, resumed) = server.stats.get();
        assert_eq!((conns, reqs), (4, 200), "{driver:?}");
        // Four connections, each a handshake: the first ones of a worker are full; later
        // ones may resume a session of an earlier one (all four start together here, but
        // nothing forces that order).
        let tls = r.tls.expect("https run");
        assert_eq!(tls.full + tls.resumed, 4, "{tls:?}");
        assert!(tls.full >= 1, "{tls:?}");
        assert_eq!((full, resumed), (tls.full, tls.resumed), "server disagrees");
        assert_eq!(r.connections_opened, 4);
        assert_eq!(r.hist.tls_handshake.len(), 4);
        assert_eq!(r.hist.connect_per_connection.len(), 4);
        let text = loader::report::render(&r);
        assert!(text.contains("msecs/tls-handshake: "), "{text}");
        // ab's line: the test server speaks TLS 1.3 and picks the client's first suite.
        let proto = r.tls_protocol.as_deref().unwrap_or("");
        assert!(proto.starts_with("TLSv1.3, TLS13_"), "{proto}");
        assert!(proto.ends_with(", ALPN http/1.1"), "{proto}");
        assert!(
            text.contains(&format!("SSL/TLS Protocol:       {proto}\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "TLS handshakes: {} full, {} resumed",
                tls.full, tls.resumed
            )),
            "{text}"
        );
    }
}

/// Bytes after an answer that fills the loader's read buffer to its last byte, nobody's: a
/// protocol error over TLS too (the session's plaintext and the records that wait are read
/// at once at the answer's end), where before they were read as the next request's answer.
#[test]
fn bytes_after_an_answer_that_fills_the_read_buffer_are_protocol_errors_over_https() {
    let answer = crate::hostile::filling_answer_then_another();
    let (ca, leaf) = tests::tls_server::ca_and_leaf();
    let server = TlsServer::answering(&leaf, &answer);
    for driver in DRIVERS {
        let mut o = opts(&server.url("localhost", "/"), ca_file(&ca), driver);
        o.requests = Some(3);
        let r = run(&o);
        let t = &r.totals;
        assert_eq!(
            (t.completed, t.failures.total()),
            (3, 0),
            "{driver:?} {t:?}"
        );
        assert_eq!(
            (t.protocol_errors, r.connections_opened),
            (3, 3),
            "{driver:?} {t:?}"
        );
        assert_eq!(
            t.bytes_received,
            3 * answer.len() as u64,
            "{driver:?} {t:?}"
        );
    }
}

#[test]
fn close_resumes_every_connection_after_the_first() {
    for driver in DRIVERS {
        let (ca, server) = ca_and_server();
        let mut o = opts(&server.url("localhost", "/"), ca_file(&ca), driver);
        o.close = true;
        o.requests = Some(12);
        let r = run(&o);
        assert_eq!(r.totals.completed, 12, "{driver:?} {:?}", r.totals);
        assert_eq!(r.totals.failures.total(), 0);
        // One slot, one after the other: the first handshake is full; each response brings
        // the tickets (TLS 1.3 tickets come before the response on the same connection), so
        // every later connection resumes.
        let tls = r.tls.expect("https run");
        assert_eq!((tls.full, tls.resumed), (1, 11), "{driver:?}");
        let (conns, reqs, full, resumed) = server.stats.get();
        assert_eq!((conns, reqs, full, resumed), (12, 12, 1, 11), "{driver:?}");
    }
}

#[test]
fn close_with_several_connections_resumes_all_but_the_first_of_each() {
    let (ca, server) = ca_and_server();
    let mut o = opts(
        &server.url("localhost", "/"),
        ca_file(&ca),
        DriverChoice::Auto,
    );
    o.close = true;
    o.connections = 4;
    o.requests = Some(40);
    let r = run(&o);
    assert_eq!(r.totals.completed, 40, "{:?}", r.totals);
    // What the store guarantees: a connection that starts after an earlier one's response
    // resumes, so at most one full handshake per slot (the slots' first connections), at
    // least one in all.
    let tls = r.tls.expect("https run");
    assert_eq!(tls.full + tls.resumed, 40, "{tls:?}");
    assert!((1..=4).contains(&tls.full), "{tls:?}");
    let (_, _, full, resumed) = server.stats.get();
    assert_eq!((full, resumed), (tls.full, tls.resumed));
}

#[test]
fn no_resume_makes_every_handshake_full() {
    for driver in DRIVERS {
        let (ca, server) = ca_and_server();
        let mut o = opts(&server.url("localhost", "/"), ca_file(&ca), driver);
        o.close = true;
        o.connections = 2;
        o.requests = Some(10);
        o.tls.resumption = false;
        let r = run(&o);
        assert_eq!(r.totals.completed, 10, "{driver:?} {:?}", r.totals);
        let tls = r.tls.expect("https run");
        assert_eq!((tls.full, tls.resumed), (10, 0), "{driver:?}");
        let (conns, _, full, resumed) = server.stats.get();
        assert_eq!((conns, full, resumed), (10, 10, 0), "{driver:?}");
    }
}

/// Every attempt failed to connect (the handshake was refused), none completed.
fn assert_rejected(r: &RunResult, n: u64, what: &str) {
    let t = &r.totals;
    assert_eq!(t.completed, 0, "{what}: {t:?}");
    assert_eq!(t.failures.connect, n, "{what}: {t:?}");
    assert_eq!(t.attempts, n, "{what}: {t:?}");
    let tls = r.tls.expect("https run");
    assert_eq!((tls.full, tls.resumed), (0, 0), "{what}");
}

#[test]
fn expired_and_wrong_name_are_rejected_unless_insecure() {
    let ca = self_signed(Spec {
        names: &["Loader Test CA"],
        ca: true,
        expired: false,
    });
    let ca_pem = pem_file("ca.pem", &[&ca]);
    let expired = signed_by(
        &ca,
        Spec {
            names: &["localhost"],
            ca: false,
            expired: true,
        },
    );
    let wrong = signed_by(
        &ca,
        Spec {
            names: &["other.test"],
            ca: false,
            expired: false,
        },
    );
    for (what, cert) in [("expired", &expired), ("wrong name", &wrong)] {
        let server = TlsServer::start(cert);
        let url = server.url("localhost", "/");
        for driver in DRIVERS {
            let mut o = opts(&url, ca_file(&ca_pem), driver);
            o.requests = Some(3);
            assert_rejected(&run(&o), 3, what);
        }
        assert_eq!(server.stats.get().1, 0, "{what}: a request got through");
        let mut o = opts(&url, Trust::Insecure, DriverChoice::Auto);
        o.requests = Some(3);
        let r = run(&o);
        assert_eq!(r.totals.completed, 3, "{what} --insecure: {:?}", r.totals);
        assert_eq!(server.stats.get().1, 3);
    }
}

#[test]
fn self_signed_server_certificate_needs_cacert() {
    // The `openssl req -x509` kind: a self-signed CA certificate used by the server itself.
    let cert = self_signed(Spec {
        names: &["localhost", "127.0.0.1"],
        ca: true,
        expired: false,
    });
    let server = TlsServer::start(&cert);
    let own = pem_file("server.pem", &[&cert]);
    for driver in DRIVERS {
        let mut o = opts(&server.url("localhost", "/"), ca_file(&own), driver);
        o.requests = Some(5);
        let r = run(&o);
        assert_eq!(r.totals.completed, 5, "{driver:?} {:?}", r.totals);
        // By address: the certificate names 127.0.0.1 too.
        let mut o = opts(&server.url("127.0.0.1", "/"), ca_file(&own), driver);
        o.requests = Some(2);
        assert_eq!(run(&o).totals.completed, 2, "{driver:?}");
    }
    // Without --cacert (the system store) or with another CA file: rejected.
    let other = self_signed(Spec {
        names: &["Another CA"],
        ca: true,
        expired: false,
    });
    let other_pem = pem_file("other.pem", &[&other]);
    let url = server.url("localhost", "/");
    let mut o = opts(&url, ca_file(&other_pem), DriverChoice::Auto);
    o.requests = Some(2);
    assert_rejected(&run(&o), 2, "another CA file");
    let mut o = opts(&url, Trust::System, DriverChoice::Auto);
    o.requests = Some(2);
    match loader::run(&o, ShutdownFlag::new()) {
        Ok(r) => assert_rejected(&r, 2, "system store"),
        // A machine without a system trust store: the run does not start, also a rejection.
        Err(e) => assert!(e.to_string().contains("system trust store"), "{e}"),
    }
    // Its name is still checked.
    let mut o = opts(
        &server.url("localhost", "/"),
        ca_file(&own),
        DriverChoice::Auto,
    );
    o.urls = RunOptions::for_urls(&[format!("https://127.0.0.2:{}/", server.addr.port())])
        .unwrap()
        .urls;
    o.requests = Some(1);
    let r = run(&o);
    assert_eq!(r.totals.completed, 0, "127.0.0.2 is not in the certificate");
}

#[test]
fn a_stalled_handshake_is_a_connect_timeout_not_a_hang() {
    let addr = silent_server();
    for driver in DRIVERS {
        let mut o = opts(
            &format!("https://localhost:{}/", addr.port()),
            Trust::Insecure,
            driver,
        );
        o.timeout = Duration::from_millis(300);
        o.requests = Some(2);
        let r = run(&o);
        assert_rejected(&r, 2, "stalled");
        assert_eq!(
            r.totals.failures.timeout, 0,
            "a connect failure, not a response timeout"
        );
    }
}

#[test]
fn plain_http_server_is_a_handshake_failure() {
    // An http:// origin behind an https:// URL: its 400 is not TLS, the handshake fails.
    let origin = tests::origin();
    let url = origin.url("/").replacen("http://", "https://", 1);
    let mut o = opts(&url, Trust::Insecure, DriverChoice::Auto);
    o.requests = Some(2);
    assert_rejected(&run(&o), 2, "plain server");
}

/// The built-in origin over TLS (its `tls` config): the loader's counts and handshakes match
/// the origin's counters exactly, keep-alive and `--close`, on both drivers.
#[test]
fn built_in_origin_over_tls_agrees_with_the_loader() {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    use shared::origin::{Origin, OriginConfig};
    use std::sync::Arc;
    let cert = self_signed(Spec {
        names: &["localhost"],
        ca: true,
        expired: false,
    });
    let pem = pem_file("origin.pem", &[&cert]);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key.serialize_der()));
    let server = rustls::ServerConfig::builder_with_provider(shared::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der()], key)
        .unwrap();
    for driver in DRIVERS {
        let origin = Origin::start(OriginConfig {
            tls: Some(Arc::new(server.clone())),
            ..OriginConfig::default()
        })
        .expect("origin starts");
        let url = format!("https://localhost:{}/", origin.addr().port());
        let handshakes = |o: &Origin| {
            let st = o.stats();
            let sum = |f: fn(&shared::origin::OriginStats) -> u64| st.iter().map(|s| f(s)).sum();
            (
                sum(|s| s.tls_handshakes.get()),
                sum(|s| s.tls_resumed.get()),
            )
        };
        let mut o = opts(&url, ca_file(&pem), driver);
        o.connections = 3;
        o.requests = Some(300);
        let r = run(&o);
        assert_eq!(r.totals.completed, 300, "{driver:?} {:?}", r.totals);
        assert_eq!(origin.requests(), 300);
        let tls = r.tls.expect("https run");
        assert_eq!(tls.full + tls.resumed, 3, "{tls:?}");
        assert_eq!(handshakes(&origin), (3, tls.resumed), "{driver:?}");

        let (h0, r0) = handshakes(&origin);
        let mut o = opts(&url, ca_file(&pem), driver);
        o.close = true;
        o.requests = Some(20);
        let r = run(&o);
        assert_eq!(r.totals.completed, 20, "{driver:?} {:?}", r.totals);
        assert_eq!(origin.requests(), 320);
        let tls = r.tls.expect("https run");
        // One slot: the first connection is full, each later one resumes a ticket of the one
        // before it (a fresh run: a fresh session store).
        assert_eq!((tls.full, tls.resumed), (1, 19), "{driver:?}");
        let (h1, r1) = handshakes(&origin);
        assert_eq!((h1 - h0, r1 - r0), (20, 19), "{driver:?}");
    }
}
