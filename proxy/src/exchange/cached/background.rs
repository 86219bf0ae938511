//! The one revalidation of a stale entry served within its `stale-while-revalidate` (RFC 5861
//! 3), as a task of its own on the worker: the client that started it got the stale response
//! and goes on with its next request at once; the task owns its copy of the request, its
//! upstream connection and the fill. A 304 refreshes the entry (one whose validator selects
//! no stored response updates nothing, and the request goes once more without a validator,
//! RFC 9111 4.3.4), another storable answer
//! replaces it (read whole from the upstream, sent nowhere), and a failure leaves it as it was
//! (counted in the store's `revalidation_errors`): the next request within the window starts
//! another.
//!
//! Bounded: at most [`MAX_BACKGROUND`] run at once on a worker; past it a stale entry is
//! served without starting one (a later request of the window does). The fill entry is the
//! one-revalidation-per-key guard (lookups of the key see a fill under way and start none);
//! the task's end, however it ends (a panic included), releases it.

use super::super::response_head::{read_response_head, HeadFail, HeadRead};
use super::super::room::Picked;
use super::super::{counted_connect, Dest};
use super::decide::Refill;
use super::fetch::{fill_head, finish_fill, refresh, to_get, Fetch, Refresh, Response};
use crate::cache::{validate, CacheStatus, Millis};
use crate::config::{GroupId, ServerId};
use crate::conn::ClientConn;
use crate::error::ProxyError;
use crate::forward::{ClientFraming, ResponseFields};
use crate::generation::{CacheId, Generation};
use crate::pool::Upstream;
use crate::relay::FillSink;
use crate::request::{HeadFields, RequestInfo};
use crate::worker::ProxyWorker;
use bytes::{Bytes, BytesMut};
use shared::http::encode::{end_head, write_header};
use shared::http::RequestMethod;
use std::cell::Cell;
use std::rc::Rc;

/// Background revalidations running at once on one worker, at most.
pub const MAX_BACKGROUND: usize = 32;

thread_local! {
    /// Background revalidations running on this worker (one runtime per thread).
    static RUNNING: Cell<usize> = const { Cell::new(0) };
}

/// What a background revalidation owns: its copy of the request, and the fill.
struct Job {
    w: Rc<ProxyWorker>,
    g: Rc<Generation>,
    cache: CacheId,
    group: GroupId,
    /// The request as fetched (a HEAD is fetched with GET).
    req: RequestInfo,
    /// The client's request head (`req`'s spans and `fields` lie in it): storing reads it.
    head: Bytes,
    fields: HeadFields,
    /// The upstream request head, conditional, without Host and the final CRLF.
    upstream: BytesMut,
    refill: Refill,
    request_time: Millis,
}

/// Start the revalidation `r` of the stale entry the request `req` was answered with (its
/// head still at the front of `from_client`), as a task of its own; past [`MAX_BACKGROUND`]
/// it is not started (the fill is released).
pub(super) fn start(
    c: &ClientConn,
    req: &RequestInfo,
    (cache, group): (CacheId, GroupId),
    r: Refill,
    request_time: Millis,
) {
    let store = &c.g.cached(cache).store;
    if RUNNING.get() >= MAX_BACKGROUND {
        let mut s = store.borrow_mut();
        s.abandon(r.fill);
        s.note_revalidation_skipped();
        return;
    }
    let mut upstream = BytesMut::from(&c.to_upstream[..]);
    let req = if req.method == RequestMethod::Head {
        to_get(&mut upstream);
        RequestInfo {
            method: RequestMethod::Other,
            ..*req
        }
    } else {
        *req
    };
    // The cache's own request: the client had its answer (from the stale entry, its
    // preconditions and range applied there).
    let v = r
        .validates
        .as_ref()
        .map(|(_, s)| validate::validators(&s.head));
    validate::make_own_request(&mut upstream, v);
    let job = Job {
        w: c.w.clone(),
        g: c.g.clone(),
        cache,
        group,
        head: Bytes::copy_from_slice(&c.from_client[..req.head_len]),
        fields: c.fields.clone(),
        req,
        upstream,
        refill: r,
        request_time,
    };
    RUNNING.set(RUNNING.get() + 1);
    let w = c.w.clone();
    let task =
        shared::contain::Contained::new(shared::deadline::scope(run(job)), move |what: &str| {
            w.stats.panics.incr();
            w.obs
                .log_error(format_args!("a background revalidation panicked: {what}"));
        });
    monoio::spawn(task);
}

/// Releases the task's slot and, unless the task settled it, its fill: however it ends.
struct Settle {
    g: Rc<Generation>,
    cache: CacheId,
    fill: Option<crate::cache::Handle>,
}

impl Drop for Settle {
    fn drop(&mut self) {
        RUNNING.set(RUNNING.get().saturating_sub(1));
        if let Some(h) = self.fill {
            self.g.cached(self.cache).store.borrow_mut().abandon(h);
        }
    }
}

