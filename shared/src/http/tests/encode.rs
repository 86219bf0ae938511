//! Serializers: exact bytes, and what they write parses back.

use super::*;
use crate::http::encode::*;
use bytes::BytesMut;

#[test]
fn heads_round_trip() {
    let mut b = BytesMut::new();
    write_request_line(&mut b, "GET", "/x?y", Version::Http11);
    write_header(&mut b, b"Host", b"example.com");
    write_header_u64(&mut b, b"Content-Length", 12345);
    end_head(&mut b);
    assert_eq!(
        &b[..],
        b"GET /x?y HTTP/1.1\r\nHost: example.com\r\nContent-Length: 12345\r\n\r\n"
    );
    let Ok(Status::Complete(h)) = req(&b) else {
        panic!()
    };
    assert_eq!(h.body, BodyKind::Length(12345));

    let mut b = BytesMut::new();
    write_status_line(&mut b, Version::Http10, 404, reason_phrase(404));
    end_head(&mut b);
    assert_eq!(&b[..], b"HTTP/1.0 404 Not Found\r\n\r\n");
}

#[test]
fn chunk_framing() {
    let mut b = BytesMut::new();
    // Up to the largest size the decoder takes (2^63-1, `framing::MAX_LENGTH`).
    for len in [1usize, 10, 255, 4096, i64::MAX as usize] {
        b.clear();
        write_chunk_header(&mut b, len);
        assert_eq!(&b[..], format!("{len:x}\r\n").as_bytes());
        let parsed = crate::http::chunked::parse_chunk_line(&b, &Limits::default());
        assert_eq!(parsed, Ok(Status::Complete((b.len(), len as u64))));
    }
    b.clear();
    write_chunk_header(&mut b, 5);
    b.extend_from_slice(b"hello");
    b.extend_from_slice(CHUNK_END);
    b.extend_from_slice(LAST_CHUNK);
    let run = decode_pieces(BodyKind::Chunked, &Limits::default(), &[&b]);
    assert_eq!(
        run,
        BodyRun {
            data: b"hello".to_vec(),
            result: Ok(true),
            rest: vec![]
        }
    );
}

#[test]
fn simple_responses() {
    let mut b = BytesMut::new();
    write_simple_response(&mut b, Version::Http11, 400, true);
    assert_eq!(
        &b[..],
        &b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 16\r\n\
Connection: close\r\n\r\n400 Bad Request\n"[..]
    );
    for status in [200u16, 404, 414, 431, 501, 502, 505, 599] {
        b.clear();
        write_simple_response(&mut b, Version::Http11, status, false);
        let Ok(Status::Complete(h)) = res(&b, RequestMethod::Other) else {
            panic!("{status}")
        };
        assert_eq!(h.status, status);
        assert!(h.keep_alive);
        let BodyKind::Length(n) = h.body else {
            panic!()
        };
        assert_eq!(b.len() - h.head_len, n as usize);
    }
    assert_eq!(reason_phrase(999), "");
}

#[test]
fn a_simple_answer_to_a_head_is_the_same_head_without_the_body() {
    let fields: [(&[u8], &[u8]); 1] = [(b"X-Cache", b"HIT")];
    for (status, close) in [(412u16, false), (504, true), (599, false)] {
        let (mut whole, mut head) = (BytesMut::new(), BytesMut::new());
        write_simple_response_with(&mut whole, Version::Http11, status, close, &fields);
        write_simple_answer(&mut head, Version::Http11, status, close, &fields, true);
        let Ok(Status::Complete(h)) = res(&whole, RequestMethod::Other) else {
            panic!("{status}")
        };
        assert_eq!(&head[..], &whole[..h.head_len], "{status}");
    }
}

#[test]
fn error_statuses() {
    use CodecError::*;
    assert_eq!(RequestLineTooLong.status(), 414);
    assert_eq!(HeadTooLarge.status(), 431);
    assert_eq!(TrailersTooLarge.status(), 431);
    assert_eq!(UnsupportedVersion.status(), 505);
    assert_eq!(UnknownTransferCoding.status(), 501);
    assert_eq!(InvalidStatus.status(), 502);
    assert_eq!(Http2Preface.status(), 400);
    assert_eq!(ContentLengthWithTransferEncoding.status(), 400);
}

