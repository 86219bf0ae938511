//! What an HTTPS listener's clients leave in the access log and the counters when they never
//! get as far as a whole request (a head cut by the header timeout), as nginx logs them.

use std::io::Read;
use tests::logged::Logged;
use tests::tls::{client_config, Ca, TlsClient};

/// A one-worker HTTPS proxy (certificate for `localhost`) with a JSON log and metrics.
fn https(origin: std::net::SocketAddr, ca: &Ca, dir: &std::path::Path) -> Logged {
    let (cert, key) = ca.leaf_files(dir, "default", &["localhost"]);
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let flags = [
        "--tls-cert",
        cert,
        "--tls-key",
        key,
        "--header-timeout",
        "300ms",
    ];
    Logged::start(&[origin], &flags)
}

#[test]
fn a_tls_head_cut_by_the_header_timeout_is_logged_with_its_request_line() {
    let origin = tests::origin();
    let (ca, dir) = (Ca::new(), tests::temp_dir("tls-log-408"));
    let mut p = https(origin.addr(), &ca, &dir);
    // nginx: "GET / HTTP/1.1" 408 rl=25; here "-" (null) and 0.
    let left = p.after(1, |addr| {
        let cfg = client_config(&ca.der(), false);
        let mut c = TlsClient::connect(addr, &cfg, "localhost").expect("handshake");
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n");
        let mut got = Vec::new();
        let _ = c.s.read_to_end(&mut got);
        assert!(tests::text(&got).starts_with("HTTP/1.1 408 "), "{got:?}");
    });
    let l = &left.lines[0];
    assert_eq!(
        (&l["request"], &l["status"], &l["request_length"]),
        (&"GET / HTTP/1.1".into(), &408.into(), &25.into()),
        "{l}"
    );
    p.stop();
}
