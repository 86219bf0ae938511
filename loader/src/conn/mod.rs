//! One connection slot's request loop: connect, write requests, read responses with the
//! shared codec, record, repeat; reconnect when the connection ends.
//!
//! A slot is one of the `-c` connections. It runs [`drive`] inside [`Guarded`], which a
//! worker-wide [`monitor`] cuts short when the oldest attempt in flight passes `--timeout` or
//! when the drain at the end of the run is over. Every attempt is an [`Entry`] in the slot's
//! in-flight queue from the moment its ticket is taken until it is popped and counted, exactly
//! once: completed, or failed (connect, write, read, parse, timeout, unanswered at the end).
//! Popping and counting never straddle an `.await`, so dropping `drive` at any await point
//! (timeout, end) leaves the queue exact.
//!
//! The end of a run (deadline or Ctrl-C) stops the tickets; `drive` then finishes what is in
//! flight and returns when nothing is (the drain), or is cut when the drain time is over.
//!
//! `drive` runs in rounds, one step each: fill the pipe (tickets up to the depth), ensure a
//! connection, write the round's batch, read responses. A connection that ends is one
//! `ConnEnd` value, and `Slot::fail_queued` counts what is still queued from it, in one
//! place. Responses are read with the shared [`ResponseReader`].
//!
//! A connection the server ends cleanly before taking every request sent on it (a response
//! saying `Connection: close` with requests pipelined behind it; a reused keep-alive connection
//! closed before any byte of the answer) leaves those requests queued: they are sent again on a
//! new connection (RFC 9112 9.3.2; the second case only for idempotent methods, 9.3.1) and
//! counted as retried, not failed, so Complete plus the failures equal the server's log.
//!
//! Per request in steady state (keep-alive): no allocation (the read and write buffers and
//! the queue are reused; the request bytes are copied into the write buffer), one
//! `Instant::now()` after each read (the next request's start is the previous response's
//! end), no timer, and no extra future polled per wake-up: the timeout and the end are a
//! `Cell` checked before polling `drive` (one timer per worker, in the monitor, checks every
//! slot's deadline a few times per timeout period).

mod receive;

use crate::pace::pause_until;
use crate::worker::{micros, Engine, Entry, Fail};

use monoio::io::AsyncWriteRentExt;
use receive::Received;
use shared::stream::Stream;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The granularity of monoio's timer wheel.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// State of one slot that outlives any one `drive` (dropped on timeout or at the end).
pub struct Slot {
    /// Global connection index (0 .. -c).
    pub index: usize,
    pub inflight: RefCell<VecDeque<Entry>>,
    /// The oldest in-flight attempt's timeout; `None` when idle.
    pub deadline: Cell<Option<Instant>>,
    /// The in-flight attempts are waiting for a connect (a timeout is a connect failure).
    pub connecting: Cell<bool>,
    /// Of that connect, the TLS handshake (a timeout in it is said once, with a hint).
    pub handshaking: Cell<bool>,
    /// Next send times (--rate).
    pub schedule: Cell<Option<crate::plan::Schedule>>,
    /// `--warmup`: the schedule has not yet started over at the measured run's start.
    pub warm_schedule: Cell<bool>,
    /// The last time taken: the start of the next closed-loop request.
    pub now: Cell<Instant>,
    /// Set by the monitor to cut `drive` short.
    pub cut: Cell<Option<Cut>>,
    /// Set by [`Slot::nudge`]: a wait for a send time ends early.
    nudged: Cell<bool>,
    /// A TLS connection whose handshake is done on the client's side, not yet counted as
    /// opened: under TLS 1.3 the server checks the client's side (a client certificate) after
    /// the client's handshake has ended, and its fatal alert comes at the first read, which
    /// makes it a connect failure (`receive::Received::arrived`). Counted at that read when
    /// no alert came, or when the connection ends without one ([`Slot::confirm_open`]).
    opened: Cell<Option<Opened>>,
    /// Bytes read on the current connection that no completed response has accounted for
    /// yet: at the connection's end they go to Total transferred (a failed response's bytes,
    /// bytes nobody asked for).
    unaccounted: Cell<u64>,
    /// The slot task's waker, for the monitor.
    waker: RefCell<Option<Waker>>,
}

