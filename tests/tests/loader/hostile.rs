//! The loader against misbehaving servers, scripted on raw sockets: each server keeps its own
//! log (the requests it read and answered), and the loader's counts must equal it.

use crate::{opts, run};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a scripted server does with the `nth` request (from 1) of a connection.
#[derive(Debug, Clone)]
pub enum Act {
    /// Write these bytes and read the next request.
    Answer(Vec<u8>),
    /// Write these bytes, then half-close and drain what the client still sends (the
    /// lingering close of RFC 9112 9.6, as nginx does): the requests behind are never taken.
    AnswerAndClose(Vec<u8>),
    /// Write these bytes and close at once without reading the rest (a reset when the client
    /// has sent more).
    AnswerAndDrop(Vec<u8>),
}

/// A scripted server: one thread per connection; `log` counts the requests it read and
/// answered (its access log).
pub struct Scripted {
    pub url: String,
    pub log: Arc<AtomicU64>,
    pub connections: Arc<AtomicU64>,
}

impl Scripted {
    /// Serve with `script(nth, head)`; a request's body (Content-Length) is not read: the
    /// script decides whether the connection goes on.
    pub fn start(script: impl Fn(u64, &[u8]) -> Act + Send + Sync + 'static) -> Scripted {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", l.local_addr().unwrap());
        let log = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let script = Arc::new(script);
        let (lg, cn) = (log.clone(), connections.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                cn.fetch_add(1, Ordering::SeqCst);
                let (script, lg) = (script.clone(), lg.clone());
                std::thread::spawn(move || serve_conn(s, &*script, &lg));
            }
        });
        Scripted {
            url,
            log,
            connections,
        }
    }

    pub fn logged(&self) -> u64 {
        self.log.load(Ordering::SeqCst)
    }
}

fn serve_conn(mut s: TcpStream, script: &dyn Fn(u64, &[u8]) -> Act, log: &AtomicU64) {
    let mut buf = Vec::new();
    let mut nth = 0;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head: Vec<u8> = buf.drain(..end + 4).collect();
        nth += 1;
        log.fetch_add(1, Ordering::SeqCst);
        match script(nth, &head) {
            Act::Answer(b) => {
                if s.write_all(&b).is_err() {
                    return;
                }
            }
            Act::AnswerAndClose(b) => {
                let _ = s.write_all(&b);
                let _ = s.shutdown(std::net::Shutdown::Write);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                while matches!(s.read(&mut chunk), Ok(n) if n > 0) {}
                return;
            }
            Act::AnswerAndDrop(b) => {
                let _ = s.write_all(&b);
                return;
            }
        }
    }
}

pub fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

