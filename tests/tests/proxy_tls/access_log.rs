//! What an HTTPS listener's clients leave in the access log and the counters when they never
//! get as far as a whole request: plain HTTP to the TLS port, a head cut by the header
//! timeout. As nginx logs them.

use std::io::Read;
use tests::logged::Logged;
use tests::raw::{self, End, WAIT};
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
fn plain_http_to_the_tls_port_is_logged_and_counted() {
    let origin = tests::origin();
    let (ca, dir) = (Ca::new(), tests::temp_dir("tls-log-plain"));
    let mut p = https(origin.addr(), &ca, &dir);
    // nginx: "GET / HTTP/1.1" 400, in its log and its counts. Here only
    // proxy_tls_handshakes_total{result="plain_http"} moved.
    let req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut got = 0;
    let left = p.after(1, |addr| {
        let r = raw::exchange(addr, req, WAIT);
        assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
        assert!(r.text().starts_with("HTTP/1.1 400 "), "{}", raw::show(&r));
        got = r.bytes.len();
    });
    let l = &left.lines[0];
    assert_eq!(
        (&l["request"], &l["status"], &l["bytes_sent"]),
        (&"GET / HTTP/1.1".into(), &400.into(), &got.into()),
        "{l}"
    );
    assert_eq!(l["request_length"], req.len(), "{l}");
    assert_eq!(
        left.moved(r#"proxy_requests_total{route="(none)",code="4xx"}"#),
        1.0
    );
    assert_eq!(left.moved("proxy_sent_bytes_total"), got as f64);
    assert_eq!(left.moved("proxy_received_bytes_total"), req.len() as f64);
    assert_eq!(
        left.moved(r#"proxy_tls_handshakes_total{result="plain_http"}"#),
        1.0
    );
    p.stop();
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
