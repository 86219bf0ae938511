//! TLS certificates on SIGHUP (the `proxy` binary): a new handshake after a reload sees the
//! rewritten certificate, a connection kept alive from before still works, a broken
//! certificate file is rejected naming the file while the old certificate serves on, and
//! session tickets issued before a reload still resume after it (TLS 1.3 and 1.2).

use shared::origin::Origin;
use std::path::Path;
use tests::process::{ProxyProcess, READY};
use tests::reload::{write_config, Scratch};
use tests::tls::{client_config, write_pair, Ca, TlsClient};

/// A TLS listener serving `site.crt`/`site.key` (next to the file) in front of `origin`.
fn config(origin: &Origin) -> String {
    format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[listen.tls]\ncert = \"site.crt\"\nkey = \"site.key\"\n\n\
         [upstream.app]\nservers = [\"{}\"]\n\n[timeouts]\nshutdown = \"800ms\"\n",
        origin.addr()
    )
}

fn spawn(file: &Path) -> ProxyProcess {
    let mut cmd = ProxyProcess::command();
    cmd.arg("--config").arg(file);
    cmd.args(["--workers", "1", "--no-pin"]);
    ProxyProcess::start(&mut cmd)
}

/// A new connection with a client that has no session to resume: the certificate it sees.
fn fresh_cert(p: &ProxyProcess, ca: &Ca) -> Vec<u8> {
    let mut c = TlsClient::connect(p.addr, &client_config(&ca.der(), false), "localhost")
        .expect("handshake");
    assert!(!c.resumed());
    assert_eq!(c.get("/fresh").status, 200);
    c.server_cert().to_vec()
}

/// A connection with `cfg` (its session store holds a ticket now): `true` if it resumed.
fn resumes(p: &ProxyProcess, cfg: &std::sync::Arc<rustls::ClientConfig>) -> bool {
    let mut c = TlsClient::connect(p.addr, cfg, "localhost").expect("handshake");
    // The response also carries the TLS 1.3 ticket for the next connection.
    assert_eq!(c.get("/resume").status, 200);
    c.resumed()
}

#[test]
fn sighup_reloads_certificates_keeps_connections_and_tickets_and_rejects_a_broken_file() {
    let origin = tests::origin();
    let dir = Scratch::new("tls-reload");
    let file = dir.path("proxy.toml");
    let ca = Ca::new();
    let (cert_a, key_a) = ca.leaf(&["localhost"]);
    write_pair(&dir.path(""), "site", &cert_a, &key_a);
    write_config(&file, &config(&origin));
    let mut p = spawn(&file);

    let a = fresh_cert(&p, &ca);
    assert_eq!(a, der(&cert_a));
    let (v13, v12) = (
        client_config(&ca.der(), false),
        client_config(&ca.der(), true),
    );
    let mut kept = TlsClient::connect(p.addr, &v13, "localhost").expect("handshake");
    assert_eq!(kept.get("/kept-1").status, 200);
    assert_eq!(kept.server_cert().to_vec(), a);
    // Tickets from generation 1, for both versions.
    assert!(!resumes(&p, &v12));
    assert!(resumes(&p, &v13), "TLS 1.3 resumes before any reload");
    assert!(resumes(&p, &v12), "TLS 1.2 resumes before any reload");

    // A broken certificate file: rejected with its path, A serves on.
    let crt = dir.path("site.crt");
    std::fs::write(&crt, "not a certificate\n").unwrap();
    p.signal(libc::SIGHUP);
    let line = p.wait_line("reload rejected", READY);
    assert!(line.contains("generation 1 keeps running"), "{line}");
    assert!(line.contains(&crt.display().to_string()), "{line}");
    assert_eq!(fresh_cert(&p, &ca), a, "the old certificate serves on");
    assert_eq!(kept.get("/kept-2").status, 200);

    // Certificate B in the same files: new handshakes see it.
    let (cert_b, key_b) = ca.leaf(&["localhost"]);
    write_pair(&dir.path(""), "site", &cert_b, &key_b);
    p.signal(libc::SIGHUP);
    let line = p.wait_line("proxy: reload:", READY);
    assert!(line.contains("generation 2"), "{line}");
    assert!(line.contains("TLS certificates reloaded"), "{line}");
    let b = fresh_cert(&p, &ca);
    assert_ne!(
        a, b,
        "a new handshake after the reload still sees certificate A"
    );
    assert_eq!(b, der(&cert_b));

    // The connection from generation 1 goes on; tickets issued before the reload resume.
    assert_eq!(kept.get("/kept-3").status, 200);
    assert!(resumes(&p, &v13), "a TLS 1.3 ticket from before the reload");
    assert!(resumes(&p, &v12), "a TLS 1.2 ticket from before the reload");
    assert!(
        p.exit_within(std::time::Duration::ZERO).is_none(),
        "the proxy exited"
    );

    // An expired certificate: applied, with the warning `--check-config` and a start give.
    let key = rcgen::KeyPair::generate().unwrap();
    let old = ca.leaf_with(&["localhost"], &key, true);
    write_pair(&dir.path(""), "site", &old, &key.serialize_pem());
    p.signal(libc::SIGHUP);
    let line = p.wait_line("proxy: reload:", READY);
    assert!(line.contains("generation 3"), "{line}");
    let line = p.wait_line("proxy: warning:", READY);
    assert!(line.contains("expired on 2020-12-31"), "{line}");
}

/// The DER bytes of the PEM certificate `cert`.
fn der(cert: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
    der.to_vec()
}
