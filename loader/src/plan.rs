//! What to send, decided once before the workers start: each URL's request bytes (encoded
//! once; each worker copies them), and for `--rate` the send schedule.
//!
//! Invariant: nothing here runs per request except [`Schedule::next_due`] and
//! [`Schedule::peek`] (integer arithmetic).

use crate::target::Target;
use crate::targets::RequestSpec;
use crate::RunOptions;
use bytes::{Bytes, BytesMut};
use shared::http::encode::{end_head, write_header, write_header_u64, write_request_line};
use shared::http::head::RequestMethod;
use shared::http::Version;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One URL's request, encoded once.
#[derive(Debug)]
pub struct Request {
    pub target: Target,
    /// The whole request (head and body) as written on the wire.
    pub bytes: Bytes,
    /// What response framing depends on.
    pub method: RequestMethod,
    /// The method is idempotent (RFC 9110 9.2.2: GET, HEAD, PUT, DELETE, OPTIONS, TRACE): a
    /// request the server closed on before any byte of its answer is sent again.
    pub idempotent: bool,
    /// The first response's body length, set once by whichever worker sees it first (ab's
    /// "Document Length"; later responses of another length are length failures).
    pub document_length: OnceLock<u64>,
    /// The first Server header seen for this URL.
    pub server: OnceLock<String>,
    /// `https://`: the first handshake's protocol, cipher suite and key exchange (ab's
    /// "SSL/TLS Protocol").
    pub tls_session: OnceLock<String>,
}

/// Encode the request for `target` with the options' method, headers and body.
pub fn encode_request(opts: &RunOptions, target: &Target) -> Bytes {
    encode_with(opts, target, None)
}

/// [`encode_request`], with a `--targets` request's own method, headers (after `-H`'s) and
/// body (instead of `--body`'s).
pub fn encode_with(opts: &RunOptions, target: &Target, spec: Option<&RequestSpec>) -> Bytes {
    let version = if opts.http10 {
        Version::Http10
    } else {
        Version::Http11
    };
    let method = spec.map_or(opts.method.as_str(), |s| s.method.as_str());
    let body = spec.and_then(|s| s.body.as_ref()).or(opts.body.as_ref());
    let extra: &[(String, String)] = spec.map_or(&[], |s| &s.headers);
    let fields = merged_fields(&opts.headers, extra);
    let mut b = BytesMut::with_capacity(256 + body.map_or(0, |b| b.len()));
    write_request_line(&mut b, method, &target.path, version);
    let has = |name: &str| fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("host") {
        write_header(&mut b, b"Host", target.host_header().as_bytes());
    }
    if !has("user-agent") {
        let ua = concat!("loader/", env!("CARGO_PKG_VERSION"));
        write_header(&mut b, b"User-Agent", ua.as_bytes());
    }
    if !has("accept") {
        write_header(&mut b, b"Accept", b"*/*");
    }
    if !has("connection") {
        if opts.close {
            if !opts.http10 {
                write_header(&mut b, b"Connection", b"close");
            }
        } else if opts.http10 {
            write_header(&mut b, b"Connection", b"keep-alive");
        }
    }
    if let Some(body) = body {
        if !has("content-type") {
            let ct = opts
                .content_type
                .as_deref()
                .unwrap_or("application/octet-stream");
            write_header(&mut b, b"Content-Type", ct.as_bytes());
        }
        // Always the body's own length: a Content-Length given with -H (validated equal to
        // every request's body) is left out below, so the field is sent once.
        write_header_u64(&mut b, b"Content-Length", body.len() as u64);
    }
    let ours = |n: &str| body.is_some() && n.eq_ignore_ascii_case("content-length");
    for (n, v) in fields.iter().filter(|(n, _)| !ours(n)) {
        write_header(&mut b, n.as_bytes(), v.as_bytes());
    }
    end_head(&mut b);
    if let Some(body) = body {
        b.extend_from_slice(body);
    }
    b.freeze()
}

