//! One client connection: read a request head, hand it to its route's action (the exchange
//! for a proxied route, the answer for a `return`, the file server for a `static`), repeat.
//!
//! - The first head (and any head once its first byte arrived) must arrive within the header
//!   timeout (408 if part of it came, a quiet close if nothing did); between requests the idle
//!   timeout applies, and shutdown closes the connection there, never in the middle of a
//!   request.
//! - Pipelined requests are answered in order: bytes after one request stay in `from_client`
//!   and are parsed after its response.
//! - Every error the proxy answers itself is a complete response with a length and
//!   `Connection: close`, followed by a lingering close (the client gets to read it even when
//!   it is still sending).
//! - Nothing is logged per request: errors are counted.

use crate::answer::AnswerCtx;
use crate::conn::{linger, respond_error, send_answer, ClientConn, Next};
use crate::error::ProxyError;
use crate::exchange;
use crate::io::{read_more, IoFail};
use crate::request::{prepare_request, worth_parsing, Dispatch, HeadFields, IpText, RequestInfo};
use crate::worker::{ConnBufs, ConnGuard, ProxyWorker};
use bytes::BytesMut;
use monoio::net::TcpStream;
use monoio::time::Instant;
use rustls::HandshakeKind;
use rustls::ServerConfig;
use shared::shutdown::Wait;
use shared::stream::{accept, AcceptFail, Stream};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

pub async fn serve(w: Rc<ProxyWorker>, stream: TcpStream, peer: SocketAddr, guard: ConnGuard) {
    serve_stream(w, Stream::from(stream), peer, guard).await
}

/// An HTTPS client of listener `listener`: the handshake first, in this task, under the
/// header timeout, with the certificates of the current generation (a reload's new ones
/// apply to new handshakes; `start` is the listener's own, should a reload have dropped its
/// TLS); then the requests as on a plain connection. A failed handshake (or plain HTTP,
/// answered with nginx's 400) is counted, never logged.
pub async fn serve_tls(
    w: Rc<ProxyWorker>,
    tcp: TcpStream,
    peer: SocketAddr,
    guard: ConnGuard,
    (listener, start): (usize, Arc<ServerConfig>),
) {
    let g = w.generation();
    let tls = g.cfg.listeners.get(listener).and_then(|l| l.tls.as_ref());
    let tls = tls.map_or(start, |t| t.built.config.clone());
    let t = &g.cfg.timeouts;
    let deadline = shared::clock::deadline(t.header);
    // The handshake in an allocation of its own, and its stream boxed as it comes out: a
    // rustls connection (1.3 KB) inline would weigh on the task for the connection's life.
    let handshake = Box::pin(monoio::time::timeout_at(deadline, accept(tcp, tls)));
    let stream = match handshake.await.map(|r| r.map(Box::new)) {
        Ok(Ok(t)) => {
            w.stats.tls_handshakes.incr();
            if t.session().handshake_kind() == Some(HandshakeKind::Resumed) {
                w.stats.tls_resumed.incr();
            }
            Stream::Tls(t)
        }
        Ok(Err(AcceptFail::NotTls(tcp))) => {
            w.stats.tls_failed.incr();
            w.stats.tls_plain_http.incr();
            return plain_http_to_tls_port(t.send, tcp).await;
        }
        // Failed or timed out: dropping the handshake closed the connection.
        Ok(Err(AcceptFail::Failed(_))) | Err(_) => return w.stats.tls_failed.incr(),
    };
    drop(g);
    serve_stream(w, stream, peer, guard).await
}

/// nginx's answer to plain HTTP on an HTTPS port: 400, then a lingering close.
async fn plain_http_to_tls_port(send: Duration, mut tcp: TcpStream) {
    use monoio::io::AsyncWriteRentExt;
    const ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\
        Content-Length: 47\r\nConnection: close\r\n\r\n\
        The plain HTTP request was sent to HTTPS port\r\n";
    let sent = monoio::time::timeout(send, tcp.write_all(ANSWER)).await;
    if !matches!(sent, Ok((Ok(_), _))) {
        return;
    }
    linger(&mut tcp, BytesMut::with_capacity(4096)).await
}

async fn serve_stream(w: Rc<ProxyWorker>, stream: Stream, peer: SocketAddr, guard: ConnGuard) {
    let _guard = guard;
    let bufs = w.buffers.take_conn_bufs();
    let mut ip = IpText::new(peer.ip());
    ip.set_https(stream.is_tls());
    let mut c = ClientConn {
        w: w.clone(),
        g: w.generation(),
        stream,
        ip,
        from_client: bufs.from_client,
        to_upstream: bufs.to_upstream,
        to_client: bufs.to_client,
        rec: crate::record::Record::default(),
        logreq: Default::default(),
        corked: false,
        nonblocking: false,
        fields: HeadFields::default(),
        response_fields: Default::default(),
    };
    let end = requests(&mut c).await;
    let ClientConn {
        stream,
        g,
        from_client,
        to_upstream,
        to_client,
        corked,
        ..
    } = c;
    w.buffers.give_conn_bufs(ConnBufs {
        from_client,
        to_upstream,
        to_client,
    });
    // A tunnel may outlive many reloads: it keeps two timeouts, not its generation (whose
    // pools, stores and open files would stay with it).
    let limits = crate::tunnel::Limits::of(&g.cfg.timeouts);
    drop(g);
    match end {
        // Boxed: a WebSocket's relay state (2.7 KB) need not be part of every connection's task.
        End::Tunnel(up) => Box::pin(crate::tunnel::run(limits, stream, up)).await,
        End::Finished if corked => stream.close_now_corked(),
        End::Finished => stream.close_now(),
        End::Close => {}
    }
}

