//! `shared::stream` over TLS: a client `Stream` against a blocking rustls server on another
//! thread, on every driver. The idle liveness check must read what waits on the socket into
//! the session: TLS 1.3 session tickets (sent by the server right after the handshake) leave
//! the connection alive, where a raw MSG_PEEK would call it dead; application data, a
//! close_notify or an end of stream make it dead. A read to the end ends cleanly (`Ok(0)`)
//! only after a close_notify; a bare TCP close is an `UnexpectedEof` error.

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use shared::runtime::{drivers_here, run_on};
use shared::stream::{connect, Stream};
use std::io::Write;
use std::net::TcpListener;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn configs() -> (Arc<ServerConfig>, Arc<ClientConfig>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = p.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key_der)
        .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from(ca.der().to_vec())).unwrap();
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// What the server does once the handshake is done and its tickets are sent.
#[derive(Clone, Copy, Debug)]
enum Then {
    SendData,
    CloseNotify,
    Eof,
}

/// Poll `still_open` until it says dead; `false` if it still says alive after 10 s.
fn turns_dead(s: &mut Stream) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if !s.still_open() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn idle_liveness_reads_tickets_and_sees_data_close_and_eof() {
    let (server_cfg, client_cfg) = configs();
    for d in drivers_here() {
        for then in [Then::SendData, Then::CloseNotify, Then::Eof] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let (ready_tx, ready_rx) = mpsc::channel::<()>();
            let (go_tx, go_rx) = mpsc::channel::<()>();
            let cfg = server_cfg.clone();
            let server = std::thread::spawn(move || {
                let (tcp, _) = l.accept().unwrap();
                let conn = ServerConnection::new(cfg).unwrap();
                let mut s = StreamOwned::new(conn, tcp);
                while s.conn.is_handshaking() {
                    s.conn.complete_io(&mut s.sock).unwrap();
                }
                // The session tickets go out now, unasked.
                while s.conn.wants_write() {
                    s.conn.write_tls(&mut s.sock).unwrap();
                }
                ready_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                match then {
                    Then::SendData => s.write_all(b"unsolicited").unwrap(),
                    Then::CloseNotify => {
                        s.conn.send_close_notify();
                        s.conn.write_tls(&mut s.sock).unwrap();
                    }
                    Then::Eof => {}
                }
                s.flush().unwrap();
                // Keep the socket open (but for Eof) until the client is done.
                if !matches!(then, Then::Eof) {
                    let _ = go_rx.recv();
                }
            });
            let cc = client_cfg.clone();
            let name = ServerName::try_from("localhost").unwrap();
            run_on(d, 64, async move {
                let tcp = monoio::net::TcpStream::connect(addr).await.unwrap();
                let mut s = Stream::Tls(Box::new(connect(tcp, cc, name).await.unwrap()));
                ready_rx.recv().unwrap();
                // Tickets are waiting on the socket (a raw peek would call it dead): still
                // alive, and again once they are read.
                use std::os::fd::AsRawFd;
                assert!(
                    !shared::stream::peek_silent(s.as_raw_fd()),
                    "{d} {then:?}: bytes pending"
                );
                assert!(s.still_open(), "{d} {then:?}: alive with tickets pending");
                assert!(s.still_open(), "{d} {then:?}: alive after reading them");
                go_tx.send(()).unwrap();
                assert!(turns_dead(&mut s), "{d} {then:?}: seen dead");
                let _ = go_tx.send(());
            })
            .unwrap();
            server.join().unwrap();
        }
    }
}

