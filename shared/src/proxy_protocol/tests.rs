use super::*;

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn done(src: &str, dst: &str, consumed: usize) -> Parsed {
    Parsed::Done(Header {
        source: Some(sa(src)),
        destination: Some(sa(dst)),
        consumed,
    })
}

const KEEP_PEER: fn(usize) -> Parsed = |consumed| {
    Parsed::Done(Header {
        source: None,
        destination: None,
        consumed,
    })
};

fn v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut b = V2_SIGNATURE.to_vec();
    b.extend_from_slice(&[ver_cmd, fam]);
    b.extend_from_slice(&(body.len() as u16).to_be_bytes());
    b.extend_from_slice(body);
    b
}

fn inet4_body() -> Vec<u8> {
    vec![192, 0, 2, 7, 10, 0, 0, 1, 0x30, 0x39, 0, 80]
}

#[test]
fn v1_table() {
    let long_unknown = format!("PROXY UNKNOWN {}\r\n", "x".repeat(MAX_V1_LEN - 16));
    assert_eq!(long_unknown.len(), MAX_V1_LEN);
    let too_long = format!("PROXY UNKNOWN {}\r\n", "x".repeat(MAX_V1_LEN - 15));
    let cases: Vec<(&[u8], Parsed)> = vec![
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 12345 80\r\n",
            done("192.0.2.7:12345", "10.0.0.1:80", 40),
        ),
        (
            b"PROXY TCP6 2001:db8::7 ::1 65535 0\r\nGET / HTTP/1.1\r\n",
            done("[2001:db8::7]:65535", "[::1]:0", 36),
        ),
        (b"PROXY UNKNOWN\r\n", KEEP_PEER(15)),
        (b"PROXY UNKNOWN ff 1.2.3.4 x y\r\nrest", KEEP_PEER(30)),
        (long_unknown.as_bytes(), KEEP_PEER(MAX_V1_LEN)),
        // Truncated: every prefix of a good header waits for more.
        (b"", Parsed::Incomplete),
        (b"P", Parsed::Incomplete),
        (b"PROXY", Parsed::Incomplete),
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 12345 80",
            Parsed::Incomplete,
        ),
        (
            b"PROXY TCP4 192.0.2.7 10.0.0.1 12345 80\r",
            Parsed::Incomplete,
        ),
        // Oversized: 107 bytes and no line end.
        (too_long.as_bytes(), Parsed::Invalid(Invalid::TooLong)),
        (&[b'P'; 200][..], Parsed::Invalid(Invalid::Signature)),
        // Bad signature.
        (
            b"GET / HTTP/1.1\r\n\r\n",
            Parsed::Invalid(Invalid::Signature),
        ),
        (
            b"proxy TCP4 1.2.3.4 1.2.3.4 1 1\r\n",
            Parsed::Invalid(Invalid::Signature),
        ),
        (b"PROXY\tTCP4", Parsed::Invalid(Invalid::Signature)),
        // Bad family or fields.
        (
            b"PROXY TCP5 1.2.3.4 1.2.3.4 1 1\r\n",
            Parsed::Invalid(Invalid::V1Protocol),
        ),
        (
            b"PROXY UDP4 1.2.3.4 1.2.3.4 1 1\r\n",
            Parsed::Invalid(Invalid::V1Protocol),
        ),
        (
            b"PROXY  TCP4 1.2.3.4 1.2.3.4 1 1\r\n",
            Parsed::Invalid(Invalid::V1Protocol),
        ),
        (
            b"PROXY TCP4 ::1 ::1 1 1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP6 1.2.3.4 1.2.3.4 1 1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1 1 1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1  1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP4 1.2.3.4 1.2.3.4 65536 1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP4 1.2.3.4 1.2.3.4 01 1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP4 1.2.3.4 1.2.3.4 +1 1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP4 01.2.3.4 1.2.3.4 1 1\r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        (
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1 1 \r\n",
            Parsed::Invalid(Invalid::V1Address),
        ),
        // A bare LF.
        (
            b"PROXY TCP4 1.2.3.4 1.2.3.4 1 1\n",
            Parsed::Invalid(Invalid::V1LineEnd),
        ),
        (b"PROXY \n", Parsed::Invalid(Invalid::V1LineEnd)),
    ];
    for (input, want) in cases {
        assert_eq!(parse(input), want, "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn v2_table() {
    let mut v6 = vec![0x20, 0x01, 0x0d, 0xb8];
    v6.extend_from_slice(&[0; 11]);
    v6.push(7);
    v6.extend_from_slice(&[0; 15]);
    v6.push(1);
    v6.extend_from_slice(&[0x01, 0xbb, 0x00, 0x50]);
    let mut tlvs = inet4_body();
    // AWS's VPC endpoint id (0xEA), a NOOP (0x04) with an empty value, a CRC32C (0x03).
    tlvs.extend_from_slice(&[0xEA, 0, 5, 1, b'v', b'p', b'c', b'e']);
    tlvs.extend_from_slice(&[0x04, 0, 0]);
    tlvs.extend_from_slice(&[0x03, 0, 4, 1, 2, 3, 4]);
    let overrun = [inet4_body(), vec![0xEA, 0, 9, 1, 2]].concat();
    let stub = [inet4_body(), vec![0xEA, 0]].concat();
    let unix = vec![0u8; 216];
    let with_rest = [v2(0x21, 0x11, &inet4_body()), b"GET /".to_vec()].concat();
    let cases: Vec<(Vec<u8>, Parsed)> = vec![
        (
            v2(0x21, 0x11, &inet4_body()),
            done("192.0.2.7:12345", "10.0.0.1:80", 28),
        ),
        (with_rest, done("192.0.2.7:12345", "10.0.0.1:80", 28)),
        (
            v2(0x21, 0x21, &v6),
            done("[2001:db8::7]:443", "[::1]:80", 52),
        ),
        (
            v2(0x21, 0x11, &tlvs),
            done("192.0.2.7:12345", "10.0.0.1:80", 16 + tlvs.len()),
        ),
        // LOCAL: the addresses, whatever they are, are ignored.
        (v2(0x20, 0x00, &[]), KEEP_PEER(16)),
        (v2(0x20, 0x11, &inet4_body()), KEEP_PEER(28)),
        (v2(0x20, 0x00, &[9; 40]), KEEP_PEER(56)),
        // UNSPEC, UNIX, datagrams: the peer stays the address.
        (v2(0x21, 0x00, &[]), KEEP_PEER(16)),
        (v2(0x21, 0x31, &unix), KEEP_PEER(232)),
        (v2(0x21, 0x12, &inet4_body()), KEEP_PEER(28)),
        // Truncated.
        (V2_SIGNATURE[..5].to_vec(), Parsed::Incomplete),
        (
            v2(0x21, 0x11, &inet4_body())[..15].to_vec(),
            Parsed::Incomplete,
        ),
        (
            v2(0x21, 0x11, &inet4_body())[..27].to_vec(),
            Parsed::Incomplete,
        ),
        (v2(0x21, 0x11, &tlvs)[..30].to_vec(), Parsed::Incomplete),
        // Bad signature, version, command.
        (
            [&b"\r\n\r\n\0\r\nQUIT\r"[..], &[0x21, 0x11, 0, 0]].concat(),
            Parsed::Invalid(Invalid::Signature),
        ),
        (
            v2(0x11, 0x11, &inet4_body()),
            Parsed::Invalid(Invalid::V2Command),
        ),
        (
            v2(0x22, 0x11, &inet4_body()),
            Parsed::Invalid(Invalid::V2Command),
        ),
        // Bad family or transport.
        (
            v2(0x21, 0x41, &inet4_body()),
            Parsed::Invalid(Invalid::V2Family),
        ),
        (
            v2(0x21, 0x13, &inet4_body()),
            Parsed::Invalid(Invalid::V2Family),
        ),
        (v2(0x20, 0xF0, &[]), Parsed::Invalid(Invalid::V2Family)),
        // Too short for the family's addresses.
        (
            v2(0x21, 0x11, &inet4_body()[..11]),
            Parsed::Invalid(Invalid::V2Short),
        ),
        (
            v2(0x21, 0x21, &inet4_body()),
            Parsed::Invalid(Invalid::V2Short),
        ),
        // TLVs that do not tile the rest.
        (v2(0x21, 0x11, &overrun), Parsed::Invalid(Invalid::V2Tlv)),
        (v2(0x21, 0x11, &stub), Parsed::Invalid(Invalid::V2Tlv)),
        // Oversized: refused from the fixed part, before the body arrives.
        (
            v2(0x21, 0x11, &vec![0; MAX_V2_LEN + 1])[..16].to_vec(),
            Parsed::Invalid(Invalid::V2Length),
        ),
        (
            v2(0x21, 0x11, &[0xff; 0])[..14]
                .iter()
                .chain(&[0xff, 0xff])
                .copied()
                .collect(),
            Parsed::Invalid(Invalid::V2Length),
        ),
    ];
    for (i, (input, want)) in cases.into_iter().enumerate() {
        assert_eq!(parse(&input), want, "case {i}: {input:02x?}");
    }
    // The largest accepted: a length of exactly MAX_V2_LEN (of TLVs).
    let mut big = inet4_body();
    let pad = MAX_V2_LEN - big.len() - 3;
    big.extend_from_slice(&[0xEE, (pad >> 8) as u8, pad as u8]);
    big.resize(MAX_V2_LEN, 0);
    assert_eq!(
        parse(&v2(0x21, 0x11, &big)),
        done("192.0.2.7:12345", "10.0.0.1:80", MAX_HEADER_LEN)
    );
}

#[test]
fn every_prefix_of_a_valid_header_is_incomplete() {
    let mut headers = vec![
        b"PROXY TCP6 2001:db8::7 ::1 65535 0\r\n".to_vec(),
        v2(0x21, 0x11, &inet4_body()),
        V2_LOCAL.to_vec(),
    ];
    headers.push(V1_UNKNOWN.to_vec());
    for h in headers {
        for n in 0..h.len() {
            assert_eq!(parse(&h[..n]), Parsed::Incomplete, "{:02x?}", &h[..n]);
        }
        assert!(matches!(parse(&h), Parsed::Done(d) if d.consumed == h.len()));
    }
}

#[test]
fn written_headers_read_back() {
    let pairs = [
        (
            "192.0.2.7:12345",
            "10.0.0.1:80",
            "192.0.2.7:12345",
            "10.0.0.1:80",
        ),
        ("[2001:db8::7]:1", "[::1]:2", "[2001:db8::7]:1", "[::1]:2"),
        // An IPv4-mapped address is IPv4; mixed families both as IPv6.
        (
            "[::ffff:192.0.2.7]:5",
            "10.0.0.1:6",
            "192.0.2.7:5",
            "10.0.0.1:6",
        ),
        ("192.0.2.7:5", "[::1]:6", "[::ffff:192.0.2.7]:5", "[::1]:6"),
    ];
    for (src, dst, want_src, want_dst) in pairs {
        let (mut one, mut two) = (Vec::new(), Vec::new());
        write_v1(&mut one, sa(src), sa(dst));
        write_v2(&mut two, sa(src), sa(dst));
        for h in [&one, &two] {
            assert_eq!(parse(h), done(want_src, want_dst, h.len()), "{src} {dst}");
        }
    }
    let mut one = Vec::new();
    write_v1(&mut one, sa("192.0.2.7:12345"), sa("10.0.0.1:80"));
    assert_eq!(one, b"PROXY TCP4 192.0.2.7 10.0.0.1 12345 80\r\n");
    assert_eq!(parse(&V2_LOCAL), KEEP_PEER(16));
    assert_eq!(parse(V1_UNKNOWN), KEEP_PEER(15));
}
