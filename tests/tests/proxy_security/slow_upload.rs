//! Item 8: a request body is streamed to an upstream connection opened when its head arrived,
//! and only each read of it was timed: a client sending one byte a little faster than the
//! body timeout held an upstream connection for as long as it liked. Now, past a grace
//! period (the body timeout), the body must keep up a minimum average rate
//! (`[timeouts] body_min_rate`, 500 B/s by default): a trickle is cut with 408 and its
//! upstream connection closed; a client that sends at a real rate, with pauses, is not. A
//! body up to 64 KiB is read whole before an upstream is chosen: its trickle is cut before
//! any upstream connection exists.

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tests::inproc::{config, Proxy};
use tests::raw::{parse_response, show, Client, End, Parse, WAIT};

/// The body timeout of these tests: the grace before the minimum rate applies.
const GRACE: Duration = Duration::from_millis(300);

/// A proxy whose only upstream is `origin`, with the sub-second body timeout.
fn proxy(origin: SocketAddr) -> Proxy {
    let mut cfg = config(&[origin]);
    cfg.timeouts.body = GRACE;
    Proxy::start(cfg)
}

/// An origin that accepts one connection and reads it until it ends: how it ended (a read
/// timeout of 10 s is `TimedOut`, the connection still open) and the bytes it got.
fn sink_origin() -> (SocketAddr, mpsc::Receiver<(End, usize)>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (mut got, mut buf) = (0, [0u8; 4096]);
        let end = loop {
            match s.read(&mut buf) {
                Ok(0) => break End::Closed,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break End::Reset,
                Err(_) => break End::TimedOut,
            }
        };
        let _ = tx.send((end, got));
    });
    (addr, rx)
}

/// Send `head`, then the body one byte every 50 ms (20 B/s: each read comes well within the
/// body timeout) until the proxy answers or closes: the 408 it must send, and when.
fn trickle(p: &Proxy, head: &[u8]) {
    let mut c = Client::connect(p.addr);
    c.send(head).expect("send the head");
    let pause = Duration::from_millis(50);
    c.stream.set_read_timeout(Some(pause)).unwrap();
    let (start, limit) = (Instant::now(), Duration::from_secs(5));
    let end = loop {
        if start.elapsed() > limit {
            break None;
        }
        if c.send(b"x").is_err() {
            break Some(End::Reset);
        }
        // The wait for an answer is the pause between two bytes.
        match c.fill() {
            Ok(_) | Err(End::TimedOut) => {}
            Err(end) => break Some(end),
        }
    };
    let (elapsed, got) = (
        start.elapsed(),
        String::from_utf8_lossy(c.buffered()).into_owned(),
    );
    assert!(
        end.is_some(),
        "a body trickled at 20 B/s was still being taken after {elapsed:?} (body timeout \
         {GRACE:?}); received {got:?}"
    );
    // The grace is the body timeout: never cut before it.
    assert!(elapsed >= GRACE, "cut after {elapsed:?}, within the grace");
    match parse_response(c.buffered(), true) {
        Parse::Complete(r, _) => {
            assert_eq!(r.status, 408, "{got:?}");
            assert!(r.connection_has("close"), "{got:?}");
        }
        other => panic!("no complete 408 before the close ({other:?}): {got:?}"),
    }
}

#[test]
fn a_trickled_body_is_cut_with_408_and_its_upstream_connection_closed() {
    let (origin, ended) = sink_origin();
    let p = proxy(origin);
    // Over 64 KiB: streamed to an upstream connection opened when the head came.
    trickle(
        &p,
        b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n",
    );
    let (how, bytes) = ended
        .recv_timeout(WAIT)
        .expect("the origin's connection ended");
    assert_ne!(
        how,
        End::TimedOut,
        "the upstream connection stayed open after the client was cut ({bytes} bytes sent to it)"
    );
}

/// A small body is read whole before an upstream is chosen: its trickle is cut the same way,
/// and no upstream connection was ever opened for it.
#[test]
fn a_trickled_small_body_is_cut_with_408_before_any_upstream_connection() {
    let origin = tests::origin();
    let p = proxy(origin.addr());
    trickle(
        &p,
        b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n",
    );
    assert_eq!(origin.connections(), 0, "an upstream connection was opened");
}

#[test]
fn a_body_sent_at_a_real_rate_with_short_pauses_is_not_cut() {
    let origin = tests::origin();
    let p = proxy(origin.addr());
    let (chunk, chunks) = (4096, 10);
    let mut c = Client::connect(p.addr);
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        chunk * chunks
    );
    c.send(head.as_bytes()).expect("send the head");
    // 40 KiB over about a second: far above the minimum rate, with pauses shorter than the
    // grace (and longer than the whole body would take at full speed).
    for _ in 0..chunks {
        c.send(&vec![b'y'; chunk])
            .expect("send a chunk of the body");
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = c
        .response(WAIT)
        .unwrap_or_else(|r| panic!("no response to a paced upload: {}", show(&r)));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(origin.body_bytes(), (chunk * chunks) as u64);
}

/// A chunked body is read before an upstream is chosen until it ends or passes 64 KiB; one
/// that passes them streams, and the time its client took so far still counts: the pace goes
/// on from the gathering, it does not start again with a fresh grace once an upstream is
/// connected (which would let every such body have two graces).
#[test]
fn a_chunked_body_that_streams_after_its_gathering_keeps_its_pace() {
    let origin = tests::origin();
    let mut cfg = config(&[origin.addr()]);
    cfg.timeouts.body = GRACE;
    // 1 MB/s: the 71 KiB below earn ~72 ms on top of the grace, so the two pauses (500 ms in
    // all) exceed what the body is allowed (~372 ms), while either pause alone fits in it.
    cfg.timeouts.body_min_rate = 1_000_000;
    let p = Proxy::start(cfg);
    let pause = Duration::from_millis(250);
    let mut c = Client::connect(p.addr);
    let mut first =
        b"POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    first.extend_from_slice(b"400\r\n");
    first.extend_from_slice(&[b'a'; 0x400]);
    first.extend_from_slice(b"\r\n");
    c.send(&first).expect("send the head and the first chunk");
    std::thread::sleep(pause);
    // Past 64 KiB: the body streams from here on.
    let mut big = format!("{:x}\r\n", 70_000).into_bytes();
    big.extend_from_slice(&[b'b'; 70_000]);
    big.extend_from_slice(b"\r\n");
    c.send(&big).expect("send the large chunk");
    std::thread::sleep(pause);
    // The client may find the connection already closed: the answer is what counts.
    let _ = c.send(b"0\r\n\r\n");
    let r = c
        .response(WAIT)
        .unwrap_or_else(|r| panic!("no response: {}", show(&r)));
    assert_eq!(
        r.status, 408,
        "a body that waited 500 ms against an allowance of ~372 ms was taken: {r:?}"
    );
}
