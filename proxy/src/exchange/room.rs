//! Picking a server with room for the request: at once where none is at its `max_conns`,
//! else in the group's queue (`balance::queue`) for at most the route's connect timeout
//! (HAProxy's `timeout queue` defaults to its `timeout connect`). The same queue holds the
//! requests that found no descriptor for an upstream socket while others were in flight
//! ([`wait_for_release`]).

use crate::balance::queue::Waiter;
use crate::balance::{Balancer, InFlight, Room};
use crate::config::ServerId;
use std::cell::RefCell;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

pub(super) enum Picked<'a> {
    /// The server, counted in flight.
    Server(InFlight<'a>),
    /// Every server is tried or down.
    NoneLeft,
    /// Every server it may go to stayed at its `max_conns` for `within`.
    TimedOut,
}

/// A server for the request whose key is `key` and which tried `tried` already.
pub(super) async fn pick<'a>(
    balancer: &'a RefCell<Balancer>,
    key: u64,
    tried: &[ServerId],
    within: Duration,
) -> Picked<'a> {
    let room = balancer
        .borrow_mut()
        .pick_room(key, tried, shared::clock::loop_now(), false);
    match room {
        Room::Server(s) => return Picked::Server(InFlight::new(balancer, s)),
        Room::None => return Picked::NoneLeft,
        Room::Full => {}
    }
    let queued = Queued::join(balancer);
    let wait = std::future::poll_fn(|cx| {
        if !queued.waiter.woken(cx.waker()) {
            return Poll::Pending;
        }
        let mut b = balancer.borrow_mut();
        match b.pick_room(key, tried, shared::clock::loop_now(), true) {
            Room::Server(s) => Poll::Ready(Some(s)),
            Room::None => Poll::Ready(None),
            Room::Full => {
                b.queue().pass_on(&queued.waiter);
                queued.waiter.woken(cx.waker());
                Poll::Pending
            }
        }
    });
    let picked = monoio::time::timeout(within, wait).await;
    let mut queued = queued;
    match picked {
        // Counted in before anything else runs: the room is this request's.
        Ok(Some(s)) => {
            queued.served = true;
            drop(queued);
            Picked::Server(InFlight::new(balancer, s))
        }
        Ok(None) => Picked::NoneLeft,
        Err(_) => Picked::TimedOut,
    }
}

/// A place in the queue, given up when dropped (served, timed out, or the exchange dropped).
struct Queued<'a> {
    balancer: &'a RefCell<Balancer>,
    waiter: Rc<Waiter>,
    /// It found room: the wake it got was used.
    served: bool,
}

impl<'a> Queued<'a> {
    /// A place at the back of `balancer`'s queue.
    fn join(balancer: &'a RefCell<Balancer>) -> Self {
        let waiter = balancer.borrow_mut().queue().join();
        Queued {
            balancer,
            waiter,
            served: false,
        }
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.balancer
            .borrow_mut()
            .queue()
            .leave(&self.waiter, self.served);
    }
}

/// Out of descriptors for an upstream socket: wait for a request of the group in flight on
/// this worker to end (its connection goes back to the pool, or closes and frees its
/// descriptor), at most `within`. `false`: none is in flight (nothing this worker does will
/// free one: the clients hold them) or none ended in time.
///
/// None in flight may also mean some just ended in this pass of the loop: their sockets'
/// closes are submissions the loop has not made yet (monoio closes through the ring), so the
/// descriptors are not free yet. The first time a request finds none in flight
/// (`idle_settled` false) it lets one pass of the loop go by and tries again.
pub(super) async fn wait_for_release(
    balancer: &RefCell<Balancer>,
    within: Duration,
    idle_settled: &mut bool,
) -> bool {
    if within.is_zero() {
        return false;
    }
    if balancer.borrow().busy() {
        let mut queued = Queued::join(balancer);
        let woken = std::future::poll_fn(|cx| match queued.waiter.woken(cx.waker()) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        });
        if monoio::time::timeout(within, woken).await.is_err() {
            return false;
        }
        queued.served = true;
    } else if std::mem::replace(idle_settled, true) {
        return false;
    }
    // A connection that closed is closed by a submission of the worker's loop: let it go out
    // before the next socket is asked for.
    monoio::time::sleep(RELEASE_SETTLE).await;
    true
}

/// See [`wait_for_release`]: longer than one pass of the worker's loop.
const RELEASE_SETTLE: Duration = Duration::from_millis(1);

#[cfg(test)]
mod tests {
    use super::wait_for_release;
    use crate::balance::Balancer;
    use shared::runtime::{drivers_here, run_on};
    use std::cell::RefCell;
    use std::time::Duration;

    /// Short of descriptors with none in flight: the first time, a pass of the loop goes by
    /// (a socket closed in this pass is free after it) and the request tries again; the second
    /// time it gives up at once, as it does with no time left.
    #[test]
    fn none_in_flight_lets_one_pass_go_by_then_gives_up() {
        let cfg = crate::config::from_toml(
            "t.toml",
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[upstream.app]\nservers = [\"127.0.0.1:9\"]\n",
        )
        .unwrap();
        for driver in drivers_here() {
            run_on(driver, 64, async {
                let g = &cfg.groups[crate::config::GroupId::new(0)];
                let b = RefCell::new(Balancer::new(g, 0, 1));
                let mut settled = false;
                let within = Duration::from_secs(5);
                assert!(wait_for_release(&b, within, &mut settled).await);
                assert!(settled);
                assert!(!wait_for_release(&b, within, &mut settled).await);
                assert!(!wait_for_release(&b, Duration::ZERO, &mut false).await);
            })
            .expect("runtime");
        }
    }
}
