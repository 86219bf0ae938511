//! The verifier on rcgen-made certificates, and whole handshakes in memory against a rustls
//! server (ALPN, resumption, the full-handshake count).

use super::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConnection, HandshakeKind, ServerConfig, ServerConnection};
use std::io::Write as _;

struct Issued {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Issued {
    fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }
}

fn params(names: &[&str], ca: bool, expired: bool) -> CertificateParams {
    let names = names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut p = CertificateParams::new(names.clone()).unwrap();
    // rcgen's default subject is the same for every certificate: give each its own.
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name
        .push(rcgen::DnType::CommonName, names[0].clone());
    if ca {
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    if expired {
        p.not_before = rcgen::date_time_ymd(2001, 1, 1);
        p.not_after = rcgen::date_time_ymd(2002, 1, 1);
    }
    p
}

/// A self-signed certificate; `ca`: the `openssl req -x509` kind (basicConstraints CA:TRUE).
fn self_signed(names: &[&str], ca: bool, expired: bool) -> Issued {
    let key = KeyPair::generate().unwrap();
    let cert = params(names, ca, expired).self_signed(&key).unwrap();
    Issued { cert, key }
}

/// A leaf for `names` signed by `ca`.
fn leaf(ca: &Issued, names: &[&str], expired: bool) -> Issued {
    let key = KeyPair::generate().unwrap();
    let cert = params(names, false, expired)
        .signed_by(&key, &ca.cert, &ca.key)
        .unwrap();
    Issued { cert, key }
}

fn temp_file(name: &str, body: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shared-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(body)
        .unwrap();
    path
}

fn ca_file(name: &str, certs: &[&Issued]) -> Trust {
    let pem: String = certs.iter().map(|c| c.cert.pem()).collect();
    Trust::CaFile(temp_file(name, pem.as_bytes()))
}

fn tls(trust: Trust) -> ClientTls {
    ClientTls::new(&ClientTlsOptions {
        trust,
        resumption: true,
    })
    .unwrap()
}

/// Verify `cert` for `name` now; Ok or the rustls error.
fn verify(t: &ClientTls, cert: &Issued, name: &str) -> Result<(), Error> {
    let counter = HandshakeCounter::default();
    let v = t.verifier(&super::super::provider(), &counter);
    let name = ServerName::try_from(name.to_string()).unwrap();
    let before = counter.verified();
    let r = v.verify_server_cert(&cert.der(), &[], &name, &[], UnixTime::now());
    // Counted exactly when accepted.
    assert_eq!(counter.verified() - before, u64::from(r.is_ok()));
    r.map(|_| ())
}

fn is_cert_error(r: Result<(), Error>, want: fn(&CertificateError) -> bool) -> bool {
    matches!(r, Err(Error::InvalidCertificate(ref e)) if want(e))
}

#[test]
fn ca_signed_leaf_name_and_validity() {
    let ca = self_signed(&["Test CA"], true, false);
    let t = tls(ca_file("ca.pem", &[&ca]));
    let good = leaf(&ca, &["a.test", "127.0.0.1"], false);
    assert_eq!(verify(&t, &good, "a.test"), Ok(()));
    assert_eq!(verify(&t, &good, "127.0.0.1"), Ok(()));
    let wrong = verify(&t, &good, "b.test");
    assert!(
        is_cert_error(wrong, |e| matches!(
            e,
            CertificateError::NotValidForNameContext { .. } | CertificateError::NotValidForName
        )),
        "wrong name accepted"
    );
    let old = leaf(&ca, &["a.test"], true);
    let expired = verify(&t, &old, "a.test");
    assert!(
        is_cert_error(expired, |e| matches!(
            e,
            CertificateError::ExpiredContext { .. } | CertificateError::Expired
        )),
        "expired accepted"
    );
    // Signed by another CA: unknown issuer.
    let other = self_signed(&["Other CA"], true, false);
    let stranger = leaf(&other, &["a.test"], false);
    let r = verify(&t, &stranger, "a.test");
    assert!(is_cert_error(r, |e| *e == CertificateError::UnknownIssuer));
}

#[test]
fn cacert_rule_for_a_self_signed_ca_certificate() {
    // The `openssl req -x509` kind: webpki alone rejects it as a CA used as an end entity.
    let server = self_signed(&["localhost", "127.0.0.1"], true, false);
    let trust = ca_file("self.pem", &[&server]);
    let Trust::CaFile(path) = &trust else {
        unreachable!()
    };
    let mut roots = RootCertStore::empty();
    roots.add(server.der()).unwrap();
    let plain =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), super::super::provider())
            .build()
            .unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let webpki_says = plain.verify_server_cert(&server.der(), &[], &name, &[], UnixTime::now());
    assert!(webpki_says.is_err(), "webpki alone accepted it");

    let t = tls(Trust::CaFile(path.clone()));
    assert_eq!(verify(&t, &server, "localhost"), Ok(()));
    assert_eq!(verify(&t, &server, "127.0.0.1"), Ok(()));
    // Name and validity still checked.
    assert!(is_cert_error(
        verify(&t, &server, "other.test"),
        |e| matches!(
            e,
            CertificateError::NotValidForNameContext { .. } | CertificateError::NotValidForName
        )
    ));
    let old = self_signed(&["localhost"], true, true);
    let t_old = tls(ca_file("old.pem", &[&old]));
    assert!(is_cert_error(verify(&t_old, &old, "localhost"), |e| {
        *e == CertificateError::Expired
    }));
    // Not in the file (another CA file): rejected with webpki's reason.
    let other = self_signed(&["Other CA"], true, false);
    let t_other = tls(ca_file("other.pem", &[&other]));
    assert!(verify(&t_other, &server, "localhost").is_err());
    // A file with several certificates: the server's is found among them.
    let t_many = tls(ca_file("many.pem", &[&other, &server]));
    assert_eq!(verify(&t_many, &server, "localhost"), Ok(()));
}

