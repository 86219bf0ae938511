//! The loader under the broken origins of `proxy_security::broken_origins` (issue 25), one
//! table: a scripted raw-socket origin meets every request with one fault (a reset, a
//! half-close, a stall in the head or the body, garbage, a short body then a close, bodies
//! of changing length, nothing listening at all). For each row, every request of `-n` ends in
//! exactly the right failure bucket (or completes), nothing else is counted, and the run ends
//! on time: a stall costs one `--timeout` per request, never more.

use crate::run;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Fault {
    Reset,
    HalfClose,
    StallHead,
    StallBodyLength,
    StallBodyChunked,
    ResetMidBody,
    Garbage,
    /// A body shorter than its Content-Length, then a close (FIN).
    ShortBodyThenClose,
    /// Keep-alive answers of 2, 3, 2, 3... bytes: every other one differs from the first.
    ChangingLength,
    /// Nothing listens: every connect is refused.
    Refused,
}

/// Which bucket the row's requests end in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Want {
    completed: u64,
    connect: u64,
    read: u64,
    timeout: u64,
    parse: u64,
    length: u64,
}

const N: u64 = 6;
const TIMEOUT: Duration = Duration::from_millis(300);
/// The timeout of the rows that must not meet it.
const LONG: Duration = Duration::from_secs(10);

struct Origin {
    addr: SocketAddr,
    _hold: mpsc::Sender<()>,
    _listener: Option<()>,
}

fn origin(fault: Fault) -> Origin {
    let (hold, release) = mpsc::channel::<()>();
    if let Fault::Refused = fault {
        // A bound socket that never listens: refused at once, the port held meanwhile.
        let port = tests::ClosedPort::new();
        let addr = port.addr();
        std::thread::spawn(move || {
            let _port = port;
            let _ = release.recv();
        });
        return Origin {
            addr,
            _hold: hold,
            _listener: None,
        };
    }
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let release = Arc::new(Mutex::new(release));
    let answers = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let (release, answers) = (release.clone(), answers.clone());
            std::thread::spawn(move || serve(s, fault, &release, &answers));
        }
    });
    Origin {
        addr,
        _hold: hold,
        _listener: Some(()),
    }
}

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

fn reset(s: TcpStream) {
    socket2::SockRef::from(&s)
        .set_linger(Some(Duration::ZERO))
        .expect("SO_LINGER");
    drop(s);
}