/// Why the monitor cut a slot's `drive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The oldest attempt in flight passed `--timeout`: the connection is dropped.
    Timeout,
    /// The drain is over (or the slot had nothing in flight when sending stopped): what is
    /// still in flight is unanswered.
    End,
}

impl Slot {
    pub fn new(
        index: usize,
        depth: usize,
        now: Instant,
        schedule: Option<crate::plan::Schedule>,
    ) -> Slot {
        Slot {
            index,
            inflight: RefCell::new(VecDeque::with_capacity(depth)),
            deadline: Cell::new(None),
            connecting: Cell::new(false),
            handshaking: Cell::new(false),
            schedule: Cell::new(schedule),
            warm_schedule: Cell::new(false),
            now: Cell::new(now),
            cut: Cell::new(None),
            nudged: Cell::new(false),
            opened: Cell::new(None),
            unaccounted: Cell::new(0),
            waker: RefCell::new(None),
        }
    }

    /// Cut the slot's `drive` (from the monitor or the end of the run) and wake its task.
    pub fn cut(&self, why: Cut) {
        self.cut.set(Some(why));
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// End a wait for a send time now (the run's state changed: `-n` spent, the warm-up
    /// over): the slot looks at the run again instead of sleeping until a send that will not
    /// come. Nothing happens to what is in flight.
    pub fn nudge(&self) {
        self.nudged.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// Arm the timeout for the oldest attempt in flight.
    #[inline]
    fn rearm(&self, timeout: Duration) {
        let d = self.inflight.borrow().front().map(|e| e.start + timeout);
        self.deadline.set(d);
    }

    /// Measured attempts in flight (ticket taken, not yet counted).
    pub fn measured_in_flight(&self) -> u64 {
        self.inflight.borrow().iter().filter(|e| e.measured).count() as u64
    }

    /// Pop every in-flight attempt and count it as `why`.
    pub fn fail_all(&self, w: &Engine, why: Fail) {
        self.confirm_open(w);
        self.account_bytes(w, None);
        let mut q = self.inflight.borrow_mut();
        while let Some(e) = q.pop_front() {
            w.fail(&e, why);
        }
        self.deadline.set(None);
        self.connecting.set(false);
        self.handshaking.set(false);
    }

    /// The connection's handshake stands (no alert came for it): count it as opened.
    /// Returns whether it was waiting to be.
    fn confirm_open(&self, w: &Engine) -> bool {
        let Some(o) = self.opened.take() else {
            return false;
        };
        w.connected(o.connect_us, Some(o.tls));
        true
    }

    /// Pop the `n` oldest in-flight attempts and count them as `why`.
    fn fail_front(&self, w: &Engine, n: usize, why: Fail) {
        let mut q = self.inflight.borrow_mut();
        for _ in 0..n {
            let Some(e) = q.pop_front() else { break };
            w.fail(&e, why);
        }
        drop(q);
        self.rearm(w.timeout);
    }

    /// The connection ends: the bytes read on it that no completed response counted go to
    /// the front attempt's URL (the response that failed), else to `url` (the connection's).
    fn account_bytes(&self, w: &Engine, url: Option<usize>) {
        let n = self.unaccounted.replace(0);
        if n == 0 {
            return;
        }
        let front = self.inflight.borrow().front().map(|e| (e.url, e.measured));
        if let Some((url, measured)) = front.or(url.map(|u| (u, w.measuring()))) {
            w.received_unanswered(url, n, measured);
        }
    }
}

/// `drive` (or any slot future), cut short by the monitor: `None` when it completed, else why
/// it was cut. The check is a `Cell` read per poll; the waker is stored only when it changes.
pub struct Guarded<'a, F> {
    pub fut: Pin<&'a mut F>,
    pub slot: &'a Slot,
}

impl<F: Future<Output = ()>> Future for Guarded<'_, F> {
    type Output = Option<Cut>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Cut>> {
        if let Some(why) = self.slot.cut.get() {
            return Poll::Ready(Some(why));
        }
        {
            let mut w = self.slot.waker.borrow_mut();
            match &*w {
                Some(old) if old.will_wake(cx.waker()) => {}
                _ => *w = Some(cx.waker().clone()),
            }
        }
        self.fut.as_mut().poll(cx).map(|()| None)
    }
}

