//! Deadlines for a task's I/O steps without a timer operation per step.
//!
//! monoio's `timeout_at` registers a timer in the thread's wheel when its operation first
//! waits and takes it out when the operation ends: three times per proxied keep-alive request
//! (the upstream write, the response head read, the client write), about 1,000 of the
//! ~20,000 user-space instructions of a 64 B request, and a 128-byte timer entry in every
//! future that carries a deadline (copied each time such a future is built or moved).
//!
//! Inside a [`scope`] (a client connection's request frame) every [`timeout_at`] shares the
//! scope's one timer instead, moved lazily, as HAProxy's tasks keep one expiry date: a step
//! waiting with a deadline makes sure the timer fires no later than that deadline and never
//! pushes it back; when the timer fires, each waiting step whose deadline has passed fails and
//! the others set it again for theirs. A request loop whose deadlines only move later (each
//! step's is "now + a timeout") touches the wheel about once per timeout period instead of at
//! every step. The price: a step that ended before its deadline leaves the timer set, so the
//! task may be woken once for nothing when that deadline passes (every future a task polls
//! must bear a spurious poll anyway: monoio's own `timeout` polls its operation when its
//! timer fires).
//!
//! A deadline never comes early: a step fails only once the clock has reached its deadline.
//! Outside a scope [`timeout_at`] is monoio's own (a timer per step, boxed).

use monoio::time::{Instant, Sleep};
use std::cell::{Cell, UnsafeCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// A step's deadline passed before it completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

thread_local! {
    /// The timer of the scope being polled on this thread (null outside any).
    static CURRENT: Cell<*const Timer> = const { Cell::new(std::ptr::null()) };
    /// How many times this thread set a scope's timer (tests count the wheel's work).
    static SETS: Cell<u64> = const { Cell::new(0) };
}

/// How many times a scope's timer was set on this thread: each is one timer-wheel operation.
pub fn timer_sets() -> u64 {
    SETS.with(Cell::get)
}

/// A scope's timer: one monoio sleep, set for the earliest deadline a step asked for since it
/// last fired.
#[derive(Default)]
struct Timer {
    /// Made at the first deadline (a scope that never waits pays no clock read or handle).
    sleep: UnsafeCell<Option<Sleep>>,
    /// When the sleep fires, while it is set.
    set_for: Cell<Option<Instant>>,
}

impl Timer {
    /// Ready once `deadline` has passed; otherwise the timer fires no later than it and wakes
    /// `cx`'s task.
    fn poll_deadline(&self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: only this function touches the sleep, it does not re-enter itself (a sleep's
        // poll and reset run no code of ours), and the timer is pinned inside its scope, so
        // the sleep (an intrusive entry of the wheel) never moves.
        let slot = unsafe { &mut *self.sleep.get() };
        loop {
            match (self.set_for.get(), slot.as_mut()) {
                (Some(at), Some(sleep)) if at <= deadline => {
                    // SAFETY: see above: pinned in the scope.
                    let sleep = unsafe { Pin::new_unchecked(sleep) };
                    if sleep.poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.set_for.set(None);
                    // The wheel never fires early: fired for this deadline, it has passed.
                    // Fired for an earlier one (a step that ended since, or another step's):
                    // look at the clock, and set the timer again for this one if need be.
                    if at == deadline || Instant::now() >= deadline {
                        return Poll::Ready(());
                    }
                }
                (_, Some(sleep)) => {
                    // SAFETY: see above: pinned in the scope.
                    unsafe { Pin::new_unchecked(sleep) }.reset(deadline);
                    self.set(deadline);
                }
                (_, None) => {
                    *slot = Some(monoio::time::sleep_until(deadline));
                    self.set(deadline);
                }
            }
        }
    }

    fn set(&self, deadline: Instant) {
        self.set_for.set(Some(deadline));
        SETS.with(|n| n.set(n.get() + 1));
    }
}

/// Run `fut` with one timer for all the deadlines of the steps it awaits (see the module).
pub fn scope<F: Future>(fut: F) -> Scope<F> {
    Scope {
        fut,
        timer: Timer::default(),
    }
}

/// A future whose steps share one timer. Its fields drop in order: the steps before the
/// timer they may point to.
pub struct Scope<F> {
    fut: F,
    timer: Timer,
}

/// Puts the previous scope back when a poll ends (or unwinds).
struct Restore(*const Timer);

impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

impl<F: Future> Future for Scope<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: pin projection: neither field is moved out of the pinned scope.
        let this = unsafe { self.get_unchecked_mut() };
        let timer: *const Timer = &this.timer;
        let _restore = Restore(CURRENT.with(|c| c.replace(timer)));
        // SAFETY: as above.
        unsafe { Pin::new_unchecked(&mut this.fut) }.poll(cx)
    }
}

/// `fut`, failing with [`Elapsed`] once `deadline` passes first.
pub fn timeout_at<F: Future>(deadline: Instant, fut: F) -> Timeout<F> {
    Timeout {
        fut,
        deadline,
        alone: None,
    }
}

/// `fut`, failing with [`Elapsed`] `after` from now (the precise clock: see
/// [`crate::clock::deadline`]).
pub fn timeout<F: Future>(after: Duration, fut: F) -> Timeout<F> {
    timeout_at(crate::clock::deadline(after), fut)
}

/// See [`timeout_at`].
pub struct Timeout<F> {
    fut: F,
    deadline: Instant,
    /// Its own timer when polled outside any scope.
    alone: Option<Pin<Box<Sleep>>>,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: pin projection: `fut` is never moved out; the other fields are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Poll::Ready(v) = unsafe { Pin::new_unchecked(&mut this.fut) }.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let timer = CURRENT.with(Cell::get);
        let passed = if timer.is_null() {
            let deadline = this.deadline;
            this.alone
                .get_or_insert_with(|| Box::pin(monoio::time::sleep_until(deadline)))
                .as_mut()
                .poll(cx)
        } else {
            // SAFETY: a non-null CURRENT points to the timer of the scope being polled, which
            // outlives this poll (it is restored when that poll ends).
            unsafe { &*timer }.poll_deadline(this.deadline, cx)
        };
        passed.map(|()| Err(Elapsed))
    }
}

#[cfg(test)]
mod tests;