pub fn ok_close(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// nginx's `keepalive_requests 10`: every 10th response on a connection says `Connection:
/// close`, and the pipelined requests behind it are never taken. Those are sent again on a
/// new connection (RFC 9112 9.3.2), not counted as failures: Complete equals the server's log.
#[test]
fn a_clean_close_in_a_pipeline_retries_the_requests_never_taken() {
    let server = Scripted::start(|nth, _| {
        if nth % 10 == 0 {
            Act::AnswerAndClose(ok_close("ok"))
        } else {
            Act::Answer(ok("ok"))
        }
    });
    let mut o = opts(std::slice::from_ref(&server.url), 2);
    o.requests = Some(400);
    o.pipeline = 8;
    let r = run(&o);
    let t = &r.totals;
    assert_eq!(t.attempts, 400, "{t:?}");
    assert_eq!((t.completed, t.failures.total()), (400, 0), "{t:?}");
    assert_eq!(t.completed, server.logged(), "{t:?}");
    // Each connection carried ten; the ones queued behind each tenth went again.
    assert!(t.retried > 0, "{t:?}");
    assert_eq!(
        r.connections_opened,
        server.connections.load(Ordering::SeqCst)
    );
    let text = loader::report::render(&r);
    assert!(
        text.contains(&format!("Retried requests:       {}", t.retried)),
        "{text}"
    );
}

/// A keep-alive connection the server closes while idle (its keep-alive timeout), racing the
/// next request: closed before any byte of the answer, the request is sent again on a new
/// connection. Here every connection answers one request and is closed at once.
#[test]
fn a_reused_connection_closed_before_the_answer_retries_the_request() {
    let server = Scripted::start(|_, _| Act::AnswerAndDrop(ok("ok")));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(30);
    let r = run(&o);
    let t = &r.totals;
    assert_eq!(
        (t.attempts, t.completed, t.failures.total()),
        (30, 30, 0),
        "{t:?}"
    );
    assert_eq!(server.logged(), 30, "{t:?}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 30);
    assert_eq!(r.connections_opened, 30);
    assert!(t.retried > 0, "{t:?}");
}

/// A server that answers a large upload with `413` and `Connection: close` and closes without
/// reading it: the write fails (a reset), but the answer arrived before it and is read, as curl
/// reads it: a completed non-2xx response, not a write error.
#[test]
fn an_answer_read_after_a_failed_write_is_a_completed_response() {
    let server = Scripted::start(|_, _| {
        Act::AnswerAndDrop(
            b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
                .to_vec(),
        )
    });
    let dir = tests::temp_dir("hostile-413");
    let body = dir.join("big");
    std::fs::write(&body, vec![b'x'; 16 << 20]).unwrap();
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(3);
    o.method = "POST".into();
    o.body = Some(std::fs::read(&body).unwrap().into());
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.attempts, t.completed, t.non_2xx), (3, 3, 3), "{t:?}");
    assert_eq!(t.failures.total(), 0, "{t:?}");
    assert_eq!(t.status_map().get(&413), Some(&3));
    assert_eq!(server.logged(), 3);
}

/// Bytes after a complete response that nobody asked for (a 204 with a body; a second
/// response): counted as protocol errors and the connection closed, never hidden as a
/// reconnect; their bytes are in Total transferred.
#[test]
fn bytes_after_a_response_are_protocol_errors() {
    let extra = b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello";
    let server = Scripted::start(|_, _| Act::Answer(extra.to_vec()));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(4);
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.completed, t.failures.total()), (4, 0), "{t:?}");
    assert_eq!(t.protocol_errors, 4, "{t:?}");
    assert_eq!(t.bytes_received, 4 * extra.len() as u64, "{t:?}");
    assert_eq!(r.connections_opened, 4);
    let text = loader::report::render(&r);
    assert!(text.contains("Protocol errors:        4"), "{text}");

    // Two answers to one request on a keep-alive connection: the second is nobody's; the
    // same behind a long body, which the loader counts without reading most of it, and
    // behind an answer of exactly 4 KiB, where a read for a head ends.
    // (A 4-digit Content-Length where `ok("")` has 1.)
    let exact = ok(&"b".repeat(4096 - ok("").len() - 3));
    assert_eq!(exact.len(), 4096);
    for first in [ok("ok"), ok(&"b".repeat(20_000)), exact] {
        let answer = [first, ok("ok")].concat();
        let len = answer.len() as u64;
        let server = Scripted::start(move |_, _| Act::Answer(answer.clone()));
        let mut o = opts(std::slice::from_ref(&server.url), 1);
        o.requests = Some(3);
        let r = run(&o);
        let t = &r.totals;
        assert_eq!((t.completed, t.failures.total()), (3, 0), "{len}: {t:?}");
        assert_eq!(
            (t.protocol_errors, r.connections_opened),
            (3, 3),
            "{len}: {t:?}"
        );
        assert_eq!(t.bytes_received, 3 * len, "{len}: {t:?}");
    }
}

/// An answer of exactly the loader's read buffer (`READ_BUF`), then a second one nobody asked
/// for.
pub fn filling_answer_then_another() -> Vec<u8> {
    let room = loader::worker::READ_BUF;
    // A 5-digit Content-Length where `ok("")` has 1.
    let exact = ok(&"b".repeat(room - ok("").len() - 4));
    assert_eq!(exact.len(), room);
    [exact, ok("ok")].concat()
}

