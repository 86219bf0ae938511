//! One client connection: read a request head, hand it to its route's action (the exchange
//! for a proxied route, the answer for a `return`, the file server for a `static`), repeat.
//!
//! - The first head (and any head once its first byte arrived) must arrive within the header
//!   timeout (408 if part of it came, a quiet close if nothing did); between requests the idle
//!   timeout applies, and shutdown closes the connection there, never in the middle of a
//!   request. Part of a head, then the client's end: a close, no answer, a 400 in the log (as
//!   nginx).
//! - Pipelined requests are answered in order: bytes after one request stay in `from_client`
//!   and are parsed after its response.
//! - Every error the proxy answers itself is a complete response with a length and
//!   `Connection: close`, followed by a lingering close (the client gets to read it even when
//!   it is still sending).
//! - Nothing is logged per request: errors are counted.

use crate::answer::AnswerCtx;
use crate::conn::{linger, lingering_close, respond_error, send_answer, ClientConn, Next};
use crate::error::ProxyError;
use crate::exchange;
use crate::io::{read_more, IoFail};
use crate::request::{prepare_request, worth_parsing, ClientAddr, Dispatch, IpText, RequestInfo};
use crate::worker::{ConnBufs, ConnGuard, ProxyWorker};
use bytes::BytesMut;
use monoio::net::TcpStream;
use monoio::time::Instant;
use rustls::HandshakeKind;
use rustls::ServerConfig;
use shared::shutdown::Wait;
use shared::stream::{accept, AcceptFail, PlainStart, Stream};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

/// A plain HTTP client.
pub fn serve(
    w: Rc<ProxyWorker>,
    stream: TcpStream,
    peer: SocketAddr,
    guard: ConnGuard,
) -> impl std::future::Future<Output = ()> {
    serve_stream(w, Stream::from(stream), peer, guard)
}

/// An HTTPS client of listener `listener`: the handshake first, in this task, under the
/// header timeout, with the certificates of the current generation (a reload's new ones
/// apply to new handshakes; `start` is the listener's own, should a reload have dropped its
/// TLS); then the requests as on a plain connection. A failed handshake is counted, never
/// logged; plain HTTP, answered with nginx's 400, is a request too (counted and logged, as
/// nginx has it). A block, not an `async fn`, as `serve_parked`: the task keeps its
/// arguments once.
#[allow(clippy::manual_async_fn)]
pub fn serve_tls(
    w: Rc<ProxyWorker>,
    tcp: TcpStream,
    peer: SocketAddr,
    guard: ConnGuard,
    tls: (usize, Arc<ServerConfig>),
) -> impl std::future::Future<Output = ()> {
    async move {
        if let Some(stream) = handshake(&w, tcp, tls, peer).await {
            serve_stream(w, stream, peer, guard).await
        }
    }
}

/// A client of a PROXY protocol listener (`[[listen]] proxy_protocol = true`): its header
/// first (`proxy_header`), under the header timeout, and nothing past it; the address it
/// names is the client's from then on, for every request (`IpText`: the forwarded fields,
/// `{remote_addr}`, the access log, `purge_from`). Then the requests as on a plain
/// connection. A connection without a valid header is counted and closed (as nginx and
/// HAProxy do: no answer), never served.
///
/// The header's read and the connection's arguments wait in an allocation of their own: the
/// task keeps only its pointer until the header is read, so an idle client of a PROXY
/// listener costs what one of a plain listener does.
pub fn serve_proxied(
    w: Rc<ProxyWorker>,
    tcp: TcpStream,
    peer: SocketAddr,
    guard: ConnGuard,
) -> impl std::future::Future<Output = ()> {
    let header = Box::pin(take_proxy_header(w, tcp, peer, guard));
    async move {
        // Not `if let`: its scrutinee would live on beside the connection's future.
        let Some((w, tcp, peer, guard)) = header.await else {
            return;
        };
        let serve = serve_stream(w, Stream::from(tcp), peer, guard);
        serve.await
    }
}

