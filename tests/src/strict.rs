//! Strict helpers for the proxy tests of promised behaviours (drain, smuggling, health,
//! 100-continue, connection cap, rejected bodies).
//!
//! Strict means: a connection counts as closed only on EOF or a reset, never on a read
//! timeout; every response is parsed and checked, never discarded; readiness is a counter
//! reaching a value, polled with a generous deadline, never a sleep of a guessed length.

use shared::origin::Origin;
use std::net::SocketAddr;
use std::time::Duration;

/// A one-worker proxy started through its command line (`--listen 127.0.0.1:0 --no-pin`,
/// upstreams `ups`, then `extra`): [`crate::start_proxy`].
pub fn proxy(ups: &[SocketAddr], extra: &[&str]) -> (proxy::Running, SocketAddr) {
    crate::start_proxy(ups, extra)
}

// Re-exported: one implementation in `crate::raw`, the names the strict tests use.
#[allow(unused_imports)]
pub use crate::capturing_origin;
#[allow(unused_imports)]
pub use crate::raw::{assert_closed, assert_open_and_silent, response, show};

/// Wait until `cond` holds, polling; panic with `what` after `limit`. For counters that
/// are readiness events (a request reached the origin, a connection was accepted).
pub fn wait_for(limit: Duration, what: &str, cond: impl FnMut() -> bool) {
    assert!(
        crate::eventually(limit, cond),
        "timed out waiting for {what}"
    );
}

/// Patience for readiness on a loaded machine.
pub const READY: Duration = Duration::from_secs(20);

/// Captured raw requests as text, for messages.
pub fn captured_text(o: &Origin) -> Vec<String> {
    o.captured()
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect()
}

/// A minimal keep-alive HTTP server on `l` for body-less requests: each head gets
/// `200` with body `ok`. Returns the count of requests answered. Runs until the process
/// ends (threads blocked in accept are not joined).
pub fn serve_ok(l: std::net::TcpListener) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    let served = std::sync::Arc::new(AtomicU64::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { return };
            let count = count.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        count.fetch_add(1, Ordering::SeqCst);
                        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    served
}
