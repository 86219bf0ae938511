//! Helpers for the route-action tests (`return`, `static`, hosts): a one-worker proxy from
//! config text, and strict reads (a timeout is never a close; every response is parsed).
//! The config text's fixture ([`config_parts`]) serves the other in-process tests too.

use crate::inproc::Proxy;
use crate::raw::{Client, Response, WAIT};

/// `[[listen]]` on 127.0.0.1:0, one unpinned worker, short shutdown, then `rest`.
pub fn config_text(rest: &str) -> String {
    config_parts(ONE_WORKER, rest)
}

/// What a test proxy's config text has besides `[[listen]]` on 127.0.0.1:0 and its tables
/// that follow: `..ONE_WORKER` for the rest.
#[derive(Clone, Copy, Debug)]
pub struct Parts<'a> {
    /// Keys before every table (`access_log = ...`, from [`access_log`]).
    pub top: &'a str,
    /// An `[admin]` listener on 127.0.0.1:0.
    pub admin: bool,
    /// Unpinned workers.
    pub workers: usize,
    /// `[runtime]`'s other lines (`splice = false`).
    pub runtime: &'a str,
    /// `[timeouts]`'s lines (empty: no table, every default).
    pub timeouts: &'a str,
}

/// One unpinned worker, a 1 s shutdown, no admin listener.
pub const ONE_WORKER: Parts<'static> = Parts {
    top: "",
    admin: false,
    workers: 1,
    runtime: "",
    timeouts: "shutdown = \"1s\"\n",
};

/// One unpinned worker and an admin listener, every timeout its default.
pub const WITH_ADMIN: Parts<'static> = Parts {
    admin: true,
    timeouts: "",
    ..ONE_WORKER
};

/// `p`'s config text, then `rest` (more tables).
pub fn config_parts(p: Parts, rest: &str) -> String {
    let admin = if p.admin {
        "[admin]\naddr = \"127.0.0.1:0\"\n"
    } else {
        ""
    };
    let timeouts = if p.timeouts.is_empty() {
        String::new()
    } else {
        format!("[timeouts]\n{}", p.timeouts)
    };
    format!(
        "{}\n[[listen]]\naddr = \"127.0.0.1:0\"\n{admin}\
         [runtime]\nworkers = {}\npin = false\n{}{timeouts}{rest}",
        p.top, p.workers, p.runtime
    )
}

/// The `access_log` key for a log at `path` in `format`, for [`Parts::top`].
pub fn access_log(path: &std::path::Path, format: &str) -> String {
    format!(
        "access_log = {{ path = \"{}\", format = \"{format}\" }}\n",
        path.display()
    )
}

/// Start a proxy from config text (named `file` for relative roots and messages).
pub fn start_named(file: &str, rest: &str) -> (Proxy, proxy::config::Config) {
    let cfg = proxy::config::from_toml(file, &config_text(rest)).expect("valid config");
    let kept = cfg.clone();
    (Proxy::start(cfg), kept)
}

pub fn start(rest: &str) -> Proxy {
    start_named("test.toml", rest).0
}

/// Start from a command line ([`crate::proxy_config`]: `--listen 127.0.0.1:0 --workers 1
/// --no-pin` added).
pub fn start_args(extra: &[&str]) -> Proxy {
    Proxy::start(crate::proxy_config(&[], extra))
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