/// [`serve_proxied`] on an HTTPS listener: the header, then the handshake (as `serve_tls`).
pub fn serve_proxied_tls(
    w: Rc<ProxyWorker>,
    tcp: TcpStream,
    peer: SocketAddr,
    guard: ConnGuard,
    tls: (usize, Arc<ServerConfig>),
) -> impl std::future::Future<Output = ()> {
    let header = Box::pin(async move {
        let taken = take_proxy_header(w, tcp, peer, guard).await;
        taken.map(|t| (t, tls))
    });
    async move {
        let Some(((w, tcp, peer, guard), tls)) = header.await else {
            return;
        };
        let Some(stream) = handshake(&w, tcp, tls, peer).await else {
            return;
        };
        let serve = serve_stream(w, stream, peer, guard);
        serve.await
    }
}

/// A PROXY listener's connection once its header is read: the worker, the socket, the
/// client's address, the connection's count.
type Proxied = (Rc<ProxyWorker>, TcpStream, SocketAddr, ConnGuard);

/// The connection's arguments with the client's address from the PROXY protocol header at
/// the start of `tcp` (`peer` when it names none), or `None` when there is no valid header
/// or the client has its connections open already (counted; dropping them closes the
/// connection).
async fn take_proxy_header(
    w: Rc<ProxyWorker>,
    tcp: TcpStream,
    peer: SocketAddr,
    guard: ConnGuard,
) -> Option<Proxied> {
    let deadline = shared::clock::deadline(w.generation().cfg.timeouts.header);
    match crate::proxy_header::read(&tcp, deadline).await {
        Ok(source) => {
            let client = source.unwrap_or(peer);
            let mut guard = guard;
            // Over the client's `[client_limits] connections`: closed without a byte.
            w.claim(&mut guard, client.ip())
                .then_some((w, tcp, client, guard))
        }
        Err(fail) => {
            w.stats.proxy_protocol_failed(fail);
            None
        }
    }
}

/// The server side of a TLS handshake with the client at `peer`: the stream, or `None` when
/// the connection is done.
async fn handshake(
    w: &ProxyWorker,
    tcp: TcpStream,
    (listener, start): (usize, Arc<ServerConfig>),
    peer: SocketAddr,
) -> Option<Stream> {
    let g = w.generation();
    let tls = g.cfg.listeners.get(listener).and_then(|l| l.tls.as_ref());
    let tls = tls.map_or(start, |t| t.built.config.clone());
    let t = &g.cfg.timeouts;
    let deadline = shared::clock::deadline(t.header);
    // The handshake in an allocation of its own, and its stream boxed as it comes out: a
    // rustls connection (1.3 KB) inline would weigh on the task for the connection's life.
    let handshake = Box::pin(monoio::time::timeout_at(deadline, accept(tcp, tls)));
    match handshake.await.map(|r| r.map(Box::new)) {
        Ok(Ok(t)) => {
            w.stats.tls_handshakes.incr();
            if t.session().handshake_kind() == Some(HandshakeKind::Resumed) {
                w.stats.tls_resumed.incr();
            }
            Some(Stream::Tls(t))
        }
        Ok(Err(AcceptFail::NotTls(plain))) => {
            w.stats.tls_failed.incr();
            w.stats.tls_plain_http.incr();
            Box::pin(plain_http_to_tls_port(w, *plain, peer)).await;
            None
        }
        // Failed or timed out: dropping the handshake closed the connection.
        Ok(Err(AcceptFail::Failed(_))) | Err(_) => {
            w.stats.tls_failed.incr();
            None
        }
    }
}

