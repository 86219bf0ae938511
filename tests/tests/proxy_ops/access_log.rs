//! The access log: the exact lines of known requests in nginx's combined format and in JSON
//! (2 workers, lines flushed at shutdown), and SIGUSR1 reopening the file after a rename
//! (the `proxy` binary, as logrotate drives it).

use shared::origin::{Origin, OriginConfig};
use std::net::SocketAddr;
use std::path::Path;
use tests::process::ProxyProcess;
use tests::raw::{self, End, WAIT};
use tests::reload::Scratch;

fn config_text(origin: SocketAddr, log: &Path, format: &str, workers: usize) -> String {
    format!(
        r#"access_log = {{ path = "{}", format = "{format}" }}

[[listen]]
addr = "127.0.0.1:0"

[runtime]
workers = {workers}
pin = false

[upstream.app]
servers = ["{origin}"]

[[route]]
path = "/ret"
return = {{ status = 404, body = "no" }}

[[route]]
path = "/"
upstream = "app"
"#,
        log.display()
    )
}

/// One request on a connection of its own, read until the proxy closes: the response's
/// (status, bytes received, body bytes).
fn one(addr: SocketAddr, req: &[u8]) -> (u16, usize, usize) {
    let r = raw::exchange(addr, req, WAIT);
    assert_eq!(r.end, End::Closed, "{}", raw::show(&r));
    let resp = r.responses().into_iter().next().expect("a response");
    (resp.status, r.bytes.len(), resp.body.len())
}

const PROXIED: &[u8] = b"GET /a?q=1 HTTP/1.1\r\nHost: t\r\nReferer: http://ref/\r\nUser-Agent: agent/1 \"x\"\r\nConnection: close\r\n\r\n";
const ANSWERED: &[u8] = b"HEAD /ret HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
const BAD: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\nno colon here\r\n\r\n";

/// Run the three requests through a proxy logging in `format`; the log's lines (after the
/// shutdown flushed them) and what the client saw of each request, in order.
fn run(format: &str) -> (Vec<String>, Vec<(u16, usize, usize)>) {
    let dir = Scratch::new(format);
    let log = dir.path("access.log");
    let origin = Origin::start(OriginConfig {
        body_size: 100,
        ..OriginConfig::default()
    })
    .expect("origin");
    let cfg = proxy::config::from_toml("log.toml", &config_text(origin.addr(), &log, format, 2))
        .expect("config");
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    let seen: Vec<_> = [PROXIED, ANSWERED, BAD]
        .iter()
        .map(|r| one(addr, r))
        .collect();
    p.shutdown().expect("shutdown");
    let text = std::fs::read_to_string(&log).expect("the log exists");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    // Two workers write in their own order: sort by the request line.
    lines.sort_by_key(|l| order(l));
    (lines, seen)
}

fn order(l: &str) -> usize {
    if l.contains("/a?q=1") {
        0
    } else if l.contains("/ret") {
        1
    } else {
        2
    }
}

