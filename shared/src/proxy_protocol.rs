//! The PROXY protocol (HAProxy's, versions 1 and 2), sans-IO: a header at the start of a TCP
//! connection that says whose connection an L4 balancer passed on. [`parse`] reads one from
//! the bytes received so far; [`write_v1`], [`write_v2`] and the health-check forms write
//! one (the proxy's `send-proxy` to its origins).
//!
//! What is accepted (spec: haproxy.org/download/3.0/doc/proxy-protocol.txt):
//! - v1: `PROXY TCP4|TCP6 <src> <dst> <sport> <dport>\r\n`, single spaces, addresses of the
//!   named family, ports 0..=65535 in decimal; `PROXY UNKNOWN ...\r\n` (anything up to the
//!   CRLF). At most 107 bytes, CRLF included.
//! - v2: the 12-byte signature, version 2, command LOCAL (addresses ignored: the connection
//!   is the balancer's own, a health check) or PROXY; families UNSPEC, INET, INET6, UNIX
//!   (only INET and INET6 over STREAM name a TCP client: with the others the socket's peer
//!   stays the address, as HAProxy does); an unknown family or transport is refused;
//!   the length field at most [`MAX_V2_LEN`]; TLVs after the addresses must tile the rest
//!   exactly, and are skipped (none changes the address).
//!
//! Nothing past the header is ever read as part of it: `consumed` is its exact length, and
//! what follows (a request, a TLS ClientHello) is the caller's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The 12 bytes a v2 header starts with.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest v1 header, CRLF included (the spec's 107).
pub const MAX_V1_LEN: usize = 107;
/// The largest v2 length field accepted (the bytes after the 16-byte fixed part): room for
/// UNIX addresses (216) and the TLVs balancers send (AWS's VPC endpoint id, Azure's link id,
/// TLS details) many times over.
pub const MAX_V2_LEN: usize = 2032;
/// The longest header of either version: what a reader must be able to hold.
pub const MAX_HEADER_LEN: usize = 16 + MAX_V2_LEN;

/// What the bytes received so far are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A valid header may still follow: wait for more bytes.
    Incomplete,
    /// A whole, valid header of `consumed` bytes.
    Done(Header),
    /// Not a valid header, whatever follows.
    Invalid(Invalid),
}

/// A valid header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The client's address (the source), when the header carries one: `None` for v2 LOCAL,
    /// v1 UNKNOWN, and the families without an IP address (the socket's peer stays the
    /// client's address then).
    pub source: Option<SocketAddr>,
    /// The address the client connected to (the balancer's listener), when carried.
    pub destination: Option<SocketAddr>,
    /// The header's length: the bytes after it are the connection's payload.
    pub consumed: usize,
}

/// Why bytes are not a PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("no PROXY protocol signature")]
    Signature,
    #[error("a v1 header longer than 107 bytes")]
    TooLong,
    #[error("a v1 header that is not `PROXY TCP4|TCP6|UNKNOWN ...`")]
    V1Protocol,
    #[error("a v1 header with a bad address or port")]
    V1Address,
    #[error("a v1 header without CRLF")]
    V1LineEnd,
    #[error("a v2 header of another version or command")]
    V2Command,
    #[error("a v2 header of an unknown address family or transport")]
    V2Family,
    #[error("a v2 length field over the limit")]
    V2Length,
    #[error("a v2 header too short for its addresses")]
    V2Short,
    #[error("a v2 header whose TLVs do not fit its length")]
    V2Tlv,
}

/// Read a header from the start of `buf` (the bytes received so far).
pub fn parse(buf: &[u8]) -> Parsed {
    const V1_SIGNATURE: &[u8] = b"PROXY ";
    let prefix_of = |sig: &[u8]| {
        let n = buf.len().min(sig.len());
        buf[..n] == sig[..n]
    };
    if prefix_of(V1_SIGNATURE) {
        if buf.len() < V1_SIGNATURE.len() {
            return Parsed::Incomplete;
        }
        return parse_v1(buf);
    }
    if prefix_of(&V2_SIGNATURE) {
        if buf.len() < 16 {
            return Parsed::Incomplete;
        }
        return parse_v2(buf);
    }
    Parsed::Invalid(Invalid::Signature)
}

