//! Cheap clock reads for the request path.
//!
//! A precise read (`CLOCK_MONOTONIC`, `CLOCK_REALTIME` through the vDSO) costs ~17 ns on the
//! machines we measure on (~40 ns on a busy KVM guest), and a request used to take five of
//! them: its deadlines (idle, send), the `Date` field, its duration. The coarse realtime clock
//! costs ~4 ns and lags by about a tick (1-10 ms): plenty for a `Date` field in seconds and the
//! cache's ages. Durations that are reported (request time, upstream times) and deadlines come
//! from the time the worker's event loop read when it last reaped completions ([`loop_now`]),
//! as nginx's and HAProxy's timers do: exact to within one pass of the loop, and no clock read
//! per request.
use std::time::{Duration, Instant};

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

/// `after` from now, as monoio's instant (its timers' deadlines), counted from [`loop_now`]:
/// the time the loop last reaped completions, at most one pass of the loop before this step
/// started (nginx and HAProxy count their timers the same way), and for a step that a
/// completion started (a request's bytes arrived, a write ended), no earlier than what that
/// completion reports. Off a runtime thread, the precise clock.
pub fn deadline(after: Duration) -> monoio::time::Instant {
    monoio::time::Instant::from_std(loop_now()) + after
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
    fn deadlines_are_never_early_and_realtime_seconds_agree() {
        // Off a runtime thread: from the precise clock.
        for after in [Duration::ZERO, Duration::from_millis(300)] {
            let before = monoio::time::Instant::now();
            assert!(deadline(after) >= before + after);
        }
        // On one: from the loop's time, which is no earlier than the event that woke the task
        // (here a byte another thread wrote after reading the clock).
        use crate::runtime::{drivers_here, run_on};
        use monoio::io::AsyncReadRent;
        for driver in drivers_here() {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let writer = std::thread::spawn(move || {
                use std::io::Write;
                let (mut s, _) = l.accept().unwrap();
                let mut times = Vec::new();
                for _ in 0..20 {
                    std::thread::sleep(Duration::from_millis(2));
                    times.push(monoio::time::Instant::now());
                    s.write_all(b"x").unwrap();
                }
                times
            });
            let deadlines = run_on(driver, 64, async move {
                let mut s = monoio::net::TcpStream::connect(addr).await.unwrap();
                let mut out = Vec::new();
                let mut buf = vec![0u8; 1];
                for _ in 0..20 {
                    let (n, b) = s.read(buf).await;
                    assert_eq!(n.unwrap(), 1);
                    buf = b;
                    out.push(deadline(Duration::from_millis(300)));
                }
                out
            })
            .unwrap();
            for (sent, d) in writer.join().unwrap().into_iter().zip(deadlines) {
                assert!(d >= sent + Duration::from_millis(300), "{driver}: early");
            }
        }
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
