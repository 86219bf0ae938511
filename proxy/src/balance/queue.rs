//! Requests waiting for room on a server (`max_conns`), and the count of requests in flight.
//!
//! A server with `max_conns` takes at most its worker's share of requests at once
//! (`per_worker`). A request whose every possible server is at its share waits in its group's
//! queue (HAProxy's backend queue; nginx's `max_conns` has no queue outside NGINX Plus and
//! answers 502 at once) until a request on one of them finishes:
//!
//! - FIFO: while a woken waiter has yet to look, a new request queues behind the waiters
//!   instead of taking the room a finished request leaves. Otherwise a keep-alive client
//!   whose next request came in the same pass as the answer to its last one would take the
//!   room before any waiter ran, and waiters would starve behind busy connections. A room no
//!   wake is headed for is one every waiter looked at and could not use: a new request takes
//!   it rather than leave it idle until another request ends.
//! - One wake per finished request, for the first waiter not woken yet. A woken waiter that
//!   cannot use the room (its retry already tried that server) passes the wake on; one that
//!   leaves (timed out, its client gone) passes on a wake it had not used.
//! - Across generations: a reload or a DNS change that changes a group hands its queue to the
//!   new generation's balancer, and each server it keeps (same addresses) its count of
//!   requests in flight ([`Balancer::share_load`]), so `max_conns` bounds the requests of
//!   both generations and the waiters keep their places. The new limits may have room for
//!   waiters at once: every one of them is woken to look ([`Queue::wake_all`]).
//! - Nothing here runs for a group without `max_conns`: `finished` finds the queue empty.

use super::Balancer;
use crate::config::ServerId;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Waker;

/// A server's share of `max_conns` on one worker of `workers`: at least 1 (as client limits
/// are shared, `limit::connections_per_worker`). 0: no limit.
pub fn per_worker(max_conns: u32, workers: usize) -> u64 {
    if max_conns == 0 {
        return 0;
    }
    let workers = u64::try_from(workers.max(1)).unwrap_or(u64::MAX);
    (u64::from(max_conns) / workers).max(1)
}

/// One queued request.
#[derive(Default)]
pub struct Waiter {
    /// A request finished since this one queued (or since it last looked): look for room.
    woken: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

impl Waiter {
    /// Whether there may be room now; if not, `cx`'s waker is kept for the wake.
    pub fn woken(&self, waker: &Waker) -> bool {
        if self.woken.get() {
            return true;
        }
        self.waker.set(Some(waker.clone()));
        false
    }
}

/// A group's waiting requests, oldest first.
#[derive(Default)]
pub struct Queue {
    waiting: VecDeque<Rc<Waiter>>,
    /// Waiters woken that have not looked for room yet: the wakes on their way.
    woken: usize,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Queue({} waiting)", self.waiting.len())
    }
}

impl Queue {
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// A new waiter, at the back.
    pub fn join(&mut self) -> Rc<Waiter> {
        let w = Rc::new(Waiter::default());
        self.waiting.push_back(w.clone());
        w
    }

    /// Whether a waiter was woken and has not looked for room yet: a room is on its way to
    /// it.
    pub fn wake_pending(&self) -> bool {
        self.woken > 0
    }

    /// `w` leaves (served, timed out, or its request dropped): a wake it held and did not use
    /// goes to the next waiter.
    pub fn leave(&mut self, w: &Rc<Waiter>, used: bool) {
        let Some(i) = self.waiting.iter().position(|x| Rc::ptr_eq(x, w)) else {
            return;
        };
        self.waiting.remove(i);
        if w.woken.get() {
            self.woken -= 1;
            if !used {
                self.wake_after(None);
            }
        }
    }

    /// `w` was woken but found no room it may use: it waits again, and the wake goes on to
    /// the next waiter behind it.
    pub fn pass_on(&mut self, w: &Rc<Waiter>) {
        if w.woken.replace(false) {
            self.woken -= 1;
        }
        self.wake_after(Some(w));
    }

    /// Room may have come without a request ending (a reload's new limits or servers): every
    /// waiter looks again, oldest first; those that find none wait on.
    pub fn wake_all(&mut self) {
        for w in &self.waiting {
            if !w.woken.replace(true) {
                self.woken += 1;
                if let Some(k) = w.waker.take() {
                    k.wake();
                }
            }
        }
    }

    /// A request finished: room for one.
    pub fn wake_next(&mut self) {
        self.wake_after(None);
    }

    /// Wake the first waiter not woken yet (behind `after`, if given).
    fn wake_after(&mut self, after: Option<&Rc<Waiter>>) {
        let mut rest = self.waiting.iter();
        if let Some(a) = after {
            if rest.by_ref().position(|x| Rc::ptr_eq(x, a)).is_none() {
                return;
            }
        }
        if let Some(w) = rest.find(|x| !x.woken.get()) {
            w.woken.set(true);
            self.woken += 1;
            if let Some(k) = w.waker.take() {
                k.wake();
            }
        }
    }
}

/// Counts a request in flight on a server (for least-conn, random2 and `max_conns`) for as
/// long as it lives; its end makes room for a waiter.
pub struct InFlight<'a> {
    balancer: &'a RefCell<Balancer>,
    server: ServerId,
}

impl<'a> InFlight<'a> {
    /// Count a request to `server` in (picked by the caller, room checked where it has a cap).
    pub fn new(balancer: &'a RefCell<Balancer>, server: ServerId) -> Self {
        balancer.borrow_mut().started(server);
        InFlight { balancer, server }
    }

    pub fn server(&self) -> ServerId {
        self.server
    }

    /// The room, still counted, held apart from the balancer (and so from its generation):
    /// for a request that outlives its exchange, a WebSocket tunnel.
    pub fn detach(self) -> Option<super::HeldRoom> {
        let held = self.balancer.borrow().hold(self.server)?;
        // Counted out by the held room when it goes, not here.
        std::mem::forget(self);
        Some(held)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.balancer.borrow_mut().finished(self.server);
    }
}
