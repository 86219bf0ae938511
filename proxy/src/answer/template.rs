//! `return` templates: text with `{variable}`s, parsed once at start into pieces, rendered per
//! request straight into the response buffer (no allocation, no formatting machinery).
//!
//! Variables (nginx's names in brackets):
//! - `{host}`: the request's host, lower-case, without port or trailing dot (`$host`); empty
//!   when the request has none (an HTTP/1.0 request without Host);
//! - `{path}`: the target's path, as received, not decoded (`$uri` before decoding);
//! - `{query}`: what follows `?` in the target, without the `?`; empty when there is none
//!   (`$args`);
//! - `{request_uri}`: the path and, when there is one, `?` and the query (`$request_uri`, but
//!   for a bare `?` with nothing after it, which is dropped): what a redirect to HTTPS keeps;
//! - `{remote_addr}`: the client's IP address (`$remote_addr`);
//! - `{random:A-B}`: a number drawn uniformly from A to B inclusive (0 <= A <= B < 2^64), once
//!   per request for each distinct range: `{random:1-21}` written twice in one route is the
//!   same number both times, as an nginx variable set by `set_random` would be.
//!
//! A `{` that starts something other than a name (`{"a": 1}`) is plain text; a `{name}` with
//! an unknown name is an error at start, so a typo never reaches a client.

use bytes::BytesMut;
use shared::http::encode::fmt_decimal;
use std::fmt;

/// A parsed template.
#[derive(Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Box<[Piece]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(Box<[u8]>),
    Host,
    Path,
    Query,
    /// The path, then `?` and the query if there is one.
    RequestUri,
    RemoteAddr,
    /// Index into the action's ranges (see [`Template::bind_ranges`]).
    Random {
        lo: u64,
        hi: u64,
        slot: usize,
    },
}

/// The values a template refers to, for one request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Vars<'a> {
    /// As received: the port and trailing dot are cut and the case lowered at render.
    pub host: &'a [u8],
    pub path: &'a [u8],
    pub query: &'a [u8],
    pub remote_addr: &'a [u8],
    /// One drawn value per distinct range, by slot.
    pub randoms: &'a [u64],
}

impl fmt::Debug for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.pieces.iter()).finish()
    }
}

/// What a template may contain: a header value (`Location`) must not hold control characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    HeaderValue,
    Body,
}

impl Template {
    /// Parse `text`; the error is one line naming the problem.
    pub fn parse(text: &str, ctx: Context) -> Result<Template, String> {
        if ctx == Context::HeaderValue {
            if let Some(c) = text.chars().find(|c| c.is_control()) {
                return Err(format!(
                    "control character {c:?} in a header value template"
                ));
            }
        }
        let mut pieces = Vec::new();
        let mut text_start = 0;
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            // Only a `{` (ASCII, so a character boundary) may start a variable: `i` steps
            // over bytes, and slicing the text inside a character would panic.
            if b[i] != b'{' {
                i += 1;
                continue;
            }
            let Some((piece, len)) = variable_at(&text[i..])? else {
                i += 1;
                continue;
            };
            if text_start < i {
                pieces.push(Piece::Text(b[text_start..i].into()));
            }
            pieces.push(piece);
            i += len;
            text_start = i;
        }
        if text_start < b.len() {
            pieces.push(Piece::Text(b[text_start..].into()));
        }
        Ok(Template {
            pieces: pieces.into(),
        })
    }

    /// A template of plain text.
    pub fn text(text: &[u8]) -> Template {
        Template {
            pieces: [Piece::Text(text.into())].into(),
        }
    }

    /// Number the random ranges: each distinct range gets one slot in `ranges` (shared by
    /// every template of an action, so one range means one number per request).
    pub fn bind_ranges(&mut self, ranges: &mut Vec<(u64, u64)>) {
        for p in self.pieces.iter_mut() {
            if let Piece::Random { lo, hi, slot } = p {
                *slot = match ranges.iter().position(|r| *r == (*lo, *hi)) {
                    Some(s) => s,
                    None => {
                        ranges.push((*lo, *hi));
                        ranges.len() - 1
                    }
                };
            }
        }
    }

    /// The rendered length, without rendering.
    pub fn len(&self, v: &Vars<'_>) -> usize {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.len(),
                Piece::Host => host_name(v.host).len(),
                Piece::Path => v.path.len(),
                Piece::Query => v.query.len(),
                Piece::RequestUri => {
                    v.path.len() + usize::from(!v.query.is_empty()) + v.query.len()
                }
                Piece::RemoteAddr => v.remote_addr.len(),
                Piece::Random { slot, .. } => decimal_len(random(v, *slot)),
            })
            .sum()
    }

    /// Append the rendered template to `out`.
    pub fn render(&self, v: &Vars<'_>, out: &mut BytesMut) {
        out.reserve(self.len(v));
        for p in self.pieces.iter() {
            match p {
                Piece::Text(t) => out.extend_from_slice(t),
                Piece::Host => {
                    for &c in host_name(v.host) {
                        out.extend_from_slice(&[c.to_ascii_lowercase()]);
                    }
                }
                Piece::Path => out.extend_from_slice(v.path),
                Piece::Query => out.extend_from_slice(v.query),
                Piece::RequestUri => {
                    out.extend_from_slice(v.path);
                    if !v.query.is_empty() {
                        out.extend_from_slice(b"?");
                        out.extend_from_slice(v.query);
                    }
                }
                Piece::RemoteAddr => out.extend_from_slice(v.remote_addr),
                Piece::Random { slot, .. } => {
                    let mut digits = [0u8; 20];
                    out.extend_from_slice(fmt_decimal(random(v, *slot), &mut digits));
                }
            }
        }
    }
}

