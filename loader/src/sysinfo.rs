//! The context of a run, recorded in `--json` so a result can be interpreted later: loader
//! version, kernel, CPU model, cores, I/O driver, and the sysctls that bound a loopback HTTP
//! benchmark (accept backlog, ephemeral ports, TIME_WAIT reuse, socket buffers, busy polling,
//! open files): every key the profiles of `scripts/sysctl/` set, so a tuning experiment's JSON
//! says which profile it ran under.
//!
//! Invariant: collecting never fails. A file that is missing or unreadable (containers, non-Linux
//! kernels) becomes `null` in the JSON, never an error.

use serde::Serialize;
use std::collections::BTreeMap;

/// The sysctls recorded, by their `sysctl` name (`/proc/sys/` path with dots).
pub const SYSCTLS: &[&str] = &[
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.core.netdev_max_backlog",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.core.busy_read",
    "net.core.busy_poll",
    "fs.nr_open",
    "fs.file-max",
];

/// RLIMIT_NOFILE of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NofileLimit {
    pub soft: u64,
    pub hard: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SysInfo {
    pub loader_version: String,
    /// `uname -r`.
    pub kernel: Option<String>,
    /// The first `model name` of /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// Logical CPUs online.
    pub cores: Option<usize>,
    /// CPUs this process may run on (its affinity mask, as `taskset` sets it).
    pub cpus_available: usize,
    /// The I/O driver the run used (set by the caller, which knows it).
    pub driver: Option<String>,
    /// Values as the kernel prints them, whitespace collapsed to one space.
    pub sysctls: BTreeMap<String, Option<String>>,
    pub open_files_limit: Option<NofileLimit>,
}

impl SysInfo {
    /// Collect everything this machine tells us. `driver` is the driver in use, if known.
    pub fn collect(driver: Option<String>) -> SysInfo {
        SysInfo {
            loader_version: env!("CARGO_PKG_VERSION").to_string(),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|t| cpu_model(&t)),
            cores: online_cpus(),
            cpus_available: std::thread::available_parallelism().map_or(1, |n| n.get()),
            driver,
            sysctls: SYSCTLS
                .iter()
                .map(|name| (name.to_string(), read_trimmed(&sysctl_path(name))))
                .collect(),
            open_files_limit: nofile_limit(),
        }
    }
}

/// `net.core.somaxconn` → `/proc/sys/net/core/somaxconn`.
pub fn sysctl_path(name: &str) -> String {
    format!("/proc/sys/{}", name.replace('.', "/"))
}

/// The file's content with runs of whitespace collapsed (`32768\t60999\n` → `32768 60999`).
fn read_trimmed(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let v = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!v.is_empty()).then_some(v)
}

/// The first `model name` (x86) or `Model`/`cpu model` line (ARM, MIPS) of /proc/cpuinfo.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let key = key.trim();
        let value = value.trim();
        (matches!(key, "model name" | "Model" | "cpu model") && !value.is_empty())
            .then(|| value.to_string())
    })
}

fn online_cpus() -> Option<usize> {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    (n > 0).then_some(n as usize)
}

fn nofile_limit() -> Option<NofileLimit> {
    // SAFETY: getrlimit writes into a plain struct we own.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        (libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0).then_some(NofileLimit {
            soft: rl.rlim_cur as u64,
            hard: rl.rlim_max as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_lines() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(x86).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(
            cpu_model("processor : 0\nModel : Raspberry Pi 4\n").as_deref(),
            Some("Raspberry Pi 4")
        );
        assert_eq!(cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn collect_never_fails_and_lists_every_sysctl() {
        let s = SysInfo::collect(Some("epoll".into()));
        assert_eq!(s.sysctls.len(), SYSCTLS.len());
        assert!(s.cpus_available >= 1);
        assert_eq!(s.driver.as_deref(), Some("epoll"));
        let json = serde_json::to_value(&s).unwrap();
        assert!(
            json["sysctls"]["net.core.somaxconn"].is_string()
                || json["sysctls"]["net.core.somaxconn"].is_null()
        );
    }

    #[test]
    fn sysctl_names_map_to_proc_paths() {
        assert_eq!(
            sysctl_path("net.ipv4.tcp_rmem"),
            "/proc/sys/net/ipv4/tcp_rmem"
        );
    }
}