#[test]
fn combined_lines_are_nginx_s() {
    let (lines, seen) = run("combined");
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(seen[0].0, 200);
    assert_eq!(seen[1].0, 404);
    assert_eq!(seen[2].0, 400);
    let want = [
        format!(
            r#""GET /a?q=1 HTTP/1.1" 200 {} "http://ref/" "agent/1 \x22x\x22""#,
            seen[0].2
        ),
        r#""HEAD /ret HTTP/1.1" 404 0 "-" "-""#.to_string(),
        format!(r#""GET / HTTP/1.1" 400 {} "-" "-""#, seen[2].2),
    ];
    for (line, want) in lines.iter().zip(want) {
        // 127.0.0.1 - - [30/Nov/2026:19:46:20 +0000] "..." ...
        let (front, rest) = line.split_once("] ").expect("a time field");
        let (who, time) = front.split_once(" [").expect("a time field");
        assert_eq!(who, "127.0.0.1 - -", "{line}");
        assert_eq!(time.len(), 26, "{line}");
        assert_eq!(&time[2..3], "/", "{line}");
        assert!(time.ends_with(" +0000"), "{line}");
        assert_eq!(rest, want);
    }
    assert_eq!(seen[0].2, 100);
}

#[test]
fn json_lines_carry_the_record() {
    let (lines, seen) = run("json");
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let v: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let proxied = &v[0];
    assert_eq!(proxied["request"], "GET /a?q=1 HTTP/1.1");
    assert_eq!(proxied["status"], 200);
    assert_eq!(proxied["remote_addr"], "127.0.0.1");
    assert_eq!(proxied["request_length"], PROXIED.len());
    assert_eq!(proxied["bytes_sent"], seen[0].1);
    assert_eq!(proxied["body_bytes_sent"], 100);
    assert_eq!(proxied["route"], "/");
    assert!(proxied["upstream_addr"]
        .as_str()
        .is_some_and(|a| a.starts_with("127.0.0.1:")));
    let (ttfb, total, req) = (
        proxied["upstream_header_time"][0].as_f64().unwrap(),
        proxied["upstream_response_time"][0].as_f64().unwrap(),
        proxied["request_time"].as_f64().unwrap(),
    );
    assert!(ttfb <= total && total <= req, "{proxied}");
    assert_eq!(proxied["cache"], serde_json::Value::Null);
    assert_eq!(proxied["fault"], serde_json::Value::Null);
    assert_eq!(proxied["referer"], "http://ref/");
    assert_eq!(proxied["user_agent"], "agent/1 \"x\"");
    let answered = &v[1];
    assert_eq!(answered["status"], 404);
    assert_eq!(answered["route"], "/ret");
    assert_eq!(answered["bytes_sent"], seen[1].1);
    assert_eq!(answered["body_bytes_sent"], 0);
    assert_eq!(answered["upstream_addr"], serde_json::Value::Null);
    let bad = &v[2];
    assert_eq!(bad["status"], 400);
    assert_eq!(bad["route"], serde_json::Value::Null);
    assert_eq!(bad["fault"], "bad_request");
    assert_eq!(bad["bytes_sent"], seen[2].1);
}

#[test]
fn sigusr1_reopens_the_log_after_a_rename() {
    let dir = Scratch::new("reopen");
    let log = dir.path("access.log");
    let rotated = dir.path("access.log.1");
    let origin = tests::origin();
    let file = dir.path("p.toml");
    std::fs::write(&file, config_text(origin.addr(), &log, "combined", 1)).unwrap();
    let p = ProxyProcess::start(ProxyProcess::command().arg("--config").arg(&file));
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").into_bytes()
    };
    assert_eq!(one(p.addr, &get("/before")).0, 200);
    // The line reaches the file on the flush tick.
    assert!(tests::eventually(WAIT, || std::fs::read_to_string(&log)
        .is_ok_and(|t| t.contains("/before"))));
    std::fs::rename(&log, &rotated).unwrap();
    p.signal(libc::SIGUSR1);
    // The worker reopened the path: the new file exists.
    assert!(
        tests::eventually(WAIT, || log.exists()),
        "SIGUSR1 did not reopen the log"
    );
    assert_eq!(one(p.addr, &get("/after")).0, 200);
    p.signal(libc::SIGTERM);
    let (status, _) = p.process.finish(WAIT);
    assert!(status.success(), "{status:?}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&log).unwrap();
    assert_eq!(old.lines().count(), 1, "{old}");
    assert!(old.contains("\"GET /before HTTP/1.1\" 200"), "{old}");
    assert_eq!(new.lines().count(), 1, "{new}");
    assert!(new.contains("\"GET /after HTTP/1.1\" 200"), "{new}");
}

/// A SIGHUP applies `access_log` as nginx does: a new path and format from the requests of
/// the new generation on (the old file keeps only the lines before), removing it stops the
/// lines, adding it back starts them, a path that cannot be opened rejects the reload with
/// the running log kept, and SIGUSR1 afterwards reopens the path now configured.
#[test]
fn a_reload_switches_removes_and_adds_the_log_and_rejects_a_path_it_cannot_open() {
    let dir = Scratch::new("reload-log");
    let (al1, al2, al3) = (
        dir.path("al1.log"),
        dir.path("al2.log"),
        dir.path("al3.log"),
    );
    let origin = tests::origin();
    let file = dir.path("al.toml");
    let text = |log: Option<(&Path, &str)>| {
        let with = config_text(origin.addr(), &al1, "combined", 2);
        let (first, rest) = with.split_once('\n').unwrap();
        assert!(first.starts_with("access_log"), "{first}");
        match log {
            Some((path, format)) => format!(
                "access_log = {{ path = \"{}\", format = \"{format}\" }}\n{rest}",
                path.display()
            ),
            None => rest.to_string(),
        }
    };
    tests::reload::write_config(&file, &text(Some((&al1, "combined"))));
    let mut p = ProxyProcess::start(ProxyProcess::command().arg("--config").arg(&file));
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").into_bytes()
    };
    let logged = |log: &Path, what: &str| {
        tests::eventually(WAIT, || {
            std::fs::read_to_string(log).is_ok_and(|t| t.contains(what))
        })
    };
    let reload = |p: &mut ProxyProcess, cfg: String, generation: u64| {
        tests::reload::write_config(&file, &cfg);
        p.signal(libc::SIGHUP);
        let line = p.wait_line("proxy: reload", tests::process::READY);
        assert!(
            line.contains(&format!("generation {generation} ")),
            "{line}"
        );
        line
    };

    assert_eq!(one(p.addr, &get("/one")).0, 200);
    assert!(logged(&al1, "/one"), "the first line never reached al1");

    let line = reload(&mut p, text(Some((&al2, "json"))), 2);
    assert!(
        line.contains("access_log"),
        "the change is not named: {line}"
    );
    assert_eq!(one(p.addr, &get("/two")).0, 200);
    assert!(logged(&al2, "/two"), "the reload did not switch to al2");

    // SIGUSR1 now reopens al2, not al1.
    std::fs::rename(&al2, dir.path("al2.log.1")).unwrap();
    p.signal(libc::SIGUSR1);
    assert!(
        tests::eventually(WAIT, || al2.exists()),
        "SIGUSR1 did not reopen al2"
    );

    let line = reload(&mut p, text(None), 3);
    assert!(
        line.contains("access_log"),
        "the change is not named: {line}"
    );
    assert_eq!(one(p.addr, &get("/three")).0, 200);

    let line = reload(&mut p, text(Some((&al3, "combined"))), 4);
    assert!(
        line.contains("access_log"),
        "the change is not named: {line}"
    );
    assert_eq!(one(p.addr, &get("/four")).0, 200);
    assert!(logged(&al3, "/four"), "adding a log on reload did not log");

    let bad = dir.path("no-such-dir/al4.log");
    let line = reload(&mut p, text(Some((&bad, "json"))), 4);
    assert!(
        line.contains("reload rejected, generation 4 keeps running")
            && line.contains("access_log")
            && line.contains("no-such-dir/al4.log"),
        "{line}"
    );
    assert_eq!(one(p.addr, &get("/five")).0, 200);
    assert!(logged(&al3, "/five"), "the rejected reload changed the log");

    p.signal(libc::SIGTERM);
    let (status, _) = p.process.finish(WAIT);
    assert!(status.success(), "{status:?}");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let lines = |t: String| -> Vec<String> { t.lines().map(str::to_string).collect() };
    let one_ = lines(read(&al1));
    assert_eq!(one_.len(), 1, "{one_:#?}");
    assert!(one_[0].contains("\"GET /one HTTP/1.1\" 200"), "{one_:#?}");
    let two = lines(read(&dir.path("al2.log.1")));
    assert_eq!(two.len(), 1, "{two:#?}");
    let v: serde_json::Value = serde_json::from_str(&two[0]).expect("a JSON line");
    assert_eq!(v["request"], "GET /two HTTP/1.1");
    assert_eq!(read(&al2), "", "nothing was served after the reopen");
    let three = lines(read(&al3));
    assert_eq!(three.len(), 2, "{three:#?}");
    assert!(
        three[0].contains("\"GET /four HTTP/1.1\" 200"),
        "{three:#?}"
    );
    assert!(
        three[1].contains("\"GET /five HTTP/1.1\" 200"),
        "{three:#?}"
    );
    assert!(!bad.exists());
}

