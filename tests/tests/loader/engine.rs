//! The load engine against the scriptable origin, in-process, on 127.0.0.1:0: the origin
//! counts what it served and the loader's figures must agree exactly. Time-based tests use
//! sub-second settings and generous bounds; nothing here asserts speed.

use crate::{opts, run};
use loader::stats::RunResult;
use shared::shutdown::ShutdownFlag;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// Every attempt ended exactly once.
fn assert_accounted(r: &RunResult) {
    let t = &r.totals;
    assert_eq!(
        t.attempts,
        t.completed + t.failures.not_completed(),
        "{t:?}"
    );
}

#[test]
fn exact_count_with_n_over_workers() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 8);
    opt.requests = Some(501);
    opt.runtime.workers = 2;
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 501);
    assert_eq!(r.totals.attempts, 501);
    assert_eq!(o.requests(), 501);
    assert_eq!(r.totals.failures.total(), 0);
    assert_eq!(r.totals.status_map().get(&200), Some(&501));
    assert_eq!(r.connections_opened, 8);
    assert_eq!(o.connections(), 8);
    // ab's Keep-Alive requests: every response that kept its connection open, each
    // connection's first included (ab -k -n 501 says 501 here).
    assert_eq!(r.totals.keep_alive, 501);
    assert_eq!(r.document_length(), Some(64));
    assert_eq!(r.totals.body_bytes, 501 * 64);
    assert!(r.totals.bytes_received > r.totals.body_bytes);
    assert_eq!(r.hist.total.len(), 501);
    assert_eq!(r.hist.uncorrected.len(), 501);
    assert_eq!(r.hist.connect_per_connection.len(), 8);
    assert!(!r.interrupted);
    assert_eq!(r.workers, 2);
}

#[test]
fn fewer_requests_than_connections() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 10);
    opt.requests = Some(3);
    let r = run(&opt);
    assert_eq!(r.totals.completed, 3);
    assert_eq!(o.requests(), 3);
    // A connection is opened only for an attempt: never more than the attempts.
    assert!((1..=3).contains(&o.connections()));
}

#[test]
fn duration_stops_issuing_at_the_deadline() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 4);
    opt.duration = Some(Duration::from_millis(300));
    let r = run(&opt);
    assert_accounted(&r);
    // The deadline ended the run: measured time reaches it (a lower bound a slow machine
    // cannot miss), and no more than that is counted as measured.
    assert!(
        r.elapsed >= Duration::from_millis(250) && r.elapsed <= Duration::from_millis(300),
        "{:?}",
        r.elapsed
    );
    assert!(!r.interrupted);
    // Attempts start at once; how many complete in 300 ms depends on the machine.
    assert!(r.totals.attempts > 0);
    assert_eq!(r.totals.failures.total(), 0);
    // In-flight requests at the deadline are drained and counted: at most one per
    // connection, all answered, and the loader's count is the origin's.
    let drain = r.drain.expect("the deadline stopped the run");
    assert!(drain.in_flight <= 4, "{drain:?}");
    assert_eq!(r.totals.failures.unanswered, 0);
    assert_eq!(o.requests(), r.totals.completed, "{:?}", r.totals);
}

#[test]
fn close_opens_one_connection_per_request_from_spread_sources() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 4);
    opt.requests = Some(200);
    opt.close = true;
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 200);
    assert_eq!(o.requests(), 200);
    assert_eq!(o.connections(), 200);
    assert_eq!(r.connections_opened, 200);
    assert_eq!(r.totals.keep_alive, 0);
    assert_eq!(r.hist.connect_per_connection.len(), 200);
    assert_eq!(r.source_addresses, 64);
    assert!(!r.keep_alive);
}

#[test]
fn pipeline_keeps_several_requests_in_flight() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 3);
    opt.requests = Some(300);
    opt.pipeline = 8;
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 300);
    assert_eq!(o.requests(), 300);
    assert_eq!(o.connections(), 3);
    assert_eq!(r.totals.failures.total(), 0);
}

