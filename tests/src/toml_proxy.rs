//! Helpers for the route-action tests (`return`, `static`, hosts): a one-worker proxy from
//! config text, and strict reads (a timeout is never a close; every response is parsed).

use crate::inproc::Proxy;
use crate::raw::{Client, Response, WAIT};

/// `[[listen]]` on 127.0.0.1:0, one unpinned worker, short shutdown, then `rest`.
pub fn config_text(rest: &str) -> String {
    format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 1\npin = false\n\
         [timeouts]\nshutdown = \"1s\"\n{rest}"
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