/// The `-H` fields, then a target's own, each name once (RFC 9110 5.3; RFC 9112 3.2: two Host
/// fields are a 400): a name given again replaces the earlier value in its place (a later -H
/// over an earlier one, a target's own line over -H: the more specific wins, as wrk's headers
/// table keyed by name has it), except Cookie, whose values are joined into one field (RFC
/// 6265 5.4: `a=1; b=2`, so repeated `-C` sends every cookie). Once per URL, before the run.
fn merged_fields<'a>(
    given: &'a [(String, String)],
    own: &'a [(String, String)],
) -> Vec<(&'a str, String)> {
    let mut out: Vec<(&str, String)> = Vec::with_capacity(given.len() + own.len());
    for (n, v) in given.iter().chain(own) {
        let Some(at) = out.iter().position(|(m, _)| m.eq_ignore_ascii_case(n)) else {
            out.push((n, v.clone()));
            continue;
        };
        let old = &mut out[at].1;
        if n.eq_ignore_ascii_case("cookie") && !old.is_empty() && !v.is_empty() {
            old.push_str("; ");
            old.push_str(v);
        } else if !(n.eq_ignore_ascii_case("cookie") && v.is_empty()) {
            out[at] = (n, v.clone());
        }
    }
    out
}

/// The request of every URL, shared read-only by all workers.
pub fn build_requests(opts: &RunOptions) -> Vec<Request> {
    opts.urls
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let spec = opts.per_url.as_ref().and_then(|s| s.get(i));
            let name = spec.map_or(opts.method.as_str(), |s| s.method.as_str());
            // RFC 9110 9.1: case-sensitive, as servers frame their answers: `head` is an
            // unknown method to them, answered with a body.
            let method = if name == "HEAD" {
                RequestMethod::Head
            } else if name == "CONNECT" {
                RequestMethod::Connect
            } else {
                RequestMethod::Other
            };
            let idempotent = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"].contains(&name);
            (t, spec, method, idempotent)
        })
        .map(|(t, spec, method, idempotent)| Request {
            target: t.clone(),
            bytes: encode_with(opts, t, spec),
            method,
            idempotent,
            document_length: OnceLock::new(),
            server: OnceLock::new(),
            tls_session: OnceLock::new(),
        })
        .collect()
}

/// How long [`settle_addresses`] waits for one address to accept.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1);

/// For every target with several addresses, connect to them in order once, before the load,
/// and keep the first that accepts as `addr` (where none does, `addrs[0]` stays and the run's
/// connects fail and are counted). Once, not per connection: a load that connected to a dead
/// `::1` before every `127.0.0.1` would measure the fallback, not the server, and all requests
/// of a run go to one address, as ab's and wrk's do.
pub fn settle_addresses(reqs: &mut [Request]) {
    settle_with(reqs, |a| {
        std::net::TcpStream::connect_timeout(a, SETTLE_TIMEOUT).is_ok()
    });
}

/// [`settle_addresses`] with the probe given (tests).
fn settle_with(reqs: &mut [Request], mut accepts: impl FnMut(&SocketAddr) -> bool) {
    let mut chosen: Vec<(Vec<SocketAddr>, SocketAddr)> = Vec::new();
    for r in reqs.iter_mut().filter(|r| r.target.addrs.len() > 1) {
        let t = &mut r.target;
        if let Some((_, a)) = chosen.iter().find(|(addrs, _)| *addrs == t.addrs) {
            t.addr = *a;
            continue;
        }
        if let Some(a) = t.addrs.iter().find(|a| accepts(a)) {
            t.addr = *a;
        }
        chosen.push((t.addrs.clone(), t.addr));
    }
}

/// Split `total` into `parts` shares differing by at most one (the first ones get the rest).
pub fn split(total: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

/// Connection `g`'s first due time at `rate` req/s in total: wrk2 offsets connection g's
/// sends by g/R so that the total rate is smooth.
pub fn first_due(start: Instant, g: usize, rate: f64) -> Instant {
    later(start, first_offset(g, rate))
}

/// [`first_due`] after the start.
pub fn first_offset(g: usize, rate: f64) -> Duration {
    Duration::try_from_secs_f64(g as f64 / rate).unwrap_or(FAR)
}

/// Later than any run lasts, and within what every platform's `Instant` can hold.
const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);

