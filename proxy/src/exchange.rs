//! One request/response exchange: pick a server, get a connection (pooled or new), send the
//! request, read the response head, relay the body, pool the connection.
//!
//! Retries, decided in one place (`attempts`) from what each attempt came to (`outcome`):
//! - without a route `retry`, the built-in rule (nginx's `proxy_next_upstream error`, narrowed
//!   to what is always safe): connecting failed (the server is marked failed and the next one
//!   tried); the connection closed before any byte of the response, for an idempotent request
//!   whose body is held whole. A pooled connection failing this way just went stale: it is
//!   retried without counting against the server, nor as a try, nor against the budget;
//! - a route's `retry` sets the tries, the conditions (`connect`, `reset`, `timeout`, statuses:
//!   such an answer is dropped unread and its connection closed) and whether unsafe methods go
//!   again on more than `connect`;
//! - never after a byte of the response reached the client (an interim 103 included), never
//!   for a streamed body, and never past the worker's retry budget (`retry_budget`): then the
//!   failure, or the last answer, goes to the client as it is.
//!
//! When every server refused, the client gets 502 at once (no waiting on a timer); so does a
//! request to a group whose servers are all down by health checks (nginx's "no live
//! upstreams").
//!
//! A streamed request body is sent while the response head is read (`stream_body`): an
//! upstream that answers before taking the whole body has its answer relayed, as nginx does.
//! An answer that refuses the rest (an error, or a close) ends the body and the client
//! connection closes after it (the rest is unread); any other (a 2xx or 3xx that keeps its
//! connection) is relayed while the rest of the body streams on to the upstream (`duplex`).
//! A request held whole goes out in one write; one the upstream does not take at once (it
//! stopped reading, maybe to answer 413) sends its rest the same way (`upload::send_rest`).
//! Once a byte of a request was written it counts as sent: never a `connect` or stale retry.
//!
//! A client that goes away while the response head is awaited abandons the request (499, as
//! nginx): the upstream connection is closed, never pooled (`client_watch`). One that goes
//! away while its request (held whole) waits for room under `max_conns` gives its place up.

//!
//! # Layout
//! - this file: the attempts and what follows an answer (relay, pool, tunnel);
//! - [`outcome`]: what one attempt came to, and whose fault a failure was;
//! - [`response_head`]: reading the upstream's response head;
//! - [`upload`]: a streamed request body, sent while the response head is read;
//! - [`duplex`]: such a body going on beside an early answer that does not refuse it;
//! - [`cached`]: the same exchange through a route's response cache;
//! - [`client_watch`]: noticing a client that left while its request waits.

pub mod cached;
mod client_watch;
mod connect;
mod duplex;
mod outcome;
mod response_head;
mod room;
mod upload;

pub(super) use crate::balance::InFlight;
use crate::config::route_opts::{HeaderEdits, RetryPolicy, RetryReason};
use crate::config::Timeouts;
use crate::config::{GroupId, Server, ServerId};
use crate::conn::{linger_close, reset_on_close, respond_error, ClientConn, Next};
use crate::error::ProxyError;
use crate::forward::{end_client_head, ClientFraming};
use crate::generation::Generation;
use crate::io::{write_all, write_once, write_range, WriteFail};
use crate::pool::Upstream;
use crate::relay::{self, RelayFail};
use crate::request::RequestInfo;
use crate::worker::ProxyWorker;
use bytes::{Buf, BytesMut};
use client_watch::Watch;
use connect::{counted_connect, send_proxy_header, Dest};
use outcome::{may_retry, no_head, Answered, Attempt, Blame, Body};
use response_head::{read_response_head, Head, HeadFail, HeadRead};
use room::Picked;
use shared::http::encode::{end_head, write_header};
use shared::http::{BodyKind, RequestMethod};
use upload::{stream_request, Streamed};

/// Request bodies up to this size (`Content-Length`, or chunked with its framing) are read
/// whole before an upstream is chosen (`upload::gather_body`, `gather_chunked`) and sent with
/// the head in one write (and again on a retry): the relay buffer's size, which a streamed
/// body would take as well.
const INLINE_BODY_MAX: usize = crate::worker::RELAY_BUF;

