//! The security review's defects (issue 22), one module per concern, in one test binary:
//! each test drives a real proxy over raw sockets on 127.0.0.1 and failed before its fix.

use tests::toml_proxy::*;

mod access_log_fifo;
mod admin;
mod body_desync;
mod broken_origins;
mod cache_key;
mod framing;
mod freeze;
mod pool_liveness;
mod preconditions;
mod routing;
mod scripted;
mod slow_upload;
mod static_reload;
mod stderr_closed;
mod takeover;
mod takeover_peer;
mod tunnel_generation;
mod upgrade;
mod upstream_fields;
mod variants;

/// The request line of every request `origin` captured, in order.
pub fn request_lines(origin: &shared::origin::Origin) -> Vec<String> {
    origin
        .captured()
        .iter()
        .map(|r| {
            String::from_utf8_lossy(r)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}
