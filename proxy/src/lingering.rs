//! How long a lingering close goes on (RFC 9112 9.6; nginx's `lingering_close`), for the
//! workers' client connections (`conn::linger`) and the admin listener's alike.
//!
//! An answer sent before its request was read whole (a body refused or still coming, bytes
//! pipelined behind it) ends the connection. Closing a socket with bytes unread sends a
//! reset, and a reset discards whatever of the answer the client had not read yet (the part
//! its receive window did not take), and fails the client's own sends: so the write side is
//! shut down first (the client sees the answer's end) and what the client still sends is
//! read and discarded, until it closes, or sends nothing for `lingering_timeout`, or
//! `lingering_time` has passed since the lingering began: nginx's rule and defaults (30 s
//! in all, 5 s per read), `[timeouts] lingering_time` and `lingering_timeout`. A client
//! sending a large body slowly thus gets its answer whole, as long as it goes on sending;
//! none holds the connection past `lingering_time`.

use std::time::{Duration, Instant};

/// While the process stops (a graceful stop, a takeover), a lingering close goes on at most
/// this much longer, on the workers and the admin listener alike: the stop waits for
/// requests in flight, not for clients still sending.
pub const STOPPING_LINGER: Duration = Duration::from_millis(500);

/// One lingering close's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Lingering {
    /// Close by then, whatever the client does.
    until: Instant,
    /// The longest wait for the client's next bytes.
    timeout: Duration,
}

impl Lingering {
    /// A lingering close that began at `now`: at most `time` in all, at most `timeout`
    /// waiting for each read.
    pub fn new(now: Instant, time: Duration, timeout: Duration) -> Lingering {
        Lingering {
            until: now + time,
            timeout,
        }
    }

    /// The same lingering close, over by `t` at the latest.
    pub fn ending_by(self, t: Instant) -> Lingering {
        Lingering {
            until: self.until.min(t),
            ..self
        }
    }

    /// When a read started at `now` (after the last one brought bytes) must have brought
    /// more; `None` once the lingering is over: close.
    pub fn read_by(&self, now: Instant) -> Option<Instant> {
        (now < self.until).then(|| (now + self.timeout).min(self.until))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn each_read_waits_its_timeout_and_none_past_the_total() {
        let t0 = Instant::now();
        let l = Lingering::new(t0, 30_000 * MS, 5_000 * MS);
        let cases = [
            (0, Some(5_000)),
            (1, Some(5_001)),
            (24_999, Some(29_999)),
            (25_000, Some(30_000)),
            (27_500, Some(30_000)),
            (29_999, Some(30_000)),
            (30_000, None),
            (60_000, None),
        ];
        for (at, want) in cases {
            let got = l.read_by(t0 + at * MS).map(|d| (d - t0).as_millis() as u32);
            assert_eq!(got, want, "at {at} ms");
        }
    }

    #[test]
    fn a_timeout_longer_than_the_total_is_cut_to_it() {
        let t0 = Instant::now();
        let l = Lingering::new(t0, 100 * MS, 5_000 * MS);
        assert_eq!(l.read_by(t0), Some(t0 + 100 * MS));
    }
}
