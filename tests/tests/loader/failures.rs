//! The loader's counts when connections die and when the origin stalls, against the
//! scriptable origin's own record of what it parsed (capture mode). `-n` is exact whatever
//! fails; `--rate` latency runs from the intended send time.

use crate::run;
use loader::stats::RunResult;
use loader::RunOptions;
use shared::origin::Origin;
use std::time::Duration;

/// Three answered URLs, then one whose request the origin reads and answers by closing the
/// connection: round robin gives the drop URL exactly a quarter of `-n`.
fn urls(o: &Origin) -> Vec<String> {
    let ok = o.url("/ok?size=8");
    vec![ok.clone(), ok.clone(), ok, o.url("/drop?drop")]
}

fn opts(urls: &[String], connections: usize, n: u64) -> RunOptions {
    let mut o = crate::opts(urls, connections);
    o.requests = Some(n);
    // Nothing here waits on a timeout: one would be a failure of its own kind.
    o.timeout = Duration::from_secs(30);
    o
}

/// (answered, dropped) requests the origin parsed, from its capture.
fn parsed(o: &Origin) -> (u64, u64) {
    let got = o.captured();
    let drops = got.iter().filter(|r| r.starts_with(b"GET /drop")).count() as u64;
    let oks = got.iter().filter(|r| r.starts_with(b"GET /ok")).count() as u64;
    assert_eq!(oks + drops, got.len() as u64, "only our two URLs");
    assert_eq!(o.requests(), got.len() as u64);
    (oks, drops)
}

/// `-n` holds: every attempt ended exactly once, none was left unanswered, and the only failures
/// are dead connections (read, or write for requests queued onto one).
fn assert_n_exact(r: &RunResult, n: u64) {
    let t = &r.totals;
    assert_eq!(t.attempts, n, "{t:?}");
    assert_eq!((t.failures.unanswered, r.drain), (0, None), "{t:?}");
    assert_eq!(t.completed + t.failures.not_completed(), n, "{t:?}");
    let f = &t.failures;
    assert_eq!(
        (f.connect, f.timeout, f.parse, f.length),
        (0, 0, 0, 0),
        "{t:?}"
    );
    // Per URL: the drop URL never completes; the shares are exact.
    let drop = &r.urls[3].counts;
    assert_eq!(drop.completed, 0, "{drop:?}");
    let shares: Vec<u64> = r.urls.iter().map(|u| u.counts.attempts).collect();
    assert_eq!(shares.iter().sum::<u64>(), n);
    assert_eq!(shares[3], n / 4, "{shares:?}");
}

/// One request per connection: each drop fails its one request, nothing else.
#[test]
fn close_mode_fails_exactly_the_dropped_requests() {
    let o = tests::capturing_origin();
    let mut opt = opts(&urls(&o), 2, 40);
    opt.close = true;
    let r = run(&opt);
    assert_n_exact(&r, 40);
    assert_eq!((r.totals.completed, r.totals.failures.read), (30, 10));
    assert_eq!(r.totals.failures.not_completed(), 10);
    assert_eq!(parsed(&o), (30, 10));
    assert_eq!(o.connections(), 40);
    assert_eq!(r.connections_opened, 40);
}

/// Open loop, keep-alive, one request in flight per connection: a dropped connection fails
/// the one request it carried; the next attempt reconnects. A drop on a reused connection
/// closes it before any byte of the answer, which is what a keep-alive timeout looks like
/// from the client: the GET is sent once more on a new connection (RFC 9112 9.3.2), and fails
/// there. So the origin, which read it both times, logs the retries too.
#[test]
fn rate_mode_fails_exactly_the_dropped_requests() {
    let o = tests::capturing_origin();
    let mut opt = opts(&urls(&o), 2, 40);
    opt.rate = Some(400.0);
    let r = run(&opt);
    assert_n_exact(&r, 40);
    assert_eq!((r.totals.completed, r.totals.failures.read), (30, 10));
    assert!(r.totals.retried <= 10, "{:?}", r.totals);
    assert_eq!(parsed(&o), (30, 10 + r.totals.retried));
    assert_eq!(o.connections(), r.connections_opened);
    assert_eq!(r.hist.total.len(), 30);
}

