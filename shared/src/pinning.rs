//! Whether workers are pinned to cores (`--pin auto|on|off`, `[runtime] pin`), and how many
//! there are by default. nginx and wrk do not pin unless told; pinning pays when each worker
//! gets a core of its own, and hurts when it does not: two processes on one host pinning to
//! the same first cores, or a cgroup CPU quota (Kubernetes limits, `docker --cpus`) smaller
//! than the worker count, where the workers would be throttled on the cores they are pinned to
//! while the quota is spent elsewhere. So `auto` pins only when the process's CPU set holds at
//! least as many CPUs as workers and no CPU quota is below the worker count.
//!
//! [`decide`] is the pure decision (CPU set, quota, workers, mode); [`CpuBudget::read`]
//! reads the CPU set (sched_getaffinity) and the cgroup quota (v2 `cpu.max`, v1
//! `cpu.cfs_quota_us` / `cpu.cfs_period_us`) once, at start, on the thread that starts the
//! workers, never on a worker.

use std::fmt;
use std::path::Path;

/// `--pin`: `auto` (the default), `on`, `off`. A file's `pin = true` / `false` are `on` /
/// `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PinMode {
    /// Pin when the CPU set holds a CPU per worker and no CPU quota is below the worker count.
    #[default]
    Auto,
    /// Pin worker i to the i-th CPU of the CPU set, whatever the set and quota.
    On,
    /// Never pin: the kernel's scheduler places the workers.
    Off,
}

impl PinMode {
    pub fn name(self) -> &'static str {
        match self {
            PinMode::Auto => "auto",
            PinMode::On => "on",
            PinMode::Off => "off",
        }
    }

    /// A file's value: "auto", "on", "off", or true / false (on / off).
    pub fn parse(s: &str) -> Option<PinMode> {
        match s {
            "auto" => Some(PinMode::Auto),
            "on" | "true" => Some(PinMode::On),
            "off" | "false" => Some(PinMode::Off),
            _ => None,
        }
    }
}

/// The CPUs this process may use: its CPU set, and the cgroup CPU quota (in CPUs) if any.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuBudget {
    /// CPUs in the affinity mask (what `taskset` and a cpuset cgroup give).
    pub cpuset: usize,
    /// The smallest CPU quota over the cgroup and its parents, in CPUs (quota / period);
    /// `None`: no quota.
    pub quota: Option<f64>,
}

impl CpuBudget {
    /// This process's budget, read now (at start; never on a worker).
    pub fn read() -> CpuBudget {
        let cpuset = core_affinity::get_core_ids().map_or(0, |ids| ids.len());
        let cpuset = if cpuset == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            cpuset
        };
        CpuBudget {
            cpuset,
            quota: cgroup_quota(Path::new("/")),
        }
    }

    /// Workers when none are asked for: one per CPU of the set, at most the quota rounded
    /// down, at least 1.
    pub fn default_workers(&self) -> usize {
        let by_quota = self.quota.map_or(usize::MAX, |q| q.floor() as usize);
        self.cpuset.min(by_quota).max(1)
    }
}

/// What [`decide`] chose and why, for the start line.
#[derive(Debug, Clone, PartialEq)]
pub struct PinDecision {
    pub pin: bool,
    pub why: String,
}

impl fmt::Display for PinDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.why)
    }
}

/// Pin or not, and why: the rule of `--pin auto` (module docs).
pub fn decide(mode: PinMode, budget: &CpuBudget, workers: usize) -> PinDecision {
    let w = if workers == 1 { "worker" } else { "workers" };
    let (pin, why) = match mode {
        PinMode::Off => (false, "pin off".to_string()),
        PinMode::On => (true, "pin on".to_string()),
        PinMode::Auto => match budget.quota {
            Some(q) if q < workers as f64 => (
                false,
                format!(
                    "pin auto: the cgroup CPU quota, {} CPUs, is below {workers} {w}",
                    cpus(q)
                ),
            ),
            _ if budget.cpuset < workers => (
                false,
                format!(
                    "pin auto: the CPU set has {} for {workers} {w}",
                    plural(budget.cpuset, "CPU")
                ),
            ),
            quota => (
                true,
                format!(
                    "pin auto: {} in the CPU set for {workers} {w}, {}",
                    plural(budget.cpuset, "CPU"),
                    quota.map_or("no CPU quota".to_string(), |q| format!(
                        "CPU quota {} CPUs",
                        cpus(q)
                    ))
                ),
            ),
        },
    };
    PinDecision { pin, why }
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// 1.5 -> "1.5", 2.0 -> "2".
fn cpus(q: f64) -> String {
    let s = format!("{q:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The smallest CPU quota (in CPUs) on this process's cgroup path, under `root` (`/` but in
/// tests): cgroup v2's `cpu.max` of the cgroup and each parent, else cgroup v1's
/// `cpu.cfs_quota_us` / `cpu.cfs_period_us` of the cpu controller's cgroup.
pub fn cgroup_quota(root: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(root.join("proc/self/cgroup")).ok()?;
    let fs = root.join("sys/fs/cgroup");
    let mut best: Option<f64> = None;
    let mut keep = |q: Option<f64>| {
        if let Some(q) = q {
            best = Some(best.map_or(q, |b: f64| b.min(q)));
        }
    };
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            // v2: the cgroup and every parent up to the (namespace's) root.
            for dir in Path::new(path).ancestors() {
                keep(read_v2(&fs.join(dir).join("cpu.max")));
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            // v1: the controller's mount, with the path or (in a container) without it.
            for mount in ["cpu,cpuacct", "cpu", "cpuacct,cpu"] {
                let m = fs.join(mount);
                keep(read_v1(&m.join(path)).or_else(|| read_v1(&m)));
            }
        }
    }
    best
}

/// `cpu.max`: "max 100000" (no quota) or "QUOTA PERIOD" in microseconds.
fn read_v2(file: &Path) -> Option<f64> {
    parse_cpu_max(&std::fs::read_to_string(file).ok()?)
}

pub fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    let quota: f64 = it.next()?.parse().ok()?;
    let period: f64 = it.next()?.parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// `cpu.cfs_quota_us` (-1: none) over `cpu.cfs_period_us`.
fn read_v1(dir: &Path) -> Option<f64> {
    let quota = std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).ok()?;
    let period = std::fs::read_to_string(dir.join("cpu.cfs_period_us")).ok()?;
    parse_cpu_max(&format!("{} {}", quota.trim(), period.trim()))
}

/// Pin the calling thread to `cpu`; `false` where the CPU set does not allow it.
pub fn pin_this_thread(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

#[cfg(test)]
mod tests;
