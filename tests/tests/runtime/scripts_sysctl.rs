//! The sysctl tuning scripts (`scripts/sysctl/`, `scripts/tune-experiment.sh`) run for real on
//! a fake sysctl tree: a temporary directory laid out like /proc/sys (`SYSCTL_ROOT`), with its
//! own state directory (`SYSCTL_STATE_DIR`). The root check looks at `SYSCTL_CHECK_UID`, so
//! these tests behave the same whether `cargo test` runs as root or not: 0 where a test acts as
//! root on its own fake tree, 1000 where it checks that a user is refused.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The values of this kernel's defaults where they are fixed, with the kernel's tabs; `None`
/// leaves the file out, as on a kernel without that sysctl. fs.file-max is the 64-bit kernel's
/// "unlimited", past what shell arithmetic compares.
const TREE: &[(&str, Option<&str>)] = &[
    ("net.core.somaxconn", Some("4096")),
    ("net.ipv4.tcp_max_syn_backlog", Some("2048")),
    ("net.core.netdev_max_backlog", Some("1000")),
    ("net.ipv4.ip_local_port_range", Some("32768\t60999")),
    ("net.ipv4.tcp_tw_reuse", Some("2")),
    ("net.ipv4.tcp_fin_timeout", Some("60")),
    ("net.ipv4.tcp_slow_start_after_idle", Some("1")),
    ("net.core.rmem_default", Some("212992")),
    ("net.core.rmem_max", Some("4194304")),
    ("net.core.wmem_default", Some("212992")),
    ("net.core.wmem_max", Some("4194304")),
    ("net.ipv4.tcp_rmem", Some("4096\t131072\t33554432")),
    ("net.ipv4.tcp_wmem", Some("4096\t16384\t4194304")),
    ("net.core.busy_read", Some("0")),
    ("net.core.busy_poll", None),
    ("fs.nr_open", Some("1048576")),
    ("fs.file-max", Some("9223372036854775807")),
];

/// A fake /proc/sys and a state directory, removed on drop.
struct Fake {
    dir: PathBuf,
}

impl Fake {
    fn new(name: &str) -> Fake {
        let dir =
            std::env::temp_dir().join(format!("scripts-sysctl-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fake = Fake { dir };
        for (key, value) in TREE {
            if let Some(v) = value {
                let path = fake.path(key);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, format!("{v}\n")).unwrap();
            }
        }
        // A sibling the profiles do not name: apply and revert must leave it alone.
        std::fs::write(fake.root().join("net/core/optmem_max"), "131072\n").unwrap();
        fake
    }

    fn root(&self) -> PathBuf {
        self.dir.join("sys")
    }

    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root().join(key.replace('.', "/"))
    }

    fn read(&self, key: &str) -> String {
        std::fs::read_to_string(self.path(key)).unwrap()
    }