#[test]
fn hop_by_hop_and_connection_tokens() {
    use crate::http::framing::{connection_tokens, is_hop_by_hop};
    for name in [
        "Connection",
        "keep-alive",
        "PROXY-CONNECTION",
        "te",
        "Trailer",
        "transfer-encoding",
        "Upgrade",
    ] {
        assert!(is_hop_by_hop(name), "{name}");
    }
    for name in ["Host", "Content-Length", "Trailers", "TEE", "X-Upgrade"] {
        assert!(!is_hop_by_hop(name), "{name}");
    }
    let headers = [
        httparse::Header {
            name: "Connection",
            value: b" X-Foo ,, close",
        },
        httparse::Header {
            name: "Host",
            value: b"a",
        },
        httparse::Header {
            name: "connection",
            value: b"Upgrade",
        },
    ];
    let tokens: Vec<&[u8]> = connection_tokens(&headers).collect();
    assert_eq!(tokens, [&b"X-Foo"[..], b"close", b"Upgrade"]);
}

/// `copy_fields` passes the kept field lines as they arrived (whitespace around values
/// included), in runs broken where a field is left out, the last line included.
#[test]
fn copy_fields_copies_kept_lines_as_they_arrived() {
    let wire = b"GET / HTTP/1.1\r\nHost: a\r\nX-One:  1 \r\nConnection: x-two\r\nX-Two: 2\r\nX-Three:3\r\nEmpty:\r\nLast: \tz\t\r\n\r\n";
    let mut storage = [httparse::EMPTY_HEADER; 16];
    let Ok(Status::Complete(h)) = parse_request(wire, &mut storage, &Limits::default()) else {
        panic!()
    };
    assert!(h.connection_names, "Connection lists x-two");
    let cases: [(&[&str], &[u8]); 4] = [
        (&[], b"Host: a\r\nX-One:  1 \r\nConnection: x-two\r\nX-Two: 2\r\nX-Three:3\r\nEmpty:\r\nLast: \tz\t\r\n"),
        (&["connection", "x-two"], b"Host: a\r\nX-One:  1 \r\nX-Three:3\r\nEmpty:\r\nLast: \tz\t\r\n"),
        (&["host", "last"], b"X-One:  1 \r\nConnection: x-two\r\nX-Two: 2\r\nX-Three:3\r\nEmpty:\r\n"),
        (&["host", "x-three", "empty"], b"X-One:  1 \r\nConnection: x-two\r\nX-Two: 2\r\nLast: \tz\t\r\n"),
    ];
    for (drop, want) in cases {
        let mut out = BytesMut::from(&b"HEAD\r\n"[..]);
        copy_fields(&mut out, wire, h.headers, |f| {
            !drop.iter().any(|d| f.name.eq_ignore_ascii_case(d))
        });
        assert_eq!(
            String::from_utf8_lossy(&out[6..]),
            String::from_utf8_lossy(want),
            "dropping {drop:?}"
        );
    }
}

/// A head whose Connection lists only `close` or `keep-alive` names no field.
#[test]
fn connection_names_only_for_other_tokens() {
    for (conn, names) in [
        ("", false),
        ("Connection: keep-alive\r\n", false),
        ("Connection: close, Keep-Alive\r\n", false),
        ("Connection: upgrade\r\nUpgrade: websocket\r\n", true),
        ("Connection: close, x-secret\r\n", true),
    ] {
        let wire = format!("GET / HTTP/1.1\r\nHost: a\r\n{conn}\r\n");
        let mut storage = [httparse::EMPTY_HEADER; 16];
        let Ok(Status::Complete(h)) =
            parse_request(wire.as_bytes(), &mut storage, &Limits::default())
        else {
            panic!("{wire}")
        };
        assert_eq!(h.connection_names, names, "{conn:?}");
    }
}
