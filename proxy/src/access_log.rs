//! The access log: off by default; `access_log = { path = "...", format = "combined" | "json" }`.
//!
//! - `combined` is nginx's format exactly: `$remote_addr - $remote_user [$time_local]
//!   "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`, with nginx's
//!   escaping (`"`, `\`, control and non-ASCII bytes as `\xHH`) and `-` for what is missing.
//!   Times are UTC (`+0000`).
//! - `json` is one object per line with the record's fields: the request, status, bytes both
//!   ways, request time, upstream addresses, statuses (the origin's, nginx's
//!   `$upstream_status`), header and response times, one entry per attempt as nginx lists
//!   them, cache status, fault kind.
//! - In both, the request line, Referer and User-Agent keep their first `FIELD_MAX` bytes,
//!   cut between UTF-8 characters and before escaping (an escape is never cut).
//!
//! Per worker: each worker has its own descriptor (O_APPEND) and its own buffer; a line is
//! formatted into the buffer, which is written when it holds `FLUSH_AT` bytes, on a coarse
//! tick (`FLUSH_TICK`), and at shutdown. A write holds whole lines, and O_APPEND writes do not
//! interleave, so workers never share a lock and lines never mix. SIGUSR1 reopens the file on
//! every worker (through the inbox): the buffer goes to the old file, new lines to the new.
//! A write that fails drops its lines (counted in `dropped`, reported at most once per few
//! seconds); the proxy keeps serving.
//!
//! A reload that changes `access_log` gives the new generation a log of its own (files the
//! reloader opened, one per worker: a path that cannot be opened rejects the reload before
//! any worker switches); requests keep writing to their generation's log, and the old file
//! is flushed and closed when the last request of its generation ends (as nginx's old
//! workers do). SIGUSR1 reopens the current generation's path.
//!
//! The file is opened O_NONBLOCK: a worker thread never waits on it. That changes nothing for
//! a regular file; a pipe or FIFO whose reader stops reading makes a write take what fits and
//! then say EAGAIN: the lines that did not fit are dropped and counted like failed ones
//! (`proxy_access_log_dropped_total`), instead of the write blocking the worker and every
//! connection it serves. A line a write cut is finished first at the next write (a FIFO
//! takes a write over 4 KiB in pieces), so lines never end up broken or mixed.

use crate::config::{AccessLogConfig, Config, LogFormat};
use crate::ip_text::IpText;
use crate::metrics::route_label;
use crate::metrics::{fault_index, FAULT_KINDS};
use crate::record::{Record, Tried};
use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Buffered bytes that trigger a write.
pub const FLUSH_AT: usize = 32 * 1024;
/// The longest a line waits in the buffer on a quiet worker.
pub const FLUSH_TICK: Duration = Duration::from_millis(500);
/// The longest request line, Referer or User-Agent kept for the log, in bytes as received
/// (before any escaping: an escape is never cut). A longer one keeps its first `FIELD_MAX`
/// bytes, fewer when that would cut a UTF-8 character (`cut_at`).
const FIELD_MAX: usize = 2048;

/// Open `cfg`'s file for appending, creating it; non-blocking (see the module's doc). A FIFO
/// no process reads is an error then (ENXIO), said as such, instead of an open that waits.
pub fn open_file(cfg: &AccessLogConfig) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // open(2) may wait on the file system (a slow or hung mount): never on a worker, whose
    // every connection would wait with it. Workers get their files opened by the thread
    // that starts them, the reloader, or the signal thread (SIGUSR1).
    debug_assert!(
        shared::runtime::current_driver().is_none(),
        "the access log opened on a worker thread"
    );
    OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&cfg.path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => std::io::Error::new(
                e.kind(),
                "a FIFO that no process has open for reading (ENXIO)",
            ),
            _ => e,
        })
}

