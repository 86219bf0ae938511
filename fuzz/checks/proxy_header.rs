// The PROXY protocol header reader (`shared::proxy_protocol::parse`): never a panic; a header
// it accepts is at most `MAX_HEADER_LEN` bytes and no more than it was given, reads the same
// alone and with any bytes after it (nothing past the header is part of it), and each of its
// prefixes is incomplete (a header split across reads is read whole); an invalid input stays
// invalid with more bytes, and an incomplete one is shorter than the longest header. Headers
// written for addresses taken from the input read back as those addresses.
//
// Shared by the libFuzzer target (`fuzz_targets/proxy_header.rs`) and the seed replay in
// `cargo test` (`shared/tests/fuzz_replay.rs`), both through `include!`: plain `//` comments
// only, no inner attributes.

use shared::proxy_protocol::{parse, write_v1, write_v2, Parsed, MAX_HEADER_LEN};
use std::net::{IpAddr, SocketAddr};

pub fn check(data: &[u8]) {
    match parse(data) {
        Parsed::Done(h) => {
            assert!(h.consumed <= data.len() && h.consumed <= MAX_HEADER_LEN);
            assert_eq!(parse(&data[..h.consumed]), Parsed::Done(h));
            let mut more = data[..h.consumed].to_vec();
            more.extend_from_slice(b"\x16\x03\x01GET / HTTP/1.1\r\n");
            assert_eq!(parse(&more), Parsed::Done(h));
            // Prefixes, cut at a few points (every one would be quadratic).
            for n in [0, 1, 5, 6, 11, 12, 15, 16, h.consumed / 2, h.consumed - 1] {
                if n < h.consumed {
                    assert_eq!(parse(&data[..n]), Parsed::Incomplete, "prefix {n}");
                }
            }
        }
        Parsed::Invalid(e) => {
            let mut more = data.to_vec();
            more.extend_from_slice(b"\r\n\r\n");
            assert!(matches!(parse(&more), Parsed::Invalid(_)), "{e} then valid");
        }
        Parsed::Incomplete => assert!(data.len() < MAX_HEADER_LEN),
    }
    roundtrip(data);
}

fn roundtrip(data: &[u8]) {
    if data.len() < 36 {
        return;
    }
    let addr = |b: &[u8], v6: bool| -> SocketAddr {
        let port = u16::from_be_bytes([b[0], b[1]]);
        let ip = if v6 {
            let mut o = [0u8; 16];
            o.copy_from_slice(&b[2..18]);
            IpAddr::from(o)
        } else {
            IpAddr::from([b[2], b[3], b[4], b[5]])
        };
        SocketAddr::new(ip, port)
    };
    let v6 = data[0] & 1 == 1;
    let (src, dst) = (addr(&data[..18], v6), addr(&data[18..36], v6));
    let norm = |a: SocketAddr| match a.ip() {
        IpAddr::V6(v) => v.to_ipv4_mapped().map_or(a, |v4| SocketAddr::new(IpAddr::V4(v4), a.port())),
        IpAddr::V4(_) => a,
    };
    for v2 in [false, true] {
        let mut out = Vec::new();
        if v2 {
            write_v2(&mut out, src, dst);
        } else {
            write_v1(&mut out, src, dst);
        }
        match parse(&out) {
            Parsed::Done(h) => {
                assert_eq!(h.consumed, out.len());
                assert_eq!(h.source.map(norm), Some(norm(src)));
                assert_eq!(h.destination.map(norm), Some(norm(dst)));
            }
            other => panic!("{out:02x?} read as {other:?}"),
        }
    }
}
