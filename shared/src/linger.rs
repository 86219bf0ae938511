//! Short, imprecise waits without a timer operation each: "give a keep-alive client a few
//! milliseconds to come back before its connection parks".
//!
//! A monoio timer per wait costs a wheel insert and removal, a clock read and a 128-byte entry
//! in the waiting future: about 700 user-space instructions per proxied keep-alive request,
//! most of whose waits end within microseconds. A [`Linger`] (one per worker) instead keeps
//! one list of waiters and, while it holds any, one ticker task that advances an epoch every
//! `period`. A wait registered at epoch `e` ends at epoch `e + 2`: after between one and two
//! periods. The ticker wakes only the waiters whose wait is over; one that ends sooner takes
//! itself off the list. The ticker is spawned once, at the first wait (no allocation per wait
//! or per pause), and sleeps on no timer while the list is empty: the next wait wakes it.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// One worker's waits of about `period` (see the module).
#[derive(Clone)]
pub struct Linger {
    inner: Rc<Inner>,
}

struct Inner {
    period: Duration,
    /// Ticks since the linger was made (advanced only while the ticker runs).
    epoch: Cell<u64>,
    slots: RefCell<Slots>,
    /// How many times the ticker task was spawned (once: tests check it).
    spawns: Cell<u32>,
    /// The ticker's task while it waits for a first waiter (not ticking).
    parked: RefCell<Option<Waker>>,
}

impl Linger {
    pub fn new(period: Duration) -> Self {
        Linger {
            inner: Rc::new(Inner {
                period,
                epoch: Cell::new(0),
                slots: RefCell::new(Slots::default()),
                spawns: Cell::new(0),
                parked: RefCell::new(None),
            }),
        }
    }

    /// `fut`'s output (`Some`), or `None` once between one and two periods passed first. Must
    /// be awaited on a monoio runtime (the ticker is a task of it).
    pub fn wait<F: Future>(&self, fut: F) -> Wait<'_, F> {
        Wait {
            linger: self,
            fut,
            slot: None,
        }
    }

    /// The ticker is ticking (tests: it pauses when nobody waits).
    pub fn ticking(&self) -> bool {
        self.inner.spawns.get() > 0 && self.inner.parked.borrow().is_none()
    }
}

/// The waiters: the epoch at which each wait ends, and its task (`None`: a free slot).
#[derive(Default)]
struct Slots {
    list: Vec<Option<(u64, Waker)>>,
    free: Vec<usize>,
}

impl Slots {
    fn waiting(&self) -> usize {
        self.list.len() - self.free.len()
    }
}

impl Inner {
    fn add(self: &Rc<Self>, waker: Waker) -> (usize, u64) {
        let ends = self.epoch.get() + 2;
        let entry = Some((ends, waker));
        let mut slots = self.slots.borrow_mut();
        let i = match slots.free.pop() {
            Some(i) => {
                slots.list[i] = entry;
                i
            }
            None => {
                slots.list.push(entry);
                slots.list.len() - 1
            }
        };
        drop(slots);
        if self.spawns.get() == 0 {
            self.spawns.set(1);
            monoio::spawn(tick(self.clone()));
        } else if let Some(ticker) = self.parked.borrow_mut().take() {
            ticker.wake();
        }
        (i, ends)
    }

    fn remove(&self, i: usize) {
        let mut slots = self.slots.borrow_mut();
        slots.list[i] = None;
        slots.free.push(i);
    }
}

/// Advance the epoch every period while anyone waits, waking the waits that are over; wait
/// on no timer while nobody does.
async fn tick(inner: Rc<Inner>) {
    loop {
        std::future::poll_fn(|cx| {
            if inner.slots.borrow().waiting() > 0 {
                return Poll::Ready(());
            }
            *inner.parked.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
        monoio::time::sleep(inner.period).await;
        let epoch = inner.epoch.get() + 1;
        inner.epoch.set(epoch);
        for (ends, waker) in inner.slots.borrow().list.iter().flatten() {
            if *ends <= epoch {
                waker.wake_by_ref();
            }
        }
    }
}

/// See [`Linger::wait`].
pub struct Wait<'a, F> {
    linger: &'a Linger,
    fut: F,
    /// Its slot on the list and the epoch its wait ends at, once it waited.
    slot: Option<(usize, u64)>,
}

impl<F> Wait<'_, F> {
    fn leave(&mut self) {
        if let Some((i, _)) = self.slot.take() {
            self.linger.inner.remove(i);
        }
    }
}

impl<F: Future> Future for Wait<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: pin projection: `fut` is never moved out; the other fields are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Poll::Ready(v) = unsafe { Pin::new_unchecked(&mut this.fut) }.poll(cx) {
            this.leave();
            return Poll::Ready(Some(v));
        }
        let inner = &this.linger.inner;
        match this.slot {
            None => this.slot = Some(inner.add(cx.waker().clone())),
            Some((_, ends)) if inner.epoch.get() >= ends => {
                this.leave();
                return Poll::Ready(None);
            }
            Some((i, _)) => {
                if let Some((_, waker)) = &mut inner.slots.borrow_mut().list[i] {
                    if !waker.will_wake(cx.waker()) {
                        *waker = cx.waker().clone();
                    }
                }
            }
        }
        Poll::Pending
    }
}

impl<F> Drop for Wait<'_, F> {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests;
