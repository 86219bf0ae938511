//! HTTPS listener configuration: key types and encodings, `--tls-cert`/`--tls-key`, errors
//! that name the file and the problem, the expired-certificate warning, and the redirect of a
//! plain listener to HTTPS.

use rcgen::KeyPair;
use std::path::Path;
use std::process::Command;
use tests::inproc::{config, Proxy};
use tests::tls::{client_config, write_pair, Ca, TlsClient, P256_PKCS8, P256_SEC1};
use tests::tls::{RSA_PKCS1, RSA_PKCS8};

fn check(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(tests::bin("proxy"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn quick(cert: &Path, key: &Path) -> Result<proxy::config::Config, String> {
    let argv = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "127.0.0.1:9",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    proxy::cli::config_from_args(argv)
}

#[test]
fn rsa_ecdsa_and_ed25519_keys_in_every_encoding_serve() {
    let ca = Ca::new();
    let dir = tests::temp_dir("keys");
    let o = tests::capturing_origin();
    let rsa = KeyPair::from_pem(RSA_PKCS8).unwrap();
    let p256 = KeyPair::from_pem(P256_PKCS8).unwrap();
    let ed = KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    for (stem, key, key_pem) in [
        ("rsa-pkcs1", &rsa, RSA_PKCS1.to_string()),
        ("rsa-pkcs8", &rsa, RSA_PKCS8.to_string()),
        ("p256-sec1", &p256, P256_SEC1.to_string()),
        ("p256-pkcs8", &p256, P256_PKCS8.to_string()),
        ("ed25519", &ed, ed.serialize_pem()),
    ] {
        let cert = ca.leaf_with(&["localhost"], key, false);
        let (c, k) = write_pair(&dir, stem, &cert, &key_pem);
        let mut cfg = quick(&c, &k).unwrap_or_else(|e| panic!("{stem}: {e}"));
        cfg.runtime.workers = 1;
        cfg.runtime.pin = false;
        cfg.groups = config(&[o.addr()]).groups;
        let p = Proxy::start(cfg);
        let cc = client_config(&ca.der(), false);
        let mut t =
            TlsClient::connect(p.addr, &cc, "localhost").unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert_eq!(t.get("/").status, 200, "{stem}");
        p.stop();
    }
}

#[test]
fn bad_files_are_named_with_their_problem() {
    let ca = Ca::new();
    let dir = tests::temp_dir("badfiles");
    let (c, k) = ca.leaf_files(&dir, "good", &["localhost"]);
    let (_, other_key) = ca.leaf_files(&dir, "other", &["localhost"]);
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a pem file\n").unwrap();
    let missing = dir.join("missing.pem");
    for (cert, key, want) in [
        (
            &missing,
            &k,
            format!("certificate file {}", missing.display()),
        ),
        (
            &garbage,
            &k,
            format!("certificate file {}: no PEM certificate", garbage.display()),
        ),
        (
            &c,
            &garbage,
            format!("key file {}: no PEM private key", garbage.display()),
        ),
        (&c, &missing, format!("key file {}", missing.display())),
        (
            &c,
            &other_key,
            format!(
                "key file {} does not match certificate",
                other_key.display()
            ),
        ),
    ] {
        let e = quick(cert, key).unwrap_err();
        assert!(e.contains(&want), "{e}\nwanted: {want}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
    // --check-config on a file: exit 2, the file's key and the certificate's problem.
    let toml = dir.join("p.toml");
    std::fs::write(
        &toml,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[listen.tls]\ncert = \"good.crt\"\nkey = \"other.key\"\n\n\
         [upstream.app]\nservers = [\"127.0.0.1:9\"]\n",
    )
    .unwrap();
    let (code, err) = check(&["--check-config", toml.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("listen[0].tls") && err.contains("does not match certificate"),
        "{err}"
    );
    // An expired certificate: a warning, the configuration still valid.
    let key = KeyPair::generate().unwrap();
    let old = ca.leaf_with(&["localhost"], &key, true);
    write_pair(&dir, "old", &old, &key.serialize_pem());
    std::fs::write(
        &toml,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[listen.tls]\ncert = \"old.crt\"\nkey = \"old.key\"\n\n\
         [upstream.app]\nservers = [\"127.0.0.1:9\"]\n",
    )
    .unwrap();
    let (code, err) = check(&["--check-config", toml.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning") && err.contains("expired on 2020-12-31"),
        "{err}"
    );
    // A certificate for other names than its `sni` entry's: a warning (clients will refuse
    // it), as for an expired one; a wildcard entry is checked for a name under it.
    ca.leaf_files(&dir, "elsewhere", &["elsewhere.test"]);
    ca.leaf_files(&dir, "star", &["*.a.test"]);
    std::fs::write(
        &toml,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[listen.tls]\ncert = \"good.crt\"\nkey = \"good.key\"\n\
         [[listen.tls.sni]]\nnames = [\"b.test\", \"*.c.test\"]\ncert = \"elsewhere.crt\"\nkey = \"elsewhere.key\"\n\
         [[listen.tls.sni]]\nnames = [\"*.a.test\", \"x.a.test\"]\ncert = \"star.crt\"\nkey = \"star.key\"\n\n\
         [upstream.app]\nservers = [\"127.0.0.1:9\"]\n",
    )
    .unwrap();
    let (code, err) = check(&["--check-config", toml.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let warned = |name: &str| {
        err.lines().any(|l| {
            l.contains("warning") && l.contains(&format!("`{name}`")) && l.contains("elsewhere.crt")
        })
    };
    assert!(warned("b.test") && warned("*.c.test"), "{err}");
    assert!(
        !err.contains("star.crt"),
        "a certificate valid for its names: {err}"
    );
    // The flags come in pairs.
    let (code, err) = check(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "127.0.0.1:9",
        "--tls-cert",
        "x",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls-key"), "{err}");
}

/// A name in two `sni` entries (as written, or the same once matched: case, a trailing dot)
/// is refused naming it and both entries, as a duplicate route is: it used to go to the last
/// entry's certificate for an exact name and the first's for a wildcard, without a word.
#[test]
fn an_sni_name_in_two_entries_is_refused() {
    let ca = Ca::new();
    let dir = tests::temp_dir("sni-dup");
    ca.leaf_files(&dir, "default", &["localhost"]);
    ca.leaf_files(&dir, "one", &["x.test", "a.test", "*.w.test"]);
    ca.leaf_files(&dir, "two", &["a.test", "*.w.test"]);
    let toml = dir.join("p.toml");
    for (first, second, name) in [
        ("a.test", "a.test", "a.test"),
        ("a.test", "A.Test.", "A.Test."),
        ("*.w.test", "*.w.test", "*.w.test"),
    ] {
        std::fs::write(
            &toml,
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\n[listen.tls]\ncert = \"default.crt\"\nkey = \"default.key\"\n\
                 [[listen.tls.sni]]\nnames = [\"x.test\", \"{first}\"]\ncert = \"one.crt\"\nkey = \"one.key\"\n\
                 [[listen.tls.sni]]\nnames = [\"{second}\"]\ncert = \"two.crt\"\nkey = \"two.key\"\n\n\
                 [upstream.app]\nservers = [\"127.0.0.1:9\"]\n"
            ),
        )
        .unwrap();
        let (code, err) = check(&["--check-config", toml.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{first} {second}: {err}");
        let line = err.lines().next().unwrap_or_default();
        for want in [
            "listen[0].tls",
            &format!("`{name}`"),
            "sni[0]",
            "one.crt",
            "sni[1]",
            "two.crt",
        ] {
            assert!(line.contains(want), "{first} {second}: want {want}: {err}");
        }
        assert_eq!(
            err.lines().count(),
            2,
            "one line, then 'test failed': {err}"
        );
    }
}

#[test]
fn a_plain_listener_redirects_to_https_keeping_path_and_query() {
    let dir = tests::temp_dir("redirect");
    let toml = dir.join("r.toml");
    std::fs::write(
        &toml,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[[route]]\n\
         return = { status = 301, location = \"https://{host}{request_uri}\" }\n",
    )
    .unwrap();
    let mut cfg = proxy::config::load(&toml).unwrap();
    cfg.runtime.workers = 1;
    cfg.runtime.pin = false;
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    c.send(b"GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("location"),
        Some("https://example.com/a/b?x=1&y=2")
    );
    c.send(b"GET /plain HTTP/1.1\r\nHost: example.com\r\n\r\n");
    let r = c.response();
    assert_eq!(r.header("location"), Some("https://example.com/plain"));
}
