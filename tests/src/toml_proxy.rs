//! Helpers for the route-action tests (`return`, `static`, hosts): a one-worker proxy from
//! config text, and strict reads (a timeout is never a close; every response is parsed).

use crate::raw::{Client, Response, WAIT};
use std::net::SocketAddr;

/// A running proxy and its address; stopped when dropped.
pub struct Running {
    pub proxy: Option<proxy::Running>,
    pub addr: SocketAddr,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(p) = self.proxy.take() {
            let _ = p.shutdown();
        }
    }
}

/// `[[listen]]` on 127.0.0.1:0, one unpinned worker, short shutdown, then `rest`.
pub fn config_text(rest: &str) -> String {
    format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 1\npin = false\n\
         [timeouts]\nshutdown = \"1s\"\n{rest}"
    )
}

/// Start a proxy from config text (named `file` for relative roots and messages).
pub fn start_named(file: &str, rest: &str) -> (Running, proxy::config::Config) {
    let cfg = proxy::config::from_toml(file, &config_text(rest)).expect("valid config");
    let kept = cfg.clone();
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    (
        Running {
            proxy: Some(p),
            addr,
        },
        kept,
    )
}

pub fn start(rest: &str) -> Running {
    start_named("test.toml", rest).0
}

/// Start from a command line (`--listen 127.0.0.1:0 --workers 1 --no-pin` added).
pub fn start_args(extra: &[&str]) -> Running {
    let mut args = vec![
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--no-pin",
    ];
    args.extend(extra);
    let cfg = proxy::cli::config_from_args(&args).expect("valid flags");
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    Running {
        proxy: Some(p),
        addr,
    }
}

/// Send `req` and read one complete response (HEAD when `head`), or fail showing what came.
pub fn ask(c: &mut Client, req: &str, head: bool) -> Response {
    c.send(req.as_bytes()).expect("request sent");
    c.response_to(head, WAIT)
        .unwrap_or_else(|r| panic!("{req:?}: no complete response: {}", show(&r)))
}

/// `GET path` with `host`, keep-alive.
pub fn get(c: &mut Client, host: &str, path: &str) -> Response {
    ask(
        c,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        false,
    )
}

// One implementation in `crate::raw`, the names these tests use.
pub use crate::raw::{assert_closed, show};

pub fn body(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}
