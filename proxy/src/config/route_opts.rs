//! A proxied route's own upstream options (issue 27 c): `strip_prefix`, `request_headers`,
//! `response_headers`, `timeouts` and `retry`. Each value is checked as it is read (its error
//! names the file, line and key) and turned into its runtime form here, once per config: the
//! header edits pre-rendered as the bytes every request copies, the retry conditions as a
//! bitset. A route with none of them has no [`RouteOpts`] at all (`Route::opts` is `None`),
//! so a request on it pays one `Option` test.

use super::Timeouts;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use shared::http::framing::{is_hop_by_hop, is_token};
use shared::http::target::route_path;
use shared::units::serde_units::de_positive_duration;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// What a route adds to the plain forwarding of its requests.
#[derive(Debug, Clone, Default)]
pub struct RouteOpts {
    /// `strip_prefix = true`: the route's prefix as routing matches it, this many bytes of the
    /// decoded path (`route_path`), is removed before the request goes upstream.
    pub strip: Option<usize>,
    /// `request_headers`: applied to the upstream request head.
    pub request: Option<HeaderEdits>,
    /// `response_headers`: applied to the client's response head.
    pub response: Option<HeaderEdits>,
    /// `timeouts`: the route's own upstream timeouts, merged over `[timeouts]` (and the flags)
    /// once the whole config is known (`merge_timeouts`).
    pub timeouts: Option<Timeouts>,
    /// The keys the route set itself, kept so a reload merges them again.
    pub own_timeouts: Option<RouteTimeouts>,
    /// `retry`: `None` keeps the built-in rule (connect failures, and an idempotent request
    /// whose connection closed before any answer).
    pub retry: Option<RetryPolicy>,
    /// `request_buffering = false`: a request body streams to the upstream from its first
    /// byte instead of being read whole first when it fits in 64 KiB (see
    /// `exchange::upstream_answer`).
    pub stream_body: bool,
}

impl RouteOpts {
    /// Whether any option is set (a route without one carries no `RouteOpts`).
    pub fn any(&self) -> bool {
        self.strip.is_some()
            || self.request.is_some()
            || self.response.is_some()
            || self.own_timeouts.is_some()
            || self.retry.is_some()
            || self.stream_body
    }

    /// Fill `timeouts` from the route's own keys over `global`.
    pub fn merge_timeouts(&mut self, global: &Timeouts) {
        self.timeouts = self.own_timeouts.map(|own| Timeouts {
            connect: own.connect.unwrap_or(global.connect),
            read: own.read.unwrap_or(global.read),
            upstream_send: own.upstream_send.unwrap_or(global.upstream_send),
            ..global.clone()
        });
    }
}

impl RouteOpts {
    /// A route entry's options, checked: `None` when it sets none. `Err`: the key at fault
    /// and why (they go on a route with `upstream` only).
    pub(super) fn of(
        r: &super::schema::RouteEntry,
    ) -> Result<Option<Arc<RouteOpts>>, (&'static str, String)> {
        let strip = r.strip_prefix.as_ref().filter(|s| *s.get_ref());
        let opts = RouteOpts {
            // The prefix as routing compares it: decoded.
            strip: strip.map(|_| {
                let mut scratch = Vec::new();
                route_path(r.path.as_bytes(), &mut scratch).map_or(r.path.len(), |p| p.path.len())
            }),
            request: r.request_headers.clone(),
            response: r.response_headers.clone(),
            timeouts: None,
            own_timeouts: r.timeouts.as_ref().map(|t| *t.get_ref()),
            retry: r.retry.clone(),
            stream_body: r.request_buffering.as_ref().is_some_and(|b| !*b.get_ref()),
        };
        if !opts.any() {
            return Ok(None);
        }
        let answers = r.return_.is_some() || r.static_.is_some();
        if r.upstream.is_none() && !(answers && opts.response.is_some() && only_response(&opts)) {
            let keys = [
                ("strip_prefix", strip.is_some()),
                ("request_headers", opts.request.is_some()),
                ("response_headers", opts.response.is_some()),
                ("timeouts", opts.own_timeouts.is_some()),
                ("retry", opts.retry.is_some()),
                ("request_buffering", opts.stream_body),
            ];
            let key = keys.iter().find(|k| k.1).map_or("upstream", |k| k.0);
            let m = match key {
                "response_headers" => "`response_headers` goes on a route with `upstream`, \
                                       `return` or `static`"
                    .to_string(),
                _ => format!(
                    "`{key}` goes on a route with `upstream` (a `return` or `static` route \
                     does not forward its requests)"
                ),
            };
            return Err((key, m));
        }
        Ok(Some(Arc::new(opts)))
    }
}

