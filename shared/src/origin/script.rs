//! What one response does: the origin's config, overridden by the request's query parameters.
//!
//! | parameter | effect |
//! |---|---|
//! | `status=404` | response status |
//! | `size=100` (or `32KiB`) | body length (the pattern) |
//! | `header=Name:Value` | extra response header (repeatable; percent-decoded) |
//! | `framing=length\|chunked\|close` | body framing |
//! | `chunk=N` | chunked framing, N bytes per chunk |
//! | `delay=MS` (or `250ms`, `1s`) | pause before the head |
//! | `interim=103` | an interim response sent first, before any delay (repeatable; a 103 carries `Link: </hint.css>; rel=preload`) |
//! | `chunk_delay=MS` | pause between chunks |
//! | `abort_after=N` | close after N body bytes |
//! | `hang`, `drop`, `reset`, `echo`, `close` | booleans (`=1`/`=0`; bare means on) |
//!
//! A GET or HEAD with `If-None-Match` matching the response's `ETag` (weak comparison, or
//! `*`), or without it an `If-Modified-Since` equal to its `Last-Modified` (nginx's
//! `if_modified_since exact`), is answered 304 instead of 200 (validators come from the
//! config's headers or `header=`).
//!
//! A WebSocket upgrade request is answered 101 and echoed unless the query sets another
//! `status` (e.g. `?status=426` to refuse the upgrade).
//!
//! Unknown parameters are ignored (so URLs can carry cache busters); a known parameter with a
//! bad value gets a 400 naming it.

use super::{Framing, OriginConfig};
use crate::units::{parse_duration, parse_size};
use std::time::Duration;

/// Chunk size when `framing=chunked` turns chunking on without `chunk=N`.
pub const DEFAULT_CHUNK_SIZE: usize = 4096;

/// The behaviour of one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub status: u16,
    pub body_size: usize,
    /// Headers from the query, written after the config's.
    pub extra_headers: Vec<(String, String)>,
    pub framing: Framing,
    pub delay: Duration,
    pub chunk_delay: Duration,
    pub abort_after: Option<usize>,
    pub hang: bool,
    pub drop: bool,
    pub reset: bool,
    pub echo: bool,
    pub close: bool,
    /// Interim (1xx) responses sent before the head (and before `delay`).
    pub interim: Vec<u16>,
    /// No query parameter changed anything: the config's default response applies.
    pub is_default: bool,
}

/// A known query parameter with a value it cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad origin parameter `{key}={value}`: {why}")]
pub struct ScriptError {
    pub key: String,
    pub value: String,
    pub why: &'static str,
}

impl Script {
    /// The config's own behaviour.
    pub fn from_config(cfg: &OriginConfig) -> Script {
        Script {
            status: cfg.status,
            body_size: cfg.body_size,
            extra_headers: Vec::new(),
            framing: cfg.framing,
            delay: cfg.delay,
            chunk_delay: cfg.chunk_delay,
            abort_after: cfg.abort_after,
            hang: cfg.hang,
            drop: cfg.drop,
            reset: cfg.reset,
            echo: cfg.echo,
            close: cfg.close,
            interim: Vec::new(),
            is_default: true,
        }
    }

