//! Durations and sizes with unit suffixes, as wrk's `units.c` reads them.
//!
//! Durations: `500us`, `500ms`, `3s`, `2m`, `1h`; a bare number is seconds (as in wrk).
//! Sizes: `512`, `32KiB`, `1MiB`, `1GiB`, and the decimal `32KB`/`1MB`/`1GB` (powers of 1000),
//! with `K`/`M`/`G` as binary shorthands (like nginx's `32k`).

use std::time::Duration;

/// A value that could not be read, with what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} '{input}': {hint}")]
pub struct UnitError {
    pub what: &'static str,
    pub input: String,
    pub hint: &'static str,
}

fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let n: f64 = s[..end].parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Some((n, s[end..].trim()))
}

/// Parse a duration: `500us`, `500ms`, `3s`, `2m`, `1h`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let err = || UnitError {
        what: "duration",
        input: s.to_string(),
        hint: "expected a number with an optional unit: us, ms, s, m, h (e.g. 500ms, 3s, 2m)",
    };
    let (n, unit) = split_number(s).ok_or_else(err)?;
    let secs = match unit.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" | "secs" => n,
        "us" | "µs" => n / 1e6,
        "ms" => n / 1e3,
        "m" | "min" | "mins" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(err()),
    };
    if secs > 1e12 {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parse a size in bytes: `512`, `32KiB`, `1MiB`, `1GiB`, `32KB`, `32k`.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        what: "size",
        input: s.to_string(),
        hint: "expected a number of bytes with an optional unit: KiB, MiB, GiB, KB, MB, GB",
    };
    let (n, unit) = split_number(s).ok_or_else(err)?;
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        _ => return Err(err()),
    };
    let v = n * mult;
    if v > u64::MAX as f64 || v.fract() != 0.0 {
        return Err(err());
    }
    Ok(v as u64)
}

/// Format a duration the way `parse_duration` reads it back (for `--help` defaults and logs).
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "0s".into()
    } else if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// serde adapters so TOML files take the same spellings as the command line.
pub mod serde_units {
    use serde::{de::Error, Deserialize, Deserializer};
    use std::time::Duration;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumOrStr {
        Num(u64),
        Str(String),
    }

    pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match NumOrStr::deserialize(d)? {
            NumOrStr::Num(n) => Ok(Duration::from_secs(n)),
            NumOrStr::Str(s) => super::parse_duration(&s).map_err(D::Error::custom),
        }
    }

    pub fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match NumOrStr::deserialize(d)? {
            NumOrStr::Num(n) => Ok(n),
            NumOrStr::Str(s) => super::parse_size(&s).map_err(D::Error::custom),
        }
    }

    pub fn opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        size(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("500ms", Duration::from_millis(500)),
            ("3s", Duration::from_secs(3)),
            ("2m", Duration::from_secs(120)),
            ("10", Duration::from_secs(10)),
            ("1.5s", Duration::from_millis(1500)),
            ("250us", Duration::from_micros(250)),
            ("1h", Duration::from_secs(3600)),
        ];
        for (s, d) in cases {
            assert_eq!(parse_duration(s), Ok(d), "{s}");
        }
        for bad in ["", "ms", "3x", "-1s", "1e9999s", "three"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
    }

    #[test]
    fn sizes() {
        let cases = [
            ("32KiB", 32 * 1024),
            ("1MiB", 1 << 20),
            ("1GiB", 1 << 30),
            ("64", 64),
            ("32k", 32 * 1024),
            ("32KB", 32_000),
            ("1.5KiB", 1536),
        ];
        for (s, n) in cases {
            assert_eq!(parse_size(s), Ok(n), "{s}");
        }
        for bad in ["", "KiB", "1.3B", "12 parsecs", "-5"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
