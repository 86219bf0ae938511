//! The response side as its users read it: the final head after interim ones
//! (`parse_final_response`, the proxy's head step) and whole responses one after another
//! (`ResponseReader`, the loader's), each replayed at every split of the input.

use super::*;
use crate::http::response::{
    is_interim, parse_final_response, parse_final_response_memo, HeadMemo, ReadStep, Response,
    ResponseReader,
};

#[test]
fn the_reader_takes_the_codecs_documented_number_of_fields() {
    assert_eq!(
        crate::http::response::READER_MAX_HEADERS,
        crate::http::Limits::default().max_headers
    );
}
use BodyKind::*;
use CodecError::*;
use RequestMethod::{Connect, Head, Other};

/// What the head step decided, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Final {
    status: u16,
    body: BodyKind,
    head_len: usize,
    keep_alive: bool,
    other_coding: bool,
}

impl HeadLen for Final {
    fn head_len(&self) -> usize {
        self.head_len
    }
}

fn final_with(buf: &[u8], method: RequestMethod, limits: &Limits) -> Parsed<Final> {
    let mut storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS_CAP];
    Ok(
        match parse_final_response(buf, &mut storage, method, limits)? {
            Status::Partial => Status::Partial,
            Status::Complete(h) => Status::Complete(Final {
                status: h.status,
                body: h.body,
                head_len: h.head_len,
                keep_alive: h.keep_alive,
                other_coding: h.other_coding,
            }),
        },
    )
}

fn final_head(buf: &[u8], method: RequestMethod) -> Parsed<Final> {
    final_with(buf, method, &Limits::default())
}