#[test]
fn urls_round_robin_with_exact_shares() {
    let o = tests::origin();
    let urls = [
        o.url("/a?size=10"),
        o.url("/b?size=20"),
        o.url("/c?size=30"),
    ];
    let mut opt = opts(&urls, 4);
    opt.requests = Some(31);
    opt.runtime.workers = 2;
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(o.requests(), 31);
    let per: Vec<u64> = r.urls.iter().map(|u| u.counts.completed).collect();
    assert_eq!(per, vec![11, 10, 10]);
    let docs: Vec<Option<u64>> = r.urls.iter().map(|u| u.document_length).collect();
    assert_eq!(docs, vec![Some(10), Some(20), Some(30)]);
    assert_eq!(r.urls[1].counts.body_bytes, 200);
    assert_eq!(r.urls[2].path, "/c?size=30");
    assert_eq!(r.totals.failures.length, 0);
}

#[test]
fn urls_on_different_servers_get_their_own_connections() {
    let (a, b) = (tests::origin(), tests::origin());
    let urls = [a.url("/a"), b.url("/b")];
    let mut opt = opts(&urls, 2);
    opt.requests = Some(20);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 20);
    assert_eq!((a.requests(), b.requests()), (10, 10));
    assert_eq!(r.urls[1].port, b.addr().port());
    // Pipelining needs one server: refused up front, naming the reason, before any request.
    opt.pipeline = 4;
    match loader::run(&opt, ShutdownFlag::new()) {
        Err(loader::LoadError::Invalid(why)) => assert!(why.contains("different servers"), "{why}"),
        other => panic!("want LoadError::Invalid, got {other:?}"),
    }
    assert_eq!((a.requests(), b.requests()), (10, 10));
}

#[test]
fn status_codes_are_counted() {
    let o = tests::origin();
    let urls = [
        o.url("/?status=200"),
        o.url("/?status=404"),
        o.url("/?status=503"),
    ];
    let mut opt = opts(&urls, 2);
    opt.requests = Some(30);
    let r = run(&opt);
    let m = r.totals.status_map();
    assert_eq!(
        m.into_iter().collect::<Vec<_>>(),
        vec![(200, 10), (404, 10), (503, 10)]
    );
    assert_eq!(r.totals.non_2xx, 20);
    assert_eq!(r.totals.completed, 30);
    assert_eq!(r.totals.failures.total(), 0);
}

/// A tiny keep-alive server whose body length alternates per request: 10, 11, 10, 11...
fn varying_length_server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                let mut n = 0usize;
                loop {
                    // Read one request head.
                    let mut line = String::new();
                    loop {
                        line.clear();
                        match r.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => {}
                        }
                    }
                    let body = "x".repeat(10 + n % 2);
                    n += 1;
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nServer: vary/1\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if w.write_all(resp.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/")
}

#[test]
fn length_failures_as_ab_counts_them() {
    let url = varying_length_server();
    let mut opt = opts(&[url], 1);
    opt.requests = Some(10);
    let r = run(&opt);
    assert_eq!(r.totals.completed, 10);
    assert_eq!(r.document_length(), Some(10));
    assert_eq!(r.totals.failures.length, 5);
    assert_eq!(r.bad_byte_counts(), 5);
    assert_eq!(r.totals.failures.ab_failed(), 5);
    assert_eq!(r.server_software.as_deref(), Some("vary/1"));
    // -l: variable lengths are fine.
    opt.accept_variable_length = true;
    let r = run(&opt);
    assert_eq!(r.totals.failures.length, 0);
    assert_eq!(r.totals.completed, 10);
}

/// A server that answers every request head with `response`, then closes if `close`.
fn raw_server(response: &'static [u8], close: bool) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                loop {
                    let mut line = String::new();
                    loop {
                        line.clear();
                        match r.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => {}
                        }
                    }
                    if w.write_all(response).is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/")
}

/// RFC 9110 9.1: methods are case-sensitive. `-m head` is not HEAD: a server answers it with a
/// body (here, as one that does not know the method would, a 200 with its body), which the
/// loader must read as the response's. It framed `head` as a HEAD (compared ignoring case), so
/// every body was bytes nobody asked for: Protocol errors, the connection dropped each time.
#[test]
fn a_lowercase_head_is_not_head() {
    let url = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false);
    let mut opt = opts(&[url], 1);
    opt.requests = Some(6);
    opt.method = "head".into();
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 6, "{:?}", r.totals);
    assert_eq!(r.totals.failures.total(), 0, "{:?}", r.totals);
    assert_eq!(r.totals.protocol_errors, 0, "{:?}", r.totals);
    assert_eq!(r.totals.body_bytes, 30);
    assert_eq!(r.connections_opened, 1);
}

