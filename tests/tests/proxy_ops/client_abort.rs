//! A client that goes away while its request waits for a stalled origin (nginx's 499): the
//! proxy notices while waiting (a FIN, even a half-close after the whole request, or a reset),
//! closes the upstream connection (the origin sees it close; nothing goes back to the pool),
//! and counts and logs the request as 499. Bytes the client pipelines meanwhile are not a
//! disconnect: both requests are answered. Each case on the connection's first request (read
//! with a plain receive, watched after a short delay) and on a keep-alive one (read through
//! a multishot receive, watched from the start, where the driver has them).

use shared::origin::{Origin, OriginConfig};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use tests::raw::{self, Client, End, WAIT};
use tests::reload::Scratch;
use tests::toml_proxy::{access_log, config_parts, Parts, WITH_ADMIN};

fn config(origin: SocketAddr, log: &Path) -> proxy::config::Config {
    let rest = format!(
        r#"
[upstream.app]
servers = ["{origin}"]

[[route]]
path = "/"
upstream = "app"
"#
    );
    with_log("abort.toml", log, &rest)
}

/// `rest` after the one-worker top with an admin listener and a combined access log at `log`.
fn with_log(name: &str, log: &Path, rest: &str) -> proxy::config::Config {
    let top = access_log(log, "combined");
    let text = config_parts(
        Parts {
            top: &top,
            ..WITH_ADMIN
        },
        rest,
    );
    proxy::config::from_toml(name, &text).expect("config")
}

fn scrape(admin: SocketAddr) -> HashMap<String, f64> {
    let r = raw::exchange(admin, b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", WAIT);
    assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
    let resp = r.responses().into_iter().next().expect("a response");
    String::from_utf8_lossy(&resp.body)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("sample line");
            (k.to_string(), v.parse().expect("sample value"))
        })
        .collect()
}

fn sample(m: &HashMap<String, f64>, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(0.0)
}

/// How the client leaves.
#[derive(Clone, Copy, Debug)]
enum Leave {
    /// shutdown(SHUT_WR): a half-close after the whole request (nginx: an abort).
    HalfClose,
    /// close(2) with SO_LINGER 0: a reset.
    Reset,
}

fn leave(c: Client, how: Leave) {
    match how {
        Leave::HalfClose => {
            c.stream.shutdown(std::net::Shutdown::Write).unwrap();
            // Kept open (reading) until the proxy closed: the proxy noticed the FIN alone.
            let mut c = c;
            raw::assert_closed_within(&mut c, WAIT, "the aborted client");
        }
        Leave::Reset => {
            let s: socket2::Socket = c.stream.into();
            s.set_linger(Some(std::time::Duration::ZERO)).unwrap();
            drop(s);
        }
    }
}

const STALLED: &[u8] = b"GET /slow?hang=1 HTTP/1.1\r\nHost: t\r\n\r\n";
/// A request whose body is streamed to the origin (chunked), then waits.
const STALLED_UPLOAD: &[u8] = b"POST /slow?hang=1 HTTP/1.1\r\nHost: t\r\n\
    Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";

/// `keep_alive`: one request answered on the connection first.
fn aborted_while_waiting(keep_alive: bool, how: Leave) {
    aborted_with(keep_alive, how, STALLED)
}