/// What every attempt sends, and with which generation's groups, balancers and pools.
struct Plan<'r> {
    g: &'r Generation,
    req: &'r RequestInfo,
    /// The upstream group.
    group: GroupId,
    /// Bytes of `to_upstream` taken by the upstream head before the per-attempt Host field and the
    /// final CRLF.
    head_len: usize,
    /// The body came with the head and is sent with it (and again on a retry): its length.
    /// `None`: the body is streamed.
    inline: Option<usize>,
    /// A streamed body's pace so far, when it was read for a while before the pick (a chunked
    /// body that did not end within `INLINE_BODY_MAX`).
    pace: Option<relay::BodyPace>,
    /// Interim responses (103 Early Hints) go to the client: an HTTP/1.1 client that is
    /// answered with this exchange's response (not a revalidation after a stored answer).
    interim: bool,
    /// What the client's going away does: abandon the exchange (499), unless others want its
    /// answer (a cache fill); nothing for a revalidation after an answer from the store.
    watch: Watch<'r>,
    /// The route's upstream timeouts (its own over `[timeouts]`).
    t: &'r Timeouts,
    /// The route's `retry`, or the built-in rule.
    retry: &'r RetryPolicy,
    /// The route's `response_headers`.
    edits: Option<&'r HeaderEdits>,
    /// An early answer that does not refuse a streamed body lets it stream on (`duplex`).
    duplex: bool,
}

/// How the exchange ends when no server answered.
enum Unanswered {
    /// Answer the client with this error's status.
    Respond(ProxyError),
    /// Close the client connection without an answer.
    Close,
}

async fn fail(c: &mut ClientConn, req: &RequestInfo, e: ProxyError) -> Next {
    respond_error(c, e, req.method == RequestMethod::Head).await;
    Next::Close
}

/// One exchange: attempts until a server answers, then its response relayed.
pub async fn run(c: &mut ClientConn, req: &RequestInfo, group: GroupId) -> Next {
    let w = c.w.clone();
    let g = c.g.clone();
    let a = match upstream_answer(c, &w, &g, req, group, PLAIN).await {
        Ok(a) => a,
        Err(Some(e)) => return fail(c, req, e).await,
        Err(None) => {
            c.rec.failed(ProxyError::ClientGone);
            return Next::Close;
        }
    };
    end_client_head(&mut c.to_client, &a.head.resp);
    if a.head.resp.framing == ClientFraming::Tunnel {
        return start_tunnel(c, req, a).await;
    }
    relay_response(c, a, group, None).await.0
}

/// What an exchange's answer is to the client.
#[derive(Clone, Copy)]
struct Serving<'a> {
    /// The client is answered with it: it gets interim responses if it speaks HTTP/1.1 (a
    /// revalidation after an answer from the store is not).
    interim: bool,
    /// The request head stays at the front of `from_client` (a cache fetch reads its fields
    /// after the answer, then consumes it): only for a request without a body.
    keep_head: bool,
    /// What the client's going away while the head is awaited does.
    watch: Watch<'a>,
    /// A streamed request body may go on beside an early answer (`duplex`): only where the
    /// answer is surely relayed (`relay_response`), never dropped with the body half-read
    /// and the client connection kept.
    duplex: bool,
}

/// A plain exchange: the client gets the answer, the head is consumed at once, and its
/// going away abandons the request.
const PLAIN: Serving<'static> = Serving {
    interim: true,
    keep_head: false,
    watch: Watch::Abandon,
    duplex: true,
};

/// The upstream's answer to `req` (whose head is at the front of `from_client`): attempts until a
/// server answers. `Err`: none did; the error to answer with, or `None` to close.
async fn upstream_answer<'g>(
    c: &mut ClientConn,
    w: &ProxyWorker,
    g: &'g Generation,
    req: &'g RequestInfo,
    group: GroupId,
    how: Serving<'g>,
) -> Result<Answered<'g>, Option<ProxyError>> {
    let interim = how.interim;
    // A kept head is followed by no body: `inline` below is then 0 wherever the head is.
    debug_assert!(!how.keep_head || matches!(req.body, BodyKind::Empty | BodyKind::Length(0)));
    if !how.keep_head {
        c.from_client.advance(req.head_len);
    }
    let route = &g.cfg.routes[req.route];
    let t = route.timeouts(&g.cfg.timeouts);
    // A small body is in `from_client` whole before a server is picked, unless the route
    // streams every body (`request_buffering = false`).
    let gathers = route.buffers_request_body();
    let (inline, pace) = match req.body {
        BodyKind::Empty | BodyKind::Length(0) => (Some(0), None),
        BodyKind::Length(n) if gathers && n <= INLINE_BODY_MAX as u64 => {
            upload::gather_body(c, req, n as usize, t).await?;
            (Some(n as usize), None)
        }
        BodyKind::Chunked if gathers => {
            match upload::gather_chunked(c, req, INLINE_BODY_MAX, t).await? {
                upload::ChunkedBody::Joined(n) => (Some(n), None),
                upload::ChunkedBody::Streams(pace) => (None, pace),
            }
        }
        _ => (None, None),
    };
    let plan = Plan {
        g,
        req,
        group,
        head_len: c.to_upstream.len(),
        inline,
        pace,
        interim: interim && req.version == shared::http::Version::Http11,
        watch: how.watch,
        t,
        retry: route.retry(g.cfg.retry.as_ref()),
        edits: route.response_edits(),
        duplex: how.duplex,
    };
    let mut a = match attempts(c, w, &plan).await {
        Ok(a) => a,
        Err(Unanswered::Respond(e)) => return Err(Some(e)),
        Err(Unanswered::Close) => return Err(None),
    };
    if let Some(n) = inline {
        c.from_client.advance(n);
    }
    match a.body {
        Body::Refused(_) => a.head.resp = a.head.resp.answered_early().map_err(Some)?,
        // What follows the body in `from_client` is not known yet: a drain closes after
        // this answer, as for a request that came alone.
        Body::Streams(_) => {}
        // The body is all read; what follows it in `from_client` came while it arrived.
        Body::Sent(_) if !how.keep_head && !req.pipelined && !c.from_client.is_empty() => {
            a.head.resp.pipelined_behind_body(req);
        }
        Body::Sent(_) => {}
    }
    c.rec.upstream = Some(crate::record::Served {
        group,
        server: a.server,
    });
    c.rec.upstream_status = a.head.resp.status;
    Ok(a)
}