/// An origin that answers by path: `/garbage` a status line that is not one, `/stall`
/// nothing (it waits for the proxy to close), `/close` a close without an answer, `/cut`
/// 10 bytes of a 100-byte body and a close; anything else `200 ok`.
fn failing_origin() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let Ok(head) = raw::read_request_head(&mut s, &mut Vec::new()) else {
                    return;
                };
                let path = String::from_utf8_lossy(&head);
                let path = path.split(' ').nth(1).unwrap_or_default().to_string();
                let answer: &[u8] = match path.as_str() {
                    "/garbage" => b"HTTP/1.1 2x0 Broken\r\n\r\n",
                    "/cut" => b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789",
                    "/close" => b"",
                    "/stall" => {
                        // Until the proxy gives up (its read timeout) and closes.
                        let _ = s.read_to_end(&mut Vec::new());
                        return;
                    }
                    _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                };
                let _ = s.write_all(answer);
            });
        }
    });
    addr
}

/// A failed upstream attempt is attributed, as nginx's `$upstream_addr` and error log do:
/// the access log names the server tried, and stderr gets one line per failure naming the
/// group, the server and the failure kind (a bad status line, no answer within `read`, a
/// close before the answer, a body cut off).
#[test]
fn failed_upstream_attempts_name_their_server_in_the_log_and_on_stderr() {
    let dir = Scratch::new("upstream-errors");
    let log = dir.path("access.log");
    let origin = failing_origin();
    let text = config_text(origin, &log, "json", 1).replace(
        &format!("servers = [\"{origin}\"]"),
        &format!(
            "servers = [{{ addr = \"{origin}\", max_fails = 0 }}]\n[timeouts]\nread = \"300ms\""
        ),
    );
    let file = dir.path("p.toml");
    std::fs::write(&file, text).unwrap();
    let p = ProxyProcess::start(ProxyProcess::command().arg("--config").arg(&file));
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").into_bytes()
    };
    let statuses: Vec<u16> = ["/garbage", "/stall", "/close", "/cut"]
        .iter()
        .map(|path| {
            let r = raw::exchange(p.addr, &get(path), WAIT);
            r.responses().first().map_or(0, |r| r.status)
        })
        .collect();
    assert_eq!(statuses, [502, 504, 502, 200]);
    p.signal(libc::SIGTERM);
    let (status, stderr) = p.process.finish(WAIT);
    assert!(status.success(), "{status:?}");
    let lines = std::fs::read_to_string(&log).unwrap();
    let want = [
        ("/garbage", "bad_response"),
        ("/stall", "upstream_timeout"),
        ("/close", "upstream_closed"),
        ("/cut", "upstream_closed"),
    ];
    let logged: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(logged.len(), want.len(), "{lines}");
    let server = origin.to_string();
    for ((path, kind), line) in want.iter().zip(&logged) {
        assert!(line["request"].as_str().unwrap().contains(path), "{line}");
        assert_eq!(line["upstream_addr"], server.as_str(), "{path}: {line}");
        assert_eq!(line["fault"], *kind, "{path}: {line}");
    }
    let about = |kind: &str| {
        stderr
            .lines()
            .filter(|l| l.contains(&format!("upstream {server} (group app): {kind}")))
            .count()
    };
    assert_eq!(
        (
            about("bad_response"),
            about("upstream_timeout"),
            about("upstream_closed")
        ),
        (1, 1, 2),
        "{stderr}"
    );
}

