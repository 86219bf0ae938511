//! A Host field's host name, as routing and `return` templates read it.

/// `example.com:8080` → `example.com`, `[::1]:80` → `[::1]`, `example.com.` → `example.com`.
pub fn strip_port(host: &[u8]) -> &[u8] {
    let host = if host.first() == Some(&b'[') {
        match host.iter().position(|&b| b == b']') {
            Some(end) => &host[..=end],
            None => host,
        }
    } else {
        match host.iter().position(|&b| b == b':') {
            Some(colon) => &host[..colon],
            None => host,
        }
    };
    host.strip_suffix(b".").unwrap_or(host)
}