/// Attempts, server after server, until one answers or none is left, or the route's retry
/// policy (`retry`, else the built-in rule) or the worker's retry budget says the failure goes
/// to the client. Every failed attempt is counted against its server here and only here, from
/// what the attempt came to; every retry is decided and counted here.
async fn attempts<'g>(
    c: &mut ClientConn,
    w: &ProxyWorker,
    plan: &Plan<'g>,
) -> Result<Answered<'g>, Unanswered> {
    let g = plan.group;
    let group = &plan.g.cfg.groups[g];
    let balancer = plan.g.balancer(g);
    let mut tried: Vec<ServerId> = Vec::new();
    // A first pick that finds nothing: every server is down by health checks.
    let mut last = ProxyError::NoLiveUpstream;
    let mut bound = 2 * group.servers.len() + group.keepalive.min(64) + 2;
    // Tries made (a stale pooled connection's resend is not one).
    let mut tries = 0u32;
    // Until when a request short of descriptors waits for others to give theirs back.
    let mut short_of: Option<std::time::Instant> = None;
    let mut idle_settled = false;
    // The last attempt found no descriptor: the next goes on with its entry in the record.
    let mut waited = false;
    // A read buffer an attempt that got nothing leaves for the next.
    let mut spare: Option<BytesMut> = None;
    // The server's room for the next attempt: the one a stale pooled connection's resend
    // keeps (it goes to the same server at once, never behind the requests that queued for
    // that room meanwhile), else picked.
    let mut room: Option<InFlight<'g>> = None;
    let end = loop {
        if bound == 0 {
            break Err(Unanswered::Respond(last));
        }
        bound -= 1;
        let again = std::mem::take(&mut waited) || room.is_some();
        let in_flight = match room.take() {
            Some(f) => f,
            None => match pick_room(w, plan, &tried, last, &c.stream).await {
                Ok(f) => f,
                Err(e) => break Err(e),
            },
        };
        let s = in_flight.server();
        room = Some(in_flight);
        note_attempt(&mut c.rec, (g, s), again);
        let outcome = attempt(c, w, plan, (s, &mut room), &mut spare).await;
        // The room is given back here (a request that waits for a descriptor below must not
        // count itself in flight), unless a stale connection's resend keeps it.
        if !matches!(
            outcome,
            Attempt::Retry {
                why: RetryReason::Stale,
                ..
            }
        ) {
            room = None;
        }
        gateway_status(&mut c.rec, &outcome);
        if outcome.blame() == Blame::Server {
            blame_server(w, plan, s, &outcome);
            tried.push(s);
        }
        match outcome {
            Attempt::Answered(a) => {
                balancer.borrow_mut().succeeded(s);
                tries += 1;
                if !retries_status(plan, &a, tries) {
                    break Ok(a);
                }
                // Another server, if there is one and the budget allows: this answer is
                // dropped unread (its upstream connection closes, its room is given back),
                // the next one goes out.
                tried.push(s);
                if !another_server(w, plan, &tried) {
                    break Ok(a);
                }
                drop_for_retry(c, w, plan, s, a);
            }
            Attempt::Retry {
                error, why, sent, ..
            } => {
                last = error;
                tries += u32::from(why != RetryReason::Stale);
                if !goes_again(w, plan, &tried, (why, sent), tries) {
                    break Err(Unanswered::Respond(error));
                }
                w.count_retry(plan.g, plan.req.route, why);
            }
            Attempt::Fail {
                error: ProxyError::NoResources,
                ..
            } => {
                // Out of descriptors while other requests are in flight: one of them ends
                // soon and gives its socket (or its connection) back. Waiting is no attempt.
                let deadline =
                    *short_of.get_or_insert_with(|| shared::clock::loop_now() + plan.t.connect);
                let left = deadline.saturating_duration_since(shared::clock::loop_now());
                if !room::wait_for_release(balancer, left, &mut idle_settled).await {
                    break Err(Unanswered::Respond(ProxyError::NoResources));
                }
                bound += 1;
                last = ProxyError::NoResources;
                waited = true;
            }
            Attempt::Fail { error, .. } => break Err(Unanswered::Respond(error)),
            Attempt::Abort => break Err(Unanswered::Close),
        }
    };
    if let Some(b) = spare {
        w.buffers.give_buf(b);
    }
    end
}

