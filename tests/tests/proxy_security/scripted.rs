//! A scripted origin over raw sockets, for answers the built-in origin never gives (a 101
//! that picks h2c, a 204 with a length, a length past 2^63-1): the n-th request head it reads,
//! on whichever connection, gets the n-th reply of its script. Every head is recorded byte
//! for byte as it arrived, so a test can assert exactly what the proxy sent upstream.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use tests::raw::WAIT;

/// The script and what arrived, shared with the connection threads.
#[derive(Default)]
struct State {
    replies: VecDeque<Vec<u8>>,
    heads: Vec<Vec<u8>>,
}

pub struct Scripted {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl Scripted {
    /// Listen on 127.0.0.1:0 and answer with `replies`, in order. A head that arrives after
    /// the script ran out is recorded and its connection closed.
    pub fn start(replies: Vec<Vec<u8>>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scripted origin");
        let addr = listener.local_addr().expect("its address");
        let state = Arc::new(Mutex::new(State {
            replies: replies.into(),
            heads: Vec::new(),
        }));
        let shared = state.clone();
        // The accept loop ends with the test process: it holds nothing a test waits for.
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let shared = shared.clone();
                std::thread::spawn(move || serve(conn, &shared));
            }
        });
        Scripted { addr, state }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request head received so far (final CRLFCRLF included), in arrival order.
    pub fn heads(&self) -> Vec<Vec<u8>> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .heads
            .clone()
    }
}

/// One connection: heads in, scripted replies out, until the peer closes, the script ends or
/// nothing arrives for [`WAIT`] (the proxy holds a pooled connection open; a bound keeps a
/// failing test from leaving the thread behind forever).
fn serve(mut conn: TcpStream, state: &Mutex<State>) {
    conn.set_read_timeout(Some(WAIT)).expect("read timeout");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head: Vec<u8> = buf.drain(..end + 4).collect();
            let reply = {
                let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
                s.heads.push(head);
                s.replies.pop_front()
            };
            match reply {
                Some(r) if conn.write_all(&r).is_ok() => {}
                _ => return,
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
