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

/// A proxy over group `app` of `servers` (TOML tables), balanced `balance`, whose route waits
/// `connect` for room (the queue's bound).
fn group_proxy(servers: &str, balance: &str, connect: &str) -> tests::inproc::Proxy {
    tests::toml_proxy::start(&format!(
        "[upstream.app]\nservers = [{servers}]\nbalance = \"{balance}\"\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\ntimeouts = {{ connect = \"{connect}\" }}\n"
    ))
}

/// An upgrade on a new connection: its status, and the connection.
fn upgrade(p: &tests::inproc::Proxy) -> (u16, tests::inproc::Client) {
    let mut c = p.connect();
    c.send(UPGRADE);
    (c.response().status, c)
}

/// The tunnel carries bytes: `msg` comes back.
fn echoes(c: &mut tests::inproc::Client, msg: &[u8]) {
    c.stream.write_all(msg).expect("the tunnel is open");
    let mut got = c.take_buffered();
    while got.len() < msg.len() {
        let mut tmp = [0u8; 4096];
        let n = c.stream.read(&mut tmp).expect("the echo");
        assert!(n > 0, "the tunnel closed");
        got.extend_from_slice(&tmp[..n]);
    }
    assert_eq!(got, msg);
}

#[test]
fn an_open_tunnel_holds_its_servers_room_under_max_conns() {
    // Two servers of one room each: two tunnels take both; a third upgrade waits for room
    // (300 ms) and gets 503, as a request does while both are busy (nginx: 502 at once).
    // The tunnels gave their rooms back at the 101: the third got a tunnel as well.
    let (a, b) = (
        tests::ws::echo_origin(Some("a")),
        tests::ws::echo_origin(Some("b")),
    );
    let servers =
        format!("{{ addr = \"{a}\", max_conns = 1 }}, {{ addr = \"{b}\", max_conns = 1 }}");
    let p = group_proxy(&servers, "least-conn", "300ms");
    let (s1, mut t1) = upgrade(&p);
    let (s2, mut t2) = upgrade(&p);
    assert_eq!((s1, s2), (101, 101));
    let (s3, _c3) = upgrade(&p);
    assert_eq!(s3, 503, "a third tunnel over two servers of max_conns = 1");
    let (s4, _c4) = upgrade(&p);
    assert_eq!(s4, 503);
    echoes(&mut t1, b"still one");
    // A tunnel that ends gives its room back: the next upgrade takes it (it waits for it
    // in the queue, up to 300 ms, should the end not be through yet).
    t2.stream.shutdown(std::net::Shutdown::Write).unwrap();
    t2.read_to_close();
    let (s5, mut t5) = upgrade(&p);
    assert_eq!(s5, 101, "the room of the tunnel that ended");
    echoes(&mut t5, b"the new one");
}

#[test]
fn least_conn_weighs_open_tunnels() {
    // One tunnel open on a server: least-conn sends the requests that follow, one at a
    // time, to the other one. Uncounted, the tunnel left both at 0 and they alternated.
    let (a, b) = (
        tests::ws::echo_origin(Some("a")),
        tests::ws::echo_origin(Some("b")),
    );
    let p = group_proxy(&format!("\"{a}\", \"{b}\""), "least-conn", "1s");
    let (s, mut t) = upgrade(&p);
    assert_eq!(s, 101);
    let mut went = Vec::new();
    for _ in 0..4 {
        let mut c = p.connect();
        let r = c.get("/");
        assert_eq!(r.status, 200);
        went.push(tests::text(&r.body));
    }
    // The tunnel's server: the one that got none of the requests.
    let first = went[0].clone();
    assert!(
        went.iter().all(|w| *w == first),
        "requests beside an open tunnel went to {went:?}"
    );
    echoes(&mut t, b"the tunnel is on the other one");
}

#[test]
fn tunnel_writes_to_the_upstream_are_bounded_by_upstream_send() {
    // The origin takes the upgrade and never reads; the client floods the tunnel. The
    // proxy's write to the origin stalls: the route's `upstream_send` (300 ms) bounds it,
    // not the client `send` (30 s, past the client's 10 s wait). nginx: proxy_send_timeout.
    let origin = upgrading_origin(|s| {
        std::thread::sleep(std::time::Duration::from_secs(40));
        drop(s);
    });
    let p = tests::toml_proxy::start(&format!(
        // Still in `config_text`'s [timeouts].
        "read = \"30s\"\nsend = \"30s\"\n[upstream.app]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\ntimeouts = {{ upstream_send = \"300ms\" }}\n"
    ));
    let mut c = p.connect();
    c.send(UPGRADE);
    assert_eq!(c.response().status, 101);
    // Until a write stalls (every buffer on the way is full) or fails (the proxy closed).
    c.stream
        .set_write_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    let chunk = vec![b'f'; 64 * 1024];
    while c.stream.write_all(&chunk).is_ok() {}
    c.read_to_close();
}

#[test]
fn a_second_upgrade_line_joins_the_first() {
    // `Upgrade: websocket` and `Upgrade: foo` are one list (RFC 9110 5.3), in either order:
    // the last line replaced the first, so one order was an upgrade and the other a plain GET.
    for lines in [
        "Upgrade: websocket\r\nUpgrade: foo\r\n",
        "Upgrade: foo\r\nUpgrade: websocket\r\n",
    ] {
        let o = tests::capturing_origin();
        let p = Proxy::start(config(&[o.addr()]));
        let mut c = p.connect();
        let req = format!(
            "GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\n{lines}\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        );
        c.send(req.as_bytes());
        assert_eq!(c.response().status, 101, "{lines:?}");
        let seen = tests::text(&o.captured()[0]);
        assert!(seen.contains("Upgrade: websocket\r\n"), "{lines:?}: {seen}");
        assert!(!seen.contains("foo"), "{lines:?}: {seen}");
    }
}
