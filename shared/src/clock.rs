//! Cheap clock reads for the request path.
//!
//! A precise read (`CLOCK_MONOTONIC`, `CLOCK_REALTIME` through the vDSO) costs ~17 ns on the
//! machines we measure on, and a request used to take five of them: its deadlines (idle, send),
//! the `Date` field, its duration. The kernel's coarse clocks cost ~4 ns and lag by at most one
//! tick (1-10 ms, `clock_getres`): plenty for deadlines measured in seconds and a `Date` field
//! in seconds. Durations that are reported (request time, upstream times) come from the time
//! the worker's event loop read when it last woke up ([`loop_now`]), as nginx's and HAProxy's
//! do: exact to within one pass of the loop, and no clock read per request.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A precise instant and the coarse clock read right after it: a coarse reading becomes an
/// `Instant` by its distance from this pair (both clocks run on the same monotonic timeline).
struct Anchor {
    at: Instant,
    coarse: Duration,
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

fn read(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer; these clocks cannot fail on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// Now, to within one clock tick (never ahead of the precise clock by more than a tick
/// either): for deadlines and timeouts, not for measuring.
pub fn coarse_now() -> Instant {
    let a = ANCHOR.get_or_init(|| Anchor {
        at: Instant::now(),
        coarse: read(libc::CLOCK_MONOTONIC_COARSE),
    });
    let now = read(libc::CLOCK_MONOTONIC_COARSE);
    match now.checked_sub(a.coarse) {
        Some(d) => a.at + d,
        None => a.at,
    }
}

/// [`coarse_now`] as monoio's instant (its timers' deadlines).
pub fn coarse_deadline(after: Duration) -> monoio::time::Instant {
    monoio::time::Instant::from_std(coarse_now() + after)
}

/// When this worker's event loop last reaped completions (at most one pass of the loop old;
/// the precise clock off a runtime thread): the start and end of a request and an upstream's
/// first byte, measured as nginx measures `$request_time` and HAProxy its timers, from the
/// time cached once per pass instead of a clock read each.
pub fn loop_now() -> Instant {
    monoio::time::loop_now().unwrap_or_else(Instant::now)
}

/// Time since the Unix epoch, to within one clock tick (a `Date` field, a log's time, the
/// cache's ages).
pub fn coarse_unix() -> Duration {
    read(libc::CLOCK_REALTIME_COARSE)
}

/// [`coarse_unix`] in whole seconds.
pub fn coarse_unix_secs() -> u64 {
    coarse_unix().as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_readings_follow_the_precise_clock() {
        // One tick is at most 10 ms on Linux (HZ >= 100); allow for a descheduled thread.
        let slack = Duration::from_millis(50);
        for _ in 0..100 {
            let before = Instant::now();
            let c = coarse_now();
            let after = Instant::now();
            assert!(
                c + slack >= before && c <= after + slack,
                "{c:?} vs {before:?}"
            );
        }
        let t0 = coarse_now();
        std::thread::sleep(Duration::from_millis(30));
        let waited = coarse_now() - t0;
        assert!(waited >= Duration::from_millis(10), "{waited:?}");
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(coarse_unix_secs().abs_diff(secs) <= 1);
    }

    #[test]
    fn loop_time_follows_each_wake_up_of_the_runtime() {
        use crate::runtime::{drivers_here, run_on};
        for driver in drivers_here() {
            run_on(driver, 64, async move {
                for wait in [Duration::from_millis(30), Duration::ZERO] {
                    let before = Instant::now();
                    // A timer's wake-up (no I/O) refreshes it too.
                    monoio::time::sleep(wait).await;
                    let seen = loop_now();
                    let after = Instant::now();
                    assert!(seen <= after, "{driver}: ahead of the clock");
                    if !wait.is_zero() {
                        assert!(
                            seen >= before + wait,
                            "{driver}: not refreshed by the wake-up"
                        );
                    }
                }
                // Within one pass of the loop nothing reads the clock: the same value.
                assert_eq!(loop_now(), loop_now());
            })
            .unwrap();
        }
        // Off a runtime thread: the precise clock.
        let before = Instant::now();
        assert!(std::thread::spawn(loop_now).join().unwrap() >= before);
    }
}
