//! A task that panics ends alone. [`Contained`] polls its future inside `catch_unwind`: a
//! panic ends that future (dropped in place, so its guards and buffers are released by their
//! destructors) and is handed to the owner's report, instead of unwinding through the
//! runtime and ending the worker thread with every other connection it serves.
//!
//! Nothing is added to a poll that does not panic but the landing pad (zero-cost unwinding):
//! no allocation, no system call. The wrapper lives in the task's own allocation.

use std::cell::Cell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    /// How many [`Contained`] polls are running on this thread (nested ones count).
    static INSIDE: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is polling a [`Contained`] future now: a panic hook tells with it a
/// panic that will be caught from one that will end the thread (the proxy's binary aborts on
/// the latter, as `panic = "abort"` did).
pub fn inside() -> bool {
    INSIDE.with(|n| n.get() > 0)
}

/// Install a panic hook that prints as the default one does, then aborts the process unless
/// the panic happened inside a [`Contained`] future (which catches it). For a binary whose
/// threads must not die one by one (a worker gone would leave its share of the work undone).
pub fn abort_outside_contained() {
    let print = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        print(info);
        if !inside() {
            std::process::abort();
        }
    }));
}

/// `fut`, whose panic is caught and reported to `report` (with the panic's message) once.
pub struct Contained<F, R> {
    fut: Option<F>,
    report: Option<R>,
}

impl<F: Future<Output = ()>, R: FnOnce(&str)> Contained<F, R> {
    pub fn new(fut: F, report: R) -> Self {
        Contained {
            fut: Some(fut),
            report: Some(report),
        }
    }
}

/// The text of a panic's payload (`panic!` with a literal or with format arguments).
pub fn message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)")
}

impl<F: Future<Output = ()>, R: FnOnce(&str)> Future for Contained<F, R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `fut` is pinned with `self` and never moved out: it is only polled through
        // the pin below and dropped in place (set to `None`). `report` is not pinned (it is
        // never polled, only taken and called), which `Unpin`-ness of the rest allows.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(fut) = this.fut.as_mut() else {
            return Poll::Ready(());
        };
        // SAFETY: see above: `fut` stays where it is until it is dropped.
        let fut = unsafe { Pin::new_unchecked(fut) };
        INSIDE.with(|n| n.set(n.get() + 1));
        let polled = catch_unwind(AssertUnwindSafe(|| fut.poll(cx)));
        INSIDE.with(|n| n.set(n.get() - 1));
        let payload = match polled {
            Ok(Poll::Ready(())) => {
                this.fut = None;
                return Poll::Ready(());
            }
            Ok(Poll::Pending) => return Poll::Pending,
            Err(payload) => payload,
        };
        // The future's state after a panic is dropped, never polled again; a destructor that
        // panics too is contained as well.
        INSIDE.with(|n| n.set(n.get() + 1));
        let _ = catch_unwind(AssertUnwindSafe(|| this.fut = None));
        INSIDE.with(|n| n.set(n.get() - 1));
        if let Some(report) = this.report.take() {
            report(message(payload.as_ref()));
        }
        Poll::Ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A task that panics after an await ends alone: the runtime runs on, its other task
    /// finishes, the report has the message, and what the task held was dropped.
    #[test]
    fn a_panicking_task_ends_alone_and_is_reported() {
        let reported = Rc::new(RefCell::new(Vec::<String>::new()));
        let held = Rc::new(());
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("runtime");
        let (r, h) = (reported.clone(), held.clone());
        let survivor = rt.block_on(async move {
            let boom = monoio::spawn(Contained::new(
                async move {
                    let _mine = h;
                    monoio::time::sleep(std::time::Duration::from_millis(1)).await;
                    let v: Vec<u8> = Vec::new();
                    let i = v.len() + 3;
                    let _ = v[i]; // an index out of range, as a bug would
                },
                move |m: &str| r.borrow_mut().push(m.to_string()),
            ));
            let other = monoio::spawn(async {
                monoio::time::sleep(std::time::Duration::from_millis(5)).await;
                42
            });
            boom.await;
            other.await
        });
        assert_eq!(survivor, 42);
        let reported = reported.borrow();
        assert_eq!(reported.len(), 1, "{reported:?}");
        assert!(reported[0].contains("index out of bounds"), "{reported:?}");
        assert_eq!(Rc::strong_count(&held), 1, "the task's state was dropped");
    }
}
