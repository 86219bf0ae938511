//! The proxy's listeners: socket options, and its side of the shared accept loop
//! (`shared::accept`: never dies, never waits on an upstream, backs off on EMFILE).
//!
//! - Accept errors are counted and logged rate-limited.
//! - At `max_connections` the loop stops accepting: new connections wait in the kernel's
//!   backlog instead of being accepted and dropped.
//! - On shutdown the loop ends and the listener closes.

use crate::worker::ProxyWorker;
use monoio::net::{TcpListener, TcpStream};
use rustls::ServerConfig;
use shared::accept::Acceptor;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

/// Accept on `listener` until shutdown, or a takeover's handover (the loop itself is
/// `shared::accept::run_until_handover`); `tls`: an HTTPS listener, whose connections start
/// with a handshake in their own task; `proxy_protocol`: each connection starts with a PROXY
/// protocol header (before the handshake, if any). The worker counted this loop in
/// `accepting` when it spawned it.
pub async fn run(
    w: Rc<ProxyWorker>,
    listener: TcpListener,
    tls: Option<(usize, Arc<ServerConfig>)>,
    proxy_protocol: bool,
) {
    let shutdown = w.life.shutdown.clone();
    let handover = w.life.handover.clone();
    let accepting = w.clone();
    match tls {
        _ if proxy_protocol => {
            let owner = Rc::new(ProxiedListener { w, tls });
            shared::accept::run_until_handover(&listener, &shutdown, &handover, &owner).await
        }
        None => shared::accept::run_until_handover(&listener, &shutdown, &handover, &w).await,
        Some(tls) => {
            let owner = Rc::new(TlsListener { w, tls });
            shared::accept::run_until_handover(&listener, &shutdown, &handover, &owner).await
        }
    }
    let count = &accepting.life.accepting;
    count.set(count.get().saturating_sub(1));
}

/// An HTTPS listener's side of the accept loop: its index in the config's listeners (the
/// certificates come from the generation current at each handshake), and its configuration
/// at start.
struct TlsListener {
    w: Rc<ProxyWorker>,
    tls: (usize, Arc<ServerConfig>),
}

impl Acceptor for TlsListener {
    fn has_slot(&self) -> bool {
        self.w.has_slot()
    }

    async fn slot_freed(&self) {
        self.w.slot_freed().await
    }

    fn accepted(self: &Rc<Self>, stream: TcpStream, peer: SocketAddr) {
        // Over its client's connection limit: dropping the stream closes it.
        let Some(guard) = self.w.enter(peer) else {
            return;
        };
        let (w, tls) = (self.w.clone(), self.tls.clone());
        let serve = crate::client::serve_tls(w, stream, peer, guard, tls);
        monoio::spawn(self.w.contained(serve));
    }

    fn failed(&self, e: &std::io::Error) {
        self.w.failed(e)
    }
}

/// A PROXY protocol listener's side of the accept loop (HTTPS too when `tls` is set).
struct ProxiedListener {
    w: Rc<ProxyWorker>,
    tls: Option<(usize, Arc<ServerConfig>)>,
}

impl Acceptor for ProxiedListener {
    fn has_slot(&self) -> bool {
        self.w.has_slot()
    }

    async fn slot_freed(&self) {
        self.w.slot_freed().await
    }

    fn accepted(self: &Rc<Self>, stream: TcpStream, peer: SocketAddr) {
        // The client's connection limit once its header names it (`client::serve_proxied`).
        let guard = self.w.enter_unnamed();
        let w = self.w.clone();
        match self.tls.clone() {
            None => {
                let serve = crate::client::serve_proxied(w, stream, peer, guard);
                monoio::spawn(self.w.contained(serve));
            }
            Some(tls) => {
                let serve = crate::client::serve_proxied_tls(w, stream, peer, guard, tls);
                monoio::spawn(self.w.contained(serve));
            }
        }
    }

    fn failed(&self, e: &std::io::Error) {
        self.w.failed(e)
    }
}

impl Acceptor for ProxyWorker {
    fn has_slot(&self) -> bool {
        self.active() < self.max_connections()
    }

    async fn slot_freed(&self) {
        self.slot_free().await
    }

    fn accepted(self: &Rc<Self>, stream: TcpStream, peer: SocketAddr) {
        // TCP_NODELAY is inherited from the listener (see `shared::net::nodelay_listener`): no setsockopt
        // per connection.
        let Some(guard) = self.enter(peer) else {
            return;
        };
        let serve = crate::client::serve(self.clone(), stream, peer, guard);
        monoio::spawn(self.contained(serve));
    }

    fn failed(&self, e: &std::io::Error) {
        self.stats.accept_errors.incr();
        self.obs.log_error(format_args!("accept: {e}"));
    }
}

impl ProxyWorker {
    /// A connection's task whose panic ends that connection alone (docs/ARCHITECTURE.md,
    /// "Panics"): counted and logged (rate-limited), the worker runs on. Its `ConnGuard` and
    /// buffers are dropped with the task, so the slot and the count of open connections are
    /// given back.
    fn contained(
        self: &Rc<Self>,
        serve: impl std::future::Future<Output = ()>,
    ) -> impl std::future::Future<Output = ()> {
        let w = self.clone();
        shared::contain::Contained::new(serve, move |what: &str| {
            w.stats.panics.incr();
            w.obs
                .log_error(format_args!("a connection's handling panicked: {what}"));
        })
    }
}