/// `at + by`, `by` capped at [`FAR`]: a send due that late never happens either way, and an
/// addition past the clock's end would panic the worker.
#[inline]
pub fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by.min(FAR)).unwrap_or(at)
}

/// wrk2's schedule for one connection of an open-loop run: the k-th request is due at
/// `start + k * interval`. Latency is measured from the due time, so a stall that delays sends
/// shows up in the figures (coordinated omission corrected).
///
/// With `--stages` the rate ramps: the run's n-th request is due when the ramp's cumulative
/// count reaches n ([`Ramp::time_of`]); connection `first` of `stride` sends the requests
/// `first, first + stride, ...` of the run (with a constant rate that is the same schedule).
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    /// The first due time after the schedule's base (wrk2's per-connection offset).
    offset: Duration,
    interval_ns: u64,
    sent: u64,
    /// `--stages`: this connection's first request of the run, and the connections.
    first: u64,
    stride: u64,
}

impl Schedule {
    /// `rate` requests per second for this connection, the first due `offset` after `base`.
    pub fn new(base: Instant, offset: Duration, rate_per_conn: f64) -> Schedule {
        let interval_ns = (1e9 / rate_per_conn).max(1.0) as u64;
        Schedule {
            start: later(base, offset),
            offset,
            interval_ns,
            sent: 0,
            first: 0,
            stride: 0,
        }
    }

    /// `--stages`: connection `first` of `stride`, the ramp starting at `start`.
    pub fn ramped(start: Instant, first: u64, stride: u64) -> Schedule {
        Schedule {
            start,
            offset: Duration::ZERO,
            interval_ns: 0,
            sent: 0,
            first,
            stride: stride.max(1),
        }
    }

    /// The due time of the next request without advancing, on `ramp` when the run has one.
    #[inline]
    pub fn peek_on(&self, ramp: Option<&Ramp>) -> Instant {
        match ramp {
            Some(r) => self.start + r.time_of(self.first + self.stride * self.sent),
            None => self.peek(),
        }
    }

    /// [`Schedule::peek_on`], advancing the schedule.
    #[inline]
    pub fn next_due_on(&mut self, ramp: Option<&Ramp>) -> Instant {
        let due = self.peek_on(ramp);
        self.sent += 1;
        due
    }

    /// The due time of the next request; advances the schedule.
    #[inline]
    pub fn next_due(&mut self) -> Instant {
        let due = self.peek();
        self.sent += 1;
        due
    }

    /// The schedule starts over from `base` (the measured run's start, after a warm-up), as
    /// it first started: its first request due at its offset after it, a ramp from its
    /// beginning. Nothing of the warm-up's schedule is kept: a backlog it built (a rate the
    /// connections did not sustain) is not charged to the measured requests.
    pub fn restart(&mut self, base: Instant) {
        self.start = later(base, self.offset);
        self.sent = 0;
    }

    /// The due time of the next request without advancing.
    #[inline]
    pub fn peek(&self) -> Instant {
        later(
            self.start,
            Duration::from_nanos(self.interval_ns.saturating_mul(self.sent)),
        )
    }
}

/// `--stages`: the open-loop rate, ramping linearly from 0 through each stage's target (k6's
/// ramping arrival rate), precomputed so that a due time is a few multiplications and a
/// square root.
#[derive(Debug, Clone, PartialEq)]
pub struct Ramp {
    /// Per stage: its start (s), length (s), starting rate, ending rate, and the requests due
    /// before it.
    stages: Vec<(f64, f64, f64, f64, f64)>,
    /// Every request of the ramp (its cumulative count at the end).
    total: f64,
    /// The ramp's length.
    length: Duration,
}

impl Ramp {
    /// Stages as `(length, target rate)`, scaled by `share` (a shard's part).
    pub fn new(stages: &[(Duration, f64)], share: f64) -> Ramp {
        let (mut t, mut n, mut from) = (0.0, 0.0, 0.0);
        let mut out = Vec::with_capacity(stages.len());
        for &(d, target) in stages {
            let (len, to) = (d.as_secs_f64(), target * share);
            out.push((t, len, from, to, n));
            t += len;
            n += (from + to) / 2.0 * len;
            from = to;
        }
        Ramp {
            stages: out,
            total: n,
            length: Duration::from_secs_f64(t),
        }
    }

