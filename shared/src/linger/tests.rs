//! Waits of one to two periods on one ticker: never shorter than a period, each woken only
//! when its wait is over, and no ticker left running once nobody waits.

use super::Linger;
use crate::runtime::{drivers_here, run_on};
use std::cell::Cell;
use std::future::{pending, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

fn each_driver(f: impl Fn() -> Pin<Box<dyn Future<Output = ()>>>) {
    for driver in drivers_here() {
        run_on(driver, 64, f()).expect("runtime");
    }
}

const PERIOD: Duration = Duration::from_millis(20);

/// Pending until its flag is set; counts its polls.
struct Gate {
    open: Rc<Cell<bool>>,
    polls: Rc<Cell<u32>>,
}

impl Future for Gate {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        self.polls.set(self.polls.get() + 1);
        if self.open.get() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

fn gate() -> (Gate, Rc<Cell<bool>>, Rc<Cell<u32>>) {
    let (open, polls) = (Rc::new(Cell::new(false)), Rc::new(Cell::new(0)));
    let g = Gate {
        open: open.clone(),
        polls: polls.clone(),
    };
    (g, open, polls)
}

/// Yield to the runtime until the linger's ticker has paused (it must within a few periods).
async fn ticker_ends(l: &Linger) {
    let start = Instant::now();
    while l.ticking() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the ticker still ticks with nobody waiting"
        );
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[test]
fn a_wait_whose_future_stays_pending_ends_after_one_to_two_periods_never_sooner() {
    each_driver(|| {
        Box::pin(async {
            let l = Linger::new(PERIOD);
            let start = Instant::now();
            assert_eq!(l.wait(pending::<()>()).await, None);
            assert!(start.elapsed() >= PERIOD, "early: {:?}", start.elapsed());
            ticker_ends(&l).await;
        })
    });
}

#[test]
fn a_wait_is_woken_once_when_it_is_over_not_at_every_tick() {
    each_driver(|| {
        Box::pin(async {
            let l = Linger::new(PERIOD);
            let (g, _, polls) = gate();
            assert_eq!(l.wait(g).await, None);
            // The first poll, then the one wake at the second tick (none at the first).
            assert_eq!(polls.get(), 2);
        })
    });
}

#[test]
fn a_wait_ends_with_its_future_and_leaves_the_list() {
    each_driver(|| {
        Box::pin(async {
            let l = Linger::new(PERIOD);
            let (g, open, _) = gate();
            let l2 = l.clone();
            let waiter = monoio::spawn(async move { l2.wait(g).await });
            monoio::time::sleep(Duration::from_millis(1)).await;
            assert!(l.ticking(), "a waiting wait runs the ticker");
            open.set(true);
            // Nothing wakes the gate's task but the linger's tick: it is polled again once its
            // wait is over, and the opened gate wins.
            assert_eq!(waiter.await, Some(()));
            ticker_ends(&l).await;
        })
    });
}

#[test]
fn many_waits_share_one_ticker_spawned_once_and_a_dropped_wait_frees_its_slot() {
    each_driver(|| {
        Box::pin(async {
            let l = Linger::new(PERIOD);
            let mut tasks = Vec::new();
            for _ in 0..100 {
                let l = l.clone();
                tasks.push(monoio::spawn(async move { l.wait(pending::<()>()).await }));
            }
            for t in tasks {
                assert_eq!(t.await, None);
            }
            ticker_ends(&l).await;
            // A wait polled once and dropped before its end: off the list, so the ticker stops.
            {
                let mut w = Box::pin(l.wait(pending::<()>()));
                let polled = std::future::poll_fn(|cx| Poll::Ready(w.as_mut().poll(cx))).await;
                assert_eq!(polled, Poll::Pending);
                assert!(l.ticking());
            }
            ticker_ends(&l).await;
            assert_eq!(l.inner.slots.borrow().list.len(), 100, "slots are reused");
            // Paused twice and woken again: still the one task (no allocation per pause).
            assert_eq!(l.inner.spawns.get(), 1);
        })
    });
}
