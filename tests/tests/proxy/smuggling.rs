//! Every rejecting row of the codec's request table that a client can send
//! (`shared/src/http/tests/request.rs`), and the TE.TE desync obfuscations of
//! `shared/tests/codec_pipeline.rs`, sent end to end through the proxy: each gets the status
//! its codec error maps to (`CodecError::status`), a well-formed generated response with
//! `Connection: close`, a closed connection, and the origin receives nothing at all.
//!
//! Excluded rows, and why:
//! - `PRI * HTTP/2.0` (the HTTP/2 preface): the proxy may answer 400 or just close; that
//!   choice is tested in `wire.rs` (`http2_preface`).
//! - The limit rows (414, 431) live in `request_limits` with tiny limits; the proxy's own
//!   limits are tested with real sizes in `wire.rs`.
//! - Accepted rows (e.g. lower-case `get`, which the codec treats as an extension method,
//!   and `Content-Length: 5, 5`) are not rejections; the odd framings that are accepted are
//!   checked for their canonical upstream form in `rejected_body.rs`.

use std::net::SocketAddr;
use tests::raw::{assert_generated, exchange, WAIT};
use tests::strict::{captured_text, capturing_origin, proxy};

const H: &str = "Host: example.com\r\n";

/// (what, wire bytes, status the proxy answers with).
type Row = (&'static str, String, u16);

/// The codec table's rejecting rows, in its order, with the status of their error.
fn codec_rows() -> Vec<Row> {
    let post = |field: &str| format!("POST / HTTP/1.1\r\n{H}{field}\r\n");
    let r = |s: &str| s.to_string();
    vec![
        // --- Content-Length (RFC 9112 6.3 step 5-6) ---
        ("CL list 5, 6", post("Content-Length: 5, 6\r\n"), 400),
        (
            "CL 5 then CL 6",
            post("Content-Length: 5\r\nContent-Length: 6\r\n"),
            400,
        ),
        ("CL +5", post("Content-Length: +5\r\n"), 400),
        ("CL -1", post("Content-Length: -1\r\n"), 400),
        ("CL 0x5", post("Content-Length: 0x5\r\n"), 400),
        ("CL `5 5`", post("Content-Length: 5 5\r\n"), 400),
        ("CL 1.0", post("Content-Length: 1.0\r\n"), 400),
        ("CL empty", post("Content-Length:\r\n"), 400),
        ("CL `5,`", post("Content-Length: 5,\r\n"), 400),
        (
            "CL 2^64",
            post("Content-Length: 18446744073709551616\r\n"),
            400,
        ),
        // --- Transfer-Encoding (RFC 9112 6.1, 6.3 steps 3-4) ---
        (
            "TE gzip, chunked",
            post("Transfer-Encoding: gzip, chunked\r\n"),
            501,
        ),
        (
            "TE gzip / TE chunked",
            post("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
            501,
        ),
        // Chunked not final: 400 (6.3 step 4's MUST), before any unknown coding's 501.
        (
            "TE chunked, identity",
            post("Transfer-Encoding: chunked, identity\r\n"),
            400,
        ),
        (
            "TE chunked;q=1",
            post("Transfer-Encoding: chunked;q=1\r\n"),
            400,
        ),
        (
            "TE `chunked ; q=1`",
            post("Transfer-Encoding: chunked ; q=1\r\n"),
            400,
        ),
        ("TE chunked;", post("Transfer-Encoding: chunked;\r\n"), 400),
        (
            "TE quoted chunked",
            post("Transfer-Encoding: \"chunked\"\r\n"),
            400,
        ),
        (
            "TE `chunked chunked`",
            post("Transfer-Encoding: chunked chunked\r\n"),
            400,
        ),
        (
            "TE chunk\\u{e9}d",
            post("Transfer-Encoding: chunk\u{e9}d\r\n"),
            400,
        ),
        (
            "Transfer_Encoding",
            post("Transfer_Encoding: chunked\r\n"),
            400,
        ),
        ("content_length", post("content_length: 5\r\n"), 400),
        (
            "CL then TE",
            post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"),
            400,
        ),
        (
            "TE then CL 0",
            post("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n"),
            400,
        ),
        (
            "TE chunked, gzip",
            post("Transfer-Encoding: chunked, gzip\r\n"),
            400,
        ),
        ("TE gzip", post("Transfer-Encoding: gzip\r\n"), 400),
        (
            "TE chunked, chunked",
            post("Transfer-Encoding: chunked, chunked\r\n"),
            400,
        ),
        ("TE empty", post("Transfer-Encoding:\r\n"), 400),
        (
            "TE foo, chunked",
            post("Transfer-Encoding: foo, chunked\r\n"),
            501,
        ),
        ("TE identity", post("Transfer-Encoding: identity\r\n"), 400),
        ("TE xchunked", post("Transfer-Encoding: xchunked\r\n"), 400),
        (
            "TE in HTTP/1.0",
            r("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400,
        ),
        // --- bare LF, obs-fold, field syntax (RFC 9112 2.2, 5.1, 5.2) ---
        (
            "bare LF after start line",
            format!("GET / HTTP/1.1\n{H}\r\n"),
            400,
        ),
        (
            "bare LF after Host",
            r("GET / HTTP/1.1\r\nHost: a\n\r\n"),
            400,
        ),
        (
            "bare LF ending the head",
            r("GET / HTTP/1.1\r\nHost: a\r\n\n"),
            400,
        ),
        ("bare LF everywhere", r("GET / HTTP/1.1\nHost: a\n\n"), 400),
        ("bare LF in HTTP/1.0", r("GET / HTTP/1.0\n\n"), 400),
        (
            "bare LF ending an HTTP/1.0 head",
            r("GET / HTTP/1.0\r\n\n"),
            400,
        ),
        (
            "bare LF between fields",
            r("GET / HTTP/1.1\r\nHost: a\r\nX: y\nZ: w\r\n\r\n"),
            400,
        ),
        (
            "leading bare LF",
            format!("\nGET / HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "obs-fold with space",
            format!("GET / HTTP/1.1\r\n{H}X: a\r\n b\r\n\r\n"),
            400,
        ),
        (
            "obs-fold with tab",
            format!("GET / HTTP/1.1\r\n{H}X: a\r\n\tb\r\n\r\n"),
            400,
        ),
        (
            "space before first field",
            r("GET / HTTP/1.1\r\n Host: a\r\n\r\n"),
            400,
        ),
        (
            "space before colon",
            r("GET / HTTP/1.1\r\nHost : a\r\n\r\n"),
            400,
        ),
        (
            "tab before colon",
            r("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"),
            400,
        ),
        (
            "TE with space before colon",
            post("Transfer-Encoding : chunked\r\n"),
            400,
        ),
        (
            "NUL in value",
            format!("GET / HTTP/1.1\r\n{H}X: a\0b\r\n\r\n"),
            400,
        ),
        (
            "CR in value",
            format!("GET / HTTP/1.1\r\n{H}X: a\rb\r\n\r\n"),
            400,
        ),
        (
            "DEL in value",
            format!("GET / HTTP/1.1\r\n{H}X: a\x7fb\r\n\r\n"),
            400,
        ),
        (
            "`(` in name",
            format!("GET / HTTP/1.1\r\n{H}X(: a\r\n\r\n"),
            400,
        ),
        (
            "empty name",
            format!("GET / HTTP/1.1\r\n{H}: a\r\n\r\n"),
            400,
        ),
        (
            "space in name",
            format!("GET / HTTP/1.1\r\n{H}X a: b\r\n\r\n"),
            400,
        ),
        (
            "CR starting a field",
            format!("GET / HTTP/1.1\r\n{H}\rX\r\n\r\n"),
            400,
        ),
        (
            "non-ASCII name",
            format!("GET / HTTP/1.1\r\n{H}X\u{80}: a\r\n\r\n"),
            400,
        ),
        (
            "VT in value",
            format!("GET / HTTP/1.1\r\n{H}X: a\x0bb\r\n\r\n"),
            400,
        ),
        // --- start line ---
        ("method G@T", format!("G@T / HTTP/1.1\r\n{H}\r\n"), 400),
        (
            "space before method",
            format!(" GET / HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "tab after method",
            format!("GET\t/ HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "DEL in target",
            format!("GET /a\x7f HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "two spaces before target",
            format!("GET  / HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "relative target",
            format!("GET foo HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        ("GET *", format!("GET * HTTP/1.1\r\n{H}\r\n"), 400),
        (
            "absolute without host",
            format!("GET http:///x HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "CONNECT origin-form",
            format!("CONNECT /x HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        // Lower-case framing methods (RFC 9110 9.1: methods are case-sensitive).
        ("method head", format!("head / HTTP/1.1\r\n{H}\r\n"), 400),
        ("method Head", format!("Head / HTTP/1.1\r\n{H}\r\n"), 400),
        (
            "method connect",
            r("connect a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n"),
            400,
        ),
        // Fragments (RFC 9112 3.2).
        ("fragment", format!("GET /a#b HTTP/1.1\r\n{H}\r\n"), 400),
        (
            "fragment after query",
            format!("GET /a?b#c HTTP/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "fragment in absolute form",
            r("GET http://a.example/#x HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        // Versions.
        (
            "space after version",
            format!("GET / HTTP/1.1 \r\n{H}\r\n"),
            400,
        ),
        (
            "version HTTP/1.1x",
            format!("GET / HTTP/1.1x\r\n{H}\r\n"),
            400,
        ),
        (
            "CR inside the start line",
            format!("GET / HTTP/1.1\rx\r\n{H}\r\n"),
            400,
        ),
        (
            "version http/1.1",
            format!("GET / http/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "version HTTX/1.1",
            format!("GET / HTTX/1.1\r\n{H}\r\n"),
            400,
        ),
        (
            "version HTTP/11.1",
            format!("GET / HTTP/11.1\r\n{H}\r\n"),
            400,
        ),
        // HTTP/1.2 to 1.9 are served as 1.1 (RFC 9112 2.3): proxy_security framing.
        (
            "version HTTP/1.2 with a space after it",
            format!("GET / HTTP/1.2 \r\n{H}\r\n"),
            400,
        ),
        (
            "version HTTP/2.0",
            format!("GET / HTTP/2.0\r\n{H}\r\n"),
            505,
        ),
        (
            "version HTTP/0.9",
            format!("GET / HTTP/0.9\r\n{H}\r\n"),
            505,
        ),
        ("version HTTP/3", format!("GET / HTTP/3\r\n{H}\r\n"), 505),
        (
            "version HTTP/1.10",
            format!("GET / HTTP/1.10\r\n{H}\r\n"),
            400,
        ),
        (
            "version HTTP/01.1",
            format!("GET / HTTP/01.1\r\n{H}\r\n"),
            400,
        ),
        (
            "tab after version",
            format!("GET / HTTP/1.1\t\r\n{H}\r\n"),
            400,
        ),
        // --- Host and target forms (RFC 9112 3.2), userinfo included ---
        ("no Host", r("GET / HTTP/1.1\r\n\r\n"), 400),
        (
            "Host twice",
            r("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "Host and host in HTTP/1.0",
            r("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"),
            400,
        ),
        (
            "absolute form, no Host",
            r("GET http://a.example/ HTTP/1.1\r\n\r\n"),
            400,
        ),
        ("Host `a b`", r("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400),
        ("Host a/b", r("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400),
        (
            "Host with userinfo",
            r("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n"),
            400,
        ),
        (
            "target with userinfo",
            r("GET http://user@a/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "CONNECT without port",
            r("CONNECT a.example HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "CONNECT with a path",
            r("CONNECT a/b:1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "authority without host",
            r("GET http://:80/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "authority port a:b",
            r("GET http://a:b/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "authority a:1:2",
            r("GET http://a:1:2/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "authority bad percent",
            r("GET http://a%zz/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "ftp scheme",
            r("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "x-y scheme",
            r("GET x-y://a/ HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "Host a:b:c",
            r("GET / HTTP/1.1\r\nHost: a:b:c\r\n\r\n"),
            400,
        ),
        ("Host a:8x", r("GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n"), 400),
        ("Host :80", r("GET / HTTP/1.1\r\nHost: :80\r\n\r\n"), 400),
        ("Host [::1", r("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"), 400),
        ("Host a]", r("GET / HTTP/1.1\r\nHost: a]\r\n\r\n"), 400),
        ("Host [a]", r("GET / HTTP/1.1\r\nHost: [a]\r\n\r\n"), 400),
        (
            "Host [::1]x",
            r("GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n"),
            400,
        ),
        ("Host a%", r("GET / HTTP/1.1\r\nHost: a%\r\n\r\n"), 400),
        (
            "CONNECT a.example:",
            r("CONNECT a.example: HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
        (
            "CONNECT :443",
            r("CONNECT :443 HTTP/1.1\r\nHost: a\r\n\r\n"),
            400,
        ),
    ]
}

/// Kettle's TE.TE obfuscations, each beside `Content-Length: 5` with a body that frames
/// differently under each header: the list of `desync_obfuscations_are_rejected`.
fn desync_rows() -> Vec<Row> {
    let cases: [(&'static str, &str, u16); 15] = [
        (
            "desync: TE xchunked",
            "Transfer-Encoding: xchunked\r\n",
            400,
        ),
        (
            "desync: TE space before colon",
            "Transfer-Encoding : chunked\r\n",
            400,
        ),
        (
            "desync: TE chunked then TE x",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n",
            400,
        ),
        (
            "desync: TE after a tab",
            "Transfer-Encoding:\tchunked\r\n",
            400,
        ),
        (
            "desync: TE folded as the next line",
            " Transfer-Encoding: chunked\r\n",
            400,
        ),
        (
            "desync: TE after a bare LF",
            "X: X\nTransfer-Encoding: chunked\r\n",
            400,
        ),
        (
            "desync: TE name then folded value",
            "Transfer-Encoding\r\n : chunked\r\n",
            400,
        ),
        (
            "desync: TE then an empty fold",
            "Transfer-Encoding: chunked\r\n \r\n",
            400,
        ),
        (
            "desync: TE quoted",
            "Transfer-Encoding: \"chunked\"\r\n",
            400,
        ),
        (
            "desync: TE chunked;x=1",
            "Transfer-Encoding: chunked;x=1\r\n",
            400,
        ),
        (
            "desync: TE with a VT",
            "Transfer-Encoding: chunk\x0bed\r\n",
            400,
        ),
        (
            "desync: Transfer_Encoding",
            "Transfer_Encoding: chunked\r\n",
            400,
        ),
        (
            "desync: TE identity, chunked",
            "Transfer-Encoding: identity, chunked\r\n",
            501,
        ),
        ("desync: CL 5 and CL 4", "Content-Length: 4\r\n", 400),
        (
            "desync: CL `4 ` and CL +4",
            "Content-Length: 4 \r\nContent-Length: +4\r\n",
            400,
        ),
    ];
    cases
        .into_iter()
        .map(|(what, field, status)| {
            let wire =
                format!("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n{field}\r\n0\r\n\r\n");
            (what, wire, status)
        })
        .collect()
}

/// Send every row on its own connection to one proxy; check each answer and that the
/// origin saw nothing after each row.
fn run(rows: Vec<Row>) {
    let origin = capturing_origin();
    let (proxy, addr): (proxy::Running, SocketAddr) = proxy(&[origin.addr()], &[]);
    for (what, wire, status) in &rows {
        let reply = exchange(addr, wire.as_bytes(), WAIT);
        let outcome = std::panic::catch_unwind(|| assert_generated(&reply, *status, true));
        assert!(outcome.is_ok(), "row {what:?} ({wire:?}): wrong answer");
        assert_eq!(
            (origin.connections(), origin.requests()),
            (0, 0),
            "row {what:?} reached the origin: {:?}",
            captured_text(&origin)
        );
    }
    proxy.shutdown().expect("clean shutdown");
    assert!(origin.captured().is_empty(), "{:?}", captured_text(&origin));
}

#[test]
fn every_rejecting_codec_row_is_refused_before_the_origin() {
    let rows = codec_rows();
    // Guard against the table shrinking unnoticed: the codec table has this many
    // rejecting rows, minus the preface.
    assert_eq!(rows.len(), 108);
    run(rows);
}

#[test]
fn desync_obfuscations_are_refused_before_the_origin() {
    run(desync_rows());
}

/// Baseline for both tables: the same proxy and origin pass a valid request, so the
/// rejections are not a proxy that refuses everything.
#[test]
fn a_valid_request_passes() {
    let origin = capturing_origin();
    let (proxy, addr) = proxy(&[origin.addr()], &[]);
    let mut c = tests::raw::Client::connect(addr);
    c.send(format!("GET /?size=5 HTTP/1.1\r\n{H}\r\n").as_bytes())
        .expect("send");
    let r = tests::strict::response(&mut c, "valid GET");
    assert_eq!((r.status, r.is_pattern(5)), (200, true), "{r:?}");
    proxy.shutdown().expect("clean shutdown");
    assert_eq!(origin.requests(), 1);
}