#[test]
fn insecure_accepts_anything_and_still_counts() {
    let t = tls(Trust::Insecure);
    assert!(!t.verifies());
    let old = self_signed(&["x.test"], true, true);
    assert_eq!(verify(&t, &old, "other.test"), Ok(()));
}

#[test]
fn ca_file_errors_name_the_file_and_the_problem() {
    let load = |trust| {
        ClientTls::new(&ClientTlsOptions {
            trust,
            resumption: true,
        })
    };
    let missing = PathBuf::from("/nonexistent/ca.pem");
    let e = load(Trust::CaFile(missing)).unwrap_err().to_string();
    assert!(
        e.contains("/nonexistent/ca.pem") && e.contains("No such file"),
        "{e}"
    );

    let empty = temp_file("empty.pem", b"just some text\n");
    let e = load(Trust::CaFile(empty.clone())).unwrap_err();
    assert!(matches!(e, ClientTlsError::CaEmpty { .. }), "{e}");
    assert!(e.to_string().contains(&*empty.to_string_lossy()), "{e}");

    let broken = temp_file(
        "broken.pem",
        b"-----BEGIN CERTIFICATE-----\n!!!notbase64!!!\n-----END CERTIFICATE-----\n",
    );
    let e = load(Trust::CaFile(broken)).unwrap_err();
    assert!(matches!(e, ClientTlsError::CaNotPem { .. }), "{e}");

    let garbage = temp_file(
        "garbage.pem",
        b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let e = load(Trust::CaFile(garbage)).unwrap_err();
    assert!(
        matches!(e, ClientTlsError::CaBadCertificate { index: 1, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("certificate 1"), "{e}");
}

// Whole handshakes in memory.

fn server_config(cert: &Issued, resumption: bool) -> Arc<ServerConfig> {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key.serialize_der()));
    let mut cfg = ServerConfig::builder_with_provider(super::super::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der()], key)
        .unwrap();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    if !resumption {
        cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
    }
    Arc::new(cfg)
}

/// One handshake (and the tickets after it) between the two ends, in memory.
fn handshake(client: &mut ClientConnection, server: &mut ServerConnection) -> Result<(), Error> {
    for _ in 0..10 {
        let mut buf = Vec::new();
        client.write_tls(&mut buf).unwrap();
        server.read_tls(&mut &buf[..]).unwrap();
        server.process_new_packets()?;
        buf.clear();
        server.write_tls(&mut buf).unwrap();
        client.read_tls(&mut &buf[..]).unwrap();
        client.process_new_packets()?;
        if !client.is_handshaking() && !server.is_handshaking() && !server.wants_write() {
            return Ok(());
        }
    }
    panic!("handshake did not finish");
}

#[test]
fn handshakes_alpn_and_resumption_counted() {
    let server_cert = self_signed(&["localhost"], true, false);
    let t = tls(ca_file("hs.pem", &[&server_cert]));
    let (cfg, counter) = t.config().unwrap();
    let scfg = server_config(&server_cert, true);
    let name = ServerName::try_from("localhost").unwrap();
    let mut kinds = Vec::new();
    for _ in 0..4 {
        let mut c = ClientConnection::new(cfg.clone(), name.clone()).unwrap();
        let mut s = ServerConnection::new(scfg.clone()).unwrap();
        handshake(&mut c, &mut s).unwrap();
        assert_eq!(c.alpn_protocol(), Some(&b"http/1.1"[..]));
        kinds.push(c.handshake_kind().unwrap());
    }
    // One full handshake, then each connection resumes with a ticket from the one before.
    let want = [
        HandshakeKind::Full,
        HandshakeKind::Resumed,
        HandshakeKind::Resumed,
        HandshakeKind::Resumed,
    ];
    assert_eq!(kinds, want);
    assert_eq!(counter.verified(), 1);

    // Another config (another worker): its own store and counter.
    let (cfg2, counter2) = t.config().unwrap();
    let mut c = ClientConnection::new(cfg2, name.clone()).unwrap();
    let mut s = ServerConnection::new(scfg).unwrap();
    handshake(&mut c, &mut s).unwrap();
    assert_eq!(c.handshake_kind(), Some(HandshakeKind::Full));
    assert_eq!((counter.verified(), counter2.verified()), (1, 1));

    // Resumption off on the client: every handshake is full.
    let off = ClientTls::new(&ClientTlsOptions {
        trust: Trust::Insecure,
        resumption: false,
    })
    .unwrap();
    let (cfg3, counter3) = off.config().unwrap();
    let scfg = server_config(&server_cert, true);
    for _ in 0..3 {
        let mut c = ClientConnection::new(cfg3.clone(), name.clone()).unwrap();
        let mut s = ServerConnection::new(scfg.clone()).unwrap();
        handshake(&mut c, &mut s).unwrap();
        assert_eq!(c.handshake_kind(), Some(HandshakeKind::Full));
    }
    assert_eq!(counter3.verified(), 3);
}

#[test]
fn handshake_with_an_untrusted_certificate_fails() {
    let server_cert = self_signed(&["localhost"], true, false);
    let other = self_signed(&["Other CA"], true, false);
    let t = tls(ca_file("untrusted.pem", &[&other]));
    let (cfg, counter) = t.config().unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut c = ClientConnection::new(cfg, name).unwrap();
    let mut s = ServerConnection::new(server_config(&server_cert, true)).unwrap();
    let err = handshake(&mut c, &mut s).unwrap_err();
    assert!(matches!(err, Error::InvalidCertificate(_)), "{err}");
    assert_eq!(counter.verified(), 0);
}
