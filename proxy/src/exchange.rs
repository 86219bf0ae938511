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
//!
//! A streamed request body is sent while the response head is read (`stream_body`): an
//! upstream that answers before taking the whole body (a 413, a 401) has its answer relayed,
//! as nginx does, and the client connection closes after it (the rest of the body is unread).

use crate::balance::Balancer;
use crate::client::{linger_close, respond_error, worth_parsing, ClientConn};
use crate::config::Server;
use crate::error::ProxyError;
use crate::forward::{prepare_response, ClientFraming, RequestInfo, ResponseInfo};
use crate::io::{read_more, read_some, write_all, write_range, IoFail, WriteFail};
use crate::pool::Upstream;
use crate::relay::{self, RelayFail};
use crate::worker::{Worker, RELAY_BUF};
use bytes::{Buf, BytesMut};
use monoio::io::{AsyncReadRent, Splitable};
use monoio::net::TcpStream;
use shared::http::encode::{end_head, write_header};
use shared::http::{BodyKind, CodecError};
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// Request bodies up to this size that arrived with the head are sent with it in one write
/// (and can be sent again on a retry).
const INLINE_BODY_MAX: usize = 64 * 1024;

/// What the client connection does next.
pub enum Next {
    KeepAlive,
    Close,
    /// The response is complete and the connection closes: every I/O on the client socket
    /// completed (none was dropped in flight), so its fd can be closed directly.
    Finished,
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
        shared::net::connect_any(&server.addrs, None),
    );
    match r.await {
        Ok(Ok(stream)) => Ok(Upstream {
            stream,
            requests: 0,
            reused: false,
        }),
        Ok(Err(e)) => {
            w.log_error(format_args!("upstream {}: connect: {e}", server.name));
            Err(connect_error(&e))
        }
        Err(_) => {
            w.log_error(format_args!("upstream {}: connect timed out", server.name));
            Err(ProxyError::ConnectTimeout)
        }
    }
}

