//! Helpers for the response cache's end-to-end tests: a proxy with a cached route in front of
//! given origins, one request on a new raw connection, and the `X-Cache` a response carries.

use proxy::config::cache::CacheEntry;
use proxy::config::Action;
use std::net::SocketAddr;
use tests::raw::{self, Client, Response};

/// A proxy with `--cache 1MiB` (and the flags `extra`) in front of `ups`, its cache settings
/// changed by `edit`.
pub fn proxy(
    ups: &[SocketAddr],
    extra: &[&str],
    edit: impl FnOnce(&mut CacheEntry),
) -> (proxy::Running, SocketAddr) {
    let mut args = vec!["--cache", "1MiB"];
    args.extend_from_slice(extra);
    let mut cfg = tests::proxy_config(ups, &args);
    match &mut cfg.routes[proxy::config::RouteId::new(0)].action {
        Action::Proxy { cache: Some(c), .. } => edit(std::sync::Arc::make_mut(c)),
        other => panic!("--cache made no cached route: {other:?}"),
    }
    let running = proxy::start(cfg).expect("proxy starts");
    let addr = running.listen_addrs()[0];
    (running, addr)
}

/// `method path` with the head lines `extra` (each ending in CRLF) on a new connection; the
/// one complete response.
pub fn request(addr: SocketAddr, method: &str, path: &str, extra: &str) -> Response {
    let mut c = Client::connect(addr);
    c.send(format!("{method} {path} HTTP/1.1\r\nHost: cache.test\r\n{extra}\r\n").as_bytes())
        .expect("send");
    c.response_to(method == "HEAD", raw::WAIT)
        .unwrap_or_else(|r| panic!("{method} {path}: no complete response: {}", raw::show(&r)))
}

pub fn x_cache(r: &Response) -> &str {
    r.header("x-cache").unwrap_or("(none)")
}

/// The first response to `method path` (with `extra`) that is not a `HIT`, asking every 10 ms:
/// the entry's lifetime has passed. The store's timing itself is unit-tested with a clock
/// given as a number (proxy/src/cache/tests.rs); this waits for the event, not a guessed
/// time. A `HIT` on every try within [`raw::WAIT`] fails the test.
pub fn first_after_expiry(addr: SocketAddr, method: &str, path: &str, extra: &str) -> Response {
    let deadline = std::time::Instant::now() + raw::WAIT;
    loop {
        let r = request(addr, method, path, extra);
        if x_cache(&r) != "HIT" {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{method} {path}: still a HIT after {:?}",
            raw::WAIT
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