fn parse_v1(buf: &[u8]) -> Parsed {
    let window = &buf[..buf.len().min(MAX_V1_LEN)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_V1_LEN {
            Parsed::Invalid(Invalid::TooLong)
        } else {
            Parsed::Incomplete
        };
    };
    if lf == 0 || window[lf - 1] != b'\r' {
        return Parsed::Invalid(Invalid::V1LineEnd);
    }
    let line = &window[6..lf - 1];
    let consumed = lf + 1;
    let mut parts = line.split(|&b| b == b' ');
    let proto = parts.next().unwrap_or_default();
    if proto == b"UNKNOWN" {
        // The spec: the rest of the line is to be ignored.
        return Parsed::Done(Header {
            source: None,
            destination: None,
            consumed,
        });
    }
    let v6 = match proto {
        b"TCP4" => false,
        b"TCP6" => true,
        _ => return Parsed::Invalid(Invalid::V1Protocol),
    };
    let fields: Option<[&[u8]; 4]> = (|| {
        let f = [parts.next()?, parts.next()?, parts.next()?, parts.next()?];
        parts.next().is_none().then_some(f)
    })();
    let Some([src, dst, sport, dport]) = fields else {
        return Parsed::Invalid(Invalid::V1Address);
    };
    match (
        ip_v1(src, v6),
        ip_v1(dst, v6),
        port_v1(sport),
        port_v1(dport),
    ) {
        (Some(s), Some(d), Some(sp), Some(dp)) => Parsed::Done(Header {
            source: Some(SocketAddr::new(s, sp)),
            destination: Some(SocketAddr::new(d, dp)),
            consumed,
        }),
        _ => Parsed::Invalid(Invalid::V1Address),
    }
}

fn ip_v1(text: &[u8], v6: bool) -> Option<IpAddr> {
    let text = std::str::from_utf8(text).ok()?;
    if v6 {
        text.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
    } else {
        text.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
    }
}

/// A port in decimal, 0..=65535, without a sign or leading zeros (the spec's form).
fn port_v1(text: &[u8]) -> Option<u16> {
    let digits = !text.is_empty() && text.len() <= 5 && text.iter().all(u8::is_ascii_digit);
    if !digits || (text.len() > 1 && text[0] == b'0') {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn parse_v2(buf: &[u8]) -> Parsed {
    let (ver_cmd, fam) = (buf[12], buf[13]);
    let len = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    let local = match ver_cmd {
        0x20 => true,
        0x21 => false,
        _ => return Parsed::Invalid(Invalid::V2Command),
    };
    // Family (high nibble): UNSPEC, INET, INET6, UNIX; transport: UNSPEC, STREAM, DGRAM.
    let addr_len = match fam >> 4 {
        0 => 0,
        1 => 12,
        2 => 36,
        3 => 216,
        _ => return Parsed::Invalid(Invalid::V2Family),
    };
    let transport = fam & 0x0f;
    if transport > 2 {
        return Parsed::Invalid(Invalid::V2Family);
    }
    if len > MAX_V2_LEN {
        return Parsed::Invalid(Invalid::V2Length);
    }
    if buf.len() < 16 + len {
        return Parsed::Incomplete;
    }
    let consumed = 16 + len;
    let done = |source, destination| {
        Parsed::Done(Header {
            source,
            destination,
            consumed,
        })
    };
    if local {
        // A connection of the balancer's own (its health check): the addresses, whatever
        // they are, are ignored and the socket's peer is the address.
        return done(None, None);
    }
    if len < addr_len {
        return Parsed::Invalid(Invalid::V2Short);
    }
    let body = &buf[16..consumed];
    if !tlvs_fit(&body[addr_len..]) {
        return Parsed::Invalid(Invalid::V2Tlv);
    }
    let port = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
    match (fam >> 4, transport) {
        (1, 1) => {
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    body[at],
                    body[at + 1],
                    body[at + 2],
                    body[at + 3],
                ))
            };
            done(
                Some(SocketAddr::new(ip(0), port(8))),
                Some(SocketAddr::new(ip(4), port(10))),
            )
        }
        (2, 1) => {
            let ip = |at: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&body[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(b))
            };
            done(
                Some(SocketAddr::new(ip(0), port(32))),
                Some(SocketAddr::new(ip(16), port(34))),
            )
        }
        // UNSPEC, UNIX, datagrams: no TCP client's IP address to take (HAProxy keeps the
        // connection's own address likewise).
        _ => done(None, None),
    }
}

