//! CPU time of a process, read from `/proc/PID/stat`: how `compare --watch-pid` measures what
//! each request cost the proxy (or any other watched process) in user and kernel time.
//!
//! Fields 14 (`utime`) and 15 (`stime`) of `/proc/PID/stat` are the process's CPU time summed
//! over all its threads, in clock ticks (`sysconf(_SC_CLK_TCK)`, 100 on Linux). Field 2
//! (`comm`) is the executable name in parentheses and may itself contain spaces and `)`, so the
//! numeric fields are counted from after the *last* `)`.

use std::io;
use std::time::Duration;

/// CPU time consumed by a process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTimes {
    /// The CPU time spent between `earlier` and `self` (saturating: a restarted process with a
    /// reused pid reads as zero rather than underflowing).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }

    pub fn total(&self) -> Duration {
        self.user + self.system
    }
}

impl std::ops::Add for CpuTimes {
    type Output = CpuTimes;
    fn add(self, o: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user + o.user,
            system: self.system + o.system,
        }
    }
}

/// CPU times of process `pid`, all threads included.
pub fn cpu_times(pid: u32) -> io::Result<CpuTimes> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text, clock_ticks_per_sec()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/stat: unexpected format"),
        )
    })
}

/// CPU times of this process.
pub fn self_cpu_times() -> io::Result<CpuTimes> {
    cpu_times(std::process::id())
}

/// `sysconf(_SC_CLK_TCK)`, the unit of `utime` and `stime`; 100 if sysconf fails.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions; it reads a constant of the C library.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Parse the text of `/proc/PID/stat`. `None` if it does not have the expected shape.
pub fn parse_stat(text: &str, ticks_per_sec: u64) -> Option<CpuTimes> {
    // After the last ')' come fields 3 (state) onwards, so utime (14) is the 12th of those.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = ticks_per_sec.max(1);
    let to_duration = |t: u64| {
        Duration::from_secs(t / ticks) + Duration::from_nanos((t % ticks) * 1_000_000_000 / ticks)
    };
    Some(CpuTimes {
        user: to_duration(utime),
        system: to_duration(stime),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_with_spaces_and_parens() {
        let line =
            "4242 (my (weird) proc) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 3 0 1 2 3";
        let t = parse_stat(line, 100).unwrap();
        assert_eq!(t.user, Duration::from_millis(2500));
        assert_eq!(t.system, Duration::from_millis(370));
    }

    #[test]
    fn malformed_is_none() {
        assert_eq!(parse_stat("", 100), None);
        assert_eq!(parse_stat("1 (x) S 1 2", 100), None);
        assert_eq!(parse_stat("1 (x) S 1 2 3 4 5 6 7 8 9 ten 11", 100), None);
    }

    #[test]
    fn since_saturates() {
        let a = CpuTimes {
            user: Duration::from_secs(2),
            system: Duration::from_secs(1),
        };
        let b = CpuTimes::default();
        assert_eq!(b.since(&a), CpuTimes::default());
        assert_eq!(a.since(&b).total(), Duration::from_secs(3));
    }

    #[test]
    fn reads_this_process() {
        let before = self_cpu_times().unwrap();
        // Burn a little CPU so user time can only grow.
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let after = self_cpu_times().unwrap();
        assert!(after.user >= before.user);
        assert!(after.system >= before.system);
    }
}