/// Whether `response_headers` is the only option set.
fn only_response(o: &RouteOpts) -> bool {
    o.strip.is_none()
        && o.request.is_none()
        && o.own_timeouts.is_none()
        && o.retry.is_none()
        && !o.stream_body
}

/// Routes with their own `timeouts` take the others from `[timeouts]` as the flags left them
/// (run once the flags are applied, and again on every reload).
pub(super) fn merge_route_timeouts(cfg: &mut super::Config) {
    let global = cfg.timeouts.clone();
    for r in cfg.routes.iter_mut() {
        if let Some(o) = r.opts.as_mut().filter(|o| o.own_timeouts.is_some()) {
            Arc::make_mut(o).merge_timeouts(&global);
        }
    }
}

/// `set` and `remove` of one direction, ready to apply: every field the peer sent whose name
/// is in `names` is dropped, then `block` (the `set` fields, `Name: value\r\n` each) is
/// appended. So `set` replaces every copy with one line, `remove` drops every copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderEdits {
    /// The `set` fields, rendered once.
    pub block: Box<[u8]>,
    /// The names of `set` and `remove` (as written; compared without case).
    pub names: Box<[Box<str>]>,
    /// `set` writes Host (requests: the client's and the server's name are not written).
    pub sets_host: bool,
}

impl HeaderEdits {
    /// Whether a field named `name` is replaced or removed.
    pub fn drops(&self, name: &str) -> bool {
        self.names
            .iter()
            .any(|n| n.len() == name.len() && n.eq_ignore_ascii_case(name))
    }
}

impl HeaderEdits {
    /// Apply the edits to a head in `out[from..]`: a status line and field lines, then the
    /// empty line and what follows it if they are there yet (a `return`'s whole answer), or
    /// not (a stored response's head being written). Every field they name is dropped, their
    /// `set` lines go after the last field. In place: the buffer grows by the block at most.
    pub fn apply_to_head(&self, out: &mut bytes::BytesMut, from: usize) {
        let find = |buf: &[u8], pat: &[u8]| buf.windows(pat.len()).position(|w| w == pat);
        let Some(line) = find(&out[from..], b"\r\n") else {
            return;
        };
        let mut at = from + line + 2;
        // Where the fields end: before the empty line, or at the end.
        let mut end = find(&out[at - 2..], b"\r\n\r\n").map_or(out.len(), |i| at + i);
        while at < end {
            let next = find(&out[at..end], b"\r\n").map_or(end, |i| at + i + 2);
            let name = out[at..next]
                .split(|&b| b == b':')
                .next()
                .unwrap_or_default();
            if self.drops(std::str::from_utf8(name).unwrap_or_default()) {
                out.copy_within(next.., at);
                out.truncate(out.len() - (next - at));
                end -= next - at;
            } else {
                at = next;
            }
        }
        let n = self.block.len();
        out.extend_from_slice(&self.block);
        out[end..].rotate_right(n);
    }
}

/// Which side the edits are for: the fields neither side may touch differ a little.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Request,
    Response,
}

/// The names no edit may set or remove: the framing and the connection's own fields are the
/// proxy's to write. `Host` may be set on requests (nginx's `proxy_set_header Host`), never
/// removed.
fn refused(name: &str, side: Side, removing: bool) -> Option<&'static str> {
    let framing = ["content-length", "transfer-encoding"];
    if is_hop_by_hop(name) || framing.iter().any(|f| f.eq_ignore_ascii_case(name)) {
        return Some("a hop-by-hop or framing field, written by the proxy itself");
    }
    match side {
        Side::Request if name.eq_ignore_ascii_case("host") && removing => {
            Some("a request always has a Host (set it instead)")
        }
        Side::Request if name.eq_ignore_ascii_case("expect") => {
            Some("answered by the proxy itself (100-continue)")
        }
        _ => None,
    }
}

/// `{ set = { "Name" = "value" }, remove = ["Name"] }` as the file has it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditsEntry {
    #[serde(default)]
    set: BTreeMap<String, String>,
    #[serde(default)]
    remove: Vec<String>,
}