/// The worker's one timer: every `tick`, cut the slots whose oldest attempt passed its
/// deadline; when `end` fires, cut them all. Ends with the run.
pub async fn monitor(
    slots: Rc<Vec<Rc<Slot>>>,
    end: shared::shutdown::Shutdown,
    tick: Duration,
    spin: bool,
) {
    loop {
        let ended = monoio::select! {
            _ = pause_until(Instant::now() + tick, spin) => false,
            _ = end.wait() => true,
        };
        if ended {
            for s in slots.iter() {
                s.cut(Cut::End);
            }
            return;
        }
        let now = Instant::now();
        for s in slots.iter() {
            if s.deadline.get().is_some_and(|d| now >= d) && s.cut.get().is_none() {
                s.cut(Cut::Timeout);
            }
        }
    }
}

/// How often the monitor checks the deadlines: a twentieth of the timeout, 1 ms .. 100 ms.
pub fn monitor_tick(timeout: Duration) -> Duration {
    (timeout / 20).clamp(Duration::from_millis(1), Duration::from_millis(100))
}

/// An open connection.
struct Open {
    stream: Stream,
    /// The URL it was opened for (it serves every URL of the same server).
    url: usize,
    /// The server it is connected to.
    dst: std::net::SocketAddr,
    /// Connect time, TLS handshake included, charged to the first response (ab's "Connect",
    /// which ab measures the same way).
    connect_us: u64,
    /// Responses completed on it: a connection that answered before is a reused one.
    answered: u64,
}

/// A TLS connection's connect figures, counted once its handshake stands (`Slot::opened`).
#[derive(Debug, Clone, Copy)]
struct Opened {
    connect_us: u64,
    tls: (u64, crate::tls::HandshakeKind),
}

/// Why a connection ends, which decides how the attempts still queued on it are counted
/// or sent again (in one place: `Slot::fail_queued`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnEnd {
    /// The connect failed: every queued attempt is a connect failure.
    ConnectFailed,
    /// The last `batch` requests failed to go out; the older ones lose their connection
    /// (`malformed`: the front one's answer, read after the failed write, was a parse
    /// failure).
    WriteFailed { batch: usize, malformed: bool },
    /// The front response was malformed: a parse failure; the rest lose their connection.
    Malformed,
    /// EOF or a read error in the middle of an answer, or before any answer on a new
    /// connection: what is still queued will not be answered.
    Closed,
    /// The last response closed the connection (`Connection: close`, HTTP/1.0, a
    /// close-delimited body, or `--close`): the server takes no request after it (RFC 9112
    /// 9.6), so what is queued is sent again on a new connection.
    Announced,
    /// A reused connection closed (EOF, reset, or a failed write) before any byte of the
    /// front's answer, as a keep-alive timeout racing the next request does: the idempotent
    /// requests queued are sent again (RFC 9112 9.3.1), the others fail.
    Unanswered,
    /// Bytes after a complete response that no request asked for: a protocol error.
    Stray,
}

impl Slot {
    /// Pop every in-flight attempt and count it as `end` says, or keep it, in order, to be
    /// sent again on a new connection.
    fn fail_queued(&self, w: &Engine, end: ConnEnd) {
        let mut q = self.inflight.borrow_mut();
        let n = q.len();
        for i in 0..n {
            let Some(mut e) = q.pop_front() else { break };
            let retry = match end {
                ConnEnd::Announced => true,
                ConnEnd::Unanswered => w.idempotent[e.url],
                _ => false,
            };
            if retry {
                e.opened = false;
                w.retried(&e);
                q.push_back(e);
                continue;
            }
            let why = match end {
                ConnEnd::ConnectFailed => Fail::Connect,
                ConnEnd::WriteFailed {
                    malformed: true, ..
                }
                | ConnEnd::Malformed
                    if i == 0 =>
                {
                    Fail::Parse
                }
                ConnEnd::WriteFailed { batch, .. } if i >= n.saturating_sub(batch) => Fail::Write,
                _ => Fail::Read,
            };
            w.fail(&e, why);
        }
        if q.is_empty() {
            self.deadline.set(None);
        }
        drop(q);
        self.connecting.set(false);
    }
}

