//! Answers from the store: a hit (from memory, or its body with `sendfile(2)` from the
//! worker's body file), a 304 or a 412 from a stored response, the proxy's short answers; the
//! head written whole with `Age`, `X-Cache` and the length.

use super::{client_gone, next_after};
use crate::cache::{validate, CacheStatus, Hit};
use crate::config::route_opts::HeaderEdits;
use crate::conn::{cork_last_answer, ClientConn, Next};
use crate::io::IoFail;
use crate::request::RequestInfo;
use crate::worker::ProxyWorker;
use bytes::{Buf, Bytes, BytesMut};
use monoio::io::AsyncWriteRentExt;
use shared::http::encode::{write_header, write_header_u64, write_simple_answer};
use shared::http::{RequestMethod, Version};
use std::time::Duration;

/// Bodies up to this size are copied behind the head and sent with one write; larger ones
/// go out with the head in one `writev`, straight from the stored `Bytes` (no copy).
/// (Small enough that the connection's head buffer stays within the size the worker keeps
/// for reuse.)
pub(super) const COPY_BODY_MAX: usize = 1024;
/// The head of a response served from the store.
pub(super) struct Stored<'a> {
    pub(super) head: &'a [u8],
    pub(super) age: u64,
    pub(super) status: CacheStatus,
    pub(super) len: u64,
    /// Whether Content-Length is sent (not on a 304).
    pub(super) length: bool,
    /// A 206 of bytes `.0..=.1` of a body of `.2` bytes (`len` is the range's length).
    pub(super) range: Option<(u64, u64, u64)>,
    /// 103 Early Hints heads sent first, to an HTTP/1.1 client (`Hit::interim`).
    pub(super) interim: &'a [u8],
}

impl<'a> Stored<'a> {
    pub(super) fn new(head: &'a [u8], age: u64, status: CacheStatus, len: u64) -> Self {
        Stored {
            head,
            age,
            status,
            len,
            length: true,
            range: None,
            interim: &[],
        }
    }

    /// The whole client head into `out`: stored fields, Age, X-Cache, Content-Length,
    /// Connection as the client needs it, the empty line. Returns whether the connection
    /// stays.
    pub(super) fn write(
        &self,
        w: &ProxyWorker,
        req: &RequestInfo,
        edits: Option<&HeaderEdits>,
        out: &mut BytesMut,
    ) -> bool {
        let keep = req.keep_alive && (!w.life.draining() || req.pipelined);
        out.clear();
        // In the same write as the final head (RFC 8297: an HTTP/1.0 client gets none).
        if !self.interim.is_empty() && req.version == Version::Http11 {
            out.extend_from_slice(self.interim);
        }
        match self.range {
            None => out.extend_from_slice(self.head),
            Some((first, last, whole)) => {
                // The stored fields under a 206 status line (RFC 9110 15.3.7), and the range.
                let line = self
                    .head
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                out.extend_from_slice(b"HTTP/1.1 206 Partial Content\r\n");
                out.extend_from_slice(&self.head[line..]);
                let mut v = [0u8; 72];
                let n = content_range(&mut v, Some((first, last)), whole);
                write_header(out, b"Content-Range", &v[..n]);
            }
        }
        // The route's response_headers, over the stored fields (not over Age, X-Cache and
        // the length: the cache's own, written after).
        if let Some(e) = edits {
            e.apply_to_head(out, 0);
        }
        write_header_u64(out, b"Age", self.age);
        write_header(out, b"X-Cache", self.status.as_str().as_bytes());
        // RFC 9110 8.6: never on a 204 (the stored head's status line, written by
        // `stored_head`, says which it is).
        let no_content = self.head.get(9..12) == Some(&b"204"[..]);
        if self.length && !no_content {
            write_header_u64(out, b"Content-Length", self.len);
        }
        if !keep {
            write_header(out, b"Connection", b"close");
        } else if req.version == Version::Http10 {
            write_header(out, b"Connection", b"keep-alive");
        }
        out.extend_from_slice(b"\r\n");
        keep
    }
}

/// 412 to a request whose If-Match or If-Unmodified-Since the stored response fails (as
/// nginx answers from its cache), with that response's `age` (RFC 9111 4.2.3: generated
/// from it); the connection stays as the request asked.
pub(super) async fn send_precondition_failed(
    c: &mut ClientConn,
    req: &RequestInfo,
    status: CacheStatus,
    age: u64,
) -> Next {
    let keep = req.keep_alive && (!c.w.life.draining() || req.pipelined);
    send_simple_with(c, req, 412, keep, status, (Some(age), None)).await
}