/// Check and render a `request_headers` / `response_headers` table.
pub fn header_edits(
    set: &BTreeMap<String, String>,
    remove: &[String],
    side: Side,
) -> Result<HeaderEdits, String> {
    let mut block = Vec::new();
    let mut names: Vec<Box<str>> = Vec::new();
    for (name, removing) in set
        .keys()
        .map(|n| (n, false))
        .chain(remove.iter().map(|n| (n, true)))
    {
        if !is_token(name.as_bytes()) {
            return Err(format!(
                "`{name}` is not a field name (letters, digits and !#$%&'*+-.^_`|~ only)"
            ));
        }
        if let Some(why) = refused(name, side, removing) {
            return Err(format!("`{name}` cannot be set or removed: {why}"));
        }
        if names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return Err(format!("`{name}` is named twice (in set or remove)"));
        }
        names.push(name.as_str().into());
    }
    for (name, value) in set {
        if let Some(b) = value
            .bytes()
            .find(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)
        {
            return Err(format!(
                "the value of `{name}` holds a control character (0x{b:02x}): no CR, LF or NUL"
            ));
        }
        if value.trim_matches([' ', '\t']) != value {
            return Err(format!(
                "the value of `{name}` starts or ends with whitespace"
            ));
        }
        block.extend_from_slice(name.as_bytes());
        block.extend_from_slice(b": ");
        block.extend_from_slice(value.as_bytes());
        block.extend_from_slice(b"\r\n");
    }
    Ok(HeaderEdits {
        block: block.into(),
        names: names.into(),
        sets_host: set.keys().any(|n| n.eq_ignore_ascii_case("host")),
    })
}

fn de_edits<'de, D: Deserializer<'de>>(d: D, side: Side) -> Result<HeaderEdits, D::Error> {
    let e = EditsEntry::deserialize(d)?;
    header_edits(&e.set, &e.remove, side).map_err(D::Error::custom)
}

pub(super) fn de_request_edits<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<HeaderEdits>, D::Error> {
    de_edits(d, Side::Request).map(Some)
}

pub(super) fn de_response_edits<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<HeaderEdits>, D::Error> {
    de_edits(d, Side::Response).map(Some)
}

/// A route's `timeouts`: the upstream side of `[timeouts]`, same keys and values. The client
/// side (`header`, `body`, `send`, `idle`, ...) is decided before a route is known, or is
/// the connection's, so it stays global (an unknown key here names the three allowed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteTimeouts {
    #[serde(default, deserialize_with = "de_some_duration")]
    pub connect: Option<Duration>,
    #[serde(default, deserialize_with = "de_some_duration")]
    pub read: Option<Duration>,
    #[serde(default, deserialize_with = "de_some_duration")]
    pub upstream_send: Option<Duration>,
}

fn de_some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_positive_duration(d).map(Some)
}

/// Why an attempt is retried: the `on` conditions (and the metrics' `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    /// Connecting failed (refused, unreachable, timed out), or the request could not be
    /// written at all: nothing reached the server, so any method may go again.
    Connect,
    /// No response head within the read timeout.
    Timeout,
    /// The connection closed or reset before any byte of a response.
    Reset,
    /// The server answered with a status listed in `on`.
    Status,
    /// A pooled connection had gone stale (closed by the origin while idle): the request goes
    /// again on a fresh connection. Not a try, and not charged to the budget.
    Stale,
}

impl RetryReason {
    pub const ALL: [RetryReason; 5] = [
        RetryReason::Connect,
        RetryReason::Timeout,
        RetryReason::Reset,
        RetryReason::Status,
        RetryReason::Stale,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RetryReason::Connect => "connect",
            RetryReason::Timeout => "timeout",
            RetryReason::Reset => "reset",
            RetryReason::Status => "status",
            RetryReason::Stale => "stale",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// A route's `retry`: how many tries, on what, for which methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (nginx's `proxy_next_upstream_tries`).
    pub tries: u32,
    pub connect: bool,
    pub timeout: bool,
    pub reset: bool,
    /// Statuses 400..=599 that are retried, a bit each (`status - 400`).
    pub statuses: [u64; 4],
    /// `methods = "all"`: non-idempotent requests are retried on every condition too, not
    /// only on connect failures.
    pub all_methods: bool,
}

impl RetryPolicy {
    /// The built-in rule, for routes without `retry`: connect failures and (idempotent
    /// requests) connections closed before an answer, each server once.
    pub const BUILT_IN: RetryPolicy = RetryPolicy {
        tries: u32::MAX,
        connect: true,
        timeout: false,
        reset: true,
        statuses: [0; 4],
        all_methods: false,
    };

