//! Source-address spreading for `--close` against a loopback target (http_load's `-sip`).
//!
//! A connection per request leaves one TIME_WAIT socket per request on the client side; one
//! (source IP, destination) pair has only ~28k ephemeral ports, which a fast loopback run
//! exhausts in seconds. Every address of 127.0.0.0/8 is local on Linux, so rotating the source
//! over 127.0.0.1 .. 127.0.0.N (bound with IP_BIND_ADDRESS_NO_PORT, see `shared::net::connect`)
//! multiplies the ports by N.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The source addresses to rotate through for connects to `dst`: empty (let the kernel choose)
/// unless `dst` is IPv4 loopback and `n > 0`.
pub fn source_addresses(dst: SocketAddr, n: usize) -> Vec<IpAddr> {
    match dst.ip() {
        IpAddr::V4(v4) if v4.is_loopback() && n > 0 => (0..n.min(65_000))
            .map(|i| {
                // 127.0.0.1, 127.0.0.2, ... 127.0.0.255, 127.0.1.0 ...: never .0.0.0 itself.
                let host = (i + 1) as u32;
                IpAddr::V4(Ipv4Addr::from(0x7f00_0000u32 | host))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A worker's rotation through the source addresses. Workers start at different offsets so
/// together they use the addresses evenly.
#[derive(Debug, Clone)]
pub struct Rotation {
    next: usize,
    len: usize,
}

impl Rotation {
    pub fn new(len: usize, worker: usize) -> Rotation {
        Rotation {
            next: if len == 0 { 0 } else { worker % len },
            len,
        }
    }

    /// The index of the next source address, or None when there are none.
    #[inline]
    pub fn next_index(&mut self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let i = self.next;
        self.next = if i + 1 == self.len { 0 } else { i + 1 };
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_gets_spread_others_do_not() {
        let lo: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let s = source_addresses(lo, 3);
        assert_eq!(
            s,
            vec![
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "127.0.0.2".parse().unwrap(),
                "127.0.0.3".parse().unwrap()
            ]
        );
        assert_eq!(
            source_addresses(lo, 300)[255],
            "127.0.1.0".parse::<IpAddr>().unwrap()
        );
        assert!(source_addresses("10.0.0.1:80".parse().unwrap(), 3).is_empty());
        assert!(source_addresses("[::1]:80".parse().unwrap(), 3).is_empty());
        assert!(source_addresses(lo, 0).is_empty());
    }

    #[test]
    fn rotation_wraps() {
        let mut r = Rotation::new(3, 4);
        let got: Vec<_> = (0..4).map(|_| r.next_index().unwrap()).collect();
        assert_eq!(got, vec![1, 2, 0, 1]);
        assert_eq!(Rotation::new(0, 1).next_index(), None);
    }
}