/// What a failed connect means: the server refused (or is unreachable), or the proxy itself
/// has no descriptor or buffer to spare (then no other server would do better either).
fn connect_error(e: &std::io::Error) -> ProxyError {
    if shared::net::is_resource_exhaustion(e) {
        ProxyError::NoResources
    } else {
        ProxyError::UpstreamRefused
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

/// Read until a whole final response head is in `ub` (and the client's head is in `head`).
/// `read_timeout`: the longest wait for each read; `None` when the caller bounds the wait.
async fn read_response_head<R: AsyncReadRent>(
    w: &Worker,
    up: &mut R,
    mut ub: BytesMut,
    req: &RequestInfo,
    head: &mut BytesMut,
    read_timeout: Option<Duration>,
) -> Result<(ResponseInfo, BytesMut), HeadFail> {
    // Bytes of `ub` already parsed as an incomplete head: a head trickling in is parsed again
    // only when it may have ended (as on the client side), never once per read.
    let mut parsed = 0;
    loop {
        let had = ub.len();
        let read = match read_timeout {
            Some(t) => read_more(up, ub, RELAY_BUF / 4, monoio::time::Instant::now() + t).await,
            None => read_some(up, ub, RELAY_BUF / 4).await,
        };
        match read {
            Ok((0, b)) if had == 0 => return Err(HeadFail::Nothing(Some(b))),
            Ok((0, _)) => return Err(HeadFail::Bad(ProxyError::UpstreamClosed)),
            Ok((_, b)) => ub = b,
            Err(IoFail::Timeout) => return Err(HeadFail::Timeout),
            Err(IoFail::Error(_)) if had == 0 => return Err(HeadFail::Nothing(None)),
            Err(IoFail::Error(_)) => return Err(HeadFail::Bad(ProxyError::UpstreamIo)),
        }
        if !worth_parsing(&ub, parsed, &w.cfg.limits.codec) {
            continue;
        }
        match prepare_response(w, &ub, req, head) {
            Ok(Some(info)) => return Ok((info, ub)),
            Ok(None) => parsed = ub.len(),
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
    // The upstream answered before the whole request body was sent.
    let mut early = false;

    // Attempts until a response head arrives.
    let (s, mut up, mut resp, ub, _in_flight) = loop {
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
                Err(ProxyError::NoResources) => return fail(c, ProxyError::NoResources).await,
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
        let mut ub = spare.take().unwrap_or_else(|| w.take_buf());
        ub.clear();
        let head = if streamed {
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
            let Upstream {
                stream,
                requests,
                reused,
            } = up;
            let (stream, outcome) = stream_body(c, &w, stream, ub, &req).await;
            let Some(stream) = stream else {
                return Next::Close;
            };
            up = Upstream {
                stream,
                requests,
                reused,
            };
            match outcome {
                BodyOutcome::Sent(head) => head,
                BodyOutcome::Early(resp, ub) => {
                    early = true;
                    Ok((resp, ub))
                }
                BodyOutcome::Failed(RelayFail::Client(e)) => return fail(c, e).await,
                BodyOutcome::Failed(RelayFail::Upstream(e)) => {
                    balancer.borrow_mut().failed(s, Instant::now());
                    return fail(c, e).await;
                }
            }
        } else {
            read_response_head(&w, &mut up.stream, ub, &req, &mut c.cout, Some(t.read)).await
        };
        match head {
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

    if early {
        // The rest of the client's body was never read: the client connection closes after
        // this response, and the upstream connection (which got part of a body) is not reused.
        let req = RequestInfo {
            keep_alive: false,
            ..req
        };
        match prepare_response(&w, &ub, &req, &mut c.cout) {
            Ok(Some(info)) if info.framing != ClientFraming::Tunnel => resp = info,
            _ => return fail(c, ProxyError::BadResponse(CodecError::InvalidStatus)).await,
        }
        resp.upstream_keep_alive = false;
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
            if early {
                // Let the client read the response before the close resets the connection.
                linger_close(c).await;
                Next::Close
            } else if resp.client_keep_alive {
                Next::KeepAlive
            } else {
                Next::Finished
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

/// What streaming a request body led to.
enum BodyOutcome {
    /// The body was sent; then came a response head, or not.
    Sent(Result<(ResponseInfo, BytesMut), HeadFail>),
    /// The upstream answered before it had the whole body (a 413, a 401...).
    Early(ResponseInfo, BytesMut),
    Failed(RelayFail),
}

/// Stream the request body to the upstream while reading its response head, as nginx does:
/// an upstream that answers early (and then stops reading, or closes) has its answer relayed
/// instead of a 502 or a send timeout. The read waits without a deadline while the body is
/// in flight (a slow upload is bounded by the body and send timeouts) and gets the read
/// timeout once the body is sent. Returns the connection, put back together (`None` only if
/// monoio could not reunite its halves).
///
/// Costs one small allocation (monoio's split) per streamed body; requests without a body,
/// or whose body came with the head, never get here.
async fn stream_body(
    c: &mut ClientConn,
    w: &Worker,
    stream: TcpStream,
    ub: BytesMut,
    req: &RequestInfo,
) -> (Option<TcpStream>, BodyOutcome) {
    let read_timeout = w.cfg.timeouts.read;
    let (mut ur, mut uw) = stream.into_split();
    let outcome = {
        // `uout` (the request head, already sent) frames chunks; `cout` gets the response head.
        let relay = std::pin::pin!(relay::request_body(
            w,
            &mut c.stream,
            &mut uw,
            &mut c.cin,
            &mut c.uout,
            req.body,
        ));
        let mut head = std::pin::pin!(read_response_head(w, &mut ur, ub, req, &mut c.cout, None));
        let bounded = |head| async move {
            match monoio::time::timeout(read_timeout, head).await {
                Ok(r) => r,
                Err(_) => Err(HeadFail::Timeout),
            }
        };
        let first = monoio::select! {
            // The body finishing wins a tie: then the response is not "early".
            biased;
            r = relay => Ok(r),
            h = &mut head => Err(h),
        };
        match first {
            Ok(Ok(())) => BodyOutcome::Sent(bounded(head).await),
            // A write failed (the upstream closed or reset): it may have answered first.
            Ok(Err(RelayFail::Upstream(e))) if e != ProxyError::UpstreamTimeout => {
                match bounded(head).await {
                    Ok((resp, ub)) => BodyOutcome::Early(resp, ub),
                    Err(_) => BodyOutcome::Failed(RelayFail::Upstream(e)),
                }
            }
            Ok(Err(f)) => BodyOutcome::Failed(f),
            Err(Ok((resp, ub))) => BodyOutcome::Early(resp, ub),
            Err(Err(HeadFail::Bad(e))) => BodyOutcome::Failed(RelayFail::Upstream(e)),
            Err(Err(HeadFail::Nothing(_))) => {
                BodyOutcome::Failed(RelayFail::Upstream(ProxyError::UpstreamClosed))
            }
            Err(Err(HeadFail::Timeout)) => {
                BodyOutcome::Failed(RelayFail::Upstream(ProxyError::UpstreamTimeout))
            }
        }
    };
    (ur.reunite(uw).ok(), outcome)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_is_not_the_servers_fault() {
        let err = |code| connect_error(&std::io::Error::from_raw_os_error(code));
        assert_eq!(err(libc::EMFILE), ProxyError::NoResources);
        assert_eq!(err(libc::ENFILE), ProxyError::NoResources);
        assert_eq!(err(libc::ENOBUFS), ProxyError::NoResources);
        assert_eq!(err(libc::ECONNREFUSED), ProxyError::UpstreamRefused);
        assert_eq!(err(libc::ENETUNREACH), ProxyError::UpstreamRefused);
    }
}
