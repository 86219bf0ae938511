//! `PROXY_COMMIT` for `proxy_build_info{commit}`: taken as it is when set at build time (a
//! build from a tarball or in a container without .git), else `git rev-parse --short=12 HEAD`,
//! else "unknown".

fn main() {
    println!("cargo:rerun-if-env-changed=PROXY_COMMIT");
    let commit = std::env::var("PROXY_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=PROXY_COMMIT={commit}");
}

fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let head = String::from_utf8(out.stdout).ok()?.trim().to_string();
    // Rebuilt when HEAD moves (a commit, a checkout).
    let git_path = |what: &str| {
        let out = std::process::Command::new("git")
            .args(["rev-parse", "--path-format=absolute", "--git-path", what])
            .output()
            .ok()?;
        let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (!p.is_empty()).then_some(p)
    };
    for what in ["HEAD", "refs/heads", "packed-refs"] {
        if let Some(p) = git_path(what) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    (out.status.success() && !head.is_empty()).then_some(head)
}
