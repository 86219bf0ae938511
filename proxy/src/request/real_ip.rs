//! `[headers] real_ip_from` / `real_ip_header`: the client's address a trusted peer names
//! (nginx's realip module with `real_ip_recursive on`), decided once per request from its one
//! parse.
//!
//! Only when the peer (the connection's address, after a PROXY protocol header) is in
//! `real_ip_from` is the field read at all. Its addresses (every such field, in order, as one
//! comma-separated list) are walked from the right: each trusted address is a hop to step
//! over; the first one that is not trusted is the client. When all are trusted, the leftmost
//! is. An entry that is not an address (`unknown`, garbage, a name) ends the walk: the last
//! address read before it (to its right) is taken, or the peer when there was none; nothing
//! left of garbage is believed. This is nginx's `ngx_http_get_forwarded_addr` to the letter.
//! An entry may carry a port (`192.0.2.1:4711`, `[2001:db8::1]:4711`), as nginx accepts.

use crate::cidr::Cidr;
use std::net::{IpAddr, SocketAddr};

/// The client's address that `fields` (the request's) name when `peer` is trusted, or `None`:
/// the peer stays the client.
pub fn derive(
    peer: IpAddr,
    from: &[Cidr],
    name: &str,
    fields: &[httparse::Header<'_>],
) -> Option<IpAddr> {
    let trusted = |ip: IpAddr| from.iter().any(|c| c.contains(ip));
    if !trusted(peer) {
        return None;
    }
    let mut found = None;
    let named = fields.iter().rev().filter(|h| super::eq(h.name, name));
    for entry in named.flat_map(|h| h.value.rsplit(|&b| b == b',')) {
        let entry = entry.trim_ascii();
        if entry.is_empty() {
            continue;
        }
        let Some(ip) = address(entry) else {
            return found;
        };
        found = Some(ip);
        if !trusted(ip) {
            return found;
        }
    }
    found
}

/// An address, with or without a port; an IPv4-mapped IPv6 address as IPv4.
fn address(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry).ok()?;
    let ip = match text.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => text.parse::<SocketAddr>().ok()?.ip(),
    };
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(peer: &str, fields: &[(&str, &str)], name: &str) -> Option<String> {
        let from: Vec<Cidr> = ["10.0.0.0/8", "::1", "192.168.1.7"]
            .iter()
            .map(|c| Cidr::parse(c).unwrap())
            .collect();
        let headers: Vec<httparse::Header<'_>> = fields
            .iter()
            .map(|(n, v)| httparse::Header {
                name: n,
                value: v.as_bytes(),
            })
            .collect();
        derive(peer.parse().unwrap(), &from, name, &headers).map(|ip| ip.to_string())
    }

    #[test]
    fn the_rightmost_untrusted_address_from_a_trusted_peer() {
        let xff = "X-Forwarded-For";
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<&'a str>);
        let table: &[Case<'_>] = &[
            // An untrusted peer: the field is not read.
            ("203.0.113.1", &[(xff, "198.51.100.1")], None),
            ("10.0.0.1", &[(xff, "198.51.100.1")], Some("198.51.100.1")),
            // Recursive: trusted hops stepped over, the spoofed leftmost never reached.
            (
                "10.0.0.1",
                &[(xff, "1.1.1.1, 198.51.100.1, 10.0.0.2, 192.168.1.7")],
                Some("198.51.100.1"),
            ),
            // All trusted: the leftmost.
            ("10.0.0.1", &[(xff, "10.0.0.3, 10.0.0.2")], Some("10.0.0.3")),
            // Several fields are one list, in order.
            (
                "10.0.0.1",
                &[(xff, "198.51.100.1"), ("x-forwarded-for", "10.0.0.5")],
                Some("198.51.100.1"),
            ),
            (
                "10.0.0.1",
                &[
                    (xff, "198.51.100.1"),
                    ("Other", "1.2.3.4"),
                    (xff, "198.51.100.2"),
                ],
                Some("198.51.100.2"),
            ),
            // Garbage ends the walk: the last address to its right, else the peer.
            (
                "10.0.0.1",
                &[(xff, "198.51.100.1, unknown, 10.0.0.2")],
                Some("10.0.0.2"),
            ),
            ("10.0.0.1", &[(xff, "198.51.100.1, unknown")], None),
            ("10.0.0.1", &[(xff, "198.51.100.1, 10.0.0.256")], None),
            // Empty entries and spaces are skipped; no field, or an empty one: the peer.
            (
                "10.0.0.1",
                &[(xff, " , 198.51.100.1 ,, ")],
                Some("198.51.100.1"),
            ),
            ("10.0.0.1", &[(xff, "")], None),
            ("10.0.0.1", &[], None),
            // Ports; IPv6; IPv4-mapped addresses are IPv4 (on both sides).
            (
                "10.0.0.1",
                &[(xff, "198.51.100.1:4711")],
                Some("198.51.100.1"),
            ),
            (
                "::1",
                &[(xff, "[2001:db8::1]:4711, ::1")],
                Some("2001:db8::1"),
            ),
            (
                "::ffff:10.0.0.1",
                &[(xff, "::ffff:198.51.100.9")],
                Some("198.51.100.9"),
            ),
            ("10.0.0.1", &[(xff, "2001:db8::7")], Some("2001:db8::7")),
        ];
        for (peer, fields, want) in table {
            assert_eq!(
                run(peer, fields, xff).as_deref(),
                *want,
                "{peer} {fields:?}"
            );
        }
    }

    #[test]
    fn another_field_by_name() {
        let fields = [
            ("X-Forwarded-For", "198.51.100.1"),
            ("x-real-ip", "198.51.100.2"),
        ];
        assert_eq!(
            run("10.0.0.1", &fields, "X-Real-IP").as_deref(),
            Some("198.51.100.2")
        );
        assert_eq!(run("10.0.0.1", &fields, "CF-Connecting-IP"), None);
    }
}