#[test]
fn malformed_responses_count_as_parse_failures() {
    let url = raw_server(b"NOT HTTP AT ALL\r\n\r\n", false);
    let mut opt = opts(&[url], 2);
    opt.requests = Some(8);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.failures.parse, 8);
    assert_eq!(r.totals.failures.receive(), 8);
    assert_eq!(r.totals.completed, 0);
}

#[test]
fn interim_responses_are_skipped() {
    let url = raw_server(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
        false,
    );
    let mut opt = opts(&[url], 2);
    opt.requests = Some(8);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 8);
    assert_eq!(r.totals.status_map().get(&201), Some(&8));
    assert_eq!(r.totals.body_bytes, 16);
}

#[test]
fn http10_responses_without_keep_alive_reconnect() {
    let url = raw_server(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc", true);
    let mut opt = opts(&[url], 2);
    opt.requests = Some(10);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 10);
    assert_eq!(r.connections_opened, 10);
    assert_eq!(r.totals.keep_alive, 0);
}

#[test]
fn a_server_that_resets_counts_read_failures() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/?reset")], 2);
    opt.requests = Some(20);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 0);
    assert_eq!(r.totals.failures.read, 20);
    assert_eq!(r.totals.attempts, 20);
    assert!(r.nothing_succeeded());
    assert_eq!(o.requests(), 20);

    // Closing without a byte (FIN instead of RST) is a read failure too.
    let mut opt = opts(&[o.url("/?drop")], 2);
    opt.requests = Some(10);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.failures.read, 10);
}

#[test]
fn a_server_that_closes_mid_body_counts_read_failures() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/?size=1000&abort_after=100")], 2);
    opt.requests = Some(10);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 0);
    assert_eq!(r.totals.failures.read, 10);
}

#[test]
fn a_server_that_never_answers_times_out_every_attempt() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/?hang")], 3);
    opt.requests = Some(6);
    opt.timeout = Duration::from_millis(300);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.failures.timeout, 6);
    assert_eq!(r.totals.failures.exceptions(), 6);
    assert_eq!(r.totals.completed, 0);
    // Each timeout closed its connection; the next attempt reconnected.
    assert_eq!(o.connections(), 6);
}

#[test]
fn refused_connects_are_counted() {
    // Bound and not listening for the whole test: connects are refused.
    let closed = tests::ClosedPort::new();
    let port = closed.port();
    let mut opt = opts(&[format!("http://127.0.0.1:{port}/")], 2);
    opt.requests = Some(5);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.failures.connect, 5);
    assert!(r.nothing_succeeded());
}

#[test]
fn chunked_and_close_delimited_bodies() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/?size=1000&chunk=64")], 2);
    opt.requests = Some(20);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 20);
    assert_eq!(r.totals.body_bytes, 20 * 1000);
    assert_eq!(r.document_length(), Some(1000));
    assert!(r.totals.bytes_received > 20 * 1000 + 20 * 16 * 3);
    assert_eq!(o.connections(), 2);
    assert_eq!(r.totals.failures.total(), 0);

    let o = tests::origin();
    let mut opt = opts(&[o.url("/?size=40000&framing=close")], 2);
    opt.requests = Some(10);
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 10);
    assert_eq!(r.totals.body_bytes, 10 * 40000);
    assert_eq!(r.totals.failures.total(), 0);
    // The body ends with the connection: one connection per response.
    assert_eq!(o.connections(), 10);
    assert_eq!(r.totals.keep_alive, 0);
}

#[test]
fn head_requests_have_no_body() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/?size=500")], 2);
    opt.requests = Some(10);
    opt.method = "HEAD".into();
    let r = run(&opt);
    assert_eq!(r.totals.completed, 10);
    assert_eq!(r.totals.body_bytes, 0);
    assert_eq!(r.document_length(), Some(0));
    assert!(o.connections() <= 2, "HEAD responses keep the connection");
}