/// An answer that fills the loader's read buffer to its last byte, and bytes nobody asked for
/// behind it: a protocol error on every path, where the read's room ends right at the
/// answer's end (the epoll driver, receives submitted per read, `--close`, which reads
/// without a multishot receive), as it is where a multishot receive holds them.
#[test]
fn bytes_after_an_answer_that_fills_the_read_buffer_are_protocol_errors_on_every_path() {
    use shared::runtime::DriverChoice;
    let answer = filling_answer_then_another();
    let len = answer.len() as u64;
    let server = Scripted::start(move |_, _| Act::Answer(answer.clone()));
    for (driver, no_multishot, close) in [
        (DriverChoice::Epoll, false, false),
        (DriverChoice::Auto, true, false),
        (DriverChoice::Epoll, false, true),
        (DriverChoice::Auto, true, true),
    ] {
        let mut o = opts(std::slice::from_ref(&server.url), 1);
        o.requests = Some(3);
        o.runtime.driver = driver;
        o.runtime.multishot = !no_multishot;
        o.close = close;
        let r = run(&o);
        let t = &r.totals;
        let case = format!("{driver:?} no_multishot {no_multishot} close {close}");
        assert_eq!((t.completed, t.failures.total()), (3, 0), "{case}: {t:?}");
        assert_eq!(
            (t.protocol_errors, r.connections_opened),
            (3, 3),
            "{case}: {t:?}"
        );
        assert_eq!(t.bytes_received, 3 * len, "{case}: {t:?}");
    }
}

/// A response cut short by the server: its bytes arrived and are in Total transferred,
/// though the request failed.
#[test]
fn bytes_of_failed_responses_are_transferred_bytes() {
    let cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly-this";
    let server = Scripted::start(|_, _| Act::AnswerAndDrop(cut.to_vec()));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(3);
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.completed, t.failures.read), (0, 3), "{t:?}");
    assert_eq!(t.bytes_received, 3 * cut.len() as u64, "{t:?}");
    let text = loader::report::render(&r);
    assert!(text.contains("no request completed"), "{text}");
}

/// The loader binary with one worker, unpinned, quiet; killed (and failed) after 60 s.
fn loader_bin(args: &[&str]) -> std::process::Output {
    tests::process::Process::spawn(
        std::process::Command::new(tests::bin("loader"))
            .args(["--threads", "1", "--no-pin", "-q"])
            .args(args)
            .stdout(std::process::Stdio::piped()),
    )
    .output(Duration::from_secs(60))
}

/// A usage error: exit 2, one line on stderr naming `needle`, nothing on stdout.
fn assert_usage(out: &std::process::Output, needle: &str) {
    let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains(needle), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
}

/// `--hdr-log-interval` without `--hdr-log` has nothing to set: a usage error (it was accepted
/// and ignored).
#[test]
fn an_hdr_log_interval_without_the_log_is_refused() {
    let out = loader_bin(&["-n", "1", "--hdr-log-interval", "5s", "http://127.0.0.1:1/"]);
    assert_usage(&out, "--hdr-log");
}

