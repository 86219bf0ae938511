//! The proxy's core paths on every driver this machine has (`shared::runtime::drivers_here`:
//! io_uring where the probe says it works, and always epoll). The rest of the suite runs on
//! `auto`; these make sure the fallback driver moves the same bytes: keep-alive with a pooled
//! upstream, streamed chunked bodies both ways, pipelining, a read timeout, a close.

use shared::origin::Origin;
use shared::runtime::DriverKind;
use std::net::SocketAddr;
use tests::raw::{Client, Framing, WAIT};
use tests::strict::{assert_closed, proxy, response};

/// Start a one-worker proxy on driver `d` in front of `origin`, run `check` against it, and
/// stop it. io_uring with the fast flags runs twice: with multishot receives (the default)
/// and with `--no-multishot`.
fn on_each_driver(origin: &Origin, extra: &[&str], check: impl Fn(DriverKind, SocketAddr)) {
    for d in tests::drivers() {
        let multishot: &[bool] = match d {
            DriverKind::UringFast => &[true, false],
            _ => &[false],
        };
        for &on in multishot {
            let mut args = vec!["--driver", tests::driver_flag(d)];
            if !on {
                args.push("--no-multishot");
            }
            args.extend(extra);
            let (running, addr) = proxy(&[origin.addr()], &args);
            let summary = running.summary();
            assert!(summary.contains(&format!("driver {d}")), "{d}: {summary}");
            let recv = match (d, on) {
                (DriverKind::Epoll, _) => "driver epoll, listening",
                (_, true) => ", multishot receives,",
                (_, false) => ", a receive per read,",
            };
            assert!(summary.contains(recv), "{d}, multishot {on}: {summary}");
            check(d, addr);
            running.trigger_shutdown();
            running.join().expect("proxy stops");
        }
    }
}

#[test]
fn keep_alive_reuses_one_upstream_connection() {
    let o = tests::origin();
    on_each_driver(&o, &[], |d, addr| {
        let before = o.connections();
        let mut c = Client::connect(addr);
        for i in 0..20 {
            c.send(format!("GET /?size={i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .unwrap();
            let r = response(&mut c, &format!("{d}: request {i}"));
            assert_eq!(r.status, 200, "{d}");
            assert!(r.is_pattern(i), "{d}: body of request {i}");
        }
        assert_eq!(
            o.connections() - before,
            1,
            "{d}: one pooled upstream connection"
        );
    });
}

#[test]
fn chunked_bodies_stream_both_ways() {
    let o = tests::origin();
    on_each_driver(&o, &[], |d, addr| {
        let mut c = Client::connect(addr);
        // Upload: a small chunked body, read whole first and sent with its length; the
        // origin echoes the request as it received it.
        c.send(
            b"POST /?echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        )
        .unwrap();
        let r = response(&mut c, &format!("{d}: small chunked upload"));
        let echoed = String::from_utf8_lossy(&r.body);
        assert_eq!(r.status, 200, "{d}");
        assert!(
            echoed.ends_with("Content-Length: 11\r\n\r\nhello world"),
            "{d}: the origin received {echoed:?}"
        );
        // A chunked body over 64 KiB streams, chunked.
        let big = "z".repeat(70_000);
        c.send(
            format!("POST /?echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n11170\r\n{big}\r\n0\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
        let r = response(&mut c, &format!("{d}: large chunked upload"));
        let echoed = String::from_utf8_lossy(&r.body);
        assert_eq!(r.status, 200, "{d}");
        assert!(
            echoed.contains("Transfer-Encoding: chunked\r\n\r\n")
                && echoed.ends_with("\r\n0\r\n\r\n"),
            "{d}: the origin received {:?}",
            &echoed[..300.min(echoed.len())]
        );
        assert_eq!(
            echoed.matches('z').count(),
            70_000,
            "{d}: the body passed whole"
        );
        // Download: a chunked body of 100 KB in 4 KB chunks, relayed chunked.
        c.send(b"GET /?size=100000&framing=chunked HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let r = response(&mut c, &format!("{d}: chunked download"));
        assert_eq!((r.status, r.framing), (200, Framing::Chunked), "{d}");
        assert!(r.is_pattern(100_000), "{d}: chunked body");
    });
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let o = tests::origin();
    on_each_driver(&o, &[], |d, addr| {
        let mut c = Client::connect(addr);
        let three: String = [7, 0, 3]
            .iter()
            .map(|n| format!("GET /?size={n} HTTP/1.1\r\nHost: x\r\n\r\n"))
            .collect();
        c.send(three.as_bytes()).unwrap();
        for n in [7, 0, 3] {
            let r = response(&mut c, &format!("{d}: pipelined size {n}"));
            assert_eq!(r.status, 200, "{d}");
            assert!(r.is_pattern(n), "{d}: pipelined body of {n} bytes");
        }
    });
}

#[test]
fn a_silent_upstream_gets_504_and_connection_close_closes() {
    let o = tests::origin();
    on_each_driver(&o, &["--read-timeout", "200ms"], |d, addr| {
        let mut c = Client::connect(addr);
        c.send(b"GET /?hang HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let r = c
            .response(WAIT)
            .unwrap_or_else(|r| panic!("{d}: no 504: {}", r.text()));
        assert_eq!(r.status, 504, "{d}");
        let mut c = Client::connect(addr);
        c.send(b"GET /?size=5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let r = response(&mut c, &format!("{d}: last request"));
        assert!(r.is_pattern(5) && r.connection_has("close"), "{d}");
        assert_closed(&mut c, &format!("{d}: after Connection: close"));
    });
}