/// An answer retried on its status: noted in the record as its attempt's, counted, dropped
/// unread.
fn drop_for_retry(c: &mut ClientConn, w: &ProxyWorker, plan: &Plan<'_>, s: ServerId, a: Answered) {
    let status = a.head.resp.status;
    c.rec.upstream_status = status;
    w.count_server(plan.g, (plan.group, s), |m| m.retried_for(status));
    w.buffers.give_buf(a.head.ub);
    w.count_retry(plan.g, plan.req.route, RetryReason::Status);
}

/// The record's entry for an attempt on server `s` of group `g`: a new one after the
/// attempts before it, or, `again`, the last one's still (a stale pooled connection's resend
/// to the same server, or the pick after a wait for a descriptor: neither is an attempt of
/// its own).
fn note_attempt(rec: &mut crate::record::Record, (g, s): (GroupId, ServerId), again: bool) {
    let server = crate::record::Served {
        group: g,
        server: s,
    };
    if again {
        rec.tried = Some(server);
        return;
    }
    // The clock is read for a retry alone: it times the attempt before.
    let now = rec.tried.map(|_| shared::clock::loop_now());
    rec.attempt(server, now);
}

/// A server with room for the next attempt, waiting in its group's queue for at most the
/// connect timeout. `last`: the error the client gets when no server is left. A request held
/// whole whose client goes away meanwhile gives its place up (499), as it abandons the wait
/// for an answer (`client_watch`); one whose body streams has the client's bytes to come, and
/// its leaving shows when they stop.
async fn pick_room<'g>(
    w: &ProxyWorker,
    plan: &Plan<'g>,
    tried: &[ServerId],
    last: ProxyError,
    client: &shared::stream::Stream,
) -> Result<InFlight<'g>, Unanswered> {
    let balancer = plan.g.balancer(plan.group);
    let pick = room::pick(balancer, plan.req.balance_key, tried, plan.t.connect);
    let watch = if plan.inline.is_some() {
        plan.watch
    } else {
        Watch::Off
    };
    // Biased: a room found at once is taken without a look at the client.
    let picked = monoio::select! {
        biased;
        p = pick => p,
        _ = client_watch::abandoned(client, watch) => return Err(Unanswered::Close),
    };
    match picked {
        Picked::Server(f) => Ok(f),
        Picked::NoneLeft => Err(Unanswered::Respond(last)),
        Picked::TimedOut => {
            let group = &plan.g.cfg.groups[plan.group];
            w.obs.log_error(format_args!(
                "upstream group {}: every server at max_conns for {:?}",
                group.name, plan.t.connect
            ));
            Err(Unanswered::Respond(ProxyError::QueueTimeout))
        }
    }
}

/// The access log's `upstream_status` of an attempt that ended with no answer by the
/// upstream's doing (a refused connect, a timeout, a close, a bad head; a stale pooled
/// connection's close too, which the balancer does not hold against the server): 504 after
/// a timeout, else 502, as nginx's `ngx_http_upstream_next` logs it. An attempt the client
/// ended, or one the proxy gave up (no descriptor), keeps none. Not an answer for the
/// metrics, which count one only from the server that answered (`rec.upstream`).
fn gateway_status(rec: &mut crate::record::Record, outcome: &Attempt<'_>) {
    if let Attempt::Retry { error, .. } | Attempt::Fail { error, .. } = outcome {
        if rec.upstream.is_none() && error.fault() == crate::error::Fault::Upstream {
            rec.upstream_status = error.status().unwrap_or(502);
        }
    }
}

/// Server `s` failed the attempt that came to `outcome`: marked failed for the balancer, the
/// failure counted against it.
fn blame_server(w: &ProxyWorker, plan: &Plan<'_>, s: ServerId, outcome: &Attempt<'_>) {
    let g = plan.group;
    plan.g
        .balancer(g)
        .borrow_mut()
        .failed(s, std::time::Instant::now());
    if let Attempt::Retry { error, .. } | Attempt::Fail { error, .. } = outcome {
        w.count_server(plan.g, (g, s), |m| m.failed(*error));
        // A failed connect was told where it failed, with its cause (`connect`).
        if !matches!(
            error,
            ProxyError::UpstreamRefused | ProxyError::ConnectTimeout
        ) {
            log_upstream_error(w, plan.g, (g, s), *error);
        }
    }
}

