//! TLS over a monoio `TcpStream` with a rustls session: the adapter behind `Stream::Tls`.
//!
//! Ciphertext is read into a scratch buffer and handed to the session, plaintext comes out of
//! the session's reader; a write hands plaintext to the session and sends what it produced in
//! one `write_all`. The session takes no ciphertext once it holds more than 16 KiB of
//! plaintext unread (rustls's received-plaintext limit), and one read may bring more than
//! that (the end of a 16 KiB record and small records behind it): the rest stays in the
//! scratch (`pending`) and is given to the session, before the socket is read again, once
//! its plaintext was read.
//!
//! Cancellation: monoio's I/O takes its buffer by value, so a read or write dropped before it
//! completed takes the scratch or the write buffer with it. The stream then answers every
//! later read or write with an error (`Interrupted`) instead of panicking, and the owner
//! closes it: every `select!` that drops a TLS read must close that connection afterwards.
//!
//! Reads never write through the write buffer, so a split stream's read half never touches
//! it; a session error's fatal alert is sent straight from the failed read (`alert_now`).

use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use monoio::BufResult;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, IoState, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::tls_buffers::{give_scratch, give_write, take_scratch, take_write};

/// rustls takes no more ciphertext while it holds more plaintext than this unread
/// (`DEFAULT_RECEIVED_PLAINTEXT_LIMIT`, not configurable): `read_tls` fails then.
const PLAINTEXT_LIMIT: usize = 16 * 1024;

/// The first byte of a TLS record carrying a handshake message (a ClientHello).
const HANDSHAKE_RECORD: u8 = 0x16;

pub struct TlsStream {
    io: TcpStream,
    conn: Connection,
    /// Ciphertext scratch for reads; `None` once a read was dropped in flight; without
    /// capacity while parked (`park`: taken from the thread's pool at the next read).
    scratch: Option<Vec<u8>>,
    /// The part of `scratch` read from the socket and not given to the session yet (its
    /// plaintext was at its limit); empty but for that.
    pending: std::ops::Range<usize>,
    /// Ciphertext to send; `None` once a write was dropped in flight; without capacity
    /// while parked.
    wbuf: Option<Vec<u8>>,
    /// Where the ciphertext given to the session stands in its records.
    framing: Framing,
}

/// Follows the record framing of the ciphertext a session was given, to tell whether it
/// holds part of a record: bytes that arrived and that nothing (no plaintext, no state) shows
/// until the rest comes. rustls keeps an unfinished record to itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Framing {
    /// Bytes of the current record's 5-byte header seen (0: at a record's start or in its
    /// body).
    head: u8,
    /// The high byte of the current record's length, once the header's fourth byte came.
    len_high: u8,
    /// Bytes of the current record's body still to come.
    body_left: usize,
}

/// A TLS record header: content type, legacy version (2 bytes), length (2 bytes).
const RECORD_HEADER: u8 = 5;

impl Framing {
    fn advance(&mut self, mut data: &[u8]) {
        while let Some((&b, rest)) = data.split_first() {
            if self.body_left > 0 {
                let n = self.body_left.min(data.len());
                self.body_left -= n;
                data = &data[n..];
                continue;
            }
            data = rest;
            self.head += 1;
            match self.head {
                4 => self.len_high = b,
                RECORD_HEADER => {
                    self.body_left = usize::from(self.len_high) << 8 | usize::from(b);
                    self.head = 0;
                }
                _ => {}
            }
        }
    }

    /// Within a record: its header or part of its body came, not all of it.
    fn mid_record(&self) -> bool {
        self.head != 0 || self.body_left != 0
    }
}

fn interrupted() -> io::Error {
    io::Error::new(
        io::ErrorKind::Interrupted,
        "tls stream: an earlier i/o was dropped in flight",
    )
}

