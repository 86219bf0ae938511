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

/// Serve one origin connection: every request head (GETs: no bodies) gets `answer(head)`'s
/// 200, fresh for a minute, until the peer closes or a read fails (its timeout included).
pub fn answer_each_head(mut s: std::net::TcpStream, mut answer: impl FnMut(&str) -> Answer) {
    use std::io::{Read, Write};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let Answer { fields, body } = answer(&head);
            let resp = format!(
                "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n{fields}Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if s.write_all(resp.as_bytes()).is_err() {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// An [`answer_each_head`] answer: fields (each line with its CRLF) and the body.
pub struct Answer {
    pub fields: String,
    pub body: String,
}

/// The value of the field `name` in a request head (its first), or `-`.
pub fn head_field(head: &str, name: &str) -> String {
    head.split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map_or("-".to_string(), |(_, v)| v.trim().to_string())
}
