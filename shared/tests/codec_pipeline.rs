//! The codec through its public API only, driven the way a connection loop drives it:
//! pipelined requests arriving in reads of every size, heads parsed, bodies decoded,
//! leftover bytes carried to the next message.

use shared::http::{
    encode, limits::MAX_HEADERS_CAP, parse_request, parse_response, BodyDecoder, BodyKind,
    CodecError, Limits, RequestMethod, Status, Version,
};

const PIPELINE: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n\
POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;e\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n\
GET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// (target, body, keep_alive) of every request, reading `read_size` bytes at a time.
fn serve(read_size: usize) -> Result<Vec<(String, Vec<u8>, bool)>, CodecError> {
    let limits = Limits::default();
    let mut input = PIPELINE.chunks(read_size);
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    'conn: loop {
        // Head.
        let (target, kind, keep_alive, head_len) = loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
            match parse_request(&buf, &mut headers, &limits)? {
                Status::Complete(h) => {
                    break (h.target.to_string(), h.body, h.keep_alive, h.head_len);
                }
                Status::Partial => match input.next() {
                    Some(read) => buf.extend_from_slice(read),
                    None if buf.is_empty() => break 'conn,
                    None => return Err(CodecError::UnexpectedEof),
                },
            }
        };
        buf.drain(..head_len);
        // Body.
        let mut decoder = BodyDecoder::new(kind, &limits);
        let mut body = Vec::new();
        while !decoder.is_done() {
            let d = decoder.decode(&buf)?;
            body.extend_from_slice(d.data);
            let consumed = d.consumed;
            buf.drain(..consumed);
            if consumed == 0 && !decoder.is_done() {
                match input.next() {
                    Some(read) => buf.extend_from_slice(read),
                    None => decoder.finish()?,
                }
            }
        }
        out.push((target, body, keep_alive));
        if !keep_alive {
            break;
        }
    }
    Ok(out)
}

#[test]
fn pipelined_requests_at_every_read_size() {
    let want = vec![
        ("/a".to_string(), vec![], true),
        ("/b".to_string(), b"hello".to_vec(), true),
        ("/c".to_string(), b"abcde".to_vec(), true),
        ("/d".to_string(), vec![], false),
    ];
    for read_size in 1..=PIPELINE.len() {
        assert_eq!(serve(read_size).unwrap(), want, "read size {read_size}");
    }
}

#[test]
fn response_to_head_and_connect() {
    let limits = Limits::default();
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    let Ok(Status::Complete(h)) = parse_response(wire, &mut headers, RequestMethod::Head, &limits)
    else {
        panic!()
    };
    assert_eq!(h.body, BodyKind::Empty);
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let wire = b"HTTP/1.1 200 Connection established\r\n\r\n\x16\x03";
    let Ok(Status::Complete(h)) =
        parse_response(wire, &mut headers, RequestMethod::Connect, &limits)
    else {
        panic!()
    };
    assert_eq!(
        (h.body, h.keep_alive, &wire[h.head_len..]),
        (BodyKind::Tunnel, false, &b"\x16\x03"[..])
    );
}

#[test]
fn error_answer_is_well_formed() {
    let limits = Limits::default();
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let err = match parse_request(b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", &mut headers, &limits) {
        Err(e) => e,
        Ok(_) => panic!("accepted whitespace before colon"),
    };
    let mut out = bytes::BytesMut::new();
    encode::write_simple_response(&mut out, Version::Http11, err.status(), true);
    assert!(out.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let Ok(Status::Complete(h)) = parse_response(&out, &mut headers, RequestMethod::Other, &limits)
    else {
        panic!()
    };
    assert!(!h.keep_alive);
    assert_eq!(h.body, BodyKind::Length((out.len() - h.head_len) as u64));
}

/// Kettle's TE.TE obfuscations ("HTTP Desync Attacks", 2019), each next to a Content-Length
/// as an attacker sends them: whatever the obfuscation, the request is rejected with the
/// error that names it, never framed by one header while a peer frames it by the other.
#[test]
fn desync_obfuscations_are_rejected() {
    use CodecError::*;
    let cases: &[(&str, CodecError)] = &[
        // Chunked not final: 400 first (RFC 9112 6.3 step 4), whatever else is wrong.
        (
            "Transfer-Encoding: xchunked\r\n",
            TransferEncodingNotChunked,
        ),
        ("Transfer-Encoding : chunked\r\n", WhitespaceBeforeColon),
        (
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n",
            TransferEncodingNotChunked,
        ),
        (
            "Transfer-Encoding:\tchunked\r\n",
            ContentLengthWithTransferEncoding,
        ),
        (" Transfer-Encoding: chunked\r\n", ObsFold),
        ("X: X\nTransfer-Encoding: chunked\r\n", BareLf),
        ("Transfer-Encoding\r\n : chunked\r\n", InvalidHeaderName),
        ("Transfer-Encoding: chunked\r\n \r\n", ObsFold),
        (
            "Transfer-Encoding: \"chunked\"\r\n",
            InvalidTransferEncoding,
        ),
        (
            "Transfer-Encoding: chunked;x=1\r\n",
            InvalidTransferEncoding,
        ),
        ("Transfer-Encoding: chunk\x0bed\r\n", InvalidHeaderValue),
        ("Transfer_Encoding: chunked\r\n", InvalidHeaderName),
        (
            "Transfer-Encoding: identity, chunked\r\n",
            UnknownTransferCoding,
        ),
        ("Content-Length: 4\r\n", ConflictingContentLength),
        (
            "Content-Length: 4 \r\nContent-Length: +4\r\n",
            InvalidContentLength,
        ),
    ];
    let limits = Limits::default();
    let parse = |wire: &[u8]| {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
        parse_request(wire, &mut headers, &limits).map(|s| match s {
            Status::Complete(h) => Some(h.body),
            Status::Partial => None,
        })
    };
    for (field, want) in cases {
        let wire =
            format!("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n{field}\r\n0\r\n\r\n");
        let wire = wire.as_bytes();
        assert_eq!(parse(wire), Err(*want), "{wire:?}");
        // Replayed at every split, as reads would deliver it: each prefix is still Partial or
        // already the same error, never a head, and once rejected it stays rejected.
        let mut rejected = false;
        for n in 0..=wire.len() {
            match parse(&wire[..n]) {
                Ok(None) if !rejected => {}
                got => {
                    assert_eq!(got, Err(*want), "prefix of {n} bytes of {wire:?}");
                    rejected = true;
                }
            }
        }
    }
}