/// Server `s` of group `g` failed mid-body, after its answer's head: a failed attempt in its
/// counts and on stderr, as one before the head is (a server that cuts bodies must show in
/// its `failures_total`). Not marked failed for the balancer: as nginx's `max_fails`, which
/// counts no failure once the answer was taken (another server can no longer be tried).
fn body_cut(w: &ProxyWorker, gen: &Generation, at: (GroupId, ServerId), e: ProxyError) {
    w.count_server(gen, at, |m| m.failed(e));
    log_upstream_error(w, gen, at, e);
}

/// Tell of a failure of server `s` of group `g` on stderr (`Observability::upstream_error`).
fn log_upstream_error(
    w: &ProxyWorker,
    gen: &Generation,
    (g, s): (GroupId, ServerId),
    e: ProxyError,
) {
    let group = &gen.cfg.groups[g];
    let at = (group.name.as_str(), group.servers[s].name.as_str());
    w.obs.upstream_error(at, e, format_args!("{e}"));
}

/// Whether an answer's status is one the route retries on, with a try left, a request that
/// can go again whole (its body held, its method allowed) and nothing of the answer sent
/// to the client yet (an interim head would have been).
fn retries_status(plan: &Plan<'_>, a: &Answered<'_>, tries: u32) -> bool {
    plan.retry.on_status(a.head.resp.status)
        && tries < plan.retry.tries
        && plan.inline.is_some()
        && !a.body.early()
        && !a.head.interim_sent
        && plan.retry.allows(RetryReason::Status, plan.req.idempotent)
}

/// Whether a failed attempt goes again, after `tries` tries (`sent`: the request reached the
/// server). A stale connection's resend goes to the same server and costs the origin nothing
/// it did not have. Any other retry needs the route's leave, a server left to go to and the
/// worker's budget: one that cannot be made must neither drain the budget, which every route
/// shares, nor show in the retries counted.
fn goes_again(
    w: &ProxyWorker,
    plan: &Plan<'_>,
    tried: &[ServerId],
    (why, sent): (RetryReason, bool),
    tries: u32,
) -> bool {
    if !may_retry(plan.retry, why, sent, plan.req.idempotent) {
        return false;
    }
    if why == RetryReason::Stale {
        return true;
    }
    tries < plan.retry.tries && another_server(w, plan, tried)
}

/// A server not `tried` is there to go to, and the worker's retry budget gives the try
/// (taken from it then): a retry is spent and counted only when it will be made.
fn another_server(w: &ProxyWorker, plan: &Plan<'_>, tried: &[ServerId]) -> bool {
    let now = shared::clock::loop_now();
    let left = plan
        .g
        .balancer(plan.group)
        .borrow()
        .has_candidate(tried, now);
    left && spend_retry(w)
}

/// Take one retry from the worker's budget; `false` (counted): it is spent. The requests
/// are the worker's finished ones and this one.
fn spend_retry(w: &ProxyWorker) -> bool {
    let total = w.stats.requests.get() + 1;
    let took = w
        .retry_budget
        .borrow_mut()
        .take(shared::clock::loop_now(), total);
    if !took {
        w.count_budget_exhausted();
    }
    took
}