fn serve(mut s: TcpStream, fault: Fault, release: &Mutex<mpsc::Receiver<()>>, n: &AtomicUsize) {
    s.set_read_timeout(Some(tests::raw::WAIT)).expect("timeout");
    let stall = |s: TcpStream| {
        let _ = release.lock().map(|r| r.recv_timeout(tests::raw::WAIT));
        drop(s);
    };
    while read_head(&mut s) {
        let w = |s: &mut TcpStream, b: &[u8]| s.write_all(b).is_ok();
        match fault {
            Fault::Reset => return reset(s),
            Fault::HalfClose => {
                let _ = s.shutdown(std::net::Shutdown::Write);
                return stall(s);
            }
            Fault::StallHead => {
                w(&mut s, b"HTTP/1.1 200 OK\r\nContent-Le");
                return stall(s);
            }
            Fault::StallBodyLength => {
                w(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
                return stall(s);
            }
            Fault::StallBodyChunked => {
                w(
                    &mut s,
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
                );
                return stall(s);
            }
            Fault::ResetMidBody => {
                w(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
                tests::wait_until_peer_read(&s, tests::raw::WAIT);
                return reset(s);
            }
            Fault::Garbage => {
                w(&mut s, b"\x00\x01 SSH-2.0 nonsense\r\n\r\n");
                return stall(s);
            }
            Fault::ShortBodyThenClose => {
                w(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
                return;
            }
            Fault::ChangingLength => {
                let i = n.fetch_add(1, Ordering::SeqCst);
                let r: &[u8] = if i.is_multiple_of(2) {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                } else {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok!"
                };
                if !w(&mut s, r) {
                    return;
                }
            }
            Fault::Refused => unreachable!("nothing listens"),
        }
    }
}

fn row(fault: Fault, connections: usize, want: Want) {
    let o = origin(fault);
    let url = format!("http://{}/x", o.addr);
    let mut opt = crate::opts(&[url], connections);
    opt.requests = Some(N);
    // Only a stall meets the short timeout; every other fault must come first however
    // loaded the machine (a reset after the peer read is seen through /proc).
    let stalls = want.timeout > 0;
    opt.timeout = if stalls { TIMEOUT } else { LONG };
    let t = Instant::now();
    let r = run(&opt);
    let took = t.elapsed();
    let (t, f) = (&r.totals, &r.totals.failures);
    let got = Want {
        completed: t.completed,
        connect: f.connect,
        read: f.read,
        timeout: f.timeout,
        parse: f.parse,
        length: f.length,
    };
    assert_eq!(got, want, "{fault:?}: {t:?}");
    assert_eq!(
        (t.attempts, f.write, f.unanswered),
        (N, 0, 0),
        "{fault:?}: {t:?}"
    );
    // On time: the timed-out requests of a connection come one after another, each after
    // one --timeout; nothing else waits (with a generous margin for a loaded machine).
    let per_conn = want.timeout.div_ceil(connections as u64) as u32;
    let bound = TIMEOUT * per_conn + Duration::from_secs(8);
    assert!(
        took < bound,
        "{fault:?}: the run took {took:?} (bound {bound:?})"
    );
}

#[test]
fn each_origin_fault_lands_in_its_bucket_and_the_run_ends_on_time() {
    let rows = [
        (
            Fault::Reset,
            Want {
                read: N,
                ..Want::default()
            },
        ),
        (
            Fault::HalfClose,
            Want {
                read: N,
                ..Want::default()
            },
        ),
        (
            Fault::StallHead,
            Want {
                timeout: N,
                ..Want::default()
            },
        ),
        (
            Fault::StallBodyLength,
            Want {
                timeout: N,
                ..Want::default()
            },
        ),
        (
            Fault::StallBodyChunked,
            Want {
                timeout: N,
                ..Want::default()
            },
        ),
        (
            Fault::ResetMidBody,
            Want {
                read: N,
                ..Want::default()
            },
        ),
        (
            Fault::Garbage,
            Want {
                parse: N,
                ..Want::default()
            },
        ),
        (
            Fault::ShortBodyThenClose,
            Want {
                read: N,
                ..Want::default()
            },
        ),
        (
            Fault::Refused,
            Want {
                connect: N,
                ..Want::default()
            },
        ),
    ];
    let mut failed = Vec::new();
    for (fault, want) in rows {
        if let Err(e) = std::panic::catch_unwind(|| row(fault, 2, want)) {
            let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
            failed.push(format!("{fault:?}: {msg}"));
        }
    }
    // One connection: answers alternate 2 and 3 bytes, the first is 2.
    let changing = Want {
        completed: N,
        length: N / 2,
        ..Want::default()
    };
    if let Err(e) = std::panic::catch_unwind(|| row(Fault::ChangingLength, 1, changing)) {
        let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
        failed.push(format!("ChangingLength: {msg}"));
    }
    assert!(
        failed.is_empty(),
        "{} rows failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// A timed run (`-d`) against an origin that stalls every answer: the load stops at the
/// deadline and the drain after it lasts at most one `--timeout`, so the run ends on time;
/// every attempt is accounted for (timed out during the load, or unanswered at the drain's
/// end), none completes.
#[test]
fn a_timed_run_against_a_stalling_origin_ends_on_time() {
    let o = origin(Fault::StallHead);
    let url = format!("http://{}/x", o.addr);
    let mut opt = crate::opts(&[url], 2);
    opt.duration = Some(Duration::from_millis(700));
    opt.timeout = TIMEOUT;
    let t = Instant::now();
    let r = run(&opt);
    let took = t.elapsed();
    let (t, f) = (&r.totals, &r.totals.failures);
    assert_eq!(t.completed, 0, "{t:?}");
    assert!(f.timeout >= 2, "{t:?}");
    assert_eq!(t.attempts, f.timeout + f.unanswered, "{t:?}");
    assert_eq!((f.connect, f.read, f.write, f.parse), (0, 0, 0, 0), "{t:?}");
    let bound = Duration::from_millis(700) + TIMEOUT + Duration::from_secs(2);
    assert!(took < bound, "the run took {took:?} (bound {bound:?})");
}
