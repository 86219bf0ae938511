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

/// Set TCP_NODELAY on a listening socket: Linux copies it to every accepted socket, so
/// connections get it without a setsockopt each (Nagle would hold small responses back:
/// Monolake's 44 ms stall).
pub fn nodelay_listener(l: &std::net::TcpListener) -> std::io::Result<()> {
    socket2::SockRef::from(l).set_nodelay(true)
}

/// How long (seconds) the kernel holds a silent connection back from accept.
const DEFER_ACCEPT_SECS: libc::c_int = 1;

/// Set TCP_DEFER_ACCEPT on a listening socket: the kernel hands a connection to accept only
/// once its first bytes arrived (an HTTP client always speaks first), so the first read of a
/// new connection finds the request there instead of arming a poll and waking the worker a
/// second time. For connection-per-request clients that was ~15 % of the proxy's CPU per
/// request. A client that connects and stays silent is accepted anyway once the delay ends
/// (the SYN-ACK retransmission after ~1 s), then gets the header timeout as before.
pub fn defer_accept_listener(l: &std::net::TcpListener) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let secs: libc::c_int = DEFER_ACCEPT_SECS;
    // SAFETY: a valid fd and a c_int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            &secs as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Accept on `listener` until shutdown (the loop itself is `shared::accept::run`); `tls`:
/// an HTTPS listener, whose connections start with a handshake in their own task.
pub async fn run(
    w: Rc<ProxyWorker>,
    listener: TcpListener,
    tls: Option<(usize, Arc<ServerConfig>)>,
) {
    let shutdown = w.shutdown.clone();
    match tls {
        None => shared::accept::run(&listener, &shutdown, &w).await,
        Some(tls) => {
            let owner = Rc::new(TlsListener { w, tls });
            shared::accept::run(&listener, &shutdown, &owner).await
        }
    }
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
        let guard = self.w.enter();
        let (w, tls) = (self.w.clone(), self.tls.clone());
        monoio::spawn(crate::client::serve_tls(w, stream, peer, guard, tls));
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
        // TCP_NODELAY is inherited from the listener (see `nodelay_listener`): no setsockopt
        // per connection.
        let guard = self.enter();
        monoio::spawn(crate::client::serve(self.clone(), stream, peer, guard));
    }

    fn failed(&self, e: &std::io::Error) {
        self.stats.accept_errors.incr();
        self.log_error(format_args!("accept: {e}"));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn accepted_sockets_inherit_nodelay_from_the_listener() {
        let l = shared::net::reuseport_listener("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        super::nodelay_listener(&l).unwrap();
        l.set_nonblocking(false).unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert!(s.nodelay().unwrap());
        drop(c);
    }

    #[test]
    fn listeners_defer_accept_until_the_client_speaks() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let l = shared::net::reuseport_listener("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        super::defer_accept_listener(&l).unwrap();
        let mut secs: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a valid fd, and a c_int with its length for the kernel to fill in.
        let r = unsafe {
            libc::getsockopt(
                l.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                &mut secs as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!(r, 0);
        assert!(secs > 0, "TCP_DEFER_ACCEPT is set");
        // A client that speaks is accepted at once, its bytes already there.
        l.set_nonblocking(false).unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        let (s, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        s.set_nonblocking(true).unwrap();
        let n = std::io::Read::read(&mut &s, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n");
    }
}
