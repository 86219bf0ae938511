use super::*;

fn budget(cpuset: usize, quota: Option<f64>) -> CpuBudget {
    CpuBudget { cpuset, quota }
}

#[test]
fn auto_pins_only_with_a_cpu_per_worker_and_no_quota_below_the_workers() {
    // (CPU set, quota, workers) -> pinned?
    let cases = [
        (4, None, 4, true),
        (8, None, 4, true),
        (2, None, 4, false),
        (8, Some(4.0), 4, true),
        (8, Some(8.0), 4, true),
        (8, Some(3.5), 4, false),
        (8, Some(0.5), 1, false),
        (1, None, 1, true),
        (1, Some(1.0), 2, false),
    ];
    for (cpuset, quota, workers, want) in cases {
        let d = decide(PinMode::Auto, &budget(cpuset, quota), workers);
        assert_eq!(
            d.pin, want,
            "{cpuset} CPUs, quota {quota:?}, {workers} workers: {d}"
        );
        assert!(d.why.starts_with("pin auto: "), "{d}");
    }
}

#[test]
fn on_and_off_are_obeyed_whatever_the_budget() {
    for b in [budget(1, Some(0.5)), budget(64, None)] {
        assert!(decide(PinMode::On, &b, 4).pin);
        assert!(!decide(PinMode::Off, &b, 4).pin);
    }
}

#[test]
fn the_reason_names_what_decided() {
    let d = decide(PinMode::Auto, &budget(8, Some(1.5)), 4);
    assert_eq!(
        d.why,
        "pin auto: the cgroup CPU quota, 1.5 CPUs, is below 4 workers"
    );
    let d = decide(PinMode::Auto, &budget(2, None), 4);
    assert_eq!(d.why, "pin auto: the CPU set has 2 CPUs for 4 workers");
    let d = decide(PinMode::Auto, &budget(4, Some(4.0)), 4);
    assert_eq!(
        d.why,
        "pin auto: 4 CPUs in the CPU set for 4 workers, CPU quota 4 CPUs"
    );
    let d = decide(PinMode::Auto, &budget(4, None), 1);
    assert_eq!(
        d.why,
        "pin auto: 4 CPUs in the CPU set for 1 worker, no CPU quota"
    );
    assert_eq!(decide(PinMode::Off, &budget(4, None), 1).why, "pin off");
}

#[test]
fn default_workers_follow_the_quota_rounded_down_at_least_one() {
    assert_eq!(budget(8, None).default_workers(), 8);
    assert_eq!(budget(8, Some(2.5)).default_workers(), 2);
    assert_eq!(budget(8, Some(0.5)).default_workers(), 1);
    assert_eq!(budget(2, Some(16.0)).default_workers(), 2);
}

#[test]
fn mode_from_a_file_value() {
    assert_eq!(PinMode::parse("auto"), Some(PinMode::Auto));
    assert_eq!(PinMode::parse("true"), Some(PinMode::On));
    assert_eq!(PinMode::parse("off"), Some(PinMode::Off));
    assert_eq!(PinMode::parse("yes"), None);
}

/// A fake root: /proc/self/cgroup and /sys/fs/cgroup files.
fn tree(files: &[(&str, &str)]) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = std::env::temp_dir().join(format!("pinning-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    root
}

#[test]
fn cgroup_v2_quota_is_the_smallest_on_the_path() {
    let root = tree(&[
        ("proc/self/cgroup", "0::/kubepods/pod1/ctr\n"),
        ("sys/fs/cgroup/cpu.max", "max 100000\n"),
        ("sys/fs/cgroup/kubepods/cpu.max", "800000 100000\n"),
        ("sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n"),
        ("sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n"),
    ]);
    assert_eq!(cgroup_quota(&root), Some(1.5));
    let none = tree(&[
        ("proc/self/cgroup", "0::/\n"),
        ("sys/fs/cgroup/cpu.max", "max 100000\n"),
    ]);
    assert_eq!(cgroup_quota(&none), None);
    assert_eq!(cgroup_quota(&tree(&[])), None, "no cgroup files: no quota");
}

#[test]
fn cgroup_v1_quota_from_the_cpu_controller() {
    let root = tree(&[
        (
            "proc/self/cgroup",
            "5:memory:/docker/x\n4:cpu,cpuacct:/docker/x\n",
        ),
        (
            "sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_quota_us",
            "200000\n",
        ),
        (
            "sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_period_us",
            "100000\n",
        ),
    ]);
    assert_eq!(cgroup_quota(&root), Some(2.0));
    // In a container the controller's mount is the cgroup itself; -1 is no quota.
    let inside = tree(&[
        ("proc/self/cgroup", "4:cpu,cpuacct:/docker/x\n"),
        ("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n"),
        ("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"),
    ]);
    assert_eq!(cgroup_quota(&inside), None);
}