/// One attempt on server `s`: a connection (pooled or new), the request, the response head.
/// The server's room goes into the answer; an attempt that got none leaves it to the caller.
async fn attempt<'g>(
    c: &mut ClientConn,
    w: &ProxyWorker,
    plan: &Plan<'g>,
    (s, room): (ServerId, &mut Option<InFlight<'g>>),
    spare: &mut Option<BytesMut>,
) -> Attempt<'g> {
    let (g, cfg) = (plan.group, &plan.g.cfg);
    let server = &cfg.groups[g].servers[s];
    // The upstream times run from here, the connect included (as nginx's do).
    let started = w.timing(plan.g).then(shared::clock::loop_now);
    // The last attempt's start, answered or not (a failed one's time is logged too).
    c.rec.upstream_sent = started;
    let mut up = match upstream_for(c, w, plan, s).await {
        Ok(up) => up,
        Err(failed) => return failed,
    };
    let sent = match send_head(c, plan, server, &mut up).await {
        Ok(sent) => sent,
        Err(unsent) => return unsent,
    };
    w.count_server(plan.g, (g, s), |m| m.requests += 1);
    up.requests += 1;
    let mut ub = spare.take().unwrap_or_else(|| w.buffers.take_buf());
    ub.clear();
    let (body, head) = if let HeadSent::Part(buf, at) = sent {
        match upload::send_rest(c, w, plan, up, ub, (buf, at)).await {
            Ok(Streamed { head, body }) => (body, head),
            Err(f) => return f,
        }
    } else if plan.inline.is_some() {
        let to = HeadRead {
            req: plan.req,
            out: &mut c.to_client,
            fields: &mut c.response_fields,
            limits: &cfg.limits.codec,
            read_timeout: Some(plan.t.read),
            at_most: head_read(&up),
            // The whole request is sent: a client that goes away now abandons it (499), and
            // dropping `up` closes the upstream connection (never pooled half-answered).
            client: Some((&mut c.stream, &mut c.rec)),
            interim: plan.interim,
            watch: plan.watch,
            send_timeout: cfg.timeouts.send,
            edits: plan.edits,
            memo: Some(plan.g.head_memo(g, s)),
        };
        match read_response_head(w, &mut up.stream, ub, to).await {
            Ok(head) => (Body::Sent(up), head),
            Err(mut f) => {
                if let HeadFail::Nothing(b) = &mut f {
                    *spare = b.take();
                }
                // The request is held whole: it may go again (`may_retry` decides).
                return no_head(f, true, up.reused);
            }
        }
    } else {
        match stream_request(c, w, plan, up, ub).await {
            Ok(Streamed { head, body }) => (body, head),
            Err(f) => return f,
        }
    };
    c.rec.upstream_sent = started;
    c.rec.upstream_ttfb = started.map(|t| shared::clock::loop_now().saturating_duration_since(t));
    Attempt::Answered(Answered {
        server: s,
        body,
        head,
        timeouts: plan.t,
        _in_flight: room.take(),
    })
}

/// The connection an attempt on server `s` goes out on: pooled (not for a group that sends
/// PROXY headers), or new; a failure is the attempt's outcome.
async fn upstream_for<'g>(
    c: &ClientConn,
    w: &ProxyWorker,
    plan: &Plan<'g>,
    s: ServerId,
) -> Result<Upstream, Attempt<'g>> {
    let (g, cfg) = (plan.group, &plan.g.cfg);
    let server = &cfg.groups[g].servers[s];
    // A group that sends PROXY headers pools nothing (a reload that turned them on may have
    // kept connections made without one: they are not taken).
    let pooled = match cfg.groups[g].proxy_protocol {
        None => plan
            .g
            .pool(g, s)
            .borrow_mut()
            .take(shared::clock::loop_now()),
        Some(_) => None,
    };
    let tls = match (&cfg.groups[g].tls, plan.g.upstream_tls(g)) {
        (None, _) => None,
        (Some(t), Some(client)) => Some((client, &t.names[s])),
        // `resolve` checked that a client config can be made: never here.
        (Some(_), None) => {
            return Err(Attempt::Fail {
                error: ProxyError::UpstreamRefused,
                blame: Blame::Nobody,
            })
        }
    };
    let proxy_header = cfg.groups[g]
        .proxy_protocol
        .map(|v| send_proxy_header(c, v));
    let to = Dest {
        server,
        tls,
        proxy_header,
    };
    if let Some(up) = pooled {
        return Ok(up);
    }
    match counted_connect(w, plan.g, to, plan.t.connect, (g, s)).await {
        Ok(up) => Ok(up),
        Err(ProxyError::NoResources) => Err(Attempt::Fail {
            error: ProxyError::NoResources,
            blame: Blame::Nobody,
        }),
        Err(error) => Err(Attempt::Retry {
            error,
            blame: Blame::Server,
            why: RetryReason::Connect,
            sent: false,
        }),
    }
}

/// The most a response head read takes on `up`: little where its body is to be spliced.
fn head_read(up: &Upstream) -> usize {
    if up.splices {
        crate::splice::HEAD_READ
    } else {
        usize::MAX
    }
}

/// How far the request's first write got.
enum HeadSent {
    /// All of it (the common case): `to_upstream` has its buffer back.
    Whole,
    /// Part of a request held whole (`Plan::inline`): the buffer, and how much of it went.
    /// The upstream took some and stopped: it may be answering already (a 413 before the
    /// body), so the rest goes while the answer is read (`upload::send_rest`).
    Part(BytesMut, usize),
}

