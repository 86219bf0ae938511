//! Broken origins, one table (issue 25): a scripted raw-socket origin whose first request
//! heads meet a fault (a reset, a half-close, a stall in the head or the body, garbage, an
//! answer before the request body ended, a kill under load), then serves normally. For each
//! row:
//! - the client gets the status the proxy owes it (502/504) while no byte of the answer had
//!   reached it, and after that a close: never a truncated response passed off as complete;
//! - the proxy serves the next request (a fresh connection, a 200 from the same origin);
//! - `/metrics` counts the row's requests exactly: by status class and by fault kind, and
//!   no other fault.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::time::Duration;
use tests::raw::{assert_well_formed, show, Client, End, Response, WAIT};
use tests::scrape::{scrape, total};

/// What the origin does with one of the first request heads it reads.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Reset (RST) right after the head.
    Reset,
    /// Close its sending side (FIN) and keep the connection otherwise open.
    HalfClose,
    /// Part of a response head, then nothing.
    StallHead,
    /// A head with `Content-Length: 1000` and 100 bytes of body, then nothing.
    StallBodyLength,
    /// A chunked head and one 100-byte chunk, then nothing.
    StallBodyChunked,
    /// A head with `Content-Length: 1000` and 100 bytes of body, then a reset.
    ResetMidBody,
    /// Bytes that are not HTTP (and the connection kept open).
    Garbage,
    /// A 413 with its body before the request body ended; then close (`close`, the answer
    /// says `Connection: close`) or keep the connection, reading nothing more.
    EarlyAnswer { close: bool },
    /// Killed under load: the origin waits until it holds every one of the row's requests,
    /// answers every other one with a head and part of a body, then resets them all at once.
    Kill,
}

/// What the client must see.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// A generated error response (no byte of the origin's answer had gone out).
    Status(u16),
    /// A complete response with this status relayed from the origin, then a close.
    RelayedThenClose(u16),
    /// A 200 head and part of its body, then a close: the response is never complete.
    CutOff,
    /// [`Fault::Kill`]: the even requests get 502, the odd ones are cut off.
    KillMix,
}

struct Row {
    fault: Fault,
    /// Requests sent at once (each on a connection of its own).
    clients: usize,
    /// An upload whose body is far from complete when the origin answers.
    upload: bool,
    expect: Expect,
    /// The proxy's upstream read (and send) timeout: short where the row waits for it (a
    /// stall), long where the fault must come first however loaded the machine.
    read_timeout: &'static str,
    /// `proxy_request_faults_total` by kind: exactly these, every other kind 0.
    faults: &'static [(&'static str, f64)],
    /// `proxy_requests_total{route="/"}` by class for the row's requests.
    classes: &'static [(&'static str, f64)],
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const EARLY: &str = "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n";
const PARTIAL_LENGTH: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
const PARTIAL_CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n";

/// Held while the origin must keep stalled connections open; dropped at the end of a row.
struct Origin {
    addr: SocketAddr,
    _hold: mpsc::Sender<()>,
}

/// The origin for `row`: its first `row.clients` heads meet the fault, every later one gets
/// [`OK`] (keep-alive).
fn origin(row: &Row) -> Origin {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind the origin");
    let addr = l.local_addr().expect("its address");
    let (hold, release) = mpsc::channel::<()>();
    let release = Arc::new(Mutex::new(release));
    let heads = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(row.clients));
    let (fault, clients) = (row.fault, row.clients);
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(conn) = conn else { return };
            let (heads, barrier, release) = (heads.clone(), barrier.clone(), release.clone());
            std::thread::spawn(move || {
                serve(conn, fault, clients, &heads, &barrier, &release);
            });
        }
    });
    Origin { addr, _hold: hold }
}

/// Read one request head from `s` (and whatever else came with it); false at EOF.
fn read_head(s: &mut TcpStream) -> bool {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    true
}