/// A short answer of the proxy's own to `req` (`status` with its reason as the body, the head
/// alone to a HEAD), with `X-Cache: cache`; `Connection: close` unless `keep`.
pub(super) async fn send_simple(
    c: &mut ClientConn,
    req: &RequestInfo,
    status: u16,
    keep: bool,
    cache: CacheStatus,
) -> Next {
    send_simple_with(c, req, status, keep, cache, (None, None)).await
}

/// `bytes first-last/whole`, or `bytes */whole` (RFC 9110 14.4), into `out`: its length.
pub(super) fn content_range(out: &mut [u8; 72], range: Option<(u64, u64)>, whole: u64) -> usize {
    use std::io::Write;
    let mut w = &mut out[..];
    // 72 bytes hold the longest (three 20-digit numbers and 9 more): the write cannot fail.
    let _ = match range {
        Some((first, last)) => write!(w, "bytes {first}-{last}/{whole}"),
        None => write!(w, "bytes */{whole}"),
    };
    72 - w.len()
}

/// `n` in decimal into `out`: its length (20 digits hold any u64).
fn decimal(out: &mut [u8; 20], n: u64) -> usize {
    use std::io::Write;
    let mut w = &mut out[..];
    let _ = write!(w, "{n}");
    20 - w.len()
}

/// 416 to a range of a stored response of `whole` bytes that holds none of them, with
/// `Content-Range: bytes */whole` (RFC 9110 15.5.17) and the stored response's `age`.
pub(super) async fn send_unsatisfiable(
    c: &mut ClientConn,
    req: &RequestInfo,
    (whole, age): (u64, u64),
    cache: CacheStatus,
) -> Next {
    let keep = req.keep_alive && (!c.w.life.draining() || req.pipelined);
    send_simple_with(c, req, 416, keep, cache, (Some(age), Some(whole))).await
}

/// A short answer of the proxy's own with `X-Cache: cache`; `age`: generated from a stored
/// response of that age; `unsatisfied`: a 416's complete length, for its Content-Range.
async fn send_simple_with(
    c: &mut ClientConn,
    req: &RequestInfo,
    status: u16,
    keep: bool,
    cache: CacheStatus,
    (age, unsatisfied): (Option<u64>, Option<u64>),
) -> Next {
    c.to_client.clear();
    let mut v = [0u8; 72];
    let n = unsatisfied.map_or(0, |whole| content_range(&mut v, None, whole));
    let mut a = [0u8; 20];
    let an = age.map_or(0, |age| decimal(&mut a, age));
    // In the order a hit's head has them.
    let mut fields: [(&[u8], &[u8]); 4] = [(b"X-Cache", cache.as_str().as_bytes()); 4];
    let mut count = 0;
    let mut add = |field| {
        fields[count] = field;
        count += 1;
    };
    if an > 0 {
        add((b"Age", &a[..an]));
    }
    add((b"X-Cache", cache.as_str().as_bytes()));
    if n > 0 {
        add((b"Content-Range", &v[..n]));
    }
    // An HTTP/1.0 client closes unless told the connection stays (RFC 9112 9.3).
    if keep && req.version == Version::Http10 {
        add((b"Connection", b"keep-alive"));
    }
    let head_only = req.method == RequestMethod::Head;
    let out = &mut c.to_client;
    write_simple_answer(
        out,
        Version::Http11,
        status,
        !keep,
        &fields[..count],
        head_only,
    );
    if c.send_cout().await.is_err() {
        return client_gone(&mut c.rec);
    }
    next_after(keep)
}

/// A 304 from a stored response whose validators match the client's condition (as nginx
/// answers conditional requests from its cache).
pub(super) async fn send_not_modified(
    c: &mut ClientConn,
    req: &RequestInfo,
    hit: &Hit,
    status: CacheStatus,
) -> Next {
    let head = validate::not_modified_head(&hit.head);
    let mut out = Stored::new(&head, hit.age, status, 0);
    out.length = false;
    send_stored(c, req, out, None).await
}

/// A stored response (`X-Cache: HIT`, or STALE while it revalidates), from the body file
/// when it has a copy there.
pub(super) async fn send_hit(
    c: &mut ClientConn,
    req: &RequestInfo,
    hit: Hit,
    status: CacheStatus,
) -> Next {
    let len = hit.body.len() as u64;
    let mut out = Stored::new(&hit.head, hit.age, status, len);
    out.interim = &hit.interim;
    // sendfile writes the socket itself: never under TLS (the memory path encrypts).
    match (
        hit.file,
        req.method == RequestMethod::Head || c.stream.is_tls(),
    ) {
        (Some(file), false) => send_from_file(c, req, out, hit.body, file).await,
        _ => send_stored(c, req, out, Some(hit.body)).await,
    }
}

