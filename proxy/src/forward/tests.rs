//! Response heads rewritten on plain inputs: tables of the upstream's head and the exact head
//! the client gets.

use super::*;
use shared::http::Limits;

/// A request as the exchange knows it: a keep-alive HTTP/1.1 GET unless changed.
fn req() -> RequestInfo {
    RequestInfo {
        method: RequestMethod::Other,
        idempotent: true,
        version: Version::Http11,
        body: BodyKind::Empty,
        keep_alive: true,
        expect_continue: false,
        websocket: false,
        head_len: 0,
        host_written: true,
        pipelined: false,
        route: crate::config::RouteId::new(0),
        dispatch: crate::request::Dispatch::Proxy {
            group: crate::config::GroupId::new(0),
        },
        target: crate::request::Span { start: 0, len: 0 },
        dot_segments: false,
        authority: None,
        balance_key: 0,
    }
}

/// The client's head for the upstream head `wire` (or the error), written as the exchange
/// writes it: begun when parsed, ended once the exchange knows the outcome.
fn client(wire: &str, req: &RequestInfo, shutting_down: bool) -> Result<String, ProxyError> {
    let mut storage = [httparse::EMPTY_HEADER; 32];
    let head = match parse_final_response(
        wire.as_bytes(),
        &mut storage,
        req.method,
        &Limits::default(),
    ) {
        Ok(Status::Complete(h)) => h,
        other => panic!("{wire:?}: {other:?}"),
    };
    let info = response_info(&head, req, shutting_down)?;
    let mut out = BytesMut::from(&b"left over"[..]);
    write_client_head((&head, wire.as_bytes()), info.framing, &mut out);
    end_client_head(&mut out, &info);
    Ok(String::from_utf8(out.to_vec()).unwrap())
}

#[test]
fn client_heads() {
    let http10 = RequestInfo {
        version: Version::Http10,
        ..req()
    };
    let head = RequestInfo {
        method: RequestMethod::Head,
        ..req()
    };
    let closing = RequestInfo {
        keep_alive: false,
        ..req()
    };
    let ws = RequestInfo {
        websocket: true,
        ..req()
    };
    let bad = |e| Err(ProxyError::BadResponse(e));
    let ok = |s: &str| Ok(s.to_string());
    let table: Vec<(&str, &str, RequestInfo, Result<String, ProxyError>)> = vec![
        (
            "a length passes through; hop-by-hop and Connection-named fields go",
            "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\n\
             X-Hop: 1\r\nContent-Length: 3\r\nX-End: 2\r\n\r\n",
            req(),
            ok("HTTP/1.1 200 OK\r\nX-End: 2\r\nContent-Length: 3\r\n\r\n"),
        ),
        (
            "interim heads are not forwarded (the proxy answered Expect; 103 is dropped)",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\n\
             HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
            req(),
            ok("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"),
        ),
        (
            "chunked to an HTTP/1.1 client: re-chunked",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n",
            req(),
            ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        ),
        (
            "close-delimited to an HTTP/1.1 client: chunked, the client connection stays",
            "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
            req(),
            ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        ),
        (
            "chunked to an HTTP/1.0 client: close-delimited",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            http10,
            ok("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"),
        ),
        (
            "an HTTP/1.0 keep-alive client is told the connection stays",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            http10,
            ok("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"),
        ),
        (
            "a client that asked to close",
            "HTTP/1.1 204 No Content\r\n\r\n",
            closing,
            ok("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"),
        ),
        (
            "HEAD: no body, the length is the GET's and stays",
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
            head,
            ok("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"),
        ),
        // Issue 22, item 18 (RFC 9110 8.6): a 204 (or 1xx) never carries Content-Length; a
        // downstream proxy that honoured one would take the next response's bytes as body.
        (
            "204: its Content-Length is stripped",
            "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX-A: 1\r\n\r\n",
            req(),
            ok("HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n"),
        ),
        (
            "204: even Content-Length: 0",
            "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
            req(),
            ok("HTTP/1.1 204 No Content\r\n\r\n"),
        ),
        (
            "204 to HEAD: stripped as well",
            "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
            head,
            ok("HTTP/1.1 204 No Content\r\n\r\n"),
        ),
        (
            "304: a plain length is the selected representation's and stays",
            "HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\nContent-Length: 5\r\n\r\n",
            req(),
            ok("HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\nContent-Length: 5\r\n\r\n"),
        ),
        (
            "304: written as a plain number",
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 007\r\nContent-Length: 7\r\n\r\n",
            req(),
            ok("HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n"),
        ),
        (
            "304: an invalid length is dropped",
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 5x\r\n\r\n",
            req(),
            ok("HTTP/1.1 304 Not Modified\r\n\r\n"),
        ),
        (
            "304: conflicting lengths are dropped",
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            req(),
            ok("HTTP/1.1 304 Not Modified\r\n\r\n"),
        ),
        (
            "304: a length past 2^63-1 is dropped",
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 9223372036854775808\r\n\r\n",
            req(),
            ok("HTTP/1.1 304 Not Modified\r\n\r\n"),
        ),
        (
            "HEAD: an invalid length is dropped too",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            head,
            ok("HTTP/1.1 200 OK\r\n\r\n"),
        ),
        (
            "101 to a WebSocket upgrade: a Content-Length on it is stripped",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\
             Connection: Upgrade\r\n\r\n",
            ws,
            ok("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"),
        ),
        (
            "a coding other than chunked cannot be re-framed",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            req(),
            bad(CodecError::UnknownTransferCoding),
        ),
        (
            "101 to a WebSocket upgrade: Upgrade kept, Connection: upgrade",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: a\r\n\r\n",
            ws,
            ok("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                Sec-WebSocket-Accept: a\r\nConnection: upgrade\r\n\r\n"),
        ),
        (
            "101 to anything else is refused",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
            req(),
            bad(CodecError::InvalidStatus),
        ),
        // Issue 22, item 16: the tunnel opens only for the protocol the client was sent.
        (
            "101 to a WebSocket upgrade that switched to h2c is refused",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
            ws,
            bad(CodecError::InvalidStatus),
        ),
        (
            "101 to a WebSocket upgrade naming more than websocket is refused",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket, h2c\r\n\
             Connection: Upgrade\r\n\r\n",
            ws,
            bad(CodecError::InvalidStatus),
        ),
        (
            "101 to a WebSocket upgrade with two Upgrade fields is refused",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nUpgrade: h2c\r\n\
             Connection: Upgrade\r\n\r\n",
            ws,
            bad(CodecError::InvalidStatus),
        ),
        (
            "101 to a WebSocket upgrade without Upgrade is refused",
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n",
            ws,
            bad(CodecError::InvalidStatus),
        ),
        (
            "101 with Upgrade: WebSocket (any case) is a WebSocket tunnel",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\nConnection: upgrade\r\n\r\n",
            ws,
            ok("HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\nConnection: upgrade\r\n\r\n"),
        ),
    ];
    for (what, wire, req, want) in table {
        assert_eq!(client(wire, &req, false), want, "{what}");
    }
}

