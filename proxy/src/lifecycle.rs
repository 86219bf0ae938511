//! One worker's life: its inbox task (messages from the other workers), its accept loops,
//! its health checks and sweeps, then the drain at shutdown or after a handover. The state
//! these tasks share is `crate::worker`'s.

use crate::config::Config;
use crate::metrics::Finals;
use crate::worker::{invalidate_here, ProxyCounters, ProxyWorker, WorkerMsg};
use shared::runtime::WorkerCtx;
use shared::shutdown::Shutdown;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The worker's inbox task: messages from other workers, until the inbox closes, the worker is
/// gone or shutdown fires. It holds the worker weakly (a task must not keep the worker's state
/// alive), and it ends at shutdown so that `run` can wait for it: a read still pending on the
/// inbox's socket when the worker's runtime is dropped left that worker thread hanging (the
/// listeners of a draining proxy stayed open in 3 of 10 runs of tests/proxy_drain.rs under
/// load).
async fn inbox(
    w: std::rc::Weak<ProxyWorker>,
    mut inbox: shared::inbox::Inbox<WorkerMsg>,
    shutdown: Shutdown,
) {
    let mut stop = shutdown.wait();
    loop {
        let msg = monoio::select! {
            m = inbox.recv() => m,
            _ = &mut stop => return,
        };
        let (Some(msg), Some(w)) = (msg, w.upgrade()) else {
            return;
        };
        match msg {
            WorkerMsg::Purge(key) => {
                invalidate_here(&w, &key);
                w.stats.cache_purges_received.incr();
            }
            WorkerMsg::Snapshot(reply) => reply.send(w.snapshot()),
            WorkerMsg::ReopenLog(r) => w.obs.reopen_log(w.generation().access_log.as_ref(), r),
            WorkerMsg::FlushLogs(reply) => {
                w.obs.flush_logs(w.generation().access_log.as_ref());
                reply.send(());
            }
            WorkerMsg::Health(change) => crate::health::apply(&w, &change),
            WorkerMsg::HandOver(reply) => {
                w.life.handover.fire();
                reply.send(());
            }
            WorkerMsg::Reload {
                number,
                cfg,
                log,
                reply,
            } => {
                let prev = w.generation();
                let (next, carried) = w.next_generation(number, cfg, log);
                crate::health::carry_over(&prev, &next);
                let mut metrics = w.obs.metrics.borrow_mut();
                let same = metrics.rekey(&prev.cfg, &next.cfg);
                for c in prev.cached_routes() {
                    let kept = next.stores().any(|s| Rc::ptr_eq(s, &c.store));
                    if let (false, Some(r)) = (kept, same.route(c.route)) {
                        metrics.store_replaced(r, &c.store.borrow().stats());
                    }
                }
                drop(metrics);
                w.set_generation(next);
                // The previous generation's checks end at their next tick.
                crate::health::start(&w);
                start_log_tick(&w);
                reply.send(carried);
            }
        }
    }
}

/// Run one worker: accept on its listeners until shutdown, then let in-flight connections
/// finish up to the shutdown deadline.
pub async fn run(
    ctx: WorkerCtx,
    cfg: Arc<Config>,
    listeners: Vec<(usize, std::net::TcpListener)>,
    (stats, log): (Arc<ProxyCounters>, Option<std::fs::File>),
    post: shared::inbox::Post<WorkerMsg>,
    finals: Arc<Finals>,
) {
    let mailbox = post.inbox(ctx.id);
    let w = Rc::new(ProxyWorker::with_post(
        ctx.id,
        cfg.clone(),
        ctx.shutdown.clone(),
        stats,
        Some(post),
        log,
    ));
    // The inbox outlives shutdown until this worker's drain ends, and its final counts answer
    // for it after that (`Finals`): a scrape during the drain is answered, whole.
    let drained = Shutdown::new();
    let inbox_task = match mailbox {
        Ok(m) => Some(monoio::spawn(inbox(Rc::downgrade(&w), m, drained.clone()))),
        Err(e) => {
            shared::log!(
                "proxy: worker {}: no inbox (purges from other workers will not reach it): {e}",
                ctx.id
            );
            None
        }
    };
    let mut accepts = Vec::with_capacity(listeners.len());
    // Each with its index in `cfg.listeners` (after a takeover from a process with more
    // workers, a worker may have several sockets of one listener).
    for (i, l) in listeners {
        match monoio::net::TcpListener::from_std(l) {
            Ok(l) => {
                let listener = cfg.listeners.get(i);
                let tls = listener.and_then(|l| l.tls.as_ref());
                let tls = tls.map(|t| (i, t.built.config.clone()));
                let proxied = listener.is_some_and(|l| l.proxy_protocol);
                accepts.push(monoio::spawn(crate::accept::run(
                    w.clone(),
                    l,
                    tls,
                    proxied,
                )))
            }
            Err(e) => shared::log!("proxy: worker {}: cannot use listener: {e}", ctx.id),
        }
    }
    w.life.accepting.set(accepts.len());
    monoio::spawn(sweep_pools(w.clone()));
    start_log_tick(&w);
    crate::health::start(&w);
    let handed_over = monoio::select! {
        _ = ctx.shutdown.wait() => false,
        _ = w.life.handover.wait() => true,
    };
    if handed_over {
        drain_handed_over(&w, &ctx.shutdown).await;
    }
    for a in accepts {
        a.await;
    }
    crate::health::stopped(&w).await;
    // The accepts the loops dropped were cancelled: let the driver submit the cancels and
    // reap them before the ring goes. A pending accept left to the kernel's (asynchronous)
    // ring teardown can still take a connection after the process exited, and that
    // connection is lost; after a handover the socket lives on in the new process, so that
    // would be a client's connection.
    monoio::time::sleep(Duration::from_millis(2)).await;
    // Idle keep-alive connections close on their own when shutdown fires; the ones with a
    // request in flight get until the deadline.
    let deadline = Instant::now() + w.generation().cfg.timeouts.shutdown;
    while w.active() > 0 && Instant::now() < deadline {
        monoio::time::sleep(Duration::from_millis(5)).await;
    }
    w.obs.flush_logs(w.generation().access_log.as_ref());
    // Before the inbox closes: a scrape that finds this worker gone finds its counts here.
    finals.leave(w.snapshot());
    drained.fire();
    if let Some(t) = inbox_task {
        t.await;
    }
}

