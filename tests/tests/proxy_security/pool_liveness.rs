//! Item 10: a pooled upstream connection was reused without a look when it had been idle
//! for less than `check_after` (up to the group's `keepalive_check`, 1 s by default): bytes
//! its origin sent after a complete response (a stray second response) were read as the next
//! request's answer, and a FIN made a
//! non-idempotent request fail with 502. Now every pooled plain connection is looked at when
//! it is taken, in its multishot receive's queue (no system call): anything there, bytes or
//! an end, and it is closed; the request goes on a fresh connection.
//!
//! Without a multishot receive (the epoll driver, `multishot = false`) and on a TLS upstream
//! the stray response was still the next client's answer (session 45): a connection no
//! receive watches is now peeked at every time it is taken. Each test runs every way a
//! pooled connection is read.
//!
//! Half a stray response over TLS (an unfinished record: the session held it, had no
//! plaintext, and the socket was empty) still passed that look and became the next client's
//! answer once the rest came (session 49): the TLS adapter now follows the record framing of
//! what it gave the session, and a connection within a record is not reused.

use proxy::config::{Config, GroupId};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use shared::runtime::DriverKind;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{mpsc, Arc};
use tests::inproc::{config, Proxy};
use tests::process::READY;
use tests::raw::{exchange, show, WAIT};

/// What the origin does on its first connection once that connection's first response went
/// out and the test says so.
#[derive(Clone, Copy)]
enum After {
    /// Send a second, unasked-for response.
    Stray,
    /// Close the connection (a FIN, as an origin's idle timer does).
    Fin,
    /// Send the first half of a second, unasked-for response's bytes (over TLS: half of
    /// the record that carries it, which the session cannot open yet), and the rest before
    /// answering the next request on that connection.
    StrayHalf,
}

/// Linux's TCP_FIN_WAIT2 (include/net/tcp_states.h): our FIN was acknowledged.
const TCP_FIN_WAIT2: u8 = 5;

const STRAY: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nSTRAY";

/// Bytes written on `s` that its peer's kernel has not acknowledged yet (SIOCOUTQ).
fn unacked(s: &TcpStream) -> libc::c_int {
    let mut n: libc::c_int = 0;
    // SAFETY: an open socket and a c_int out pointer, what TIOCOUTQ (SIOCOUTQ) writes.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    assert_eq!(rc, 0, "ioctl(SIOCOUTQ)");
    n
}

/// The TCP state of `s` (`TCP_FIN_WAIT2` once the peer acknowledged our FIN).
fn tcp_state(s: &TcpStream) -> u8 {
    // SAFETY: tcp_info is plain data; all zeros is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: an open socket, an out buffer of `len` bytes and its length.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt(TCP_INFO)");
    info.tcpi_state
}

/// An origin's connection: plain, or TLS over it.
trait Conn: Read + Write {
    fn tcp(&self) -> &TcpStream;
    /// The bytes that carry `plain` on the wire (over TLS: its records), not sent.
    fn seal(&mut self, plain: &[u8]) -> Vec<u8>;
}

impl Conn for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }

    fn seal(&mut self, plain: &[u8]) -> Vec<u8> {
        plain.to_vec()
    }
}

impl Conn for StreamOwned<ServerConnection, TcpStream> {
    fn tcp(&self) -> &TcpStream {
        &self.sock
    }

    fn seal(&mut self, plain: &[u8]) -> Vec<u8> {
        self.conn
            .writer()
            .write_all(plain)
            .expect("plaintext to the session");
        let mut out = Vec::new();
        while self.conn.wants_write() {
            self.conn
                .write_tls(&mut out)
                .expect("records from the session");
        }
        out
    }
}

/// Write `bytes` on `s`'s socket as they are (past a TLS session).
fn send_raw(s: &dyn Conn, bytes: &[u8]) {
    let mut tcp: &TcpStream = s.tcp();
    tcp.write_all(bytes).expect("write raw bytes");
}