    /// When the ramp's cumulative count reaches `k` (from its start); past its end (never
    /// sent: the run stops there) when the ramp has fewer requests.
    pub fn time_of(&self, k: u64) -> Duration {
        let k = k as f64;
        if k >= self.total {
            return self.length + Duration::from_secs(3600);
        }
        for &(start, len, r0, r1, before) in &self.stages {
            let here = (r0 + r1) / 2.0 * len;
            if k < before + here {
                // n = r0 τ + a τ², a = (r1 - r0) / 2 len; the stable form of the root.
                let n = k - before;
                let a = (r1 - r0) / (2.0 * len);
                let disc = (r0 * r0 + 4.0 * a * n).max(0.0);
                let denom = r0 + disc.sqrt();
                let tau = if denom > 0.0 { 2.0 * n / denom } else { 0.0 };
                return Duration::from_secs_f64(start + tau.clamp(0.0, len));
            }
        }
        self.length
    }

    /// The ramp's length: the run's duration.
    pub fn length(&self) -> Duration {
        self.length
    }

    /// Its requests, for the report's mean rate.
    pub fn requests(&self) -> f64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LoadError;

    #[test]
    fn a_ramp_sends_its_area_at_its_rates() {
        let s = Duration::from_secs;
        // 0 -> 100 req/s over 10 s, 100 for 10 s, 100 -> 0 over 10 s: 500 + 1000 + 500.
        let r = Ramp::new(&[(s(10), 100.0), (s(10), 100.0), (s(10), 0.0)], 1.0);
        assert_eq!(r.requests(), 2000.0);
        assert_eq!(r.length(), s(30));
        let t = |k| r.time_of(k).as_secs_f64();
        // The first half: N(t) = 5 t^2, so the 500th request is due at 10 s, the 125th at 5 s.
        assert!((t(125) - 5.0).abs() < 1e-9, "{}", t(125));
        assert!((t(500) - 10.0).abs() < 1e-9);
        // The flat stage: 100 req/s.
        assert!((t(600) - 11.0).abs() < 1e-9);
        // The way down mirrors the way up.
        assert!((t(1875) - 25.0).abs() < 1e-9, "{}", t(1875));
        assert!(t(2000) > 30.0);
        // Due times never go back.
        assert!((0..2000).all(|k| t(k) <= t(k + 1)));
        // A constant rate is wrk2's schedule; a shard's share scales it.
        let c = Ramp::new(&[(s(2), 50.0), (s(8), 50.0)], 0.5);
        // 0 -> 25 req/s over 2 s: N(t) = 6.25 t^2, the second request (n = 1) at 0.4 s.
        assert!((c.time_of(1).as_secs_f64() - 0.4).abs() < 1e-9);
        let mut sched = Schedule::ramped(Instant::now(), 1, 4);
        let first = sched.next_due_on(Some(&r));
        assert_eq!(first, sched.start + r.time_of(1));
        assert_eq!(sched.peek_on(Some(&r)), sched.start + r.time_of(5));
    }

