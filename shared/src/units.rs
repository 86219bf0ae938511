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

/// serde adapters so TOML files take the same spellings as the command line, with errors that
/// say what was expected.
pub mod serde_units {
    use serde::de::Error;
    use serde::Deserializer;
    use std::time::Duration;

    /// A number or a string, with errors that say what was expected (serde's untagged enums
    /// only say "data did not match any variant").
    pub enum Scalar {
        Int(i64),
        Str(String),
    }

    pub fn scalar<'de, D: Deserializer<'de>>(
        d: D,
        expected: &'static str,
    ) -> Result<Scalar, D::Error> {
        struct V(&'static str);
        impl serde::de::Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(self.0)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                i64::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom("too large"))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_string()))
            }
        }
        d.deserialize_any(V(expected))
    }

    pub const DURATION: &str =
        "a duration such as \"500ms\", \"3s\", \"2m\", or a number of seconds";
    pub const SIZE: &str = "a size such as \"32KiB\", \"1MiB\", or a number of bytes";

    pub fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match scalar(d, DURATION)? {
            Scalar::Int(n) => u64::try_from(n)
                .map(Duration::from_secs)
                .map_err(|_| D::Error::custom(format!("expected {DURATION}"))),
            Scalar::Str(s) => super::parse_duration(&s).map_err(D::Error::custom),
        }
    }

    pub fn de_positive_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = de_duration(d)?;
        if v.is_zero() {
            return Err(D::Error::custom("must be greater than zero"));
        }
        Ok(v)
    }

    pub fn size_of<E: serde::de::Error>(v: Scalar) -> Result<u64, E> {
        match v {
            Scalar::Int(n) => u64::try_from(n).map_err(|_| E::custom(format!("expected {SIZE}"))),
            Scalar::Str(s) => super::parse_size(&s).map_err(E::custom),
        }
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
