//! Waiting until an instant on a worker: on monoio's timer, or with `--spin` by polling the
//! clock on every turn of the runtime (see [`pause_until`] for why it is all or nothing).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// Wait until `at`: on monoio's timer, or with `spin` (`--spin`) by polling the clock on
/// every turn of the runtime, never sleeping.
///
/// Why all or nothing: monoio runs its timers only when the thread parks, and a spinning task
/// keeps it from parking, so while one task spins no timer of the worker fires. With `--spin`
/// every wait of the worker (send times, the monitor, the end of the run) is therefore a spin,
/// and the worker's thread is busy for the whole run, whatever the rate. The worker must run
/// [`spin_ticker`].
pub async fn pause_until(at: Instant, spin: bool) {
    if spin {
        SpinUntil(at).await
    } else {
        monoio::time::sleep_until(at.into()).await
    }
}

/// Ready once the clock passes the instant; until then it is polled again on every turn of
/// the runtime, behind the other ready tasks, through the worker's [`spin_ticker`].
///
/// Why not wake itself: monoio puts a task woken while it runs at the *front* of its queue,
/// so a self-waking task runs again at once and starves every other task (connects and reads
/// never complete). A task woken from another task goes to the back. So a spinner leaves its
/// waker in a per-thread list and wakes the ticker; the ticker wakes the spinners; each hop
/// passes through the back of the queue, behind the I/O that became ready meanwhile.
struct SpinUntil(Instant);

thread_local! {
    /// Spinners waiting for the ticker (capacity kept: no allocation once grown).
    static SPINNERS: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
    /// The ticker, when it is waiting for spinners.
    static TICKER: RefCell<Option<Waker>> = const { RefCell::new(None) };
}

impl Future for SpinUntil {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.0 {
            return Poll::Ready(());
        }
        SPINNERS.with(|s| s.borrow_mut().push(cx.waker().clone()));
        if let Some(t) = TICKER.with(|t| t.borrow_mut().take()) {
            t.wake();
        }
        Poll::Pending
    }
}

/// The `--spin` worker's ticker (spawned once per worker; never ends): wakes the spinners.
pub async fn spin_ticker() {
    SpinTicker.await
}

struct SpinTicker;

impl Future for SpinTicker {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        TICKER.with(|t| *t.borrow_mut() = Some(cx.waker().clone()));
        SPINNERS.with(|s| {
            for w in s.borrow_mut().drain(..) {
                w.wake();
            }
        });
        Poll::Pending
    }
}