/// `cfg`'s file opened once for each of `workers` (each worker writes through its own
/// descriptor), off the workers: at start, on a reload, on SIGUSR1.
pub fn open_per_worker(cfg: &AccessLogConfig, workers: usize) -> std::io::Result<Vec<File>> {
    (0..workers).map(|_| open_file(cfg)).collect()
}

/// The parts of a request the log shows, copied from its head before the head is consumed
/// (a connection's buffer, reused: no allocation once warm). Filled only when a log is on.
#[derive(Debug, Default)]
pub struct LogRequest {
    buf: Vec<u8>,
    /// Ends of the remote address, request line, Referer, User-Agent in `buf`.
    ends: [usize; 4],
    has: [bool; 4],
}

impl LogRequest {
    /// Take what the log needs from the request head at the front of `head` (the request
    /// line even when the rest is not a valid head).
    pub fn capture(&mut self, ip: &IpText, head: &[u8]) {
        self.buf.clear();
        self.has = [false; 4];
        self.put(0, ip.as_bytes());
        let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
        let line = head[..line_end]
            .strip_suffix(b"\r")
            .unwrap_or(&head[..line_end]);
        self.put(1, line);
        let (mut referer, mut agent): (&[u8], &[u8]) = (&[], &[]);
        let (mut has_r, mut has_a) = (false, false);
        let rest = head.get(line_end + 1..).unwrap_or(&[]);
        for l in rest.split(|&b| b == b'\n') {
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            if l.is_empty() {
                break;
            }
            let Some(colon) = l.iter().position(|&b| b == b':') else {
                continue;
            };
            let (name, value) = (&l[..colon], l[colon + 1..].trim_ascii());
            if name.eq_ignore_ascii_case(b"referer") && !has_r {
                (referer, has_r) = (value, true);
            } else if name.eq_ignore_ascii_case(b"user-agent") && !has_a {
                (agent, has_a) = (value, true);
            }
        }
        self.put(2, referer);
        self.has[2] = has_r;
        self.put(3, agent);
        self.has[3] = has_a;
    }

    /// [`capture`](Self::capture) of a head still arriving: its whole lines only (nginx logs
    /// a request line once it came whole, `-` before).
    pub fn capture_lines(&mut self, ip: &IpText, head: &[u8]) {
        let whole = head
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |nl| nl + 1);
        self.capture(ip, &head[..whole]);
    }

    fn put(&mut self, i: usize, v: &[u8]) {
        self.buf.extend_from_slice(&v[..cut_at(v)]);
        self.ends[i] = self.buf.len();
        self.has[i] = !v.is_empty();
    }

    /// Field `i`, `None` when absent.
    fn get(&self, i: usize) -> Option<&[u8]> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.has[i].then(|| &self.buf[start..self.ends[i]])
    }
}

/// How much of `v` the log keeps: all of it up to `FIELD_MAX` bytes, else `FIELD_MAX` bytes
/// less the start of a character the cut would split (UTF-8 continuation bytes, at most 3):
/// a UTF-8 value stays UTF-8, written as text and not byte by byte (`json_str`). A value
/// that is not UTF-8 loses at most 3 bytes more than it has to.
fn cut_at(v: &[u8]) -> usize {
    if v.len() <= FIELD_MAX {
        return v.len();
    }
    let is_continuation = |b: u8| b & 0xc0 == 0x80;
    (FIELD_MAX - 3..=FIELD_MAX)
        .rev()
        .find(|&at| !is_continuation(v[at]))
        .unwrap_or(FIELD_MAX)
}

/// One worker's access log.
pub struct AccessLog {
    cfg: AccessLogConfig,
    file: Option<File>,
    buf: Vec<u8>,
    /// The formatted time of second `time_of` (combined and ISO forms).
    time_of: u64,
    clf_time: [u8; 26],
    iso_time: [u8; 25],
    /// Lines lost: failed writes, and writes the file could not take without waiting. The
    /// worker's count, shared by each generation's log (a reload does not reset it).
    dropped: Rc<Cell<u64>>,
    /// `buf` starts with the rest of a line a write cut (its start is in the file).
    cut: bool,
    last_error: Option<std::io::Error>,
}

