//! `--targets FILE`: requests in vegeta's HTTP format, each with its own method, headers and
//! body:
//!
//! ```text
//! GET http://goku:9090/path/to/dragon?item=ball
//! X-Account-ID: 8675309
//!
//! POST http://goku:9090/things
//! Content-Type: application/json
//! @/path/to/newthing.json
//! ```
//!
//! A request line (`METHOD URL`), header lines, an optional `@FILE` body line (the path as
//! given, as vegeta reads it), a blank line between requests; `#` lines are comments. Read once
//! before the run; a bad line is reported with the file and its line number.

use crate::input::{read_body, read_capped_text, MAX_BODIES, MAX_INPUT};
use crate::target::Target;
use crate::LoadError;
use bytes::Bytes;
use std::path::Path;

/// One request of a targets file, besides its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    pub method: String,
    /// Sent after the `-H` headers; a name here replaces theirs (`plan::merged_fields`).
    pub headers: Vec<(String, String)>,
    /// The `@FILE` body (else `--body`'s, if any).
    pub body: Option<Bytes>,
}

/// `--targets-order`: how the requests of the file are taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetsOrder {
    /// In the file's order, over and over: each gets its exact share of `-n`.
    #[default]
    RoundRobin,
    /// At random (each worker its own generator).
    Random,
}

/// Read a targets file into its targets and their requests.
pub fn read_targets_file(path: &Path) -> Result<Vec<(Target, RequestSpec)>, LoadError> {
    let text = read_capped_text(path, MAX_INPUT).map_err(|source| LoadError::File {
        flag: "--targets",
        path: path.display().to_string(),
        source,
    })?;
    // Each body at most MAX_INPUT, all of them at most MAX_BODIES: a thousand targets naming
    // one large file read it a thousand times.
    let mut bodies = 0u64;
    let at = |line: usize, what: String| {
        LoadError::Invalid(format!("--targets {}:{line}: {what}", path.display()))
    };
    let mut out: Vec<(Target, RequestSpec)> = Vec::new();
    // Whether the current request is still taking header and body lines.
    let mut open = false;
    for (i, raw) in text.lines().enumerate() {
        let (n, line) = (i + 1, raw.trim());
        if line.starts_with('#') {
            continue;
        }
        if line.is_empty() {
            open = false;
            continue;
        }
        if !open {
            let (method, url) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| at(n, format!("expected 'METHOD URL', got '{line}'")))?;
            if !shared::http::framing::is_token(method.as_bytes()) {
                return Err(at(n, format!("invalid method '{method}'")));
            }
            let target = Target::parse(url.trim()).map_err(|e| at(n, e.to_string()))?;
            let spec = RequestSpec {
                method: method.to_string(),
                headers: Vec::new(),
                body: None,
            };
            out.push((target, spec));
            open = true;
            continue;
        }
        let Some((_, spec)) = out.last_mut() else {
            continue;
        };
        if let Some(file) = line.strip_prefix('@') {
            let data = read_body(Path::new(file.trim()))
                .map_err(|e| at(n, format!("the body {}: {e}", file.trim())))?;
            bodies += data.len() as u64;
            if bodies > MAX_BODIES {
                return Err(at(
                    n,
                    format!(
                        "the bodies add up to more than {} MiB, the limit",
                        MAX_BODIES >> 20
                    ),
                ));
            }
            spec.body = Some(Bytes::from(data));
            continue;
        }
        spec.headers.push(header(line).map_err(|e| at(n, e))?);
    }
    Ok(out)
}

/// A header line of a target; the loader frames bodies itself.
fn header(line: &str) -> Result<(String, String), String> {
    let shown = line.escape_debug();
    let bad = || format!("expected a header 'Name: value' or '@FILE', got '{shown}'");
    let (name, value) = line.split_once(':').ok_or_else(bad)?;
    let name = name.trim();
    if !shared::http::framing::is_token(name.as_bytes()) {
        return Err(bad());
    }
    shared::http::framing::check_field_value(value)
        .map_err(|why| format!("header '{shown}': {why}"))?;
    if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding")
    {
        return Err(format!(
            "{name}: the loader frames the body (from @FILE) itself"
        ));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vegeta_http_format() {
        let dir = std::env::temp_dir().join(format!("loader-targets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let body = dir.join("thing.json");
        std::fs::write(&body, b"{}").unwrap();
        let file = dir.join("targets.txt");
        let text = format!(
            "# a comment\nGET http://127.0.0.1:9/dragon?item=ball\nX-Account-ID: 8675309\n\n\
             POST http://127.0.0.1:9/things\nContent-Type: application/json\n@{}\n\n\n\
             DELETE http://127.0.0.1:9/x\n",
            body.display()
        );
        std::fs::write(&file, text).unwrap();
        let t = read_targets_file(&file).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t[0].1.method.as_str(), t[0].0.path.as_str()),
            ("GET", "/dragon?item=ball")
        );
        assert_eq!(t[0].1.headers, [("X-Account-ID".into(), "8675309".into())]);
        assert_eq!(t[1].1.body.as_deref(), Some(&b"{}"[..]));
        assert_eq!(t[2].1.method, "DELETE");
        std::fs::write(&file, "GET http://127.0.0.1:9/\nContent-Length: 5\n").unwrap();
        let e = read_targets_file(&file).unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("Content-Length"), "{e}");
        std::fs::write(&file, "GET\n").unwrap();
        assert!(read_targets_file(&file)
            .unwrap_err()
            .to_string()
            .contains(":1:"));
    }
}
