//! Helpers shared by the end-to-end tests in `tests/tests/`.
//!
//! Most tests run the proxy, the loader and the origin in-process through their libraries.
//! Tests that need the process boundary (exit codes, signals, resident memory) spawn the built
//! binaries: [`bin`] builds them once per test process with a nested `cargo build` (cargo does
//! not hold its build lock while tests run) and returns the path.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Path of a workspace binary (`"proxy"` or `"loader"`), built on first use with the same
/// profile and target directory as the running tests.
pub fn bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let mut cmd = std::process::Command::new(env!("CARGO"));
        cmd.args(["build", "-q", "-p", "proxy", "-p", "loader", "--bins"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir().file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    if let Err(e) = built {
        panic!("building the binaries failed:\n{e}");
    }
    profile_dir().join(name)
}

/// `target/<profile>`: the test executable lives in `target/<profile>/deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("test executable is under target/<profile>/deps")
        .to_path_buf()
}