/// (method, wire, status, body, keep_alive, other_coding); `head_len` is the whole wire.
type HeadRow = (RequestMethod, &'static str, u16, BodyKind, bool, bool);

fn head_table() -> Vec<HeadRow> {
    vec![
        // Interim heads are skipped, and counted in head_len.
        (Other, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", 200, Length(2), true, false),
        (Other, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", 204, Empty, true, false),
        (Other, "\r\nHTTP/1.1 102 Processing\r\n\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 200, Empty, true, false),
        // 101 is final: the connection is a tunnel and never reused.
        (Other, "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", 101, Tunnel, false, false),
        (Connect, "HTTP/1.1 200 OK\r\n\r\n", 200, Tunnel, false, false),
        // Keep-alive decided once.
        (Other, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n", 200, Length(1), true, false),
        (Other, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", 200, Length(1), false, false),
        (Other, "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", 200, Length(1), false, false),
        (Other, "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", 200, Length(1), true, false),
        (Other, "HTTP/1.1 200 OK\r\n\r\n", 200, CloseDelimited, false, false),
        (Other, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 200, Chunked, false, false),
        (Other, "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", 204, Empty, false, false),
        // Codings other than chunked are reported, not re-scanned by the caller.
        (Other, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 200, Chunked, true, false),
        (Other, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 200, Chunked, true, true),
        (Other, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: Chunked\r\n\r\n", 200, Chunked, true, true),
        (Other, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 200, CloseDelimited, false, true),
        (Other, "HTTP/1.1 200 OK\r\nTransfer-Encoding: x-custom, chunked\r\n\r\n", 200, Chunked, true, true),
        // No body, so nothing is lost whatever the coding.
        (Head, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 200, Empty, true, false),
        (Other, "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip\r\n\r\n", 304, Empty, true, false),
    ]
}

#[test]
fn final_heads_at_every_prefix() {
    for (method, wire, status, body, keep_alive, other_coding) in head_table() {
        let w = wire.as_bytes();
        let want = Final {
            status,
            body,
            head_len: w.len(),
            keep_alive,
            other_coding,
        };
        assert_eq!(
            final_head(w, method),
            Ok(Status::Complete(want)),
            "{wire:?}"
        );
        assert_prefixes(w, |b| final_head(b, method));
    }
}

/// `starts_interim` is the rule the final head's parse skips interim heads by: a caller
/// that passes them on (the proxy) sees every head skipped, after empty lines too, and
/// none that is final.
#[test]
fn starts_interim_sees_every_head_the_final_parse_skips() {
    use crate::http::response::starts_interim;
    let rows: [(&str, bool); 8] = [
        ("HTTP/1.1 103 Early Hints\r\n\r\n", true),
        ("\r\nHTTP/1.1 103 Early Hints\r\n\r\n", true),
        ("\r\n\r\nHTTP/1.0 102 Processing\r\n\r\n", true),
        ("HTTP/1.1 100 Continue\r\n\r\n", true),
        ("HTTP/1.1 101 Switching Protocols\r\n\r\n", false),
        ("\r\nHTTP/1.1 200 OK\r\n\r\n", false),
        // Not yet known: the status digits have not all arrived.
        ("\r\nHTTP/1.1 10", false),
        ("", false),
    ];
    for (wire, interim) in rows {
        assert_eq!(starts_interim(wire.as_bytes()), interim, "{wire:?}");
        if !interim || !wire.ends_with("\r\n\r\n") {
            continue;
        }
        // Skipped by the final parse: the final head begins where the interim one ends.
        let whole = format!("{wire}HTTP/1.1 204 No Content\r\n\r\n");
        let got = final_head(whole.as_bytes(), Other).map(|s| match s {
            Status::Complete(f) => (f.status, f.head_len),
            Status::Partial => (0, 0),
        });
        assert_eq!(got, Ok((204, whole.len())), "{wire:?}");
    }
}

#[test]
fn interim_flood_counts_against_the_head_limit() {
    let limits = Limits {
        max_head: 256,
        ..Limits::default()
    };
    let interim = "HTTP/1.1 100 Continue\r\n\r\n"; // 25 bytes
    let ok = format!("{}HTTP/1.1 200 OK\r\n\r\n", interim.repeat(10));
    let got = final_with(ok.as_bytes(), Other, &limits);
    assert!(
        matches!(got, Ok(Status::Complete(Final { status: 200, .. }))),
        "{got:?}"
    );
    // Over max_head of interim heads is an error even before the final head shows.
    let flood = interim.repeat(11);
    assert_eq!(
        final_with(flood.as_bytes(), Other, &limits),
        Err(HeadTooLarge)
    );
    let flood = format!("{}HTTP/1.1 200 OK\r\n\r\n", interim.repeat(11));
    assert_eq!(
        final_with(flood.as_bytes(), Other, &limits),
        Err(HeadTooLarge)
    );
    // Fewer interim bytes than that are only incomplete.
    assert_eq!(
        final_with(interim.repeat(10).as_bytes(), Other, &limits),
        Ok(Status::Partial)
    );
}

#[test]
fn errors_in_interim_heads_are_errors() {
    let bare_lf = b"HTTP/1.1 100 Continue\n\nHTTP/1.1 200 OK\r\n\r\n";
    assert_eq!(final_head(bare_lf, Other), Err(BareLf));
    let bad_final = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2x0 OK\r\n\r\n";
    assert_eq!(final_head(bad_final, Other), Err(InvalidStatus));
    assert!(is_interim(100) && is_interim(199) && !is_interim(101) && !is_interim(200));
}

/// Feed `wire` to a reader in pieces of `split` bytes at most, as reads would deliver it,
/// consuming like the loader does; then EOF. Returns the responses (or the error).
fn read_all(wire: &[u8], method: RequestMethod, split: usize) -> Result<Vec<Response>, CodecError> {
    let limits = Limits::default();
    let mut r = ResponseReader::new();
    // One memo for the whole stream, as the loader keeps one: repeated heads go through it.
    let mut memo = HeadMemo::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    for piece in wire.chunks(split.max(1)) {
        buf.extend_from_slice(piece);
        let mut pos = 0;
        while pos < buf.len() {
            match r.advance(&buf[pos..], (method, &limits), &mut memo, |_| {})? {
                ReadStep::More(used) => {
                    pos += used;
                    break;
                }
                ReadStep::Done(used, resp) => {
                    pos += used;
                    out.push(resp);
                }
            }
        }
        buf.drain(..pos);
    }
    if r.started() || !buf.is_empty() {
        out.push(r.eof()?);
    }
    Ok(out)
}

fn every_split(wire: &[u8], method: RequestMethod) -> Result<Vec<Response>, CodecError> {
    let whole = read_all(wire, method, wire.len());
    for split in 1..wire.len() {
        let got = read_all(wire, method, split);
        assert_eq!(got, whole, "split at {split}");
    }
    whole
}

fn summary(r: &[Response]) -> Vec<(u16, bool, u64, u64)> {
    r.iter()
        .map(|r| (r.status, r.keep_alive, r.body_len, r.wire_len))
        .collect()
}

#[test]
fn responses_read_the_same_at_every_split() {
    let cl = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    assert_eq!(
        summary(&every_split(cl, Other).unwrap()),
        vec![(200, true, 5, 43)]
    );

    let two = [
        &cl[..],
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
    ]
    .concat();
    let got = summary(&every_split(&two, Other).unwrap());
    assert_eq!(got, vec![(200, true, 5, 43), (404, true, 0, 45)]);

    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n";
    let got = summary(&every_split(chunked, Other).unwrap());
    assert_eq!(got, vec![(200, true, 5, chunked.len() as u64)]);

    let interim =
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
    let got = summary(&every_split(interim, Other).unwrap());
    assert_eq!(got, vec![(201, true, 2, interim.len() as u64)]);

    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n";
    assert_eq!(
        summary(&every_split(head, Head).unwrap()),
        vec![(200, true, 0, 40)]
    );

    let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end";
    let got = summary(&every_split(close, Other).unwrap());
    assert_eq!(got, vec![(200, false, 13, close.len() as u64)]);

    let http10 = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(
        summary(&every_split(http10, Other).unwrap()),
        vec![(200, false, 1, 39)]
    );

    let tunnel = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
    let got = summary(&every_split(tunnel, Other).unwrap());
    assert_eq!(got, vec![(101, false, 0, tunnel.len() as u64)]);
}

#[test]
fn truncated_and_malformed_responses_are_errors() {
    let short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
    assert_eq!(every_split(short, Other).unwrap_err(), UnexpectedEof);
    let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab";
    assert_eq!(every_split(cut, Other).unwrap_err(), UnexpectedEof);
    let head_only = b"HTTP/1.1 200 OK\r\nContent-Le";
    assert_eq!(every_split(head_only, Other).unwrap_err(), UnexpectedEof);
    let interim_only = b"HTTP/1.1 100 Continue\r\n\r\n";
    assert_eq!(every_split(interim_only, Other).unwrap_err(), UnexpectedEof);
    // The kind decides the loader's count: UnexpectedEof (from `eof`) is a read failure,
    // anything the codec rejects is a parse failure.
    assert_eq!(
        every_split(b"garbage\r\n\r\n", Other).unwrap_err(),
        CodecError::InvalidVersion
    );
    let bad_chunk = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    assert_eq!(
        every_split(bad_chunk, Other).unwrap_err(),
        CodecError::InvalidChunkSize
    );
    // Framing nobody can trust is a parse failure too, not a body read until the close
    // whose chunk framing would be counted as payload.
    let twice =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
    assert_eq!(
        every_split(twice, Other).unwrap_err(),
        CodecError::ChunkedMoreThanOnce
    );
    let http10 = b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
    assert_eq!(
        every_split(http10, Other).unwrap_err(),
        CodecError::TransferEncodingHttp10
    );
}

#[test]
fn the_final_head_is_shown_once() {
    let wire = b"HTTP/1.1 100 Continue\r\nServer: early\r\n\r\nHTTP/1.1 200 OK\r\nServer: s\r\nContent-Length: 0\r\n\r\n";
    let mut seen = Vec::new();
    let step = ResponseReader::new()
        .advance(
            wire,
            (Other, &Limits::default()),
            &mut HeadMemo::default(),
            |h| {
                seen.extend(
                    h.iter()
                        .filter(|h| h.name == "Server")
                        .map(|h| h.value.to_vec()),
                )
            },
        )
        .unwrap();
    assert!(matches!(step, ReadStep::Done(n, _) if n == wire.len()));
    assert_eq!(seen, vec![b"s".to_vec()]);
}

/// Responses a connection may carry one after another (every one keeps the connection).
const PIPELINE: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
    b"HTTP/1.1 204 No Content\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nT: 1\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
];

#[test]
fn random_pipelines_read_the_same_at_every_split() {
    let mut rng = super::prop::XorShift(0x2545_F491_4F6C_DD1D);
    for _ in 0..150 {
        let mut wire = Vec::new();
        for _ in 0..1 + rng.below(4) {
            wire.extend_from_slice(PIPELINE[rng.below(PIPELINE.len())]);
        }
        // Sometimes corrupt a byte: the outcome, error included, must not depend on splits.
        if rng.below(2) == 0 {
            let i = rng.below(wire.len());
            wire[i] = match rng.below(3) {
                0 => b'\n',
                1 => rng.next() as u8,
                _ => b'1',
            };
        }
        let _ = every_split(&wire, Other);
    }
}

/// Reads one response from `wire` with `memo`: the step, and how many times the head was
/// parsed (`on_head` called).
fn read_one(
    wire: &[u8],
    method: RequestMethod,
    limits: &Limits,
    memo: &mut HeadMemo,
) -> (Result<ReadStep, CodecError>, usize) {
    let mut parsed = 0;
    let step = ResponseReader::new().advance(wire, (method, limits), memo, |_| parsed += 1);
    (step, parsed)
}

#[test]
fn a_repeated_head_is_read_from_the_memo_with_the_same_result() {
    let limits = Limits::default();
    let mut memo = HeadMemo::default();
    let wire = b"HTTP/1.1 200 OK\r\nServer: s\r\nContent-Length: 3\r\n\r\nabc";
    let done = Ok(ReadStep::Done(
        wire.len(),
        Response {
            status: 200,
            keep_alive: true,
            body_len: 3,
            wire_len: wire.len() as u64,
        },
    ));
    assert_eq!(read_one(wire, Other, &limits, &mut memo), (done, 1));
    // The same bytes again: the same response, and no parse (`on_head` is not called).
    assert_eq!(read_one(wire, Other, &limits, &mut memo), (done, 0));
    // A body that differs is still read as a body, not compared.
    let other_body = b"HTTP/1.1 200 OK\r\nServer: s\r\nContent-Length: 3\r\n\r\nxyz";
    assert_eq!(read_one(other_body, Other, &limits, &mut memo), (done, 0));
}

#[test]
fn a_head_that_differs_in_anything_the_parse_depends_on_is_parsed_again() {
    let limits = Limits::default();
    let mut memo = HeadMemo::default();
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    assert_eq!(read_one(wire, Other, &limits, &mut memo).1, 1);
    // A longer length whose first digit is the kept one: the kept bytes end with the head's
    // empty line, so this head does not start with them.
    let longer = b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\nabc";
    let (step, parsed) = read_one(longer, Other, &limits, &mut memo);
    assert_eq!((step, parsed), (Ok(ReadStep::More(longer.len())), 1));
    // The same bytes to a HEAD request: no body, whatever Content-Length says.
    let (step, parsed) = read_one(longer, Head, &limits, &mut memo);
    assert!(matches!(step, Ok(ReadStep::Done(n, r)) if n == longer.len() - 3 && r.body_len == 0));
    assert_eq!(parsed, 1);
    // The same bytes within a lower field limit: refused, not taken from the memo.
    assert_eq!(read_one(longer, Head, &limits, &mut memo).1, 0);
    let one_field = Limits {
        max_headers: 0,
        ..limits
    };
    assert_eq!(
        read_one(longer, Head, &one_field, &mut memo).0,
        Err(TooManyHeaders)
    );
}

#[test]
fn a_long_head_is_not_kept() {
    let limits = Limits::default();
    let mut memo = HeadMemo::default();
    let long = format!(
        "HTTP/1.1 204 No Content\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(2000)
    );
    assert_eq!(read_one(long.as_bytes(), Other, &limits, &mut memo).1, 1);
    assert_eq!(read_one(long.as_bytes(), Other, &limits, &mut memo).1, 1);
}

#[test]
fn a_length_body_dropped_unread_counts_as_read() {
    let limits = Limits::default();
    let mut memo = HeadMemo::default();
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123";
    let mut r = ResponseReader::new();
    assert_eq!(r.skippable(), 0, "a head to read");
    let step = r.advance(wire, (Other, &limits), &mut memo, |_| {});
    assert_eq!(step, Ok(ReadStep::More(wire.len())));
    assert_eq!(r.skippable(), 6);
    assert_eq!(r.skip(4), None);
    assert_eq!(r.skippable(), 2);
    // More than is left: only what is left counts.
    let done = r.skip(5).expect("the body ended");
    let expected = Response {
        status: 200,
        keep_alive: true,
        body_len: 10,
        wire_len: wire.len() as u64 + 6,
    };
    assert_eq!(done, expected);
    assert_eq!(r.skippable(), 0, "a head is read next");
    assert_eq!(r.skip(1), None, "nothing to skip in a head");
    // A chunked or close-delimited body's framing must be read: never skippable.
    for head in [
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
    ] {
        let mut r = ResponseReader::new();
        let step = r.advance(head, (Other, &limits), &mut memo, |_| {});
        assert_eq!(step, Ok(ReadStep::More(head.len())));
        assert_eq!(r.skippable(), 0, "{}", String::from_utf8_lossy(head));
    }
}

/// A final head as its callers see it, owned: every part of it.
#[derive(Debug, PartialEq, Eq)]
struct Whole {
    version: Version,
    status: u16,
    reason: String,
    fields: Vec<(String, Vec<u8>)>,
    head_len: usize,
    body: BodyKind,
    keep_alive: bool,
    other_coding: bool,
    content_length: Option<u64>,
    connection_names: bool,
    has_date: bool,
}

fn whole(parsed: Result<Status<crate::http::ResponseHead<'_, '_>>, CodecError>) -> Parsed<Whole> {
    Ok(match parsed? {
        Status::Partial => Status::Partial,
        Status::Complete(h) => Status::Complete(Whole {
            version: h.version,
            status: h.status,
            reason: h.reason.to_string(),
            fields: h
                .headers
                .iter()
                .map(|f| (f.name.to_string(), f.value.to_vec()))
                .collect(),
            head_len: h.head_len,
            body: h.body,
            keep_alive: h.keep_alive,
            other_coding: h.other_coding,
            content_length: h.content_length,
            connection_names: h.connection_names,
            has_date: h.has_date,
        }),
    })
}

#[test]
fn a_head_from_the_memo_is_the_parse_of_its_bytes() {
    let limits = Limits::default();
    let mut wires: Vec<(RequestMethod, Vec<u8>)> = head_table()
        .into_iter()
        .map(|(m, w, ..)| (m, w.into()))
        .collect();
    let many: String = (0..99).map(|i| format!("X-{i}: {i}\r\n")).collect();
    let text = [
        "HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\n".to_string(),
        "HTTP/1.1 404 Not \u{e9} Found\r\nContent-Length: 2\r\n\r\n".to_string(),
        "HTTP/1.1 200 OK\r\nConnection: x-a, keep-alive\r\nX-A: 1\r\nEmpty:\r\nContent-Length: 2\r\n\r\n".to_string(),
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n".to_string(),
        format!("HTTP/1.1 200 OK\r\n{many}Content-Length: 2\r\n\r\n"),
    ];
    wires.extend(text.into_iter().map(|w| (Other, w.into_bytes())));
    // Bytes that are not text (obs-text) in a value and in the reason.
    wires.push((
        Other,
        b"HTTP/1.1 200 OK\r\nX-L: caf\xe9\r\nContent-Length: 2\r\n\r\n".to_vec(),
    ));
    wires.push((
        Other,
        b"HTTP/1.1 200 O\xe9K\r\nX-L: a\r\nContent-Length: 2\r\n\r\n".to_vec(),
    ));
    for (method, wire) in &wires {
        // Body bytes behind the head are not the head's.
        let buf = [&wire[..], b"ok"].concat();
        let wire = String::from_utf8_lossy(wire);
        let mut storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS_CAP];
        let plain = whole(parse_final_response(&buf, &mut storage, *method, &limits));
        let mut memo = HeadMemo::default();
        // Heads behind interim heads are parsed each time (their slots are not counted).
        let first = wire.trim_start_matches(['\r', '\n']);
        let interim = first
            .get(9..12)
            .and_then(|d| d.parse().ok())
            .is_some_and(is_interim);
        let kept = matches!(plain, Ok(Status::Complete(_))) && !interim;
        for round in ["parsed", "from the memo"] {
            let answers = memo.answers(&buf, *method, &limits);
            assert_eq!(answers, kept && round != "parsed", "{round}: {wire:?}");
            let mut storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS_CAP];
            let got = parse_final_response_memo(&buf, &mut storage, (*method, &limits), &mut memo);
            assert_eq!(whole(got), plain, "{round}: {wire:?}");
            assert_eq!(
                memo.kept_len(),
                kept.then_some(buf.len() - 2),
                "{round}: {wire:?}"
            );
        }
        // Every number of slots up to the fields' and two more: what a parse into them says,
        // whether the memo holds the head or not (a parse with too few refuses it).
        let fields = match &plain {
            Ok(Status::Complete(w)) => w.fields.len(),
            _ => 0,
        };
        for slots in 0..fields + 3 {
            let mut few = vec![httparse::EMPTY_HEADER; slots];
            let want = whole(parse_final_response(&buf, &mut few, *method, &limits));
            let got = parse_final_response_memo(&buf, &mut few, (*method, &limits), &mut memo);
            assert_eq!(whole(got), want, "{slots} slots: {wire:?}");
        }
    }
}

fn read(wire: &[u8], method: RequestMethod, limits: &Limits, memo: &mut HeadMemo) -> Parsed<Whole> {
    let mut storage = [httparse::EMPTY_HEADER; 16];
    whole(parse_final_response_memo(
        wire,
        &mut storage,
        (method, limits),
        memo,
    ))
}

#[test]
fn the_memo_answers_only_for_the_bytes_method_and_limits_it_kept() {
    let limits = Limits::default();
    let mut memo = HeadMemo::default();
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    let got = read(wire, Other, &limits, &mut memo).unwrap();
    assert!(
        matches!(
            got,
            Status::Complete(Whole {
                body: Length(3),
                ..
            })
        ),
        "{got:?}"
    );
    // A HEAD request's answer to the same bytes has no body.
    let got = read(wire, Head, &limits, &mut memo).unwrap();
    assert!(
        matches!(got, Status::Complete(Whole { body: Empty, .. })),
        "{got:?}"
    );
    // Lower limits refuse what the memo holds.
    let tight = Limits {
        max_headers: 0,
        ..limits
    };
    assert_eq!(read(wire, Head, &tight, &mut memo), Err(TooManyHeaders));
    assert_eq!(memo.kept_len(), Some(38), "a refused head replaces nothing");
    // A head that stops short of the kept one's end is incomplete, not the kept head.
    assert_eq!(read(wire, Other, &limits, &mut memo).map(|_| ()), Ok(()));
    assert_eq!(
        read(&wire[..wire.len() - 5], Other, &limits, &mut memo),
        Ok(Status::Partial)
    );
    // One that differs after the kept bytes' first digit is parsed for what it says.
    let longer = b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\nabc";
    let got = read(longer, Other, &limits, &mut memo).unwrap();
    assert!(
        matches!(
            got,
            Status::Complete(Whole {
                body: Length(30),
                ..
            })
        ),
        "{got:?}"
    );
    // A head over 1 KiB is not kept.
    let long = format!(
        "HTTP/1.1 204 No Content\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(2000)
    );
    assert!(read(long.as_bytes(), Other, &limits, &mut memo).is_ok());
    assert_eq!(memo.kept_len(), None);
}

#[test]
fn the_kept_id_stays_while_heads_come_from_the_memo_and_changes_with_every_parse() {
    let limits = Limits::default();
    let mut memo = HeadMemo::default();
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    let other = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd";
    let long = format!(
        "HTTP/1.1 204 No Content\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(2000)
    );
    let mut ids = vec![memo.kept_id()];
    // Each of these is parsed: another head, another method, a head too long to keep, then
    // the first head again (the memo no longer holds it).
    for (bytes, method) in [
        (&wire[..], Other),
        (&other[..], Other),
        (&other[..], Head),
        (long.as_bytes(), Other),
        (&wire[..], Other),
    ] {
        read(bytes, method, &limits, &mut memo).unwrap();
        assert!(!ids.contains(&memo.kept_id()), "{ids:?}");
        ids.push(memo.kept_id());
    }
    // Taken from the memo: the id stays.
    for _ in 0..3 {
        read(wire, Other, &limits, &mut memo).unwrap();
        assert_eq!(memo.kept_id(), *ids.last().unwrap());
    }
    // A head refused by its parse replaces nothing and keeps the id.
    let tight = Limits {
        max_headers: 0,
        ..limits
    };
    assert_eq!(read(wire, Head, &tight, &mut memo), Err(TooManyHeaders));
    assert_eq!(memo.kept_id(), *ids.last().unwrap());
}

#[test]
fn a_reader_sharing_a_memo_refuses_a_head_its_own_slots_cannot_hold() {
    let limits = Limits {
        max_headers: 200,
        ..Limits::default()
    };
    let fields: String = (0..150).map(|_| "A:1\r\n").collect();
    let wire = format!("HTTP/1.1 204 No Content\r\n{fields}\r\n");
    let mut memo = HeadMemo::default();
    let mut storage = vec![httparse::EMPTY_HEADER; 200];
    let got = parse_final_response_memo(wire.as_bytes(), &mut storage, (Other, &limits), &mut memo);
    assert!(
        matches!(got, Ok(Status::Complete(_))),
        "{:?}",
        got.map(|_| ())
    );
    assert!(memo.answers(wire.as_bytes(), Other, &limits));
    // The reader parses into READER_MAX_HEADERS (100) slots: refused, as its parse refuses it.
    assert_eq!(
        read_one(wire.as_bytes(), Other, &limits, &mut memo).0,
        Err(TooManyHeaders)
    );
}