/// Pipelined: a dropped connection also fails the requests queued behind the drop, which
/// the origin never parsed (or, on a connection that answered before, sends them again). Which requests share a connection with a drop depends on timing;
/// what may not: every request the origin answered completed, every other one failed, and a
/// dead connection took at most its pipeline's worth with it.
fn pipelined(rate: Option<f64>) {
    let o = tests::capturing_origin();
    let depth = 4;
    let mut opt = opts(&urls(&o), 2, 40);
    opt.pipeline = depth;
    opt.rate = rate;
    let r = run(&opt);
    assert_n_exact(&r, 40);
    let (oks, drops) = parsed(&o);
    let t = &r.totals;
    assert_eq!(t.completed, oks, "{t:?}");
    let failed = t.failures.not_completed();
    assert_eq!(failed, 40 - oks, "{t:?}");
    // Each drop the origin parsed failed its request, or was a reused connection's, closed
    // before any byte of the answer, and was sent again (RFC 9112 9.3.2).
    assert!(
        drops >= 1 && failed + t.retried >= drops,
        "{drops} drops, {t:?}"
    );
    assert!(failed <= drops * depth as u64, "{drops} drops, {t:?}");
    assert_eq!(o.connections(), r.connections_opened);
}

#[test]
fn pipeline_fails_exactly_the_in_flight_requests_of_a_dead_connection() {
    pipelined(None);
}

#[test]
fn pipeline_with_rate_fails_exactly_the_in_flight_requests_of_a_dead_connection() {
    pipelined(Some(400.0));
}

/// wrk2's coordinated omission, measured: one connection at 50 req/s, and the first request
/// stalls STALL at the origin. The nine behind it were due every 20 ms but could only be
/// sent when the stall ended, so each one's corrected latency (from its intended send time)
/// exceeds its uncorrected one (from its actual send) by at least STALL - 20 ms * k: 1.8 s
/// over the run. The bounds hold on any machine: a slow one only sends later still.
#[test]
fn rate_latency_is_corrected_for_a_stalling_origin() {
    const STALL_MS: u64 = 300;
    let o = tests::capturing_origin();
    let mut urls = vec![o.url(&format!("/stall?delay={STALL_MS}"))];
    urls.extend((0..9).map(|_| o.url("/fast")));
    let mut opt = opts(&urls, 1, 10);
    opt.rate = Some(50.0);
    let r = run(&opt);
    assert_eq!((r.totals.completed, r.totals.failures.total()), (10, 0));
    let (corrected, uncorrected) = (&r.hist.total, &r.hist.uncorrected);
    assert_eq!((corrected.len(), uncorrected.len()), (10, 10));
    // The stalled request itself: at least the stall, both ways.
    assert!(
        uncorrected.max() >= STALL_MS * 1000,
        "{}",
        uncorrected.max()
    );
    // Sums of the recorded latencies, in µs (a macro: this crate does not name the type).
    macro_rules! sum {
        ($h:expr) => {
            $h.mean() * $h.len() as f64
        };
    }
    let excess_ms = (sum!(corrected) - sum!(uncorrected)) / 1000.0;
    let floor_ms: f64 = (1..10).map(|k| (STALL_MS - 20 * k) as f64).sum();
    assert!(
        excess_ms >= floor_ms * 0.99,
        "corrected exceeds uncorrected by {excess_ms:.0} ms, want >= {floor_ms} ms"
    );
    // "About the stall": each of the nine waited at most the stall plus its share of a
    // slow machine's lag; ten stalls' worth is far beyond any schedule slip here.
    assert!(
        excess_ms <= 10.0 * 9.0 * STALL_MS as f64,
        "{excess_ms:.0} ms"
    );
}

/// A server that answers the first two of four pipelined requests and resets the connection
/// (unread requests behind them): both answers arrived before the reset, so both complete,
/// also when the loader learns of the reset by its next write failing, before it read the
/// second answer (the first read of a multishot receive holds at most 16 KiB of it).
#[test]
fn pipeline_counts_answers_that_arrived_before_a_write_failed() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        // Whatever the loader does after the reset finds no one.
        drop(l);
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got.windows(4).filter(|w| w == b"\r\n\r\n").count() < 4 {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the loader closed before sending four requests");
            got.extend_from_slice(&buf[..n]);
        }
        let big = 48 * 1024;
        let mut out = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
        out.extend_from_slice(
            format!("HTTP/1.1 200 OK\r\nContent-Length: {big}\r\n\r\n").as_bytes(),
        );
        out.resize(out.len() + big, b'x');
        s.write_all(&out).unwrap();
        // Close with requests unread: a reset.
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(s);
    });
    let mut opt = opts(&[url], 1, 6);
    opt.pipeline = 4;
    let r = run(&opt);
    server.join().unwrap();
    let t = &r.totals;
    assert_eq!(t.attempts, 6, "{t:?}");
    assert_eq!(t.completed, 2, "{t:?}");
    assert_eq!(t.completed + t.failures.not_completed(), 6, "{t:?}");
    // Tickets left after the reset reconnect and are refused: the listener is gone.
    assert_eq!((t.failures.timeout, t.failures.parse), (0, 0), "{t:?}");
    assert_eq!(r.connections_opened, 1, "{t:?}");
}
