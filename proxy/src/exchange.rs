//! One request/response exchange: pick a server, get a connection (pooled or new), send the
//! request, read the response head, relay the body, pool the connection.
//!
//! Retries (nginx's `proxy_next_upstream error`, narrowed to what is always safe):
//! - connecting failed: the server is marked failed and the next one is tried;
//! - the connection failed before any byte of the response arrived: retried only if no byte
//!   of a streamed request body was sent, and for a non-idempotent method only if the write
//!   itself failed (nothing of the request was delivered). A pooled connection failing this
//!   way just went stale: it is retried without counting against the server.
//! - never after the response started, never after a read timeout (504).
//!
//! When every server refused, the client gets 502 at once (no waiting on a timer).

use crate::balance::Balancer;
use crate::client::{respond_error, ClientConn};
use crate::config::Server;
use crate::error::ProxyError;
use crate::forward::{prepare_response, ClientFraming, RequestInfo, ResponseInfo};
use crate::io::{read_more, write_all, write_range, IoFail, WriteFail};
use crate::pool::Upstream;
use crate::relay::{self, RelayFail};
use crate::worker::{Worker, RELAY_BUF};
use bytes::{Buf, BytesMut};
use monoio::net::TcpStream;
use shared::http::encode::{end_head, write_header};
use shared::http::BodyKind;
use std::cell::RefCell;
use std::time::Instant;

/// Request bodies up to this size that arrived with the head are sent with it in one write
/// (and can be sent again on a retry).
const INLINE_BODY_MAX: usize = 64 * 1024;

/// What the client connection does next.
pub enum Next {
    KeepAlive,
    Close,
    /// A WebSocket upgrade succeeded: relay bytes with this upstream connection.
    Tunnel(TcpStream),
}

/// Counts a request in flight on a server for least-conn / random2, for as long as it lives.
struct InFlight<'a> {
    balancer: &'a RefCell<Balancer>,
    server: usize,
}

impl<'a> InFlight<'a> {
    fn new(balancer: &'a RefCell<Balancer>, server: usize) -> Self {
        balancer.borrow_mut().started(server);
        InFlight { balancer, server }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.balancer.borrow_mut().finished(self.server);
    }
}

async fn connect(w: &Worker, server: &Server) -> Result<Upstream, ProxyError> {
    w.stats.upstream_connects.incr();
    let r = monoio::time::timeout(
        w.cfg.timeouts.connect,
        shared::net::connect(server.addr, None),
    );
    match r.await {
        Ok(Ok(stream)) => Ok(Upstream {
            stream,
            requests: 0,
            reused: false,
        }),
        Ok(Err(e)) => {
            w.log_error(format_args!("upstream {}: connect: {e}", server.name));
            Err(ProxyError::UpstreamRefused)
        }
        Err(_) => {
            w.log_error(format_args!("upstream {}: connect timed out", server.name));
            Err(ProxyError::ConnectTimeout)
        }
    }
}

/// Why no response head was read.
enum HeadFail {
    /// Not one byte arrived (end of stream or error): the request may be retried.
    Nothing(Option<BytesMut>),
    /// The read timeout passed.
    Timeout,
    /// Something arrived but it is not a valid response head.
    Bad(ProxyError),
}

async fn read_response_head(
    w: &Worker,
    up: &mut TcpStream,
    mut ub: BytesMut,
    req: &RequestInfo,
    head: &mut BytesMut,
) -> Result<(ResponseInfo, BytesMut), HeadFail> {
    let read_timeout = w.cfg.timeouts.read;
    loop {
        let had = ub.len();
        let deadline = monoio::time::Instant::now() + read_timeout;
        match read_more(up, ub, RELAY_BUF / 4, deadline).await {
            Ok((0, b)) if had == 0 => return Err(HeadFail::Nothing(Some(b))),
            Ok((0, _)) => return Err(HeadFail::Bad(ProxyError::UpstreamClosed)),
            Ok((_, b)) => ub = b,
            Err(IoFail::Timeout) => return Err(HeadFail::Timeout),
            Err(IoFail::Error(_)) if had == 0 => return Err(HeadFail::Nothing(None)),
            Err(IoFail::Error(_)) => return Err(HeadFail::Bad(ProxyError::UpstreamIo)),
        }
        match prepare_response(w, &ub, req, head) {
            Ok(Some(info)) => return Ok((info, ub)),
            Ok(None) => {}
            Err(e) => return Err(HeadFail::Bad(e)),
        }
    }
}

async fn fail(c: &mut ClientConn, e: ProxyError) -> Next {
    respond_error(c, e).await;
    Next::Close
}