    /// Every file of the tree and its bytes.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.insert(p.clone(), std::fs::read(&p).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.root(), &mut out);
        out
    }

    /// Run `script` (relative to the repository) with `args` as `uid`.
    fn run(&self, uid: u32, script: &str, args: &[&str]) -> Output {
        self.run_env(uid, script, args, &[])
    }

    fn run_env(&self, uid: u32, script: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(repo().join(script));
        cmd.args(args)
            .env("SYSCTL_ROOT", self.root())
            .env("SYSCTL_STATE_DIR", self.state())
            .env("SYSCTL_CHECK_UID", uid.to_string())
            .env_remove("PROFILE_A")
            .env_remove("PROFILE_B")
            .envs(env.iter().copied());
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot run {script}: {e}"))
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a plan line says about `key`: the words after the key, whitespace collapsed.
fn plan_line(stdout: &str, key: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .unwrap_or_else(|| panic!("no line for {key}:\n{stdout}"));
    line.split_whitespace()
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Exit status 2 (or `code`) and exactly one line on stderr, an error containing `needle`.
fn assert_one_line_error(out: &Output, code: i32, needle: &str) {
    let stderr = tests::text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(needle), "{needle:?} not in: {stderr}");
}

const APPLY: &str = "scripts/sysctl/apply.sh";
const REVERT: &str = "scripts/sysctl/revert.sh";
const DRY_RUN: &str = "scripts/sysctl/dry-run.sh";
const TUNE: &str = "scripts/tune-experiment.sh";

#[test]
fn dry_run_prints_each_change_and_writes_nothing() {
    let fake = Fake::new("dry-run");
    let before = fake.snapshot();
    // A dry run only reads: any user may run it.
    let out = fake.run(1000, DRY_RUN, &["high-throughput", "busy-poll"]);
    let stdout = tests::text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", tests::text(&out.stderr));
    for (key, says) in [
        ("net.core.somaxconn", "4096 -> 65535"),
        (
            "net.ipv4.ip_local_port_range",
            "32768 60999 -> 10240 65535 (set on purpose: a wider range: its lower bound goes down)",
        ),
        // A value already above the profile's stays: a tuning profile only raises.
        (
            "net.ipv4.tcp_rmem",
            "4096 131072 33554432 (unchanged: already above 4096 131072 16777216)",
        ),
        (
            "net.ipv4.tcp_wmem",
            "4096 16384 4194304 -> 4096 65536 16777216",
        ),
        ("net.core.rmem_default", "212992 (unchanged)"),
        ("fs.nr_open", "1048576 -> 2097152"),
        // `>=` never lowers a value, however long.
        (
            "fs.file-max",
            "9223372036854775807 (unchanged: already >= 4194304)",
        ),
        // busy-poll, given last, overrides nothing here and adds its keys.
        ("net.core.busy_read", "0 -> 50"),
    ] {
        assert_eq!(plan_line(&stdout, key), says, "{stdout}");
    }
    assert!(
        plan_line(&stdout, "net.core.busy_poll").starts_with("skipped: not on this kernel"),
        "{stdout}"
    );
    assert!(
        plan_line(&stdout, "rlimit.nofile").starts_with("1048576 (per process, not a sysctl"),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().last(),
        Some("12 would change, 4 unchanged, 1 skipped"),
        "{stdout}"
    );
    assert_eq!(fake.snapshot(), before, "a dry run wrote");
    assert!(!fake.state().exists(), "a dry run saved state");
}

#[test]
fn a_profile_raises_field_by_field_and_lowers_only_what_it_marks_with_a_reason() {
    let fake = Fake::new("raise-only");
    std::fs::write(fake.path("net.ipv4.tcp_wmem"), "4096\t16384\t33554432\n").unwrap();
    let profile = fake.dir.join("p.conf");
    std::fs::write(
        &profile,
        "net.ipv4.tcp_wmem = 4096 65536 16777216\n\
         net.core.somaxconn = 1024\n\
         net.ipv4.tcp_fin_timeout = 15 ! shorter FIN_WAIT_2\n",
    )
    .unwrap();
    let p = profile.to_str().unwrap();
    let out = fake.run(1000, DRY_RUN, &[p]);
    let stdout = tests::text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", tests::text(&out.stderr));
    for (key, says) in [
        (
            "net.ipv4.tcp_wmem",
            "4096 16384 33554432 -> 4096 65536 33554432 (fields already above 4096 65536 16777216 kept)",
        ),
        ("net.core.somaxconn", "4096 (unchanged: already above 1024)"),
        ("net.ipv4.tcp_fin_timeout", "60 -> 15 (set on purpose: shorter FIN_WAIT_2)"),
    ] {
        assert_eq!(plan_line(&stdout, key), says, "{stdout}");
    }
    let out = fake.run(0, APPLY, &[p]);
    assert!(out.status.success(), "{}", tests::text(&out.stderr));
    assert_eq!(fake.read("net.ipv4.tcp_wmem"), "4096 65536 33554432\n");
    assert_eq!(fake.read("net.core.somaxconn"), "4096\n");
    assert_eq!(fake.read("net.ipv4.tcp_fin_timeout"), "15\n");
    // A mark without its reason is refused.
    std::fs::write(&profile, "net.ipv4.tcp_fin_timeout = 15 !\n").unwrap();
    let out = fake.run(1000, DRY_RUN, &[p]);
    assert_one_line_error(&out, 2, "a value set on purpose is 'key = value ! reason'");
}

#[test]
fn apply_then_revert_restores_every_value_exactly() {
    let fake = Fake::new("round-trip");
    let before = fake.snapshot();

    // Layered, as tune-experiment.sh does it: A, then B over it.
    let out = fake.run(0, APPLY, &["baseline"]);
    assert!(out.status.success(), "{}", tests::text(&out.stderr));
    assert_eq!(fake.read("net.core.rmem_max"), "212992\n");
    assert_eq!(fake.read("net.ipv4.tcp_rmem"), "4096 131072 6291456\n");
    let out = fake.run(0, APPLY, &["high-throughput", "busy-poll"]);
    let stdout = tests::text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", tests::text(&out.stderr));
    assert_eq!(
        plan_line(&stdout, "net.core.rmem_max"),
        "212992 -> 16777216"
    );
    for (key, now) in [
        ("net.core.somaxconn", "65535\n"),
        ("net.ipv4.ip_local_port_range", "10240 65535\n"),
        ("net.ipv4.tcp_tw_reuse", "1\n"),
        ("net.core.rmem_max", "16777216\n"),
        ("net.ipv4.tcp_wmem", "4096 65536 16777216\n"),
        ("net.core.busy_read", "50\n"),
        ("fs.nr_open", "2097152\n"),
        ("fs.file-max", "9223372036854775807\n"),
    ] {
        assert_eq!(fake.read(key), now, "{key}");
    }
    assert!(
        !fake.path("net.core.busy_poll").exists(),
        "a missing sysctl was created"
    );
    assert!(fake.state().join("saved").is_file());

    // One revert goes back to before the first apply, byte for byte (tabs included).
    let out = fake.run(0, REVERT, &[]);
    assert!(out.status.success(), "{}", tests::text(&out.stderr));
    assert_eq!(fake.snapshot(), before);
    assert!(
        !fake.state().join("saved").exists(),
        "saved values kept after a revert"
    );

    let out = fake.run(0, REVERT, &[]);
    assert_one_line_error(&out, 1, "nothing to revert");
    assert_eq!(fake.snapshot(), before);
}

#[test]
fn a_write_the_kernel_refuses_fails_the_apply_and_revert_keeps_the_saved_values() {
    let fake = Fake::new("refused-write");
    let before = fake.snapshot();
    // A sysctl file that refuses every write, even root's: a read-only one of the real kernel.
    let somaxconn = fake.path("net.core.somaxconn");
    std::fs::remove_file(&somaxconn).unwrap();
    std::os::unix::fs::symlink("/proc/sys/kernel/osrelease", &somaxconn).unwrap();

    let out = fake.run(0, APPLY, &["high-throughput"]);
    let stderr = tests::text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: net.core.somaxconn: cannot write '65535'"),
        "{stderr}"
    );
    assert!(stderr.contains("revert.sh restores all"), "{stderr}");
    // The others were written.
    assert_eq!(fake.read("net.ipv4.tcp_fin_timeout"), "15\n");

    // Restoring the refused one fails too: the saved values stay for another try.
    let out = fake.run(0, REVERT, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", tests::text(&out.stderr));
    assert!(
        tests::text(&out.stderr).contains("values kept in"),
        "{}",
        tests::text(&out.stderr)
    );
    assert!(fake.state().join("saved").is_file());

    // Once the file takes writes again, the revert completes.
    std::fs::remove_file(&somaxconn).unwrap();
    std::fs::write(&somaxconn, "4096\n").unwrap();
    let out = fake.run(0, REVERT, &[]);
    assert!(out.status.success(), "{}", tests::text(&out.stderr));
    let mut after = fake.snapshot();
    // somaxconn gets back what the link read when the apply saved it: the kernel's release.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(
        tests::text(&after.remove(&somaxconn).unwrap()).trim(),
        release.trim()
    );
    let mut before = before;
    before.remove(&somaxconn);
    assert_eq!(after, before);
}

