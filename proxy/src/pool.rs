//! Per-worker pools of idle keep-alive upstream connections, one per server.
//!
//! Invariants:
//! - LIFO: the most recently used connection is reused first (it is the least likely to have
//!   been closed by the origin), so the bottom of the stack is always the oldest.
//! - A connection idle longer than the group's `keepalive_timeout` is never handed out; a
//!   sweeper (see `worker.rs`) also closes them so idle sockets do not linger.
//! - A connection that served `keepalive_requests` requests is closed instead of pooled.
//! - A pooled connection the origin closed is only detected when used: the caller retries the
//!   request on a fresh connection (see `exchange.rs`), never counting it as a server failure.

use crate::config::UpstreamGroup;
use monoio::net::TcpStream;
use std::time::{Duration, Instant};

/// An upstream connection and how many requests it carried.
pub struct Upstream {
    pub stream: TcpStream,
    pub requests: u64,
    /// Taken from the pool (so a failure before the response may just mean it went stale).
    pub reused: bool,
}

struct Idle {
    up: Upstream,
    since: Instant,
}

/// Idle connections to one server.
pub struct ServerPool {
    idle: Vec<Idle>,
    cap: usize,
    timeout: Duration,
    max_requests: u64,
}

impl ServerPool {
    pub fn new(group: &UpstreamGroup) -> Self {
        ServerPool {
            idle: Vec::with_capacity(group.keepalive.min(1024)),
            cap: group.keepalive,
            timeout: group.keepalive_timeout,
            max_requests: group.keepalive_requests.max(1),
        }
    }

    /// The most recently pooled live connection, if any.
    pub fn take(&mut self, now: Instant) -> Option<Upstream> {
        let idle = self.idle.pop()?;
        if now.saturating_duration_since(idle.since) >= self.timeout {
            // Everything below is older still.
            self.idle.clear();
            return None;
        }
        let mut up = idle.up;
        up.reused = true;
        Some(up)
    }

    /// Keep `up` for reuse, unless it has served its quota or pooling is off. When full, the
    /// oldest idle connection makes room.
    pub fn put(&mut self, up: Upstream, now: Instant) {
        if self.cap == 0 || up.requests >= self.max_requests {
            return;
        }
        if self.idle.len() >= self.cap {
            self.idle.remove(0);
        }
        self.idle.push(Idle { up, since: now });
    }

    /// Close connections idle for longer than the timeout.
    pub fn sweep(&mut self, now: Instant) {
        let expired = self
            .idle
            .iter()
            .take_while(|i| now.saturating_duration_since(i.since) >= self.timeout)
            .count();
        self.idle.drain(..expired);
    }
}