/// Read one request (head, and a body by Content-Length); `false` at the end of the stream.
fn read_request(s: &mut dyn Conn) -> bool {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return false,
        }
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse::<usize>().expect("Content-Length"));
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).is_ok()
}

/// Answer every request on connection number `n` with a body naming it.
fn answer(s: &mut dyn Conn, n: usize) -> bool {
    let body = format!("conn{n}");
    let resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(resp.as_bytes()).is_ok()
}

/// An origin that answers every request with the number of its connection, over TLS with
/// `tls`. On connection 1, after the first response, it waits for `go`, does `after`, and
/// says `done` once the proxy's kernel has acknowledged it.
fn origin(
    after: After,
    tls: Option<Arc<ServerConfig>>,
) -> (SocketAddr, mpsc::Sender<()>, mpsc::Receiver<()>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().unwrap();
    let (go_tx, go) = mpsc::channel::<()>();
    let (done, done_rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut go = Some(go);
        for (i, s) in l.incoming().enumerate() {
            let Ok(s) = s else { return };
            let first = if i == 0 { go.take() } else { None };
            let done = done.clone();
            let mut s: Box<dyn Conn + Send> = match &tls {
                Some(cfg) => {
                    let conn = ServerConnection::new(cfg.clone()).expect("tls session");
                    Box::new(StreamOwned::new(conn, s))
                }
                None => Box::new(s),
            };
            std::thread::spawn(move || {
                let mut rest = None;
                if let Some(go) = first {
                    if !(read_request(&mut *s) && answer(&mut *s, 1)) || go.recv().is_err() {
                        return;
                    }
                    match after {
                        After::Stray => {
                            s.write_all(STRAY).expect("write the stray response");
                            s.flush().expect("send the stray response");
                            assert!(tests::eventually(READY, || unacked(s.tcp()) == 0));
                        }
                        After::Fin => {
                            s.tcp().shutdown(Shutdown::Write).expect("shutdown");
                            assert!(tests::eventually(READY, || {
                                tcp_state(s.tcp()) == TCP_FIN_WAIT2
                            }));
                        }
                        After::StrayHalf => {
                            let mut wire = s.seal(STRAY);
                            let second = wire.split_off(wire.len() / 2);
                            send_raw(&*s, &wire);
                            assert!(tests::eventually(READY, || unacked(s.tcp()) == 0));
                            rest = Some(second);
                        }
                    }
                    let _ = done.send(());
                }
                while read_request(&mut *s) {
                    if let Some(rest) = rest.take() {
                        send_raw(&*s, &rest);
                    }
                    if !answer(&mut *s, i + 1) {
                        break;
                    }
                }
            });
        }
    });
    (addr, go_tx, done_rx)
}

/// How the proxy reads its pooled connections in a test.
#[derive(Debug, Clone, Copy)]
enum Setup {
    /// Plain, on driver `d`, through multishot receives where `multishot` (io_uring) and
    /// the driver has them.
    Plain { d: DriverKind, multishot: bool },
    /// A TLS upstream (never read through a multishot receive) on driver `d`.
    Tls { d: DriverKind },
}

/// Every way: each driver here, io_uring with and without multishot receives, TLS.
fn setups() -> Vec<Setup> {
    let mut all = Vec::new();
    for d in tests::drivers() {
        all.push(Setup::Plain { d, multishot: true });
        if d != DriverKind::Epoll {
            all.push(Setup::Plain {
                d,
                multishot: false,
            });
        }
        all.push(Setup::Tls { d });
    }
    all
}

/// A TLS origin's server config (a leaf of `ca` for localhost) and the proxy's group table
/// that trusts `ca`, its file in `dir`.
fn tls_origin_config(ca: &tests::tls::Ca, dir: &std::path::Path) -> Arc<ServerConfig> {
    use shared::tls::server::{server_config, CertFiles, ServerTlsSpec};
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let (cert, key) = ca.leaf_files(dir, "origin", &["localhost"]);
    let spec = ServerTlsSpec {
        default: CertFiles { cert, key },
        sni: Vec::new(),
    };
    server_config(&spec).expect("origin tls").config
}