/// nginx's answer to plain HTTP on an HTTPS port: 400, then a lingering close. A request
/// as nginx has it, counted and logged (`"GET / HTTP/1.1" 400`): its request line (and
/// Referer, User-Agent) from `first`, the bytes that told it from a handshake, when they hold
/// it whole (else `-`), its `request_length` theirs. (nginx reads the whole head before it
/// answers; waiting for it here would keep a client that is not speaking TLS for the header
/// timeout.) A client gone before the answer went is a 499, as elsewhere.
async fn plain_http_to_tls_port(w: &ProxyWorker, plain: PlainStart, peer: SocketAddr) {
    use monoio::io::AsyncWriteRentExt;
    let PlainStart { mut tcp, first } = plain;
    const ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\
        Content-Length: 47\r\nConnection: close\r\n\r\n\
        The plain HTTP request was sent to HTTPS port\r\n";
    let g = w.generation();
    let mut rec = if w.timing(&g) {
        crate::record::Record::new(shared::clock::loop_now())
    } else {
        crate::record::Record::default()
    };
    rec.bytes_in = first.len() as u64;
    let sent = monoio::time::timeout(g.cfg.timeouts.send, tcp.write_all(ANSWER)).await;
    let answered = matches!(sent, Ok((Ok(_), _)));
    if answered {
        rec.wrote(ANSWER);
    } else {
        rec.failed(ProxyError::ClientGone);
    }
    let mut line = crate::access_log::LogRequest::default();
    if g.access_log.is_some() {
        let mut ip = IpText::of(peer);
        ip.set_https(true);
        line.capture_lines(&ip, &first);
    }
    w.finish(&g, &rec, &line);
    if answered {
        linger(
            &mut tcp,
            BytesMut::with_capacity(4096),
            &g.cfg.timeouts,
            &w.life,
        )
        .await
    }
}

/// A client connection while it serves no request: before its first bytes, and between
/// keep-alive requests. It holds no buffer and none of a request's state: those are in the
/// request frame (`active`), taken from the worker's pools when bytes arrive and given back
/// when it goes idle, as nginx allocates a connection's header buffer only when bytes
/// arrive. An idle plain connection is this record, a small task and its socket.
struct Parked {
    stream: Stream,
    ip: IpText,
    /// Ends the connection at shutdown while it is idle.
    stop: Wait,
    /// The first head's deadline (the header timeout from the accept); `None` once a request
    /// was read (then the idle timeout applies between requests).
    first: Option<Instant>,
    /// The connection is read through a multishot receive (from its second request on).
    multishot: bool,
    /// See `ClientConn::nonblocking`.
    nonblocking: bool,
}

/// How a request frame ends.
// A value handed from the frame to the task once, never stored: boxing the record would cost
// an allocation per request.
#[allow(clippy::large_enum_variant)]
enum Step {
    /// Idle again: wait holding nothing, then serve in a new frame.
    Park(Parked),
    /// The connection is closed.
    Done,
    /// A WebSocket tunnel, to run once the frame is given back (it may last for hours). Boxed:
    /// its relay state (2.7 KB) need not be part of every connection's task.
    Tunnel(std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>),
}

/// The connection's first wait is set up here, outside the task (whose size every idle
/// connection pays): only the record it waits with lives on.
fn serve_stream(
    w: Rc<ProxyWorker>,
    stream: Stream,
    peer: SocketAddr,
    guard: ConnGuard,
) -> impl std::future::Future<Output = ()> {
    let mut ip = IpText::of(peer);
    ip.set_https(stream.is_tls());
    // Tests run debug builds: a path that ever hands over a blocking socket fails them.
    debug_assert!(
        {
            use std::os::fd::AsRawFd;
            // SAFETY: F_GETFL on the socket `stream` owns; no memory is passed.
            let flags = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_GETFL) };
            flags >= 0 && flags & libc::O_NONBLOCK != 0
        },
        "a client socket that is not non-blocking"
    );
    let header = w.generation().cfg.timeouts.header;
    let mut p = Parked {
        stream,
        ip,
        stop: w.life.shutdown.wait(),
        first: Some(shared::clock::deadline(header)),
        multishot: false,
        // Accepted non-blocking (`shared::accept::Acceptor::accepted`).
        nonblocking: true,
    };
    // The first bytes are waited for holding no buffer (on io_uring with multishot receives,
    // a TLS connection once its session holds nothing to read; the others wait in their
    // frame, reading).
    p.stream.ready_recv();
    serve_parked(w, p, guard)
}