/// The TLVs (type, 2-byte length, value) tile `rest` exactly.
fn tlvs_fit(mut rest: &[u8]) -> bool {
    while !rest.is_empty() {
        if rest.len() < 3 {
            return false;
        }
        let len = u16::from_be_bytes([rest[1], rest[2]]) as usize;
        match rest.get(3 + len..) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    true
}

/// Two addresses of one family: an IPv4-mapped IPv6 address as IPv4, and IPv4 as mapped IPv6
/// when the other is IPv6.
fn same_family(src: SocketAddr, dst: SocketAddr) -> (SocketAddr, SocketAddr) {
    let unmap = |a: SocketAddr| match a.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(a, |v4| SocketAddr::new(IpAddr::V4(v4), a.port())),
        IpAddr::V4(_) => a,
    };
    let map = |a: SocketAddr| match a.ip() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
        IpAddr::V6(_) => a,
    };
    let (s, d) = (unmap(src), unmap(dst));
    if s.is_ipv4() == d.is_ipv4() {
        (s, d)
    } else {
        (map(s), map(d))
    }
}

/// A v1 header for a connection from `src` to `dst` (HAProxy's `send-proxy`).
pub fn write_v1(out: &mut Vec<u8>, src: SocketAddr, dst: SocketAddr) {
    use std::io::Write as _;
    let (s, d) = same_family(src, dst);
    let proto = if s.is_ipv4() { "TCP4" } else { "TCP6" };
    let _ = write!(
        out,
        "PROXY {proto} {} {} {} {}\r\n",
        s.ip(),
        d.ip(),
        s.port(),
        d.port()
    );
}

/// The v1 header of a connection that is the sender's own (a health check).
pub const V1_UNKNOWN: &[u8] = b"PROXY UNKNOWN\r\n";

/// A v2 header (command PROXY, over STREAM, no TLV) for a connection from `src` to `dst`
/// (HAProxy's `send-proxy-v2`).
pub fn write_v2(out: &mut Vec<u8>, src: SocketAddr, dst: SocketAddr) {
    let (s, d) = same_family(src, dst);
    out.extend_from_slice(&V2_SIGNATURE);
    out.push(0x21);
    match (s.ip(), d.ip()) {
        (IpAddr::V4(si), IpAddr::V4(di)) => {
            out.extend_from_slice(&[0x11, 0, 12]);
            out.extend_from_slice(&si.octets());
            out.extend_from_slice(&di.octets());
        }
        (si, di) => {
            let v6 = |ip: IpAddr| match ip {
                IpAddr::V6(v6) => v6.octets(),
                IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            };
            out.extend_from_slice(&[0x21, 0, 36]);
            out.extend_from_slice(&v6(si));
            out.extend_from_slice(&v6(di));
        }
    }
    out.extend_from_slice(&s.port().to_be_bytes());
    out.extend_from_slice(&d.port().to_be_bytes());
}

/// The v2 header of a connection that is the sender's own (command LOCAL, family UNSPEC): a
/// health check.
pub const V2_LOCAL: [u8; 16] = *b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00";

#[cfg(test)]
mod tests;