impl Job {
    /// The request's route's upstream timeouts (its own over `[timeouts]`).
    fn timeouts(&self) -> &crate::config::Timeouts {
        self.g.cfg.routes[self.req.route].timeouts(&self.g.cfg.timeouts)
    }
}

async fn run(mut job: Job) {
    let mut settle = Settle {
        g: job.g.clone(),
        cache: job.cache,
        fill: Some(job.refill.fill),
    };
    loop {
        match revalidate(&job, &mut settle).await {
            Ok(Revalidated::Done) => return,
            // At most once: the request asked again carries no validator.
            Ok(Revalidated::SelectedNothing) => {
                validate::make_unconditional(&mut job.upstream);
                job.refill.validates = None;
            }
            Err(e) => {
                let store = &job.g.cached(job.cache).store;
                store.borrow_mut().note_revalidation_error();
                job.w
                    .obs
                    .log_error(format_args!("background revalidation: {e}"));
                return;
            }
        }
    }
}

/// How a revalidation ended.
enum Revalidated {
    Done,
    /// A 304 whose validator selects no stored response (RFC 9111 4.3.4): nothing was
    /// updated, and the request goes again without a validator, as a client's own
    /// validation does (else every request of the window would start the same one).
    SelectedNothing,
}

/// The revalidation: a connection, the conditional request, its answer applied.
async fn revalidate(job: &Job, settle: &mut Settle) -> Result<Revalidated, ProxyError> {
    let (w, g) = (&*job.w, &*job.g);
    let cfg = &g.cfg;
    let route = g.cached(job.cache);
    let (store, entry_cfg) = (&route.store, &*route.cfg);
    // The route's upstream timeouts, as its clients' own fetches have.
    let t = job.timeouts();
    // Within `max_conns` like any request (a revalidation's key: none, it is no hash pick).
    let balancer = g.balancer(job.group);
    let in_flight = match super::super::room::pick(balancer, 0, &[], t.connect).await {
        Picked::Server(f) => f,
        Picked::NoneLeft => return Err(ProxyError::NoLiveUpstream),
        Picked::TimedOut => return Err(ProxyError::QueueTimeout),
    };
    let s = in_flight.server();
    let answered = answer(job, s).await;
    noted(job, s, answered.as_ref().err().copied());
    let (mut up, head) = answered?;
    let (resp, ub, rf) = head;
    let f = Fetch {
        status: CacheStatus::Stale,
        fill: Some((store, job.refill.fill, entry_cfg)),
        cache: Some((store, entry_cfg)),
        stale: Some(job.refill.entry),
        validates: job.refill.validates.clone(),
        invalidate: false,
        request_time: job.request_time,
        targeted: &entry_cfg.targeted,
    };
    if let (Some((entry, stored)), 304) = (&f.validates, resp.status) {
        let selected = job.fields.with(&job.head, |_, request| {
            rf.with(&ub, |_, new| {
                let selected = validate::selects(validate::validators(&stored.head).etag, new);
                if selected {
                    let to = Refresh {
                        store,
                        entry: *entry,
                        cfg: entry_cfg,
                        request,
                        request_time: f.request_time,
                    };
                    refresh(&to, stored, new);
                }
                selected
            })
        });
        if resp.upstream_keep_alive && ub.len() == resp.head_len {
            g.pool(job.group, s)
                .borrow_mut()
                .put(up, std::time::Instant::now());
        }
        w.buffers.give_buf(ub);
        return Ok(match selected {
            true => Revalidated::Done,
            false => Revalidated::SelectedNothing,
        });
    }
    let r = Response {
        info: &resp,
        ub: &ub,
    };
    let kept = job.fields.with(&job.head, |_, request| {
        fill_head(request, &r, &rf, w, g, &f)
    });
    // A full answer that is not stored supersedes the stale entry all the same (RFC 9111
    // 4.3.3), unless it is an error (RFC 5861 4 lets the stale one stand); a 304 (to the
    // request asked without a validator: a broken origin) is no full answer.
    if !kept && !matches!(resp.status, 304 | 500 | 502 | 503 | 504) {
        store.borrow_mut().abandon(job.refill.entry);
    }
    let fill = job.refill.fill;
    let mut sink = FillSink {
        store,
        handle: kept.then_some(fill),
        head_only: true,
        silent: true,
    };
    let kind = match resp.framing {
        ClientFraming::Empty => shared::http::BodyKind::Empty,
        _ => resp.body,
    };
    settle.fill = None;
    let read = crate::relay::fill_only(
        (cfg, t),
        &mut up.stream,
        (ub, resp.head_len),
        kind,
        &mut sink,
    );
    let read = read.await;
    let filled = read.as_ref().ok().and(sink.handle);
    finish_fill(store, fill, filled, w, g);
    let (buf, clean) = read.inspect_err(|&e| body_cut(job, s, e))?;
    w.buffers.give_buf(buf);
    if resp.upstream_keep_alive && clean {
        g.pool(job.group, s)
            .borrow_mut()
            .put(up, std::time::Instant::now());
    }
    Ok(Revalidated::Done)
}