/// Run the slot's requests until no ticket is left and nothing is in flight. Dropped (at an
/// await point) on timeout or at the end of the run; the caller then counts what is in flight.
pub async fn drive(w: &Engine, slot: &Slot) {
    let mut s = Session {
        w,
        slot,
        conn: None,
        rx: Received::new(w.read_buf, slot.now.get()),
        wbuf: Vec::with_capacity(w.max_request_len * w.depth),
    };
    loop {
        let batch = fill_pipe(w, slot).await;
        if slot.inflight.borrow().is_empty() {
            slot.confirm_open(w);
            return; // no ticket left and nothing in flight
        }
        slot.rearm(w.timeout);
        let round = match s.ensure_connected(batch).await {
            Ok(batch) => s.exchange(batch).await,
            Err(end) => Err(end),
        };
        if let Err(end) = round {
            s.end(end);
            if end == ConnEnd::ConnectFailed {
                // A refused connect returns at once: don't spin on a dead server.
                pause_until(Instant::now() + Duration::from_millis(1), w.spin).await;
                slot.now.set(Instant::now());
            }
        }
    }
}

/// Step 1: new attempts up to the depth (one without --pipeline). With --rate, waits for the
/// first one's send time when nothing is in flight. Returns how many were queued.
async fn fill_pipe(w: &Engine, slot: &Slot) -> usize {
    let queued = slot.inflight.borrow().len();
    let mut batch = 0usize;
    while queued + batch < w.depth {
        if w.is_stopped() {
            break; // the run is ending: no wait for a send time that will not come
        }
        if w.settling() {
            // The warm-up's time is over and its last requests are in flight somewhere: the
            // measured run starts when they end.
            if queued + batch > 0 {
                break;
            }
            w.measuring_started().await;
            slot.now.set(Instant::now());
            continue;
        }
        let mut now = slot.now.get();
        let mut intended = now;
        // With --rate, how late a send that waited for its time went out.
        let mut late = None;
        if let Some(mut sched) = slot.schedule.get() {
            if slot.warm_schedule.get() && w.measuring() {
                // The measured run's schedule starts fresh at its start, every worker's.
                slot.warm_schedule.set(false);
                if let Some(at) = w.measure_started_at() {
                    sched.restart(at);
                }
                slot.schedule.set(Some(sched));
            }
            let due = sched.peek_on(w.ramp.as_ref());
            if w.stops_by(due) {
                if queued + batch > 0 {
                    break;
                }
                // Never sent: wait for the stop to cut this slot (or a nudge).
                wait_nudged(slot).await;
                continue;
            }
            if due > now {
                if queued + batch > 0 || w.quota_spent() {
                    // Send it after reading what is in flight; or `-n` is spent and nothing
                    // is left to wait for (the run ends with its last answer).
                    break;
                }
                let Some(woke) = wait_for(w, slot, due, now).await else {
                    continue; // nudged: the run's state changed while it waited
                };
                now = woke;
                slot.now.set(now);
                late = Some(micros(now.saturating_duration_since(due)));
            }
            if w.is_stopped() {
                break;
            }
            if w.settling() {
                continue; // the warm-up ended while this slot waited for its send time
            }
            // Latency runs from the scheduled time when the send is late (coordinated
            // omission corrected), from the actual send when it is early.
            intended = sched.next_due_on(w.ramp.as_ref()).min(now);
            slot.schedule.set(Some(sched));
        }
        let Some(ticket) = w.take_ticket() else {
            break;
        };
        if let (Some(us), true) = (late, ticket.measured) {
            w.sent_late(us);
        }
        slot.inflight.borrow_mut().push_back(Entry {
            url: ticket.url,
            measured: ticket.measured,
            intended,
            start: now,
            sent: now,
            opened: false,
        });
        batch += 1;
    }
    batch
}

