//! `--pin auto` (the default) as a process sees it: the start-up line says what was done and
//! why. The CPU set is narrowed in the child (sched_setaffinity, as `taskset -c 0` does); the
//! decision itself, quotas included, is unit-tested in `shared::pinning`.

use std::os::unix::process::CommandExt;
use std::time::Duration;
use tests::process::ProxyProcess;

/// The proxy with `args` on a CPU set of CPU 0 alone; its start-up line.
fn first_line_on_cpu0(args: &[&str]) -> String {
    let mut cmd = ProxyProcess::command();
    cmd.args(["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9"])
        .args(args);
    // SAFETY: runs in the child between fork and exec; sched_setaffinity is async-signal-safe
    // and works on a set this closure owns.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut p = ProxyProcess::start(&mut cmd);
    p.signal(libc::SIGTERM);
    assert!(p
        .exit_within(Duration::from_secs(10))
        .is_some_and(|s| s.success()));
    p.summary.lines().next().unwrap_or_default().to_string()
}

#[test]
fn auto_pins_with_a_cpu_per_worker_and_says_why() {
    let line = first_line_on_cpu0(&[]);
    assert!(
        line.contains("1 worker pinned to core 0 (pin auto: 1 CPU in the CPU set for 1 worker"),
        "{line}"
    );
    // More workers than the set has CPUs: unpinned, and why.
    let line = first_line_on_cpu0(&["--workers", "2"]);
    assert!(
        line.contains("2 workers, unpinned (pin auto: the CPU set has 1 CPU for 2 workers)"),
        "{line}"
    );
    // `on` pins anyway (both to the one CPU of the set), `off` never.
    let line = first_line_on_cpu0(&["--workers", "2", "--pin", "on"]);
    assert!(
        line.contains("2 workers pinned to cores 0,0 (pin on)"),
        "{line}"
    );
    let line = first_line_on_cpu0(&["--no-pin"]);
    assert!(line.contains("1 worker, unpinned (pin off)"), "{line}");
}