/// The connection's task: a block, not an `async fn`, so the record lives once in the task
/// (an `async fn` keeps its arguments and its own copies of them side by side).
#[allow(clippy::manual_async_fn)]
fn serve_parked(
    w: Rc<ProxyWorker>,
    mut p: Parked,
    guard: ConnGuard,
) -> impl std::future::Future<Output = ()> {
    async move {
        let _guard = &guard;
        loop {
            if p.stream.waits_bufferless() {
                // An HTTPS client's own buffers go back to the pool too (`Stream::park`).
                p.stream.park();
                match wait_idle(&w, &mut p).await {
                    Waited::Arrived | Waited::Unable => {}
                    Waited::TimedOut | Waited::Stopped => return p.stream.close_quietly(),
                }
            }
            // The frame goes back to the pool at the end of this statement. The step is out of
            // scope before the tunnel's wait (a task keeps what is in scope at its waits).
            // Every deadline of the frame's steps shares one timer (`shared::deadline`).
            let frame = || shared::deadline::scope(active(w.clone(), p));
            let tunnel = match w.buffers.pooled(frame).await {
                Step::Park(back) => {
                    p = back;
                    continue;
                }
                Step::Done => return,
                Step::Tunnel(tunnel) => tunnel,
            };
            return shared::deadline::scope(tunnel).await;
        }
    }
}

/// A request frame: the connection's buffers and request state, its requests served until
/// it goes idle (nothing left to read) or ends.
async fn active(w: Rc<ProxyWorker>, p: Parked) -> Step {
    let bufs = w.buffers.take_conn_bufs();
    let Parked {
        stream,
        ip,
        mut stop,
        first,
        mut multishot,
        nonblocking,
    } = p;
    // Bytes already in hand when the frame starts came from the client too.
    bufs.received.set(bufs.from_client.len() as u64);
    let mut c = ClientConn {
        w: w.clone(),
        g: w.generation(),
        stream,
        ip: ClientAddr::new(ip),
        from_client: bufs.from_client,
        to_upstream: bufs.to_upstream,
        to_client: bufs.to_client,
        rec: crate::record::Record::default(),
        logreq: bufs.logreq,
        corked: false,
        lingers: false,
        nonblocking,
        fields: bufs.fields,
        response_fields: bufs.response_fields,
        received: bufs.received,
        request_at: 0,
    };
    let served = requests(&mut c, &mut stop, first, &mut multishot).await;
    let ClientConn {
        stream,
        ip,
        from_client,
        to_upstream,
        to_client,
        logreq,
        fields,
        response_fields,
        corked,
        nonblocking,
        received,
        ..
    } = c;
    w.buffers.give_conn_bufs(ConnBufs {
        from_client,
        to_upstream,
        to_client,
        logreq,
        fields,
        response_fields,
        received,
    });
    match served {
        Served::Idle => Step::Park(Parked {
            stream,
            ip: ip.into_peer(),
            stop,
            first: None,
            multishot,
            nonblocking,
        }),
        // Dropping the stream closes it (monoio's way: with io_uring a close op, plus a
        // cancel of that op when the stream is dropped before it completes).
        Served::Close => Step::Done,
        Served::Quiet => {
            stream.close_quietly();
            Step::Done
        }
        // No I/O on the stream is in flight: close the fd at once (see `close_now`).
        Served::Finished if corked => {
            stream.close_now_corked();
            Step::Done
        }
        Served::Finished => {
            stream.close_now();
            Step::Done
        }
        // A tunnel may outlive many reloads: it keeps its timeouts and its server's room,
        // not its generation (whose pools, stores and open files would stay with it).
        Served::Tunnel(t, end) => Step::Tunnel(Box::pin(tunnel(w, t, stream, end))),
    }
}