fn invalid(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Why a TLS server handshake did not produce a stream.
#[derive(Debug)]
pub enum AcceptFail {
    /// The client's first bytes are not a TLS handshake record (plain HTTP to a TLS port,
    /// say). Boxed: a rare case, which need not make every handshake's result larger.
    NotTls(Box<PlainStart>),
    /// The handshake failed (bad hello, no shared cipher, a client alert, end of stream).
    Failed(io::Error),
}

/// A connection to a TLS server that did not start with a handshake.
#[derive(Debug)]
pub struct PlainStart {
    /// The plain stream, for an answer in plain text.
    pub tcp: TcpStream,
    /// The first bytes read from it (the request line they may hold, for a log).
    pub first: Vec<u8>,
}

/// Run a server handshake on `io`.
pub async fn accept(io: TcpStream, cfg: Arc<ServerConfig>) -> Result<TlsStream, AcceptFail> {
    let conn = ServerConnection::new(cfg).map_err(|e| AcceptFail::Failed(invalid(e)))?;
    let mut t = TlsStream::new(io, conn.into());
    // The first bytes decide whether this is TLS at all.
    let mut scratch = t.scratch.take().expect("a new stream has its scratch");
    let (r, raw) = t.io.read(scratch).await;
    scratch = raw;
    match r {
        Ok(0) => return Err(AcceptFail::Failed(io::ErrorKind::UnexpectedEof.into())),
        Ok(_) if scratch[0] != HANDSHAKE_RECORD => {
            let first = PlainStart {
                tcp: t.io,
                first: scratch,
            };
            return Err(AcceptFail::NotTls(Box::new(first)));
        }
        Ok(_) => {}
        Err(e) => return Err(AcceptFail::Failed(e)),
    }
    let len = scratch.len();
    if let Err(e) = t.give(scratch, 0..len) {
        t.send_alert().await;
        return Err(AcceptFail::Failed(e));
    }
    t.handshake().await.map_err(AcceptFail::Failed)?;
    Ok(t)
}

/// Run a client handshake on `io` for server `name`.
pub async fn connect(
    io: TcpStream,
    cfg: Arc<ClientConfig>,
    name: ServerName<'static>,
) -> io::Result<TlsStream> {
    let conn = ClientConnection::new(cfg, name).map_err(invalid)?;
    let mut t = TlsStream::new(io, conn.into());
    t.handshake().await?;
    Ok(t)
}

impl TlsStream {
    fn new(io: TcpStream, conn: Connection) -> Self {
        TlsStream {
            io,
            conn,
            scratch: Some(take_scratch()),
            pending: 0..0,
            wbuf: Some(Vec::new()),
            framing: Framing::default(),
        }
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.io
    }

    /// The TCP stream underneath, for its read mode (`Stream::multishot_recv`).
    pub(super) fn tcp_mut(&mut self) -> &mut TcpStream {
        &mut self.io
    }

    /// The rustls session (negotiated version, cipher suite, SNI, whether it resumed).
    pub fn session(&self) -> &Connection {
        &self.conn
    }

    /// The connection waits idle: its scratch and write buffer go back to the thread's pool
    /// (`tls_buffers`), taken again by its next read or write. Holds on to nothing but the
    /// session then.
    pub(super) fn park(&mut self) {
        let held = !self.pending.is_empty();
        if let Some(s) = self.scratch.as_mut().filter(|s| s.capacity() > 0 && !held) {
            give_scratch(std::mem::take(s));
        }
        if let Some(w) = self.wbuf.as_mut().filter(|w| w.capacity() > 0) {
            give_write(std::mem::take(w));
        }
    }

    /// The session holds nothing to read (no plaintext, no close_notify) and waits for
    /// records from the socket, none held back: an idle connection may wait on its socket
    /// alone.
    pub(super) fn drained(&self) -> bool {
        self.conn.wants_read() && self.pending.is_empty()
    }

    /// Finish the handshake: send what the session wants sent, read what it wants read.
    async fn handshake(&mut self) -> io::Result<()> {
        while self.conn.is_handshaking() {
            if self.conn.wants_write() {
                self.flush_tls().await?;
                continue;
            }
            match self.fill().await {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    self.send_alert().await;
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        // A TLS 1.3 server's session tickets, a client's last flight.
        if self.conn.wants_write() {
            self.flush_tls().await?;
        }
        Ok(())
    }

    /// Best effort: send the alert a failed session queued.
    async fn send_alert(&mut self) {
        if self.conn.wants_write() {
            let _ = self.flush_tls().await;
        }
    }

    /// Give ciphertext to the session and process it, until all of it went or the session's
    /// plaintext is past the limit at which it takes no more: the state after the last
    /// record and how many bytes went.
    fn absorb(&mut self, data: &[u8]) -> io::Result<(IoState, usize)> {
        let mut rest = data;
        loop {
            // An empty slice tells the session the peer ended the stream.
            let before = rest;
            let took = self.conn.read_tls(&mut rest)?;
            self.framing.advance(&before[..took]);
            if took == 0 && !rest.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "tls record too large",
                ));
            }
            let state = self.conn.process_new_packets().map_err(invalid)?;
            if rest.is_empty() || state.plaintext_bytes_to_read() > PLAINTEXT_LIMIT {
                return Ok((state, data.len() - rest.len()));
            }
        }
    }

    /// `absorb` the bytes `range` of `scratch` (read from the socket, or held back before),
    /// keeping what the session did not take as `pending`; the scratch goes back.
    fn give(&mut self, scratch: Vec<u8>, range: std::ops::Range<usize>) -> io::Result<IoState> {
        let res = self.absorb(&scratch[range.clone()]);
        self.pending = match &res {
            Ok((_, took)) => range.start + took..range.end,
            Err(_) => 0..0,
        };
        self.scratch = Some(scratch);
        if res.is_err() {
            self.alert_now();
        }
        res.map(|(state, _)| state)
    }

    /// Send the fatal alert a session error queued (bad_record_mac, record_overflow...: RFC
    /// 8446 5.1, 5.2), at once and without waiting, from the read that failed: whatever
    /// closes the connection next (an error page, a drop) might not write it. A write of the
    /// other half in flight may interleave: the connection is dead either way.
    fn alert_now(&mut self) {
        if !self.conn.wants_write() {
            return;
        }
        let mut out = Vec::new();
        while self.conn.wants_write() && self.conn.write_tls(&mut out).is_ok() {}
        // SAFETY: send(2) from a live buffer on the descriptor `io` owns; MSG_DONTWAIT: a full
        // socket buffer drops the alert rather than blocking.
        unsafe {
            libc::send(
                self.io.as_raw_fd(),
                out.as_ptr().cast(),
                out.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
    }

    /// Read ciphertext once (or take what was held back) and process it: how many bytes
    /// came (0: end of stream).
    async fn fill(&mut self) -> io::Result<usize> {
        let mut scratch = self.scratch.take().ok_or_else(interrupted)?;
        if !self.pending.is_empty() {
            let held = self.pending.clone();
            return self.give(scratch, held.clone()).map(|_| held.len());
        }
        if scratch.capacity() == 0 {
            scratch = take_scratch();
        }
        scratch.clear();
        let (r, scratch) = self.io.read(scratch).await;
        match r {
            Ok(n) => self.give(scratch, 0..n).map(|_| n),
            Err(e) => {
                self.scratch = Some(scratch);
                Err(e)
            }
        }
    }

    /// Send every record the session has queued.
    async fn flush_tls(&mut self) -> io::Result<()> {
        let mut out = self.wbuf.take().ok_or_else(interrupted)?;
        if out.capacity() == 0 {
            out = take_write();
        }
        out.clear();
        while self.conn.wants_write() {
            if let Err(e) = self.conn.write_tls(&mut out) {
                self.wbuf = Some(out);
                return Err(e);
            }
        }
        if out.is_empty() {
            self.wbuf = Some(out);
            return Ok(());
        }
        let (r, out) = self.io.write_all(out).await;
        self.wbuf = Some(out);
        r.map(|_| ())
    }

    /// Plaintext into `dst`; `Ok(0)` at a clean end of the stream (the peer's close_notify),
    /// an `UnexpectedEof` error when the TCP stream ends without one (RFC 8446 section 6.1):
    /// the data may have been cut by an attacker or the network, and a close-delimited
    /// response must not pass for complete. Callers for whom an end is an end whatever its
    /// kind (a client gone between requests) treat that error as they treat `Ok(0)`.
    async fn read_into(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(dst) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // `UnexpectedEof` from rustls: the peer closed TCP without close_notify.
                Err(e) => return Err(e),
            }
            if self.fill().await? == 0 {
                // The session now reports the end (or the truncation) on the next pass.
                continue;
            }
        }
    }

    /// Hand all of `parts` (or as much as the session takes) to the session, then send the
    /// records: how many plaintext bytes were taken.
    async fn write_parts(&mut self, parts: &[&[u8]]) -> io::Result<usize> {
        if self.wbuf.is_none() {
            return Err(interrupted());
        }
        let mut taken = 0;
        for p in parts {
            let n = self.conn.writer().write(p)?;
            taken += n;
            if n < p.len() {
                break;
            }
        }
        self.flush_tls().await?;
        Ok(taken)
    }

    /// See `Stream::still_open`.
    pub(super) fn still_open(&mut self) -> bool {
        // Plaintext (or a close_notify) the session already holds: bytes after the last
        // response, which must not become the next one's; part of a record is such bytes
        // too, readable once the rest comes. A read in flight: not idle.
        if !self.drained() || self.scratch.is_none() {
            return false;
        }
        loop {
            match self.records_now() {
                None => return !self.framing.mid_record(),
                Some(Ok(Some(s))) if s.plaintext_bytes_to_read() == 0 && !s.peer_has_closed() => {}
                Some(_) => return false,
            }
        }
    }

    /// See `Stream::read_queued`.
    pub(super) fn read_queued<T: IoBufMut>(
        &mut self,
        mut buf: T,
    ) -> Result<BufResult<usize, T>, T> {
        // SAFETY: the buffer's spare part, as monoio's own reads write into it; only the
        // bytes the read reports are marked initialized.
        let dst = unsafe { std::slice::from_raw_parts_mut(buf.write_ptr(), buf.bytes_total()) };
        if dst.is_empty() {
            return Err(buf);
        }
        loop {
            match self.conn.reader().read(dst) {
                Ok(n) => {
                    // SAFETY: the session wrote `n` bytes at the start of `dst`.
                    unsafe { buf.set_init(n) };
                    return Ok((Ok(n), buf));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Ok((Err(e), buf)),
            }
            match self.records_now() {
                None => return Err(buf),
                Some(Err(e)) => return Ok((Err(e), buf)),
                // Records, or the end, given to the session: its reader tells what they were.
                Some(Ok(_)) => {}
            }
        }
    }

    /// The records that already arrived, given to the session without waiting: from the
    /// multishot receive's queue when one reads the socket, else with a non-blocking
    /// recv(2). `None` when nothing waits (or a read is in flight: it holds the scratch);
    /// `Ok(None)` at the end of the stream (given to the session too), else the session's
    /// state after them.
    fn records_now(&mut self) -> Option<io::Result<Option<IoState>>> {
        let mut scratch = self.scratch.take()?;
        if !self.pending.is_empty() {
            let held = self.pending.clone();
            return Some(self.give(scratch, held).map(Some));
        }
        if scratch.capacity() == 0 {
            scratch = take_scratch();
        }
        scratch.clear();
        let got = if self.io.multishot_enabled() {
            self.io.read_queued(scratch)
        } else {
            super::recv_now(self.io.as_raw_fd(), scratch)
        };
        let (r, scratch) = match got {
            Ok(read) => read,
            Err(scratch) => {
                self.scratch = Some(scratch);
                return None;
            }
        };
        Some(match r {
            Ok(0) => self.give(scratch, 0..0).map(|_| None),
            Ok(n) => self.give(scratch, 0..n).map(Some),
            Err(e) => {
                self.scratch = Some(scratch);
                Err(e)
            }
        })
    }

    /// Queue a close_notify and send it if the socket takes it without waiting; the TCP
    /// stream, to close. For a stream with no I/O in flight.
    pub(super) fn close_notify_now(self: Box<Self>) -> TcpStream {
        let TlsStream {
            io, mut conn, wbuf, ..
        } = *self;
        if let Some(mut out) = wbuf {
            out.clear();
            conn.send_close_notify();
            while conn.wants_write() && conn.write_tls(&mut out).is_ok() {}
            // SAFETY: send(2) from a live buffer on the descriptor `io` owns; MSG_DONTWAIT:
            // a full socket buffer drops the alert rather than blocking.
            unsafe {
                libc::send(
                    io.as_raw_fd(),
                    out.as_ptr().cast(),
                    out.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
        }
        io
    }

    /// Send close_notify, then shut the TCP write side down.
    pub(super) async fn shutdown(&mut self) -> io::Result<()> {
        if self.wbuf.is_some() {
            self.conn.send_close_notify();
            let _ = self.flush_tls().await;
        }
        self.io.shutdown().await
    }

    pub(super) async fn read<T: IoBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        // SAFETY: the buffer's spare part, as monoio's own reads write into it; only the
        // bytes the read reports are marked initialized.
        let dst = unsafe { std::slice::from_raw_parts_mut(buf.write_ptr(), buf.bytes_total()) };
        match self.read_into(dst).await {
            Ok(n) => {
                // SAFETY: `read_into` wrote `n` bytes at the start of `dst`.
                unsafe { buf.set_init(n) };
                (Ok(n), buf)
            }
            Err(e) => (Err(e), buf),
        }
    }

    pub(super) async fn readv<T: IoVecBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        // The first non-empty part, as monoio-rustls does.
        // SAFETY: iovecs the buffer owns and keeps valid for the call.
        let iov =
            unsafe { std::slice::from_raw_parts(buf.write_iovec_ptr(), buf.write_iovec_len()) };
        let Some(v) = iov.iter().find(|v| v.iov_len > 0) else {
            return (Ok(0), buf);
        };
        // SAFETY: the iovec's memory, writable and owned by `buf`.
        let dst = unsafe { std::slice::from_raw_parts_mut(v.iov_base.cast::<u8>(), v.iov_len) };
        match self.read_into(dst).await {
            Ok(n) => {
                // SAFETY: `n` bytes written at the start of the buffer's first non-empty part.
                unsafe { buf.set_init(n) };
                (Ok(n), buf)
            }
            Err(e) => (Err(e), buf),
        }
    }

    pub(super) async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        // SAFETY: the buffer's initialized bytes, which it owns for the call.
        let src = unsafe { std::slice::from_raw_parts(buf.read_ptr(), buf.bytes_init()) };
        let r = self.write_parts(&[src]).await;
        (r, buf)
    }

    pub(super) async fn writev<T: IoVecBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        // SAFETY: iovecs the buffer owns and keeps valid for the call.
        let iov = unsafe { std::slice::from_raw_parts(buf.read_iovec_ptr(), buf.read_iovec_len()) };
        let mut parts: [&[u8]; 8] = [&[]; 8];
        let k = iov.len().min(parts.len());
        for (p, v) in parts.iter_mut().zip(iov) {
            // SAFETY: each iovec's memory, readable and owned by `buf`.
            *p = unsafe { std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len) };
        }
        let r = self.write_parts(&parts[..k]).await;
        (r, buf)
    }
}

#[cfg(test)]
mod framing_tests {
    use super::Framing;

    /// Two records (a 3-byte body, an empty one, a 300-byte one) given in every split into
    /// two pieces, and byte by byte: mid-record exactly where the bytes so far do not end
    /// at a record's end.
    #[test]
    fn a_record_is_unfinished_until_its_last_byte_came() {
        let mut wire = vec![0x17, 3, 3, 0, 3, b'a', b'b', b'c', 0x17, 3, 3, 0, 0];
        wire.extend([0x17, 3, 3, 1, 44]);
        wire.extend([7u8; 300]);
        let ends = [8, 13, wire.len()];
        for cut in 0..=wire.len() {
            let mut f = Framing::default();
            f.advance(&wire[..cut]);
            let expect_mid = cut != 0 && !ends.contains(&cut);
            assert_eq!(f.mid_record(), expect_mid, "cut at {cut}");
            f.advance(&wire[cut..]);
            assert!(!f.mid_record(), "all of it, cut at {cut}");
        }
        let mut f = Framing::default();
        for (i, b) in wire.iter().enumerate() {
            f.advance(std::slice::from_ref(b));
            assert_eq!(f.mid_record(), !ends.contains(&(i + 1)), "byte {i}");
        }
    }
}
