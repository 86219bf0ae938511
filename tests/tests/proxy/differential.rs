//! Where our proxy and nginx 1.22 differ on malformed and borderline requests
//! (`scripts/differential.sh`: 172 requests, each through both in front of one capturing
//! origin), each difference pinned here with the reading of RFC 9110/9112 that decides it:
//! the status our client gets and whether the request reached the origin. Where nginx is
//! lenient (a MAY) and we are strict, or the RFC leaves the choice open, the row says so.
//! Differences that are only nginx's configuration in the script (it sends `Host:
//! $http_host`; it drops `Upgrade` unless told) are not rows.

use std::net::SocketAddr;
use tests::raw::{show, Client, WAIT};

struct Row {
    what: &'static str,
    request: &'static [u8],
    /// Our status.
    status: u16,
    /// Whether the origin gets the request's head (a small body is read whole before the
    /// request goes upstream, so a bad chunk in it is found first; in a streamed one, over
    /// 64 KiB, it is found after the head went, and the upstream request is cut).
    forwarded: bool,
    /// nginx's answer, and why ours is right (or as right).
    why: &'static str,
}

const ROWS: &[Row] = &[
    Row {
        what: "lower-case method",
        request: b"get / HTTP/1.1\r\nHost: t\r\n\r\n",
        status: 200,
        forwarded: true,
        why: "nginx 400. RFC 9110 9.1: methods are case-sensitive tokens; `get` is a valid \
              method (not GET), and a proxy forwards methods it does not know",
    },
    Row {
        what: "TRACE",
        request: b"TRACE / HTTP/1.1\r\nHost: t\r\n\r\n",
        status: 200,
        forwarded: true,
        why: "nginx 405 (its choice). RFC 9110 9.3.8: TRACE is a method a proxy forwards",
    },
    Row {
        what: "CONNECT with an origin-form target",
        request: b"CONNECT / HTTP/1.1\r\nHost: t\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx 405. RFC 9112 3.2.3: CONNECT takes the authority-form only; `/` is an \
              invalid request-target (3: 400)",
    },
    Row {
        what: "fragment in the target",
        request: b"GET /a#frag HTTP/1.1\r\nHost: t\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 3.2.1: origin-form is absolute-path [ ? query ]: no \
              `#` (a fragment is never sent); an invalid request-line is 400",
    },
    Row {
        what: "raw non-ASCII byte in the target",
        request: b"GET /\xff HTTP/1.1\r\nHost: t\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 3.2 with RFC 3986 2: octets outside the URI's \
              characters must be percent-encoded",
    },
    Row {
        what: "HTTP/0.9 with fields",
        request: b"GET / HTTP/0.9\r\nHost: t\r\n\r\n",
        status: 505,
        forwarded: false,
        why: "nginx 400. RFC 9110 15.6.6: a well-formed version the server does not support \
              is 505",
    },
    Row {
        what: "version `HTTP/1`",
        request: b"GET / HTTP/1\r\nHost: t\r\n\r\n",
        status: 505,
        forwarded: false,
        why: "nginx 400. RFC 9112 2.3 wants DIGIT.DIGIT, and 3 says an invalid request-line \
              SHOULD be 400; the codec reads `HTTP/x` as HTTP/2 and 3 write it (a version it \
              does not support: 505). Refused and closed either way",
    },
    Row {
        what: "space after the version",
        request: b"GET / HTTP/1.1 \r\nHost: t\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 3: request-line = method SP target SP version; \
              lenient whitespace parsing is a MAY we do not take",
    },
    Row {
        what: "version 1.10",
        request: b"GET / HTTP/1.10\r\nHost: t\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 2.3: HTTP-version is one digit, a dot, one digit",
    },
    Row {
        what: "HTTP/0.9 simple request",
        request: b"GET /\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx serves it as HTTP/0.9 (no status line). RFC 9112 no longer defines 0.9; \
              a request-line without a version is invalid (3: 400)",
    },
    Row {
        what: "two spaces in the request-line",
        request: b"GET  / HTTP/1.1\r\nHost: t\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 3: single SP; lenient parsing is a MAY",
    },
    Row {
        what: "bare LF line ends",
        request: b"GET / HTTP/1.1\nHost: t\n\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 2.2: a recipient MAY take a lone LF as a line end; \
              strict CRLF leaves no two readings of one message",
    },
    Row {
        what: "empty Host",
        request: b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
        status: 200,
        forwarded: true,
        why: "nginx 400. RFC 9112 3.2: Host = uri-host [:port] and a reg-name may be \
              empty; a client MUST send it empty when the URI has no authority",
    },
    Row {
        what: "Host with a bad port",
        request: b"GET / HTTP/1.1\r\nHost: t:x\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 3.2: a Host with an invalid value MUST be 400",
    },
    Row {
        what: "Host `t..`",
        request: b"GET / HTTP/1.1\r\nHost: t..\r\n\r\n",
        status: 200,
        forwarded: true,
        why: "nginx 400. RFC 3986 3.2.2: reg-name is unreserved characters, dots included: \
              `t..` is a valid (if odd) name",
    },
    Row {
        what: "Host with `@`",
        request: b"GET / HTTP/1.1\r\nHost: t@u\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 3986 3.2.2: `@` is not in a reg-name; Host is invalid: \
              400 (RFC 9112 3.2)",
    },
    Row {
        what: "field line without a colon",
        request: b"GET / HTTP/1.1\r\nHost: t\r\nNoColon\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx drops the line. RFC 9112 5: field-line = name : value; a message with \
              an invalid line is refused, not guessed at",
    },
    Row {
        what: "DEL in a field value",
        request: b"GET / HTTP/1.1\r\nHost: t\r\nX: a\x7fb\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9110 5.5: field-vchar is VCHAR or obs-text; DEL is neither",
    },
    Row {
        what: "`(` in a field name",
        request: b"GET / HTTP/1.1\r\nHost: t\r\nX(y): a\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9110 5.1: a field name is a token; `(` is a delimiter",
    },
    Row {
        what: "one field of 70,000 bytes",
        request: b"",
        status: 431,
        forwarded: false,
        why: "nginx 400. RFC 6585 5: 431 says which limit, and the head limit is ours",
    },
    Row {
        what: "Expect: 100-continue on a request without a body",
        request: b"GET / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n\r\n",
        status: 200,
        forwarded: true,
        why: "nginx sends a 100 first. RFC 9110 10.1.1: a server MAY omit the 100 when the \
              framing says there is no content",
    },
    Row {
        what: "Content-Length twice, the same value",
        request: b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        status: 200,
        forwarded: true,
        why: "nginx 400. RFC 9110 8.6: a recipient MAY reject or MAY take identical values \
              as one; we send one Content-Length upstream",
    },
    Row {
        what: "Transfer-Encoding with a tab before chunked",
        request: b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding:\tchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        status: 200,
        forwarded: true,
        why: "nginx 501. RFC 9110 5.6.3: OWS is spaces and tabs; the value is `chunked`",
    },
    Row {
        what: "chunked, gzip",
        request: b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx 501. RFC 9112 6.3 step 4: chunked not final in a request MUST be 400",
    },
    Row {
        what: "TE chunked then TE x (two fields)",
        request: b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-encoding: x\r\n\r\n0\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx 400; ours was 501. The fields make `chunked, x`: chunked is not final, \
              RFC 9112 6.3 step 4's MUST (400) wins over 6.1's SHOULD (501)",
    },
    Row {
        what: "chunk size with a space before CRLF",
        request: b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 7.1: BWS is allowed only before `;` of an extension",
    },
    Row {
        what: "chunk lines ending in bare LF",
        request: b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n",
        status: 400,
        forwarded: false,
        why: "nginx forwards. RFC 9112 7.1: chunk lines end in CRLF; a lone LF inside a body \
              is where two parsers disagree",
    },
];

