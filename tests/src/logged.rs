//! A proxy started in-process with a JSON access log and an admin listener, for tests of what
//! each request leaves behind: its log line and the counters it moved, side by side. One
//! worker: the lines come in the order the requests ended.

use crate::scrape::{scrape, total};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The proxy, its log file and the lines a test has taken from it so far.
pub struct Logged {
    pub addr: SocketAddr,
    admin: SocketAddr,
    log: PathBuf,
    running: Option<proxy::Running>,
    taken: usize,
    _dir: crate::TempDir,
}

/// What a client's doing left: the new log lines, and each sample that moved, by how much.
pub struct Left {
    pub lines: Vec<serde_json::Value>,
    pub moved: HashMap<String, f64>,
}

/// The lines and the counters that moved (not the histograms' series, nor the process's).
impl std::fmt::Debug for Left {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut moved: Vec<_> = self
            .moved
            .iter()
            .filter(|(k, _)| k.ends_with("_total") || k.contains("_total{"))
            .collect();
        moved.sort_by(|a, b| a.0.cmp(b.0));
        f.debug_struct("Left")
            .field("lines", &self.lines)
            .field("moved", &moved)
            .finish()
    }
}

impl Left {
    /// How much `key` (`name{labels}`) moved; 0 when it did not.
    pub fn moved(&self, key: &str) -> f64 {
        self.moved.get(key).copied().unwrap_or(0.0)
    }
}

impl Logged {
    /// `crate::proxy_config(ups, extra)` with a JSON access log and an admin listener.
    pub fn start(ups: &[SocketAddr], extra: &[&str]) -> Logged {
        let dir = crate::temp_dir("logged");
        let log = dir.join("access.log");
        let path = log.to_str().expect("a UTF-8 temp path").to_string();
        let mut args = vec![
            "--admin",
            "127.0.0.1:0",
            "--access-log",
            &path,
            "--access-log-format",
            "json",
        ];
        args.extend_from_slice(extra);
        let running = proxy::start(crate::proxy_config(ups, &args)).expect("proxy starts");
        Logged {
            addr: running.listen_addrs()[0],
            admin: running.admin_addr().expect("an admin listener"),
            log,
            running: Some(running),
            taken: 0,
            _dir: dir,
        }
    }

    /// Run `client`, then wait for `n` more log lines (the 500 ms flush tick writes them) and
    /// for `proxy_requests_total` to have moved by `n`: what it left. Fails the test when
    /// they do not come within `raw::WAIT`.
    pub fn after(&mut self, n: usize, client: impl FnOnce(SocketAddr)) -> Left {
        let before = scrape(self.admin);
        client(self.addr);
        let want = total(&before, "proxy_requests_total") + n as f64;
        let mut after = before.clone();
        let counted = crate::eventually(crate::raw::WAIT, || {
            after = scrape(self.admin);
            total(&after, "proxy_requests_total") >= want
        });
        let mut lines = Vec::new();
        let logged = crate::eventually(crate::raw::WAIT, || {
            lines = self.lines_from(self.taken);
            lines.len() >= n
        });
        assert!(
            counted && logged,
            "{n} request(s) expected: counted {}, logged {lines:?}",
            total(&after, "proxy_requests_total") - total(&before, "proxy_requests_total"),
        );
        self.taken += lines.len();
        let moved = after
            .iter()
            .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
            .filter(|(_, d)| *d != 0.0)
            .collect();
        Left { lines, moved }
    }

    /// The log's lines from the `from`th on, parsed.
    fn lines_from(&self, from: usize) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // Whole lines only: a write may be under way.
        let whole = text.rfind('\n').map_or(0, |end| end + 1);
        text[..whole]
            .lines()
            .skip(from)
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    pub fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().expect("clean shutdown");
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            let _ = r.shutdown();
        }
    }
}