/// An interval log of microsecond intervals never ends (and writes megabytes of empty
/// intervals a second): below 1 ms is a usage error.
#[test]
fn an_hdr_log_interval_below_a_millisecond_is_refused() {
    let origin = tests::origin();
    let dir = tests::temp_dir("hostile-hdr");
    let log = dir.join("l.hlog");
    let url = origin.url("/");
    for bad in ["1us", "999us"] {
        let out = loader_bin(&[
            "-n",
            "10",
            "--hdr-log",
            log.to_str().unwrap(),
            "--hdr-log-interval",
            bad,
            &url,
        ]);
        assert_usage(&out, "--hdr-log-interval");
    }
    assert_eq!(origin.requests(), 0);
    let out = loader_bin(&[
        "-n",
        "10",
        "--hdr-log",
        log.to_str().unwrap(),
        "--hdr-log-interval",
        "1ms",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
}

/// `-H "Transfer-Encoding: chunked"` with a raw `--body` would send both framings (the
/// request smuggling shape): refused, as a disagreeing Content-Length is.
#[test]
fn transfer_encoding_with_a_body_is_refused() {
    let origin = tests::origin();
    let dir = tests::temp_dir("hostile-te");
    let body = dir.join("b");
    std::fs::write(&body, b"hello").unwrap();
    let url = origin.url("/");
    let out = loader_bin(&[
        "-n",
        "1",
        "-H",
        "Transfer-Encoding: chunked",
        "--body",
        body.to_str().unwrap(),
        &url,
    ]);
    assert_usage(&out, "Transfer-Encoding");
    assert_eq!(origin.requests(), 0);
}

/// `-H "Connection: close"` asks the server to close after each response; a server that keeps
/// the connection open anyway is not reused: one connection per request, as with --close.
#[test]
fn a_connection_close_header_means_a_connection_per_request() {
    let server = Scripted::start(|_, _| Act::Answer(ok("ok")));
    let out = loader_bin(&["-n", "5", "-c", "1", "-H", "Connection: close", &server.url]);
    let stdout = tests::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("\nComplete requests:      5\n"), "{stdout}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 5);
    assert_eq!(server.logged(), 5);
}

/// `--json` and `--plot` to paths that cannot be written are usage errors before the load,
/// not exit 1 after it.
#[test]
fn json_and_plot_paths_are_checked_before_the_load() {
    let origin = tests::origin();
    let url = origin.url("/");
    for flag in ["--json", "--plot"] {
        let out = loader_bin(&["-n", "5", flag, "/nonexistent-dir/x/out", &url]);
        assert_usage(&out, flag);
    }
    assert_eq!(origin.requests(), 0);
}

/// Many Set-Cookie lines: a response with 90 header fields is read (the codec's documented
/// limit is 100; ab has none).
#[test]
fn a_response_with_many_header_fields_is_read() {
    let mut head = String::from("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
    for i in 0..90 {
        head += &format!("Set-Cookie: c{i}=v{i}; Path=/\r\n");
    }
    let answer = format!("{head}\r\nok").into_bytes();
    let server = Scripted::start(move |_, _| Act::Answer(answer.clone()));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(3);
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.completed, t.failures.total()), (3, 0), "{t:?}");
}

/// A raw UTF-8 path is sent percent-encoded (RFC 3986), as curl and browsers send it.
#[test]
fn a_raw_utf8_path_is_percent_encoded() {
    let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    let server = Scripted::start(move |_, head| {
        seen.lock().unwrap().push(head.to_vec());
        Act::Answer(ok("ok"))
    });
    let url = format!("{}caf\u{e9}/\u{1f600}?q=\u{e9}", server.url);
    let mut o = opts(&[url], 1);
    o.requests = Some(1);
    let r = run(&o);
    assert_eq!(r.totals.completed, 1);
    let head = tests::text(&heads.lock().unwrap()[0]);
    assert!(
        head.starts_with("GET /caf%C3%A9/%F0%9F%98%80?q=%C3%A9 HTTP/1.1\r\n"),
        "{head}"
    );
}

/// `loader merge` given the same shard twice would sum it twice: refused, exit 2.
#[test]
fn merge_refuses_a_repeated_shard() {
    let origin = tests::origin();
    let dir = tests::temp_dir("hostile-merge");
    let a = dir.join("a.json");
    let url = origin.url("/");
    let out = loader_bin(&[
        "-n",
        "4",
        "--shard",
        "1/2",
        "--json",
        a.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
    let merge = |files: &[&std::path::Path]| {
        tests::process::Process::spawn(
            std::process::Command::new(tests::bin("loader"))
                .arg("merge")
                .args(files)
                .stdout(std::process::Stdio::piped()),
        )
        .output(Duration::from_secs(60))
    };
    let out = merge(&[&a, &a]);
    assert_usage(&out, "1/2");
}

/// `loader origin --tls-cert` serves HTTPS and says so.
#[test]
fn the_origin_with_a_certificate_prints_an_https_url() {
    let dir = tests::temp_dir("hostile-origin-tls");
    let ca = tests::tls::Ca::new();
    let (cert, key) = ca.leaf_files(&dir, "o", &["localhost"]);
    let mut p = tests::process::Process::spawn(
        std::process::Command::new(tests::bin("loader"))
            .args([
                "origin",
                "--listen",
                "127.0.0.1:0",
                "--workers",
                "1",
                "--no-pin",
            ])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .stdout(std::process::Stdio::piped()),
    );
    let mut line = String::new();
    let mut out = std::io::BufReader::new(p.take_stdout().expect("stdout piped"));
    std::io::BufRead::read_line(&mut out, &mut line).expect("the origin's URL");
    assert!(line.starts_with("https://127.0.0.1:"), "{line}");
}

/// `--cacert` names a trust root for https:// URLs: given with only http:// URLs (here a TLS
/// server addressed as http://), the loader says so instead of failing without a word.
#[test]
fn cacert_with_an_http_url_to_a_tls_server_is_said() {
    use tests::tls_server::{pem_file, self_signed, Spec, TlsServer};
    let cert = self_signed(Spec {
        names: &["localhost"],
        ca: true,
        expired: false,
    });
    let server = TlsServer::start(&cert);
    let pem = pem_file("hostile-ca.pem", &[&cert]);
    let url = server
        .url("localhost", "/")
        .replacen("https://", "http://", 1);
    let out = loader_bin(&[
        "-n",
        "2",
        "--timeout",
        "2s",
        "--cacert",
        pem.to_str().unwrap(),
        &url,
    ]);
    let stderr = tests::text(&out.stderr);
    assert!(
        stderr.contains("--cacert") && stderr.contains("https://"),
        "{stderr}"
    );
}

/// `--warmup` against a slow server: the warm-up's last request is still in flight when the
/// warm-up time ends. The measured run starts when it is answered, not before: its wait is
/// not charged to Time taken. One connection, closed loop: the measured requests follow each
/// other without a gap, so Time taken is their latencies' sum plus the loop's own turns.
#[test]
fn warmup_stragglers_are_not_charged_to_the_measured_run() {
    const SLOW_MS: u64 = 400;
    let server = Scripted::start(|_, _| {
        std::thread::sleep(Duration::from_millis(SLOW_MS));
        Act::Answer(ok("ok"))
    });
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(2);
    o.warmup = Some(Duration::from_millis(100));
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.completed, t.failures.total()), (2, 0), "{t:?}");
    // The server answered the warm-up's one request, then the two measured ones.
    assert_eq!(server.logged(), 3);
    let sum_us = r.hist.total.mean() * r.hist.total.len() as f64;
    let gap_ms = (r.elapsed.as_secs_f64() * 1e6 - sum_us) / 1000.0;
    // The straggler's 300 ms after the warm-up's end were charged before; the loop's own turns
    // between the two requests are well under 100 ms on any machine.
    assert!(
        gap_ms < 100.0,
        "Time taken {:?} exceeds the requests' {:.0} ms by {gap_ms:.0} ms",
        r.elapsed,
        sum_us / 1000.0
    );
}

/// The same with `--rate`: the schedule follows the measured run's actual start, so the
/// straggler's wait is not charged (coordinated omission correction) to the first measured
/// requests either.
#[test]
fn warmup_stragglers_do_not_delay_the_rate_schedule() {
    let server = Scripted::start(|nth, _| {
        if nth == 1 {
            std::thread::sleep(Duration::from_millis(400)); // the warm-up's request
        }
        Act::Answer(ok("ok"))
    });
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(3);
    o.rate = Some(10.0);
    o.warmup = Some(Duration::from_millis(50));
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.completed, t.failures.total()), (3, 0), "{t:?}");
    assert_eq!(server.logged(), 4);
    // Each measured request is answered at once: its corrected latency is far below the
    // 350 ms the straggler held the connection after the warm-up's end.
    let max_ms = r.hist.total.max() / 1000;
    assert!(max_ms < 200, "corrected max {max_ms} ms");
}

