//! Per-worker pools of idle keep-alive upstream connections, one per server.
//!
//! Invariants:
//! - LIFO: the most recently used connection is reused first (it is the least likely to have
//!   been closed by the origin), so the bottom of the stack is always the oldest.
//! - A connection idle longer than the group's `keepalive_timeout` is never handed out; a
//!   sweeper (`lifecycle::sweep_pools`) also closes them so idle sockets do not linger.
//! - A connection that served `keepalive_requests` requests is closed instead of pooled.
//! - `keepalive` bounds the idle connections kept at rest, not within a burst: a connection
//!   given back while the pool already holds that many is kept too, and the sweeper closes the
//!   surplus (oldest first) once it has been idle for `SURPLUS_IDLE`. A worker reaps
//!   completions in batches: one pass gives back the connections of many responses and the
//!   next takes as many for the requests that follow. Closing all but `keepalive` of them in
//!   between made each following request connect again (2,000 busy clients on one worker, 64
//!   kept: half of the requests paid a connect and a TIME_WAIT socket). No more connections
//!   exist than requests were in flight at once (a connection is only opened when the pool is
//!   empty), and a burst's extra ones go within a few seconds of it (nginx closes the least
//!   recently used at once; HAProxy keeps idle connections until its `pool-purge-delay`).
//! - Every plain connection is watched while pooled, at no cost: where the worker reads through
//!   multishot receives (io_uring), `put` makes sure the connection's receive is armed, so
//!   whatever the origin sends while it is idle (stray bytes, such as a second response nobody
//!   asked for, or a FIN) lands in the receive's queue, and `take` drops a connection whose
//!   queue is not empty (`TcpStream::multishot_queued`: a look at a queue in memory, no system
//!   call). Such bytes must never be read as the next client's response. nginx notices the
//!   same through the read event it keeps on idle connections.
//! - A connection no receive watches (the epoll driver, `multishot = false`, TLS upstreams,
//!   one whose bodies are spliced, one whose receive could not be armed or was ended by the
//!   kernel because the ring was short of buffers, one whose receive `put` armed just now and
//!   the worker has not submitted yet: `TcpStream::multishot_armed`) is looked at every time
//!   it is taken, with one non-blocking peek (TLS: the session must hold nothing, not even
//!   part of a record, and what waits in the socket is read and given to it, see
//!   `Stream::still_open`): one system call per reuse, where a look only now and then let a
//!   second response nobody asked for become the next client's answer. A watched one
//!   idle for a while (`check_after`: half the idle timeout, at most the group's
//!   `keepalive_check`, 1 s by default) is peeked at too: origins close idle connections on
//!   their own timers (Apache after 5 s), and a request that cannot be retried (a POST, a
//!   streamed body) must not be sent into a closed one.
//! - A pooled connection the origin closed unnoticed (just now) is detected when used: the
//!   caller retries the request on a fresh connection where that is safe (see `exchange.rs`),
//!   never counting it as a server failure.

use crate::config::UpstreamGroup;
use shared::stream::Stream;
use std::collections::VecDeque;
use std::future::Future;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::{Duration, Instant};

/// How long a connection beyond `keepalive` may stay idle before the sweeper closes it.
pub const SURPLUS_IDLE: Duration = Duration::from_secs(1);

/// An upstream connection and how many requests it carried.
pub struct Upstream {
    pub stream: Stream,
    pub requests: u64,
    /// Taken from the pool (so a failure before the response may just mean it went stale).
    pub reused: bool,
    /// Its last response body was spliced (`splice.rs`): it stays out of multishot receives,
    /// which would take the next body into the buffer ring, and its next head is read small.
    pub splices: bool,
    /// Its socket was made non-blocking (for splice: `shared::stream::ensure_nonblocking`).
    pub nonblocking: bool,
}

struct Idle {
    up: Upstream,
    since: Instant,
    /// No multishot receive is armed on it: what arrived is in the socket (or a TLS
    /// session), and only a peek sees it.
    unwatched: bool,
}

/// Idle connections to one server.
pub struct ServerPool {
    /// Oldest at the front (evicted and swept from there), newest at the back (taken first):
    /// both ends O(1), so a pool sized for thousands of connections costs no shifting.
    idle: VecDeque<Idle>,
    cap: usize,
    timeout: Duration,
    /// Connections idle this long are peeked at before reuse.
    check_after: Duration,
    max_requests: u64,
}

impl ServerPool {
    pub fn new(group: &UpstreamGroup) -> Self {
        ServerPool {
            idle: VecDeque::with_capacity(group.keepalive.min(1024)),
            cap: group.keepalive,
            timeout: group.keepalive_timeout,
            check_after: (group.keepalive_timeout / 2).min(group.keepalive_check),
            max_requests: group.keepalive_requests.max(1),
        }
    }

