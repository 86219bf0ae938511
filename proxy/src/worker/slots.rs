//! A worker's client connection count under its connection limit, and the accept loops
//! waiting for a connection to close.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

#[derive(Default)]
pub(super) struct ConnSlots {
    active: Cell<usize>,
    waiters: RefCell<Vec<Waker>>,
}

impl ConnSlots {
    pub(super) fn active(&self) -> usize {
        self.active.get()
    }

    pub(super) fn enter(&self) {
        self.active.set(self.active.get() + 1);
    }

    /// A connection closed: a slot is free, and every waiting accept loop looks again.
    pub(super) fn leave(&self) {
        self.active.set(self.active.get().saturating_sub(1));
        let waiters: Vec<Waker> = std::mem::take(&mut *self.waiters.borrow_mut());
        for waker in waiters {
            waker.wake();
        }
    }

    /// Completes once fewer than `max` connections are open.
    pub(super) async fn below(&self, max: usize) {
        poll_fn(|cx| {
            if self.active.get() < max {
                Poll::Ready(())
            } else {
                let mut w = self.waiters.borrow_mut();
                if !w.iter().any(|x| x.will_wake(cx.waker())) {
                    w.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }
}