/// `--warmup` over two workers whose warm-up stragglers end at different times (each
/// connection's first request is answered late: the first worker's at 300 ms, the second's
/// at 400 ms): the measured run starts once for both, when the last straggler has ended, and
/// `-d` runs from there for both. Each worker started and ended its own measured run before,
/// and Time taken spanned the first one's start to the other's end: 0.5 s for `-d 400ms`.
/// (`-d 450ms` here: no send is due at the stop itself.)
#[test]
fn warmup_over_workers_gives_them_one_measured_start() {
    let server = Scripted::start(|nth, _| {
        if nth == 1 {
            std::thread::sleep(Duration::from_millis(300));
        }
        Act::Answer(ok("ok"))
    });
    let mut o = opts(std::slice::from_ref(&server.url), 2);
    o.runtime.workers = 2;
    // Connection 0 sends at 0 ms, connection 1 at 100 ms; both next at 200 ms and later,
    // after the warm-up's 150 ms.
    o.rate = Some(10.0);
    o.warmup = Some(Duration::from_millis(150));
    o.duration = Some(Duration::from_millis(450));
    let r = run(&o);
    let t = &r.totals;
    assert_eq!(t.failures.total(), 0, "{t:?}");
    assert_eq!(r.elapsed, Duration::from_millis(450), "{t:?}");
    // Due at 0, 100, 200, 300 and 400 ms of the measured run.
    assert_eq!(t.attempts, 5, "{t:?}");
    assert_eq!(r.rate_reached(), Some(true), "{t:?}");
}

