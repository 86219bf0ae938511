//! Request heads: one table of wire bytes and exact outcomes, every case replayed at every
//! split point.

use super::*;
use BodyKind::*;
use CodecError::*;

/// What a request table row expects.
#[derive(Debug)]
enum Want {
    /// Complete, with this framing, keep-alive and authority.
    Ok(BodyKind, bool, Option<&'static [u8]>),
    Err(CodecError, u16),
}

const H: &str = "Host: example.com\r\n";

fn table() -> Vec<(String, Want)> {
    let ok = |b, ka, auth| Want::Ok(b, ka, auth);
    let ex: Option<&'static [u8]> = Some(b"example.com");
    let r = |s: &str| s.to_string();
    vec![
        // --- basics and keep-alive (RFC 9112 9.3) ---
        (format!("GET / HTTP/1.1\r\n{H}\r\n"), ok(Empty, true, ex)),
        (r("GET / HTTP/1.0\r\n\r\n"), ok(Empty, false, None)),
        (r("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), ok(Empty, true, None)),
        (r("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), ok(Empty, true, None)),
        (r("GET / HTTP/1.0\r\nConnection: foo\r\nConnection: bar, KEEP-ALIVE\r\n\r\n"), ok(Empty, true, None)),
        (r("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"), ok(Empty, false, None)),
        (format!("GET / HTTP/1.1\r\n{H}Connection: close\r\n\r\n"), ok(Empty, false, ex)),
        (format!("GET / HTTP/1.1\r\n{H}Connection: foo,  CLOSE \r\n\r\n"), ok(Empty, false, ex)),
        (format!("GET / HTTP/1.1\r\n{H}Connection: x\r\nConnection: close\r\n\r\n"), ok(Empty, false, ex)),
        (format!("GET / HTTP/1.1\r\n{H}Connection: keep-alive\r\n\r\n"), ok(Empty, true, ex)),
        (format!("\r\n\r\nGET / HTTP/1.1\r\n{H}\r\n"), ok(Empty, true, ex)),
        (format!("GET / HTTP/1.1\r\n{H}X-Tab: a\tb \t\r\nX-Obs: \u{e9}\r\nX-Empty:\r\n\r\n"), ok(Empty, true, ex)),
        // --- Content-Length (RFC 9112 6.3 step 5-6) ---
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5\r\n\r\n"), ok(Length(5), true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}content-length: 0\r\n\r\n"), ok(Empty, true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5, 5\r\n\r\n"), ok(Length(5), true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5\r\nContent-Length: 5\r\n\r\n"), ok(Length(5), true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 007\r\n\r\n"), ok(Length(7), true, ex)),
        // Lengths are bounded to 2^63-1, as nginx bounds them: a back end that reads one into
        // a signed 64-bit number must see the same length (issue 22, item 19).
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 9223372036854775807\r\n\r\n"), ok(Length(i64::MAX as u64), true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 09223372036854775807\r\n\r\n"), ok(Length(i64::MAX as u64), true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 9223372036854775808\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 18446744073709551615\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5, 9223372036854775808\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5\r\nContent-Length: 18446744073709551615\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5, 6\r\n\r\n"), Want::Err(ConflictingContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5\r\nContent-Length: 6\r\n\r\n"), Want::Err(ConflictingContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: +5\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: -1\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 0x5\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5 5\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 1.0\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length:\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5,\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 18446744073709551616\r\n\r\n"), Want::Err(InvalidContentLength, 400)),
        // --- Transfer-Encoding (RFC 9112 6.1, 6.3 steps 3-4) ---
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n"), ok(Chunked, true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}transfer-encoding: CHUNKED\r\n\r\n"), ok(Chunked, true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding:  chunked\t\r\n\r\n"), ok(Chunked, true, ex)),
        // Empty list elements are ignored (RFC 9110 5.6.1).
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: , chunked,\r\n\r\n"), ok(Chunked, true, ex)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\nTransfer-Encoding:\r\n\r\n"), ok(Chunked, true, ex)),
        // Codings under chunked would reach the upstream undecoded and unannounced: a proxy
        // does not implement them (RFC 9112 6.1: 501).
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: gzip, chunked\r\n\r\n"), Want::Err(UnknownTransferCoding, 501)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"), Want::Err(UnknownTransferCoding, 501)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked, identity\r\n\r\n"), Want::Err(TransferEncodingNotChunked, 400)),
        // Parameters on chunked, or a coding that is not a token: malformed, not guessed at.
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked;q=1\r\n\r\n"), Want::Err(InvalidTransferEncoding, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked ; q=1\r\n\r\n"), Want::Err(InvalidTransferEncoding, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked;\r\n\r\n"), Want::Err(InvalidTransferEncoding, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: \"chunked\"\r\n\r\n"), Want::Err(InvalidTransferEncoding, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked chunked\r\n\r\n"), Want::Err(InvalidTransferEncoding, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunk\u{e9}d\r\n\r\n"), Want::Err(InvalidTransferEncoding, 400)),
        // Near-miss framing names that some back ends fold into the real ones (CGI-style
        // `_` to `-`): never forwarded, rejected.
        (format!("POST / HTTP/1.1\r\n{H}Transfer_Encoding: chunked\r\n\r\n"), Want::Err(InvalidHeaderName, 400)),
        (format!("POST / HTTP/1.1\r\n{H}content_length: 5\r\n\r\n"), Want::Err(InvalidHeaderName, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), Want::Err(ContentLengthWithTransferEncoding, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n"), Want::Err(ContentLengthWithTransferEncoding, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked, gzip\r\n\r\n"), Want::Err(TransferEncodingNotChunked, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: gzip\r\n\r\n"), Want::Err(TransferEncodingNotChunked, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: chunked, chunked\r\n\r\n"), Want::Err(TransferEncodingNotChunked, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding:\r\n\r\n"), Want::Err(TransferEncodingNotChunked, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: foo, chunked\r\n\r\n"), Want::Err(UnknownTransferCoding, 501)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: identity\r\n\r\n"), Want::Err(TransferEncodingNotChunked, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding: xchunked\r\n\r\n"), Want::Err(TransferEncodingNotChunked, 400)),
        (r("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), Want::Err(TransferEncodingHttp10, 400)),
        // --- bare LF, obs-fold, field syntax (RFC 9112 2.2, 5.1, 5.2) ---
        (format!("GET / HTTP/1.1\n{H}\r\n"), Want::Err(BareLf, 400)),
        (r("GET / HTTP/1.1\r\nHost: a\n\r\n"), Want::Err(BareLf, 400)),
        (r("GET / HTTP/1.1\r\nHost: a\r\n\n"), Want::Err(BareLf, 400)),
        (r("GET / HTTP/1.1\nHost: a\n\n"), Want::Err(BareLf, 400)),
        (r("GET / HTTP/1.0\n\n"), Want::Err(BareLf, 400)),
        (r("GET / HTTP/1.0\r\n\n"), Want::Err(BareLf, 400)),
        (r("GET / HTTP/1.1\r\nHost: a\r\nX: y\nZ: w\r\n\r\n"), Want::Err(BareLf, 400)),
        (format!("\nGET / HTTP/1.1\r\n{H}\r\n"), Want::Err(BareLf, 400)),
        (format!("\rGET / HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidStartLine, 400)),
        (r("\rGT: x\nAF: 1\r\n\r\n"), Want::Err(InvalidVersion, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X: a\r\n b\r\n\r\n"), Want::Err(ObsFold, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X: a\r\n\tb\r\n\r\n"), Want::Err(ObsFold, 400)),
        (r("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), Want::Err(ObsFold, 400)),
        (r("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), Want::Err(WhitespaceBeforeColon, 400)),
        (r("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"), Want::Err(WhitespaceBeforeColon, 400)),
        (format!("POST / HTTP/1.1\r\n{H}Transfer-Encoding : chunked\r\n\r\n"), Want::Err(WhitespaceBeforeColon, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X: a\0b\r\n\r\n"), Want::Err(InvalidHeaderValue, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X: a\rb\r\n\r\n"), Want::Err(InvalidHeaderValue, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X: a\x7fb\r\n\r\n"), Want::Err(InvalidHeaderValue, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X(: a\r\n\r\n"), Want::Err(InvalidHeaderName, 400)),
        (format!("GET / HTTP/1.1\r\n{H}: a\r\n\r\n"), Want::Err(InvalidHeaderName, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X a: b\r\n\r\n"), Want::Err(InvalidHeaderName, 400)),
        (format!("GET / HTTP/1.1\r\n{H}\rX\r\n\r\n"), Want::Err(InvalidHeaderName, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X\u{80}: a\r\n\r\n"), Want::Err(InvalidHeaderName, 400)),
        (format!("GET / HTTP/1.1\r\n{H}X: a\x0bb\r\n\r\n"), Want::Err(InvalidHeaderValue, 400)),
        // --- start line ---
        (format!("G@T / HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidMethod, 400)),
        (format!(" GET / HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidMethod, 400)),
        (format!("GET\t/ HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidMethod, 400)),
        (format!("GET /a\x7f HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidTarget, 400)),
        (format!("GET  / HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidTarget, 400)),
        (format!("GET foo HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidTarget, 400)),
        (format!("GET * HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidTarget, 400)),
        (format!("GET http:///x HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidTarget, 400)),
        (format!("CONNECT /x HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidTarget, 400)),
        // Methods are case-sensitive (RFC 9110 9.1); a back end that took `head` for HEAD
        // would answer without the body this side expects: framing methods must be exact.
        (format!("head / HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidMethod, 400)),
        (format!("Head / HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidMethod, 400)),
        (r("connect a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n"), Want::Err(InvalidMethod, 400)),
        (format!("get / HTTP/1.1\r\n{H}\r\n"), ok(Empty, true, ex)),
        // Fragments are never sent (RFC 9112 3.2); back ends disagree on where a path ends.
        (format!("GET /a#b HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidTarget, 400)),
        (format!("GET /a?b#c HTTP/1.1\r\n{H}\r\n"), Want::Err(InvalidTarget, 400)),
        (r("GET http://a.example/#x HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (format!("GET /a\u{e9}?x=\"y\"&z={{|}} HTTP/1.1\r\n{H}\r\n"), ok(Empty, true, ex)),
        (format!("GET / HTTP/1.1 \r\n{H}\r\n"), Want::Err(InvalidVersion, 400)),
        (format!("GET / HTTP/1.1x\r\n{H}\r\n"), Want::Err(InvalidVersion, 400)),
        (format!("GET / HTTP/1.1\rx\r\n{H}\r\n"), Want::Err(InvalidStartLine, 400)),
        (format!("GET / http/1.1\r\n{H}\r\n"), Want::Err(InvalidVersion, 400)),
        (format!("GET / HTTX/1.1\r\n{H}\r\n"), Want::Err(InvalidVersion, 400)),
        (format!("GET / HTTP/11.1\r\n{H}\r\n"), Want::Err(InvalidVersion, 400)),
        (format!("GET / HTTP/2.0\r\n{H}\r\n"), Want::Err(UnsupportedVersion, 505)),
        (format!("GET / HTTP/0.9\r\n{H}\r\n"), Want::Err(UnsupportedVersion, 505)),
        (format!("GET / HTTP/3\r\n{H}\r\n"), Want::Err(UnsupportedVersion, 505)),
        (format!("GET / HTTP/1.10\r\n{H}\r\n"), Want::Err(InvalidVersion, 400)),
        (format!("GET / HTTP/01.1\r\n{H}\r\n"), Want::Err(InvalidVersion, 400)),
        (format!("GET / HTTP/1.1\t\r\n{H}\r\n"), Want::Err(InvalidVersion, 400)),
        (r("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Want::Err(Http2Preface, 400)),
        // --- Host and target forms (RFC 9112 3.2) ---
        (r("GET / HTTP/1.1\r\n\r\n"), Want::Err(MissingHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), Want::Err(DuplicateHost, 400)),
        (r("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"), Want::Err(DuplicateHost, 400)),
        (r("GET http://a.example:8080/x?y HTTP/1.1\r\nHost: b.example\r\n\r\n"), ok(Empty, true, Some(b"a.example:8080"))),
        (r("GET HTTPS://a.example?q HTTP/1.1\r\nHost: b\r\n\r\n"), ok(Empty, true, Some(b"a.example"))),
        (r("GET http://a.example HTTP/1.0\r\n\r\n"), ok(Empty, false, Some(b"a.example"))),
        (r("GET http://a.example/ HTTP/1.1\r\n\r\n"), Want::Err(MissingHost, 400)),
        (r("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n"), ok(Empty, true, Some(b"a.example:443"))),
        (format!("OPTIONS * HTTP/1.1\r\n{H}\r\n"), ok(Empty, true, ex)),
        (r("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"), ok(Empty, true, Some(b"[::1]:8080"))),
        (r("GET / HTTP/1.1\r\nHost:\r\n\r\n"), ok(Empty, true, Some(b""))),
        (r("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET http://user@a/ HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("CONNECT a.example HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("CONNECT a/b:1 HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        // Authority grammar (RFC 3986 3.2.2-3): host, then at most one `:` and a decimal port.
        (r("GET http://:80/ HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("GET http://a:b/ HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("GET http://a:1:2/ HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("GET http://a%zz/ HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("GET http://a%2d:80/ HTTP/1.1\r\nHost: a\r\n\r\n"), ok(Empty, true, Some(b"a%2d:80"))),
        (r("GET http://[::1]:80/ HTTP/1.1\r\nHost: a\r\n\r\n"), ok(Empty, true, Some(b"[::1]:80"))),
        (r("GET http://a:/ HTTP/1.1\r\nHost: a\r\n\r\n"), ok(Empty, true, Some(b"a:"))),
        // Only http and https URIs are requests for this server; `ftp://` would be routed on
        // an authority no back end serves.
        (r("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("GET x-y://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("GET / HTTP/1.1\r\nHost: a:b:c\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: :80\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: a]\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: [a]\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: a%\r\n\r\n"), Want::Err(InvalidHost, 400)),
        (r("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"), ok(Empty, true, Some(b"127.0.0.1:8080"))),
        (r("GET / HTTP/1.1\r\nHost: Under_Score.example\r\n\r\n"), ok(Empty, true, Some(b"Under_Score.example"))),
        (r("CONNECT a.example: HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("CONNECT :443 HTTP/1.1\r\nHost: a\r\n\r\n"), Want::Err(InvalidTarget, 400)),
        (r("CONNECT [::1]:443 HTTP/1.1\r\nHost: a\r\n\r\n"), ok(Empty, true, Some(b"[::1]:443"))),
    ]
}

#[test]
fn request_table() {
    for (wire, want) in table() {
        let wire = wire.as_bytes();
        let got = req(wire);
        let show = String::from_utf8_lossy(wire);
        match (&want, &got) {
            (Want::Ok(body, ka, auth), Ok(Status::Complete(h))) => {
                assert_eq!(h.body, *body, "{show:?}");
                assert_eq!(h.keep_alive, *ka, "{show:?}");
                assert_eq!(h.authority.as_deref(), *auth, "{show:?}");
                assert_eq!(h.head_len, wire.len(), "{show:?}");
                assert_request_agrees_with_httparse(wire, h);
            }
            (Want::Err(e, status), Err(got_e)) => {
                assert_eq!(got_e, e, "{show:?}");
                assert_eq!(got_e.status(), *status, "{show:?}");
            }
            _ => panic!("{show:?}: want {want:?}, got {got:?}"),
        }
        assert_prefixes(wire, req);
    }
}

/// RFC 9112 2.3: a server "SHOULD" process a higher minor version of HTTP/1 as 1.1, as nginx
/// does (issue 22, item 20a). httparse reads only 1.0 and 1.1, so the codec reads the start
/// line of the others itself; the result must be exactly the 1.1 parse of the same head.
#[test]
fn later_http1_minor_versions_are_read_as_http11() {
    for minor in 2..=9 {
        for head in [
            format!(
                "POST /p?q HTTP/1.{minor}\r\n{H}Content-Length: 2\r\nConnection: close\r\n\r\nab"
            ),
            format!("GET / HTTP/1.{minor}\r\n{H}\r\n"),
            format!("\r\nGET http://a.example/x HTTP/1.{minor}\r\nHost: b\r\n\r\n"),
        ] {
            let as_11 = head.replacen(&format!("HTTP/1.{minor}"), "HTTP/1.1", 1);
            let got = req(head.as_bytes());
            assert!(matches!(got, Ok(Status::Complete(_))), "{head:?}: {got:?}");
            assert_eq!(got, req(as_11.as_bytes()), "{head:?}");
            assert_prefixes(head.as_bytes(), req);
        }
    }
    // Everything else about the head is judged as for 1.1; other majors stay 505.
    let table: &[(&str, CodecError)] = &[
        ("GET / HTTP/1.2\r\n\r\n", MissingHost),
        ("GET / HTTP/1.2\nHost: a\r\n\r\n", BareLf),
        ("GET / HTTP/1.2\n\r\n", BareLf),
        ("GET / HTTP/1.2\r\nHost: a\n\r\n", BareLf),
        ("GET / HTTP/1.2 \r\nHost: a\r\n\r\n", InvalidVersion),
        ("GET / HTTP/1.2x\r\nHost: a\r\n\r\n", InvalidVersion),
        ("GET / HTTP/1.20\r\nHost: a\r\n\r\n", InvalidVersion),
        ("GET / HTTP/1.a\r\nHost: a\r\n\r\n", InvalidVersion),
        ("GET / HTTP/1.2\rX\r\nHost: a\r\n\r\n", InvalidStartLine),
        ("GET / HTTP/1.2\r\nHost : a\r\n\r\n", WhitespaceBeforeColon),
        ("GET / HTTP/1.2\r\nHost: a\r\n b\r\n\r\n", ObsFold),
        (
            "GET / HTTP/1.2\r\nHost: a\r\nX: \x01\r\n\r\n",
            InvalidHeaderValue,
        ),
        ("GET /a#b HTTP/1.2\r\nHost: a\r\n\r\n", InvalidTarget),
        (
            "GET / HTTP/1.2\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            ContentLengthWithTransferEncoding,
        ),
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", UnsupportedVersion),
        ("GET / HTTP/0.9\r\nHost: a\r\n\r\n", UnsupportedVersion),
    ];
    for &(wire, want) in table {
        assert_eq!(req(wire.as_bytes()), Err(want), "{wire:?}");
        assert_prefixes(wire.as_bytes(), req);
    }
    let max = Limits {
        max_headers: 1,
        ..Limits::default()
    };
    let two = b"GET / HTTP/1.2\r\nHost: a\r\nX: y\r\n\r\n";
    assert_eq!(req_with(two, &max), Err(TooManyHeaders));
}

#[test]
fn request_fields() {
    let wire = b"POST /submit?a=1 HTTP/1.1\r\nHost: example.com:8080\r\nContent-Length: 3\r\n\
Expect: 100-continue\r\nConnection: Upgrade, keep-alive\r\nUpgrade: websocket\r\n\r\nabc";
    let Ok(Status::Complete(h)) = req(wire) else {
        panic!("{:?}", req(wire))
    };
    assert_eq!(h.method, "POST");
    assert_eq!(h.target, "/submit?a=1");
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.head_len, wire.len() - 3);
    assert_eq!(h.authority.as_deref(), Some(&b"example.com:8080"[..]));
    assert_eq!(h.body, Length(3));
    assert!(h.keep_alive && h.expect_continue);
    assert_eq!(h.upgrade.as_deref(), Some(&b"websocket"[..]));
    assert_eq!(h.headers.len(), 5);
    assert_eq!(
        h.headers[0],
        ("Host".to_string(), b"example.com:8080".to_vec())
    );
    // Upgrade without the Connection token is not an upgrade; Expect in HTTP/1.0 is ignored.
    let Ok(Status::Complete(h)) =
        req(b"GET / HTTP/1.0\r\nUpgrade: h2c\r\nExpect: 100-continue\r\n\r\n")
    else {
        panic!()
    };
    assert_eq!(h.upgrade, None);
    assert!(!h.expect_continue);
    // RFC 9110 7.8: "A server MUST ignore an Upgrade header field that is received in an
    // HTTP/1.0 request."
    let Ok(Status::Complete(h)) =
        req(b"GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
    else {
        panic!()
    };
    assert_eq!(h.upgrade, None);
    assert_prefixes(wire, req);
}

/// The WebSocket upgrade rule (RFC 6455 4.1, RFC 9110 7.8), on parsed heads: a GET whose
/// Connection has `upgrade` and whose Upgrade list names `websocket`.
#[test]
fn websocket_upgrades() {
    let table: &[(&str, bool)] = &[
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, upgrade\r\nUpgrade: WebSocket\r\n\r\n", true),
        // A list of protocols: `websocket` anywhere in it.
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket, h2c\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c ,websocket\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket/13x, wss\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: \r\n\r\n", false),
        // Two Upgrade lines are one list (RFC 9110 5.3): `websocket` in either, in either
        // order; in neither, none.
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\nUpgrade: foo\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: foo\r\nUpgrade: websocket\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: foo\r\nUpgrade: h2c, bar\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: foo\r\nConnection: upgrade\r\nupgrade: WebSocket\r\n\r\n", true),
        // No `upgrade` token in Connection; HTTP/1.0; not a GET.
        ("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nUpgrade: websocket\r\n\r\n", false),
        ("GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", false),
        ("POST / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", false),
        ("HEAD / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", false),
    ];
    for (wire, want) in table {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let Ok(Status::Complete(h)) =
            parse_request(wire.as_bytes(), &mut headers, &Limits::default())
        else {
            panic!("{wire:?} does not parse")
        };
        assert_eq!(h.is_websocket_upgrade(), *want, "{wire:?}");
    }
}

#[test]
fn request_limits() {
    let limits = Limits {
        max_request_line: 64,
        max_head: 256,
        max_headers: 4,
        ..Limits::default()
    };
    let at = |w: &[u8]| req_with(w, &limits);
    let line = |total: usize| format!("GET /{} HTTP/1.1", "a".repeat(total - 14));
    // A 64-byte line is fine, 65 is 414, complete or still arriving.
    let ok = format!("{}\r\nHost: a\r\n\r\n", line(64));
    assert!(
        matches!(at(ok.as_bytes()), Ok(Status::Complete(_))),
        "{:?}",
        at(ok.as_bytes())
    );
    let long = format!("{}\r\nHost: a\r\n\r\n", line(65));
    assert_eq!(at(long.as_bytes()), Err(RequestLineTooLong));
    assert_eq!(at(&long.as_bytes()[..66]), Err(RequestLineTooLong));
    assert_eq!(
        at(format!("GET /{}", "a".repeat(100)).as_bytes()),
        Err(RequestLineTooLong)
    );
    assert_eq!(RequestLineTooLong.status(), 414);
    // Head over 256 bytes: 431, also while partial.
    let big = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
        "b".repeat(250)
    );
    assert_eq!(at(big.as_bytes()), Err(HeadTooLarge));
    assert_eq!(at(&big.as_bytes()[..256]), Err(HeadTooLarge));
    assert_eq!(at(&big.as_bytes()[..255]), Ok(Status::Partial));
    assert_eq!(HeadTooLarge.status(), 431);
    // Four headers fine, five is 431.
    let four = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert!(matches!(at(four.as_bytes()), Ok(Status::Complete(_))));
    let five = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
    assert_eq!(at(five.as_bytes()), Err(TooManyHeaders));
    assert_eq!(TooManyHeaders.status(), 431);
    // Default limits: 100 headers fine, 101 not.
    let many = |n: usize| {
        let mut s = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        for i in 1..n {
            s.push_str(&format!("X-{i}: v\r\n"));
        }
        s + "\r\n"
    };
    assert!(matches!(req(many(100).as_bytes()), Ok(Status::Complete(_))));
    assert_eq!(req(many(101).as_bytes()), Err(TooManyHeaders));
    // Every case at every split: a limit is judged the same however the head arrives.
    for wire in [&ok, &long, &big, four, five] {
        assert_prefixes(wire.as_bytes(), at);
    }
    for wire in [many(100), many(101)] {
        assert_prefixes(wire.as_bytes(), req);
    }
    // Caller storage smaller than max_headers bounds the count too.
    let mut small = [httparse::EMPTY_HEADER; 2];
    let r = parse_request(four.as_bytes(), &mut small, &Limits::default());
    assert!(matches!(r, Err(TooManyHeaders)));
}

#[test]
fn preface_prefixes_are_partial() {
    let p = crate::http::head::HTTP2_PREFACE;
    for n in 0..14 {
        assert_eq!(req(&p[..n]), Ok(Status::Partial), "{n}");
    }
    for n in 14..=p.len() {
        assert_eq!(req(&p[..n]), Err(Http2Preface), "{n}");
    }
}

#[test]
fn request_method_for_response_framing() {
    let mut storage = [httparse::EMPTY_HEADER; 8];
    let wire = b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n";
    let Ok(Status::Complete(h)) = parse_request(wire, &mut storage, &Limits::default()) else {
        panic!()
    };
    assert_eq!(h.request_method(), RequestMethod::Head);
    assert_eq!(
        RequestMethod::from_method("CONNECT"),
        RequestMethod::Connect
    );
    assert_eq!(RequestMethod::from_method("head"), RequestMethod::Other);
}

/// Head and body of one request, the whole message split at every point: the head parses the
/// same, and the body decodes to the same bytes with the same leftover.
#[test]
fn whole_messages_at_every_split() {
    let messages: &[&[u8]] = &[
        b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET",
        b"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;x=\"y\"\r\nhi\r\n0\r\nT: v\r\n\r\nGET",
    ];
    let limits = Limits::default();
    for wire in messages {
        let Ok(Status::Complete(h)) = req(wire) else {
            panic!()
        };
        let body = wire[h.head_len..].to_vec();
        let run = assert_body_splits(h.body, &limits, &body);
        assert_eq!(run.rest, b"GET");
        assert_eq!(run.result, Ok(true));
        for n in 0..=wire.len() {
            let (a, b) = wire.split_at(n);
            // A first read that stops inside the head is Partial; the head parses once the
            // second read completes it (the buffer is then the whole wire).
            if n < h.head_len {
                assert_eq!(req(a), Ok(Status::Partial), "split at {n}");
            } else {
                assert_eq!(req(a), Ok(Status::Complete(h.clone())), "split at {n}");
            }
            if n > h.head_len {
                let got = decode_pieces(h.body, &limits, &[&a[h.head_len..], b]);
                assert_eq!(got, run, "split at {n}");
            }
        }
    }
}

#[test]
fn a_head_is_known_from_its_method_token_alone() {
    use crate::http::head::starts_head_request;
    let cases: &[(&[u8], bool)] = &[
        (b"HEAD / HTTP/1.1\r\n", true),
        (b"\r\n\r\nHEAD /a%00 HTTP/1.1\r\n", true),
        (b"HEAD ", true),
        (b"HEAD", false),
        (b"head / HTTP/1.1\r\n", false),
        (b"HEADER / HTTP/1.1\r\n", false),
        (b"GET / HTTP/1.1\r\n", false),
        (b" HEAD / HTTP/1.1\r\n", false),
        (b"", false),
    ];
    for (wire, want) in cases {
        assert_eq!(starts_head_request(wire), *want, "{wire:?}");
    }
}