#[test]
fn apply_revert_and_the_experiment_refuse_to_run_without_root() {
    let fake = Fake::new("not-root");
    let before = fake.snapshot();
    for (script, args) in [
        (APPLY, &["high-throughput"][..]),
        (REVERT, &[][..]),
        (TUNE, &[][..]),
    ] {
        let out = fake.run(1000, script, args);
        assert_one_line_error(&out, 1, "needs root (running as uid 1000)");
        assert_eq!(fake.snapshot(), before, "{script} wrote");
        assert!(!fake.state().exists(), "{script} saved state");
    }

    // Saved values wait for root: a user's revert leaves them.
    assert!(fake.run(0, APPLY, &["high-throughput"]).status.success());
    let out = fake.run(1000, REVERT, &[]);
    assert_one_line_error(&out, 1, "needs root");
    assert!(fake.state().join("saved").is_file());
    assert!(fake.run(0, REVERT, &[]).status.success());
    assert_eq!(fake.snapshot(), before);
}

#[test]
fn a_bad_profile_is_one_line_and_exit_2() {
    let fake = Fake::new("bad-profile");
    let before = fake.snapshot();
    for script in [DRY_RUN, APPLY] {
        let out = fake.run(0, script, &["high-troughput"]);
        assert_one_line_error(
            &out,
            2,
            "no profile 'high-troughput' (profiles: baseline, busy-poll, high-throughput",
        );
        let out = fake.run(0, script, &[]);
        assert_one_line_error(&out, 2, "no profile given");
    }
    let out = fake.run_env(0, TUNE, &[], &[("PROFILE_B", "high-troughput")]);
    assert_one_line_error(&out, 2, "no profile 'high-troughput'");

    // A profile file of one's own: a broken line is named with its file and line number.
    let file = fake.dir.join("mine.conf");
    for (content, needle) in [
        (
            "# mine\nnet.core.somaxconn 8192\n",
            "mine.conf:2: expected 'key = value' or 'key >= number', got: net.core.somaxconn 8192",
        ),
        (
            "fs.file-max >= lots\n",
            "mine.conf:1: fs.file-max needs a whole number, got: lots",
        ),
        (
            "rlimit.nproc = 10\n",
            "mine.conf:1: unknown limit rlimit.nproc",
        ),
    ] {
        std::fs::write(&file, content).unwrap();
        let out = fake.run(0, APPLY, &[file.to_str().unwrap()]);
        assert_one_line_error(&out, 2, needle);
    }
    assert_eq!(fake.snapshot(), before);
    assert!(!fake.state().exists());

    // And one that parses is applied like a named one.
    std::fs::write(&file, "net.core.somaxconn = 8192 # mine\n").unwrap();
    assert!(fake
        .run(0, APPLY, &[file.to_str().unwrap()])
        .status
        .success());
    assert_eq!(fake.read("net.core.somaxconn"), "8192\n");
    assert!(fake.run(0, REVERT, &[]).status.success());
    assert_eq!(fake.snapshot(), before);
}