#[test]
fn client_connections_close_on_shutdown_and_after_early_answers() {
    let wire = "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n";
    let closed = "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    assert_eq!(client(wire, &req(), true).unwrap(), closed);
    // Draining with pipelined requests already received: they are served first.
    let pipelined = RequestInfo {
        pipelined: true,
        ..req()
    };
    assert_eq!(client(wire, &pipelined, true).unwrap(), wire);
    assert_eq!(client(wire, &pipelined, false).unwrap(), wire);

    let mut storage = [httparse::EMPTY_HEADER; 8];
    let limits = Limits::default();
    let Ok(Status::Complete(head)) =
        parse_final_response(wire.as_bytes(), &mut storage, RequestMethod::Other, &limits)
    else {
        panic!()
    };
    let info = response_info(&head, &req(), false).unwrap();
    assert!(info.client_keep_alive && info.upstream_keep_alive);
    let early = info.answered_early().unwrap();
    assert!(!early.client_keep_alive && !early.upstream_keep_alive);
    let mut out = BytesMut::new();
    write_client_head((&head, wire.as_bytes()), early.framing, &mut out);
    end_client_head(&mut out, &early);
    assert_eq!(out, closed.as_bytes());
    let tunnel = ResponseInfo {
        framing: ClientFraming::Tunnel,
        ..info
    };
    assert_eq!(
        tunnel.answered_early().map(|_| ()),
        Err(ProxyError::BadResponse(CodecError::InvalidStatus))
    );
}