const UPGRADE: &[u8] =
    b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

/// A one-worker proxy logging JSON to `log`, over the echoing `origin`, with a 300 ms
/// graceful stop.
fn tunnel_proxy(origin: SocketAddr, log: &Path) -> proxy::Running {
    let text = config_text(origin, log, "json", 1).replace(
        "[upstream.app]",
        "[timeouts]\nshutdown = \"300ms\"\n\n[upstream.app]",
    );
    let cfg = proxy::config::from_toml("log.toml", &text).expect("config");
    proxy::start(cfg).expect("proxy starts")
}

/// A tunnel through `addr`: its 101 read, nothing after it.
fn open_tunnel(addr: SocketAddr) -> tests::inproc::Client {
    let mut c = tests::inproc::Client::connect(addr);
    c.send(UPGRADE);
    assert_eq!(c.response().status, 101);
    assert!(c.take_buffered().is_empty());
    c
}

/// `n` bytes through the tunnel and back, in pieces of 1,000.
fn echo(c: &mut tests::inproc::Client, n: usize) {
    use std::io::{Read, Write};
    for _ in 0..n / 1000 {
        c.stream
            .write_all(&[b'e'; 1000])
            .expect("the tunnel is open");
        let mut got = [0u8; 1000];
        c.stream.read_exact(&mut got).expect("the echo");
    }
}