/// One request on a connection of its own: the first status the client gets (`None`: the
/// connection ended or stayed silent without one).
fn status_of(addr: SocketAddr, request: &[u8]) -> Option<u16> {
    let mut c = Client::connect(addr);
    let _ = c.send(request);
    match c.response(WAIT) {
        Ok(r) => Some(r.status),
        Err(reply) => {
            let head = reply.text();
            head.get(9..12).and_then(|s| s.parse().ok()).or_else(|| {
                assert!(head.is_empty(), "unparsed: {}", show(&reply));
                None
            })
        }
    }
}

#[test]
fn where_nginx_differs_ours_follows_the_rfc() {
    let o = tests::capturing_origin();
    let (p, addr) = tests::start_proxy(&[o.addr()], &[]);
    let long = [
        &b"GET / HTTP/1.1\r\nHost: t\r\nX: "[..],
        &vec![b'a'; 70_000],
        b"\r\n\r\n",
    ]
    .concat();
    let mut wrong = Vec::new();
    for row in ROWS {
        let request = if row.request.is_empty() {
            &long[..]
        } else {
            row.request
        };
        let before = o.requests();
        let status = status_of(addr, request);
        // The request's record (and so the origin's count) is settled when the answer went.
        let forwarded =
            tests::settled(WAIT, &(before + u64::from(row.forwarded)), || o.requests()) > before;
        if status != Some(row.status) || forwarded != row.forwarded {
            wrong.push(format!(
                "{}: got {status:?}, forwarded {forwarded}; want {} ({})",
                row.what, row.status, row.why
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    p.shutdown().expect("shutdown");
}
