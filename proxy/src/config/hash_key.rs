//! `hash_key` on an `[upstream.NAME]` group with `balance = "hash"` (issue 27): what the
//! consistent hash of a request is taken over (nginx `hash $request_uri consistent`, HAProxy
//! `balance uri` / `balance source` / `balance hdr(NAME)` with `hash-type consistent`).
//!
//! ```toml
//! balance = "hash"
//! hash_key = "uri"            # or "remote_addr", or "header:X-User"
//! ```
//!
//! - `uri`: the request target as the client sent it, path and query (origin-form: an
//!   absolute-form target's scheme and authority are not part of it), not normalised: it is
//!   what the origin is asked for, so the key of its cache (nginx's `$request_uri`).
//! - `remote_addr`: the client address (the one source every other feature reads it from:
//!   `request::IpText`), as text.
//! - `header:NAME`: the first value of that field; a request without it hashes the empty
//!   string (as nginx's empty variable), so those requests all go to one server.
//!
//! The file type is the runtime value: nothing needs resolving. `hash_key` without
//! `balance = "hash"` is refused by `resolve` (it would silently do nothing).

use serde::de::{Deserializer, Error as _};
use serde::Deserialize;

/// What `balance = "hash"` hashes. Default `uri`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HashKey {
    #[default]
    Uri,
    RemoteAddr,
    /// A field name (a token, as written).
    Header(String),
}

const EXPECTED: &str = "expected \"uri\", \"remote_addr\" or \"header:NAME\"";

impl HashKey {
    /// `uri`, `remote_addr` or `header:NAME` (NAME a field name: RFC 9110 token characters).
    pub fn parse(s: &str) -> Result<HashKey, String> {
        match s {
            "uri" => return Ok(HashKey::Uri),
            "remote_addr" => return Ok(HashKey::RemoteAddr),
            _ => {}
        }
        let Some(name) = s.strip_prefix("header:") else {
            return Err(format!("`{s}` is not a hash key: {EXPECTED}"));
        };
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(format!(
                "`{s}`: `{name}` is not a header field name (letters, digits and !#$%&'*+-.^_`|~)"
            ));
        }
        Ok(HashKey::Header(name.to_string()))
    }

    /// As the file writes it.
    pub fn name(&self) -> String {
        match self {
            HashKey::Uri => "uri".into(),
            HashKey::RemoteAddr => "remote_addr".into(),
            HashKey::Header(n) => format!("header:{n}"),
        }
    }
}

/// RFC 9110 5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl<'de> Deserialize<'de> for HashKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        HashKey::parse(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_name_themselves() {
        for (text, want) in [
            ("uri", HashKey::Uri),
            ("remote_addr", HashKey::RemoteAddr),
            ("header:X-User", HashKey::Header("X-User".into())),
        ] {
            assert_eq!(HashKey::parse(text), Ok(want.clone()));
            assert_eq!(want.name(), text);
        }
        for bad in ["", "url", "header:", "header:X User", "header:a:b", "Uri"] {
            assert!(HashKey::parse(bad).is_err(), "{bad}");
        }
    }
}