fn serve(
    mut s: TcpStream,
    fault: Fault,
    clients: usize,
    heads: &AtomicUsize,
    barrier: &Barrier,
    release: &Mutex<mpsc::Receiver<()>>,
) {
    // Bounds a connection the proxy keeps pooled after the test.
    s.set_read_timeout(Some(WAIT)).expect("read timeout");
    while read_head(&mut s) {
        let n = heads.fetch_add(1, Ordering::SeqCst);
        if n >= clients {
            if s.write_all(OK).is_err() {
                return;
            }
            continue;
        }
        let stall = |s: TcpStream| {
            // Until the row ends (the test drops the origin's sender).
            let _ = release.lock().map(|r| r.recv());
            drop(s);
        };
        match fault {
            Fault::Reset => return reset(s),
            Fault::HalfClose => {
                s.shutdown(std::net::Shutdown::Write).expect("half-close");
                return stall(s);
            }
            Fault::StallHead => {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Le")
                    .expect("write");
                return stall(s);
            }
            Fault::StallBodyLength | Fault::ResetMidBody => {
                s.write_all(PARTIAL_LENGTH).expect("write");
                s.write_all(&[b'x'; 100]).expect("write");
                if matches!(fault, Fault::ResetMidBody) {
                    tests::wait_until_peer_read(&s, KILL_WAIT);
                    return reset(s);
                }
                return stall(s);
            }
            Fault::StallBodyChunked => {
                s.write_all(PARTIAL_CHUNKED).expect("write");
                s.write_all(&[b'x'; 100]).expect("write");
                return stall(s);
            }
            Fault::Garbage => {
                s.write_all(b"\x00\x01 SSH-2.0 nonsense\r\n\r\n")
                    .expect("write");
                return stall(s);
            }
            Fault::EarlyAnswer { close } => {
                let answer = format!(
                    "{EARLY}{}\r\ntoo big!",
                    if close { "Connection: close\r\n" } else { "" }
                );
                s.write_all(answer.as_bytes()).expect("write");
                if close {
                    return;
                }
                return stall(s);
            }
            Fault::Kill => {
                // Every request of the row is here before any is answered: "under load".
                barrier.wait();
                if n % 2 == 1 {
                    s.write_all(PARTIAL_LENGTH).expect("write");
                    s.write_all(&[b'x'; 100]).expect("write");
                    tests::wait_until_peer_read(&s, KILL_WAIT);
                }
                barrier.wait();
                return reset(s);
            }
        }
    }
}

/// Close with RST (SO_LINGER 0).
fn reset(s: TcpStream) {
    socket2::SockRef::from(&s)
        .set_linger(Some(Duration::ZERO))
        .expect("SO_LINGER");
    drop(s);
}

fn proxy(origin: SocketAddr, read_timeout: &str) -> proxy::Running {
    let text = tests::toml_proxy::config_text(&format!(
        r#"
[admin]
addr = "127.0.0.1:0"

[upstream.app]
servers = ["{origin}"]

[[route]]
path = "/"
upstream = "app"
"#
    ))
    .replace(
        "[timeouts]\n",
        &format!("[timeouts]\nread = \"{read_timeout}\"\nupstream_send = \"{read_timeout}\"\n"),
    );
    let cfg = proxy::config::from_toml("broken.toml", &text).expect("config");
    proxy::start(cfg).expect("proxy starts")
}

const UPLOAD_LEN: usize = 100_000;
/// Patience for the kill row's clients (under the row's 30 s read timeout).
const KILL_WAIT: Duration = Duration::from_secs(25);