/// How a client connection ends.
enum End {
    /// Dropping the stream closes it (monoio's way: with io_uring a close op, plus a cancel
    /// of that op when the stream is dropped before it completes).
    Close,
    /// No I/O on the stream is in flight: close the fd at once (see `close_now`).
    Finished,
    /// A WebSocket upgrade: relay bytes with this upstream connection.
    Tunnel(Stream),
}

/// Serve requests until the connection is done.
async fn requests(c: &mut ClientConn) -> End {
    let w = c.w.clone();
    let mut stop = w.life.shutdown.wait();
    let mut first = true;
    let mut first_answer = true;
    loop {
        let info = match read_head(c, &mut stop, first).await {
            Ok(Some(info)) => info,
            Ok(None) => return End::Close,
            Err(e) => {
                if w.obs.access_log.is_some() {
                    c.logreq.capture(&c.ip, &c.from_client);
                }
                respond_error(c, e).await;
                finish(c);
                return End::Close;
            }
        };
        first = false;
        c.rec.route = Some(info.route);
        // Saturating: the declared length is the client's number (the codec bounds it to
        // 2^63-1, but this sum must not trust that to stay in range).
        c.rec.bytes_in = (info.head_len as u64).saturating_add(match info.body {
            shared::http::BodyKind::Length(n) => n,
            _ => 0,
        });
        if w.obs.access_log.is_some() {
            c.logreq.capture(&c.ip, &c.from_client[..info.head_len]);
        }
        let next = match info.dispatch {
            Dispatch::Proxy { group } => exchange::run(c, info, group).await,
            Dispatch::Cached { cache, group } => exchange::cached::run(c, info, cache, group).await,
            Dispatch::Answered { skip, close } => send_answer(c, &info, skip, close).await,
            Dispatch::Static { site, query } => {
                let g = c.g.clone();
                crate::static_serve::serve(c, g.site(site), &info, &query).await
            }
        };
        finish(c);
        match next {
            // The client came back for more: from its second request on, the connection is
            // read through a multishot receive (not from the first: a connection that carries
            // one request would pay a receive armed after it and a cancel at its close).
            Next::KeepAlive if first_answer => {
                first_answer = false;
                c.stream.multishot_recv();
            }
            Next::KeepAlive => {}
            Next::Close => return End::Close,
            Next::Finished => return End::Finished,
            Next::Tunnel(up) => return End::Tunnel(up),
        }
    }
}

/// What rendering a `return` takes from the worker.
fn answer_ctx(w: &ProxyWorker) -> AnswerCtx<'_> {
    AnswerCtx {
        rng: &w.rng,
        draining: w.life.draining(),
    }
}

/// The request ended: its record goes to the worker's metrics and access log.
fn finish(c: &mut ClientConn) {
    c.w.finish(&c.g.cfg, &c.rec, &c.logreq);
}

/// Read until a whole request head is in `from_client`. `Ok(None)`: the connection ends quietly
/// (closed by the client, idle timeout, or shutdown while idle).
async fn read_head(
    c: &mut ClientConn,
    stop: &mut Wait,
    first: bool,
) -> Result<Option<RequestInfo>, ProxyError> {
    c.take_current_generation();
    let (header, idle_timeout) = (c.g.cfg.timeouts.header, c.g.cfg.timeouts.idle);
    let mut deadline = first.then(|| shared::clock::deadline(header));
    // Bytes of `from_client` already parsed as an incomplete head.
    let mut parsed = 0;
    loop {
        if !c.from_client.is_empty() {
            if parsed == 0 {
                // The request's first bytes (or, pipelined, its whole head): its clock starts.
                c.rec = if c.w.obs.timing {
                    crate::record::Record::new(shared::clock::loop_now())
                } else {
                    crate::record::Record::default()
                };
                c.rec.measure_head = c.w.obs.access_log.is_some();
            }
            if worth_parsing(&c.from_client, parsed, &c.g.cfg.limits.codec) {
                c.take_current_generation();
                if let Some(info) = prepare_request(
                    answer_ctx(&c.w),
                    &c.g,
                    &c.from_client,
                    &c.ip,
                    &mut c.to_upstream,
                    &mut c.fields,
                )? {
                    return Ok(Some(info));
                }
            }
            parsed = c.from_client.len();
            if deadline.is_none() {
                deadline = Some(shared::clock::deadline(header));
            }
        }
        let idle = c.from_client.is_empty();
        let until = deadline.unwrap_or_else(|| shared::clock::deadline(idle_timeout));
        if idle && c.stream.waits_bufferless() {
            match idle_wait(c, stop, until).await {
                // The read below completes at once, or waits as before.
                Waited::Arrived | Waited::Unable => {}
                Waited::TimedOut | Waited::Stopped => return Ok(None),
            }
        }
        let buf = std::mem::take(&mut c.from_client);
        let read = read_more(&mut c.stream, buf, 4096, until);
        let r = if idle {
            monoio::select! {
                r = read => r,
                _ = &mut *stop => return Ok(None),
            }
        } else {
            read.await
        };
        match r {
            Ok((0, _)) => return Ok(None),
            Ok((_, buf)) => c.from_client = buf,
            // Nothing of a request arrived: close quietly (as nginx does), no 408.
            Err(IoFail::Timeout) if idle => return Ok(None),
            Err(IoFail::Timeout) => return Err(ProxyError::HeaderTimeout),
            Err(IoFail::Error(_)) => return Ok(None),
        }
    }
}

