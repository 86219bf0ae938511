//! Item 7: the admin listener served one connection at a time with a timeout per read, so one
//! client sending a byte every 0.9 s kept `/healthz` from answering for as long as it liked
//! (and an orchestrator restarted a healthy proxy). Now several connections are served at
//! once and each request has one deadline for the whole of it.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tests::raw::{parse_response, show, Client, End, Parse};

/// Slow clients held at once in the first test.
const SLOW: usize = 10;
/// How often a slow client sends its next byte.
const TRICKLE: Duration = Duration::from_millis(200);
/// The admin listener's whole-request deadline (`admin::CLIENT_TIMEOUT`).
const DEADLINE: Duration = Duration::from_secs(1);

fn proxy_with_admin() -> (proxy::Running, SocketAddr, shared::origin::Origin) {
    let origin = tests::capturing_origin();
    let (running, _) = tests::start_proxy(&[origin.addr()], &["--admin", "127.0.0.1:0"]);
    let admin = running.admin_addr().expect("admin address");
    (running, admin, origin)
}

/// A client that sent the start of a request whose head never ends.
fn slow_client(admin: SocketAddr) -> Client {
    let mut c = Client::connect(admin);
    c.send(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
        .expect("send the start of a head");
    c
}

/// Send one more byte of the endless head to every client, a byte every `TRICKLE`, until
/// `stop` fires (or is dropped); then hand the clients back.
fn trickle(
    mut clients: Vec<Client>,
    stop: mpsc::Receiver<()>,
) -> std::thread::JoinHandle<Vec<Client>> {
    std::thread::spawn(move || {
        while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(TRICKLE) {
            for c in &mut clients {
                // A client the admin listener cut stays cut: later sends fail, as they may.
                let _ = c.send(b"a");
            }
        }
        clients
    })
}

#[test]
fn healthz_answers_while_slow_clients_hold_admin_connections() {
    let (running, admin, _origin) = proxy_with_admin();
    let clients: Vec<Client> = (0..SLOW).map(|_| slow_client(admin)).collect();
    let (stop, stopped) = mpsc::channel();
    let trickling = trickle(clients, stopped);

    let mut h = Client::connect(admin);
    h.send(b"GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
        .expect("send /healthz");
    // Generous for a busy machine, and still short of what serving the slow clients one
    // after another would take (each cut at the deadline: SLOW x DEADLINE). Before the fix
    // no answer came for as long as they kept sending.
    let reply = h.until_close(tests::raw::WAIT);
    drop(stop);
    let clients = trickling.join().expect("trickling thread");
    match parse_response(&reply.bytes, reply.end != End::TimedOut) {
        Parse::Complete(r, _) => {
            assert_eq!(r.status, 200, "{}", show(&reply));
            assert_eq!(r.body, b"ok\n", "{}", show(&reply));
        }
        other => panic!(
            "/healthz with {SLOW} slow clients connected: no complete answer ({other:?}): {}",
            show(&reply)
        ),
    }
    drop(clients);
    running.shutdown().expect("clean shutdown");
}

#[test]
fn a_slow_admin_client_is_cut_at_the_whole_request_deadline() {
    let (running, admin, _origin) = proxy_with_admin();
    let start = Instant::now();
    let mut c = slow_client(admin);
    c.stream.set_read_timeout(Some(TRICKLE)).unwrap();
    let limit = Duration::from_secs(5);
    // Each wait for the listener's answer is also the pause between two bytes.
    let end = loop {
        if start.elapsed() > limit {
            break None;
        }
        match c.fill() {
            Err(End::TimedOut) => {}
            Ok(_) => {}
            Err(end) => break Some(end),
        }
        if c.send(b"a").is_err() {
            break Some(End::Reset);
        }
    };
    let elapsed = start.elapsed();
    let got = String::from_utf8_lossy(c.buffered()).into_owned();
    assert!(
        end.is_some(),
        "a client sending a byte every {TRICKLE:?} was still connected after {elapsed:?} \
         (deadline {DEADLINE:?}); received {got:?}"
    );
    assert!(
        elapsed >= DEADLINE - Duration::from_millis(100),
        "cut after {elapsed:?}, before the {DEADLINE:?} deadline"
    );
    // What came before the close, if anything, is a 408 that closes.
    if !got.is_empty() {
        assert!(
            got.starts_with("HTTP/1.1 408 ") && got.contains("Connection: close\r\n"),
            "{got:?}"
        );
    }
    running.shutdown().expect("clean shutdown");
}

/// A scrape whose request carries bytes the admin thread never reads (a body, a pipelined
/// request), from a client whose small receive buffer takes the answer piece by piece: the
/// whole answer arrives, then the end. Before, the thread closed the socket as soon as the
/// answer was in the kernel's hands, with those bytes unread: close(2) then sends a reset,
/// which discards what had not left yet (4096 bytes of a 12 KB answer, then a reset). Now
/// it shuts its side down and reads and discards what comes until the client closes (the
/// lingering close of the public listeners).
#[test]
fn a_scrape_with_request_bytes_left_unread_arrives_whole() {
    let (running, admin, _origin) = proxy_with_admin();
    let mut body = b"GET /metrics HTTP/1.1\r\nHost: admin\r\nContent-Length: 5000\r\n\r\n".to_vec();
    body.resize(body.len() + 5000, b'x');
    let pipelined = b"GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n";
    for (what, request) in [
        ("a body", &body[..]),
        ("a pipelined request", &pipelined[..]),
    ] {
        let mut c = tests::raw::Client::connect_small_window(admin, 4096);
        c.send(request).expect("send the request");
        // The event to read after: the thread is done writing and has either closed its
        // socket (gone from the table: a reset) or shut its side down (lingering).
        let (ours, theirs) = (
            c.stream.local_addr().unwrap(),
            c.stream.peer_addr().unwrap(),
        );
        assert!(
            tests::eventually(tests::raw::WAIT, || {
                tests::tcp_state(theirs, ours) != Some(tests::TCP_ESTABLISHED)
            }),
            "{what}: the admin thread never ended its side"
        );
        let reply = c.until_close(tests::raw::WAIT);
        let r = match parse_response(&reply.bytes, reply.end != End::TimedOut) {
            Parse::Complete(r, _) => r,
            _ => panic!(
                "{what}: no complete answer in {} bytes, then {:?}",
                reply.bytes.len(),
                reply.end
            ),
        };
        assert_eq!(r.status, 200, "{what}");
        assert!(
            r.body.len() > 8 << 10, // at least twice what the client's buffer takes at once
            "{what}: an answer too short to test: {}",
            r.body.len()
        );
        assert_eq!(reply.end, End::Closed, "{what}: after the answer");
    }
    running.shutdown().expect("clean shutdown");
}