/// The client sends `stalled` (a request the origin never answers), then leaves.
fn aborted_with(keep_alive: bool, how: Leave, stalled: &[u8]) {
    let o = Origin::start(OriginConfig::default()).expect("origin");
    let dir = Scratch::new("abort");
    let log = dir.path("access.log");
    let p = proxy::start(config(o.addr(), &log)).expect("proxy");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    let what = format!("keep_alive {keep_alive}, {how:?}");
    let mut c = Client::connect(addr);
    if keep_alive {
        c.send(b"GET /?size=10 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(raw::response(&mut c, &what).status, 200, "{what}");
    }
    let before = o.requests();
    c.send(stalled).unwrap();
    assert!(
        tests::eventually(WAIT, || o.requests() == before + 1),
        "{what}: the request never reached the origin"
    );
    assert_eq!(o.open_connections(), 1, "{what}");
    // The request line as the access log shows it.
    let head = String::from_utf8_lossy(stalled);
    let line = head.split(" HTTP/1.1").next().unwrap().to_string();
    leave(c, how);
    // The upstream request is abandoned: its connection closed, not pooled.
    assert!(
        tests::eventually(WAIT, || o.open_connections() == 0),
        "{what}: the origin's connection stayed open"
    );
    let m = scrape(admin);
    assert_eq!(
        sample(&m, r#"proxy_request_faults_total{kind="client_gone"}"#),
        1.0,
        "{what}: {m:?}"
    );
    assert_eq!(
        sample(&m, r#"proxy_requests_total{route="/",code="4xx"}"#),
        1.0,
        "{what}: {m:?}"
    );
    assert!(
        tests::eventually(WAIT, || std::fs::read_to_string(&log).is_ok_and(|t| t
            .lines()
            .any(|l| l.contains(&line) && l.contains("\" 499 ")))),
        "{what}: no 499 line: {:?}",
        std::fs::read_to_string(&log)
    );
    // The proxy goes on serving, and the abandoned connection was not reused.
    let mut n = Client::connect(addr);
    n.send(b"GET /?size=10 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(raw::response(&mut n, &what).status, 200, "{what}");
}

#[test]
fn first_request_half_closed_while_waiting_is_499() {
    aborted_while_waiting(false, Leave::HalfClose);
}

#[test]
fn first_request_reset_while_waiting_is_499() {
    aborted_while_waiting(false, Leave::Reset);
}

#[test]
fn keep_alive_request_half_closed_while_waiting_is_499() {
    aborted_while_waiting(true, Leave::HalfClose);
}

#[test]
fn keep_alive_request_reset_while_waiting_is_499() {
    aborted_while_waiting(true, Leave::Reset);
}

#[test]
fn streamed_body_request_half_closed_while_waiting_is_499() {
    aborted_with(false, Leave::HalfClose, STALLED_UPLOAD);
    aborted_with(true, Leave::Reset, STALLED_UPLOAD);
}

/// A second request sent while the first waits (past the watch's delay) is not a disconnect:
/// both are answered, in order.
fn pipelined_while_waiting(keep_alive: bool) {
    let o = Origin::start(OriginConfig::default()).expect("origin");
    let dir = Scratch::new("pipelined");
    let p = proxy::start(config(o.addr(), &dir.path("access.log"))).expect("proxy");
    let addr = p.listen_addrs()[0];
    let what = format!("keep_alive {keep_alive}");
    let mut c = Client::connect(addr);
    if keep_alive {
        c.send(b"GET /?size=10 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(raw::response(&mut c, &what).status, 200, "{what}");
    }
    let before = o.requests();
    c.send(b"GET /?size=5&delay=300ms HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(
        tests::eventually(WAIT, || o.requests() == before + 1),
        "{what}: the request never reached the origin"
    );
    c.send(b"GET /?size=7 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let (a, b) = (raw::response(&mut c, &what), raw::response(&mut c, &what));
    assert_eq!((a.status, a.body.len()), (200, 5), "{what}");
    assert_eq!((b.status, b.body.len()), (200, 7), "{what}");
    raw::assert_open_and_silent(&mut c, std::time::Duration::from_millis(50), &what);
    let _ = TcpStream::connect(addr);
}

#[test]
fn first_request_with_bytes_pipelined_while_waiting_is_answered() {
    pipelined_while_waiting(false);
}

#[test]
fn keep_alive_request_with_bytes_pipelined_while_waiting_is_answered() {
    pipelined_while_waiting(true);
}

/// A proxy whose `/` is cached (and `/probe` a `return`, answered by the proxy itself).
fn cached_config(origin: SocketAddr, log: &Path) -> proxy::config::Config {
    let rest = format!(
        r#"
[upstream.app]
servers = ["{origin}"]

[[route]]
path = "/probe"
return = {{ status = 200, body = "probe" }}

[[route]]
path = "/"
upstream = "app"
cache = {{ ttl = "60s" }}
"#
    );
    with_log("abort-cached.toml", log, &rest)
}

/// The log has a line for `line` (a request line) with status 499.
fn logged_499(log: &Path, line: &str) -> bool {
    std::fs::read_to_string(log)
        .is_ok_and(|t| t.lines().any(|l| l.contains(line) && l.contains("\" 499 ")))
}

/// A cache miss whose client leaves while its fetch waits for the origin's head, with nobody
/// else waiting on the fill: the fetch is abandoned as a plain request is (the origin's
/// connection closed), counted and logged 499.
#[test]
fn cache_fetch_abandoned_when_its_only_client_leaves() {
    for how in [Leave::HalfClose, Leave::Reset] {
        let o = Origin::start(OriginConfig::default()).expect("origin");
        let dir = Scratch::new("abort-cached");
        let log = dir.path("access.log");
        let p = proxy::start(cached_config(o.addr(), &log)).expect("proxy");
        let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
        let mut c = Client::connect(addr);
        c.send(b"GET /c?size=10&hang=1 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert!(
            tests::eventually(WAIT, || o.requests() == 1),
            "{how:?}: the fetch never reached the origin"
        );
        leave(c, how);
        assert!(
            tests::eventually(WAIT, || o.open_connections() == 0),
            "{how:?}: the origin's connection stayed open"
        );
        let m = scrape(admin);
        let gone = r#"proxy_request_faults_total{kind="client_gone"}"#;
        assert_eq!(sample(&m, gone), 1.0, "{how:?}: {m:?}");
        assert!(
            tests::eventually(WAIT, || logged_499(&log, "GET /c?size=10&hang=1")),
            "{how:?}: no 499 line: {:?}",
            std::fs::read_to_string(&log)
        );
        // The abandoned fill left nothing behind: the key is fetched again.
        let r = raw::exchange(
            addr,
            b"GET /c?size=10 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            WAIT,
        );
        let resp = r.responses().into_iter().next().expect("a response");
        assert_eq!(resp.status, 200, "{how:?}");
    }
}

/// A cache miss whose client leaves while its fetch waits for the origin's head, with another
/// request collapsed on the same fill: the fetch goes on for that one (collapsed forwarding,
/// one origin request), which gets the answer from the entry; the client that left is counted
/// and logged 499. Before, the fetch was abandoned and the waiting request fetched again (two
/// origin requests).
#[test]
fn cache_fetch_goes_on_for_collapsed_requests_when_its_client_leaves() {
    let o = Origin::start(OriginConfig::default()).expect("origin");
    let dir = Scratch::new("abort-collapsed");
    let log = dir.path("access.log");
    let p = proxy::start(cached_config(o.addr(), &log)).expect("proxy");
    let (addr, admin) = (p.listen_addrs()[0], p.admin_addr().expect("admin"));
    const GET: &[u8] = b"GET /c?size=10&delay=2s HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut first = Client::connect(addr);
    first.send(GET).unwrap();
    assert!(
        tests::eventually(WAIT, || o.requests() == 1),
        "the fetch never reached the origin"
    );
    let mut waiting = Client::connect(addr);
    waiting.send(GET).unwrap();
    // The proxy (one worker) answers a probe sent after the collapsed request's head: by then
    // it read that head and waits on the fill.
    let probe = raw::exchange(
        addr,
        b"GET /probe HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        WAIT,
    );
    let resp = probe
        .responses()
        .into_iter()
        .next()
        .expect("a probe response");
    assert_eq!(resp.status, 200);
    leave(first, Leave::HalfClose);
    let r = raw::response(&mut waiting, "collapsed");
    assert_eq!((r.status, r.body.len()), (200, 10));
    assert_eq!(r.header("x-cache"), Some("HIT"), "streamed from the fill");
    assert_eq!(o.requests(), 1, "one origin request for both");
    let m = scrape(admin);
    let gone = r#"proxy_request_faults_total{kind="client_gone"}"#;
    assert_eq!(sample(&m, gone), 1.0, "{m:?}");
    assert!(
        tests::eventually(WAIT, || logged_499(&log, "GET /c?size=10&delay=2s")),
        "no 499 line: {:?}",
        std::fs::read_to_string(&log)
    );
    // The entry is stored: the next request is a hit, with no origin request.
    let mut again = Client::connect(addr);
    again.send(GET).unwrap();
    let resp = raw::response(&mut again, "again");
    assert_eq!((resp.status, resp.header("x-cache")), (200, Some("HIT")));
    assert_eq!(o.requests(), 1);
}