/// How a keep-alive client's wait between requests ended.
enum Waited {
    /// Its next bytes (or its end) arrived: a read completes at once.
    Arrived,
    /// The receive could not wait without a buffer (the ring is short): read to wait.
    Unable,
    TimedOut,
    Stopped,
}

/// A keep-alive client between requests, read through a multishot receive: wait for its
/// next bytes holding no buffer, as nginx frees an idle connection's buffers. Its set goes
/// back to the worker's pool, and a set is taken again when it speaks (or when the wait
/// cannot be had without a buffer); a client that times out or is stopped leaves with none.
/// A client that thinks for a while costs its task and its socket, not 10 KiB of buffers.
async fn idle_wait(c: &mut ClientConn, stop: &mut Wait, until: Instant) -> Waited {
    if c.stream.tcp().multishot_queued() {
        return Waited::Arrived;
    }
    c.w.buffers.give_conn_bufs(ConnBufs {
        from_client: std::mem::take(&mut c.from_client),
        to_upstream: std::mem::take(&mut c.to_upstream),
        to_client: std::mem::take(&mut c.to_client),
    });
    let ready = monoio::time::timeout_at(until, c.stream.multishot_ready());
    let waited = monoio::select! {
        r = ready => match r {
            Ok(true) => Waited::Arrived,
            Ok(false) => Waited::Unable,
            Err(_) => Waited::TimedOut,
        },
        _ = &mut *stop => Waited::Stopped,
    };
    if matches!(waited, Waited::Arrived | Waited::Unable) {
        let bufs = c.w.buffers.take_conn_bufs();
        (c.from_client, c.to_upstream, c.to_client) =
            (bufs.from_client, bufs.to_upstream, bufs.to_client);
    }
    waited
}

#[cfg(test)]
mod tests {
    use super::worth_parsing;
    use shared::http::Limits;

    fn future_size<A, B, C, D, F>(_: impl FnOnce(A, B, C, D) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn future_size5<A, B, C, D, E, F>(_: impl FnOnce(A, B, C, D, E) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A client connection's task is as large as its largest state, which it carries idle
    /// too: the rare large ones (a cache miss's fetch, a TLS upstream handshake) live in
    /// allocations of their own. 100k idle clients must not cost 100k copies of them.
    #[test]
    fn a_client_connection_task_stays_small() {
        let (plain, tls) = (future_size(super::serve), future_size5(super::serve_tls));
        eprintln!("serve: {plain} bytes, serve_tls: {tls} bytes");
        // 8.6 and 10 KB (release) before the large states moved out; 4.7 and 4.8 KB after,
        // 5.1 and 5.2 KB in a debug build.
        assert!(plain <= 6 * 1024, "serve: {plain} bytes");
        assert!(tls <= 6 * 1024, "serve_tls: {tls} bytes");
    }

    #[test]
    fn heads_are_parsed_again_only_when_they_may_be_complete() {
        let l = Limits::default();
        let head = b"GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n\r\n";
        // The first bytes always.
        assert!(worth_parsing(b"G", 0, &l));
        // Growing without an empty line: no.
        for end in 2..head.len() - 1 {
            assert!(!worth_parsing(&head[..end], end - 1, &l), "{end}");
        }
        // The empty line, whole or straddling the old end.
        for parsed in head.len() - 4..head.len() {
            assert!(worth_parsing(head, parsed, &l), "{parsed}");
        }
        // A bare LF empty line (the codec rejects it).
        assert!(worth_parsing(b"GET / HTTP/1.1\nHost: a\n\n", 20, &l));
        // Limits: crossing the request-line limit, and at or past the head limit.
        let long = vec![b'a'; l.max_request_line + 1];
        assert!(worth_parsing(&long, l.max_request_line - 1, &l));
        assert!(!worth_parsing(&long, l.max_request_line, &l));
        let huge = vec![b'a'; l.max_head];
        assert!(worth_parsing(&huge, l.max_head - 1, &l));
    }
}