    /// The most recently pooled live connection, if any.
    pub fn take(&mut self, now: Instant) -> Option<Upstream> {
        while let Some(mut idle) = self.idle.pop_back() {
            let age = now.saturating_duration_since(idle.since);
            if age >= self.timeout {
                // Everything below is older still.
                self.idle.clear();
                return None;
            }
            // Costs no system call: a look at the receive's queue.
            if stray_arrived(&idle.up.stream) {
                continue;
            }
            // Watched only while its receive stays armed: one the kernel ended (the ring ran
            // out of buffers) leaves what arrives since in the socket.
            let watched = !idle.unwatched && idle.up.stream.multishot_armed();
            if (age >= self.check_after || !watched) && !idle.up.stream.still_open() {
                continue;
            }
            let mut up = idle.up;
            up.reused = true;
            return Some(up);
        }
        None
    }

    /// Keep `up` for reuse, unless it has served its quota or pooling is off. Beyond `cap`
    /// idle connections it is kept too, until `sweep` finds the surplus idle.
    pub fn put(&mut self, mut up: Upstream, now: Instant) {
        if self.cap == 0 || up.requests >= self.max_requests {
            return;
        }
        // A plain connection that will be read again is read through a multishot receive
        // from now on, where the worker has them (a TLS one is checked with a raw read, which
        // the receive would hide bytes from; one that splices is read one-shot). Any other is
        // peeked at when taken.
        let mut unwatched = true;
        if !up.splices && !up.stream.is_tls() && up.stream.multishot_recv() {
            // A receive armed only now is queued for submission, not in the kernel: bytes
            // that came after the response's last read stay in the socket until the worker
            // next enters it, so a take before that (a pipelined request) peeks.
            let was_armed = up.stream.multishot_armed();
            match watch(&mut up.stream) {
                Watch::Armed => unwatched = !was_armed,
                // The origin already sent more than its response, or ended: not reusable.
                Watch::Arrived => return,
                Watch::Unarmed => {}
            }
        }
        self.idle.push_back(Idle {
            up,
            since: now,
            unwatched,
        });
    }

    /// Idle connections pooled now.
    pub fn idle(&self) -> usize {
        self.idle.len()
    }

    /// Close connections idle for longer than the timeout, and those beyond `cap` idle for
    /// `SURPLUS_IDLE` (the oldest first: the front is the longest idle).
    pub fn sweep(&mut self, now: Instant) {
        let surplus = self.idle.len().saturating_sub(self.cap);
        let closing = self
            .idle
            .iter()
            .enumerate()
            .take_while(|(n, i)| {
                let idle = now.saturating_duration_since(i.since);
                idle >= self.timeout || (*n < surplus && idle >= SURPLUS_IDLE)
            })
            .count();
        self.idle.drain(..closing);
    }
}

/// Whether anything (bytes, the end of the stream, an error) arrived on an idle plain
/// connection and waits in its multishot receive's queue. No system call: the queue is the
/// worker's memory, filled when the worker reaped the receive's completions. (A TLS stream's
/// TCP socket has no such receive: always false.)
fn stray_arrived(stream: &Stream) -> bool {
    matches!(stream, Stream::Plain(s) if s.multishot_queued())
}

/// What watching an idle connection found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// Its multishot receive is armed: what arrives from now on is queued (`stray_arrived`).
    Armed,
    /// Something already arrived.
    Arrived,
    /// No receive could be armed (the worker's buffer ring is low, or the kernel ran out of
    /// buffers for it): what arrives stays in the socket.
    Unarmed,
}

/// Make sure the multishot receive of `stream` (a plain connection reading through one) is
/// armed while it sits in the pool: polled once, its readiness future arms the receive if it
/// is not (an SQE submitted with the worker's next batch, no system call of its own; a
/// connection's receive is armed by its first read through it and stays armed, so this is
/// nothing more than a look once it was) and leaves a waker that does nothing (nobody waits
/// on a pooled connection: `take` looks at the queue). Dropped unfinished, the future loses
/// nothing (vendored monoio's `TcpStream::multishot_ready`).
fn watch(stream: &mut Stream) -> Watch {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let ready = std::pin::pin!(stream.multishot_ready());
    match ready.poll(&mut cx) {
        Poll::Pending => Watch::Armed,
        Poll::Ready(true) => Watch::Arrived,
        Poll::Ready(false) => Watch::Unarmed,
    }
}

/// A waker that does nothing (`Waker::noop`, stable only from Rust 1.85).
fn noop_waker() -> Waker {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    fn clone(_: *const ()) -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    // SAFETY: the vtable's functions never touch the data pointer (null) and do nothing, so
    // every call RawWaker's contract allows is sound, from any thread.
    unsafe { Waker::from_raw(clone(std::ptr::null())) }
}

#[cfg(test)]
mod tests;
