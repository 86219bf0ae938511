//! Per-worker pools of idle keep-alive upstream connections, one per server.
//!
//! Invariants:
//! - LIFO: the most recently used connection is reused first (it is the least likely to have
//!   been closed by the origin), so the bottom of the stack is always the oldest.
//! - A connection idle longer than the group's `keepalive_timeout` is never handed out; a
//!   sweeper (see `worker.rs`) also closes them so idle sockets do not linger.
//! - A connection that served `keepalive_requests` requests is closed instead of pooled.
//! - A connection idle for a while (`check_after`: half the idle timeout, at most 1 s) is
//!   checked before reuse with one non-blocking peek (TLS: a non-blocking read given to the
//!   session, see `Stream::still_open`): origins close idle connections on their
//!   own timers (Apache after 5 s), and a request that cannot be retried (a POST, a streamed
//!   body) must not be sent into a closed one. nginx notices the same closes through the read
//!   event it keeps on idle connections. Connections reused sooner (every busy one) cost
//!   nothing extra.
//! - A pooled connection the origin closed unnoticed (just now) is detected when used: the
//!   caller retries the request on a fresh connection where that is safe (see `exchange.rs`),
//!   never counting it as a server failure.

use crate::config::UpstreamGroup;
use shared::stream::Stream;
use std::time::{Duration, Instant};

/// An upstream connection and how many requests it carried.
pub struct Upstream {
    pub stream: Stream,
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
    /// Connections idle this long are peeked at before reuse.
    check_after: Duration,
    max_requests: u64,
}

/// The longest a pooled connection is reused without checking that the origin kept it open.
const CHECK_AFTER_MAX: Duration = Duration::from_secs(1);

impl ServerPool {
    pub fn new(group: &UpstreamGroup) -> Self {
        ServerPool {
            idle: Vec::with_capacity(group.keepalive.min(1024)),
            cap: group.keepalive,
            timeout: group.keepalive_timeout,
            check_after: (group.keepalive_timeout / 2).min(CHECK_AFTER_MAX),
            max_requests: group.keepalive_requests.max(1),
        }
    }

    /// The most recently pooled live connection, if any.
    pub fn take(&mut self, now: Instant) -> Option<Upstream> {
        while let Some(mut idle) = self.idle.pop() {
            let age = now.saturating_duration_since(idle.since);
            if age >= self.timeout {
                // Everything below is older still.
                self.idle.clear();
                return None;
            }
            if age >= self.check_after && !idle.up.stream.still_open() {
                continue;
            }
            let mut up = idle.up;
            up.reused = true;
            return Some(up);
        }
        None
    }

    /// Keep `up` for reuse, unless it has served its quota or pooling is off. When full, the
    /// oldest idle connection makes room.
    pub fn put(&mut self, mut up: Upstream, now: Instant) {
        if self.cap == 0 || up.requests >= self.max_requests {
            return;
        }
        // A plain connection that will be read again is read through a multishot receive
        // from now on (a TLS one is checked with a raw read, which the receive would hide
        // bytes from).
        if !up.stream.is_tls() {
            up.stream.multishot_recv();
        }
        if self.idle.len() >= self.cap {
            self.idle.remove(0);
        }
        self.idle.push(Idle { up, since: now });
    }

    /// Idle connections pooled now.
    pub fn idle(&self) -> usize {
        self.idle.len()
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
