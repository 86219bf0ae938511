//! Response heads: framing from status and request method (RFC 9112 6.3), keep-alive, errors.

use super::*;
use BodyKind::*;
use CodecError::*;
use RequestMethod::{Connect, Head, Other};

#[derive(Debug)]
enum Want {
    /// Complete with this status, framing and keep-alive.
    Ok(u16, BodyKind, bool),
    Err(CodecError),
}

fn table() -> Vec<(RequestMethod, &'static str, Want)> {
    use Want::Ok as ok;
    vec![
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            ok(200, Length(5), true),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            ok(200, Empty, true),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
            ok(200, Length(5), true),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\n\r\n",
            ok(200, CloseDelimited, false),
        ),
        (
            Other,
            "HTTP/1.1 200\r\nContent-Length: 1\r\n\r\n",
            ok(200, Length(1), true),
        ),
        (
            Other,
            "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
            ok(404, Length(1), false),
        ),
        (
            Other,
            "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n",
            ok(200, Length(1), false),
        ),
        (
            Other,
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
            ok(200, Length(1), true),
        ),
        (
            Other,
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n",
            ok(200, CloseDelimited, false),
        ),
        // Step 1: no body for HEAD, 1xx, 204, 304 whatever the fields say.
        (
            Head,
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
            ok(200, Empty, true),
        ),
        (
            Head,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            ok(200, Empty, true),
        ),
        (
            Head,
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            ok(200, Empty, true),
        ),
        (
            Other,
            "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
            ok(204, Empty, false),
        ),
        (
            Other,
            "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
            ok(304, Empty, true),
        ),
        (Other, "HTTP/1.1 100 Continue\r\n\r\n", ok(100, Empty, true)),
        (
            Other,
            "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
            ok(103, Empty, true),
        ),
        // 101 and 2xx to CONNECT: tunnel.
        (
            Other,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            ok(101, Tunnel, false),
        ),
        (
            Connect,
            "HTTP/1.1 200 Connection Established\r\n\r\n",
            ok(200, Tunnel, false),
        ),
        (
            Connect,
            "HTTP/1.1 407 Proxy Auth\r\nContent-Length: 2\r\n\r\n",
            ok(407, Length(2), true),
        ),
        // Step 3: Transfer-Encoding wins; not ending in chunked reads until close.
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            ok(200, Chunked, true),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n",
            ok(200, Chunked, true),
        ),
        // Both framings: TE wins, but the connection is not reused (RFC 9112 6.3 step 3:
        // "ought to be handled as an error").
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            ok(200, Chunked, false),
        ),
        // Malformed codings and near-miss framing names: an error (502), not a guess.
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;q=1\r\n\r\n",
            Want::Err(InvalidTransferEncoding),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer_Encoding: chunked\r\n\r\n",
            Want::Err(InvalidHeaderName),
        ),
        // RFC 9110 8.6 / RFC 9112 6.1: a 204 carries neither; one that does has a server
        // whose framing is not to be trusted with another response.
        (
            Other,
            "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
            ok(204, Empty, false),
        ),
        (
            Other,
            "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
            ok(204, Empty, true),
        ),
        (
            Other,
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
            ok(304, Empty, true),
        ),
        (
            Head,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            ok(200, Empty, false),
        ),
        (Other, "http/1.1 200 OK\r\n\r\n", Want::Err(InvalidVersion)),
        (Other, "HTTP/1.1  200 OK\r\n\r\n", Want::Err(InvalidStatus)),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            ok(200, CloseDelimited, false),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n",
            ok(200, CloseDelimited, false),
        ),
        // RFC 9112 7: chunked is never applied twice. Read until close, the chunk framing
        // would pass for the payload: an error (502), as nginx answers it.
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            Want::Err(ChunkedMoreThanOnce),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            Want::Err(ChunkedMoreThanOnce),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip, chunked\r\n\r\n",
            Want::Err(ChunkedMoreThanOnce),
        ),
        // RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing.
        (
            Other,
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            Want::Err(TransferEncodingHttp10),
        ),
        (
            Other,
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\n",
            Want::Err(TransferEncodingHttp10),
        ),
        // No body whatever the fields say (step 1 comes first): nothing to misread.
        (
            Other,
            "HTTP/1.0 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
            ok(304, Empty, false),
        ),
        (
            Head,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            ok(200, Empty, true),
        ),
        // Step 5: bad Content-Length is an error (a proxy answers 502).
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            Want::Err(ConflictingContentLength),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
            Want::Err(InvalidContentLength),
        ),
        // Lengths past 2^63-1 are bad responses too (issue 22, item 19): nothing to pass on
        // for the next reader to take differently.
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n",
            ok(200, Length(i64::MAX as u64), true),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n",
            Want::Err(InvalidContentLength),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n",
            Want::Err(InvalidContentLength),
        ),
        // Syntax.
        (
            Other,
            "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
            Want::Err(BareLf),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 0\n\n",
            Want::Err(BareLf),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
            Want::Err(ObsFold),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n",
            Want::Err(WhitespaceBeforeColon),
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nX: a\0\r\n\r\n",
            Want::Err(InvalidHeaderValue),
        ),
        (Other, "HTTP/1.1 2000 OK\r\n\r\n", Want::Err(InvalidStatus)),
        (Other, "HTTP/1.1 20 OK\r\n\r\n", Want::Err(InvalidStatus)),
        (Other, "HTTP/1.1 099 Low\r\n\r\n", Want::Err(InvalidStatus)),
        (Other, "HTTP/1.1 200 O\rK\r\n\r\n", Want::Err(InvalidStatus)),
        (Other, "HTTP/2 200\r\n\r\n", Want::Err(UnsupportedVersion)),
        // RFC 9112 2.3: a higher minor version is read as 1.1 (keep-alive by default).
        (
            Other,
            "HTTP/1.2 200 OK\r\n\r\n",
            ok(200, CloseDelimited, false),
        ),
        (
            Other,
            "HTTP/1.9 404 Not Found\r\nContent-Length: 5\r\n\r\n",
            ok(404, Length(5), true),
        ),
        (
            Other,
            "\r\nHTTP/1.2 204 No Content\r\nX: y\r\n\r\n",
            ok(204, Empty, true),
        ),
        (
            Head,
            "HTTP/1.3 200\r\nContent-Length: 9\r\n\r\n",
            ok(200, Empty, true),
        ),
        (
            Other,
            "HTTP/1.2 200 OK\nContent-Length: 5\r\n\r\n",
            Want::Err(BareLf),
        ),
        (Other, "HTTP/1.2 200 OK\n\r\n", Want::Err(BareLf)),
        (Other, "HTTP/1.2 2000 OK\r\n\r\n", Want::Err(InvalidStatus)),
        (Other, "HTTP/1.2  200 OK\r\n\r\n", Want::Err(InvalidStatus)),
        (Other, "HTTP/1.2 200 O\rK\r\n\r\n", Want::Err(InvalidStatus)),
        (
            Other,
            "HTTP/1.2 200 OK\r\nX : y\r\n\r\n",
            Want::Err(WhitespaceBeforeColon),
        ),
        (Other, "HTTP/1.20 200 OK\r\n\r\n", Want::Err(InvalidVersion)),
        (
            Other,
            "HTTP/2.0 200 OK\r\n\r\n",
            Want::Err(UnsupportedVersion),
        ),
        (Other, "ICY 200 OK\r\n\r\n", Want::Err(InvalidVersion)),
        // A stray CR before the start line is an error at once, whatever lines follow (the
        // property test found a prefix rejected while the longer buffer was Partial).
        (Other, "\rAC:x\nAF: 1\r\n\r\n", Want::Err(InvalidStartLine)),
        (
            Other,
            "\r\n\rHTTP/1.1 200 OK\r\n\r\n",
            Want::Err(InvalidStartLine),
        ),
        (Other, "HTTP/1.1x 200 OK\r\n\r\n", Want::Err(InvalidVersion)),
    ]
}