fn random(v: &Vars<'_>, slot: usize) -> u64 {
    v.randoms.get(slot).copied().unwrap_or(0)
}

/// The variable at the start of `s`, with its length; `None` when `s` does not start one.
fn variable_at(s: &str) -> Result<Option<(Piece, usize)>, String> {
    let Some(rest) = s.strip_prefix('{') else {
        return Ok(None);
    };
    let name_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
        .count();
    let name = &rest[..name_len];
    let after = &rest[name_len..];
    if name.is_empty() || !(after.starts_with('}') || after.starts_with(':')) {
        return Ok(None);
    }
    let Some(close) = after.find('}') else {
        return Err(format!("`{{{name}` is not closed with `}}`"));
    };
    let arg = after[..close].strip_prefix(':');
    let len = 1 + name_len + close + 1;
    let piece = match (name, arg) {
        ("host", None) => Piece::Host,
        ("path", None) => Piece::Path,
        ("query", None) => Piece::Query,
        ("request_uri", None) => Piece::RequestUri,
        ("remote_addr", None) => Piece::RemoteAddr,
        ("random", Some(range)) => parse_range(range)?,
        ("random", None) => return Err("`{random}` needs a range: `{random:1-21}`".into()),
        (known @ ("host" | "path" | "query" | "request_uri" | "remote_addr"), Some(_)) => {
            return Err(format!("`{{{known}}}` takes no argument"))
        }
        (other, _) => {
            return Err(format!(
                "unknown variable `{{{other}}}`: expected {{host}}, {{path}}, {{query}}, \
                 {{request_uri}}, {{remote_addr}} or {{random:A-B}}"
            ))
        }
    };
    Ok(Some((piece, len)))
}

fn parse_range(range: &str) -> Result<Piece, String> {
    let bad = || format!("`{{random:{range}}}`: expected {{random:A-B}} with 0 <= A <= B");
    let (a, b) = range.split_once('-').ok_or_else(bad)?;
    let lo: u64 = a.trim().parse().map_err(|_| bad())?;
    let hi: u64 = b.trim().parse().map_err(|_| bad())?;
    if lo > hi {
        return Err(bad());
    }
    Ok(Piece::Random { lo, hi, slot: 0 })
}

/// The host name of a Host value: no port, no trailing dot (`[::1]:80` -> `[::1]`).
fn host_name(host: &[u8]) -> &[u8] {
    crate::host::strip_port(host)
}

fn decimal_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &Template, v: &Vars<'_>) -> String {
        let mut out = BytesMut::new();
        t.render(v, &mut out);
        assert_eq!(out.len(), t.len(v), "len() agrees with render()");
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn every_variable() {
        let mut t = Template::parse(
            "h={host} p={path} q={query} ip={remote_addr} n={random:1-21} m={random:5-5} again={random:1-21}",
            Context::Body,
        )
        .unwrap();
        let mut ranges = Vec::new();
        t.bind_ranges(&mut ranges);
        assert_eq!(ranges, [(1, 21), (5, 5)]);
        let v = Vars {
            host: b"Example.COM.:8080",
            path: b"/a/b%2F",
            query: b"x=1&y",
            remote_addr: b"127.0.0.1",
            randoms: &[17, 5],
        };
        assert_eq!(
            render(&t, &v),
            "h=example.com p=/a/b%2F q=x=1&y ip=127.0.0.1 n=17 m=5 again=17"
        );
        let empty = Vars::default();
        assert_eq!(render(&t, &empty), "h= p= q= ip= n=0 m=0 again=0");
    }

    #[test]
    fn braces_that_are_not_variables_are_text() {
        for text in [r#"{"a": 1}"#, "{}", "{ host }", "{Host}", "x{", "{1-2}", ""] {
            let t = Template::parse(text, Context::Body).unwrap();
            assert_eq!(render(&t, &Vars::default()), text);
        }
    }

    #[test]
    fn bad_templates_are_refused() {
        for (text, ctx, want) in [
            ("{hots}", Context::Body, "unknown variable `{hots}`"),
            ("{random}", Context::Body, "needs a range"),
            ("{random:5-1}", Context::Body, "0 <= A <= B"),
            ("{random:-1-3}", Context::Body, "0 <= A <= B"),
            ("{random:1-x}", Context::Body, "0 <= A <= B"),
            (
                "{random:1-99999999999999999999}",
                Context::Body,
                "0 <= A <= B",
            ),
            ("{random:1-2", Context::Body, "not closed"),
            ("{host:x}", Context::Body, "takes no argument"),
            (
                "/a\r\nSet-Cookie: x",
                Context::HeaderValue,
                "control character",
            ),
        ] {
            let e = Template::parse(text, ctx).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        // A body may hold line breaks.
        assert!(Template::parse("a\r\nb\n", Context::Body).is_ok());
    }

    #[test]
    fn numbers_at_the_edges() {
        let mut t = Template::parse("{random:0-18446744073709551615}", Context::Body).unwrap();
        t.bind_ranges(&mut Vec::new());
        for n in [0, 9, 10, 99, 100, u64::MAX] {
            let v = Vars {
                randoms: &[n],
                ..Vars::default()
            };
            assert_eq!(render(&t, &v), n.to_string());
        }
    }
}