/// `--hdr-log` and `--series` after a warm-up whose straggler moved the measured start 200 ms
/// past the warm-up's planned end: both count from the measured start, as the report does. They
/// counted from the planned end: the log's StartTime 0.2 s before the report's start, and the
/// series' last second ending 0.2 s after the run's end.
#[test]
fn interval_logs_count_from_the_measured_start() {
    let server = Scripted::start(|nth, _| {
        if nth == 1 {
            std::thread::sleep(Duration::from_millis(300));
        }
        Act::Answer(ok("ok"))
    });
    let dir = tests::temp_dir("hostile-logs-start");
    let (hlog, series) = (dir.join("l.hlog"), dir.join("s.csv"));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.warmup = Some(Duration::from_millis(100));
    o.duration = Some(Duration::from_millis(400));
    o.hdr_log = Some(loader::hdrlog::HdrLogOptions {
        path: hlog.clone(),
        interval: Duration::from_millis(100),
    });
    o.series = Some(series.clone());
    let r = run(&o);
    assert!(r.totals.completed > 0, "{:?}", r.totals);
    let started = r.started.duration_since(std::time::UNIX_EPOCH).unwrap();
    let text = std::fs::read_to_string(&hlog).unwrap();
    let start_time: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("#[StartTime: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|t| t.parse().ok())
        .expect("a StartTime line");
    let off = (start_time - started.as_secs_f64()).abs();
    assert!(
        off < 0.002,
        "StartTime {start_time} vs the run's start {started:?}"
    );
    // The last line ends when the run did, after its drain.
    let drained = r.elapsed + r.drain.map_or(Duration::ZERO, |d| d.took);
    let last = |line: &str| -> f64 {
        let f: Vec<f64> = line
            .split(',')
            .take(2)
            .map(|v| v.parse().unwrap())
            .collect();
        f[0] + f[1]
    };
    let hdr_end = text.lines().last().map(last).unwrap();
    let series_text = std::fs::read_to_string(&series).unwrap();
    let series_end: f64 = series_text
        .lines()
        .last()
        .and_then(|l| l.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    for (what, end) in [("--hdr-log", hdr_end), ("--series", series_end)] {
        let off = (end - drained.as_secs_f64()).abs();
        assert!(off < 0.05, "{what} ends at {end} s, the run at {drained:?}");
    }
}

/// `--rate` beyond what the connection sustains (1000/s on one connection to a 10 ms origin),
/// after a warm-up: the measured schedule starts fresh at the measured start, so its first
/// request is due then and its latency is about one answer. The schedule went on from the
/// warm-up's (moved only by the stragglers' overrun): the first measured requests kept due
/// times from inside the warm-up and carried its ~270 ms backlog into the measured figures.
#[test]
fn warmup_backlog_is_not_charged_to_the_measured_run() {
    let origin = tests::origin();
    let mut o = opts(&[origin.url("/?delay=10")], 1);
    o.rate = Some(1000.0);
    o.warmup = Some(Duration::from_millis(300));
    o.duration = Some(Duration::from_millis(300));
    let r = run(&o);
    assert!(r.totals.completed > 0, "{:?}", r.totals);
    let min_ms = r.hist.total.min() / 1000;
    assert!(
        min_ms < 150,
        "the first measured request waited {min_ms} ms"
    );
}

/// After a warm-up, `--rate` for `-d` sends rate × duration: the schedule starts at the
/// measured start and a send due at the stop itself is not made (it was, a timer tick early:
/// 11 for 20/s over 500 ms).
#[test]
fn warmup_then_rate_sends_rate_times_duration() {
    let origin = tests::origin();
    let mut o = opts(&[origin.url("/")], 2);
    o.rate = Some(20.0);
    o.warmup = Some(Duration::from_millis(100));
    o.duration = Some(Duration::from_millis(500));
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.attempts, t.completed), (10, 10), "{t:?}");
}

