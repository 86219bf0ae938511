//! Helpers for the reload and takeover tests: config files that change under a running
//! `proxy`, and our loader at a fixed rate whose JSON report must show no failure at all.

use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A directory of its own for one test's files, removed when dropped.
pub struct Scratch(crate::TempDir);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        Scratch(crate::temp_dir(name))
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

/// A config file: listen on `listen`, group `app` over `upstreams` (1 s idle timeout for
/// pooled connections is not set: the defaults apply), sub-second shutdown.
pub fn config_text(listen: &str, upstreams: &[SocketAddr], extra: &str) -> String {
    let servers: Vec<String> = upstreams.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "[[listen]]\naddr = \"{listen}\"\n\n[upstream.app]\nservers = [{}]\n\n\
         [timeouts]\nshutdown = \"800ms\"\n{extra}",
        servers.join(", ")
    )
}

/// Write `text` to `path` whole: a new file renamed over the old one, so a reload never reads
/// half a file.
pub fn write_config(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write config");
    std::fs::rename(&tmp, path).expect("rename config");
}

/// Our loader: `conns` keep-alive connections at `rate` req/s for `duration`, its JSON report
/// to `json`.
pub fn start_loader(url: &str, rate: u32, conns: u32, duration: &str, json: &Path) -> Child {
    Command::new(crate::bin("loader"))
        .args(["-q", "--threads", "1", "--no-pin", "--timeout", "5s"])
        .args(["-c", &conns.to_string(), "--rate", &rate.to_string()])
        .args(["-d", duration, "--json"])
        .arg(json)
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn loader")
}

/// Wait for the loader and read its report; a panic with its stderr if it failed.
pub fn loader_report(child: Child, json: &Path) -> Value {
    let out = child.wait_with_output().expect("loader wait");
    let text = std::fs::read_to_string(json).unwrap_or_else(|e| {
        panic!(
            "no loader report ({e}); status {:?}; stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(&text).expect("loader JSON")
}

/// No failed request of any kind, no non-2xx response, no write error, and `min` or more
/// completed requests.
pub fn assert_no_failure(report: &Value, min: u64) {
    let t = &report["totals"];
    let f = &t["failures"];
    let show = || serde_json::to_string_pretty(t).unwrap();
    for k in [
        "connect",
        "read",
        "write",
        "timeout",
        "parse",
        "length",
        "unanswered",
    ] {
        assert_eq!(f[k], 0, "failures.{k}: {}", show());
    }
    assert_eq!(t["failed"], 0, "{}", show());
    assert_eq!(t["non_2xx"], 0, "{}", show());
    assert_eq!(t["write_errors"], 0, "{}", show());
    let done = report["complete_requests"].as_u64().unwrap();
    assert!(done >= min, "only {done} requests completed: {}", show());
}
