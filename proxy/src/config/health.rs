//! `health = { ... }` on an `[upstream.NAME]` group: active health checks (issue 12).
//!
//! ```toml
//! health = { path = "/healthz", interval = "2s", timeout = "1s", rise = 2, fall = 3, expect = 200 }
//! ```
//!
//! Off unless the table is there. Every value that can be checked alone is checked as it is
//! read (so errors name file, line and key); the one check across keys (`timeout` at most
//! `interval`) is [`HealthCheck::check`]. As with the cache, the file type is the runtime
//! value: nothing needs resolving.
//!
//! Defaults are HAProxy's (`inter 2s`, `rise 2`, `fall 3`), with a 1 s timeout; a missing
//! `expect` accepts what both nginx (Plus, `health_check` without `match`) and HAProxy
//! (`option httpchk` without `http-check expect`) accept: any 2xx or 3xx status.

use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use shared::units::serde_units::{de_positive_duration, scalar, Scalar};
use std::time::Duration;

pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(2);
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
pub const DEFAULT_RISE: u32 = 2;
pub const DEFAULT_FALL: u32 = 3;
/// Most consecutive results `rise` and `fall` may ask for.
pub const MAX_RISE_FALL: u32 = 1000;

/// A group's active checks.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheck {
    /// Request target of the check (`GET <path> HTTP/1.1`). Default "/".
    #[serde(default = "default_path", deserialize_with = "de_check_path")]
    pub path: String,
    /// `Host` of the check; default the server's name as written in `servers`.
    #[serde(default, deserialize_with = "de_check_host")]
    pub host: Option<String>,
    /// One check per server every `interval`.
    #[serde(
        default = "default_interval",
        deserialize_with = "de_positive_duration"
    )]
    pub interval: Duration,
    /// Connect plus the response head must come within this, or the check failed.
    #[serde(default = "default_timeout", deserialize_with = "de_positive_duration")]
    pub timeout: Duration,
    /// Consecutive passed checks that bring a down server back.
    #[serde(default = "default_rise", deserialize_with = "de_rise_fall")]
    pub rise: u32,
    /// Consecutive failed checks that take a server out of rotation.
    #[serde(default = "default_fall", deserialize_with = "de_rise_fall")]
    pub fall: u32,
    /// The statuses that pass.
    #[serde(default)]
    pub expect: Expect,
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck {
            path: default_path(),
            host: None,
            interval: DEFAULT_INTERVAL,
            timeout: DEFAULT_TIMEOUT,
            rise: DEFAULT_RISE,
            fall: DEFAULT_FALL,
            expect: Expect::default(),
        }
    }
}

impl HealthCheck {
    /// The check across keys; the message names the keys (the caller adds file and group).
    pub fn check(&self) -> Result<(), String> {
        if self.timeout > self.interval {
            return Err(format!(
                "health: timeout ({}) is longer than interval ({}): a check would still be \
                 running when the next one is due",
                shared::units::format_duration(self.timeout),
                shared::units::format_duration(self.interval)
            ));
        }
        Ok(())
    }

    /// One line for the start-up summary.
    pub fn describe(&self) -> String {
        format!(
            "health GET {} every {} (timeout {}, rise {}, fall {}, expect {})",
            self.path,
            shared::units::format_duration(self.interval),
            shared::units::format_duration(self.timeout),
            self.rise,
            self.fall,
            self.expect
        )
    }
}

/// Which statuses pass a check: `expect = 200` (that status), `expect = "2xx"` (a class),
/// or, when the key is absent, any 2xx or 3xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expect {
    /// 200 to 399, nginx's and HAProxy's default.
    #[default]
    Success,
    Status(u16),
    /// The hundreds digit: 2 for "2xx".
    Class(u8),
}

impl Expect {
    pub fn passes(self, status: u16) -> bool {
        match self {
            Expect::Success => (200..400).contains(&status),
            Expect::Status(s) => status == s,
            Expect::Class(c) => status / 100 == u16::from(c),
        }
    }

    fn parse(s: &str) -> Result<Expect, String> {
        let bad = || {
            format!(
                "`{s}` is not a status: expected a status from 100 to 599 (200) or a class \
                 such as \"2xx\""
            )
        };
        let b = s.as_bytes();
        if b.len() == 3 && b[1..].eq_ignore_ascii_case(b"xx") {
            return match b[0] {
                d @ b'1'..=b'5' => Ok(Expect::Class(d - b'0')),
                _ => Err(bad()),
            };
        }
        match s.parse::<u16>() {
            Ok(n) if (100..600).contains(&n) => Ok(Expect::Status(n)),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expect::Success => f.write_str("2xx or 3xx"),
            Expect::Status(s) => write!(f, "{s}"),
            Expect::Class(c) => write!(f, "{c}xx"),
        }
    }
}

impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "a status such as 200, or a class such as \"2xx\"";
        let s = match scalar(d, WHAT)? {
            Scalar::Int(n) => n.to_string(),
            Scalar::Str(s) => s,
        };
        Expect::parse(&s).map_err(D::Error::custom)
    }
}

fn default_path() -> String {
    "/".into()
}
fn default_interval() -> Duration {
    DEFAULT_INTERVAL
}
fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}
fn default_rise() -> u32 {
    DEFAULT_RISE
}
fn default_fall() -> u32 {
    DEFAULT_FALL
}

/// An origin-form target: starts with `/`, visible ASCII only (it goes on the request line
/// as written).
fn de_check_path<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if !s.starts_with('/') || !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(D::Error::custom(format!(
            "`{s}` is not a request path: it must start with `/` and hold no spaces or \
             control characters"
        )));
    }
    Ok(s)
}

/// A host name or `host:port`, as a `Host` field carries it.
fn de_check_host<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b));
    if !ok {
        return Err(D::Error::custom(format!(
            "`{s}` is not a host: expected a name such as app.internal or app.internal:8080"
        )));
    }
    Ok(Some(s))
}

fn de_rise_fall<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = i64::deserialize(d)?;
    if !(1..=i64::from(MAX_RISE_FALL)).contains(&n) {
        return Err(D::Error::custom(format!(
            "must be from 1 to {MAX_RISE_FALL} (consecutive checks)"
        )));
    }
    Ok(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_forms() {
        assert_eq!(Expect::parse("200"), Ok(Expect::Status(200)));
        assert_eq!(Expect::parse("2xx"), Ok(Expect::Class(2)));
        assert_eq!(Expect::parse("3XX"), Ok(Expect::Class(3)));
        for bad in ["", "99", "600", "6xx", "0xx", "2x", "x2xx", "20 0", "-200"] {
            assert!(Expect::parse(bad).is_err(), "{bad}");
        }
        assert!(Expect::Success.passes(200) && Expect::Success.passes(302));
        assert!(!Expect::Success.passes(404) && !Expect::Success.passes(199));
        assert!(Expect::Class(2).passes(204) && !Expect::Class(2).passes(301));
        assert!(Expect::Status(204).passes(204) && !Expect::Status(204).passes(200));
        assert_eq!(Expect::Class(2).to_string(), "2xx");
        assert_eq!(Expect::Success.to_string(), "2xx or 3xx");
    }

    #[test]
    fn timeout_longer_than_interval_is_refused() {
        let h = HealthCheck {
            timeout: Duration::from_secs(3),
            ..HealthCheck::default()
        };
        let e = h.check().unwrap_err();
        assert!(
            e.contains("timeout (3s) is longer than interval (2s)"),
            "{e}"
        );
        HealthCheck::default().check().unwrap();
    }
}