/// After a handover: wait until the accept loops ended (each once its accept in flight was
/// cancelled, serving the connection it had taken if it had one) and every connection closed
/// after its next response, or the shutdown timeout passed, or the process is stopped; then
/// fire the worker's shutdown, which closes what is left (idle connections that sent nothing
/// since). With nothing left to serve that is at once.
async fn drain_handed_over(w: &ProxyWorker, shutdown: &Shutdown) {
    let deadline = Instant::now() + w.generation().cfg.timeouts.shutdown;
    while (w.life.accepting.get() > 0 || w.active() > 0)
        && Instant::now() < deadline
        && !shutdown.is_fired()
    {
        monoio::time::sleep(Duration::from_millis(5)).await;
    }
    shutdown.fire();
}

/// Close idle pooled connections past their timeout, a few times per timeout (of the current
/// generation: a reload may shorten it), and expired open-file cache entries. Pools and
/// caches only an older generation still holds are dropped with it.
async fn sweep_pools(w: Rc<ProxyWorker>) {
    let mut stop = w.life.shutdown.wait();
    let mut trimmed = Instant::now();
    let mut released = Instant::now();
    // The most client connections open at once since memory was last handed back.
    let mut crowd = w.active();
    loop {
        let shortest = w
            .generation()
            .cfg
            .groups
            .iter()
            .map(|g| g.keepalive_timeout)
            .min()
            .unwrap_or(Duration::from_secs(30));
        let tick = (shortest / 4).clamp(Duration::from_millis(5), Duration::from_secs(1));
        monoio::select! {
            _ = monoio::time::sleep(tick) => {}
            _ = &mut stop => return,
        }
        let now = Instant::now();
        let g = w.generation();
        for group in g.cfg.groups.ids() {
            for p in g.pools(group) {
                p.borrow_mut().sweep(now);
            }
        }
        g.statics.sweep(now);
        if now.saturating_duration_since(trimmed) >= TRIM_EVERY {
            trimmed = now;
            let freed = w.buffers.trim();
            let open = w.active();
            crowd = crowd.max(open);
            // Idle connections hold no pooled buffers, so a crowd of them leaving frees
            // nothing `trim` sees: what they held goes back once they are gone.
            let crowd_left = crowd >= open + CROWD;
            if crowd_left {
                w.life.shutdown.shrink();
                // The runtime's table of multishot receives, sized by the crowd's peak.
                monoio::net::tcp::multishot_shrink();
            }
            if freed || crowd_left || now.saturating_duration_since(released) >= RELEASE_EVERY {
                released = now;
                crowd = open;
                release_freed_memory();
            }
        }
    }
}

/// How often the worker's buffer pools give back what they held unused (`BufferPools::trim`).
const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Client connections that, gone since memory was last handed back, make a worker hand it
/// back at its next tick (about 0.8 KB each: 1,024 of them hold most of a megabyte).
const CROWD: usize = 1024;

/// How often a worker hands freed memory back even when its pools freed nothing: what a
/// reload's old generation, closed upstream connections and finished fills freed stays
/// resident as holes in the allocator's arenas otherwise (a 10-minute soak's anonymous memory
/// grew 11% while the live heap stayed flat under heaptrack).
const RELEASE_EVERY: Duration = Duration::from_secs(30);

/// Hand the pages of freed memory back to the system (glibc's `malloc_trim`), after a trim
/// freed pool entries and every `RELEASE_EVERY`: freeing alone leaves them resident, as holes
/// among live allocations that only the top of the heap could give back. Off the request
/// path: it walks the free lists of every arena and advises the kernel to drop their whole
/// free pages, taking each arena's lock briefly (another worker's allocation may wait that
/// long, once).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim(3) has no preconditions; it only releases free heap pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Start the flush tick if a log needs it (a reload may add one) and none runs.
fn start_log_tick(w: &Rc<ProxyWorker>) {
    if w.logging() && !w.obs.log_tick.replace(true) {
        monoio::spawn(flush_log_tick(w.clone()));
    }
}

/// Flush the access logs' buffers on a coarse tick, so a quiet proxy's lines reach the file
/// within a second (a busy one flushes by size); the retired generations' logs too, until
/// they close. Ends when no log is left: a proxy without one is not woken for nothing.
async fn flush_log_tick(w: Rc<ProxyWorker>) {
    let mut stop = w.life.shutdown.wait();
    loop {
        monoio::select! {
            _ = monoio::time::sleep(crate::access_log::FLUSH_TICK) => {}
            _ = &mut stop => return,
        }
        if !w.obs.flush_logs(w.generation().access_log.as_ref()) {
            w.obs.log_tick.set(false);
            return;
        }
    }
}
