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
                // Nagle would hold small responses back (Monolake's 44 ms stall).
                let _ = stream.set_nodelay(true);
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
