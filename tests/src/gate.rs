//! An origin that holds every request until the test lets it go, and reports each one as it
//! arrives with the requests it held then: tests of queues and limits see the order and the
//! concurrency exactly, and take an arrival as their readiness, never a sleep.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

/// An origin that reports each request as it arrives and holds it until let go; it counts
/// the most requests it held at once.
pub struct Gate {
    pub addr: SocketAddr,
    pub arrived: Receiver<Arrival>,
    /// The most requests it held at once.
    pub peak: Arc<AtomicUsize>,
}

pub struct Arrival {
    pub path: String,
    /// The requests the origin held with this one (itself included).
    pub held: usize,
    /// Answers it.
    pub go: Sender<()>,
}

impl Gate {
    pub fn start() -> Gate {
        Gate::with_fields("")
    }

    /// A gate whose answers carry `fields` (each line ending in CRLF) before their
    /// Content-Length; a request with If-None-Match is answered 304 with them.
    pub fn with_fields(fields: &'static str) -> Gate {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().unwrap();
        let (tx, arrived) = channel();
        let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let held = (now.clone(), peak.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let (tx, (now, peak)) = (tx.clone(), (held.0.clone(), held.1.clone()));
                std::thread::spawn(move || {
                    let mut pending = Vec::new();
                    while let Ok(head) = crate::raw::read_request_head(&mut s, &mut pending) {
                        let path = crate::text(&head)
                            .split(' ')
                            .nth(1)
                            .unwrap_or_default()
                            .to_string();
                        let held = now.fetch_add(1, SeqCst) + 1;
                        peak.fetch_max(held, SeqCst);
                        let (go, wait) = channel();
                        let path2 = path.clone();
                        if tx
                            .send(Arrival {
                                path: path2,
                                held,
                                go,
                            })
                            .is_err()
                        {
                            return;
                        }
                        let _ = wait.recv();
                        now.fetch_sub(1, SeqCst);
                        let conditional = crate::text(&head)
                            .to_ascii_lowercase()
                            .contains("\r\nif-none-match:");
                        let answer = match conditional && !fields.is_empty() {
                            true => format!("HTTP/1.1 304 Not Modified\r\n{fields}\r\n"),
                            false => format!(
                                "HTTP/1.1 200 OK\r\n{fields}Content-Length: {}\r\n\r\n{path}",
                                path.len()
                            ),
                        };
                        if std::io::Write::write_all(&mut s, answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Gate {
            addr,
            arrived,
            peak,
        }
    }

    /// The next request to arrive.
    pub fn next(&self) -> Arrival {
        self.arrived
            .recv_timeout(crate::strict::READY)
            .expect("a request reaches the origin")
    }
}