/// The log's lines once one for a 101 is there (the flush tick writes it).
fn tunnel_lines(log: &Path) -> Vec<serde_json::Value> {
    let has = || std::fs::read_to_string(log).is_ok_and(|t| t.contains("\"status\":101"));
    assert!(tests::eventually(WAIT, has), "no line for the tunnel");
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_tunnels_line_is_written_when_it_ends_with_its_bytes_and_whole_time() {
    // nginx: `"GET /ws HTTP/1.1" 101 100000`, written at the close; $body_bytes_sent counts
    // what went to the client after the head, $request_time the tunnel's life. The line was
    // written at the 101: body_bytes_sent 0, request_time the handshake's.
    let dir = Scratch::new("tunnel-log");
    let log = dir.path("access.log");
    let p = tunnel_proxy(tests::ws::echo_origin(None), &log);
    let mut c = open_tunnel(p.listen_addrs()[0]);
    let opened = std::time::Instant::now();
    echo(&mut c, 10_000);
    // The tunnel lasts at least this long: the proxy's clock started before the 101 and
    // stops after the client's end, which comes after.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let held = opened.elapsed().as_secs_f64();
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(c.read_to_close().is_empty());
    let lines = tunnel_lines(&log);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let l = &lines[0];
    assert_eq!(l["request"], "GET /ws HTTP/1.1", "{l}");
    assert_eq!(l["status"], 101, "{l}");
    assert_eq!(l["body_bytes_sent"], 10_000, "{l}");
    let head = l["bytes_sent"].as_u64().unwrap() - 10_000;
    assert!((60..400).contains(&head), "the 101 head: {l}");
    // $request_length: the upgrade request, as nginx's.
    assert_eq!(l["request_length"], UPGRADE.len(), "{l}");
    let took = l["request_time"].as_f64().unwrap();
    assert!(
        took >= held,
        "request_time {took}, the tunnel was open {held} s: {l}"
    );
    let upstream = l["upstream_response_time"][0].as_f64().unwrap();
    assert!(upstream >= held && upstream <= took, "{l}");
    p.shutdown().expect("shutdown");
}

#[test]
fn a_tunnel_cut_by_a_graceful_stop_is_logged_with_its_bytes() {
    // A graceful stop leaves an open tunnel its shutdown timeout (300 ms), then cuts it:
    // its line is written then, with what it carried.
    let dir = Scratch::new("tunnel-log-stop");
    let log = dir.path("access.log");
    let p = tunnel_proxy(tests::ws::echo_origin(None), &log);
    let mut c = open_tunnel(p.listen_addrs()[0]);
    echo(&mut c, 3_000);
    p.shutdown().expect("shutdown");
    assert!(c.read_to_close().is_empty());
    let lines = tunnel_lines(&log);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["status"], 101, "{}", lines[0]);
    assert_eq!(lines[0]["body_bytes_sent"], 3_000, "{}", lines[0]);
}
