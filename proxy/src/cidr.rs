//! Address ranges as the config writes them (`"10.0.0.0/8"`, `"192.168.1.7"`, `"::1"`,
//! `"2001:db8::/32"`), parsed once and matched per request without allocating. Sans-IO.
//!
//! The one parser of address ranges in the proxy: route `allow`/`deny` use it, and so does
//! anything else that names trusted or refused peers.
//!
//! - An IPv4 range matches IPv4 addresses and IPv4-mapped IPv6 ones (`::ffff:10.1.2.3`): a
//!   dual-stack listener sees IPv4 clients that way, and the client address is normalised to
//!   IPv4 everywhere else too (`request::IpText`). A range written in the mapped spelling
//!   (`::ffff:10.0.0.0/104`) is that IPv4 range.
//! - Host bits set under the prefix (`10.1.2.3/8`) are refused, as a likely typo (nginx
//!   warns; an access rule that silently means something else is worse than an error).

use std::fmt;
use std::net::IpAddr;

/// One range: the network's address bits and the prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// IPv4 ranges keep their 32 bits in the low bits.
    net: u128,
    prefix: u8,
    v4: bool,
}

impl Cidr {
    /// Parse `a.b.c.d`, `a.b.c.d/n`, an IPv6 address, or `ipv6/n`.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let bad = |why: &str| format!("`{s}` is not an address or CIDR block: {why}");
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| bad("expected e.g. 127.0.0.1, 10.0.0.0/8 or ::1"))?;
        let (v4, width, bits) = match ip {
            IpAddr::V4(a) => (true, 32u8, u128::from(u32::from(a))),
            IpAddr::V6(a) => (false, 128u8, u128::from(a)),
        };
        let prefix = match prefix {
            None => width,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= width && !p.starts_with('+') => n,
                _ => return Err(bad(&format!("the prefix length must be 0 to {width}"))),
            },
        };
        let host_mask = host_mask(width, prefix);
        if bits & host_mask != 0 {
            return Err(bad(
                "host bits are set after the prefix (write the network address)",
            ));
        }
        // `::ffff:a.b.c.d/n` (n >= 96) is the IPv4 range `a.b.c.d/(n-96)`: client addresses
        // are matched as IPv4 (`contains`), so kept as IPv6 it would hold no client at all,
        // and a `deny` written that way would let everyone through.
        let mapped = match ip {
            IpAddr::V6(a) if prefix >= 96 => a.to_ipv4_mapped(),
            _ => None,
        };
        if let Some(m) = mapped {
            return Ok(Cidr {
                net: u128::from(u32::from(m)),
                prefix: prefix - 96,
                v4: true,
            });
        }
        Ok(Cidr {
            net: bits,
            prefix,
            v4,
        })
    }

    /// The prefix length (32 or 128 for a single address).
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` lies in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (v4, bits) = match ip {
            IpAddr::V4(a) => (true, u128::from(u32::from(a))),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(m) => (true, u128::from(u32::from(m))),
                None => (false, u128::from(a)),
            },
        };
        let width = if self.v4 { 32 } else { 128 };
        v4 == self.v4 && bits & !host_mask(width, self.prefix) == self.net
    }
}

/// The bits below `prefix` in an address `width` bits wide.
fn host_mask(width: u8, prefix: u8) -> u128 {
    let host = u32::from(width - prefix);
    let all = if width == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    match host {
        0 => 0,
        128 => all,
        n => all & ((1u128 << n) - 1),
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = if self.v4 {
            IpAddr::from(std::net::Ipv4Addr::from(self.net as u32))
        } else {
            IpAddr::from(std::net::Ipv6Addr::from(self.net))
        };
        write!(f, "{ip}/{}", self.prefix)
    }
}

/// A list of ranges: whether any holds an address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CidrList(pub Vec<Cidr>);

impl CidrList {
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<CidrList, String> {
        items
            .iter()
            .map(|s| Cidr::parse(s.as_ref()))
            .collect::<Result<_, _>>()
            .map(CidrList)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ranges_hold_what_they_should() {
        for (range, addr, inside) in [
            ("10.0.0.0/8", "10.255.1.2", true),
            ("10.0.0.0/8", "11.0.0.0", false),
            ("10.0.0.0/8", "::ffff:10.1.2.3", true),
            ("192.168.1.7", "192.168.1.7", true),
            ("192.168.1.7", "192.168.1.8", false),
            ("192.168.1.7/32", "192.168.1.7", true),
            ("0.0.0.0/0", "1.2.3.4", true),
            ("0.0.0.0/0", "::1", false),
            ("::/0", "::1", true),
            ("::/0", "1.2.3.4", false),
            ("::1", "::1", true),
            ("::1", "::2", false),
            ("2001:db8::/32", "2001:db8:ffff::1", true),
            ("2001:db8::/32", "2001:db9::1", false),
            ("172.16.0.0/12", "172.31.255.255", true),
            ("172.16.0.0/12", "172.32.0.0", false),
            ("fe80::/10", "febf::1", true),
            ("fe80::/10", "fec0::1", false),
            // IPv4 ranges written in their IPv4-mapped IPv6 spelling hold IPv4 clients,
            // whichever way the client's address came.
            ("::ffff:10.0.0.9", "10.0.0.9", true),
            ("::ffff:10.0.0.9", "::ffff:10.0.0.9", true),
            ("::ffff:10.0.0.9", "10.0.0.8", false),
            ("::ffff:10.0.0.0/104", "10.1.2.3", true),
            ("::ffff:192.0.2.0/120", "192.0.2.7", true),
            ("::ffff:192.0.2.0/120", "192.0.3.7", false),
        ] {
            let c = Cidr::parse(range).unwrap();
            assert_eq!(c.contains(ip(addr)), inside, "{range} {addr}");
        }
    }

    #[test]
    fn bad_ranges_are_refused_with_a_reason() {
        for (bad, why) in [
            ("10.0.0.0/33", "0 to 32"),
            ("::/129", "0 to 128"),
            ("10.0.0.0/", "0 to 32"),
            ("10.0.0.0/+8", "0 to 32"),
            ("10.0.0.0/-1", "0 to 32"),
            ("10.1.2.3/8", "host bits are set"),
            ("10.0.0", "expected e.g."),
            ("example.com", "expected e.g."),
            ("", "expected e.g."),
            ("10.0.0.0/8/8", "0 to 32"),
            ("2001:db8::1/32", "host bits are set"),
        ] {
            let e = Cidr::parse(bad).unwrap_err();
            assert!(
                e.contains(why) && e.contains(&format!("`{bad}`")),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn ranges_print_as_parsed() {
        for (s, shown) in [
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("1.2.3.4", "1.2.3.4/32"),
            ("::1", "::1/128"),
        ] {
            assert_eq!(Cidr::parse(s).unwrap().to_string(), shown);
        }
        let l = CidrList::parse(&["10.0.0.0/8", "::1"]).unwrap();
        assert!(l.contains(ip("10.9.9.9")) && l.contains(ip("::1")));
        assert!(!l.contains(ip("127.0.0.1")) && !CidrList::default().contains(ip("::1")));
    }
}