#[test]
fn interim_heads_go_before_the_final_head_when_asked() {
    let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\
                 Connection: x\r\nX: 1\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n\
                 HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let limits = Limits::default();
    let cases: [(Option<usize>, &str); 3] = [
        (
            Some(0),
            "HTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n\
             HTTP/1.1 200 OK\r\nContent-Length: 0\r\n",
        ),
        // The first two were sent already (as they came): only the third goes with the head.
        (
            Some(String::from_utf8_lossy(wire).find("HTTP/1.1 102").unwrap()),
            "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n",
        ),
        // An HTTP/1.0 client: none.
        (None, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"),
    ];
    // Every case twice through one memo, which keeps no head behind interim heads: the
    // same each time.
    let mut memo = ResponseMemo::default();
    for (interim, want) in cases.iter().flat_map(|c| [c, c]) {
        let (interim, want) = (*interim, *want);
        let (mut out, mut fields) = (BytesMut::from(&b"old"[..]), ResponseFields::default());
        let info = prepare_response(
            false,
            (&limits, Some(&mut memo)),
            (wire, interim),
            &req(),
            &mut out,
            &mut fields,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (String::from_utf8_lossy(&out), info.status),
            (want.into(), 200),
            "{interim:?}"
        );
        assert_eq!(info.head_len, wire.len());
    }
    let mut out = BytesMut::new();
    let n = write_interims(&wire[..60], &limits, &mut out).unwrap();
    assert_eq!(
        (n, &out[..]),
        (25, &b""[..]),
        "a 100, then an incomplete 103: not yet"
    );
}

#[test]
fn response_headers_applied_to_a_relayed_head_and_a_stored_one() {
    use crate::config::route_opts::{header_edits, Side};
    let set = [
        ("Strict-Transport-Security", "max-age=63072000"),
        ("X-A", "new"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let edits = header_edits(&set, &["Server".into()], Side::Response).unwrap();
    let wire = b"HTTP/1.1 200 OK\r\nServer: origin\r\nx-a: 1\r\nB: 2\r\nSERVER: again\r\n\
                 X-A: 3\r\nContent-Length: 2\r\n\r\nok";
    let limits = shared::http::Limits::default();
    let (mut out, mut fields) = (BytesMut::new(), ResponseFields::default());
    let edits = &edits;
    prepare_response(
        false,
        (&limits, None),
        (wire, None),
        &req(),
        &mut out,
        &mut fields,
        Some(edits),
    )
    .unwrap()
    .unwrap();
    let want = "HTTP/1.1 200 OK\r\nB: 2\r\nStrict-Transport-Security: max-age=63072000\r\n\
                X-A: new\r\nContent-Length: 2\r\n";
    assert_eq!(String::from_utf8_lossy(&out), want);
}

/// One memo through a run of heads, requests and routes' edits, each case twice in a row and
/// the whole run twice: every client head is the one a plain write gives. The memo's copy is
/// never the head written for another framing (an HTTP/1.0 client, a HEAD) or other edits.
#[test]
fn a_client_head_from_the_memo_is_the_one_written_for_its_framing_and_edits() {
    use crate::config::route_opts::{header_edits, Side};
    let set = |v: &str| {
        [("X-Route".to_string(), v.to_string())]
            .into_iter()
            .collect()
    };
    let (a, b) = (
        header_edits(&set("a"), &["X".into()], Side::Response).unwrap(),
        header_edits(&set("b"), &[], Side::Response).unwrap(),
    );
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX: 1\r\n\r\n";
    let length = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX: 1\r\nConnection: y\r\nY: 2\r\n\r\nok";
    let reqs = [
        req(),
        RequestInfo {
            version: Version::Http10,
            ..req()
        },
        RequestInfo {
            method: RequestMethod::Head,
            ..req()
        },
    ];
    let limits = Limits::default();
    let write = |memo: Option<&mut ResponseMemo>, wire: &[u8], r: &RequestInfo, e| {
        let (mut out, mut fields) = (BytesMut::from(&b"old"[..]), ResponseFields::default());
        let info = prepare_response(
            false,
            (&limits, memo),
            (wire, None),
            r,
            &mut out,
            &mut fields,
            e,
        )
        .unwrap()
        .unwrap();
        (String::from_utf8_lossy(&out).into_owned(), info.framing)
    };
    let mut memo = ResponseMemo::default();
    // Requests outer and edits inner, then the other way: each is, in turn, the only thing
    // that differs from the case before (a head taken from the memo both times).
    let edits = [None, Some(&a), Some(&b)];
    let mut cases = Vec::new();
    for wire in [&chunked[..], &length[..]] {
        for r in &reqs {
            cases.extend(edits.iter().map(|&e| (wire, r, e)));
        }
        for &e in &edits {
            cases.extend(reqs.iter().map(|r| (wire, r, e)));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2 {
        for &(wire, r, e) in &cases {
            for _ in 0..2 {
                let want = write(None, wire, r, e);
                let got = write(Some(&mut memo), wire, r, e);
                assert_eq!(
                    got,
                    want,
                    "{:?} {:?} {:?}",
                    r.version,
                    r.method,
                    e.is_some()
                );
                seen.insert(want.0);
            }
        }
    }
    // The cases do differ: the chunked head reads two ways (chunked to 1.1; without a
    // framing field to 1.0 and to HEAD), the length head one, each with three edits.
    assert_eq!(seen.len(), 9, "{seen:#?}");
}
