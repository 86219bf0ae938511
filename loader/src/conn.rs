//! One connection slot's request loop: connect, write requests, read responses with the
//! shared codec, record, repeat; reconnect when the connection ends.
//!
//! A slot is one of the `-c` connections. It runs [`drive`] inside [`Guarded`], which a
//! worker-wide [`monitor`] cuts short when the oldest attempt in flight passes `--timeout` or
//! when the run ends (deadline or Ctrl-C). Every attempt is an [`Entry`] in the slot's
//! in-flight queue from the moment its ticket is taken until it is popped and counted, exactly
//! once: completed, or failed (connect, write, read, parse, timeout), or abandoned at the end
//! of a `-d` run. Popping and counting never straddle an `.await`, so dropping `drive` at any
//! await point (timeout, end) leaves the queue exact.
//!
//! Per request in steady state (keep-alive): no allocation (the read and write buffers and
//! the queue are reused; the request bytes are copied into the write buffer), one
//! `Instant::now()` after each read (the next request's start is the previous response's
//! end), no timer, and no extra future polled per wake-up: the timeout and the end are a
//! `Cell` checked before polling `drive` (one timer per worker, in the monitor, checks every
//! slot's deadline a few times per timeout period).

use crate::worker::{Fail, Worker};

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use shared::http::head::RequestMethod;
use shared::http::{parse_response, BodyDecoder, BodyKind, CodecError, Limits, Status};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The granularity of monoio's timer wheel.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// Read buffer per connection (wrk uses 8 KiB; a bigger one halves the reads of a 32 KiB page).
pub const READ_BUF: usize = 16 * 1024;
/// Read buffer per connection when a worker has more than [`MANY_CONNECTIONS`]: memory stays
/// bounded (10k connections × 4 KiB = 40 MiB); a longer head grows its buffer.
pub const SMALL_READ_BUF: usize = 4 * 1024;
pub const MANY_CONNECTIONS: usize = 1024;
/// Header fields a response may have.
pub const MAX_RESPONSE_HEADERS: usize = 64;

/// One attempt, from its ticket to its outcome.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Index of its URL.
    pub url: usize,
    /// Counted in the figures (false during --warmup).
    pub measured: bool,
    /// Where latency is measured from: the scheduled send time with --rate, else `start`.
    pub intended: Instant,
    /// When the attempt actually started (before its connect, if it opened one).
    pub start: Instant,
    /// When its bytes were handed to the socket (after the connect): ab's "Waiting" starts here.
    pub sent: Instant,
    /// It opened its connection: ab's "Connect" time is charged to it.
    pub opened: bool,
}

/// State of one slot that outlives any one `drive` (dropped on timeout or at the end).
pub struct Slot {
    /// Global connection index (0 .. -c).
    pub index: usize,
    pub inflight: RefCell<VecDeque<Entry>>,
    /// The oldest in-flight attempt's timeout; `None` when idle.
    pub deadline: Cell<Option<Instant>>,
    /// The in-flight attempts are waiting for a connect (a timeout is a connect failure).
    pub connecting: Cell<bool>,
    /// Next send times (--rate).
    pub schedule: Cell<Option<crate::plan::Schedule>>,
    /// The last time taken: the start of the next closed-loop request.
    pub now: Cell<Instant>,
    /// Set by the monitor to cut `drive` short.
    pub cut: Cell<Option<Cut>>,
    /// The slot task's waker, for the monitor.
    waker: RefCell<Option<Waker>>,
}