/// 206: bytes `first..=last` of the stored response `hit`, whose body is the part `held` of
/// it, from memory (a `Bytes` view of the stored body: no copy).
pub(super) async fn send_partial(
    c: &mut ClientConn,
    req: &RequestInfo,
    hit: Hit,
    (first, last, held): (u64, u64, crate::cache::Held),
    status: CacheStatus,
) -> Next {
    let at = (first - held.start) as usize;
    let body = hit.body.slice(at..=at + (last - first) as usize);
    let mut out = Stored::new(&hit.head, hit.age, status, last - first + 1);
    out.range = Some((first, last, held.total));
    send_stored(c, req, out, Some(body)).await
}

/// Send a stored response: the head, then `body` (none for HEAD).
pub(super) async fn send_stored(
    c: &mut ClientConn,
    req: &RequestInfo,
    out: Stored<'_>,
    body: Option<Bytes>,
) -> Next {
    let w = c.w.clone();
    let edits = c.g.cfg.routes[req.route].response_edits();
    let keep = out.write(&w, req, edits, &mut c.to_client);
    let head_only = req.method == RequestMethod::Head;
    let body = body.filter(|b| !head_only && !b.is_empty());
    let separate = match body {
        Some(b) if b.len() <= COPY_BODY_MAX => {
            c.to_client.extend_from_slice(&b);
            None
        }
        other => other,
    };
    if !keep {
        cork_last_answer(c);
    }
    let sent = match separate {
        None => c.send_cout().await.is_ok(),
        Some(body) => {
            let (buf, send) = (std::mem::take(&mut c.to_client), c.g.cfg.timeouts.send);
            let written = write_head_and_body(c, &w, buf, body, send).await;
            written.map(|b| c.to_client = b).is_some()
        }
    };
    if !sent {
        return client_gone(&mut c.rec);
    }
    next_after(keep)
}

/// Send a stored response whose body is in the worker's body file: the head with
/// `send(MSG_MORE)`, the body with `sendfile(2)`, both direct non-blocking syscalls; whatever
/// the socket did not take goes out from `body` (the file's mapping) the usual way. `body`
/// keeps the file range alive (its pages are punched out only when its last `Bytes` goes).
pub(super) async fn send_from_file(
    c: &mut ClientConn,
    req: &RequestInfo,
    out: Stored<'_>,
    body: Bytes,
    file: crate::cache::memfd::FileRange,
) -> Next {
    use std::os::fd::AsRawFd;
    let fd = match &c.stream {
        shared::stream::Stream::Plain(s) => s.as_raw_fd(),
        // TLS encrypts in user space: the body goes out from memory.
        shared::stream::Stream::Tls(_) => return send_stored(c, req, out, Some(body)).await,
    };
    // sendfile takes no flags: only a non-blocking socket keeps it off the worker thread's
    // back when the client stops reading. A socket that cannot be switched gets the body
    // from memory through the runtime.
    if shared::stream::ensure_nonblocking(fd, &mut c.nonblocking).is_err() {
        return send_stored(c, req, out, Some(body)).await;
    }
    let w = c.w.clone();
    let edits = c.g.cfg.routes[req.route].response_edits();
    let keep = out.write(&w, req, edits, &mut c.to_client);
    if !keep {
        cork_last_answer(c);
    }
    let flags = libc::MSG_MORE | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    // SAFETY: `to_client` is valid for its length.
    let n = unsafe { libc::send(fd, c.to_client.as_ptr().cast(), c.to_client.len(), flags) };
    let head = match sent(n) {
        Some(n) => n,
        None => return client_gone(&mut c.rec),
    };
    c.rec.wrote(&c.to_client[..head]);
    let send = c.g.cfg.timeouts.send;
    if head < c.to_client.len() {
        let mut buf = std::mem::take(&mut c.to_client);
        buf.advance(head);
        match write_head_and_body(c, &w, buf, body, send).await {
            Some(b) => c.to_client = b,
            None => return client_gone(&mut c.rec),
        }
        return next_after(keep);
    }
    // SAFETY: the body file lives as long as the worker's store, and `body` keeps this range
    // of it from being punched out while it is sent.
    let from = unsafe { std::os::fd::BorrowedFd::borrow_raw(file.fd) };
    // The whole body with sendfile, waiting for room each time the socket is full (`send`
    // bounds each wait, not the body: a large hit to a slow reader takes its time).
    let moved = match &c.stream {
        shared::stream::Stream::Plain(tcp) => {
            let len = body.len() as u64;
            crate::direct::sendfile_all(tcp, from, file.offset, len, send).await
        }
        shared::stream::Stream::Tls(_) => Err(crate::direct::Stuck),
    };
    if moved.is_err() {
        return client_gone(&mut c.rec);
    }
    c.rec.wrote_body(body.len() as u64);
    next_after(keep)
}