pub async fn run(c: &mut ClientConn, req: RequestInfo) -> Next {
    let w = c.w.clone();
    let t = &w.cfg.timeouts;
    c.cin.advance(req.head_len);
    let inline = match req.body {
        BodyKind::Empty => Some(0),
        BodyKind::Length(n) if n <= INLINE_BODY_MAX as u64 && n as usize <= c.cin.len() => {
            Some(n as usize)
        }
        _ => None,
    };
    let g = req.group;
    let group = &w.cfg.groups[g];
    let balancer = &w.balancers[g];
    let base = c.uout.len();
    let mut tried: Vec<usize> = Vec::new();
    let mut last = ProxyError::UpstreamRefused;
    let mut budget = 2 * group.servers.len() + group.keepalive.min(64) + 2;
    let mut spare: Option<BytesMut> = None;

    // Attempts until a response head arrives.
    let (s, mut up, resp, ub, _in_flight) = loop {
        if budget == 0 {
            return fail(c, last).await;
        }
        budget -= 1;
        let now = Instant::now();
        let Some(s) = balancer.borrow_mut().pick(&tried, now) else {
            return fail(c, last).await;
        };
        let server = &group.servers[s];
        let pooled = w.pools[g][s].borrow_mut().take(now);
        let mut up = match pooled {
            Some(up) => up,
            None => match connect(&w, server).await {
                Ok(up) => up,
                Err(e) => {
                    balancer.borrow_mut().failed(s, Instant::now());
                    tried.push(s);
                    last = e;
                    continue;
                }
            },
        };
        let in_flight = InFlight::new(balancer, s);

        // The head (and a body that came with it) in one write.
        c.uout.truncate(base);
        if !req.host_written {
            write_header(&mut c.uout, b"Host", server.name.as_bytes());
        }
        end_head(&mut c.uout);
        if let Some(n) = inline {
            c.uout.extend_from_slice(&c.cin[..n]);
        }
        let buf = std::mem::take(&mut c.uout);
        match write_all(&mut up.stream, buf, t.upstream_send).await {
            Ok(b) => c.uout = b,
            Err(WriteFail { buf: Some(b), .. }) => {
                // Nothing was delivered: safe to send again, whatever the method.
                c.uout = b;
                if !up.reused {
                    balancer.borrow_mut().failed(s, Instant::now());
                    tried.push(s);
                }
                last = ProxyError::UpstreamIo;
                continue;
            }
            Err(WriteFail { buf: None, .. }) => {
                balancer.borrow_mut().failed(s, Instant::now());
                return fail(c, ProxyError::UpstreamTimeout).await;
            }
        }
        up.requests += 1;

        let streamed = inline.is_none();
        if streamed {
            if req.expect_continue && c.cin.is_empty() {
                let cont: &'static [u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
                let r = monoio::time::timeout(t.send, async {
                    use monoio::io::AsyncWriteRentExt;
                    c.stream.write_all(cont).await.0
                });
                if !matches!(r.await, Ok(Ok(_))) {
                    return Next::Close;
                }
            }
            let r = relay::request_body(
                &w,
                &mut c.stream,
                &mut up.stream,
                &mut c.cin,
                &mut c.cout,
                req.body,
            )
            .await;
            match r {
                Ok(()) => {}
                Err(RelayFail::Client(e)) => return fail(c, e).await,
                Err(RelayFail::Upstream(e)) => {
                    balancer.borrow_mut().failed(s, Instant::now());
                    return fail(c, e).await;
                }
            }
        }

        let mut ub = spare.take().unwrap_or_else(|| w.take_buf());
        ub.clear();
        match read_response_head(&w, &mut up.stream, ub, &req, &mut c.cout).await {
            Ok((resp, ub)) => break (s, up, resp, ub, in_flight),
            Err(HeadFail::Nothing(b)) => {
                spare = b;
                // The upstream closed without answering.
                if streamed || !req.idempotent {
                    if !up.reused {
                        balancer.borrow_mut().failed(s, Instant::now());
                    }
                    return fail(c, ProxyError::UpstreamClosed).await;
                }
                if !up.reused {
                    balancer.borrow_mut().failed(s, Instant::now());
                    tried.push(s);
                }
                last = ProxyError::UpstreamClosed;
            }
            Err(HeadFail::Timeout) => {
                balancer.borrow_mut().failed(s, Instant::now());
                return fail(c, ProxyError::UpstreamTimeout).await;
            }
            Err(HeadFail::Bad(e)) => {
                balancer.borrow_mut().failed(s, Instant::now());
                return fail(c, e).await;
            }
        }
    };
    if let Some(b) = spare {
        w.give_buf(b);
    }
    balancer.borrow_mut().succeeded(s);
    if let Some(n) = inline {
        c.cin.advance(n);
    }

    if resp.framing == ClientFraming::Tunnel {
        return start_tunnel(c, up, resp, ub).await;
    }
    let r = relay::response_body(
        &w,
        &mut c.stream,
        &mut up.stream,
        ub,
        resp.head_len,
        &mut c.cout,
        resp.body,
        resp.framing,
    )
    .await;
    match r {
        Ok(done) => {
            w.give_buf(done.buf);
            if resp.upstream_keep_alive && done.clean {
                w.pools[g][s].borrow_mut().put(up, Instant::now());
            }
            if resp.client_keep_alive {
                Next::KeepAlive
            } else {
                Next::Close
            }
        }
        Err(RelayFail::Upstream(_)) => {
            // Mid-body: the client connection is aborted; what it got is visibly incomplete.
            w.stats.upstream_errors.incr();
            Next::Close
        }
        Err(RelayFail::Client(_)) => {
            w.stats.client_errors.incr();
            Next::Close
        }
    }
}

/// Send the 101 head (with any bytes the upstream sent after it) to the client and whatever
/// the client sent after its request to the upstream; then the connection is a tunnel.
async fn start_tunnel(
    c: &mut ClientConn,
    mut up: Upstream,
    resp: ResponseInfo,
    ub: BytesMut,
) -> Next {
    let t = &c.w.cfg.timeouts;
    c.cout.extend_from_slice(&ub[resp.head_len..]);
    c.w.give_buf(ub);
    let buf = std::mem::take(&mut c.cout);
    if write_all(&mut c.stream, buf, t.send).await.is_err() {
        return Next::Close;
    }
    if !c.cin.is_empty() {
        let buf = std::mem::take(&mut c.cin);
        let len = buf.len();
        if write_range(&mut up.stream, buf, 0, len, t.upstream_send)
            .await
            .is_err()
        {
            return Next::Close;
        }
    }
    Next::Tunnel(up.stream)
}