    #[test]
    fn urls_parse() {
        let t = Target::parse("http://127.0.0.1:8080/a/b?x=1#frag").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("127.0.0.1", 8080, "/a/b?x=1")
        );
        assert_eq!(t.host_header(), "127.0.0.1:8080");
        let t = Target::parse("HTTP://127.0.0.1").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        assert_eq!(t.host_header(), "127.0.0.1");
        let t = Target::parse("http://127.0.0.1?q").unwrap();
        assert_eq!(t.path, "/?q");
        let t = Target::parse("http://[::1]:81/").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 81));
        assert_eq!((t.addr, &t.addrs[..]), (t.addrs[0], &[t.addr][..]));
        let local = Target::parse("http://localhost:82/").unwrap();
        assert_eq!(local.addrs, shared::net::connect_order(local.addrs.clone()));
        assert_eq!(local.addr, local.addrs[0]);
        assert!(local
            .addrs
            .iter()
            .all(|a| a.port() == 82 && a.ip().is_loopback()));
        assert_eq!(t.host_header(), "[::1]:81");
        let s = Target::parse("HTTPS://127.0.0.1/p").unwrap();
        assert_eq!(
            (s.tls, s.port, s.host_header()),
            (true, 443, "127.0.0.1".into())
        );
        let s = Target::parse("https://127.0.0.1:8443").unwrap();
        assert_eq!((s.port, s.host_header()), (8443, "127.0.0.1:8443".into()));
        assert_eq!(
            Target::parse("http://127.0.0.1:443/")
                .unwrap()
                .host_header(),
            "127.0.0.1:443"
        );
        assert!(!t.tls);
        for bad in [
            "ftp://x/",
            "127.0.0.1/",
            "http://:80/",
            "http://h:x/",
            "http://h:0/",
            "http://u@h/",
        ] {
            assert!(
                matches!(Target::parse(bad), Err(LoadError::InvalidUrl { .. })),
                "{bad}"
            );
        }
    }

    /// A rate too small to schedule (only options built without the parser have one) puts
    /// the sends far off instead of overflowing the clock, which panicked the worker.
    #[test]
    fn a_due_time_past_the_clocks_end_is_far_off_not_a_panic() {
        let t0 = Instant::now();
        let year = Duration::from_secs(365 * 86_400);
        assert_eq!(first_due(t0, 2, 4.0), t0 + Duration::from_millis(500));
        for rate in [1e-19, 1e-300, 0.0, f64::NAN] {
            assert!(first_due(t0, 2, rate) > t0 + year, "{rate}");
        }
        let mut s = Schedule::new(t0, Duration::ZERO, 1e-300);
        assert_eq!(s.next_due(), t0);
        assert!(s.next_due() > t0 + year);
        assert!(s.peek() > t0 + year);
    }

    #[test]
    fn split_spreads_the_rest() {
        assert_eq!(split(10, 3), vec![4, 3, 3]);
        assert_eq!(split(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(split(7, 1), vec![7]);
    }

    #[test]
    fn schedule_is_a_clock() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut s = Schedule::new(t0, ms(3), 100.0);
        assert_eq!(s.next_due(), t0 + ms(3));
        assert_eq!(s.next_due(), t0 + ms(13));
        assert_eq!(s.peek(), t0 + ms(23));
        // Started over later: from its offset again, whatever was due before.
        s.restart(t0 + ms(500));
        assert_eq!(s.next_due(), t0 + ms(503));
        assert_eq!(s.peek(), t0 + ms(513));
    }

    /// The probe tries each address list once, in order, and every URL of the same host and
    /// port gets the same answer.
    #[test]
    fn settles_on_the_first_accepting_address() {
        let v6: SocketAddr = "[::1]:8080".parse().unwrap();
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let other: SocketAddr = "127.0.0.2:9".parse().unwrap();
        let req = |addrs: Vec<SocketAddr>| Request {
            target: Target {
                url: String::new(),
                tls: false,
                host: "localhost".into(),
                port: addrs[0].port(),
                path: "/".into(),
                addr: addrs[0],
                addrs,
            },
            bytes: Bytes::new(),
            method: RequestMethod::Other,
            idempotent: true,
            document_length: OnceLock::new(),
            server: OnceLock::new(),
            tls_session: OnceLock::new(),
        };
        let mut reqs = vec![req(vec![v6, v4]), req(vec![other]), req(vec![v6, v4])];
        let mut probed = Vec::new();
        settle_with(&mut reqs, |a| {
            probed.push(*a);
            *a == v4
        });
        assert_eq!(probed, [v6, v4]);
        let got: Vec<SocketAddr> = reqs.iter().map(|r| r.target.addr).collect();
        assert_eq!(got, [v4, other, v4]);
        // None accepts: the first stays.
        let mut reqs = vec![req(vec![v6, v4])];
        settle_with(&mut reqs, |_| false);
        assert_eq!(reqs[0].target.addr, v6);
    }
}