#[test]
fn the_experiment_refuses_to_start_over_values_not_reverted() {
    let fake = Fake::new("pending");
    assert!(fake.run(0, APPLY, &["baseline"]).status.success());
    let out = fake.run(0, TUNE, &[]);
    assert_one_line_error(&out, 1, "an earlier apply is not reverted");
    assert!(
        fake.state().join("saved").is_file(),
        "the saved values were lost"
    );
    assert!(fake.run(0, REVERT, &[]).status.success());
}

/// Every key the profiles set, without the per-process limits.
fn profile_keys() -> Vec<String> {
    let mut keys = Vec::new();
    for e in std::fs::read_dir(repo().join("scripts/sysctl/profiles")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for line in text.lines() {
            let line = line.split('#').next().unwrap().trim();
            if let Some((key, _)) = line.split_once('=') {
                let key = key.trim_end_matches('>').trim();
                if !key.starts_with("rlimit.") && !keys.iter().any(|k| k == key) {
                    keys.push(key.to_string());
                }
            }
        }
    }
    keys
}

#[test]
fn the_loader_records_every_sysctl_the_profiles_set() {
    let keys = profile_keys();
    assert!(keys.len() >= 15, "{keys:?}");
    for key in keys {
        assert!(
            loader::sysinfo::SYSCTLS.contains(&key.as_str()),
            "{key} is set by a profile but not recorded in the loader's JSON"
        );
    }
}