/// Files read whole (a body, a URL list, a targets file and its bodies) are read up to a
/// limit: a device or an endless pipe given by mistake is refused with one line, exit 2.
/// Before, `--body /dev/zero` read until an allocation failed (here, in a bounded address
/// space: an abort).
#[test]
fn an_endless_input_file_is_refused_at_its_limit() {
    let dir = tests::temp_dir("hostile-endless");
    let targets = dir.join("targets.txt");
    std::fs::write(&targets, "POST http://127.0.0.1:1/\n@/dev/zero\n").unwrap();
    let targets = targets.to_str().unwrap();
    for (flags, names) in [
        (&["--body", "/dev/zero"][..], "--body /dev/zero"),
        (&["--urls", "/dev/zero"][..], "--urls /dev/zero"),
        (&["--targets", "/dev/zero"][..], "--targets /dev/zero"),
        (&["--targets", targets][..], "/dev/zero"),
    ] {
        let mut cmd = std::process::Command::new(tests::bin("loader"));
        cmd.args(["-q", "-n", "1"])
            .args(flags)
            .stdout(std::process::Stdio::piped());
        if flags[0] != "--targets" {
            cmd.arg("http://127.0.0.1:1/");
        }
        tests::process::limit_address_space(&mut cmd, 1 << 30);
        let out = tests::process::Process::spawn(&mut cmd).output(Duration::from_secs(60));
        assert_usage(&out, names);
        assert!(tests::text(&out.stderr).contains("64 MiB"), "{flags:?}");
    }
}

/// A CA file is read up to 16 MiB (a system's whole bundle is about 200 KB): before,
/// `--cacert /dev/zero` read until an allocation failed (here, in a bounded address space:
/// an abort).
#[test]
fn an_endless_ca_file_is_refused_at_its_limit() {
    let mut cmd = std::process::Command::new(tests::bin("loader"));
    cmd.args([
        "-q",
        "-n",
        "1",
        "--cacert",
        "/dev/zero",
        "https://127.0.0.1:1/",
    ])
    .stdout(std::process::Stdio::piped());
    tests::process::limit_address_space(&mut cmd, 1 << 30);
    let out = tests::process::Process::spawn(&mut cmd).output(Duration::from_secs(60));
    assert_usage(&out, "CA file /dev/zero: larger than 16 MiB");
}
