//! Load from many machines: `--shard I/N` gives this generator its exact part of `-n` and
//! `--rate`, and `--start-at` lines the shards' starts up on the wall clock.
//!
//! Invariants (checked by the tests below):
//! - the N shards' `-n` shares add up to `-n` exactly: each gets `n / N`, and the first
//!   `n % N` shards (I = 1, 2, ...) one more;
//! - `--rate` is split the same way in units of 0.001 req/s (the rate is first rounded to
//!   0.001 req/s): 10 req/s over 3 shards is 3.334 + 3.333 + 3.333;
//! - `-c`, `-d` and everything else apply to each shard as given;
//! - `--shard auto/N` reads I from `JOB_COMPLETION_INDEX` + 1 (a Kubernetes Indexed Job
//!   numbers its pods from 0) and fails, naming the variable, without it.

use crate::LoadError;
use shared::shutdown::ShutdownFlag;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The environment variable `--shard auto/N` reads (set by Kubernetes in Indexed Jobs).
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// This generator's place among N: `index` from 1 to `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// A shard's run: its place and the totals (over all shards) it took its part of. Written to
/// `--json` so that `loader merge` can tell whether the shards were given the same load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShardRun {
    pub shard: Shard,
    /// `-n` as given (all shards together).
    pub requests_total: Option<u64>,
    /// `--rate` as given (all shards together).
    pub rate_total: Option<f64>,
    /// `-d` as given.
    pub duration: Option<Duration>,
}

/// With `--rate` and `--shard I/N`: shard I's sends start (I-1)/R after shard 1's (R the
/// total rate), so that the shards' sends interleave as one generator's would (wrk2 offsets
/// its connections by 1/R the same way) instead of N arriving at once.
pub fn schedule_offset(shard: Option<ShardRun>) -> Duration {
    match shard {
        Some(ShardRun {
            shard,
            rate_total: Some(total),
            ..
        }) if total > 0.0 => {
            // Saturating: a total too low to offset by (refused by the parser, not by every
            // caller) would panic the conversion.
            Duration::try_from_secs_f64(f64::from(shard.index - 1) / total).unwrap_or(Duration::MAX)
        }
        _ => Duration::ZERO,
    }
}

/// Wait for `--start-at` before a run; `Some(exit code)` when the run must not happen
/// (Ctrl-C while waiting).
pub fn wait_for_start(
    start_at: Option<SystemTime>,
    quiet: bool,
    stop: &ShutdownFlag,
) -> Option<i32> {
    let at = start_at?;
    if !quiet {
        if let Ok(left) = at.duration_since(SystemTime::now()) {
            eprintln!("loader: waiting {} for --start-at", readable(left));
        }
    }
    match wait_until(at, || stop.is_set()) {
        StartWait::Stopped => {
            eprintln!("loader: interrupted before --start-at: nothing was sent");
            Some(130)
        }
        StartWait::Reached { late } if late > Duration::from_secs(1) => {
            eprintln!(
                "loader: warning: --start-at was {} ago: starting now, not aligned with the \
                 other shards",
                readable(late)
            );
            None
        }
        StartWait::Reached { .. } => None,
    }
}

/// What `--shard` says, before the environment is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSpec {
    /// `I/N`.
    Fixed(Shard),
    /// `auto/N`: I from [`INDEX_ENV`].
    Auto { count: u32 },
}

/// The largest shard count accepted (a sanity bound, far above any Job's parallelism).
pub const MAX_SHARDS: u32 = 100_000;

/// Parse `I/N` or `auto/N` (clap's value parser).
pub fn parse_shard(s: &str) -> Result<ShardSpec, String> {
    let bad = || format!("invalid shard '{s}': expected I/N (1 <= I <= N) or auto/N");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let count: u32 = n.trim().parse().map_err(|_| bad())?;
    if count == 0 || count > MAX_SHARDS {
        return Err(bad());
    }
    if i.trim().eq_ignore_ascii_case("auto") {
        return Ok(ShardSpec::Auto { count });
    }
    let index: u32 = i.trim().parse().map_err(|_| bad())?;
    if index == 0 || index > count {
        return Err(bad());
    }
    Ok(ShardSpec::Fixed(Shard { index, count }))
}