/// The proxy in front of `addr` as `setup` reads it.
fn proxy_config(addr: SocketAddr, setup: Setup, dir: &std::path::Path) -> Config {
    let mut cfg = config(&[addr]);
    match setup {
        Setup::Plain { d, multishot } => {
            cfg.runtime.driver = tests::driver_choice(d);
            cfg.runtime.multishot = multishot;
        }
        Setup::Tls { d } => {
            cfg.runtime.driver = tests::driver_choice(d);
            let text = format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[upstream.app]\n\
                 servers = [\"https://localhost:{}\"]\ntls = {{ ca = \"ca.pem\" }}\n\n\
                 [[route]]\nupstream = \"app\"\n",
                addr.port()
            );
            let path = dir.join("p.toml");
            std::fs::write(&path, text).unwrap();
            let file = proxy::config::load(&path).expect("config loads");
            cfg.groups = file.groups.clone();
            cfg.groups[GroupId::new(0)].keepalive = 64;
        }
    }
    // Far beyond the test: only the look when a connection is taken can catch what its
    // origin did, not the timed check of one idle for a while.
    let g = &mut cfg.groups[GroupId::new(0)];
    g.keepalive_check = std::time::Duration::from_secs(300);
    g.keepalive_timeout = std::time::Duration::from_secs(600);
    cfg
}

/// Send `req` (closing after its response) and return the response's status and body.
fn ask(addr: SocketAddr, req: &[u8]) -> (u16, Vec<u8>) {
    let reply = exchange(addr, req, WAIT);
    let r = reply.responses();
    let r = r
        .first()
        .unwrap_or_else(|| panic!("no response: {}", show(&reply)));
    (r.status, r.body.clone())
}

/// The first request's connection is pooled, the origin does `after` on it, then `second`
/// is asked: its answer.
fn second_answer(after: After, second: &[u8], setup: Setup) -> (u16, Vec<u8>) {
    let dir = tests::temp_dir("pool-liveness");
    let ca = tests::tls::Ca::new();
    let tls = matches!(setup, Setup::Tls { .. }).then(|| tls_origin_config(&ca, &dir));
    let (addr, go, done) = origin(after, tls);
    let p = Proxy::start(proxy_config(addr, setup, &dir));
    let get = b"GET /first HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    assert_eq!(ask(p.addr, get), (200, b"conn1".to_vec()), "{setup:?}");
    go.send(()).expect("origin waiting");
    done.recv_timeout(READY).expect("the origin did it");
    let answer = ask(p.addr, second);
    p.stop();
    answer
}

/// In every setup, once the origin did `after` on the pooled connection, `second` is
/// answered by the origin on a fresh connection (`why` says what must not happen).
fn answered_on_a_fresh_connection(after: After, second: &[u8], why: &str) {
    for setup in setups() {
        let (status, body) = second_answer(after, second, setup);
        assert_eq!(
            (status, String::from_utf8_lossy(&body).into_owned()),
            (200, "conn2".to_string()),
            "{setup:?}: the second request must be answered by the origin on a fresh \
             connection, {why}"
        );
    }
}

const SECOND_GET: &[u8] = b"GET /second HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

#[test]
fn stray_bytes_on_a_pooled_connection_are_never_an_answer() {
    answered_on_a_fresh_connection(After::Stray, SECOND_GET, "not by the stray response");
}

#[test]
fn a_pooled_connection_its_origin_closed_is_not_used_for_a_post() {
    let post = b"POST /second HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\
                 Connection: close\r\n\r\nhello";
    answered_on_a_fresh_connection(After::Fin, post, "not sent into one the origin closed");
}

#[test]
fn half_a_stray_response_on_a_pooled_connection_is_never_an_answer() {
    // Over TLS the half is an unfinished record: the session holds it and has nothing to
    // read yet, so a look at the session alone found the connection clean.
    answered_on_a_fresh_connection(
        After::StrayHalf,
        SECOND_GET,
        "not by the stray response once its record is whole",
    );
}
