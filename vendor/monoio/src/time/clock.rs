//! Source of time abstraction.
//!
//! By default, `std::time::Instant::now()` is used. However, when the
//! `test-util` feature flag is enabled, the values returned for `now()` are
//! configurable.

use crate::time::Instant;

#[derive(Default, Debug, Clone)]
pub(crate) struct Clock {}

// Vendored change: the time this thread's driver last woke up or reaped (set by the io_uring
// and the legacy driver after each wait and each reap), as nginx and HAProxy
// cache their time once per event-loop pass. What a task reads during the pass is at most the
// pass's length old, and costs no clock read.
std::thread_local! {
    static LOOP_NOW: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// Vendored change: refresh the event-loop time (the drivers call it when they reap).
#[inline]
pub(crate) fn refresh_loop_now() {
    LOOP_NOW.with(|t| t.set(Some(std::time::Instant::now())));
}

/// Vendored change: the time the runtime on this thread last reaped completions or events (at
/// most one pass of its loop old), `None` before the first pass or off a runtime thread.
#[inline]
pub fn loop_now() -> Option<std::time::Instant> {
    LOOP_NOW.with(|t| t.get())
}

pub(crate) fn now() -> Instant {
    Instant::from_std(std::time::Instant::now())
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock {}
    }

    pub(crate) fn now(&self) -> Instant {
        now()
    }
}
