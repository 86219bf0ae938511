//! The series every Prometheus exporter has, read at scrape time on the admin thread (never
//! on a worker, never on the request path): `process_*` from /proc/self (the client
//! libraries' names and units), `proxy_build_info`, and the reload state under Prometheus's
//! own names (`*_config_last_reload_successful`, `*_config_last_reload_success_timestamp_seconds`)
//! with the generation number beside them.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The commit the binary was built from (`build.rs`: `git rev-parse`, or `PROXY_COMMIT` set
/// at build time), "unknown" when neither was there.
pub const COMMIT: &str = env!("PROXY_COMMIT");

/// What the reloads came to, written by the signal thread's `Reloader`, read by scrapes.
#[derive(Debug)]
pub struct ReloadState {
    generation: AtomicU64,
    last_ok: AtomicBool,
    /// Unix time of the last successful load (the start counts as one), in milliseconds.
    last_success_ms: AtomicU64,
    /// Host name lookups of `resolve` groups that failed (`crate::dns`), and the generations
    /// their changes made.
    dns_lookups: AtomicU64,
    dns_failures: AtomicU64,
    dns_changes: AtomicU64,
}

impl ReloadState {
    /// Generation 1, loaded now.
    pub fn started() -> ReloadState {
        ReloadState {
            generation: AtomicU64::new(1),
            last_ok: AtomicBool::new(true),
            last_success_ms: AtomicU64::new(now_ms()),
            dns_lookups: AtomicU64::new(0),
            dns_failures: AtomicU64::new(0),
            dns_changes: AtomicU64::new(0),
        }
    }

    /// A `resolve` group's name was looked up.
    pub fn dns_looked_up(&self) {
        self.dns_lookups.fetch_add(1, Ordering::Relaxed);
    }