/// The path of the log `cfg` opened again for one worker (SIGUSR1), off the worker.
#[derive(Debug)]
pub struct Reopened {
    pub cfg: AccessLogConfig,
    pub file: File,
}

impl AccessLog {
    /// Open the log for one worker. A file that cannot be opened (checked once at start, so
    /// this is rare: a race with the file system) leaves the log dropping lines.
    pub fn open(cfg: &AccessLogConfig, dropped: Rc<Cell<u64>>) -> AccessLog {
        match open_file(cfg) {
            Ok(f) => AccessLog::with_file(cfg, f, dropped),
            Err(e) => {
                let mut log = AccessLog::with(cfg, None, dropped);
                log.last_error = Some(e);
                log
            }
        }
    }

    /// The log of `cfg` writing to `file`, opened (by `open_file`) off the worker.
    pub fn with_file(cfg: &AccessLogConfig, file: File, dropped: Rc<Cell<u64>>) -> AccessLog {
        AccessLog::with(cfg, Some(file), dropped)
    }

    fn with(cfg: &AccessLogConfig, file: Option<File>, dropped: Rc<Cell<u64>>) -> AccessLog {
        AccessLog {
            cfg: cfg.clone(),
            file,
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            time_of: u64::MAX,
            clf_time: [b' '; 26],
            iso_time: [b' '; 25],
            dropped,
            cut: false,
            last_error: None,
        }
    }

    /// What this log was opened for.
    pub fn config(&self) -> &AccessLogConfig {
        &self.cfg
    }

    fn lost(&self, lines: u64) {
        self.dropped.set(self.dropped.get() + lines);
    }

