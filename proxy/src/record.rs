//! The outcome record: one value per request, filled as the request goes and consumed once,
//! when it ends (`client::requests`; a WebSocket tunnel's when the tunnel closes,
//! `client::TunnelEnd`), by the worker's running totals (`ProxyCounters`: requests,
//! errors by side, cache statuses), its metrics and its access log. Whatever
//! the action (proxied, cached, `return`, static, an error the proxy answers itself), the
//! record is finished in that one place.
//!
//! - The status and the head length are read from the first bytes written for the response
//!   (every response the proxy writes starts with its whole head in one write): the write
//!   sites only say what they wrote, never what it meant.
//! - A request that got no response (the client went away, or the proxy closed without an
//!   answer) is recorded with status 499, as nginx logs it.
//! - Bytes written are counted once the write completed; of a write that failed, the bytes
//!   the socket took before it failed (`wrote_partly`).
//! - Plain fields, no allocation for a request tried once: the record lives in the client
//!   connection and is reset per request. The last upstream attempt is held in plain fields;
//!   a retry moves the one before into `earlier`, the only field that allocates (nginx's
//!   `$upstream_addr`, `$upstream_status` and their like list one entry per attempt).

use crate::cache::CacheStatus;
use crate::config::{GroupId, RouteId, ServerId};
use crate::error::ProxyError;
use std::time::{Duration, Instant};

/// nginx's status for a request whose client closed before a response was sent.
pub const NO_RESPONSE: u16 = 499;

/// An upstream server (of a request's generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub group: GroupId,
    pub server: ServerId,
}

/// An upstream attempt that another one followed (a retry): its server and what came of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tried {
    pub server: Served,
    /// What it answered with (an answer dropped for a retry on its status); 0: nothing.
    pub status: u16,
    /// From its start to its response head, when it got one.
    pub ttfb: Option<Duration>,
    /// From its start to the next attempt's (when the request was timed).
    pub time: Option<Duration>,
}

/// One request's outcome.
#[derive(Debug, Clone)]
pub struct Record {
    /// When the request's first byte was seen (or its head parsed, when pipelined); `None`
    /// only in the placeholder a connection starts with (no clock read per connection).
    pub start: Option<Instant>,
    /// The route; `None`: the request was refused before routing (bad head, no route).
    pub route: Option<RouteId>,
    /// The response status (0 until the head is written), or the status nginx logs for a
    /// request it ends without an answer (`unanswered`).
    pub status: u16,
    /// Bytes of the response head.
    pub head_out: u64,
    /// Bytes of the request (its head and its body as read, chunk framing included; no more
    /// than a declared length: see `client::settle`) and of the response (head and body).
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// What went wrong, if anything did.
    pub fault: Option<ProxyError>,
    pub upstream: Option<Served>,
    /// The status `upstream` answered with (nginx's `$upstream_status`: the origin's, which
    /// the client's may not be, as a 304 that revalidated a stored answer, or a 200 whose
    /// client went away), or 502/504 for an attempt its server failed with no answer, as
    /// nginx logs it (`upstream` is `None` then: not an answer for the metrics); 0 while
    /// none came.
    pub upstream_status: u16,
    /// The last server an attempt went to, whether it answered or not: the access log's
    /// `upstream_addr` (nginx keeps `$upstream_addr` for a failed attempt too).
    pub tried: Option<Served>,
    /// The attempts before the last, in order (`tried` and the `upstream_*` fields are the
    /// last one's). Empty, and so no allocation, unless the request was retried.
    pub earlier: Vec<Tried>,
    /// When the last attempt began (its connect included): on the server that answered, or
    /// on the last one tried when none did.
    pub upstream_sent: Option<Instant>,
    /// From then to the upstream's response head (nginx's `$upstream_header_time`).
    pub upstream_ttfb: Option<Duration>,
    /// From then to the end of the upstream's response (`$upstream_response_time`); set
    /// only when an access log shows it.
    pub upstream_time: Option<Duration>,
    /// Set on cached routes.
    pub cache: Option<CacheStatus>,
    /// Refused by the route's access rules or a rate limit.
    pub refused: Option<crate::limit::Refusal>,
    /// Find the response head's length (for the access log's body bytes): a scan of the head
    /// that metrics alone do not need.
    pub measure_head: bool,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            start: None,
            route: None,
            status: 0,
            head_out: 0,
            bytes_in: 0,
            bytes_out: 0,
            fault: None,
            upstream: None,
            upstream_status: 0,
            tried: None,
            earlier: Vec::new(),
            upstream_sent: None,
            upstream_ttfb: None,
            upstream_time: None,
            cache: None,
            refused: None,
            measure_head: true,
        }
    }
}

