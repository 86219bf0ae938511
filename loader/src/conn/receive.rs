//! The read side of a connection ([`Received`]): responses read with the shared codec,
//! counted as they complete, and how the connection ended when it did ([`ConnEnd`]).

use super::{ConnEnd, Open, Slot};
use crate::worker::{Engine, Fail};
use monoio::io::AsyncReadRent;
use shared::http::response::{ReadStep, ResponseReader};
use shared::http::Response;
use std::time::Instant;

/// Room a read for a response head takes at most on a stream that can drop bytes unread
/// (`Stream::can_discard`): a head and a few small responses behind it (pipelined) fit; a long
/// body's bytes mostly stay in the receive's buffers, to be dropped there.
const HEAD_READ: usize = 4096;
/// The least of a Content-Length body left to come that is dropped unread rather than read:
/// below it a copy costs less than the second path.
const SKIP_MIN: u64 = 1024;

/// The read side of a connection: bytes read and not yet consumed, the response being read,
/// and the times ab's "Waiting" is measured with.
pub(super) struct Received {
    buf: Vec<u8>,
    /// Start of the unconsumed bytes.
    pos: usize,
    reader: ResponseReader,
    /// Arrival time of the oldest unconsumed byte in `buf`: ab's "Waiting" ends there.
    t_data: Instant,
    /// Arrival of the first byte of the response being read.
    t_first: Instant,
    /// The last read filled all the room it had: more may wait in the receive behind it.
    full: bool,
}

impl Received {
    pub(super) fn new(capacity: usize, now: Instant) -> Received {
        Received {
            buf: Vec::with_capacity(capacity),
            pos: 0,
            reader: ResponseReader::new(),
            t_data: now,
            t_first: now,
            full: false,
        }
    }

    /// A new connection: nothing read.
    pub(super) fn reset(&mut self) {
        self.pos = 0;
        self.buf.clear();
        self.reader = ResponseReader::new();
        self.full = false;
    }

    /// Step 4: read until at least one response is complete, then take every complete one.
    /// `Ok` leaves the connection open for the next round.
    pub(super) async fn read_responses(
        &mut self,
        w: &Engine,
        slot: &Slot,
        open: &mut Open,
    ) -> Result<(), ConnEnd> {
        let mut done_any = false;
        loop {
            done_any |= self.take_responses(w, slot, open)?;
            if self.pos == self.buf.len() {
                self.pos = 0;
                self.buf.clear();
            }
            if (done_any && self.pos == 0) || slot.inflight.borrow().is_empty() {
                return Ok(());
            }
            if done_any && w.depth > 1 {
                return Ok(()); // refill the pipe with what was freed
            }
            if self.buf.is_empty() && self.reader.skippable() >= SKIP_MIN {
                // Nothing buffered, the rest of a Content-Length body to come: counted as it
                // arrives, not copied out of the receive's buffers, where the stream can. All
                // but its last byte: that one is read, with whatever came behind it (the next
                // response, or bytes nobody asked for), as every response's end is.
                let left = self.reader.skippable() - 1;
                let max = usize::try_from(left).unwrap_or(usize::MAX);
                if let Some(res) = open.stream.discard(max).await {
                    let n = self.arrived(w, slot, open, res, true)?;
                    let ended = self.reader.skip(n as u64);
                    debug_assert!(ended.is_none(), "a body's last byte is read, not dropped");
                    continue;
                }
            }
            self.read_more(w, slot, open).await?;
        }
    }

    /// A write failed: the connection is dead, but answers may have arrived before it died
    /// (a server that answers a large upload with 413 and closes without reading it; one that
    /// answers pipelined requests and resets with more unread). Read them until every queued
    /// request is answered or the connection ends, and say how it ended (`Closed` when every
    /// queued request was answered). A server that goes silent instead is cut by the slot's
    /// timeout, as any read is.
    pub(super) async fn read_after_failed_write(
        &mut self,
        w: &Engine,
        slot: &Slot,
        open: &mut Open,
    ) -> ConnEnd {
        while !slot.inflight.borrow().is_empty() {
            if let Err(end) = self.read_responses(w, slot, open).await {
                return end;
            }
        }
        ConnEnd::Closed
    }

