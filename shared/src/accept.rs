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

    /// A connection arrived: start serving it (in its own task). `stream` is non-blocking
    /// and close-on-exec on every driver (vendored monoio's io_uring accept asks for both,
    /// as its epoll driver and `accept_now` do): the owner's own splice(2) or sendfile(2) on
    /// it needs no fcntl(2) first. Under io_uring, READV and WRITEV on it fail with EAGAIN
    /// before Linux 5.15 instead of waiting: read and write it through `stream::Stream`
    /// (which waits that out) or monoio's `read`/`write` (RECV/SEND, which wait on any kernel).
    fn accepted(self: &Rc<Self>, stream: TcpStream, peer: SocketAddr);

    /// `accept` failed: count it, log it (rate-limited). The loop then backs off.
    fn failed(&self, e: &io::Error);
}

/// Accept on `listener` until `shutdown` fires.
pub async fn run<A: Acceptor>(listener: &TcpListener, shutdown: &Shutdown, owner: &Rc<A>) {
    // A handover that never fires: the one loop below serves both.
    run_until_handover(listener, shutdown, &Shutdown::new(), owner).await
}

/// [`run`], and `handover` ends the loop too, without losing a connection: the accept in
/// flight is cancelled and its outcome awaited, and a connection it had taken by then goes to
/// the owner. Dropping it instead would lose that connection under io_uring (a cancelled
/// accept the kernel had just completed: the descriptor is never handed to anyone); waiting
/// for it to complete kept the loop, and a process that had handed its sockets over, until a
/// connection happened to come. `shutdown` still drops it at once.
pub async fn run_until_handover<A: Acceptor>(
    listener: &TcpListener,
    shutdown: &Shutdown,
    handover: &Shutdown,
    owner: &Rc<A>,
) {
    let mut stop = shutdown.wait();
    let mut handed = handover.wait();
    // One for the loop's life: each accept only joins it (no allocation per accept).
    let canceller = monoio::io::Canceller::new();
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
        let mut accept = std::pin::pin!(listener.cancelable_accept(canceller.handle()));
        let woke = monoio::select! {
            r = &mut accept => Some(r),
            _ = &mut stop => return,
            _ = &mut handed => None,
        };
        let Some(accepted) = woke else {
            let _ = canceller.cancel();
            let outcome = monoio::select! {
                r = accept => r,
                _ = &mut stop => return,
            };
            // Anything else is the cancel's ECANCELED, or an error the loop ends on anyway.
            if let Ok((stream, peer)) = outcome {
                owner.accepted(stream, peer);
            }
            take_orphans(listener, owner);
            return;
        };
        match accepted {
            Ok((stream, peer)) => {
                owner.accepted(stream, peer);
                take_waiting(listener, handover, owner);
            }
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

/// Connections an accept that completed takes from the backlog besides its own, without
/// waiting (HAProxy's `tune.maxaccept` default).
const ACCEPT_BATCH: usize = 64;

/// Hand the owner the connections already waiting in `listener`'s backlog, up to
/// `ACCEPT_BATCH`, with accept4(2) on the non-blocking listener: no wait, no submission.
///
/// Why: each accept through the driver completes on a pass of the event loop, and a pass
/// serves every busy connection first. With one connection per pass, a crowd that connects
/// at once (a thousand keep-alive clients) is accepted over a thousand passes, each longer
/// than the one before, and the last clients wait seconds for their first answer while the
/// first ones are served hundreds of times.
fn take_waiting<A: Acceptor>(listener: &TcpListener, handover: &Shutdown, owner: &Rc<A>) {
    for _ in 1..ACCEPT_BATCH {
        if !owner.has_slot() || handover.is_fired() {
            return;
        }
        match accept_now(listener) {
            Ok(Some((stream, peer))) => owner.accepted(stream, peer),
            Ok(None) => return,
            // The next pass's accept through the driver meets it again and backs off.
            Err(_) => return,
        }
    }
}

/// After a handover's cancelled accept: the connections in the backlog, which this loop
/// serves. Under io_uring an accept's wait on the listener is exclusive: a connection wakes
/// one waiter, and that may have been the accept just cancelled (its wake-up queued for this
/// thread, the cancel processed first), so the accept of the process the socket was handed to
/// sleeps on while the connection waits in the backlog for the next one to come (seen: a
/// client of the new process unanswered). Whoever's wake-up it was, taking what waits now
/// loses nothing: a connection that comes later wakes the new process's accept.
fn take_orphans<A: Acceptor>(listener: &TcpListener, owner: &Rc<A>) {
    // The accept was armed with a slot free, and none was taken since: the first fits.
    for _ in 0..ACCEPT_BATCH {
        if !owner.has_slot() {
            return;
        }
        match accept_now(listener) {
            Ok(Some((stream, peer))) => owner.accepted(stream, peer),
            Ok(None) | Err(_) => return,
        }
    }
}

/// One connection from `listener`'s backlog if one waits (`None` at EAGAIN), set up as the
/// driver's own accept sets it up: non-blocking and close-on-exec (see `run`).
fn accept_now(listener: &TcpListener) -> io::Result<Option<(TcpStream, SocketAddr)>> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let flags = libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: zeroed storage is a valid sockaddr_storage; accept4 writes at most `len` bytes.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: the listener's fd is open while `listener` lives; storage and len are ours.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            &mut storage as *mut _ as *mut libc::sockaddr,
            &mut len,
            flags,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    let std_stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    // SAFETY: accept4 filled `storage` with an address of `len` bytes.
    let peer = unsafe { socket2::SockAddr::new(storage, len) }
        .as_socket()
        .ok_or_else(|| io::Error::other("accepted a connection that is not TCP/IP"))?;
    Ok(Some((TcpStream::from_std(std_stream)?, peer)))
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

    /// Answers each connection with "ok" from its own task; stops the loop after `want`.
    struct Greeter {
        writers: RefCell<Vec<monoio::task::JoinHandle<()>>>,
        /// Whether each accepted socket is in non-blocking mode.
        nonblocking: RefCell<Vec<bool>>,
        served: std::cell::Cell<usize>,
        want: usize,
        shutdown: Shutdown,
    }

    impl Acceptor for Greeter {
        fn accepted(self: &Rc<Self>, stream: TcpStream, _peer: SocketAddr) {
            use monoio::io::AsyncWriteRentExt;
            use std::os::fd::AsRawFd;
            // SAFETY: F_GETFL on an fd `stream` owns.
            let flags = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_GETFL) };
            self.nonblocking
                .borrow_mut()
                .push(flags & libc::O_NONBLOCK != 0);
            self.writers.borrow_mut().push(monoio::spawn(async move {
                let mut stream = stream;
                let (r, _) = stream.write_all(b"ok").await;
                r.expect("write to an accepted connection");
            }));
            self.served.set(self.served.get() + 1);
            if self.served.get() == self.want {
                self.shutdown.fire();
            }
        }

        fn failed(&self, e: &io::Error) {
            panic!("accept failed: {e}");
        }
    }

    /// Connections that waited in the backlog are taken in one pass (accept4 besides the
    /// driver's accept) and set up for the driver: each is written to from its own task.
    #[test]
    fn connections_waiting_in_the_backlog_are_taken_and_work() {
        for driver in drivers_here() {
            let std_listener = crate::net::reuseport_listener("127.0.0.1:0".parse().unwrap(), 64)
                .expect("listener");
            let addr = std_listener.local_addr().unwrap();
            let clients: Vec<_> = (0..8)
                .map(|_| std::net::TcpStream::connect(addr).expect("connect"))
                .collect();
            let nonblocking = run_on(driver, 64, async move {
                let listener = TcpListener::from_std(std_listener).expect("monoio listener");
                let shutdown = Shutdown::new();
                let owner = Rc::new(Greeter {
                    writers: RefCell::new(Vec::new()),
                    nonblocking: RefCell::new(Vec::new()),
                    served: std::cell::Cell::new(0),
                    want: 8,
                    shutdown: shutdown.clone(),
                });
                run(&listener, &shutdown, &owner).await;
                let writers = std::mem::take(&mut *owner.writers.borrow_mut());
                for w in writers {
                    w.await;
                }
                let nonblocking = owner.nonblocking.borrow().clone();
                nonblocking
            })
            .expect("runtime");
            // Non-blocking on every driver, whichever accept took them (the driver's or
            // accept4 from the backlog): the proxy's splice(2) and sendfile(2) rely on it.
            assert_eq!(nonblocking, vec![true; 8], "{driver}");
            for mut c in clients {
                use std::io::Read;
                c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                    .unwrap();
                let mut got = [0u8; 2];
                c.read_exact(&mut got)
                    .unwrap_or_else(|e| panic!("{driver}: no greeting: {e}"));
                assert_eq!(&got, b"ok", "{driver}");
            }
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

    #[test]
    fn a_handover_ends_a_waiting_accept_and_leaves_the_backlog_whole() {
        for driver in drivers_here() {
            a_handover_ends_a_waiting_accept(driver);
        }
    }

    fn a_handover_ends_a_waiting_accept(driver: DriverKind) {
        let std_listener =
            crate::net::reuseport_listener("127.0.0.1:0".parse().unwrap(), 16).expect("listener");
        let addr = std_listener.local_addr().unwrap();
        let (accepted, left) = run_on(driver, 64, async move {
            let listener = TcpListener::from_std(std_listener).expect("monoio listener");
            let (shutdown, handover) = (Shutdown::new(), Shutdown::new());
            let owner = Rc::new(Recorder {
                peers: RefCell::new(Vec::new()),
                want: usize::MAX,
                shutdown: shutdown.clone(),
            });
            // Runs once the loop's first poll left its accept waiting.
            let h = handover.clone();
            monoio::spawn(async move { h.fire() });
            monoio::select! {
                _ = run_until_handover(&listener, &shutdown, &handover, &owner) => {}
                _ = monoio::time::sleep(std::time::Duration::from_secs(20)) => {
                    panic!("the loop still waited for a connection after the handover")
                }
            }
            let client = std::net::TcpStream::connect(addr).expect("connect");
            let left = accept_now(&listener).expect("accept").is_some();
            drop(client);
            let n = owner.peers.borrow().len();
            (n, left)
        })
        .expect("runtime");
        assert_eq!(accepted, 0, "{driver}");
        assert!(
            left,
            "{driver}: the cancelled accept took the next connection"
        );
    }
}

#[cfg(test)]
mod handover_tests {
    use super::*;
    use crate::runtime::{drivers_here, run_on, DriverKind};
    use std::cell::RefCell;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Sends each peer it gets to the test's thread.
    struct Forwarder(mpsc::Sender<SocketAddr>, RefCell<Vec<TcpStream>>);

    impl Acceptor for Forwarder {
        fn accepted(self: &Rc<Self>, stream: TcpStream, peer: SocketAddr) {
            self.1.borrow_mut().push(stream);
            let _ = self.0.send(peer);
        }

        fn failed(&self, e: &io::Error) {
            panic!("accept failed: {e}");
        }
    }

    /// A takeover's two processes on one socket: the old one's accept waits first, the new
    /// one's behind it. A connection comes while the old one's thread is busy, and the old
    /// one is then handed over. Under io_uring the connection's wake-up went to the old
    /// accept alone (an accept's wait is exclusive); cancelling that accept must not leave the
    /// connection in the backlog with the new one's accept still asleep.
    #[test]
    fn a_connection_whose_wake_up_went_to_a_cancelled_accept_is_taken() {
        for driver in drivers_here() {
            a_connection_at_the_handover_is_taken(driver);
        }
    }

    fn a_connection_at_the_handover_is_taken(driver: DriverKind) {
        let std_listener =
            crate::net::reuseport_listener("127.0.0.1:0".parse().unwrap(), 16).expect("listener");
        let addr = std_listener.local_addr().unwrap();
        let new_copy = std_listener.try_clone().expect("dup");
        let (got_tx, got_rx) = mpsc::channel();
        let (armed_tx, armed_rx) = mpsc::channel::<&str>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let old = {
            let (got_tx, armed_tx) = (got_tx.clone(), armed_tx.clone());
            std::thread::spawn(move || {
                run_on(driver, 64, async move {
                    let listener = TcpListener::from_std(std_listener).expect("listener");
                    let (shutdown, handover) = (Shutdown::new(), Shutdown::new());
                    let owner = Rc::new(Forwarder(got_tx, RefCell::new(Vec::new())));
                    let h = handover.clone();
                    monoio::spawn(async move {
                        // The loop's accept is submitted at this wait.
                        monoio::time::sleep(Duration::from_millis(20)).await;
                        armed_tx.send("old").unwrap();
                        // Busy: the connection's wake-up waits for this thread.
                        go_rx.recv().unwrap();
                        h.fire();
                    });
                    run_until_handover(&listener, &shutdown, &handover, &owner).await;
                    // Served until the test has its answer.
                    monoio::time::sleep(Duration::from_secs(1)).await;
                })
                .expect("runtime")
            })
        };
        assert_eq!(armed_rx.recv().unwrap(), "old");
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let new = std::thread::spawn(move || {
            run_on(driver, 64, async move {
                let listener = TcpListener::from_std(new_copy).expect("listener");
                let shutdown = Shutdown::new();
                let owner = Rc::new(Forwarder(got_tx, RefCell::new(Vec::new())));
                let s = shutdown.clone();
                monoio::spawn(async move {
                    monoio::time::sleep(Duration::from_millis(20)).await;
                    armed_tx.send("new").unwrap();
                    while stop_rx.try_recv().is_err() {
                        monoio::time::sleep(Duration::from_millis(5)).await;
                    }
                    s.fire();
                });
                run(&listener, &shutdown, &owner).await;
            })
            .expect("runtime")
        });
        assert_eq!(armed_rx.recv().unwrap(), "new");
        let client = std::net::TcpStream::connect(addr).expect("connect");
        // Let the kernel's wake-up land before the old one's thread goes on.
        std::thread::sleep(Duration::from_millis(50));
        go_tx.send(()).unwrap();
        let got = got_rx.recv_timeout(Duration::from_secs(3));
        stop_tx.send(()).unwrap();
        new.join().unwrap();
        old.join().unwrap();
        assert_eq!(
            got.map_err(|_| "left in the backlog, taken by no one"),
            Ok(client.local_addr().unwrap()),
            "{driver}"
        );
    }
}