/// Wait (with --rate, nothing in flight) for the send time `due`; returns the time then, or
/// `None` when [`Slot::nudge`] cut the wait short (the caller looks at the run again).
///
/// Sleeping: monoio's timer wheel ticks in milliseconds and fires up to a tick late, so wake
/// a tick early and send then (early rather than late: a late send is charged to the server
/// by the correction). What the thread's own wake-up adds on a busy or virtual machine is
/// still late: that is the send lateness reported. With `--spin`: poll the clock until `due`,
/// so the send goes out on time, give or take one turn of the runtime.
async fn wait_for(w: &Engine, slot: &Slot, due: Instant, now: Instant) -> Option<Instant> {
    // A nudge before this wait was for a state the caller has already looked at.
    slot.nudged.set(false);
    if w.spin {
        let pause = std::pin::pin!(pause_until(due, true));
        return Nudgeable { fut: pause, slot }.await.then(Instant::now);
    }
    match due.checked_sub(TIMER_TICK) {
        Some(early) if early > now => {
            let sleep = std::pin::pin!(monoio::time::sleep_until(early.into()));
            Nudgeable { fut: sleep, slot }.await.then(Instant::now)
        }
        _ => Some(now),
    }
}

/// Wait until [`Slot::nudge`] (or the slot's cut, which drops the wait).
async fn wait_nudged(slot: &Slot) {
    slot.nudged.set(false);
    let never = std::pin::pin!(std::future::pending::<()>());
    Nudgeable { fut: never, slot }.await;
}

/// A slot's wait for a send time, cut short by [`Slot::nudge`]: `true` when it ran out,
/// `false` when nudged. One `Cell` read per poll.
struct Nudgeable<'a, F> {
    fut: Pin<&'a mut F>,
    slot: &'a Slot,
}

impl<F: Future> Future for Nudgeable<'_, F> {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        if self.slot.nudged.replace(false) {
            return Poll::Ready(false);
        }
        self.fut.as_mut().poll(cx).map(|_| true)
    }
}

/// One `drive`'s connection and buffers.
struct Session<'a> {
    w: &'a Engine,
    slot: &'a Slot,
    conn: Option<Open>,
    rx: Received,
    wbuf: Vec<u8>,
}