impl Record {
    pub fn new(start: Instant) -> Record {
        Record {
            start: Some(start),
            ..Record::default()
        }
    }

    /// An attempt on `server` begins, `now` when the request is timed: the one before it,
    /// if any, goes to `earlier` with what came of it, timed up to its end when it had one
    /// (a 304 that matched nothing stored, refetched), else up to `now`. The new attempt has
    /// no answer yet: a refetch that fails must count no answer of the server before it.
    pub fn attempt(&mut self, server: Served, now: Option<Instant>) {
        if let Some(before) = self.tried.replace(server) {
            let spent = self.upstream_sent.zip(now);
            let spent = spent.map(|(t, now)| now.saturating_duration_since(t));
            self.upstream = None;
            self.earlier.push(Tried {
                server: before,
                status: std::mem::take(&mut self.upstream_status),
                ttfb: self.upstream_ttfb.take(),
                time: self.upstream_time.take().or(spent),
            });
        }
    }

    /// A copy for the metrics, which count the last attempt alone: without `earlier` (no
    /// allocation).
    pub fn counted(&self) -> Record {
        Record {
            earlier: Vec::new(),
            ..*self
        }
    }

    /// Every attempt in order, the last included, with what came of it; the last one's
    /// `time` is `upstream_time`.
    pub fn attempts(&self) -> impl Iterator<Item = Tried> + '_ {
        let last = self.tried.map(|server| Tried {
            server,
            status: self.upstream_status,
            ttfb: self.upstream_ttfb,
            time: self.upstream_time,
        });
        self.earlier.iter().copied().chain(last)
    }

    /// The upstream's part ended at `now` (its answer relayed, a 304 taken, a tunnel closed,
    /// a server that never answered given up on): `upstream_time` runs from the last
    /// attempt's start, as nginx's `$upstream_response_time`.
    pub fn upstream_ended(&mut self, now: Instant) {
        self.upstream_time = self.upstream_sent.map(|t| now.saturating_duration_since(t));
    }

    /// `bytes` went to the client. The first bytes of a response carry its whole head: its
    /// status and length are taken from them (interim 1xx heads other than 101 are counted
    /// as bytes only).
    pub fn wrote(&mut self, bytes: &[u8]) {
        self.bytes_out += bytes.len() as u64;
        if self.status != 0 {
            return;
        }
        let Some(status) = status_of(bytes) else {
            return;
        };
        if (100..200).contains(&status) && status != 101 {
            // Interim heads (103 Early Hints) sent alone, or in front of the final head.
            let end = bytes.windows(4).position(|w| w == b"\r\n\r\n");
            let Some(end) = end.map(|e| e + 4).filter(|&e| e < bytes.len()) else {
                self.head_out += bytes.len() as u64;
                return;
            };
            self.head_out += end as u64;
            self.bytes_out -= (bytes.len() - end) as u64;
            return self.wrote(&bytes[end..]);
        }
        self.status = status;
        if self.measure_head {
            self.head_out += head_len(bytes) as u64;
        }
    }

    /// `n` body bytes went to the client (sendfile, a stored body).
    pub fn wrote_body(&mut self, n: u64) {
        self.bytes_out += n;
    }

    /// A write to the client failed after its first `n` bytes went: `sent` is what it wrote
    /// when the failure gave the buffer back (a head among the bytes is read as `wrote`
    /// reads it); `None` when a timeout took the buffer: the bytes are counted, a head among
    /// them (a head written into a full socket, rare) is not read.
    pub fn wrote_partly(&mut self, sent: Option<&[u8]>, n: usize) {
        match sent {
            Some(b) => self.wrote(&b[..n.min(b.len())]),
            None => self.wrote_body(n as u64),
        }
    }

    /// The request ended before any answer, and none goes: it is logged and counted with
    /// nginx's `status` for it (a head the client cut with its end: 400), 0 bytes sent.
    pub fn unanswered(&mut self, status: u16) {
        if self.status == 0 {
            self.status = status;
        }
    }

    /// Note a failure (the first one stays: it is what ended the request).
    pub fn failed(&mut self, e: ProxyError) {
        self.fault.get_or_insert(e);
    }

    /// The status to report: the one sent, or 499 when none was.
    pub fn final_status(&self) -> u16 {
        if self.status == 0 {
            NO_RESPONSE
        } else {
            self.status
        }
    }

    /// From the request's first byte to `now`.
    pub fn duration(&self, now: Instant) -> Duration {
        self.start
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }

    /// Bytes of the response body sent (nginx's `$body_bytes_sent`).
    pub fn body_bytes(&self) -> u64 {
        self.bytes_out.saturating_sub(self.head_out)
    }
}

