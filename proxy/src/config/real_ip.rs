//! `[headers] real_ip_header`: the field a trusted peer (`real_ip_from`, read as `purge_from`
//! is) names the client in. The walk itself is the request model's (`request::real_ip`).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

/// nginx's `real_ip_header` default is X-Real-IP; behind balancers X-Forwarded-For is what
/// arrives, and the one the issue names.
pub const DEFAULT_HEADER: &str = "X-Forwarded-For";

/// A field name (RFC 9110 5.1: a token), not one the proxy writes or frames itself.
pub(super) fn de_header<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(D::Error::custom(format!(
            "`{name}` is not a field name (e.g. X-Forwarded-For, X-Real-IP)"
        )));
    }
    let framing = ["host", "content-length", "transfer-encoding", "connection"];
    if framing.iter().any(|f| f.eq_ignore_ascii_case(&name)) {
        return Err(D::Error::custom(format!(
            "`{name}` does not carry a client address"
        )));
    }
    Ok(name)
}