    /// The behaviour for a request to `target`: the config, with the query's overrides when
    /// the config allows them.
    pub fn resolve(cfg: &OriginConfig, target: &str) -> Result<Script, ScriptError> {
        let mut s = Script::from_config(cfg);
        let query = target.split_once('?').map(|(_, q)| q);
        if let (true, Some(query)) = (cfg.query_overrides, query) {
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
                s.apply(key, raw)?;
            }
        }
        if let Some(status) = cfg.switch.as_ref().and_then(|w| w.for_target(target)) {
            s.status = status;
            s.is_default = false;
        }
        Ok(s)
    }

    fn apply(&mut self, key: &str, raw: &str) -> Result<(), ScriptError> {
        let bad = |why| ScriptError {
            key: key.to_string(),
            value: raw.to_string(),
            why,
        };
        match key {
            "status" => {
                self.status = raw
                    .parse()
                    .ok()
                    .filter(|s| (100..=999).contains(s))
                    .ok_or_else(|| bad("expected a three-digit status"))?
            }
            "size" => self.body_size = size(raw).ok_or_else(|| bad("expected a size"))?,
            "header" => {
                let v = percent_decode(raw).ok_or_else(|| bad("bad percent-encoding"))?;
                let (name, value) = v
                    .split_once(':')
                    .ok_or_else(|| bad("expected Name:Value"))?;
                let (name, value) = (name.trim(), value.trim());
                let name_ok = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                let value_ok = value
                    .bytes()
                    .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f));
                if !name_ok || !value_ok {
                    return Err(bad("not a valid header field"));
                }
                self.extra_headers
                    .push((name.to_string(), value.to_string()));
            }
            "framing" => {
                self.framing = match raw {
                    "length" => Framing::Length,
                    "close" => Framing::Close,
                    "chunked" => match self.framing {
                        f @ Framing::Chunked { .. } => f,
                        _ => Framing::Chunked {
                            chunk_size: DEFAULT_CHUNK_SIZE,
                        },
                    },
                    _ => return Err(bad("expected length, chunked or close")),
                }
            }
            "chunk" => {
                let n = size(raw)
                    .filter(|&n| n > 0)
                    .ok_or_else(|| bad("expected a size > 0"))?;
                self.framing = Framing::Chunked { chunk_size: n };
            }
            "delay" => self.delay = duration(raw).ok_or_else(|| bad("expected a duration"))?,
            "chunk_delay" => {
                self.chunk_delay = duration(raw).ok_or_else(|| bad("expected a duration"))?
            }
            "abort_after" => {
                self.abort_after = Some(size(raw).ok_or_else(|| bad("expected a size"))?)
            }
            "hang" => self.hang = flag(raw).ok_or_else(|| bad("expected 1 or 0"))?,
            "drop" => self.drop = flag(raw).ok_or_else(|| bad("expected 1 or 0"))?,
            "reset" => self.reset = flag(raw).ok_or_else(|| bad("expected 1 or 0"))?,
            "echo" => self.echo = flag(raw).ok_or_else(|| bad("expected 1 or 0"))?,
            "close" => self.close = flag(raw).ok_or_else(|| bad("expected 1 or 0"))?,
            "interim" => self.interim.push(
                raw.parse()
                    .ok()
                    .filter(|s| (100..200).contains(s) && *s != 101)
                    .ok_or_else(|| bad("expected a 1xx status other than 101"))?,
            ),
            _ => return Ok(()),
        }
        self.is_default = false;
        Ok(())
    }
}

fn size(s: &str) -> Option<usize> {
    parse_size(s).ok().and_then(|n| usize::try_from(n).ok())
}

/// A bare number is milliseconds (like `loader origin --delay MS`); else `250ms`, `1s`...
fn duration(s: &str) -> Option<Duration> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok().map(Duration::from_millis);
    }
    parse_duration(s).ok()
}

fn flag(s: &str) -> Option<bool> {
    match s {
        "" | "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `%XX` and `+` (space) decoding, to UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_query_is_the_config() {
        let cfg = OriginConfig::default();
        let s = Script::resolve(&cfg, "/x").unwrap();
        assert!(s.is_default);
        assert_eq!(s, Script::from_config(&cfg));
        assert!(
            Script::resolve(&cfg, "/x?cachebuster=7")
                .unwrap()
                .is_default
        );
    }

    #[test]
    fn overrides_apply() {
        let cfg = OriginConfig::default();
        let s = Script::resolve(
            &cfg,
            "/x?status=404&size=1KiB&header=X-A:%20b+c&chunk=10&delay=20&chunk_delay=5ms&abort_after=3&hang&echo=0&close=1",
        )
        .unwrap();
        assert_eq!(s.status, 404);
        assert_eq!(s.body_size, 1024);
        assert_eq!(
            s.extra_headers,
            vec![("X-A".to_string(), "b c".to_string())]
        );
        assert_eq!(s.framing, Framing::Chunked { chunk_size: 10 });
        assert_eq!(s.delay, Duration::from_millis(20));
        assert_eq!(s.chunk_delay, Duration::from_millis(5));
        assert_eq!(s.abort_after, Some(3));
        assert!(s.hang && !s.echo && s.close && !s.is_default);
        let s = Script::resolve(&cfg, "/?framing=close").unwrap();
        assert_eq!(s.framing, Framing::Close);
    }

    #[test]
    fn bad_values_are_named() {
        let cfg = OriginConfig::default();
        for q in [
            "/?status=abc",
            "/?status=42",
            "/?size=-1",
            "/?chunk=0",
            "/?hang=maybe",
            "/?header=nocolon",
            "/?header=a%0d%0ab:c",
            "/?framing=gzip",
        ] {
            let e = Script::resolve(&cfg, q).unwrap_err();
            assert!(
                e.to_string().starts_with("bad origin parameter `"),
                "{q}: {e}"
            );
        }
    }

    #[test]
    fn overrides_can_be_disabled() {
        let cfg = OriginConfig {
            query_overrides: false,
            ..OriginConfig::default()
        };
        assert!(Script::resolve(&cfg, "/?status=500").unwrap().is_default);
    }
}