/// How a frame's requests ended.
enum Served {
    /// Nothing left to read: the connection waits holding nothing.
    Idle,
    /// Close by dropping the stream.
    Close,
    /// The client's own end, or its idle timeout, or a stop, between requests: close with a
    /// TLS client's close_notify (`Stream::close_quietly`).
    Quiet,
    /// The response is complete and every I/O on the stream completed: close at once.
    Finished,
    /// A WebSocket upgrade: relay bytes with its upstream connection; its request's record
    /// is finished when the tunnel ends.
    Tunnel(crate::tunnel::Tunnel, Box<TunnelEnd>),
}

/// What finishing a tunnel's request takes, kept from its frame for the tunnel's life:
/// nginx writes an upgraded request's line when the tunnel closes, `$body_bytes_sent`
/// counting what went to the client after the 101 head and `$request_time` the whole tunnel.
/// Boxed: only a tunnel pays for it.
pub struct TunnelEnd {
    rec: crate::record::Record,
    line: crate::access_log::LogRequest,
    /// Its generation's config and access log (not the generation: its pools and stores go
    /// with it), when that generation timed its requests (metrics or a log).
    held: Option<(Arc<crate::config::Config>, Option<crate::worker::SharedLog>)>,
    /// What the client sent past its request before the tunnel (relayed as its first bytes).
    early: u64,
}

impl TunnelEnd {
    /// The request's record as the 101 left it, taken from the frame.
    fn of(c: &mut ClientConn) -> Box<TunnelEnd> {
        let upto = c.received.get().saturating_sub(c.request_at);
        // What follows the request in `from_client` is the tunnel's first bytes (`early`).
        settle(c, true);
        let held =
            c.w.timing(&c.g)
                .then(|| (c.g.cfg.clone(), c.g.access_log.clone()));
        Box::new(TunnelEnd {
            early: upto.saturating_sub(c.rec.bytes_in),
            rec: std::mem::take(&mut c.rec),
            line: std::mem::take(&mut c.logreq),
            held,
        })
    }

    /// The tunnel ended: its bytes and its whole time go into the record, which is counted
    /// and logged.
    fn finish(mut self, w: &ProxyWorker, moved: &crate::tunnel::Moved) {
        self.rec.bytes_out += moved.to_client.get();
        self.rec.upstream_ended(shared::clock::loop_now());
        let received = self.early + moved.to_upstream.get();
        w.finish_tunnel(self.held.as_ref(), &self.rec, &self.line, received);
    }
}

/// A tunnel's life, then its request's end. A graceful stop leaves it the shutdown timeout,
/// as it leaves every request in flight, then cuts it here (its line is written then, not
/// lost with the worker).
async fn tunnel(w: Rc<ProxyWorker>, t: crate::tunnel::Tunnel, stream: Stream, end: Box<TunnelEnd>) {
    let moved = crate::tunnel::Moved::default();
    let stop = w.life.shutdown.wait();
    monoio::select! {
        _ = crate::tunnel::run(t, stream, &moved) => {}
        _ = cut_after_stop(&w, stop) => {}
    }
    end.finish(&w, &moved);
}

/// The shutdown's grace after a stop (the current generation's `[timeouts] shutdown`, as
/// the worker's wait for its connections).
async fn cut_after_stop(w: &ProxyWorker, stop: Wait) {
    stop.await;
    let grace = w.generation().cfg.timeouts.shutdown;
    monoio::time::sleep(grace).await;
}

