//! The man pages (`docs/man/*.1`) are made from the clap definitions, the one source of the
//! flags: [`check_man_page`] fails when a page is stale and, with `UPDATE_MAN=1`, writes it.
//! The shell completions (`--completions SHELL`) come from the same definitions at run time:
//! [`check_completions`] runs the binary for each shell. [`assert_hardened_pod`]: what every
//! pod of scripts/k8s/ must have.

use std::path::{Path, PathBuf};

/// Set to any value to rewrite the man pages instead of failing on a stale one.
pub const UPDATE_ENV: &str = "UPDATE_MAN";

/// `docs/man/NAME.1`.
pub fn man_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../docs/man/{name}.1"))
}

/// The page clap_mangen renders for `cmd` (its subcommands listed in a section of it).
pub fn render(cmd: clap::Command) -> String {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .expect("render into memory");
    String::from_utf8(out).expect("roff is UTF-8")
}

/// The page in the tree equals the one the definitions make, or the test fails naming how
/// to regenerate it (`UPDATE_MAN=1`).
pub fn check_man_page(cmd: clap::Command) {
    let name = cmd.get_name().to_string();
    let path = man_path(&name);
    let want = render(cmd);
    if std::env::var_os(UPDATE_ENV).is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).expect("docs/man");
        std::fs::write(&path, &want).expect("write the man page");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale (or missing): the clap definitions changed. Regenerate it with \
         `{UPDATE_ENV}=1 cargo test -p tests --test {name} man_page`",
        path.display()
    );
}

/// `BIN --completions SHELL` for bash, zsh and fish: exit 0, a script naming `flags` (long
/// names without their dashes: fish writes `-l name`); bash's
/// and zsh's parse (`-n`) where those shells are installed.
pub fn check_completions(bin: &str, flags: &[&str]) {
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(crate::bin(bin))
            .args(["--completions", shell])
            .output()
            .expect("run the binary");
        assert!(out.status.success(), "{bin} {shell}: {out:?}");
        let script = String::from_utf8(out.stdout).expect("UTF-8 script");
        for f in flags {
            assert!(script.contains(f), "{bin} {shell}: no {f} in the script");
        }
        let file = crate::TempFile::new("completions", shell);
        std::fs::write(&file, &script).expect("write the script");
        if let Ok(o) = std::process::Command::new(shell)
            .arg("-n")
            .arg(&file)
            .output()
        {
            assert!(o.status.success(), "{bin} {shell} -n: {o:?}");
        }
    }
}

/// A pod spec (YAML as JSON values) as scripts/k8s/ ships them: runs as non-root with
/// RuntimeDefault seccomp, each container with a read-only root, no privilege escalation, every
/// capability dropped, and Guaranteed QoS (requests equal to limits for CPU and memory, whole
/// CPUs, so the static CPU manager can give exclusive cores).
pub fn assert_hardened_pod(name: &str, pod: &serde_json::Value) {
    let sc = &pod["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true, "{name}: runAsNonRoot");
    assert_eq!(
        sc["seccompProfile"]["type"], "RuntimeDefault",
        "{name}: seccomp"
    );
    let containers = pod["containers"].as_array().expect("containers");
    for c in containers {
        let csc = &c["securityContext"];
        assert_eq!(
            csc["readOnlyRootFilesystem"], true,
            "{name}: read-only root"
        );
        assert_eq!(csc["allowPrivilegeEscalation"], false, "{name}: escalation");
        assert_eq!(
            csc["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{name}: caps"
        );
        let r = &c["resources"];
        for what in ["cpu", "memory"] {
            assert!(r["limits"][what].is_string(), "{name}: no {what} limit");
            assert_eq!(
                r["requests"][what], r["limits"][what],
                "{name}: {what} requests != limits"
            );
        }
        let cpu = r["limits"]["cpu"].as_str().unwrap();
        assert!(cpu.parse::<u32>().is_ok(), "{name}: whole CPUs, not {cpu}");
    }
}
