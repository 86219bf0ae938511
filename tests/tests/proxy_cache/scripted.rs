//! An origin that answers its n-th request (over all its connections, keep-alive) with the
//! n-th scripted answer, exactly as written, and can hold an answer until the test releases
//! it: for what the query-driven origin cannot say (a 206 for the bytes asked, fields that
//! change between two answers of one URL, an answer held while the cache goes on).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};

/// One scripted answer: its bytes, and the gates it waits on before the byte at each one's
/// offset (none: all at once).
pub struct Answer {
    raw: Vec<u8>,
    gates: Vec<(usize, Receiver<()>)>,
}

/// `status` with the fields `fields` (each `Name: value`) and `body` (Content-Length added).
pub fn answer(status: &str, fields: &[&str], body: &[u8]) -> Answer {
    let mut raw = format!("HTTP/1.1 {status}\r\n");
    for f in fields {
        raw.push_str(f);
        raw.push_str("\r\n");
    }
    if !status.starts_with("304") {
        raw.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    raw.push_str("\r\n");
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    raw_answer(raw)
}

/// An answer of exactly these bytes (framing included).
pub fn raw_answer(raw: Vec<u8>) -> Answer {
    Answer {
        raw,
        gates: Vec::new(),
    }
}

impl Answer {
    /// Held until the returned sender sends (or is dropped).
    pub fn held(self) -> (Answer, Sender<()>) {
        self.held_at(0)
    }

    /// Its first `at` bytes sent, the rest held until the returned sender sends (or is
    /// dropped); gates are passed in the order of their offsets.
    pub fn held_at(mut self, at: usize) -> (Answer, Sender<()>) {
        let (tx, rx) = std::sync::mpsc::channel();
        self.gates.push((at.min(self.raw.len()), rx));
        self.gates.sort_by_key(|g| g.0);
        (self, tx)
    }
}

/// The origin; its requests' heads are kept, in order.
pub struct Scripted {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
    count: Arc<AtomicU64>,
}

impl Scripted {
    pub fn start(answers: Vec<Answer>) -> Scripted {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicU64::new(0));
        let answers: Arc<Mutex<std::collections::VecDeque<Answer>>> =
            Arc::new(Mutex::new(answers.into()));
        let (h, n) = (heads.clone(), count.clone());
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let (h, n, a) = (h.clone(), n.clone(), answers.clone());
                std::thread::spawn(move || serve(s, &h, &n, &a));
            }
        });
        Scripted { addr, heads, count }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests whose head arrived.
    pub fn requests(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// The head of request `i` (from 0), lowercased.
    pub fn head(&self, i: usize) -> String {
        self.heads.lock().unwrap()[i].to_ascii_lowercase()
    }
}

fn serve(
    mut s: TcpStream,
    heads: &Mutex<Vec<String>>,
    count: &AtomicU64,
    answers: &Mutex<std::collections::VecDeque<Answer>>,
) {
    let mut buf = Vec::new();
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head: Vec<u8> = buf.drain(..end).collect();
        heads
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(&head).into_owned());
        count.fetch_add(1, Ordering::SeqCst);
        let next = answers.lock().unwrap().pop_front();
        let Some(a) = next else {
            let _ = s.write_all(b"HTTP/1.1 500 Unscripted\r\nContent-Length: 0\r\n\r\n");
            continue;
        };
        let mut sent = 0;
        for (at, gate) in a.gates {
            if s.write_all(&a.raw[sent..at]).is_err() {
                return;
            }
            sent = at;
            let _ = gate.recv();
        }
        if s.write_all(&a.raw[sent..]).is_err() {
            return;
        }
    }
}
