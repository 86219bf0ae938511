//! The accept loop: never dies, never waits on an upstream.
//!
//! - Resource errors (EMFILE...) back off for milliseconds, are counted, and logged
//!   rate-limited, so a full fd table cannot spin a core.
//! - At `max_connections` the loop stops accepting: new connections wait in the kernel's
//!   backlog instead of being accepted and dropped.
//! - On shutdown the loop ends and the listener closes.

use crate::worker::Worker;
use monoio::net::TcpListener;
use std::rc::Rc;

/// Set TCP_NODELAY on a listening socket: Linux copies it to every accepted socket, so
/// connections get it without a setsockopt each (Nagle would hold small responses back:
/// Monolake's 44 ms stall).
pub fn nodelay_listener(l: &std::net::TcpListener) -> std::io::Result<()> {
    socket2::SockRef::from(l).set_nodelay(true)
}

pub async fn run(w: Rc<Worker>, listener: TcpListener) {
    let mut stop = w.shutdown.wait();
    let max = w.cfg.limits.max_connections.max(1);
    loop {
        if w.active() >= max {
            monoio::select! {
                _ = w.slot_free() => {}
                _ = &mut stop => return,
            }
        }
        let accepted = monoio::select! {
            r = listener.accept() => r,
            _ = &mut stop => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                // TCP_NODELAY is inherited from the listener (see `nodelay_listener`): no
                // setsockopt per connection.
                let guard = w.enter();
                monoio::spawn(crate::client::serve(w.clone(), stream, peer, guard));
            }
            Err(e) => {
                w.stats.accept_errors.incr();
                w.log_error(format_args!("accept: {e}"));
                let pause = shared::net::accept_backoff(&e);
                monoio::select! {
                    _ = monoio::time::sleep(pause) => {}
                    _ = &mut stop => return,
                }
            }
        }
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
}