/// A read to the end: the data, then `Ok(0)` after a close_notify, or an `UnexpectedEof`
/// error when TCP ends without one (what was read may have been cut).
#[test]
fn end_of_stream_is_clean_only_after_close_notify() {
    use monoio::io::AsyncReadRent;
    let (server_cfg, client_cfg) = configs();
    for d in drivers_here() {
        for close_notify in [true, false] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let cfg = server_cfg.clone();
            let server = std::thread::spawn(move || {
                let (tcp, _) = l.accept().unwrap();
                let mut s = StreamOwned::new(ServerConnection::new(cfg).unwrap(), tcp);
                s.write_all(b"the body").unwrap();
                if close_notify {
                    s.conn.send_close_notify();
                }
                s.flush().unwrap();
                // Dropping the stream closes TCP.
            });
            let cc = client_cfg.clone();
            let name = ServerName::try_from("localhost").unwrap();
            run_on(d, 64, async move {
                let tcp = monoio::net::TcpStream::connect(addr).await.unwrap();
                let mut s = Stream::Tls(Box::new(connect(tcp, cc, name).await.unwrap()));
                let mut got = Vec::new();
                let end = loop {
                    let (r, buf) = s.read(Vec::with_capacity(4096)).await;
                    match r {
                        Ok(0) => break Ok(()),
                        Ok(_) => got.extend_from_slice(&buf),
                        Err(e) => break Err(e.kind()),
                    }
                };
                assert_eq!(got, b"the body", "{d} close_notify={close_notify}");
                let want = if close_notify {
                    Ok(())
                } else {
                    Err(std::io::ErrorKind::UnexpectedEof)
                };
                assert_eq!(end, want, "{d} close_notify={close_notify}");
            })
            .unwrap();
            server.join().unwrap();
        }
    }
}

/// Write on `fd` without waiting until the socket takes no more (a peer that never reads).
fn fill(fd: std::os::fd::RawFd) {
    let block = [b'f'; 64 << 10];
    loop {
        // SAFETY: send(2) from a live buffer on an open descriptor; MSG_DONTWAIT never blocks.
        let n = unsafe {
            libc::send(
                fd,
                block.as_ptr().cast(),
                block.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "filling: {e}");
            return;
        }
    }
}

/// A close_notify to a peer that never reads, its window closed and our socket full: the
/// shutdown gives up at its deadline, and the stream then closes (the peer sees its end).
/// Before, `shutdown` waited for room that never came, holding the task (the proxy's
/// lingering close of an HTTPS client) for as long as the peer liked.
#[test]
fn a_shutdown_to_a_peer_that_never_reads_ends_at_its_deadline() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let (server_cfg, client_cfg) = configs();
    for d in drivers_here() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        // Inherited by the accepted socket: the window it offers stays small.
        socket2::SockRef::from(&l)
            .set_recv_buffer_size(4096)
            .unwrap();
        let addr = l.local_addr().unwrap();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let cfg = server_cfg.clone();
        let server = std::thread::spawn(move || {
            let (tcp, _) = l.accept().unwrap();
            let mut s = StreamOwned::new(ServerConnection::new(cfg).unwrap(), tcp);
            while s.conn.is_handshaking() {
                s.conn.complete_io(&mut s.sock).unwrap();
            }
            // Its handshake is done: the client may fill the socket now.
            s.write_all(b"r").unwrap();
            s.flush().unwrap();
            // Reads nothing until the client is done; then what came, raw, to its end.
            done_rx.recv().unwrap();
            s.sock
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut chunk = [0u8; 64 << 10];
            loop {
                match s.sock.read(&mut chunk) {
                    Ok(0) => return Ok("end of stream"),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                        return Ok("reset")
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
        });
        let cc = client_cfg.clone();
        let name = ServerName::try_from("localhost").unwrap();
        let outcome = run_on(d, 64, async move {
            use monoio::io::AsyncReadRent;
            let tcp = monoio::net::TcpStream::connect(addr).await.unwrap();
            let mut s = Stream::Tls(Box::new(connect(tcp, cc, name).await.unwrap()));
            let (r, _) = s.read(vec![0u8; 16]).await;
            assert_eq!(r.unwrap(), 1, "the server's go-ahead");
            fill(s.as_raw_fd());
            let deadline = monoio::time::Instant::now() + Duration::from_millis(200);
            // The outer wait only turns a hang into a failure.
            let r = monoio::time::timeout(Duration::from_secs(10), s.shutdown_by(deadline)).await;
            s.close_now();
            r.map(|r| r.map_err(|e| e.kind()))
        })
        .unwrap();
        let _ = done_tx.send(());
        let seen = server.join().unwrap();
        match outcome {
            Ok(r) => assert_eq!(r, Err(std::io::ErrorKind::TimedOut), "{d}"),
            Err(_) => panic!("{d}: the shutdown still waited after 10 s (its bound: 200 ms)"),
        }
        assert!(seen.is_ok(), "{d}: the peer never saw the close: {seen:?}");
    }
}
