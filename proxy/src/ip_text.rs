//! The client's address as text, formatted once per connection, for the forwarded fields,
//! the access log and `{remote_addr}`: a leaf the request model and the access log share.

use std::io::Write as _;
use std::net::IpAddr;

/// The client's address as text, formatted once per connection, and the scheme it spoke
/// (the forwarded fields say both).
#[derive(Clone)]
pub struct IpText {
    buf: [u8; 48],
    len: usize,
    ip: IpAddr,
    /// The client's port where known (0: not known, as for an address a field named): for a
    /// PROXY protocol header sent upstream. In the record's padding: no byte more per idle
    /// connection.
    port: u16,
    https: bool,
}

impl IpText {
    /// A connection's address (or a PROXY protocol header's source).
    pub fn of(addr: std::net::SocketAddr) -> Self {
        let mut t = IpText::new(addr.ip());
        t.port = addr.port();
        t
    }

    /// The client's address and port (0 when not known).
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.ip, self.port)
    }

    pub fn new(ip: IpAddr) -> Self {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let mut buf = [0u8; 48];
        let len = match ip {
            // Once per connection: the formatting machinery writes an octet at a time.
            IpAddr::V4(v4) => write_v4(&mut buf, v4.octets()),
            IpAddr::V6(_) => {
                let mut cur = std::io::Cursor::new(&mut buf[..]);
                let _ = write!(cur, "{ip}");
                cur.position() as usize
            }
        };
        IpText {
            buf,
            len,
            ip,
            port: 0,
            https: false,
        }
    }

    /// The client connection is TLS: `X-Forwarded-Proto: https`.
    pub fn set_https(&mut self, https: bool) {
        self.https = https;
    }

    /// Whether the client connection is TLS.
    pub fn https(&self) -> bool {
        self.https
    }

    /// `http` or `https`, for `X-Forwarded-Proto`.
    pub fn scheme(&self) -> &'static [u8] {
        if self.https {
            b"https"
        } else {
            b"http"
        }
    }

    /// The address (an IPv4-mapped IPv6 address as IPv4).
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// `a.b.c.d` at the start of `buf`; its length.
fn write_v4(buf: &mut [u8; 48], octets: [u8; 4]) -> usize {
    let mut len = 0;
    for (i, o) in octets.into_iter().enumerate() {
        if i > 0 {
            buf[len] = b'.';
            len += 1;
        }
        if o >= 100 {
            buf[len] = b'0' + o / 100;
            len += 1;
        }
        if o >= 10 {
            buf[len] = b'0' + o / 10 % 10;
            len += 1;
        }
        buf[len] = b'0' + o % 10;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_reads_as_the_standard_library_writes_it() {
        // Every octet value in every position.
        let v4 = (0..=255u8).flat_map(|o| [[o, 0, 0, 0], [1, o, 2, o], [o, o, o, o]]);
        for o in v4 {
            let ip = IpAddr::from(o);
            assert_eq!(
                IpText::new(ip).as_bytes(),
                ip.to_string().as_bytes(),
                "{ip}"
            );
        }
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(IpText::new(v6).as_bytes(), b"2001:db8::1");
        // An IPv4-mapped IPv6 address reads as IPv4.
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(IpText::new(mapped).as_bytes(), b"192.0.2.7");
    }
}