    /// Whether a response with `status` is retried.
    pub fn on_status(&self, status: u16) -> bool {
        let Some(i) = status
            .checked_sub(400)
            .map(usize::from)
            .filter(|&i| i < 200)
        else {
            return false;
        };
        self.statuses[i / 64] & (1 << (i % 64)) != 0
    }

    /// Whether an attempt that failed for `why` may be followed by another, for a request
    /// whose method is `idempotent`.
    pub fn allows(&self, why: RetryReason, idempotent: bool) -> bool {
        let method_ok = idempotent || self.all_methods;
        match why {
            RetryReason::Connect => self.connect,
            RetryReason::Stale => true,
            RetryReason::Timeout => self.timeout && method_ok,
            RetryReason::Reset => self.reset && method_ok,
            RetryReason::Status => method_ok,
        }
    }
}

/// `retry = { tries = 3, on = [...], methods = "idempotent" }` as the file has it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryEntry {
    #[serde(default = "default_tries")]
    tries: i64,
    #[serde(default = "default_on")]
    on: Vec<String>,
    #[serde(default = "default_methods")]
    methods: String,
}

fn default_tries() -> i64 {
    3
}
fn default_on() -> Vec<String> {
    vec!["connect".into(), "reset".into()]
}
fn default_methods() -> String {
    "idempotent".into()
}

/// Most tries a route may ask for.
pub const MAX_TRIES: i64 = 10;

/// Check a `retry` table.
fn retry_policy(tries: i64, on: &[String], methods: &str) -> Result<RetryPolicy, String> {
    if !(1..=MAX_TRIES).contains(&tries) {
        return Err(format!(
            "tries = {tries}: expected 1 to {MAX_TRIES} (attempts in all, the first included)"
        ));
    }
    let all_methods = match methods {
        "idempotent" => false,
        "all" => true,
        m => {
            return Err(format!(
                "methods = \"{m}\": expected \"idempotent\" or \"all\""
            ))
        }
    };
    let mut p = RetryPolicy {
        tries: tries as u32,
        connect: false,
        timeout: false,
        reset: false,
        statuses: [0; 4],
        all_methods,
    };
    for c in on {
        match c.as_str() {
            "connect" => p.connect = true,
            "timeout" => p.timeout = true,
            "reset" => p.reset = true,
            s => match s.parse::<u16>() {
                Ok(n) if (400..=599).contains(&n) && s.len() == 3 => {
                    let i = usize::from(n - 400);
                    p.statuses[i / 64] |= 1 << (i % 64);
                }
                _ => {
                    return Err(format!(
                        "on: `{s}` is not a retry condition: expected \"connect\", \"timeout\", \
                         \"reset\" or a status from 400 to 599 (\"503\")"
                    ))
                }
            },
        }
    }
    Ok(p)
}