/// Server `s` answered (`failed` is `None`) or not: its failure counts against it as a
/// client's exchange's would (no other server is tried: the next request in the window
/// revalidates again).
fn noted(job: &Job, s: ServerId, failed: Option<ProxyError>) {
    let (w, g) = (&*job.w, &*job.g);
    let mut b = g.balancer(job.group).borrow_mut();
    match failed {
        None => b.succeeded(s),
        Some(ProxyError::NoResources) => {}
        Some(e) => {
            b.failed(s, std::time::Instant::now());
            w.count_server(g, (job.group, s), |m| m.failed(e));
        }
    }
}

/// Server `s` failed mid-body, after the answer's head: a failed attempt in its counts, as a
/// client's fetch's body cut is (`exchange::body_cut`), and, as there, not marked failed for
/// the balancer.
fn body_cut(job: &Job, s: ServerId, e: ProxyError) {
    if e != ProxyError::NoResources {
        job.w.count_server(&job.g, (job.group, s), |m| m.failed(e));
    }
}

/// Server `s`'s answer: a connection (a pooled one that went stale gets one more try on a new
/// one), the request, the answer's head.
async fn answer(job: &Job, s: ServerId) -> Result<(Upstream, HeadIn), ProxyError> {
    let (w, g) = (&*job.w, &*job.g);
    let mut pooled = true;
    loop {
        let mut up = connection(w, g, (job.group, s), (pooled, job.timeouts().connect)).await?;
        match exchange(job, &mut up, s).await {
            Ok(head) => return Ok((up, head)),
            Err(HeadFail::Nothing(b)) if up.reused => {
                if let Some(b) = b {
                    w.buffers.give_buf(b);
                }
                pooled = false;
            }
            Err(HeadFail::Nothing(_)) => return Err(ProxyError::UpstreamClosed),
            Err(HeadFail::Timeout { .. }) => return Err(ProxyError::UpstreamTimeout),
            Err(HeadFail::Bad(e)) => return Err(e),
            Err(HeadFail::Client) => return Err(ProxyError::ClientGone),
        }
    }
}

/// A connection to server `s` of group `g`: from the pool if `pooled` and one is there, else
/// a new one (within `connect`).
async fn connection(
    w: &ProxyWorker,
    gen: &Generation,
    (g, s): (GroupId, ServerId),
    (pooled, connect): (bool, std::time::Duration),
) -> Result<Upstream, ProxyError> {
    if pooled {
        if let Some(up) = gen.pool(g, s).borrow_mut().take(std::time::Instant::now()) {
            return Ok(up);
        }
    }
    let cfg = &gen.cfg;
    let tls = match (&cfg.groups[g].tls, gen.upstream_tls(g)) {
        (None, _) => None,
        (Some(t), Some(client)) => Some((client, &t.names[s])),
        (Some(_), None) => return Err(ProxyError::UpstreamRefused),
    };
    let to = Dest {
        server: &cfg.groups[g].servers[s],
        tls,
        // No client behind a revalidation: the proxy's own header, as health checks send.
        proxy_header: cfg.groups[g]
            .proxy_protocol
            .map(|v| v.own_header().to_vec()),
    };
    counted_connect(w, gen, to, connect, (g, s)).await
}

type HeadIn = (crate::forward::ResponseInfo, BytesMut, ResponseFields);

/// Send the request on `up` and read the answer's head.
async fn exchange(job: &Job, up: &mut Upstream, s: ServerId) -> Result<HeadIn, HeadFail> {
    let (w, g) = (&*job.w, &*job.g);
    let cfg = &g.cfg;
    let mut out = job.upstream.clone();
    if !job.req.host_written {
        let server = &cfg.groups[job.group].servers[s];
        write_header(&mut out, b"Host", server.name.as_bytes());
    }
    end_head(&mut out);
    let t = job.timeouts();
    let sent = crate::io::write_all(&mut up.stream, out, t.upstream_send).await;
    if sent.is_err() {
        return Err(HeadFail::Nothing(None));
    }
    w.count_server(g, (job.group, s), |m| m.requests += 1);
    up.requests += 1;
    let mut ub = w.buffers.take_buf();
    ub.clear();
    let mut rf = ResponseFields::default();
    rf.want(true);
    // The client head it writes is nobody's.
    let mut client_head = BytesMut::new();
    let to = HeadRead {
        req: &job.req,
        out: &mut client_head,
        fields: &mut rf,
        limits: &cfg.limits.codec,
        read_timeout: Some(t.read),
        at_most: usize::MAX,
        client: None,
        interim: false,
        watch: super::super::client_watch::Watch::Off,
        send_timeout: cfg.timeouts.send,
        // Nobody reads this head: the stored one is edited when it is sent.
        edits: None,
        memo: Some(g.head_memo(job.group, s)),
    };
    let head = read_response_head(w, &mut up.stream, ub, to).await?;
    Ok((head.resp, head.ub, rf))
}