/// What a non-blocking send took: `n` bytes, none if the socket is full, `None` on error.
pub(super) fn sent(n: isize) -> Option<usize> {
    if n >= 0 {
        return Some(n as usize);
    }
    let e = std::io::Error::last_os_error().kind();
    (e == std::io::ErrorKind::WouldBlock || e == std::io::ErrorKind::Interrupted).then_some(0)
}

/// A response head and a stored body, for one `writev`: the iovec pair lives on the heap (in a
/// box the worker reuses), so its address holds while the runtime owns the value.
pub(super) struct HeadAndBody {
    iov: Box<[libc::iovec; 2]>,
    head: BytesMut,
    body: Bytes,
}

/// The most one runtime write of a stored body carries. io_uring completes a stream send only
/// when all of it is sent, so `send` (the longest stall of one write) needs writes that a
/// client reading steadily takes well within it: 256 KiB is 2 s at 1 Mbit/s.
const WRITE_CHUNK: usize = 256 << 10;

impl HeadAndBody {
    /// Point the iovecs at what is left after `done` bytes, at most `WRITE_CHUNK` of it.
    fn skip(&mut self, done: usize) {
        let (h, b) = (&self.head[..], &self.body[..]);
        let (first, second) = if done < h.len() {
            let first = &h[done..];
            (
                first,
                &b[..b.len().min(WRITE_CHUNK.saturating_sub(first.len()))],
            )
        } else {
            let rest = &b[done - h.len()..];
            (&rest[..rest.len().min(WRITE_CHUNK)], &b[b.len()..])
        };
        self.iov[0] = libc::iovec {
            iov_base: first.as_ptr() as *mut libc::c_void,
            iov_len: first.len(),
        };
        self.iov[1] = libc::iovec {
            iov_base: second.as_ptr() as *mut libc::c_void,
            iov_len: second.len(),
        };
    }
}

// SAFETY: the iovecs point into `head` and `body`, heap buffers owned by the value and not
// changed while the runtime holds it; the iovec array itself is boxed, so moving the value
// does not move it.
unsafe impl monoio::buf::IoVecBuf for HeadAndBody {
    fn read_iovec_ptr(&self) -> *const libc::iovec {
        self.iov.as_ptr()
    }
    fn read_iovec_len(&self) -> usize {
        2
    }
}

/// Write `head` then `body` with `writev` (`WRITE_CHUNK` at a time), each call within `limit`
/// (`send`: the longest stall of one write, as nginx's `send_timeout`, not the whole body's
/// time). The head buffer back, or `None`: the client is gone or stalled.
pub(super) async fn write_head_and_body(
    c: &mut ClientConn,
    w: &ProxyWorker,
    head: BytesMut,
    body: Bytes,
    limit: Duration,
) -> Option<BytesMut> {
    use monoio::io::AsyncWriteRent;
    let total = head.len() + body.len();
    let mut v = HeadAndBody {
        iov: w.buffers.take_iovecs(),
        head,
        body,
    };
    let mut done = 0;
    while done < total {
        v.skip(done);
        let (r, back) = shared::deadline::timeout(limit, c.stream.writev(v))
            .await
            .ok()?;
        v = back;
        match r {
            Ok(n) if n > 0 => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
    w.buffers.give_iovecs(v.iov);
    c.rec.wrote(&v.head);
    c.rec.wrote_body(v.body.len() as u64);
    Some(v.head)
}

/// Write all of `b` (stored body bytes, shared with the store: no copy), `WRITE_CHUNK` at a
/// time, each write within `limit` (a stall, not the whole body: see `write_head_and_body`).
pub(super) async fn write_bytes(
    c: &mut ClientConn,
    b: Bytes,
    limit: Duration,
) -> Result<(), IoFail> {
    let mut done = 0;
    while done < b.len() {
        let end = b.len().min(done + WRITE_CHUNK);
        match shared::deadline::timeout(limit, c.stream.write_all(b.slice(done..end))).await {
            Err(_) => return Err(IoFail::Timeout),
            Ok((Ok(_), _)) => done = end,
            Ok((Err(e), _)) => return Err(IoFail::Error(e.kind())),
        }
    }
    Ok(())
}
