//! The accept loop, written once for the proxy and the origin.
//!
//! Invariants:
//! - It never dies and never waits on anything but the listener, a free connection slot and
//!   shutdown: whatever a connection needs (an upstream, a timer) happens in its own task.
//! - An accept error is handed to the owner (to count and log), then the loop backs off
//!   ([`accept_backoff`]: milliseconds for EMFILE and the like), so a full fd table cannot
//!   spin a core. Shutdown cuts the pause short.
//! - At the owner's connection limit the loop stops accepting: new connections wait in the
//!   kernel's backlog instead of being accepted and dropped.
//! - On shutdown the loop returns; the caller then closes the listener.

use crate::net::accept_backoff;
use crate::shutdown::Shutdown;
use monoio::net::{TcpListener, TcpStream};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

/// What the loop's owner does with what `accept` gives.
// The loop runs on its worker's thread and is never sent elsewhere: the futures need no
// `Send` bound, which is what the lint warns about.
#[allow(async_fn_in_trait)]
pub trait Acceptor {
    /// Whether another connection may be accepted now.
    fn has_slot(&self) -> bool {
        true
    }

    /// Completes once `has_slot` may have become true.
    async fn slot_freed(&self) {}

    /// A connection arrived: start serving it (in its own task).
    fn accepted(self: &Rc<Self>, stream: TcpStream, peer: SocketAddr);

    /// `accept` failed: count it, log it (rate-limited). The loop then backs off.
    fn failed(&self, e: &io::Error);
}

/// Accept on `listener` until `shutdown` fires.
pub async fn run<A: Acceptor>(listener: &TcpListener, shutdown: &Shutdown, owner: &Rc<A>) {
    // A handover that never fires: the one loop below serves both.
    run_until_handover(listener, shutdown, &Shutdown::new(), owner).await
}

/// [`run`], and `handover` ends the loop too, but only between accepts: an accept in flight
/// is never cancelled for it (under io_uring a cancelled accept that the kernel had just
/// completed loses its connection: the descriptor is never handed to anyone). The loop
/// returns once that accept completes, after handing its connection to the owner, or when
/// `shutdown` fires, which still cancels at once.
pub async fn run_until_handover<A: Acceptor>(
    listener: &TcpListener,
    shutdown: &Shutdown,
    handover: &Shutdown,
    owner: &Rc<A>,
) {
    let mut stop = shutdown.wait();
    let mut handed = handover.wait();
    loop {
        while !owner.has_slot() {
            monoio::select! {
                _ = owner.slot_freed() => {}
                _ = &mut stop => return,
                _ = &mut handed => return,
            }
        }
        if handover.is_fired() {
            return;
        }
        let accepted = monoio::select! {
            r = listener.accept() => r,
            _ = &mut stop => return,
        };
        match accepted {
            Ok((stream, peer)) => owner.accepted(stream, peer),
            Err(e) => {
                owner.failed(&e);
                monoio::select! {
                    _ = monoio::time::sleep(accept_backoff(&e)) => {}
                    _ = &mut stop => return,
                    _ = &mut handed => return,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{drivers_here, run_on, DriverKind};
    use std::cell::RefCell;

    /// Records the peers it gets and stops the loop once it has `want` of them.
    struct Recorder {
        peers: RefCell<Vec<SocketAddr>>,
        want: usize,
        shutdown: Shutdown,
    }

    impl Acceptor for Recorder {
        fn accepted(self: &Rc<Self>, _stream: TcpStream, peer: SocketAddr) {
            self.peers.borrow_mut().push(peer);
            if self.peers.borrow().len() == self.want {
                self.shutdown.fire();
            }
        }

        fn failed(&self, e: &io::Error) {
            panic!("accept failed: {e}");
        }
    }

    #[test]
    fn every_connection_reaches_the_owner_until_shutdown() {
        for driver in drivers_here() {
            every_connection_reaches_the_owner(driver);
        }
    }

    fn every_connection_reaches_the_owner(driver: DriverKind) {
        let std_listener =
            crate::net::reuseport_listener("127.0.0.1:0".parse().unwrap(), 16).expect("listener");
        let addr = std_listener.local_addr().unwrap();
        let (peers, clients) = run_on(driver, 64, async move {
            let listener = TcpListener::from_std(std_listener).expect("monoio listener");
            let shutdown = Shutdown::new();
            let owner = Rc::new(Recorder {
                peers: RefCell::new(Vec::new()),
                want: 3,
                shutdown: shutdown.clone(),
            });
            let mut clients = Vec::new();
            for _ in 0..3 {
                let c = TcpStream::connect(addr).await.expect("connect");
                clients.push(c.local_addr().unwrap());
            }
            // Returns only because the owner fired shutdown after the third connection.
            run(&listener, &shutdown, &owner).await;
            let peers = owner.peers.borrow().clone();
            (peers, clients)
        })
        .expect("runtime");
        let mut peers = peers;
        let mut clients = clients;
        peers.sort();
        clients.sort();
        assert_eq!(peers, clients, "{driver}");
    }

    #[test]
    fn a_fired_shutdown_ends_the_loop_without_accepting() {
        for driver in drivers_here() {
            a_fired_shutdown_ends_the_loop(driver);
        }
    }

    fn a_fired_shutdown_ends_the_loop(driver: DriverKind) {
        let std_listener =
            crate::net::reuseport_listener("127.0.0.1:0".parse().unwrap(), 16).expect("listener");
        let accepted = run_on(driver, 64, async move {
            let listener = TcpListener::from_std(std_listener).expect("monoio listener");
            let shutdown = Shutdown::new();
            let owner = Rc::new(Recorder {
                peers: RefCell::new(Vec::new()),
                want: usize::MAX,
                shutdown: shutdown.clone(),
            });
            shutdown.fire();
            run(&listener, &shutdown, &owner).await;
            let n = owner.peers.borrow().len();
            n
        })
        .expect("runtime");
        assert_eq!(accepted, 0, "{driver}");
    }
}
