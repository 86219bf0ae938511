//! A client connection as every action uses it: its state ([`ClientConn`]: stream, buffers,
//! generation, the request's record), what it does after a request ([`Next`]), and the ways
//! an answer leaves on it (the connection's own error answers, the lingering close, a
//! `return`'s rendered answer, the cork before a last answer). The loop that reads requests
//! and hands them to their actions is `crate::client`.

use crate::config::Timeouts;
use crate::error::ProxyError;
use crate::generation::Generation;
use crate::io::{read_more, write_all, IoFail};
use crate::lingering::{Lingering, STOPPING_LINGER};
use crate::request::{ClientAddr, HeadFields, RequestInfo};
use crate::worker::{Lifecycle, ProxyWorker};
use bytes::{Buf, BytesMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use shared::http::encode::write_simple_answer;
use shared::http::Version;
use shared::stream::Stream;
use std::rc::Rc;

/// What the client connection does next.
pub enum Next {
    KeepAlive,
    Close,
    /// The response is complete and the connection closes: every I/O on the client socket
    /// completed (none was dropped in flight), so its fd can be closed directly.
    Finished,
    /// A WebSocket upgrade succeeded: relay bytes with its upstream connection, within
    /// the route's limits, holding the server's room.
    Tunnel(crate::tunnel::Tunnel),
}

/// A client connection's state while it serves requests (in its request frame,
/// `client::active`): its buffers come from the worker's pool when its bytes arrive and go
/// back when it goes idle, reused by every request in between.
pub struct ClientConn {
    pub w: Rc<ProxyWorker>,
    /// The generation of the request being served (of the last one between requests): taken
    /// from the worker when a head is parsed, used until the exchange ends.
    pub g: Rc<Generation>,
    pub stream: Stream,
    /// The client's address for the request being served (`request::ClientAddr`).
    pub ip: ClientAddr,
    /// Bytes read from the client and not yet consumed.
    pub from_client: BytesMut,
    /// The upstream request head being built.
    pub to_upstream: BytesMut,
    /// The client response head being built (and chunk framing).
    pub to_client: BytesMut,
    /// The current request's outcome, finished once when it ends (`finish`).
    pub rec: crate::record::Record,
    /// What the access log shows of the current request (filled only when a log is on).
    pub logreq: crate::access_log::LogRequest,
    /// The last answer was written corked (`cork_last_answer`): closing must send it.
    pub corked: bool,
    /// The connection ends with a lingering close (`linger_close`), once its request is
    /// finished: the time spent lingering is not the request's.
    pub lingers: bool,
    /// The socket was made O_NONBLOCK, for good, for direct syscalls (sendfile of cache hits
    /// and static files: `shared::stream::ensure_nonblocking`). Never switched back.
    pub nonblocking: bool,
    /// A cached route's request head, as its one parse found it (`request::HeadFields`).
    pub fields: HeadFields,
    /// A cache fetch's response head, as its one parse found it (`forward::ResponseFields`).
    pub response_fields: crate::forward::ResponseFields,
    /// Bytes read from the client on this connection, and where in them the request being
    /// served began: a request counts what was read of it (`client::settle`), never more
    /// than its head and a declared body.
    pub received: std::rc::Rc<std::cell::Cell<u64>>,
    pub request_at: u64,
}

/// Hold what is written next on the client socket back until it is closed (TCP_CORK): the
/// kernel then sends the last answer's tail and the FIN in one segment instead of two (a
/// connection-per-request client's CPU per request: about -10 % for a `return`). Only for
/// an answer written whole, right before `Next::Finished` (`Stream::close_now_corked`
/// then sends it with the FIN): never for a response streamed from an upstream, whose pieces must not wait.
pub fn cork_last_answer(c: &mut ClientConn) {
    use std::os::fd::AsRawFd;
    c.corked = true;
    let stream = &c.stream;
    let on: libc::c_int = 1;
    // SAFETY: a valid fd and a c_int option value of the right size.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Make the client connection end in a reset when it is closed (SO_LINGER on with a zero
/// timeout: close(2) then sends RST, not FIN). For a response whose end only the close marks
/// (close-delimited, to an HTTP/1.0 client) and whose body failed upstream mid-way: a FIN
/// would tell the client that it has the whole body, a reset tells it that it has not. The
/// connection must then be closed as it is (dropped), never half-closed first: a
/// shutdown(2) would send the FIN after all.
pub fn reset_on_close(c: &ClientConn) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let abort = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid fd and a `linger` option value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            c.stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &abort as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl ClientConn {
    /// The upstream's part of the request ended now ([`Record::upstream_ended`]). Only the
    /// access log shows the time: no clock read per request without one.
    ///
    /// [`Record::upstream_ended`]: crate::record::Record::upstream_ended
    pub fn upstream_ended(&mut self) {
        if self.g.access_log.is_some() {
            self.rec.upstream_ended(shared::clock::loop_now());
        }
    }

    /// Write all of `to_client` (an answer or a head built there) within the send timeout, noting
    /// it in the request's record; `Err`: the client is gone or too slow.
    pub async fn send_cout(&mut self) -> Result<(), IoFail> {
        let buf = std::mem::take(&mut self.to_client);
        let buf = write_all(&mut self.stream, buf, self.g.cfg.timeouts.send)
            .await
            .map_err(|e| e.fail)?;
        self.rec.wrote(&buf);
        self.to_client = buf;
        Ok(())
    }

    /// Move to the worker's current generation if a reload replaced ours (no reference count
    /// touched when it did not). Only between requests: the one in flight keeps its own.
    pub fn take_current_generation(&mut self) {
        if !self.w.is_current(&self.g) {
            self.g = self.w.generation();
        }
    }
}

/// Answer with the error's status (if one still makes sense) and close gracefully;
/// `head_only`: the answer to a HEAD, its head alone (RFC 9110 9.3.2).
pub async fn respond_error(c: &mut ClientConn, e: ProxyError, head_only: bool) {
    respond_error_with(c, e, &[], head_only).await
}

/// [`respond_error`] with `fields` added to the answer's head; `head_only`: the answer to a
/// HEAD, its head alone.
pub async fn respond_error_with(
    c: &mut ClientConn,
    e: ProxyError,
    fields: &[(&[u8], &[u8])],
    head_only: bool,
) {
    // The time spent on the last server tried when it did not answer (a timeout, a refused
    // connection: nginx's `$upstream_response_time` has it too); only the access log shows it.
    if c.rec.upstream_time.is_none() {
        c.upstream_ended();
    }
    c.rec.failed(e);
    let Some(status) = e.status() else { return };
    c.to_client.clear();
    let out = &mut c.to_client;
    write_simple_answer(out, Version::Http11, status, true, fields, head_only);
    if c.send_cout().await.is_ok() {
        linger_close(c);
    }
}

/// End the connection with a lingering close (`crate::lingering`), once its request is
/// finished and counted: half-close, then read and discard what the client still sends, so
/// that closing with unread data does not reset the connection before the client read our
/// answer. The caller returns `Next::Close`; `client::requests` lingers (`lingering_close`).
pub fn linger_close(c: &mut ClientConn) {
    c.lingers = true;
}

/// The lingering close `linger_close` asked for.
pub async fn lingering_close(c: &mut ClientConn) {
    let buf = std::mem::take(&mut c.from_client);
    // Over TLS: the close_notify goes before the FIN; what the client still sends is then
    // read raw, undecrypted (an early answer's refused body dropped its read in flight,
    // which leaves the TLS stream unreadable: the lingering would end at once).
    // The close_notify waits for room in the socket, within the send timeout as any write
    // to the client: one that never reads is not waited for longer (and is not lingered
    // for: it does not take the answer; the connection closes).
    let t = &c.g.cfg.timeouts;
    if c.stream
        .shutdown_by(shared::clock::deadline(t.send))
        .await
        .is_err()
    {
        return;
    }
    drain(c.stream.tcp_mut(), buf, lingering(t), &c.w.life).await
}

/// [`lingering_close`] on any stream (a TLS port's plain-HTTP client too), reading into `buf`.
pub async fn linger<S: AsyncReadRent + AsyncWriteRent>(
    s: &mut S,
    buf: BytesMut,
    t: &Timeouts,
    life: &Lifecycle,
) {
    let _ = s.shutdown().await;
    drain(s, buf, lingering(t), life).await
}

/// A lingering close starting now, under `t`'s bounds.
fn lingering(t: &Timeouts) -> Lingering {
    let now = shared::clock::loop_now();
    Lingering::new(now, t.lingering_time, t.lingering_timeout)
}

/// Read and discard what `s` still receives (into `buf`, cleared each time), until it ends
/// or `l` says so; once the worker stops, for `STOPPING_LINGER` at most.
async fn drain<S: AsyncReadRent>(s: &mut S, mut buf: BytesMut, mut l: Lingering, life: &Lifecycle) {
    let mut stopping = false;
    loop {
        let now = shared::clock::loop_now();
        if !stopping && life.draining() {
            stopping = true;
            l = l.ending_by(now + STOPPING_LINGER);
        }
        let Some(until) = l.read_by(now) else { return };
        buf.clear();
        let read = read_more(s, buf, 4096, monoio::time::Instant::from_std(until));
        let got = if stopping {
            read.await
        } else {
            let (stop, handover) = (life.shutdown.wait(), life.handover.wait());
            monoio::select! {
                r = read => r,
                // The read is dropped (its buffer with it): look again, stopping.
                _ = stop => Ok((1, BytesMut::with_capacity(4096))),
                _ = handover => Ok((1, BytesMut::with_capacity(4096))),
            }
        };
        match got {
            Ok((n, b)) if n > 0 => buf = b,
            _ => return,
        }
    }
}

/// The `return` action's I/O: send the answer `request` rendered into `c.to_upstream` for
/// `req`; `skip` is the request body to drop from `from_client` (`None`: it did not arrive
/// whole, the connection closes after the answer).
pub async fn send_answer(
    c: &mut ClientConn,
    req: &RequestInfo,
    skip: Option<usize>,
    close: bool,
) -> Next {
    c.from_client.advance(req.head_len + skip.unwrap_or(0));
    let buf = std::mem::take(&mut c.to_upstream);
    if close && skip.is_some() {
        cork_last_answer(c);
    }
    match write_all(&mut c.stream, buf, c.g.cfg.timeouts.send).await {
        Ok(buf) => {
            c.rec.wrote(&buf);
            c.to_upstream = buf
        }
        Err(_) => {
            c.rec.failed(ProxyError::ClientGone);
            return Next::Close;
        }
    }
    if skip.is_none() {
        // The body still coming is not read: let the client see the answer first.
        linger_close(c);
        Next::Close
    } else if close {
        Next::Finished
    } else {
        Next::KeepAlive
    }
}