    /// Append the line for a finished request; write the buffer out when it is full.
    pub fn write(&mut self, cfg: &Config, r: &Record, req: &LogRequest, now: Instant) {
        self.tick_time();
        match self.cfg.format {
            LogFormat::Combined => self.combined(r, req),
            LogFormat::Json => self.json(cfg, r, req, now),
        }
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Write out what is buffered, without waiting: what the file does not take is dropped
    /// (see `stopped_at`).
    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let Some(f) = &mut self.file else {
            return self.stopped_at(0, std::io::Error::other("the log file is not open"));
        };
        let mut at = 0;
        while at < self.buf.len() {
            match f.write(&self.buf[at..]) {
                Ok(0) => return self.stopped_at(at, std::io::ErrorKind::WriteZero.into()),
                Ok(n) => at += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let full = std::io::Error::new(
                        e.kind(),
                        "the log takes no more for now (a pipe or FIFO whose reader is not reading)",
                    );
                    return self.stopped_at(at, full);
                }
                Err(e) => return self.stopped_at(at, e),
            }
        }
        self.buf.clear();
        self.cut = false;
    }

    /// A write stopped after `at` bytes of the buffer. The rest of a line it cut stays, to be
    /// written first next time (a line is never left broken while the file takes more); the
    /// lines after it are dropped and counted.
    fn stopped_at(&mut self, at: usize, e: std::io::Error) {
        let cut = match at {
            0 => self.cut,
            _ => self.buf[at - 1] != b'\n',
        };
        let keep_to = match self.buf[at..].iter().position(|&b| b == b'\n') {
            Some(nl) if cut => at + nl + 1,
            _ if cut => self.buf.len(),
            _ => at,
        };
        let lost = self.buf[keep_to..].iter().filter(|&&b| b == b'\n').count();
        self.lost(lost as u64);
        self.buf.truncate(keep_to);
        self.buf.drain(..at);
        self.cut = cut;
        self.last_error = Some(e);
    }

    /// Flush to the current file, then go on in `file`, the path opened again off the
    /// worker (logrotate renamed the file). A line the old file took only part of is
    /// dropped: its rest would start the new file with half a line.
    pub fn reopen_with(&mut self, file: File) {
        self.flush();
        if self.cut {
            self.lost(1);
            self.buf.clear();
            self.cut = false;
        }
        self.file = Some(file);
    }

    /// The last write error, taken (for a rate-limited error line).
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.last_error.take()
    }

    fn tick_time(&mut self) {
        let secs = shared::clock::coarse_unix_secs();
        if secs == self.time_of {
            return;
        }
        self.time_of = secs;
        let d = crate::http_date::imf_fixdate(secs);
        // "Mon, 30 Nov 2026 19:37:12 GMT" -> "30/Nov/2026:19:37:12 +0000"
        let mut c = *b"01/Jan/1970:00:00:00 +0000";
        c[0..2].copy_from_slice(&d[5..7]);
        c[3..6].copy_from_slice(&d[8..11]);
        c[7..11].copy_from_slice(&d[12..16]);
        c[12..20].copy_from_slice(&d[17..25]);
        self.clf_time = c;
        // -> "2026-11-30T19:37:12+00:00"
        const MONTHS: [&[u8; 3]; 12] = [
            b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
            b"Dec",
        ];
        let m = MONTHS.iter().position(|m| m[..] == d[8..11]).unwrap_or(0) + 1;
        let mut i = *b"1970-01-01T00:00:00+00:00";
        i[0..4].copy_from_slice(&d[12..16]);
        i[5] = b'0' + (m / 10) as u8;
        i[6] = b'0' + (m % 10) as u8;
        i[8..10].copy_from_slice(&d[5..7]);
        i[11..19].copy_from_slice(&d[17..25]);
        self.iso_time = i;
    }

    fn combined(&mut self, r: &Record, req: &LogRequest) {
        let b = &mut self.buf;
        plain_or_dash(b, req.get(0));
        b.extend_from_slice(b" - - [");
        b.extend_from_slice(&self.clf_time);
        b.extend_from_slice(b"] \"");
        escaped_or_dash(b, req.get(1));
        let _ = write!(b, "\" {} {} \"", r.final_status(), r.body_bytes());
        escaped_or_dash(b, req.get(2));
        b.extend_from_slice(b"\" \"");
        escaped_or_dash(b, req.get(3));
        b.extend_from_slice(b"\"\n");
    }

    fn json(&mut self, cfg: &Config, r: &Record, req: &LogRequest, now: Instant) {
        let b = &mut self.buf;
        b.extend_from_slice(b"{\"time\":\"");
        b.extend_from_slice(&self.iso_time);
        b.extend_from_slice(b"\",\"remote_addr\":");
        json_str(b, req.get(0));
        b.extend_from_slice(b",\"request\":");
        json_str(b, req.get(1));
        let request_time = r.duration(now);
        let _ = write!(
            b,
            ",\"status\":{},\"request_length\":{},\"bytes_sent\":{},\"body_bytes_sent\":{},\"request_time\":{:.6}",
            r.final_status(),
            r.bytes_in,
            r.bytes_out,
            r.body_bytes(),
            request_time.as_secs_f64()
        );
        b.extend_from_slice(b",\"route\":");
        match r.route {
            Some(_) => json_str(b, Some(route_label(cfg, r.route).as_bytes())),
            None => b.extend_from_slice(b"null"),
        }
        upstream_addrs(b, cfg, r);
        per_attempt(b, "upstream_status", r, |t| Entry::Status(t.status));
        per_attempt(b, "upstream_header_time", r, |t| Entry::Secs(t.ttfb));
        per_attempt(b, "upstream_response_time", r, |t| Entry::Secs(t.time));
        b.extend_from_slice(b",\"cache\":");
        json_str(b, r.cache.map(|c| c.as_str().as_bytes()));
        b.extend_from_slice(b",\"fault\":");
        json_str(b, r.fault.map(|e| FAULT_KINDS[fault_index(e)].as_bytes()));
        b.extend_from_slice(b",\"referer\":");
        json_str(b, req.get(2));
        b.extend_from_slice(b",\"user_agent\":");
        json_str(b, req.get(3));
        b.extend_from_slice(b"}\n");
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

fn plain_or_dash(b: &mut Vec<u8>, v: Option<&[u8]>) {
    b.extend_from_slice(v.unwrap_or(b"-"));
}

/// nginx's default escaping of a variable in a log line.
fn escaped_or_dash(b: &mut Vec<u8>, v: Option<&[u8]>) {
    let Some(v) = v else {
        b.push(b'-');
        return;
    };
    for &c in v {
        if c == b'"' || c == b'\\' || !(0x20..0x7f).contains(&c) {
            let _ = write!(b, "\\x{c:02X}");
        } else {
            b.push(c);
        }
    }
}

/// A JSON string (bytes that are not UTF-8 or are control characters as `\u00XX`), or null.
fn json_str(b: &mut Vec<u8>, v: Option<&[u8]>) {
    let Some(v) = v else {
        b.extend_from_slice(b"null");
        return;
    };
    b.push(b'"');
    json_escaped(b, v);
    b.push(b'"');
}

/// `v` as the inside of a JSON string.
fn json_escaped(b: &mut Vec<u8>, v: &[u8]) {
    // UTF-8 text passes as is; bytes of anything else are escaped one by one.
    let utf8 = std::str::from_utf8(v).is_ok();
    for &c in v {
        match c {
            b'"' => b.extend_from_slice(b"\\\""),
            b'\\' => b.extend_from_slice(b"\\\\"),
            0x80..=0xff if utf8 => b.push(c),
            0..=0x1f | 0x7f..=0xff => {
                let _ = write!(b, "\\u{:04x}", c);
            }
            _ => b.push(c),
        }
    }
}

/// `"upstream_addr"`: every attempt's server in order, `", "` between them, as nginx's
/// `$upstream_addr` lists them (a string, as nginx's is); null when no server was tried.
fn upstream_addrs(b: &mut Vec<u8>, cfg: &Config, r: &Record) {
    attempt_list(b, "upstream_addr", r, (b"\"", b", ", b"\""), |b, t| {
        // The record's ids are of its own generation's config: always found there.
        let s = cfg.groups.get(t.server.group);
        let name = s.and_then(|g| g.servers.get(t.server.server));
        json_escaped(b, name.map_or(&b"-"[..], |s| s.name.as_bytes()));
    });
}

/// One attempt's value in a [`per_attempt`] list.
enum Entry {
    /// A status; 0: none came.
    Status(u16),
    Secs(Option<Duration>),
}

/// `"key"`: an array with one entry per attempt, in order (nginx lists `$upstream_status` and
/// the upstream times so), null for what an attempt did not get: a request tried once has
/// one entry, and the type is the same either way. Null when no server was tried.
fn per_attempt(b: &mut Vec<u8>, key: &str, r: &Record, entry: impl Fn(Tried) -> Entry) {
    attempt_list(b, key, r, (b"[", b",", b"]"), |b, t| {
        let _ = match entry(t) {
            Entry::Status(0) | Entry::Secs(None) => write!(b, "null"),
            Entry::Status(s) => write!(b, "{s}"),
            Entry::Secs(Some(d)) => write!(b, "{:.6}", d.as_secs_f64()),
        };
    });
}

/// `"key"`: `each` attempt's value between `open` and `close`, `sep` between them; null when
/// no server was tried.
fn attempt_list(
    b: &mut Vec<u8>,
    key: &str,
    r: &Record,
    (open, sep, close): (&[u8], &[u8], &[u8]),
    mut each: impl FnMut(&mut Vec<u8>, Tried),
) {
    let _ = write!(b, ",\"{key}\":");
    if r.tried.is_none() {
        b.extend_from_slice(b"null");
        return;
    }
    b.extend_from_slice(open);
    for (i, t) in r.attempts().enumerate() {
        if i > 0 {
            b.extend_from_slice(sep);
        }
        each(b, t);
    }
    b.extend_from_slice(close);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_fields_are_taken_from_the_head() {
        let ip = IpText::new("10.0.0.7".parse().unwrap());
        let mut l = LogRequest::default();
        l.capture(
            &ip,
            b"GET /a?b HTTP/1.1\r\nHost: x\r\nuser-agent:  curl/8 \r\nReferer: http://r/\r\n\r\nBODY",
        );
        assert_eq!(l.get(0), Some(&b"10.0.0.7"[..]));
        assert_eq!(l.get(1), Some(&b"GET /a?b HTTP/1.1"[..]));
        assert_eq!(l.get(2), Some(&b"http://r/"[..]));
        assert_eq!(l.get(3), Some(&b"curl/8"[..]));
        l.capture(&ip, b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!((l.get(2), l.get(3)), (None, None));
        let mut b = Vec::new();
        escaped_or_dash(&mut b, Some(b"a\"b\\c\x01\xff"));
        assert_eq!(b, b"a\\x22b\\x5Cc\\x01\\xFF");
        let mut b = Vec::new();
        json_str(&mut b, Some(b"a\"b\\\n\xc3"));
        assert_eq!(b, b"\"a\\\"b\\\\\\u000a\\u00c3\"");
        let mut b = Vec::new();
        json_str(&mut b, Some("é".as_bytes()));
        assert_eq!(b, "\"é\"".as_bytes());
    }

    /// A value over the cap keeps whole characters and whole escapes: its JSON string parses
    /// to the value's first characters, its combined form ends with a whole `\xHH`.
    #[test]
    fn long_values_are_cut_between_characters() {
        let ip = IpText::new("10.0.0.7".parse().unwrap());
        let a = |n| "a".repeat(n);
        let cases = [
            // (value, kept): a cut inside a 2-, 3- and 4-byte character, at a boundary, an
            // escaped byte and a quote right at the cap, bytes that are not UTF-8.
            (a(2047) + "é", a(2047)),
            ("日".repeat(700), "日".repeat(682)),
            (a(2045) + "😀", a(2045)),
            (a(2048) + "é", a(2048)),
            (a(2047) + "\u{1}\"zzz", a(2047) + "\u{1}"),
            (a(2047) + "\"\u{1}", a(2047) + "\""),
            ("é".repeat(1100), "é".repeat(1024)),
        ];
        for (value, kept) in cases {
            let mut l = LogRequest::default();
            l.capture(
                &ip,
                format!("GET / HTTP/1.1\r\nUser-Agent: {value}\r\n\r\n").as_bytes(),
            );
            let mut b = Vec::new();
            json_str(&mut b, l.get(3));
            let got: String = serde_json::from_slice(&b).expect("a JSON string");
            let (got_len, len) = (got.len(), value.len());
            assert!(got == kept, "{got_len} bytes kept of {len}: {}", tail(&b));
        }
        // Not UTF-8: no character to keep whole (four continuation bytes before the cap):
        // cut at the cap, every byte escaped whole.
        let v = [&a(2044).into_bytes()[..], &[0xff], &[0x80; 5]].concat();
        let mut l = LogRequest::default();
        let head = [&b"GET / HTTP/1.1\r\nUser-Agent: "[..], &v, b"\r\n\r\n"].concat();
        l.capture(&ip, &head);
        let mut b = Vec::new();
        json_str(&mut b, l.get(3));
        let got: String = serde_json::from_slice(&b).expect("a JSON string");
        assert!(got == a(2044) + "\u{ff}\u{80}\u{80}\u{80}", "{}", tail(&b));
        let mut b = Vec::new();
        escaped_or_dash(&mut b, l.get(3));
        assert!(b.ends_with(b"a\\xFF\\x80\\x80\\x80"), "{}", tail(&b));
    }

    fn tail(b: &[u8]) -> String {
        String::from_utf8_lossy(&b[b.len().saturating_sub(24)..]).into_owned()
    }

    fn log_at(path: &std::path::Path) -> AccessLog {
        let cfg = AccessLogConfig {
            path: path.to_path_buf(),
            format: LogFormat::Combined,
        };
        AccessLog::open(&cfg, Rc::default())
    }

    #[test]
    fn a_cut_line_is_kept_whole_and_the_lines_after_it_counted() {
        let dir = std::env::temp_dir().join(format!("proxy-log-cut-{}", std::process::id()));
        let mut log = log_at(&dir.join("never-opened/x.log"));
        assert!(log.take_error().is_some(), "no such directory");
        for (at, kept, lost) in [(0, "", 3), (4, "", 2), (5, "bb\n", 1), (11, "\n", 0)] {
            log.buf = b"aaa\nbbb\nccc\n".to_vec();
            log.dropped.set(0);
            log.cut = false;
            log.stopped_at(at, std::io::ErrorKind::WouldBlock.into());
            assert_eq!(
                (log.buf.as_slice(), log.dropped.get()),
                (kept.as_bytes(), lost),
                "at {at}"
            );
        }
        // A buffer that starts with the rest of a cut line keeps it even when nothing is
        // written.
        log.buf = b"aa\nbbb\n".to_vec();
        log.dropped.set(0);
        log.cut = true;
        log.stopped_at(0, std::io::ErrorKind::WouldBlock.into());
        assert_eq!(
            (log.buf.as_slice(), log.dropped.get(), log.cut),
            (&b"aa\n"[..], 1, true)
        );
        // No file: everything buffered is dropped.
        log.buf = b"aaa\nbbb\n".to_vec();
        log.dropped.set(0);
        log.cut = false;
        log.flush();
        assert_eq!((log.buf.len(), log.dropped.get()), (0, 2));
    }

    /// A FIFO whose reader never reads: the writes stop waiting once the pipe is full, the
    /// lines that did not fit are counted, and what reached the pipe is whole lines only.
    #[test]
    fn a_pipe_nobody_reads_never_blocks_a_flush() {
        use std::io::Read;
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        let dir = std::env::temp_dir().join(format!("proxy-log-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fifo");
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo(3) and open(2) with a NUL-terminated path; the fd is checked.
        let fd = unsafe {
            assert_eq!(libc::mkfifo(c.as_ptr(), 0o600), 0);
            libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK)
        };
        assert!(fd >= 0);
        // SAFETY: a new descriptor that nothing else owns.
        let mut reader = unsafe { File::from_raw_fd(fd) };
        let mut log = log_at(&path);
        assert!(
            log.take_error().is_none(),
            "the FIFO opens: it has a reader"
        );
        let line = format!("{}\n", "x".repeat(99));
        let lines = 5000;
        for _ in 0..lines {
            log.buf.extend_from_slice(line.as_bytes());
            if log.buf.len() >= FLUSH_AT {
                log.flush();
            }
        }
        log.flush();
        assert!(log.dropped.get() > 0, "500 KB went into a 64 KiB pipe");
        let e = log
            .take_error()
            .expect("the error is kept for the log line");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
        let mut got = Vec::new();
        let _ = reader.read_to_end(&mut got);
        let cut = log.buf.clone();
        let _ = std::fs::remove_dir_all(&dir);
        // What the pipe holds and the rest of the line it cut, if any, are whole lines.
        let mut all = got.clone();
        all.extend_from_slice(&cut);
        assert!(
            all.chunks(line.len()).all(|l| l == line.as_bytes()),
            "broken lines"
        );
        let whole = (all.len() / line.len()) as u64;
        assert_eq!(
            whole + log.dropped.get(),
            lines as u64,
            "every line written or counted"
        );
    }
}