/// Send the request head (with a body that came with it) in one write, as one `write` (the
/// common case: the socket takes it all); `Err`: what the attempt came to. A head without its
/// body that did not go at once is finished here (no answer comes before a whole head).
async fn send_head(
    c: &mut ClientConn,
    plan: &Plan<'_>,
    server: &Server,
    up: &mut Upstream,
) -> Result<HeadSent, Attempt<'static>> {
    c.to_upstream.truncate(plan.head_len);
    if !plan.req.host_written {
        write_header(&mut c.to_upstream, b"Host", server.host.as_bytes());
    }
    end_head(&mut c.to_upstream);
    if let Some(n) = plan.inline {
        c.to_upstream.extend_from_slice(&c.from_client[..n]);
    }
    let buf = std::mem::take(&mut c.to_upstream);
    let len = buf.len();
    let limit = plan.t.upstream_send;
    match write_once(&mut up.stream, buf, (0, len), limit).await {
        Ok((n, b)) if n == len => {
            c.to_upstream = b;
            Ok(HeadSent::Whole)
        }
        Ok((n, b)) if plan.inline.is_some() => Ok(HeadSent::Part(b, n)),
        // Some of the head went: the request is the server's now, never sent again.
        Ok((n, b)) => match write_range(&mut up.stream, b, n, len, limit).await {
            Ok(b) => {
                c.to_upstream = b;
                Ok(HeadSent::Whole)
            }
            Err(f) => Err(Attempt::Fail {
                error: unanswered_write(f.fail),
                blame: Blame::Server,
            }),
        },
        // Nothing was delivered: safe to send again, whatever the method.
        Err(WriteFail {
            buf: Some(b), fail, ..
        }) => {
            c.to_upstream = b;
            Err(Attempt::Retry {
                error: unanswered_write(fail),
                blame: Blame::unless_stale(up.reused),
                why: match up.reused {
                    true => RetryReason::Stale,
                    false => RetryReason::Connect,
                },
                sent: false,
            })
        }
        Err(WriteFail { buf: None, .. }) => Err(Attempt::Fail {
            error: ProxyError::UpstreamTimeout,
            blame: Blame::Server,
        }),
    }
}

/// What a failed write of the request is, before any byte of an answer: a timeout, or the
/// server closed without answering (`upstream_closed`, as a close or a reset noticed while
/// the answer is awaited: which of the two notices it depends on the request's size and the
/// buffers on the way, not on what the server did).
fn unanswered_write(f: crate::io::IoFail) -> ProxyError {
    match f {
        crate::io::IoFail::Timeout => ProxyError::UpstreamTimeout,
        crate::io::IoFail::Error(_) => ProxyError::UpstreamClosed,
    }
}

/// Relay the response body (filling a cache entry on the way when `fill` is given), beside
/// the rest of the request body when it still streams (`duplex`), then pool the upstream
/// connection if it is clean. With the entry the body filled, if any.
async fn relay_response(
    c: &mut ClientConn,
    a: Answered<'_>,
    group: GroupId,
    fill: Option<relay::FillSink<'_>>,
) -> (Next, Option<crate::cache::Handle>) {
    let w = c.w.clone();
    let Answered {
        server,
        body,
        head: Head { resp, ub, .. },
        timeouts,
        _in_flight,
    } = a;
    // The client gets the body (not only the head of a HEAD, nor nothing at all while a
    // revalidation fills the store).
    let body_to_client = !fill.as_ref().is_some_and(|f| f.head_only || f.silent);
    let early = matches!(body, Body::Refused(_));
    let answer = (&resp, ub, timeouts);
    // `body_failed`: the rest of a request body that streamed beside the answer failed.
    let (relayed, mut up, body_failed) = match body {
        Body::Sent(mut up) | Body::Refused(mut up) => {
            let relayed = relay_answer(c, &w, &mut up, answer, fill, true).await;
            (relayed, up, false)
        }
        Body::Streams(u) => relay_beside_body(c, &w, u, answer, fill).await,
    };
    c.upstream_ended();
    match relayed {
        Ok(done) => {
            w.buffers.give_buf(done.buf);
            let filled = done.filled;
            // A connection that carries large bodies stays read one-shot, so that the next
            // one can be spliced too (a multishot receive, once armed, stays).
            up.splices = c.g.cfg.splice
                && crate::splice::worth_it(resp.body)
                && !up.stream.waits_bufferless();
            if done.spliced {
                w.stats.spliced.incr();
            }
            // A connection that began with a client's PROXY header is that client's alone.
            let own = c.g.cfg.groups[group].proxy_protocol.is_none();
            if resp.upstream_keep_alive && done.clean && own && !body_failed {
                c.g.pool(group, server)
                    .borrow_mut()
                    .put(up, shared::clock::loop_now());
            }
            let next = if done.client_gone {
                // It left mid-body; the rest went into the entry others stream.
                Next::Close
            } else if early || body_failed {
                // The answer went whole; the request's body did not (`body_failed`), or was
                // refused (`early`): the connection ends, not the answer (no reset). Let the
                // client read the response before the close resets the connection.
                linger_close(c);
                Next::Close
            } else if resp.client_keep_alive {
                Next::KeepAlive
            } else {
                Next::Finished
            };
            (next, filled)
        }
        Err(f @ (RelayFail::Upstream(e) | RelayFail::Client(e))) => {
            if let RelayFail::Upstream(e) = f {
                body_cut(&w, &c.g, (group, server), e);
            }
            // Mid-body (a head held for its short body went out first: the origin's status
            // shows, `relay::response_body`): the client connection is aborted; what it got
            // is visibly incomplete: a length or a chunked body falls short of its end; a
            // close-delimited one has no end but the close, which must then be a reset. Over TLS the close already
            // shows it (dropped, the stream sends no close_notify: RFC 8446 6.1 truncation,
            // which a reset would only race against the last bytes). `Next::Close` drops the
            // stream (no half-close that would send a FIN first). The client's side failing
            // cuts the answer too: its request body streaming beside the answer timed out or
            // ended short, while the client may still be reading.
            if resp.framing == ClientFraming::Close && body_to_client && !c.stream.is_tls() {
                // Failing, the close is a FIN as before: nothing better to do.
                let _ = reset_on_close(c);
            }
            c.rec.failed(e);
            (Next::Close, None)
        }
    }
}

