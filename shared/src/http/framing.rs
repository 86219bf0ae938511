//! Message body framing, decided once per message in RFC 9112 section 6.3 order, and the
//! keep-alive rules of section 9.3.

/// How a message body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body (HEAD responses, 1xx, 204, 304, requests without CL/TE).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Responses only: the body runs until the server closes the connection.
    CloseDelimited,
    /// 101 Switching Protocols, or a 2xx answer to CONNECT: after the head the connection
    /// is a byte tunnel.
    Tunnel,
}

/// Whether `name` is a hop-by-hop field that a proxy never forwards as is (RFC 9110 7.6.1):
/// Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade.
/// Fields *named* by Connection are hop-by-hop too: see [`connection_tokens`].
pub fn is_hop_by_hop(name: &str) -> bool {
    let _ = name;
    todo!("codec helper")
}

/// The comma-separated tokens of every Connection field, trimmed of whitespace, in order.
pub fn connection_tokens<'h, 'b: 'h>(
    headers: &'h [httparse::Header<'b>],
) -> impl Iterator<Item = &'b [u8]> + 'h {
    let _ = headers;
    std::iter::empty()
}