impl ShardSpec {
    /// The shard, reading [`INDEX_ENV`] through `env` for `auto/N`.
    pub fn resolve(self, env: impl Fn(&str) -> Option<String>) -> Result<Shard, LoadError> {
        let count = match self {
            ShardSpec::Fixed(s) => return Ok(s),
            ShardSpec::Auto { count } => count,
        };
        let Some(raw) = env(INDEX_ENV) else {
            return Err(LoadError::Invalid(format!(
                "--shard auto/{count}: {INDEX_ENV} is not set (it is set in Kubernetes Indexed \
                 Jobs; elsewhere give --shard I/{count})"
            )));
        };
        match raw.trim().parse::<u32>() {
            Ok(i) if i < count => Ok(Shard {
                index: i + 1,
                count,
            }),
            _ => Err(LoadError::Invalid(format!(
                "--shard auto/{count}: {INDEX_ENV}={raw:?} is not an index from 0 to {}",
                count - 1
            ))),
        }
    }
}

impl Shard {
    /// This shard's part of `total`: `total / N`, plus one for the first `total % N` shards.
    pub fn part(&self, total: u64) -> u64 {
        let n = u64::from(self.count);
        let i = u64::from(self.index - 1);
        total / n + u64::from(i < total % n)
    }

    /// Where this shard's walk over the URLs starts in the whole load's, so that the shards
    /// together send each URL what one generator would. With `-n` (`total`), the index of its
    /// first request: the parts of the shards before it, so the shards' walks are the
    /// unsharded run's, cut in their parts. With `-d`, I - 1: the shards' first sends are the
    /// load's first N (with `--rate` they are 1/R apart), and the partial rounds at the end
    /// fall on different URLs instead of all on the first ones.
    pub fn first_request(&self, total: Option<u64>) -> u64 {
        let before = u64::from(self.index - 1);
        match total {
            Some(t) => {
                let n = u64::from(self.count);
                before * (t / n) + before.min(t % n)
            }
            None => before,
        }
    }

    /// This shard's part of `-n`; an error, in every shard alike, when there are fewer
    /// requests than shards.
    pub fn requests(&self, total: u64) -> Result<u64, LoadError> {
        if total < u64::from(self.count) {
            return Err(LoadError::Invalid(format!(
                "-n {total} is fewer than the {} shards: every shard needs at least one request",
                self.count
            )));
        }
        Ok(self.part(total))
    }

    /// This shard's part of `--rate`, split in units of 0.001 req/s.
    pub fn rate(&self, total: f64) -> Result<f64, LoadError> {
        let milli = (total * 1000.0).round();
        // Every shard alike: refused when any shard's part would be 0.
        let part = if milli >= f64::from(self.count) && milli < u64::MAX as f64 {
            self.part(milli as u64)
        } else {
            0
        };
        if part == 0 {
            return Err(LoadError::Invalid(format!(
                "--rate {total} is too low for {} shards: every shard needs at least 0.001 req/s",
                self.count
            )));
        }
        Ok(part as f64 / 1000.0)
    }
}

