//! The scope's one timer: deadlines kept exactly (never early, each step its own) while the
//! wheel is touched once per run of later and later deadlines.

use super::{scope, timeout, timeout_at, timer_sets, Elapsed};
use crate::runtime::{drivers_here, run_on};
use std::cell::Cell;
use std::future::{pending, ready, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Pending once (waking itself), then ready: a step that completes on a later poll, as an
/// I/O operation does.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn each_driver(f: impl Fn() -> Pin<Box<dyn Future<Output = ()>>>) {
    for driver in drivers_here() {
        run_on(driver, 64, f()).expect("runtime");
    }
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_step_in_a_scope_fails_at_its_deadline_never_before() {
    each_driver(|| {
        Box::pin(scope(async {
            let deadline = monoio::time::Instant::now() + 50 * MS;
            assert_eq!(timeout_at(deadline, pending::<()>()).await, Err(Elapsed));
            let now = monoio::time::Instant::now();
            assert!(now >= deadline, "early by {:?}", deadline - now);
        }))
    });
}

#[test]
fn steps_whose_deadlines_only_move_later_set_the_timer_once() {
    each_driver(|| {
        Box::pin(scope(async {
            let before = timer_sets();
            for _ in 0..200 {
                assert_eq!(
                    timeout(Duration::from_secs(5), YieldOnce(false)).await,
                    Ok(())
                );
            }
            assert_eq!(timer_sets() - before, 1);
        }))
    });
}

#[test]
fn a_ready_step_sets_no_timer() {
    each_driver(|| {
        Box::pin(scope(async {
            let before = timer_sets();
            assert_eq!(timeout(Duration::from_secs(5), ready(7)).await, Ok(7));
            assert_eq!(timer_sets(), before);
        }))
    });
}

#[test]
fn an_earlier_deadline_after_a_later_one_fails_at_its_own() {
    each_driver(|| {
        Box::pin(scope(async {
            // A step leaves the timer set for 60 s from now.
            assert_eq!(
                timeout(Duration::from_secs(60), YieldOnce(false)).await,
                Ok(())
            );
            // Deadlines count from the loop's time (`clock::deadline`).
            let start = crate::clock::loop_now();
            assert_eq!(timeout(40 * MS, pending::<()>()).await, Err(Elapsed));
            let took = start.elapsed();
            assert!(took >= 40 * MS, "early: {took:?}");
            assert!(
                took < Duration::from_secs(30),
                "waited for the earlier setting: {took:?}"
            );
        }))
    });
}

#[test]
fn a_timer_left_set_by_an_ended_step_is_set_again_for_the_next() {
    each_driver(|| {
        Box::pin(scope(async {
            let before = timer_sets();
            // Ends at once, leaving the timer set for 20 ms from now.
            assert_eq!(timeout(20 * MS, YieldOnce(false)).await, Ok(()));
            // Deadlines count from the loop's time (`clock::deadline`).
            let start = crate::clock::loop_now();
            // The timer fires at 20 ms for nobody: this step is woken, is not due, and sets
            // it again for its own deadline.
            assert_eq!(timeout(80 * MS, pending::<()>()).await, Err(Elapsed));
            assert!(start.elapsed() >= 80 * MS, "early: {:?}", start.elapsed());
            assert_eq!(timer_sets() - before, 2);
        }))
    });
}

#[test]
fn concurrent_steps_in_one_scope_each_keep_their_deadline() {
    each_driver(|| {
        Box::pin(scope(async {
            // Deadlines count from the loop's time (`clock::deadline`).
            let start = crate::clock::loop_now();
            let ended = Rc::new(Cell::new([Duration::ZERO; 2]));
            let step = |i: usize, d: Duration| {
                let ended = ended.clone();
                async move {
                    let deadline = crate::clock::deadline(d);
                    assert_eq!(timeout_at(deadline, pending::<()>()).await, Err(Elapsed));
                    let mut e = ended.get();
                    e[i] = start.elapsed();
                    ended.set(e);
                }
            };
            // The later deadline is asked for first: the earlier one moves the timer forward.
            monoio::join!(step(0, 90 * MS), step(1, 30 * MS));
            let [late, early] = ended.get();
            assert!(early >= 30 * MS, "early step too early: {early:?}");
            assert!(late >= 90 * MS, "late step too early: {late:?}");
            assert!(
                early < late,
                "the earlier deadline failed after the later: {early:?} {late:?}"
            );
        }))
    });
}

#[test]
fn outside_a_scope_a_step_has_its_own_timer() {
    each_driver(|| {
        Box::pin(async {
            let before = timer_sets();
            // Deadlines count from the loop's time (`clock::deadline`).
            let start = crate::clock::loop_now();
            assert_eq!(timeout(30 * MS, pending::<()>()).await, Err(Elapsed));
            assert!(start.elapsed() >= 30 * MS, "early: {:?}", start.elapsed());
            assert_eq!(
                timeout(Duration::from_secs(5), YieldOnce(false)).await,
                Ok(())
            );
            assert_eq!(
                timer_sets(),
                before,
                "a scope's timer was used outside any scope"
            );
        })
    });
}