    /// A `resolve` group's lookup failed (its last good addresses are kept).
    pub fn dns_failed(&self) {
        self.dns_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Generation `number`, made by a DNS change, is every worker's now (not a reload: the
    /// reload families stay as they were).
    pub fn dns_applied(&self, number: u64) {
        self.generation.store(number, Ordering::Relaxed);
        self.dns_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// Generation `number` is every worker's now.
    pub fn applied(&self, number: u64) {
        self.generation.store(number, Ordering::Relaxed);
        self.last_success_ms.store(now_ms(), Ordering::Relaxed);
        self.last_ok.store(true, Ordering::Relaxed);
    }

    /// A reload was rejected: the running generation goes on.
    pub fn rejected(&self) {
        self.last_ok.store(false, Ordering::Relaxed);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The process, build and reload families.
pub fn render(out: &mut String, reload: &ReloadState) {
    let p = ProcStat::read();
    family(
        out,
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
    );
    let _ = writeln!(out, "process_cpu_seconds_total {}", p.cpu_seconds);
    family(
        out,
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
    );
    let _ = writeln!(out, "process_resident_memory_bytes {}", p.resident_bytes);
    family(
        out,
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
    );
    let _ = writeln!(out, "process_open_fds {}", p.open_fds);
    family(
        out,
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors.",
    );
    let _ = writeln!(out, "process_max_fds {}", p.max_fds);
    family(
        out,
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
    );
    let _ = writeln!(out, "process_start_time_seconds {}", p.start_time_seconds);
    family(
        out,
        "proxy_build_info",
        "gauge",
        "The version and commit the binary was built from (always 1).",
    );
    let _ = writeln!(
        out,
        "proxy_build_info{{version=\"{}\",commit=\"{COMMIT}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    family(
        out,
        "proxy_config_generation",
        "gauge",
        "The configuration generation running (1 at start, one more per applied reload or DNS \
         change).",
    );
    let _ = writeln!(
        out,
        "proxy_config_generation {}",
        reload.generation.load(Ordering::Relaxed)
    );
    family(
        out,
        "proxy_config_last_reload_successful",
        "gauge",
        "Whether the last configuration reload attempt was successful.",
    );
    let ok = u8::from(reload.last_ok.load(Ordering::Relaxed));
    let _ = writeln!(out, "proxy_config_last_reload_successful {ok}");
    family(
        out,
        "proxy_config_last_reload_success_timestamp_seconds",
        "gauge",
        "Timestamp of the last successful configuration load (the start, or a reload).",
    );
    let ms = reload.last_success_ms.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "proxy_config_last_reload_success_timestamp_seconds {}.{:03}",
        ms / 1000,
        ms % 1000
    );
    dns(out, reload);
}

/// The DNS re-resolution's counts (`resolve` groups, `crate::dns`).
fn dns(out: &mut String, r: &ReloadState) {
    family(
        out,
        "proxy_dns_lookups_total",
        "counter",
        "Host name lookups of upstream groups with `resolve`.",
    );
    let n = r.dns_lookups.load(Ordering::Relaxed);
    let _ = writeln!(out, "proxy_dns_lookups_total {n}");
    family(
        out,
        "proxy_dns_failures_total",
        "counter",
        "Host name lookups of upstream groups with `resolve` that failed (the last good \
         addresses were kept).",
    );
    let n = r.dns_failures.load(Ordering::Relaxed);
    let _ = writeln!(out, "proxy_dns_failures_total {n}");
    family(
        out,
        "proxy_dns_changes_total",
        "counter",
        "Generations made because a re-resolved name's addresses changed.",
    );
    let n = r.dns_changes.load(Ordering::Relaxed);
    let _ = writeln!(out, "proxy_dns_changes_total {n}");
}

/// The process figures, as the Prometheus client libraries read them on Linux.
#[derive(Debug, Default, PartialEq)]
struct ProcStat {
    cpu_seconds: f64,
    resident_bytes: u64,
    open_fds: u64,
    max_fds: u64,
    start_time_seconds: f64,
}

impl ProcStat {
    fn read() -> ProcStat {
        // SAFETY: sysconf reads a constant; no memory is passed.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let btime = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| boot_time(&s));
        let mut p = parse_stat(
            &stat,
            ticks.max(1) as f64,
            page.max(1) as u64,
            btime.unwrap_or(0),
        );
        p.open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct we own.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0 {
            p.max_fds = rl.rlim_cur;
        }
        p
    }
}

/// `btime` of /proc/stat: the boot time, in seconds since the epoch.
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// /proc/self/stat: fields after the command (which may hold spaces and parentheses, so the
/// fields are counted from its last `)`): utime (14), stime (15), starttime (22) in clock
/// ticks, rss (24) in pages.
fn parse_stat(stat: &str, ticks: f64, page: u64, btime: u64) -> ProcStat {
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    // Field 3 (state) is the first after the command.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |n: usize| {
        f.get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    ProcStat {
        cpu_seconds: (num(14) + num(15)) as f64 / ticks,
        resident_bytes: num(24) * page,
        start_time_seconds: btime as f64 + num(22) as f64 / ticks,
        ..ProcStat::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command() {
        // A command with a space and a parenthesis in it.
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 \
                    123456789 2048 18446744073709551615";
        let p = parse_stat(stat, 100.0, 4096, 1_700_000_000);
        assert_eq!(p.cpu_seconds, 3.0);
        assert_eq!(p.resident_bytes, 2048 * 4096);
        assert_eq!(p.start_time_seconds, 1_700_000_010.0);
        assert_eq!(
            boot_time("cpu  1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn this_process_reads_as_running() {
        let mut out = String::new();
        render(&mut out, &ReloadState::started());
        let value = |name: &str| -> f64 {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap();
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!(value("process_resident_memory_bytes") > 0.0, "{out}");
        assert!(value("process_open_fds") >= 3.0, "{out}");
        let now = now_ms() as f64 / 1000.0;
        let start = value("process_start_time_seconds");
        assert!(
            start > now - 86_400.0 && start <= now + 1.0,
            "{start} vs {now}"
        );
        assert_eq!(value("proxy_config_generation"), 1.0);
        assert_eq!(value("proxy_config_last_reload_successful"), 1.0);
    }
}