/// One client's request: a GET, or an upload's head and the first 1000 bytes of its body.
fn send(addr: SocketAddr, upload: bool) -> Client {
    let mut c = Client::connect(addr);
    if upload {
        let head = format!("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {UPLOAD_LEN}\r\n\r\n");
        c.send(head.as_bytes()).expect("head sent");
        c.send(&[b'u'; 1000]).expect("body sent");
    } else {
        c.send(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n").expect("sent");
    }
    c
}

/// The connection ends (a close or a reset, never a timeout) with nothing more on it.
fn assert_ends(c: &mut Client, what: &str) {
    let rest = c.until_close(WAIT);
    assert_ne!(
        rest.end,
        End::TimedOut,
        "{what}: never closed: {}",
        show(&rest)
    );
    assert!(
        rest.bytes.is_empty(),
        "{what}: bytes after: {}",
        show(&rest)
    );
}

/// A 200 head and part of its body, then the end of the connection.
fn assert_cut_off(c: &mut Client, what: &str) {
    let rest = c.until_close(WAIT);
    assert_ne!(
        rest.end,
        End::TimedOut,
        "{what}: never closed: {}",
        show(&rest)
    );
    let resps = rest.responses();
    let head = resps
        .first()
        .unwrap_or_else(|| panic!("{what}: {}", show(&rest)));
    assert_eq!(head.status, 200, "{what}: {}", show(&rest));
    assert!(!head.complete, "{what}: truncated passed off as complete");
    assert!(head.body.len() <= 100, "{what}: {}", show(&rest));
}

fn check_client(c: &mut Client, expect: Expect, i: usize, what: &str) {
    let expect = match expect {
        Expect::KillMix if i.is_multiple_of(2) => Expect::Status(502),
        Expect::KillMix => Expect::CutOff,
        e => e,
    };
    match expect {
        Expect::Status(status) => {
            let r: Response = c
                .response(WAIT)
                .unwrap_or_else(|r| panic!("{what}: want {status}: {}", show(&r)));
            assert_well_formed(&r, status);
            assert!(r.connection_has("close"), "{what}: {r:?}");
            assert_ends(c, what);
        }
        Expect::RelayedThenClose(status) => {
            let r = c
                .response(WAIT)
                .unwrap_or_else(|r| panic!("{what}: want {status}: {}", show(&r)));
            assert_eq!(
                (r.status, &r.body[..]),
                (status, &b"too big!"[..]),
                "{what}"
            );
            assert!(r.connection_has("close"), "{what}: {r:?}");
            assert_ends(c, what);
        }
        Expect::CutOff | Expect::KillMix => assert_cut_off(c, what),
    }
}

fn run(row: &Row) {
    let what = format!("{:?}", row.fault);
    let o = origin(row);
    let p = proxy(o.addr, row.read_timeout);
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    // The kill's requests arrive in any order: which one is odd is the origin's count, so
    // the clients are matched to their answers by what they got, then counted.
    let mut clients: Vec<Client> = (0..row.clients).map(|_| send(addr, row.upload)).collect();
    if matches!(row.expect, Expect::KillMix) {
        let (mut bad, mut cut) = (0, 0);
        for c in &mut clients {
            // The kill comes once every request arrived and half were partly answered: on a
            // loaded machine that may take a while (the proxy's read timeout is longer).
            let reply = c.until_close(KILL_WAIT);
            assert_ne!(reply.end, End::TimedOut, "{what}: {}", show(&reply));
            let r = reply.responses();
            let r = r
                .first()
                .unwrap_or_else(|| panic!("{what}: {}", show(&reply)));
            match r.status {
                502 => {
                    assert!(r.complete, "{what}: {r:?}");
                    bad += 1
                }
                200 => {
                    assert!(!r.complete, "{what}: truncated passed off as complete");
                    cut += 1
                }
                s => panic!("{what}: status {s}"),
            }
        }
        assert_eq!((bad, cut), (row.clients / 2, row.clients / 2), "{what}");
    } else {
        for (i, c) in clients.iter_mut().enumerate() {
            check_client(c, row.expect, i, &what);
        }
    }
    // The proxy keeps serving: the next request gets the origin's 200.
    let mut next = send(addr, false);
    let r = next
        .response(WAIT)
        .unwrap_or_else(|r| panic!("{what}: the next request: {}", show(&r)));
    assert_eq!((r.status, &r.body[..]), (200, &b"ok"[..]), "{what}");
    // Exact counts: the row's requests and the next one, once each.
    let want = (row.clients + 1) as f64;
    let mut m = scrape(admin);
    let seen = tests::eventually(WAIT, || {
        m = scrape(admin);
        total(&m, "proxy_request_duration_seconds_count") == want
    });
    assert!(
        seen,
        "{what}: requests counted {}",
        total(&m, "proxy_request_duration_seconds_count")
    );
    // Every fault kind and status class the scrape has: exactly the row's, 0 elsewhere.
    let next = [("2xx", 1.0)];
    for (prefix, want) in [
        ("proxy_request_faults_total{kind=", row.faults),
        (r#"proxy_requests_total{route="/",code="#, row.classes),
    ] {
        for (key, got) in m.iter().filter(|(k, _)| k.starts_with(prefix)) {
            let label = key[prefix.len()..].trim_matches(|c| c == '"' || c == '}');
            let mut want = want.iter().find(|f| f.0 == label).map_or(0.0, |f| f.1);
            if prefix.starts_with("proxy_requests_total") {
                want += next.iter().find(|f| f.0 == label).map_or(0.0, |f| f.1);
            }
            assert_eq!(*got, want, "{what}: {key}");
        }
        for (label, _) in want {
            assert!(
                m.keys().any(|k| k.starts_with(prefix) && k.contains(label)),
                "{what}: no sample {prefix}{label}"
            );
        }
    }
    drop(clients);
    p.shutdown().expect("shutdown");
}

const ROWS: &[Row] = &[
    Row {
        fault: Fault::Reset,
        clients: 1,
        upload: false,
        read_timeout: "30s",
        expect: Expect::Status(502),
        // Nothing of a head came: a reset is a close (as a stale pooled connection's).
        faults: &[("upstream_closed", 1.0)],
        classes: &[("5xx", 1.0)],
    },
    Row {
        fault: Fault::HalfClose,
        clients: 1,
        upload: false,
        read_timeout: "30s",
        expect: Expect::Status(502),
        faults: &[("upstream_closed", 1.0)],
        classes: &[("5xx", 1.0)],
    },
    Row {
        fault: Fault::StallHead,
        clients: 1,
        upload: false,
        read_timeout: "300ms",
        expect: Expect::Status(504),
        faults: &[("upstream_timeout", 1.0)],
        classes: &[("5xx", 1.0)],
    },
    Row {
        fault: Fault::StallBodyLength,
        clients: 1,
        upload: false,
        read_timeout: "300ms",
        expect: Expect::CutOff,
        faults: &[("upstream_timeout", 1.0)],
        classes: &[("2xx", 1.0)],
    },
    Row {
        fault: Fault::StallBodyChunked,
        clients: 1,
        upload: false,
        read_timeout: "300ms",
        expect: Expect::CutOff,
        faults: &[("upstream_timeout", 1.0)],
        classes: &[("2xx", 1.0)],
    },
    Row {
        fault: Fault::ResetMidBody,
        clients: 1,
        upload: false,
        read_timeout: "30s",
        expect: Expect::CutOff,
        faults: &[("upstream_io", 1.0)],
        classes: &[("2xx", 1.0)],
    },
    Row {
        fault: Fault::Garbage,
        clients: 1,
        upload: false,
        read_timeout: "30s",
        expect: Expect::Status(502),
        faults: &[("bad_response", 1.0)],
        classes: &[("5xx", 1.0)],
    },
    Row {
        fault: Fault::EarlyAnswer { close: true },
        clients: 1,
        upload: true,
        read_timeout: "30s",
        expect: Expect::RelayedThenClose(413),
        faults: &[],
        classes: &[("4xx", 1.0)],
    },
    Row {
        fault: Fault::EarlyAnswer { close: false },
        clients: 1,
        upload: true,
        read_timeout: "30s",
        expect: Expect::RelayedThenClose(413),
        faults: &[],
        classes: &[("4xx", 1.0)],
    },
    Row {
        fault: Fault::Kill,
        clients: 20,
        upload: false,
        read_timeout: "30s",
        expect: Expect::KillMix,
        faults: &[("upstream_closed", 10.0), ("upstream_io", 10.0)],
        classes: &[("5xx", 10.0), ("2xx", 10.0)],
    },
];

#[test]
fn broken_origins_get_a_status_or_a_close_and_exact_counts() {
    // Every row runs; the failures are listed together.
    let failed: Vec<String> = ROWS
        .iter()
        .filter_map(|row| {
            let r = std::panic::catch_unwind(|| run(row));
            r.err().map(|e| {
                let msg = e.downcast_ref::<String>().cloned();
                let msg = msg.or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                format!("{:?}: {}", row.fault, msg.unwrap_or_default())
            })
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} rows failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
