//! `[timeouts] send` is the longest stall of one write (nginx's `send_timeout`), never a
//! whole response's time: a large cache hit to a client that reads slowly but steadily goes
//! out whole. (In its own binary: its 64 MiB body file would trip the memfd size checks of
//! `proxy_cache`.)

use proxy::config::Action;
use std::net::SocketAddr;
use std::time::Duration;
use tests::raw::{self, Response};

/// A one-worker proxy with a cached route holding objects up to 32 MiB.
fn proxy(ups: &[SocketAddr], args: &[&str]) -> (proxy::Running, SocketAddr) {
    let mut cfg = tests::proxy_config(ups, args);
    match &mut cfg.routes[proxy::config::RouteId::new(0)].action {
        Action::Proxy { cache: Some(c), .. } => {
            let c = std::sync::Arc::make_mut(c);
            c.max_bytes = 64 << 20;
            c.max_object = 32 << 20;
        }
        other => panic!("--cache made no cached route: {other:?}"),
    }
    let running = proxy::start(cfg).expect("proxy starts");
    let addr = running.listen_addrs()[0];
    (running, addr)
}

fn x_cache(r: &Response) -> &str {
    r.header("x-cache").unwrap_or("")
}

/// `send` bounds one stalled write (nginx's `send_timeout`), not a whole body: a client that
/// reads a large hit slowly but steadily gets all of it, from the memfd with sendfile and from
/// memory. (The hit's body used to be written under one deadline: cut after `send`.)
#[test]
fn a_slow_reader_gets_a_large_hit_whole_while_it_keeps_reading() {
    const LEN: usize = 16 << 20;
    let o = tests::origin();
    for extra in [&[][..], &["--cache-no-sendfile"][..]] {
        let mut args = vec!["--cache", "1MiB", "--send-timeout", "1s"];
        args.extend_from_slice(extra);
        let (p, addr) = proxy(&[o.addr()], &args);
        let path = "/big?size=16MiB";
        let first = read_whole(addr, path, None);
        assert_eq!((first.status, x_cache(&first)), (200, "MISS"), "{extra:?}");
        // A small receive buffer, 256 KiB read every 30 ms: about 2 s for the body; the
        // longest wait for room (half the proxy's 4 MB send buffer) about 0.25 s.
        let r = read_whole(addr, path, Some(Duration::from_millis(30)));
        assert_eq!((r.status, x_cache(&r)), (200, "HIT"), "{extra:?}");
        assert!(r.is_pattern(LEN), "{extra:?}: the body");
        p.shutdown().unwrap();
    }
    assert_eq!(o.requests(), 2, "one miss per proxy");
}

/// GET `path` on a connection with a 64 KiB receive buffer, reading 256 KiB at a time (with
/// `pace` between reads) until the response is complete; a close before that fails the test
/// with the count of bytes received (never a response shown whole: megabytes).
fn read_whole(addr: SocketAddr, path: &str, pace: Option<Duration>) -> Response {
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.set_recv_buffer_size(64 << 10).expect("SO_RCVBUF");
    sock.connect(&addr.into()).expect("connect");
    let mut s: std::net::TcpStream = sock.into();
    std::io::Write::write_all(
        &mut s,
        format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n\r\n").as_bytes(),
    )
    .unwrap();
    s.set_read_timeout(Some(raw::WAIT)).unwrap();
    let mut got = Vec::new();
    let mut want = None;
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        let n = std::io::Read::read(&mut s, &mut chunk)
            .unwrap_or_else(|e| panic!("{path}: read after {} bytes: {e}", got.len()));
        assert!(
            n > 0,
            "{path} (pace {pace:?}): the proxy closed after {} bytes",
            got.len()
        );
        got.extend_from_slice(&chunk[..n]);
        if want.is_none() {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .expect("a Content-Length");
                want = Some(end + 4 + len);
            }
        }
        if want.is_some_and(|w| got.len() >= w) {
            break;
        }
        if let Some(p) = pace {
            std::thread::sleep(p);
        }
    }
    match raw::parse_response(&got, false) {
        raw::Parse::Complete(r, used) if used == got.len() => r,
        _ => panic!("{path}: {} bytes that are not one response", got.len()),
    }
}
