//! WebSocket upgrades through the proxy: after the 101, bytes flow both ways unchanged.

use std::io::{Read, Write};
use tests::inproc::{config, Proxy};

const UPGRADE: &[u8] =
    b"GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

#[test]
fn websocket_echo_through_the_proxy() {
    let o = tests::capturing_origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(UPGRADE);
    let r = c.response();
    assert_eq!(r.status, 101);
    assert_eq!(r.header("upgrade"), Some("websocket"));
    assert_eq!(r.header("connection"), Some("upgrade"));
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    // The origin saw the upgrade headers.
    let req = String::from_utf8_lossy(&o.captured()[0]).into_owned();
    assert!(
        req.contains("Connection: upgrade\r\nUpgrade: websocket\r\n"),
        "{req}"
    );
    // Bytes both ways, several round trips, including binary and large messages.
    let mut leftover = c.take_buffered();
    assert!(leftover.is_empty());
    for msg in [
        &b"hello"[..],
        &[0u8, 255, 13, 10, 0][..],
        &vec![7u8; 200_000][..],
    ] {
        c.stream.write_all(msg).unwrap();
        let mut got = vec![0u8; msg.len()];
        c.stream.read_exact(&mut got).unwrap();
        assert_eq!(got, msg);
    }
    // The client closing ends the tunnel; the proxy closes its side too.
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    leftover.clear();
    let n = c.stream.read_to_end(&mut leftover).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn bytes_sent_right_after_the_upgrade_request_are_relayed() {
    let o = tests::origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    let mut req = UPGRADE.to_vec();
    req.extend_from_slice(b"early bytes");
    c.send(&req);
    let r = c.response();
    assert_eq!(r.status, 101);
    let mut got = c.take_buffered();
    while got.len() < 11 {
        let mut tmp = [0u8; 64];
        let n = c.stream.read(&mut tmp).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&tmp[..n]);
    }
    assert_eq!(got, b"early bytes");
}

#[test]
fn upgrade_other_than_websocket_is_not_forwarded() {
    let o = tests::capturing_origin();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200);
    let req = String::from_utf8_lossy(&o.captured()[0]).into_owned();
    assert!(!req.to_ascii_lowercase().contains("upgrade"), "{req}");
}