pub(super) fn de_retry<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RetryPolicy>, D::Error> {
    let e = RetryEntry::deserialize(d)?;
    retry_policy(e.tries, &e.on, &e.methods)
        .map(Some)
        .map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn edits_render_once_and_refuse_what_the_proxy_owns() {
        let e = header_edits(
            &set(&[("X-Env", "prod"), ("Host", "app.internal")]),
            &["X-Debug".into()],
            Side::Request,
        )
        .unwrap();
        assert_eq!(&*e.block, b"Host: app.internal\r\nX-Env: prod\r\n");
        assert!(e.drops("x-debug") && e.drops("X-ENV") && e.drops("host"));
        assert!(!e.drops("x-envy") && !e.drops("x-en"));
        assert!(e.sets_host);
        let no_host = header_edits(&set(&[("X-A", "1")]), &[], Side::Request).unwrap();
        assert!(!no_host.sets_host);
        let bad = |s: &[(&str, &str)], r: &[&str], side| {
            let r: Vec<String> = r.iter().map(|s| s.to_string()).collect();
            header_edits(&set(s), &r, side).unwrap_err()
        };
        for name in [
            "Content-Length",
            "transfer-encoding",
            "Connection",
            "TE",
            "Upgrade",
        ] {
            for side in [Side::Request, Side::Response] {
                assert!(bad(&[(name, "1")], &[], side).contains("cannot"), "{name}");
                assert!(bad(&[], &[name], side).contains("cannot"), "{name}");
            }
        }
        assert!(bad(&[], &["Host"], Side::Request).contains("Host"));
        assert!(bad(&[("Expect", "x")], &[], Side::Request).contains("cannot"));
        assert!(bad(&[("X a", "1")], &[], Side::Request).contains("field name"));
        assert!(bad(&[("", "1")], &[], Side::Request).contains("field name"));
        assert!(bad(&[("X", "a\r\nY: b")], &[], Side::Request).contains("0x0d"));
        assert!(bad(&[("X", "a\nb")], &[], Side::Response).contains("0x0a"));
        assert!(bad(&[("X", "a\0")], &[], Side::Response).contains("0x00"));
        assert!(bad(&[("X", " a")], &[], Side::Response).contains("whitespace"));
        assert!(bad(&[("X", "1")], &["x"], Side::Response).contains("twice"));
        // Host may go on a response (it means nothing there, but it is not the proxy's).
        assert!(header_edits(&set(&[]), &["Host".into()], Side::Response).is_ok());
    }

    #[test]
    fn edits_apply_to_a_head_in_place_with_or_without_what_follows_it() {
        let set = set(&[("X-A", "new"), ("Strict-Transport-Security", "max-age=1")]);
        let e = header_edits(&set, &["Server".into()], Side::Response).unwrap();
        let block = "Strict-Transport-Security: max-age=1\r\nX-A: new\r\n";
        let table = [
            // A head being written (no empty line yet).
            (
                "HTTP/1.1 200 OK\r\nServer: o\r\nB: 2\r\nx-a: 1\r\nSERVER: p\r\n",
                format!("HTTP/1.1 200 OK\r\nB: 2\r\n{block}"),
            ),
            // A whole answer: the block goes before the empty line, the body stays.
            (
                "HTTP/1.1 302 Found\r\nServer: o\r\nLocation: /x\r\n\r\nbody\r\n\r\nmore",
                format!("HTTP/1.1 302 Found\r\nLocation: /x\r\n{block}\r\nbody\r\n\r\nmore"),
            ),
            // No field at all.
            (
                "HTTP/1.1 204 No Content\r\n\r\n",
                format!("HTTP/1.1 204 No Content\r\n{block}\r\n"),
            ),
            ("HTTP/1.1 200 OK\r\n", format!("HTTP/1.1 200 OK\r\n{block}")),
        ];
        for (head, want) in table {
            let mut out = bytes::BytesMut::from(format!("kept{head}").as_bytes());
            e.apply_to_head(&mut out, 4);
            assert_eq!(
                String::from_utf8_lossy(&out),
                format!("kept{want}"),
                "{head:?}"
            );
        }
    }

    #[test]
    fn retry_conditions_and_methods() {
        let on = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let p = retry_policy(3, &on(&["connect", "503", "504"]), "idempotent").unwrap();
        assert!(p.on_status(503) && p.on_status(504) && !p.on_status(502));
        assert!(!p.on_status(200) && !p.on_status(399) && !p.on_status(600));
        assert!(p.allows(RetryReason::Connect, false));
        assert!(p.allows(RetryReason::Status, true) && !p.allows(RetryReason::Status, false));
        assert!(!p.allows(RetryReason::Timeout, true) && !p.allows(RetryReason::Reset, true));
        let all = retry_policy(2, &on(&["timeout", "reset", "599", "400"]), "all").unwrap();
        assert!(all.allows(RetryReason::Timeout, false) && all.allows(RetryReason::Reset, false));
        assert!(!all.allows(RetryReason::Connect, true));
        assert!(all.on_status(599) && all.on_status(400));
        assert!(RetryPolicy::BUILT_IN.allows(RetryReason::Reset, true));
        assert!(!RetryPolicy::BUILT_IN.allows(RetryReason::Reset, false));
        assert!(RetryPolicy::BUILT_IN.allows(RetryReason::Connect, false));
        for (tries, on_, methods, word) in [
            (0, on(&[]), "all", "tries"),
            (11, on(&[]), "all", "tries"),
            (2, on(&["sometimes"]), "all", "sometimes"),
            (2, on(&["200"]), "all", "200"),
            (2, on(&["5xx"]), "all", "5xx"),
            (2, on(&["0503"]), "all", "0503"),
            (2, on(&[]), "some", "methods"),
        ] {
            let e = retry_policy(tries, &on_, methods).unwrap_err();
            assert!(e.contains(word), "{e}");
        }
    }
}