/// [`relay_answer`] while the rest of the request body streams to the upstream (`duplex`):
/// the answer's result, the connection, and whether the body failed. The upload is kept
/// whole (not bound field by field): dropped on cancellation, the body's future goes before
/// the connection it points into (the struct's field order).
async fn relay_beside_body(
    c: &mut ClientConn,
    w: &ProxyWorker,
    mut u: duplex::Upload<'_>,
    answer: (&crate::forward::ResponseInfo, BytesMut, &Timeouts),
    fill: Option<relay::FillSink<'_>>,
) -> (Result<relay::Relayed, RelayFail>, Upstream, bool) {
    // No splice: it waits on the sockets its own way, and the body uses them too.
    let relay = relay_answer(c, w, &mut u.up, answer, fill, false);
    let (relayed, end) = duplex::both(relay, &mut u.body).await;
    let duplex::Upload { body, up } = u;
    // The body's future goes first: it points into `up`.
    drop(body);
    let body_failed = match end {
        Some(end) => {
            let failed = end.result.is_err();
            end.restore(&mut c.from_client, &mut c.to_upstream);
            failed
        }
        None => true,
    };
    (relayed, *up, body_failed)
}

/// Send the client's response head and the response body from `up` to the client (filling
/// `fill` on the way), spliced where `splice` and the configuration allow.
async fn relay_answer(
    c: &mut ClientConn,
    w: &ProxyWorker,
    up: &mut Upstream,
    (resp, ub, timeouts): (&crate::forward::ResponseInfo, BytesMut, &Timeouts),
    fill: Option<relay::FillSink<'_>>,
    splice: bool,
) -> Result<relay::Relayed, RelayFail> {
    let splices = splice && fill.is_none() && c.g.cfg.splice;
    let relay = relay::ResponseRelay {
        client: &mut c.stream,
        up: &mut up.stream,
        head: &mut c.to_client,
        kind: resp.body,
        framing: resp.framing,
        splice: splices.then_some(relay::SpliceWith {
            pipes: &w.buffers.pipes,
            client_nonblocking: &mut c.nonblocking,
            up_nonblocking: &mut up.nonblocking,
        }),
        fill,
        rec: &mut c.rec,
    };
    relay::response_body((&c.g.cfg, timeouts), relay, ub, resp.head_len).await
}

/// Send the 101 head (with any bytes the upstream sent after it) to the client and whatever
/// the client sent after its request to the upstream; then the connection is a tunnel, which
/// holds the server's room until it ends.
async fn start_tunnel(c: &mut ClientConn, req: &RequestInfo, a: Answered<'_>) -> Next {
    let Answered {
        body,
        head,
        _in_flight: room,
        ..
    } = a;
    let mut up = body.into_upstream();
    let g = c.g.clone();
    // The route's own timeouts, as every other wait of its exchanges.
    let t = g.cfg.routes[req.route].timeouts(&g.cfg.timeouts);
    let Head { resp, ub, .. } = head;
    c.to_client.extend_from_slice(&ub[resp.head_len..]);
    c.w.buffers.give_buf(ub);
    let buf = std::mem::take(&mut c.to_client);
    match write_all(&mut c.stream, buf, t.send).await {
        Ok(b) => c.rec.wrote(&b),
        Err(_) => return Next::Close,
    }
    if !c.from_client.is_empty() {
        let buf = std::mem::take(&mut c.from_client);
        let len = buf.len();
        if write_range(&mut up.stream, buf, 0, len, t.upstream_send)
            .await
            .is_err()
        {
            return Next::Close;
        }
    }
    Next::Tunnel(crate::tunnel::Tunnel {
        up: up.stream,
        limits: crate::tunnel::Limits::of(t),
        room: room.and_then(InFlight::detach),
    })
}