/// Parse `--start-at`: a Unix timestamp (`1767225600`, `1767225600.25`) or an RFC 3339 time
/// (`2026-12-01T10:00:00Z`, `2026-12-01T11:00:00.5+01:00`; a space may replace the `T`).
pub fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    let bad = || {
        format!(
            "invalid time '{s}': expected a Unix timestamp (1767225600) or an RFC 3339 time \
             (2026-12-01T10:00:00Z)"
        )
    };
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = t.parse().map_err(|_| bad())?;
        return Duration::try_from_secs_f64(secs)
            .map(|d| UNIX_EPOCH + d)
            .map_err(|_| bad());
    }
    rfc3339(t).ok_or_else(bad)
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` as seconds since the epoch (times before 1970 are
/// refused: a start in the past has no use).
fn rfc3339(t: &str) -> Option<SystemTime> {
    let b = t.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let p = t.get(r)?;
        p.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| p.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = &t[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut scaled = frac[..digits.min(9)].to_string();
        while scaled.len() < 9 {
            scaled.push('0');
        }
        nanos = scaled.parse().ok()?;
        rest = &frac[digits..];
    }
    let offset = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let d = |c: &u8| c.is_ascii_digit().then(|| i64::from(c - b'0'));
            let (h, m) = (d(h1)? * 10 + d(h2)?, d(m1)? * 10 + d(m2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let off = h * 3600 + m * 60;
            if *sign == b'+' {
                off
            } else {
                -off
            }
        }
        _ => return None,
    };
    let days = shared::civil::days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A wait or a lateness as people read it: `1.5s`, `4m 10s`, `3h 20m`, `2d 5h` (to the
/// tenth of a second below a minute, then two units).
pub fn readable(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{:.1}s", d.as_secs_f64()),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// How waiting for `--start-at` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartWait {
    /// The time came (or had already passed by this much: the run starts at once).
    Reached { late: Duration },
    /// `stop` was set (Ctrl-C) before the time came.
    Stopped,
}

/// Sleep until the wall clock reads `at`, in steps of at most 100 ms so `stopped()` is
/// looked at while waiting.
pub fn wait_until(at: SystemTime, stopped: impl Fn() -> bool) -> StartWait {
    loop {
        if stopped() {
            return StartWait::Stopped;
        }
        match at.duration_since(SystemTime::now()) {
            Ok(left) if !left.is_zero() => {
                std::thread::sleep(left.min(Duration::from_millis(100)));
            }
            Ok(_) => {
                return StartWait::Reached {
                    late: Duration::ZERO,
                }
            }
            Err(past) => {
                return StartWait::Reached {
                    late: past.duration(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_and_lateness_read_in_people_units() {
        let s = Duration::from_secs;
        assert_eq!(readable(Duration::from_micros(1_234_567)), "1.2s");
        assert_eq!(readable(s(250)), "4m 10s");
        assert_eq!(readable(s(3 * 3600 + 20 * 60 + 7)), "3h 20m");
        assert_eq!(readable(s(2 * 86_400 + 5 * 3600 + 99)), "2d 5h");
        // What the warning printed before: microseconds.
        assert!(!readable(Duration::from_micros(3_600_000_123)).contains("us"));
    }

    #[test]
    fn parts_add_up_and_the_remainder_goes_to_the_first_shards() {
        for (total, count) in [
            (10, 3),
            (1, 1),
            (7, 7),
            (1000, 4),
            (1001, 4),
            (5, 2),
            (99, 10),
        ] {
            let parts: Vec<u64> = (1..=count)
                .map(|index| Shard { index, count }.part(total))
                .collect();
            assert_eq!(parts.iter().sum::<u64>(), total, "{total}/{count}");
            let (max, min) = (parts.iter().max().unwrap(), parts.iter().min().unwrap());
            assert!(max - min <= 1, "{parts:?}");
            assert!(parts.windows(2).all(|w| w[0] >= w[1]), "{parts:?}");
        }
        let s = |index| Shard { index, count: 3 };
        assert_eq!([s(1).part(10), s(2).part(10), s(3).part(10)], [4, 3, 3]);
        // Each shard's first request follows the parts before it; without -n, shard I's is
        // the load's I-th.
        let firsts = |t| (1..=3).map(|i| s(i).first_request(t)).collect::<Vec<_>>();
        assert_eq!(firsts(Some(10)), [0, 4, 7]);
        assert_eq!(firsts(Some(2)), [0, 1, 2]);
        assert_eq!(firsts(None), [0, 1, 2]);
        for (total, count) in [(10, 3), (1001, 4), (7, 7), (99, 10)] {
            for index in 1..count {
                let (a, b) = (
                    Shard { index, count },
                    Shard {
                        index: index + 1,
                        count,
                    },
                );
                assert_eq!(
                    a.first_request(Some(total)) + a.part(total),
                    b.first_request(Some(total))
                );
            }
        }
        assert!(Shard { index: 4, count: 4 }.requests(3).is_err());
        assert!(
            Shard { index: 1, count: 4 }.requests(3).is_err(),
            "every shard alike"
        );
        assert_eq!(Shard { index: 4, count: 4 }.requests(4).unwrap(), 1);
    }

    #[test]
    fn rates_split_in_thousandths() {
        let rates: Vec<f64> = (1..=3)
            .map(|index| Shard { index, count: 3 }.rate(10.0).unwrap())
            .collect();
        assert_eq!(rates, [3.334, 3.333, 3.333]);
        let sum_milli: u64 = rates.iter().map(|r| (r * 1000.0).round() as u64).sum();
        assert_eq!(sum_milli, 10_000);
        assert_eq!(Shard { index: 2, count: 4 }.rate(400.0).unwrap(), 100.0);
        assert!(Shard { index: 2, count: 2 }.rate(0.001).is_err());
        assert!(
            Shard { index: 1, count: 2 }.rate(0.001).is_err(),
            "every shard alike"
        );
        assert_eq!(Shard { index: 2, count: 2 }.rate(0.002).unwrap(), 0.001);
    }

    #[test]
    fn shard_specs_parse_and_auto_reads_the_job_index() {
        let fixed = |index, count| Ok(ShardSpec::Fixed(Shard { index, count }));
        assert_eq!(parse_shard("1/4"), fixed(1, 4));
        assert_eq!(parse_shard("4/4"), fixed(4, 4));
        assert_eq!(parse_shard("auto/8"), Ok(ShardSpec::Auto { count: 8 }));
        for bad in [
            "0/4", "5/4", "1/0", "4", "a/4", "1/4/2", "", "/", "auto/0", "-1/4",
        ] {
            assert!(parse_shard(bad).is_err(), "{bad}");
        }
        let auto = ShardSpec::Auto { count: 4 };
        let env = |v: &'static str| move |k: &str| (k == INDEX_ENV).then(|| v.to_string());
        assert_eq!(
            auto.resolve(env("0")).unwrap(),
            Shard { index: 1, count: 4 }
        );
        assert_eq!(auto.resolve(env("3")).unwrap().index, 4);
        for bad in ["4", "-1", "x", ""] {
            let e = auto.resolve(env(bad)).unwrap_err().to_string();
            assert!(e.contains(INDEX_ENV), "{e}");
        }
        let e = auto.resolve(|_| None).unwrap_err().to_string();
        assert!(e.contains("JOB_COMPLETION_INDEX is not set"), "{e}");
    }

    #[test]
    fn start_times_parse_as_rfc3339_or_unix() {
        let at = |s| parse_start_at(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap());
        assert_eq!(at("1767225600"), Ok(Duration::from_secs(1_767_225_600)));
        assert_eq!(
            at("1767225600.25"),
            Ok(Duration::from_millis(1_767_225_600_250))
        );
        assert_eq!(
            at("2026-01-01T00:00:00Z"),
            Ok(Duration::from_secs(1_767_225_600))
        );
        assert_eq!(at("2026-01-01 01:30:00+01:30"), at("2026-01-01T00:00:00Z"));
        assert_eq!(at("2025-12-31T23:00:00-01:00"), at("2026-01-01T00:00:00Z"));
        assert_eq!(
            at("1970-01-01T00:00:01.5z"),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(
            at("2024-02-29T12:00:00Z"),
            Ok(Duration::from_secs(1_709_208_000))
        );
        for bad in [
            "",
            "tomorrow",
            "2026-01-01",
            "2026-01-01T00:00:00",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0100",
            "1.2.3",
        ] {
            assert!(parse_start_at(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn waiting_ends_at_the_time_or_on_stop() {
        let past = SystemTime::now() - Duration::from_secs(5);
        match wait_until(past, || false) {
            StartWait::Reached { late } => assert!(late >= Duration::from_secs(5)),
            other => panic!("{other:?}"),
        }
        let future = SystemTime::now() + Duration::from_secs(3600);
        assert_eq!(wait_until(future, || true), StartWait::Stopped);
    }
}