#[test]
fn rate_mode_holds_the_rate() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 4);
    opt.rate = Some(200.0);
    opt.duration = Some(Duration::from_secs(2));
    let r = run(&opt);
    assert_accounted(&r);
    // The schedule is the upper bound: 200/s for 2 s issues at most 400 (one of slack for
    // rounding). A loaded machine may fall behind it, so the lower bound is generous.
    let t = &r.totals;
    assert!(t.attempts <= 401, "{t:?}");
    assert!(t.completed >= 200, "{t:?}");
    assert_eq!(t.failures.total(), 0, "{t:?}");
    assert_eq!(r.target_rate(), Some(200.0));
    assert_eq!(r.hist.uncorrected.len(), r.hist.total.len());
}

/// `-n` with `--rate`: the run ends when its last request is answered. The sends are due at
/// 0, 200, 400 and 600 ms whatever `-c`; a connection that had sent its part waited for its
/// next send time (200 ms later with one connection, 800 ms with four) before it found the
/// quota spent, and Time taken (so the achieved rate) counted that wait.
#[test]
fn n_with_rate_ends_at_the_last_answer_not_a_send_interval_later() {
    let o = tests::origin();
    for c in [1, 4] {
        let mut opt = opts(&[o.url("/")], c);
        opt.requests = Some(4);
        opt.rate = Some(5.0);
        let r = run(&opt);
        assert_accounted(&r);
        assert_eq!(r.totals.completed, 4, "-c {c}: {:?}", r.totals);
        // The last send is due at 600 ms: the run lasts that and one quick answer, well
        // under the 200 ms a single connection's next send time is away.
        let ms = r.elapsed.as_millis();
        assert!((600..700).contains(&ms), "-c {c}: Time taken {ms} ms");
        assert_eq!(r.rate_reached(), Some(true), "-c {c}");
    }
}

#[test]
fn warmup_is_not_counted() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 2);
    opt.requests = Some(50);
    opt.warmup = Some(Duration::from_millis(200));
    let r = run(&opt);
    assert_accounted(&r);
    assert_eq!(r.totals.completed, 50);
    assert_eq!(r.totals.attempts, 50);
    assert!(o.requests() > 50, "the warm-up made requests too");
    assert_eq!(r.hist.total.len(), 50);
}