impl Session<'_> {
    /// Step 2: a connection to the front attempt's server (--urls may name several; a
    /// connection serves one). Returns how many queued requests to write: this round's on a
    /// connection kept, every queued one on a new connection.
    async fn ensure_connected(&mut self, batch: usize) -> Result<usize, ConnEnd> {
        let (w, slot) = (self.w, self.slot);
        let mut url = slot.inflight.borrow().front().map_or(0, |e| e.url);
        if let Some(open) = &self.conn {
            if w.same_connection(open.url, url) {
                return Ok(batch);
            }
            // Requests written on it would go with it: counted now, never written again on
            // the next connection (which sent them twice and counted them once). `validate`
            // keeps pipelined URLs on one connection, so only a round's unwritten ones are
            // queued here.
            let written = slot.inflight.borrow().len() - batch;
            if written > 0 {
                slot.account_bytes(w, Some(open.url));
                slot.fail_front(w, written, Fail::Read);
            }
            self.close();
            self.rx.reset();
            url = match slot.inflight.borrow().front() {
                Some(e) => e.url,
                None => return Err(ConnEnd::Closed), // nothing left to send
            };
        }
        let t0 = slot.now.get();
        slot.connecting.set(true);
        let (dst, src) = w.connect_target(url);
        let res = shared::net::connect(dst, src).await;
        let mut tcp = match res {
            Ok(tcp) => tcp,
            Err(e) => {
                slot.connecting.set(false);
                w.log_first(Fail::Connect, format_args!("connect to {dst} failed: {e}"));
                return Err(ConnEnd::ConnectFailed);
            }
        };
        // Multishot receives for keep-alive connections; a connection per request would pay
        // a receive armed after its response and a cancel at its close.
        if !w.close {
            shared::runtime::multishot_recv(&mut tcp);
        }
        let t1 = Instant::now();
        let connect_us = micros(t1.saturating_duration_since(t0));
        // The handshake is part of the connect: a timeout in it is a connect failure.
        let (stream, tls, t2) = match w.tls_for(url) {
            None => (Stream::Plain(tcp), None, t1),
            Some((tls, name)) => match handshake(slot, tls, tcp, name).await {
                Ok((stream, kind)) => {
                    let t2 = Instant::now();
                    let us = micros(t2.saturating_duration_since(t1));
                    (stream, Some((us, kind)), t2)
                }
                Err(why) => {
                    slot.connecting.set(false);
                    let host = w.host(url);
                    w.log_first(
                        Fail::Connect,
                        format_args!("TLS handshake with {host} ({dst}) failed: {why}"),
                    );
                    return Err(ConnEnd::ConnectFailed);
                }
            },
        };
        slot.connecting.set(false);
        slot.now.set(t2);
        match tls {
            None => w.connected(connect_us, None),
            Some(tls) => slot.opened.set(Some(Opened { connect_us, tls })),
        }
        let mut q = slot.inflight.borrow_mut();
        if let Some(e) = q.front_mut() {
            e.opened = true;
        }
        for e in q.iter_mut() {
            e.sent = t2;
        }
        self.conn = Some(Open {
            stream,
            url,
            dst,
            connect_us: micros(t2.saturating_duration_since(t0)),
            answered: 0,
        });
        self.rx.reset();
        Ok(q.len())
    }

    /// Steps 3 and 4 on the open connection: write `batch` requests, then read responses.
    async fn exchange(&mut self, batch: usize) -> Result<(), ConnEnd> {
        let Some(open) = self.conn.as_mut() else {
            return Err(ConnEnd::Closed);
        };
        if batch > 0
            && write_batch(self.w, self.slot, open, &mut self.wbuf, batch)
                .await
                .is_err()
        {
            let end = self
                .rx
                .read_after_failed_write(self.w, self.slot, open)
                .await;
            return Err(match end {
                ConnEnd::Announced | ConnEnd::Unanswered | ConnEnd::ConnectFailed => end,
                ConnEnd::Malformed => ConnEnd::WriteFailed {
                    batch,
                    malformed: true,
                },
                _ => ConnEnd::WriteFailed {
                    batch,
                    malformed: false,
                },
            });
        }
        self.rx.read_responses(self.w, self.slot, open).await
    }

    /// The connection ends: count what is queued (or keep it to send again), close the
    /// connection, drop what was read.
    fn end(&mut self, end: ConnEnd) {
        if self.slot.confirm_open(self.w) {
            if let Some(open) = &self.conn {
                self.w.note_tls(open.url, &open.stream);
            }
        }
        let url = self.conn.as_ref().map(|o| o.url);
        if end == ConnEnd::Stray {
            self.w.protocol_error(url.unwrap_or(0));
        }
        self.slot.account_bytes(self.w, url);
        self.slot.fail_queued(self.w, end);
        self.close();
        self.rx.reset();
    }

    /// Close the connection now (TLS: close_notify first, when the socket takes it at once).
    /// Only between rounds, when no read or write of it is in flight: a `drive` cut at an
    /// await drops its connection instead.
    fn close(&mut self) {
        if let Some(open) = self.conn.take() {
            open.stream.close_now();
        }
    }
}

/// Step 3: this round's requests (the last `batch` queued) in one write.
async fn write_batch(
    w: &Engine,
    slot: &Slot,
    open: &mut Open,
    wbuf: &mut Vec<u8>,
    batch: usize,
) -> std::io::Result<()> {
    let mut buf = std::mem::take(wbuf);
    buf.clear();
    {
        let q = slot.inflight.borrow();
        for e in q.iter().skip(q.len() - batch) {
            buf.extend_from_slice(&w.requests[e.url]);
            w.sent(e);
        }
    }
    let (res, buf) = open.stream.write_all(buf).await;
    *wbuf = buf;
    res.map(|_| ())
}

/// `slot`'s TLS handshake on `tcp`, marked as such while it runs: a timeout there is told as
/// a handshake's (`run`).
async fn handshake(
    slot: &Slot,
    tls: &crate::tls::WorkerTls,
    tcp: monoio::net::TcpStream,
    name: rustls::pki_types::ServerName<'static>,
) -> Result<(Stream, crate::tls::HandshakeKind), String> {
    slot.handshaking.set(true);
    let r = tls.handshake(tcp, name).await;
    slot.handshaking.set(false);
    r
}
