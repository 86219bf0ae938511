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

/// An origin that answers every upgrade with a 101 and then runs `after` on the connection
/// (its request head read), one thread per connection.
fn upgrading_origin(
    after: impl Fn(std::net::TcpStream) + Send + Sync + Clone + 'static,
) -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let after = after.clone();
            std::thread::spawn(move || {
                if tests::raw::read_request_head(&mut s, &mut Vec::new()).is_err() {
                    return;
                }
                let head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                            Connection: Upgrade\r\n\r\n";
                if s.write_all(head.as_bytes()).is_ok() {
                    after(s);
                }
            });
        }
    });
    addr
}

/// A route's own upstream read timeout (300 ms) over the global one (30 s): the tunnel's
/// idle bound is the route's, as every other wait of its exchanges.
fn ws_proxy(origin: std::net::SocketAddr) -> tests::inproc::Proxy {
    tests::toml_proxy::start(&format!(
        // Still in `config_text`'s [timeouts].
        "read = \"30s\"\n[upstream.app]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\ntimeouts = {{ read = \"300ms\" }}\n"
    ))
}

#[test]
fn a_silent_tunnel_ends_at_its_routes_read_timeout() {
    // The origin holds the tunnel open and silent (until the proxy closes it).
    let p = ws_proxy(upgrading_origin(|mut s| {
        let _ = s.read_to_end(&mut Vec::new());
    }));
    let mut c = p.connect();
    c.send(UPGRADE);
    assert_eq!(c.response().status, 101);
    // Within the client's 10 s wait: the global 30 s would fail it (a timeout, not a close).
    let rest = c.read_to_close();
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_tunnel_busy_in_one_direction_is_not_idle() {
    // The origin pushes a message every 100 ms for 1.5 s (five times the idle bound), then
    // closes; the client never sends. Only both directions silent is idle (nginx re-arms its
    // timer at either side's bytes; HAProxy's `timeout tunnel` is inactivity both ways).
    let p = ws_proxy(upgrading_origin(|mut s| {
        for i in 0..15 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            if s.write_all(format!("tick{i:02};").as_bytes()).is_err() {
                return;
            }
        }
    }));
    let mut c = p.connect();
    c.send(UPGRADE);
    assert_eq!(c.response().status, 101);
    let mut got = c.take_buffered();
    got.extend(c.read_to_close());
    let want: String = (0..15).map(|i| format!("tick{i:02};")).collect();
    assert_eq!(String::from_utf8_lossy(&got), want);
    // The client sends for 1.5 s, the origin only reads, then answers its end.
    let p = ws_proxy(upgrading_origin(|mut s| {
        let mut all = Vec::new();
        let _ = s.read_to_end(&mut all);
        let _ = s.write_all(format!("got {}", all.len()).as_bytes());
    }));
    let mut c = p.connect();
    c.send(UPGRADE);
    assert_eq!(c.response().status, 101);
    for _ in 0..15 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        c.stream
            .write_all(b"0123456789")
            .expect("the tunnel is open");
    }
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let got = c.read_to_close();
    assert_eq!(String::from_utf8_lossy(&got), "got 150");
}

#[test]
fn a_tunnel_writing_to_a_slow_reader_is_not_idle() {
    // The origin pushes 12 MB (more than the socket buffers between it and the client hold)
    // and closes; the client reads nothing for a second (three idle periods), then all of it.
    // The proxy's write to the client stalls meanwhile, and the client sends nothing: the
    // other direction's wait ran out and cut the tunnel mid-delivery.
    const LEN: usize = 12_000_000;
    let p = ws_proxy(upgrading_origin(|mut s| {
        let _ = s.write_all(&vec![b'w'; LEN]);
    }));
    let mut c = p.connect();
    c.send(UPGRADE);
    assert_eq!(c.response().status, 101);
    std::thread::sleep(std::time::Duration::from_secs(1));
    let mut got = c.take_buffered();
    got.extend(c.read_to_close());
    assert_eq!(got.len(), LEN, "the whole push");
}
