//! One configuration generation: the resolved config and everything a worker builds from it
//! (router, balancers, pools, response stores).
//!
//! Invariants:
//! - A request takes its worker's current generation (an `Rc`) once, when its head is parsed,
//!   and uses only that one until its exchange ends: group, server and route indices are
//!   positions in *its* config, valid across every await. A kept-alive connection takes the
//!   current generation again at its next request.
//! - A reload builds a new generation and makes it current; the old one lives as long as a
//!   request still holds it, then its own state (pools, stores no one carried over) is dropped.
//! - Balancers, pools and stores are `Rc`s so that a new generation can carry over the ones
//!   whose configuration did not change (see `reload.rs`).

use crate::balance::Balancer;
use crate::cache::Store;
use crate::config::{Action, Config};
use crate::pool::ServerPool;
use crate::route::Router;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

pub struct Generation {
    /// 1 for the config the proxy started with, then one more per applied reload.
    pub number: u64,
    pub cfg: Arc<Config>,
    pub router: Router,
    /// One balancer per group (index into `cfg.groups`).
    pub balancers: Vec<Rc<RefCell<Balancer>>>,
    /// Per group, per server: idle keep-alive connections.
    pub pools: Vec<Vec<Rc<RefCell<ServerPool>>>>,
    /// Per route (index into `cfg.routes`): the response store of a cached route.
    pub caches: Vec<Option<Rc<RefCell<Store>>>>,
    /// Per group: the rustls client config of a TLS group, this worker's own (its session
    /// store is this worker's: no lock shared with another worker).
    pub upstream_tls: Vec<Option<Arc<rustls::ClientConfig>>>,
    // The TLS acceptor configs are in `cfg.listeners`: a handshake takes the current
    // generation's (see `client::serve_tls`).
}

impl Generation {
    /// A generation built from scratch: empty pools and stores, fresh balancers. `seed` makes
    /// random2 differ between workers.
    pub fn new(number: u64, cfg: Arc<Config>, seed: u64) -> Self {
        Generation {
            number,
            router: Router::new(&cfg.routes),
            balancers: cfg
                .groups
                .iter()
                .map(|g| Rc::new(RefCell::new(Balancer::new(g, seed))))
                .collect(),
            pools: cfg
                .groups
                .iter()
                .map(|g| {
                    g.servers
                        .iter()
                        .map(|_| Rc::new(RefCell::new(ServerPool::new(g))))
                        .collect()
                })
                .collect(),
            caches: cfg
                .routes
                .iter()
                .map(|r| match &r.action {
                    Action::Proxy { cache: Some(c), .. } => {
                        Some(Rc::new(RefCell::new(Store::for_route(c))))
                    }
                    _ => None,
                })
                .collect(),
            upstream_tls: cfg
                .groups
                .iter()
                .map(|g| {
                    let t = g.tls.as_ref()?;
                    // Built once at resolve already (`resolve` checked it builds).
                    t.client.config().ok().map(|(c, _)| c)
                })
                .collect(),
            cfg,
        }
    }
}