/// The status of a response head at the front of `b` ("HTTP/1.1 200 ...").
fn status_of(b: &[u8]) -> Option<u16> {
    if b.len() < 12 || !b.starts_with(b"HTTP/") || b[8] != b' ' {
        return None;
    }
    let d = &b[9..12];
    if !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(d.iter().fold(0u16, |n, &c| n * 10 + u16::from(c - b'0')))
}

/// Length of the head at the front of `b` (through its empty line), or all of `b`.
fn head_len(b: &[u8]) -> usize {
    b.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(b.len(), |p| p + 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(i: usize) -> Served {
        Served {
            group: GroupId::new(0),
            server: ServerId::new(i),
        }
    }

    #[test]
    fn attempts_are_listed_in_order_and_one_allocates_nothing() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut r = Record::new(t0);
        assert_eq!(r.attempts().count(), 0);
        r.attempt(server(0), None);
        r.upstream_sent = Some(t0);
        r.upstream_status = 502;
        r.upstream_ttfb = Some(ms(1));
        assert_eq!(
            r.earlier.capacity(),
            0,
            "a request tried once allocates nothing"
        );
        // A retry: the first attempt is timed up to the second's start.
        r.attempt(server(1), Some(t0 + ms(5)));
        r.upstream_sent = Some(t0 + ms(5));
        r.upstream_status = 200;
        r.upstream_time = Some(ms(2));
        let got: Vec<Tried> = r.attempts().collect();
        let want = [
            Tried {
                server: server(0),
                status: 502,
                ttfb: Some(ms(1)),
                time: Some(ms(5)),
            },
            Tried {
                server: server(1),
                status: 200,
                ttfb: None,
                time: Some(ms(2)),
            },
        ];
        assert_eq!(got, want);
        // The metrics' copy counts the last attempt alone.
        assert!(r.counted().earlier.is_empty());
    }

    /// A 304 that matched no stored response ended its exchange (`upstream_time` set, its
    /// server the one that answered); the refetch that follows is a new attempt, which must
    /// not inherit them: a refetch that fails is timed on its own server and counts no
    /// answer.
    #[test]
    fn a_new_attempt_starts_with_no_answer_and_no_time() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut r = Record::new(t0);
        r.attempt(server(0), Some(t0));
        r.upstream_sent = Some(t0);
        r.upstream = Some(server(0));
        r.upstream_status = 304;
        r.upstream_time = Some(ms(3));
        r.attempt(server(1), Some(t0 + ms(4)));
        assert_eq!(
            (
                r.upstream,
                r.upstream_status,
                r.upstream_ttfb,
                r.upstream_time
            ),
            (None, 0, None, None)
        );
        assert_eq!(r.earlier[0].status, 304);
    }

    #[test]
    fn status_and_head_come_from_the_first_write() {
        let cont = b"HTTP/1.1 100 Continue\r\n\r\n";
        let head = b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\n";
        let more = b"HTTP/1.1 200 OK\r\n\r\n";
        let mut r = Record::default();
        r.wrote(cont);
        assert_eq!((r.status, r.final_status()), (0, 499));
        r.wrote(&[&head[..], b"abc"].concat());
        assert_eq!(r.status, 404);
        // Interim heads in front of the final head, in one write.
        let mut early = Record::default();
        early.wrote(&[&b"HTTP/1.1 103 Early Hints\r\n\r\n"[..], head, b"abc"].concat());
        assert_eq!(
            (early.status, early.bytes_out),
            (404, 28 + head.len() as u64 + 3)
        );
        // Later writes are body bytes, whatever they look like.
        r.wrote(more);
        r.wrote_body(10);
        assert_eq!(r.status, 404);
        let (c, h, m) = (cont.len() as u64, head.len() as u64, more.len() as u64);
        assert_eq!(r.bytes_out, c + h + 3 + m + 10);
        assert_eq!(r.head_out, c + h);
        assert_eq!(r.body_bytes(), 3 + m + 10);
        let mut r = Record::default();
        r.wrote(b"garbage");
        r.failed(ProxyError::ClientGone);
        r.failed(ProxyError::UpstreamIo);
        assert_eq!(
            (r.final_status(), r.fault),
            (499, Some(ProxyError::ClientGone))
        );
    }
}