#[test]
fn stop_flag_ends_the_run_with_a_result() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 2);
    opt.duration = Some(Duration::from_secs(30));
    let flag = ShutdownFlag::new();
    let f2 = flag.clone();
    // Stop once the origin has served 5 requests: an event, not a pause.
    let served = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = served.clone();
    let counter = std::thread::spawn({
        let o = o.stats().to_vec();
        move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let n: u64 = o.iter().map(|s| s.requests.get()).sum();
                if n >= 5 || Instant::now() > deadline {
                    seen.store(n, std::sync::atomic::Ordering::SeqCst);
                    f2.trigger();
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let r = loader::run(&opt, flag).unwrap();
    counter.join().unwrap();
    let at_stop = served.load(std::sync::atomic::Ordering::SeqCst);
    assert!(at_stop >= 5, "the origin served {at_stop} in 30 s");
    // The flag ended the run, long before its 30 s deadline.
    assert!(r.interrupted);
    assert!(r.elapsed < Duration::from_secs(30), "{:?}", r.elapsed);
    // Closed loop, 2 connections: of the 5 served, at most 2 were still in flight.
    assert!(r.totals.completed >= at_stop - 2, "{:?}", r.totals);
    assert_accounted(&r);
}

#[test]
fn request_bytes_carry_method_headers_and_body() {
    let o = tests::capturing_origin();
    let mut opt = opts(&[o.url("/p?q=1")], 1);
    opt.requests = Some(2);
    opt.method = "POST".into();
    opt.body = Some(bytes::Bytes::from_static(b"hello"));
    opt.content_type = Some("text/plain".into());
    opt.headers = vec![("X-Test".into(), "yes".into())];
    let r = run(&opt);
    assert_eq!(r.totals.completed, 2);
    let got = o.captured();
    assert_eq!(got.len(), 2);
    let text = String::from_utf8_lossy(&got[0]);
    assert!(text.starts_with("POST /p?q=1 HTTP/1.1\r\n"), "{text}");
    assert!(text.contains(&format!("Host: {}\r\n", o.addr())), "{text}");
    assert!(text.contains("Content-Type: text/plain\r\n"), "{text}");
    assert!(text.contains("Content-Length: 5\r\n"), "{text}");
    assert!(text.contains("X-Test: yes\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nhello"), "{text}");
    assert_eq!(o.body_bytes(), 10);
    // ab's "Total body sent": every request byte written, heads included.
    assert!(r.sends_body);
    let wire: usize = got.iter().map(Vec::len).sum();
    assert_eq!(r.totals.bytes_sent, wire as u64);
}

#[test]
fn epoll_driver_gives_the_same_counts() {
    let o = tests::origin();
    for close in [false, true] {
        let mut opt = opts(&[o.url("/?size=3000&chunk=700")], 3);
        opt.runtime.driver = shared::runtime::DriverChoice::Epoll;
        opt.requests = Some(60);
        opt.close = close;
        let r = run(&opt);
        assert_accounted(&r);
        assert_eq!(r.driver, shared::runtime::DriverKind::Epoll);
        assert_eq!(r.totals.completed, 60, "close={close}");
        assert_eq!(r.totals.body_bytes, 60 * 3000);
    }
    assert_eq!(o.requests(), 120);
}

#[test]
fn with_n_and_d_whichever_ends_first() {
    let o = tests::origin();
    let mut opt = opts(&[o.url("/")], 2);
    opt.requests = Some(5);
    opt.duration = Some(Duration::from_secs(20));
    let r = run(&opt);
    // -n ended it: every request done, nothing abandoned at a deadline.
    assert_eq!((r.totals.completed, r.drain), (5, None));
    assert!(r.elapsed < Duration::from_secs(20), "{:?}", r.elapsed);

    opt.requests = Some(100_000_000);
    opt.duration = Some(Duration::from_millis(200));
    let served_before = o.requests();
    let r = run(&opt);
    // -d ended it: the quota was far from spent, and what the origin served is exactly what
    // was completed (the requests in flight at the deadline drained).
    assert!(r.totals.attempts > 0 && r.totals.attempts < 100_000_000);
    assert!(r.elapsed <= Duration::from_millis(200), "{:?}", r.elapsed);
    assert_accounted(&r);
    let served = o.requests() - served_before;
    assert_eq!(served, r.totals.completed, "{:?}", r.totals);
    assert!(r.drain.is_some());
}

#[test]
fn http10_requests_as_ab_sends_them() {
    let o = tests::capturing_origin();
    for close in [false, true] {
        let mut opt = opts(&[o.url("/x")], 1);
        opt.requests = Some(3);
        opt.http10 = true;
        opt.close = close;
        let r = run(&opt);
        assert_eq!(r.totals.completed, 3, "close={close}");
    }
    let got = o.captured();
    assert_eq!(got.len(), 6);
    let keep = String::from_utf8_lossy(&got[0]);
    assert!(keep.starts_with("GET /x HTTP/1.0\r\n"), "{keep}");
    assert!(keep.contains("Connection: keep-alive\r\n"), "{keep}");
    let close = String::from_utf8_lossy(&got[5]);
    assert!(!close.contains("Connection:"), "{close}");
    // Keep-alive with HTTP/1.0 works when the origin honours it: one connection for the
    // first three, one per request for the last three.
    assert_eq!(o.connections(), 4);
}

#[test]
fn connects_set_nodelay_and_bind_the_source_address() {
    use shared::runtime::{run_on, select_driver, RuntimeConfig};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let dst = l.local_addr().unwrap();
    let driver = select_driver(&RuntimeConfig::default()).unwrap();
    for src in [None, Some("127.0.0.7".parse().unwrap())] {
        let nodelay = run_on(driver, 64, async move {
            let s = shared::net::connect(dst, src).await.expect("connect");
            let local = s.local_addr().unwrap();
            if let Some(ip) = src {
                assert_eq!(local.ip(), ip);
            }
            s.nodelay().unwrap()
        })
        .unwrap();
        assert!(nodelay, "TCP_NODELAY on outgoing sockets");
        let (_, peer) = l.accept().unwrap();
        assert_eq!(peer.ip(), src.unwrap_or(dst.ip()));
    }
}
