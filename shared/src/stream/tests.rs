//! Stream-level socket behaviour: `close_now` with an operation still in flight (issue 22,
//! item 12), and accepted sockets close-on-exec.

use super::Stream;
use crate::runtime::{drivers_here, run_on};
use monoio::io::AsyncReadRent;
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A connected pair: our runtime's stream and the peer's blocking socket.
async fn pair() -> (Stream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let ours = monoio::net::TcpStream::connect(l.local_addr().unwrap())
        .await
        .expect("connect");
    // The connection is established: accept returns at once.
    let (peer, _) = l.accept().expect("accept");
    peer.set_nonblocking(true).unwrap();
    (Stream::Plain(ours), peer)
}

/// Whether the peer reads EOF within `wait`, the runtime running meanwhile (a close that
/// waits for an operation's completion happens when the driver reaps it).
async fn peer_sees_eof(mut peer: TcpStream, wait: Duration) -> Result<(), String> {
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 64];
    loop {
        match peer.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => return Err(format!("{n} unexpected bytes")),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("read: {e}")),
        }
        if Instant::now() > deadline {
            return Err(format!("still open after {wait:?}"));
        }
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A read that waits (the peer sends nothing) dropped unfinished: under io_uring its
/// operation stays in flight, holding a reference to the fd, until its cancel completes.
async fn abandon_a_read(s: &mut Stream) {
    let read = s.read(vec![0u8; 64]);
    let timed_out = monoio::time::timeout(Duration::from_millis(20), read).await;
    assert!(
        timed_out.is_err(),
        "the peer sent nothing: the read must wait"
    );
}

#[test]
fn close_now_with_an_operation_in_flight_closes_without_panicking() {
    for driver in drivers_here() {
        for corked in [false, true] {
            let outcome = run_on(driver, 64, async move {
                let (mut s, peer) = pair().await;
                abandon_a_read(&mut s).await;
                if corked {
                    s.close_now_corked();
                } else {
                    s.close_now();
                }
                peer_sees_eof(peer, Duration::from_secs(10)).await
            })
            .expect("runtime");
            assert_eq!(outcome, Ok(()), "{driver:?}, corked: {corked}");
        }
    }
}

/// An accepted socket is close-on-exec on every driver: one a spawned process inherited would
/// stay open (no FIN) after the server closed it.
#[test]
fn accepted_sockets_are_close_on_exec() {
    use std::os::fd::AsRawFd;
    for driver in drivers_here() {
        let flags = run_on(driver, 64, async {
            let std_l = TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = std_l.local_addr().unwrap();
            std_l.set_nonblocking(true).unwrap();
            let l = monoio::net::TcpListener::from_std(std_l).expect("listener");
            let _peer = TcpStream::connect(addr).expect("connect");
            let (s, _) = l.accept().await.expect("accept");
            // SAFETY: F_GETFD on the accepted socket, open for the call.
            unsafe { libc::fcntl(s.as_raw_fd(), libc::F_GETFD) }
        })
        .expect("runtime");
        assert!(flags >= 0, "{driver:?}: F_GETFD");
        assert_ne!(flags & libc::FD_CLOEXEC, 0, "{driver:?}: not close-on-exec");
    }
}

/// `ensure_nonblocking` switches the socket to O_NONBLOCK and changes no other status flag
/// (one F_SETFL, nothing read first); with `done` set it does nothing, and it never switches
/// back.
#[test]
fn ensure_nonblocking_sets_o_nonblock_and_nothing_else() {
    use std::os::fd::AsRawFd;
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let ours = TcpStream::connect(l.local_addr().unwrap()).expect("connect");
    let fd = ours.as_raw_fd();
    // SAFETY: F_GETFL on an open socket.
    let flags = || unsafe { libc::fcntl(fd, libc::F_GETFL) };
    let before = flags();
    assert_eq!(before & libc::O_NONBLOCK, 0, "a new socket blocks");
    let mut done = false;
    super::ensure_nonblocking(fd, &mut done).expect("switched");
    assert!(done);
    assert_eq!(flags(), before | libc::O_NONBLOCK);
    // `done` says it is: nothing is changed, whatever the socket's mode now.
    ours.set_nonblocking(false).unwrap();
    super::ensure_nonblocking(fd, &mut done).expect("nothing to do");
    assert_eq!(flags(), before);
    let mut again = false;
    super::ensure_nonblocking(fd, &mut again).expect("switched again");
    assert_eq!(flags(), before | libc::O_NONBLOCK);
}