    /// Count every complete response in the buffer. Returns whether there was one.
    fn take_responses(
        &mut self,
        w: &Engine,
        slot: &Slot,
        open: &mut Open,
    ) -> Result<bool, ConnEnd> {
        let mut done_any = false;
        while self.pos < self.buf.len() {
            let Some(front) = slot.inflight.borrow().front().copied() else {
                // Bytes nobody asked for: the server is broken; drop the connection.
                return Err(ConnEnd::Stray);
            };
            if !self.reader.started() {
                self.t_first = self.t_data; // this response's first byte is at `pos`
            }
            let note = |h: &[httparse::Header<'_>]| w.note_server(front.url, h);
            let method = w.methods[front.url];
            let mut memo = w.head_memos[front.url].borrow_mut();
            let step =
                self.reader
                    .advance(&self.buf[self.pos..], (method, &w.limits), &mut memo, note);
            drop(memo);
            match step {
                Ok(ReadStep::More(used)) => {
                    self.pos += used;
                    break;
                }
                Ok(ReadStep::Done(used, resp)) => {
                    self.pos += used;
                    self.finished(w, slot, open, &resp)?;
                    done_any = true;
                }
                Err(err) => {
                    let dst = open.dst;
                    // A TLS record (handshake or alert, version 3.x) where HTTP was expected.
                    let tls = matches!(self.buf[self.pos..], [0x15 | 0x16, 0x03, ..]);
                    let hint = if tls {
                        " (the server speaks TLS: use an https:// URL)"
                    } else {
                        ""
                    };
                    w.log_first(
                        Fail::Parse,
                        format_args!("malformed response from {dst}: {err}{hint}"),
                    );
                    return Err(ConnEnd::Malformed);
                }
            }
        }
        Ok(done_any)
    }

    /// Pop the front attempt and count its response, which ended at `t_done`.
    fn complete_front(
        &self,
        w: &Engine,
        slot: &Slot,
        open: &mut Open,
        resp: &Response,
        t_done: Instant,
    ) {
        let e = slot.inflight.borrow_mut().pop_front();
        let left = slot.unaccounted.get().saturating_sub(resp.wire_len);
        slot.unaccounted.set(left);
        open.answered += 1;
        if let Some(e) = e {
            let connect_us = if e.opened { open.connect_us } else { 0 };
            w.complete(&e, resp, connect_us, self.t_first, t_done);
        }
        slot.rearm(w.timeout);
    }

    /// A response ended (its bytes up to `pos` consumed): counted; `Err(Announced)` when the
    /// connection carries no more.
    fn finished(
        &mut self,
        w: &Engine,
        slot: &Slot,
        open: &mut Open,
        resp: &Response,
    ) -> Result<(), ConnEnd> {
        self.complete_front(w, slot, open, resp, slot.now.get());
        if !resp.keep_alive || w.close {
            let more = self.pos < self.buf.len() || matches!(self.top_up(w, slot, open), Ok(true));
            if more {
                // Bytes after the last response the connection carries.
                w.protocol_error(open.url);
            }
            return Err(ConnEnd::Announced);
        }
        // What came behind it (the next answer, or bytes nobody asked for) is taken where a
        // read's room ended with this response, as a read with more room would have.
        self.top_up(w, slot, open).map(drop)
    }

    /// The last read filled its room and a response ended exactly there: what waits behind
    /// it (in the multishot receive's queue, the socket, or the TLS session:
    /// `Stream::read_queued`) is read now, at once, so the bytes after a response are seen at
    /// its end whatever the read's size and the stream. `Ok(true)` when bytes came.
    fn top_up(&mut self, w: &Engine, slot: &Slot, open: &mut Open) -> Result<bool, ConnEnd> {
        if !self.full || self.pos < self.buf.len() {
            return Ok(false);
        }
        self.full = false;
        self.pos = 0;
        self.buf.clear();
        let end = self.room(open);
        let buf = std::mem::take(&mut self.buf);
        let slice = monoio::buf::IoBufMut::slice_mut(buf, 0..end);
        let (res, slice) = match open.stream.read_queued(slice) {
            Ok(read) => read,
            Err(slice) => {
                self.buf = slice.into_inner();
                return Ok(false);
            }
        };
        self.buf = slice.into_inner();
        let n = self.arrived(w, slot, open, res, true)?;
        self.full = n == end;
        Ok(n > 0)
    }

    /// Where the next read into the buffer ends. Where the rest of a long body can be dropped
    /// unread (`read_responses`), a head is read with room for `HEAD_READ` bytes, so little
    /// of the body is copied with it.
    fn room(&self, open: &Open) -> usize {
        let (len, cap) = (self.buf.len(), self.buf.capacity());
        if self.reader.started() || !open.stream.can_discard() {
            cap
        } else {
            cap.min(len + HEAD_READ)
        }
    }

    /// One read into the buffer, after making room; what it brought as [`Received::arrived`]
    /// takes it.
    async fn read_more(&mut self, w: &Engine, slot: &Slot, open: &mut Open) -> Result<(), ConnEnd> {
        self.make_room();
        let was_empty = self.buf.is_empty();
        let (len, end) = (self.buf.len(), self.room(open));
        let buf = std::mem::take(&mut self.buf);
        let (res, slice) = open
            .stream
            .read(monoio::buf::IoBufMut::slice_mut(buf, len..end))
            .await;
        self.buf = slice.into_inner();
        self.full = matches!(res, Ok(n) if n == end - len);
        self.arrived(w, slot, open, res, was_empty).map(drop)
    }

    /// What a read (or a discard) brought: `Ok(n)` bytes, counted as unaccounted until a
    /// response takes them. At EOF a close-delimited body ends and is counted (the connection
    /// was `Announced` closed by it); not at a TLS stream's end without close_notify, which
    /// may be a truncation: that one fails, its reason said once. Otherwise EOF or an error
    /// ends the connection as [`Received::cut_short`] says. `was_empty`: nothing was buffered
    /// before it.
    fn arrived(
        &mut self,
        w: &Engine,
        slot: &Slot,
        open: &mut Open,
        res: std::io::Result<usize>,
        was_empty: bool,
    ) -> Result<usize, ConnEnd> {
        let t = Instant::now();
        slot.now.set(t);
        if was_empty {
            self.t_data = t;
        }
        if let Some(opened) = slot.opened.take() {
            self.first_read(w, open, opened, &res)?;
        }
        match res {
            Ok(0) => {
                let unfinished = self.reader.started() || self.pos < self.buf.len();
                if unfinished && !slot.inflight.borrow().is_empty() {
                    if let Ok(resp) = self.reader.eof() {
                        self.complete_front(w, slot, open, &resp, t);
                        return Err(ConnEnd::Announced);
                    }
                }
                Err(self.cut_short(open))
            }
            Ok(n) => {
                slot.unaccounted.set(slot.unaccounted.get() + n as u64);
                Ok(n)
            }
            Err(e) => {
                if e.kind() == std::io::ErrorKind::UnexpectedEof && self.reader.eof().is_ok() {
                    // The TLS stream's end without a close_notify (RFC 8446 6.1), in a
                    // close-delimited body: a cut body reads the same as a whole one.
                    let (host, dst) = (w.host(open.url), open.dst);
                    w.log_first(
                        Fail::Read,
                        format_args!(
                            "TLS connection to {host} ({dst}) closed without close_notify in a \
                             close-delimited body (no Content-Length, not chunked): the body \
                             may be truncated, counted as a Receive failure"
                        ),
                    );
                    return Err(ConnEnd::Closed);
                }
                Err(self.cut_short(open))
            }
        }
    }

    /// The first read of a new TLS connection: a fatal alert there is the server refusing the
    /// handshake the client finished (TLS 1.3: a client certificate required, checked after
    /// the client's Finished), a connect failure with its reason, as under TLS 1.2, where the
    /// same alert fails the handshake itself. Anything else: the connection stands, counted
    /// as opened.
    fn first_read(
        &self,
        w: &Engine,
        open: &Open,
        opened: super::Opened,
        res: &std::io::Result<usize>,
    ) -> Result<(), ConnEnd> {
        if let Some(why) = res.as_ref().err().and_then(crate::tls::alert_received) {
            let (host, dst) = (w.host(open.url), open.dst);
            w.log_first(
                Fail::Connect,
                format_args!("TLS handshake with {host} ({dst}) failed: {why}"),
            );
            return Err(ConnEnd::ConnectFailed);
        }
        w.connected(opened.connect_us, Some(opened.tls));
        w.note_tls(open.url, &open.stream);
        Ok(())
    }

    /// The connection ended (EOF or an error) with requests queued: before any byte of the
    /// front's answer on a connection that answered before, the requests were never taken
    /// (`Unanswered`); otherwise they failed with it (`Closed`).
    fn cut_short(&self, open: &Open) -> ConnEnd {
        let untouched = !self.reader.started() && self.pos == self.buf.len();
        if untouched && open.answered > 0 {
            ConnEnd::Unanswered
        } else {
            ConnEnd::Closed
        }
    }

    /// Room for a read: move a partial message to the front, or grow for a long head.
    fn make_room(&mut self) {
        if self.buf.len() == self.buf.capacity() {
            if self.pos > 0 {
                self.buf.copy_within(self.pos.., 0);
                self.buf.truncate(self.buf.len() - self.pos);
                self.pos = 0;
            } else {
                self.buf.reserve(self.buf.capacity());
            }
        }
    }
}
