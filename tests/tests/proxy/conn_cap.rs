//! `--max-connections` is a per-worker cap: with 2 workers and a cap of 2, no worker ever
//! holds more than 2 client connections, the ones past the cap wait in the backlog (never
//! refused nor reset), and each is served once a slot frees.
//!
//! Which worker a connection lands on is the kernel's SO_REUSEPORT hash, unknown to the
//! test; the checks hold whatever it picks. They read the proxy's per-worker accept counters
//! (`WorkerStats::connections`): within one round, after every held connection was released,
//! a worker accepts at most `cap` new ones.

use std::time::{Duration, Instant};
use tests::raw::{parse_response, read_once, Client, End, Parse};
use tests::strict::{proxy, READY};

const CAP: u64 = 2;
const WORKERS: usize = 2;
const CLIENTS: usize = 10;

/// A client that sent one keep-alive GET and polls for its answer without blocking.
struct Pending {
    c: Client,
    buf: Vec<u8>,
    answered: bool,
    closed: bool,
}

impl Pending {
    /// Read what is there; `true` once the whole response arrived. A close or reset before
    /// it fails the test: a connection past the cap must wait, not be dropped.
    fn poll(&mut self) -> bool {
        if self.answered {
            return true;
        }
        // Non-blocking: "nothing there yet" reads as `End::TimedOut`.
        loop {
            match read_once(&mut self.c.stream, &mut self.buf) {
                Ok(_) => {}
                Err(End::TimedOut) => break,
                Err(End::Closed) => {
                    panic!("connection closed before its answer: {:?}", self.text())
                }
                Err(End::Reset) => panic!("connection reset before its answer: {:?}", self.text()),
            }
        }
        match parse_response(&self.buf, false) {
            Parse::Complete(r, used) => {
                assert_eq!((r.status, used), (200, self.buf.len()), "{r:?}");
                assert!(r.is_pattern(1), "{r:?}");
                self.answered = true;
            }
            Parse::Incomplete(_) => {}
            Parse::Invalid(e) => panic!("bad response {e}: {:?}", self.text()),
        }
        self.answered
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }
}

fn per_worker(p: &proxy::Running) -> Vec<u64> {
    p.stats().iter().map(|s| s.connections.get()).collect()
}

#[test]
fn per_worker_cap_with_two_workers() {
    let origin = tests::strict::capturing_origin();
    let (p, addr) = proxy(
        &[origin.addr()],
        &["--workers", "2", "--max-connections", "2"],
    );
    assert_eq!(p.stats().len(), WORKERS);
    let mut clients: Vec<Pending> = (0..CLIENTS)
        .map(|_| {
            let mut c = Client::connect(addr);
            // The client speaks first (the listener defers accept until it does).
            c.send(b"GET /?size=1 HTTP/1.1\r\nHost: t\r\n\r\n")
                .expect("send");
            c.stream.set_nonblocking(true).unwrap();
            Pending {
                c,
                buf: Vec::new(),
                answered: false,
                closed: false,
            }
        })
        .collect();

    // Rounds: wait for answers; once at least one new client is answered and a short quiet
    // spell shows no more coming, release (close) every answered one and count what each
    // worker accepted in the round. The quiet spell only decides when to move on; a slow
    // machine just makes more rounds, never a false failure.
    let deadline = Instant::now() + READY;
    let mut rounds = 0;
    while clients.iter().any(|c| !c.closed) {
        assert!(
            Instant::now() < deadline,
            "clients never served: {} of {CLIENTS} waiting, accepts per worker {:?}",
            clients.iter().filter(|c| !c.answered).count(),
            per_worker(&p)
        );
        let start = per_worker(&p);
        let mut last_change = Instant::now();
        let mut answered_before = clients.iter().filter(|c| c.answered).count();
        loop {
            std::thread::sleep(Duration::from_millis(2));
            let answered = clients
                .iter_mut()
                .filter(|c| !c.closed)
                .fold(0, |n, c| n + usize::from(c.poll()));
            let now = per_worker(&p);
            for (w, (a, b)) in start.iter().zip(&now).enumerate() {
                assert!(
                    b - a <= CAP,
                    "worker {w} accepted {} connections in one round (cap {CAP}); per worker {now:?}",
                    b - a
                );
            }
            let held = answered;
            assert!(held as u64 <= CAP * WORKERS as u64, "{held} held at once");
            if answered != answered_before {
                answered_before = answered;
                last_change = Instant::now();
            }
            if answered > 0 && last_change.elapsed() > Duration::from_millis(200) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no client answered; per worker {now:?}"
            );
        }
        for c in clients.iter_mut().filter(|c| c.answered && !c.closed) {
            c.c.stream.shutdown(std::net::Shutdown::Both).unwrap();
            c.closed = true;
        }
        rounds += 1;
    }
    // Ten clients through four slots take at least three rounds.
    assert!(rounds >= 3, "{rounds} rounds");
    assert_eq!(per_worker(&p).iter().sum::<u64>(), CLIENTS as u64);
    p.shutdown().expect("clean shutdown");
    assert_eq!(origin.requests(), CLIENTS as u64);
}