#[test]
fn response_table() {
    for (method, wire, want) in table() {
        let w = wire.as_bytes();
        let got = res(w, method);
        match (&want, &got) {
            (Want::Ok(status, body, ka), Ok(Status::Complete(h))) => {
                assert_eq!(h.status, *status, "{wire:?}");
                assert_eq!(h.body, *body, "{wire:?}");
                assert_eq!(h.keep_alive, *ka, "{wire:?}");
                assert_eq!(h.head_len, w.len(), "{wire:?}");
                assert_response_agrees_with_httparse(w, h);
            }
            (Want::Err(e), Err(got_e)) => assert_eq!(got_e, e, "{wire:?}"),
            _ => panic!("{wire:?}: want {want:?}, got {got:?}"),
        }
        assert_prefixes(w, |b| res(b, method));
    }
}

#[test]
fn response_fields_and_interim() {
    let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nLocation: /x\r\nContent-Length: 2\r\n\r\nok";
    let Ok(Status::Complete(first)) = res(wire, Other) else {
        panic!()
    };
    assert_eq!((first.status, first.body, first.head_len), (100, Empty, 25));
    // The caller skips the 1xx head and parses again.
    let Ok(Status::Complete(h)) = res(&wire[first.head_len..], Other) else {
        panic!()
    };
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.status, 201);
    assert_eq!(h.reason, "Created");
    assert_eq!(h.headers[0], ("Location".to_string(), b"/x".to_vec()));
    assert_eq!(h.body, Length(2));
    assert_eq!(&wire[first.head_len + h.head_len..], b"ok");
}

#[test]
fn response_limits() {
    let limits = Limits {
        max_head: 128,
        max_headers: 2,
        ..Limits::default()
    };
    let big = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(200));
    assert_eq!(res_with(big.as_bytes(), Other, &limits), Err(HeadTooLarge));
    assert_eq!(
        res_with(&big.as_bytes()[..100], Other, &limits),
        Ok(Status::Partial)
    );
    let three = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(res_with(three, Other, &limits), Err(TooManyHeaders));
    let two = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n";
    assert!(matches!(
        res_with(two, Other, &limits),
        Ok(Status::Complete(_))
    ));
    // Every case at every split.
    for wire in [big.as_bytes(), three, two] {
        assert_prefixes(wire, |b| res_with(b, Other, &limits));
    }
}