/// Serve requests until the connection goes idle or is done. `first`: the first head's
/// deadline, on a new connection.
async fn requests(
    c: &mut ClientConn,
    stop: &mut Wait,
    mut first: Option<Instant>,
    multishot: &mut bool,
) -> Served {
    let w = c.w.clone();
    loop {
        let info = match read_head(c, stop, first.take()).await {
            Ok(Some(info)) => info,
            Ok(None) => return Served::Quiet,
            Err(ProxyError::ClientGone) => {
                // Part of a head, then the client's end (a FIN, a reset): nothing to answer,
                // and nothing is (as nginx: "client prematurely closed connection"), but a
                // request all the same, logged as nginx logs it: 400, the request line if it
                // came whole (taken for the log before the read that ended it, `read_head`),
                // the bytes that came.
                c.rec.failed(ProxyError::ClientGone);
                c.rec.unanswered(400);
                c.rec.bytes_in = u64::MAX;
                finish(c, false);
                return Served::Quiet;
            }
            Err(e) => {
                // A head the parser refused is in `from_client`; one the header timeout cut
                // was taken for the log before the read that timed out (`read_head`).
                if c.g.access_log.is_some() && e != ProxyError::HeaderTimeout {
                    c.logreq.capture(c.ip.client(), &c.from_client);
                }
                // A refused head counts every byte read of it (it declared no body to bound
                // them by).
                c.rec.bytes_in = u64::MAX;
                // The head was refused: whether it asked for a HEAD, its method token says.
                let head_only = shared::http::head::starts_head_request(&c.from_client);
                respond_error(c, e, head_only).await;
                finish(c, false);
                if c.lingers {
                    lingering_close(c).await;
                }
                return Served::Close;
            }
        };
        #[cfg(feature = "fault-injection")]
        crate::fault_injection::before_dispatch(&c.from_client[..info.head_len]);
        c.rec.route = Some(info.route);
        c.rec.bytes_in = most_received(&info);
        if c.g.access_log.is_some() {
            c.logreq
                .capture(c.ip.client(), &c.from_client[..info.head_len]);
        }
        let next = match info.dispatch {
            Dispatch::Proxy { group } => exchange::run(c, &info, group).await,
            Dispatch::Cached { cache, group } => {
                exchange::cached::run(c, &info, cache, group).await
            }
            Dispatch::Answered { skip, close } => send_answer(c, &info, skip, close).await,
            Dispatch::Refused { skip, close, why } => {
                c.rec.refused = Some(why);
                send_answer(c, &info, skip, close).await
            }
            Dispatch::Static { site, query } => {
                let g = c.g.clone();
                crate::static_serve::serve(c, g.site(site), &info, &query).await
            }
        };
        let next = match next {
            // Its record is finished when the tunnel ends.
            Next::Tunnel(t) => return Served::Tunnel(t, TunnelEnd::of(c)),
            next => next,
        };
        finish(c, matches!(next, Next::KeepAlive));
        match next {
            Next::KeepAlive => {
                // The client came back for more: from its second request on, the connection
                // is read through a multishot receive (not from the first: a connection that
                // carries one request would pay a receive armed after it and a cancel at its
                // close).
                if !*multishot {
                    *multishot = true;
                    c.stream.multishot_recv();
                }
                // Nothing pipelined: a client in a request loop comes back within moments;
                // it is waited for here, in its frame, for `worker::HOT_WAIT`. Only one that stays
                // quiet longer parks holding nothing: parking and taking a frame again per
                // request cost a keep-alive loop about 4% of a 64 B request.
                if c.from_client.is_empty() && c.stream.waits_bufferless() && !c.stream.arrived() {
                    let back = w.hot.wait(c.stream.multishot_ready()).await;
                    if back != Some(true) {
                        return Served::Idle;
                    }
                }
            }
            // (A tunnel returned above.)
            Next::Close | Next::Tunnel(_) => {
                if c.lingers {
                    lingering_close(c).await;
                }
                return Served::Close;
            }
            Next::Finished => return Served::Finished,
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

/// The request ended: its record goes to the worker's metrics and access log. `goes_on`:
/// the connection serves another request (see `settle`).
fn finish(c: &mut ClientConn, goes_on: bool) {
    settle(c, goes_on);
    c.w.finish(&c.g, &c.rec, &c.logreq);
}

/// The most a request of `info` can have received: its head and a declared body; a chunked
/// body's length is known only as it is read (`settle` counts what was).
fn most_received(info: &RequestInfo) -> u64 {
    let head = info.head_len as u64;
    match info.body {
        // Saturating: the declared length is the client's number (the codec bounds it to
        // 2^63-1, but this sum must not trust that to stay in range).
        shared::http::BodyKind::Length(n) => head.saturating_add(n),
        shared::http::BodyKind::Chunked => u64::MAX,
        _ => head,
    }
}

/// The request's received bytes, nginx's `$request_length`: what was read from its first
/// byte on (its head, its body as it came, chunk framing included), no more than
/// `rec.bytes_in` allows (`most_received`: a body never sent is not received; a client
/// declaring 2^63 bytes pinned the counter at its top). When the connection goes on
/// (`goes_on`), what is still unread in `from_client` is the next request's; when it
/// closes, what it holds came of this one (a body cut short by an early answer).
fn settle(c: &mut ClientConn, goes_on: bool) {
    let read = c.received.get().saturating_sub(c.request_at);
    let next = if goes_on {
        c.from_client.len() as u64
    } else {
        0
    };
    c.rec.bytes_in = c.rec.bytes_in.min(read.saturating_sub(next));
}

/// Read until a whole request head is in `from_client`. `Ok(None)`: the connection ends quietly
/// (closed by the client, idle timeout, or shutdown while idle). `Err(ClientGone)`: the client
/// ended the connection (a FIN, a reset) after part of a head. `deadline`: the first head's
/// (a new connection's header timeout runs from its accept).
async fn read_head(
    c: &mut ClientConn,
    stop: &mut Wait,
    mut deadline: Option<Instant>,
) -> Result<Option<RequestInfo>, ProxyError> {
    c.take_current_generation();
    c.ip.forget_real();
    let (header, idle_timeout) = (c.g.cfg.timeouts.header, c.g.cfg.timeouts.idle);
    // Bytes of `from_client` already parsed as an incomplete head.
    let mut parsed = 0;
    loop {
        if !c.from_client.is_empty() {
            if parsed == 0 {
                c.request_at = c.received.get().saturating_sub(c.from_client.len() as u64);
                // The request's first bytes (or, pipelined, its whole head): its clock starts,
                // under the generation it is read in.
                c.take_current_generation();
                c.rec = if c.w.timing(&c.g) {
                    crate::record::Record::new(shared::clock::loop_now())
                } else {
                    crate::record::Record::default()
                };
                c.rec.measure_head = c.g.access_log.is_some();
            }
            if worth_parsing(&c.from_client, parsed, &c.g.cfg.limits.codec) {
                c.take_current_generation();
                if let Some(info) = prepare_request(
                    answer_ctx(&c.w),
                    &c.g,
                    &c.from_client,
                    &mut c.ip,
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
        // Empty lines before a request line are ignored (RFC 9112 2.2): a client that sent
        // nothing else (a CRLF after its last request's body) is between requests.
        let idle = c.from_client.iter().all(|&b| b == b'\r' || b == b'\n');
        if !idle && c.g.access_log.is_some() {
            // Part of a head, and more to read: a read that times out takes the buffer with
            // it, so the log's fields are taken now. A copy only for heads that come in
            // pieces, with a log on.
            c.logreq.capture_lines(c.ip.client(), &c.from_client);
        }
        let buf = std::mem::take(&mut c.from_client);
        // A keep-alive client's next request is usually there already (its wait saw it come).
        let r = match crate::io::read_queued(&mut c.stream, buf, 4096) {
            Ok(r) => r,
            Err(buf) => {
                let until = deadline.unwrap_or_else(|| shared::clock::deadline(idle_timeout));
                let read = read_more(&mut c.stream, buf, 4096, until);
                if idle {
                    monoio::select! {
                        r = read => r,
                        _ = &mut *stop => return Ok(None),
                    }
                } else {
                    read.await
                }
            }
        };
        match r {
            // Nothing of a request arrived: close quietly (as nginx does), no 408, no line.
            Ok((0, _)) | Err(IoFail::Timeout | IoFail::Error(_)) if idle => return Ok(None),
            Ok((0, _)) | Err(IoFail::Error(_)) => return Err(ProxyError::ClientGone),
            Ok((n, buf)) => {
                c.received.set(c.received.get() + n as u64);
                c.from_client = buf;
            }
            Err(IoFail::Timeout) => return Err(ProxyError::HeaderTimeout),
        }
    }
}

/// How an idle client's wait ended.
enum Waited {
    /// Its next bytes (or its end) arrived: a read completes at once.
    Arrived,
    /// The receive could not wait without a buffer (the ring is short): read to wait.
    Unable,
    TimedOut,
    Stopped,
}

/// An idle client (new, or between keep-alive requests), read through the worker's buffer
/// ring: wait for its next bytes holding no buffer and no request frame, as nginx frees an
/// idle connection's buffers. A client that thinks for a while costs its small task and its
/// socket, not 10 KiB of buffers and a frame. Until its first head's deadline (the header
/// timeout from its accept) or the idle timeout.
async fn wait_idle(w: &ProxyWorker, p: &mut Parked) -> Waited {
    if p.stream.arrived() {
        return Waited::Arrived;
    }
    let until = p
        .first
        .unwrap_or_else(|| shared::clock::deadline(w.generation().cfg.timeouts.idle));
    let ready = monoio::time::timeout_at(until, p.stream.multishot_ready());
    monoio::select! {
        r = ready => match r {
            Ok(true) => Waited::Arrived,
            Ok(false) => Waited::Unable,
            Err(_) => Waited::TimedOut,
        },
        _ = &mut p.stop => Waited::Stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::worth_parsing;
    use shared::http::Limits;

    fn future_size<A, B, C, D, F>(_: impl FnOnce(A, B, C, D) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn future_size2<A, B, F>(_: impl FnOnce(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn future_size5<A, B, C, D, E, F>(_: impl FnOnce(A, B, C, D, E) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A PROXY protocol listener's client costs about what a client of the same listener
    /// without it does: the header's read is boxed, and the address it names replaces the
    /// peer's in the same record.
    #[test]
    fn a_proxied_client_connection_is_a_small_task() {
        let (plain, tls) = (future_size(super::serve), future_size5(super::serve_tls));
        let proxied = future_size(super::serve_proxied);
        let proxied_tls = future_size5(super::serve_proxied_tls);
        eprintln!("serve_proxied: {proxied} bytes, serve_proxied_tls: {proxied_tls} bytes");
        assert!(
            proxied <= plain + 32,
            "serve_proxied: {proxied} bytes, serve: {plain}"
        );
        assert!(
            proxied_tls <= tls + 32,
            "serve_proxied_tls: {proxied_tls}, serve_tls: {tls}"
        );
    }

    /// A client connection's task is what an idle connection costs: its largest state is
    /// its wait for the next bytes, and its requests run in a pooled frame of their own
    /// (`active`). 100k idle clients must not cost 100k copies of a request's state.
    #[test]
    fn an_idle_client_connection_is_a_small_task() {
        let (plain, tls) = (future_size(super::serve), future_size5(super::serve_tls));
        let frame = future_size2(super::active);
        eprintln!("serve: {plain} bytes, serve_tls: {tls} bytes, request frame: {frame} bytes");
        // 4.7 and 4.8 KB (a debug build) while a task held its requests' state; 0.5 and
        // 0.8 KB since (a TLS client's task also keeps the handshake's arguments).
        assert!(plain <= 640, "serve: {plain} bytes");
        assert!(tls <= 1024, "serve_tls: {tls} bytes");
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