/// Why the monitor cut a slot's `drive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The oldest attempt in flight passed `--timeout`: the connection is dropped.
    Timeout,
    /// The run ended (deadline or Ctrl-C): what is in flight is abandoned.
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
            schedule: Cell::new(schedule),
            now: Cell::new(now),
            cut: Cell::new(None),
            waker: RefCell::new(None),
        }
    }

    /// Cut the slot's `drive` (from the monitor) and wake its task.
    fn cut(&self, why: Cut) {
        self.cut.set(Some(why));
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

    /// Pop every in-flight attempt and count it as `why`.
    pub fn fail_all(&self, w: &Worker, why: Fail) {
        let mut q = self.inflight.borrow_mut();
        while let Some(e) = q.pop_front() {
            w.fail(&e, why);
        }
        self.deadline.set(None);
        self.connecting.set(false);
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
pub async fn monitor(slots: Rc<Vec<Rc<Slot>>>, end: shared::shutdown::Shutdown, tick: Duration) {
    loop {
        let ended = monoio::select! {
            _ = monoio::time::sleep(tick) => false,
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

/// Where one response's parsing is.
enum Parse {
    Head,
    Body {
        dec: BodyDecoder,
        status: u16,
        keep_alive: bool,
        body_len: u64,
    },
}

/// A complete response.
#[derive(Debug, Clone, Copy)]
pub struct Response {
    pub status: u16,
    pub keep_alive: bool,
    pub body_len: u64,
    /// Bytes it took on the wire (head, body, framing).
    pub wire_len: u64,
}

/// Incremental reader of one response after another on a connection.
struct Reader {
    state: Parse,
    wire: u64,
}

enum Step {
    /// Consumed this much; more input needed.
    More(usize),
    /// A response ended after consuming this much.
    Done(usize, Response),
}

impl Reader {
    fn new() -> Reader {
        Reader {
            state: Parse::Head,
            wire: 0,
        }
    }

    /// Whether a response is partly read.
    fn started(&self) -> bool {
        !matches!(self.state, Parse::Head) || self.wire > 0
    }

    /// Parse from `buf` (the unconsumed bytes). `on_head` sees each final response head's
    /// fields (for the Server header).
    fn advance(
        &mut self,
        buf: &[u8],
        method: RequestMethod,
        limits: &Limits,
        on_head: impl FnOnce(&[httparse::Header<'_>]),
    ) -> Result<Step, CodecError> {
        let mut on_head = Some(on_head);
        let mut used = 0;
        loop {
            match &mut self.state {
                Parse::Head => {
                    let mut hdrs = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
                    match parse_response(&buf[used..], &mut hdrs, method, limits)? {
                        Status::Partial => return Ok(Step::More(used)),
                        Status::Complete(h) => {
                            used += h.head_len;
                            self.wire += h.head_len as u64;
                            if (100..200).contains(&h.status) && h.status != 101 {
                                continue; // interim response: the final one follows
                            }
                            if let Some(f) = on_head.take() {
                                f(h.headers);
                            }
                            let (status, keep_alive) = (h.status, h.keep_alive);
                            match h.body {
                                BodyKind::Empty | BodyKind::Length(0) | BodyKind::Tunnel => {
                                    let ka = keep_alive && h.body != BodyKind::Tunnel;
                                    return Ok(Step::Done(used, self.finish(status, ka, 0)));
                                }
                                kind => {
                                    self.state = Parse::Body {
                                        dec: BodyDecoder::new(kind, limits),
                                        status,
                                        keep_alive,
                                        body_len: 0,
                                    }
                                }
                            }
                        }
                    }
                }
                Parse::Body {
                    dec,
                    status,
                    keep_alive,
                    body_len,
                } => {
                    if used == buf.len() {
                        return Ok(Step::More(used));
                    }
                    let d = dec.decode(&buf[used..])?;
                    used += d.consumed;
                    self.wire += d.consumed as u64;
                    *body_len += d.data.len() as u64;
                    if d.done {
                        let (s, ka, bl) = (*status, *keep_alive, *body_len);
                        return Ok(Step::Done(used, self.finish(s, ka, bl)));
                    }
                    if d.consumed == 0 {
                        return Ok(Step::More(used));
                    }
                }
            }
        }
    }

    /// The peer closed: a close-delimited body ends here; anything else is truncated.
    fn eof(&mut self) -> Result<Response, CodecError> {
        match &mut self.state {
            Parse::Body {
                dec,
                status,
                body_len,
                ..
            } => {
                dec.finish()?;
                let (s, bl) = (*status, *body_len);
                Ok(self.finish(s, false, bl))
            }
            Parse::Head => Err(CodecError::UnexpectedEof),
        }
    }

    fn finish(&mut self, status: u16, keep_alive: bool, body_len: u64) -> Response {
        let r = Response {
            status,
            keep_alive,
            body_len,
            wire_len: self.wire,
        };
        self.state = Parse::Head;
        self.wire = 0;
        r
    }
}

/// An open connection and its buffers' positions.
struct Open {
    stream: TcpStream,
    /// The server it is connected to.
    dst: std::net::SocketAddr,
    /// Connect time, charged to the first response (ab's "Connect").
    connect_us: u64,
}

/// Run the slot's requests until no ticket is left and nothing is in flight. Dropped (at an
/// await point) on timeout or at the end of the run; the caller then counts what is in flight.
pub async fn drive(w: &Worker, slot: &Slot) {
    let mut rbuf: Vec<u8> = Vec::with_capacity(w.read_buf);
    let mut pos = 0usize;
    let mut wbuf: Vec<u8> = Vec::with_capacity(w.max_request_len * w.depth);
    let mut conn: Option<Open> = None;
    let mut reader = Reader::new();
    // Arrival time of the oldest unconsumed byte in `rbuf`: ab's "Waiting" ends there.
    let mut t_data = slot.now.get();
    // Arrival of the first byte of the response being read.
    let mut t_first = t_data;
    let timeout = w.timeout;
    loop {
        // 1. Fill the pipe: new attempts up to the depth (one without --pipeline).
        let mut batch = 0usize;
        {
            let queued = slot.inflight.borrow().len();
            while queued + batch < w.depth {
                let mut now = slot.now.get();
                let mut intended = now;
                if let Some(mut sched) = slot.schedule.get() {
                    let due = sched.peek();
                    if due > now {
                        if queued + batch > 0 {
                            break; // send it after reading what is in flight
                        }
                        // monoio's timer wheel ticks in milliseconds and fires up to a
                        // tick late: wake a tick early and send then, so the timer's own
                        // lateness is never counted as the server's latency.
                        if let Some(early) = due.checked_sub(TIMER_TICK) {
                            if early > now {
                                monoio::time::sleep_until(early.into()).await;
                                now = Instant::now();
                                slot.now.set(now);
                            }
                        }
                    }
                    if w.is_stopped() {
                        break;
                    }
                    // Latency runs from the scheduled time when the send is late (coordinated
                    // omission corrected), from the actual send when it is early.
                    intended = sched.next_due().min(now);
                    slot.schedule.set(Some(sched));
                }
                let Some((url, measured)) = w.take_ticket() else {
                    break;
                };
                slot.inflight.borrow_mut().push_back(Entry {
                    url,
                    measured,
                    intended,
                    start: now,
                    sent: now,
                    opened: false,
                });
                batch += 1;
            }
        }
        if slot.inflight.borrow().is_empty() {
            return; // no ticket left and nothing in flight
        }
        slot.rearm(timeout);

        // 2. Connect if needed (--urls may name several servers: a connection serves one).
        if let (Some(open), Some(front)) = (&conn, slot.inflight.borrow().front()) {
            if open.dst != w.plan_addr(front.url) {
                conn = None;
            }
        }
        if conn.is_none() {
            let t0 = slot.now.get();
            slot.connecting.set(true);
            let url = slot.inflight.borrow().front().map_or(0, |e| e.url);
            let (dst, src) = w.connect_target(url);
            let res = shared::net::connect(dst, src).await;
            slot.connecting.set(false);
            match res {
                Ok(stream) => {
                    let t1 = Instant::now();
                    slot.now.set(t1);
                    let connect_us = micros(t1.saturating_duration_since(t0));
                    w.connected(connect_us);
                    if let Some(e) = slot.inflight.borrow_mut().front_mut() {
                        e.opened = true;
                    }
                    for e in slot.inflight.borrow_mut().iter_mut() {
                        e.sent = t1;
                    }
                    conn = Some(Open {
                        stream,
                        dst,
                        connect_us,
                    });
                    pos = 0;
                    rbuf.clear();
                    reader = Reader::new();
                    // Every queued attempt is written now, not only this round's.
                    batch = slot.inflight.borrow().len();
                }
                Err(e) => {
                    w.log_first(Fail::Connect, format_args!("connect to {dst} failed: {e}"));
                    slot.fail_all(w, Fail::Connect);
                    // A refused connect returns at once: don't spin on a dead server.
                    monoio::time::sleep(Duration::from_millis(1)).await;
                    slot.now.set(Instant::now());
                    continue;
                }
            }
        }
        let Some(open) = conn.as_mut() else { continue };

        // 3. Write this round's requests in one write.
        if batch > 0 {
            wbuf.clear();
            {
                let q = slot.inflight.borrow();
                for e in q.iter().skip(q.len() - batch) {
                    wbuf.extend_from_slice(&w.requests[e.url]);
                    w.sent(e);
                }
            }
            let (res, b) = open.stream.write_all(wbuf).await;
            wbuf = b;
            if res.is_err() {
                // The batch failed to go out; older attempts lose their connection.
                let mut q = slot.inflight.borrow_mut();
                let older = q.len() - batch;
                let mut i = 0;
                while let Some(e) = q.pop_front() {
                    w.fail(&e, if i < older { Fail::Read } else { Fail::Write });
                    i += 1;
                }
                drop(q);
                slot.deadline.set(None);
                conn = None;
                continue;
            }
        }

        // 4. Read until at least one response is complete, then take every complete one.
        let mut done_any = false;
        let mut close_after = false;
        loop {
            // Parse what is buffered.
            while pos < rbuf.len() {
                let Some(front) = slot.inflight.borrow().front().copied() else {
                    // Bytes nobody asked for: the server is broken; drop the connection.
                    close_after = true;
                    break;
                };
                let method = w.methods[front.url];
                if !reader.started() {
                    t_first = t_data; // this response's first byte is at `pos`
                }
                let note = |h: &[httparse::Header<'_>]| w.note_server(front.url, h);
                match reader.advance(&rbuf[pos..], method, &w.limits, note) {
                    Ok(Step::More(used)) => {
                        pos += used;
                        break;
                    }
                    Ok(Step::Done(used, resp)) => {
                        pos += used;
                        let e = slot.inflight.borrow_mut().pop_front();
                        if let Some(e) = e {
                            let connect_us = if e.opened { open.connect_us } else { 0 };
                            w.complete(&e, &resp, connect_us, t_first, slot.now.get());
                        }
                        done_any = true;
                        slot.rearm(timeout);
                        if !resp.keep_alive || w.close {
                            close_after = true;
                            break;
                        }
                    }
                    Err(err) => {
                        w.log_first(
                            Fail::Parse,
                            format_args!("malformed response from {}: {err}", open.dst),
                        );
                        // The rest of the queue is failed as reads when the connection closes.
                        if let Some(e) = slot.inflight.borrow_mut().pop_front() {
                            w.fail(&e, Fail::Parse);
                        }
                        close_after = true;
                        break;
                    }
                }
            }
            if pos == rbuf.len() {
                pos = 0;
                rbuf.clear();
            }
            if close_after || (done_any && pos == 0) || slot.inflight.borrow().is_empty() {
                break;
            }
            if done_any && w.depth > 1 {
                break; // refill the pipe with what was freed
            }
            // Make room: move a partial message to the front, or grow for a long head.
            if rbuf.len() == rbuf.capacity() {
                if pos > 0 {
                    rbuf.copy_within(pos.., 0);
                    rbuf.truncate(rbuf.len() - pos);
                    pos = 0;
                } else {
                    rbuf.reserve(rbuf.capacity());
                }
            }
            let was_empty = rbuf.is_empty();
            let len = rbuf.len();
            let cap = rbuf.capacity();
            let (res, slice) = open
                .stream
                .read(monoio::buf::IoBufMut::slice_mut(rbuf, len..cap))
                .await;
            rbuf = slice.into_inner();
            let t = Instant::now();
            slot.now.set(t);
            if was_empty {
                t_data = t;
            }
            match res {
                Ok(0) => {
                    // EOF: a close-delimited body ends here; anything else is truncated.
                    let front = slot.inflight.borrow().front().copied();
                    match (front, reader.started() || pos < rbuf.len()) {
                        (Some(e), true) => match reader.eof() {
                            Ok(resp) => {
                                slot.inflight.borrow_mut().pop_front();
                                let connect_us = if e.opened { open.connect_us } else { 0 };
                                w.complete(&e, &resp, connect_us, t_first, t);
                                slot.fail_all(w, Fail::Read);
                            }
                            Err(_) => slot.fail_all(w, Fail::Read),
                        },
                        _ => slot.fail_all(w, Fail::Read),
                    }
                    close_after = true;
                    break;
                }
                Ok(_) => {}
                Err(_) => {
                    slot.fail_all(w, Fail::Read);
                    close_after = true;
                    break;
                }
            }
        }
        if close_after {
            // What is still queued can no longer be answered on this connection.
            slot.fail_all(w, Fail::Read);
            conn = None;
            pos = 0;
            rbuf.clear();
            reader = Reader::new();
        }
    }
}

#[inline]
pub fn micros(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `wire` to a reader in pieces of `split` bytes at most, as reads would deliver it,
    /// consuming like `drive` does; then EOF. Returns the responses (or the error).
    fn read_all(
        wire: &[u8],
        method: RequestMethod,
        split: usize,
    ) -> Result<Vec<Response>, CodecError> {
        let limits = Limits::default();
        let mut r = Reader::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        for piece in wire.chunks(split.max(1)) {
            buf.extend_from_slice(piece);
            let mut pos = 0;
            while pos < buf.len() {
                match r.advance(&buf[pos..], method, &limits, |_| {})? {
                    Step::More(used) => {
                        pos += used;
                        break;
                    }
                    Step::Done(used, resp) => {
                        pos += used;
                        out.push(resp);
                    }
                }
            }
            buf.drain(..pos);
        }
        if r.started() || !buf.is_empty() {
            out.push(r.eof()?);
        }
        Ok(out)
    }

    fn every_split(wire: &[u8], method: RequestMethod) -> Result<Vec<Response>, CodecError> {
        let whole = read_all(wire, method, wire.len());
        for split in 1..wire.len() {
            let got = read_all(wire, method, split);
            assert_eq!(format!("{got:?}"), format!("{whole:?}"), "split at {split}");
        }
        whole
    }

    fn summary(r: &[Response]) -> Vec<(u16, bool, u64, u64)> {
        r.iter()
            .map(|r| (r.status, r.keep_alive, r.body_len, r.wire_len))
            .collect()
    }

    #[test]
    fn responses_read_the_same_at_every_split() {
        use RequestMethod::{Head, Other};
        let cl = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(
            summary(&every_split(cl, Other).unwrap()),
            vec![(200, true, 5, 43)]
        );

        let two = [
            &cl[..],
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        ]
        .concat();
        let got = summary(&every_split(&two, Other).unwrap());
        assert_eq!(got, vec![(200, true, 5, 43), (404, true, 0, 45)]);

        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n";
        let got = summary(&every_split(chunked, Other).unwrap());
        assert_eq!(got, vec![(200, true, 5, chunked.len() as u64)]);

        let interim =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
        let got = summary(&every_split(interim, Other).unwrap());
        assert_eq!(got, vec![(201, true, 2, interim.len() as u64)]);

        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n";
        assert_eq!(
            summary(&every_split(head, Head).unwrap()),
            vec![(200, true, 0, 40)]
        );

        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end";
        let got = summary(&every_split(close, Other).unwrap());
        assert_eq!(got, vec![(200, false, 13, close.len() as u64)]);

        let http10 = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(
            summary(&every_split(http10, Other).unwrap()),
            vec![(200, false, 1, 39)]
        );
    }

    #[test]
    fn truncated_and_malformed_responses_are_errors() {
        use RequestMethod::Other;
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
        assert_eq!(
            every_split(short, Other).unwrap_err(),
            CodecError::UnexpectedEof
        );
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab";
        assert_eq!(
            every_split(cut, Other).unwrap_err(),
            CodecError::UnexpectedEof
        );
        let head_only = b"HTTP/1.1 200 OK\r\nContent-Le";
        assert_eq!(
            every_split(head_only, Other).unwrap_err(),
            CodecError::UnexpectedEof
        );
        // The kind decides the count: UnexpectedEof (from `eof`) is a read failure, anything
        // the codec rejects is a parse failure.
        assert_eq!(
            every_split(b"garbage\r\n\r\n", Other).unwrap_err(),
            CodecError::InvalidVersion
        );
        let bad_chunk = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(
            every_split(bad_chunk, Other).unwrap_err(),
            CodecError::InvalidChunkSize
        );
    }
}