/// `loader compare` against two built-in origins, its --json written to `path`.
fn compare_json(path: &Path) -> Value {
    let a = tests::origin();
    let b = tests::origin();
    let pid = std::process::id().to_string();
    let out = Command::new(tests::bin("loader"))
        .args(["compare", &a.url("/"), &b.url("/"), "-n", "50", "-c", "2"])
        .args(["--rounds", "3", "--watch-pid", &pid, "-q", "--json"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", tests::text(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_table_compares_two_runs_and_marks_the_sysctls_that_differ() {
    let fake = Fake::new("table");
    std::fs::create_dir_all(&fake.dir).unwrap();
    let (a, b) = (fake.dir.join("a.json"), fake.dir.join("b.json"));
    let mut doc = compare_json(&a);
    // B: the same run, as if under another profile.
    doc["context"]["sysctls"]["net.core.somaxconn"] = "65535".into();
    doc["context"]["open_files_limit"] = serde_json::json!({ "soft": 1048576, "hard": 1048576 });
    std::fs::write(&b, doc.to_string()).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());

    let out = fake.run(
        1000,
        TUNE,
        &["--table", a, b, "baseline", "high-throughput"],
    );
    let stdout = tests::text(&out.stdout);
    if Command::new("jq").arg("--version").output().is_err() {
        assert_one_line_error(&out, 1, "jq is needed for the table");
        return;
    }
    assert!(out.status.success(), "{stdout}{}", tests::text(&out.stderr));
    let row = |name: &str| -> Vec<String> {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name}  ")))
            .unwrap_or_else(|| panic!("no row {name:?}:\n{stdout}"));
        line[name.len()..]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect()
    };
    assert_eq!(
        row(""),
        ["under baseline", "under high-throughput"],
        "{stdout}"
    );
    assert_eq!(row("failed requests (sum)"), ["0", "0"]);
    for name in ["direct req/s", "proxied req/s", "proxy CPU user (us/req)"] {
        let cells = row(name);
        assert_eq!(cells.len(), 2, "{name}: {stdout}");
        assert!(cells.iter().all(|c| c.contains('(')), "{name}: {stdout}");
    }
    let somaxconn = doc["context"]["sysctls"]["net.core.somaxconn"].clone();
    assert_eq!(somaxconn, "65535");
    let before: Value = serde_json::from_str(&std::fs::read_to_string(a).unwrap()).unwrap();
    let mine = before["context"]["sysctls"]["net.core.somaxconn"]
        .as_str()
        .unwrap_or("absent")
        .to_string();
    assert_eq!(row("net.core.somaxconn *"), [mine, "65535".to_string()]);
    assert_eq!(row("fs.nr_open").len(), 2, "{stdout}");
    assert_eq!(
        row("open files (soft/hard) *")[1],
        "1048576/1048576",
        "{stdout}"
    );
    assert_eq!(row("kernel").len(), 2, "{stdout}");

    // Not a compare document: said so.
    let out = fake.run(1000, TUNE, &["--table", a, "/etc/hostname"]);
    assert_one_line_error(
        &out,
        1,
        "/etc/hostname is not a 'loader compare --json' document",
    );
}
