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

/// A TLS peer's server configuration (ring's provider, a self-signed `localhost`) and our
/// client's, which trusts anything.
fn tls_configs() -> (
    std::sync::Arc<rustls::ServerConfig>,
    std::sync::Arc<rustls::ClientConfig>,
) {
    use crate::tls::{ClientTls, ClientTlsOptions, Trust};
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let opts = ClientTlsOptions {
        trust: Trust::Insecure,
        resumption: false,
    };
    let (client, _) = ClientTls::new(&opts).unwrap().config().unwrap();
    (std::sync::Arc::new(server), client)
}

/// Our TLS client stream to `addr` (its peer's certificate names `localhost`), handshaken.
async fn tls_stream_to(
    addr: std::net::SocketAddr,
    client: std::sync::Arc<rustls::ClientConfig>,
) -> Stream {
    let tcp = monoio::net::TcpStream::connect(addr)
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = super::connect(tcp, client, name).await.expect("handshake");
    Stream::Tls(Box::new(tls))
}

/// A TLS stream's `read_queued` takes what already arrived without waiting: nothing when
/// nothing did (session tickets that wait are given to the session, no plaintext); the
/// records that came into the socket since the last read, decrypted, on each driver (no
/// multishot receive here: the socket is read with a non-blocking recv).
#[test]
fn a_tls_read_queued_takes_the_records_waiting_in_the_socket() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::sync::mpsc;
    let (server, client) = tls_configs();
    for driver in drivers_here() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().unwrap();
        let (go_tx, go) = mpsc::channel::<()>();
        let (sent_tx, sent) = mpsc::channel::<()>();
        let server = server.clone();
        let peer = std::thread::spawn(move || {
            let (tcp, _) = l.accept().expect("accept");
            let conn = rustls::ServerConnection::new(server).unwrap();
            let mut s = rustls::StreamOwned::new(conn, tcp);
            s.write_all(b"first")
                .and_then(|_| s.flush())
                .expect("first");
            go.recv().expect("go");
            s.write_all(b"second")
                .and_then(|_| s.flush())
                .expect("second");
            sent_tx.send(()).unwrap();
            // Hold the connection until the client is done with it.
            let _ = s.read(&mut [0u8; 1]);
        });
        let client = client.clone();
        let outcome = run_on(driver, 64, async move {
            let mut s = tls_stream_to(addr, client).await;
            let (r, first) = s.read(Vec::with_capacity(5)).await;
            assert_eq!((r.expect("read"), &first[..]), (5, &b"first"[..]));
            if let Ok((r, b)) = s.read_queued(Vec::with_capacity(64)) {
                return Err(format!("nothing waits, read {r:?} {b:?}"));
            }
            go_tx.send(()).unwrap();
            sent.recv().unwrap();
            let mut pfd = libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd of an open socket; waits for the record's arrival.
            if unsafe { libc::poll(&mut pfd, 1, 10_000) } != 1 {
                return Err("the second record never arrived".into());
            }
            match s.read_queued(Vec::with_capacity(64)) {
                Ok((Ok(n), b)) => Ok((n, b)),
                Ok((Err(e), _)) => Err(format!("read_queued: {e}")),
                Err(_) => Err("read_queued took nothing".into()),
            }
        })
        .expect("runtime");
        assert_eq!(outcome, Ok((6, b"second".to_vec())), "{driver:?}");
        peer.join().unwrap();
    }
}

/// A full-size TLS record followed by small ones (a chunked body written as its size line,
/// its 16 KiB of data and its CRLF): one socket read may complete a 16 KiB record and
/// several small ones behind it, more plaintext than the session holds at once (rustls
/// refuses more ciphertext past 16 KiB of plaintext unread). The stream reads it all, on
/// each driver; it failed with "received plaintext buffer full".
#[test]
fn a_tls_read_holds_back_records_past_the_sessions_plaintext_limit() {
    use std::io::Write;
    const ROUNDS: usize = 64;
    let (server, client) = tls_configs();
    let want: Vec<u8> = (0..ROUNDS)
        .flat_map(|_| std::iter::repeat_n(b'y', 16384).chain(std::iter::repeat_n(b'z', 10)))
        .collect();
    for driver in drivers_here() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().unwrap();
        let server = server.clone();
        let peer = std::thread::spawn(move || {
            let (tcp, _) = l.accept().expect("accept");
            let conn = rustls::ServerConnection::new(server).unwrap();
            let mut s = rustls::StreamOwned::new(conn, tcp);
            // A record per write: 16 KiB, then 10 bytes.
            for _ in 0..ROUNDS {
                s.write_all(&[b'y'; 16384]).expect("data");
                s.flush().expect("data");
                s.write_all(&[b'z'; 10]).expect("tail");
                s.flush().expect("tail");
            }
            s.conn.send_close_notify();
            let _ = s.flush();
            let _ = s.read(&mut [0u8; 1]);
        });
        let client = client.clone();
        let got = run_on(driver, 64, async move {
            let mut s = tls_stream_to(addr, client).await;
            let mut all = Vec::new();
            loop {
                match s.read(Vec::with_capacity(65536)).await {
                    (Ok(0), _) => return Ok(all),
                    (Ok(_), b) => all.extend_from_slice(&b),
                    (Err(e), _) => return Err(format!("{e} after {} bytes", all.len())),
                }
            }
        })
        .expect("runtime");
        let got = got.unwrap_or_else(|e| panic!("{driver:?}: {e}"));
        assert!(
            got == want,
            "{driver:?}: {} bytes, not the {} sent",
            got.len(),
            want.len()
        );
        peer.join().unwrap();
    }
}
