//! Body decoding: every case decoded one-shot, in every 2-piece split and byte by byte.

use super::*;
use BodyKind::*;
use CodecError::*;

/// (kind, wire, payload, outcome, bytes left: for the next message when the body ended, or
/// not consumed when the error was reported, one-shot)
type Case = (
    BodyKind,
    &'static [u8],
    &'static [u8],
    Result<bool, CodecError>,
    &'static [u8],
);

fn table() -> Vec<Case> {
    vec![
        (Length(5), b"hello", b"hello", Ok(true), b""),
        (
            Length(5),
            b"helloGET / HTTP/1.1\r\n",
            b"hello",
            Ok(true),
            b"GET / HTTP/1.1\r\n",
        ),
        (Length(5), b"hel", b"hel", Err(UnexpectedEof), b""),
        (Length(0), b"next", b"", Ok(true), b"next"),
        (Empty, b"next", b"", Ok(true), b"next"),
        (Tunnel, b"\x16\x03\x01", b"", Ok(true), b"\x16\x03\x01"),
        (
            CloseDelimited,
            b"all of it\r\n0\r\n\r\n",
            b"all of it\r\n0\r\n\r\n",
            Ok(false),
            b"",
        ),
        (CloseDelimited, b"", b"", Ok(false), b""),
        // Chunked: sizes, extensions, trailers.
        (Chunked, b"5\r\nhello\r\n0\r\n\r\n", b"hello", Ok(true), b""),
        (
            Chunked,
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT",
            b"hello world",
            Ok(true),
            b"NEXT",
        ),
        (
            Chunked,
            b"A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n",
            b"0123456789abcdefghij",
            Ok(true),
            b"",
        ),
        (
            Chunked,
            b"005\r\nhello\r\n000\r\n\r\n",
            b"hello",
            Ok(true),
            b"",
        ),
        (
            Chunked,
            b"5;name=value;flag;q=\"a b;c\"\r\nhello\r\n0;last\r\n\r\n",
            b"hello",
            Ok(true),
            b"",
        ),
        (
            Chunked,
            b"5 ;ext\r\nhello\r\n0\t;\tx\t=\t\"\\\"q\\\\\"\r\n\r\n",
            b"hello",
            Ok(true),
            b"",
        ),
        (
            Chunked,
            b"5;a=b;c=\"\";d=\"\x80\\\x80\"\r\nhello\r\n0\r\n\r\n",
            b"hello",
            Ok(true),
            b"",
        ),
        (
            Chunked,
            b"5\r\nhello\r\n0\r\nX-Sum: abc\r\nY:\r\n\r\nNEXT",
            b"hello",
            Ok(true),
            b"NEXT",
        ),
        (Chunked, b"0\r\n\r\n", b"", Ok(true), b""),
        // Chunked errors.
        (Chunked, b"x\r\n", b"", Err(InvalidChunkSize), b"x\r\n"),
        (Chunked, b"\r\n", b"", Err(InvalidChunkSize), b"\r\n"),
        (Chunked, b"-5\r\n", b"", Err(InvalidChunkSize), b"-5\r\n"),
        (Chunked, b"0x5\r\n", b"", Err(InvalidChunkSize), b"0x5\r\n"),
        (Chunked, b"5\rx", b"", Err(InvalidChunkSize), b"5\rx"),
        (
            Chunked,
            b"5\nhello\r\n0\r\n\r\n",
            b"",
            Err(BareLf),
            b"5\nhello\r\n0\r\n\r\n",
        ),
        (Chunked, b"5;a\nb\r\n", b"", Err(BareLf), b"5;a\nb\r\n"),
        // chunk-ext (RFC 9112 7.1.1): BWS only before `;` and around `=`, names and unquoted
        // values are tokens, quoted strings end before CRLF. Anything else is rejected
        // rather than skipped to the next CRLF, which is where parsers disagree.
        (
            Chunked,
            b"5 \r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkSize),
            b"5 \r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5\t\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkSize),
            b"5\t\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a \r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a \r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=b \r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=b \r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;;a\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;;a\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a b\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a b\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=b=c\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=b=c\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;\xe9\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;\xe9\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=\"x\r\ny\"\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=\"x\r\ny\"\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=\"x\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=\"x\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=\"x\"y\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=\"x\"y\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=\"\\\r\"\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=\"\\\r\"\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=\"\x00\"\r\nhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=\"\x00\"\r\nhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a=\"x\rhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkExtension),
            b"5;a=\"x\rhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5;a\rhello\r\n0\r\n\r\n",
            b"",
            Err(InvalidChunkSize),
            b"5;a\rhello\r\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"000000000000000000005\r\nhello\r\n0\r\n\r\n",
            b"hello",
            Ok(true),
            b"",
        ),
        (
            Chunked,
            b"5\r\nhello\r\r\n0\r\n\r\n",
            b"hello",
            Err(InvalidChunkTerminator),
            b"\r\r\n0\r\n\r\n",
        ),
        // Forbidden trailer fields (RFC 9110 6.5.1) are dropped with the rest of the trailers.
        (
            Chunked,
            b"5\r\nhello\r\n0\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\nX",
            b"hello",
            Ok(true),
            b"X",
        ),
        (
            Chunked,
            b"5;a\x00\r\nhello",
            b"",
            Err(InvalidChunkExtension),
            b"5;a\x00\r\nhello",
        ),
        (
            Chunked,
            b"5;a\x7f\r\nhello",
            b"",
            Err(InvalidChunkExtension),
            b"5;a\x7f\r\nhello",
        ),
        (
            Chunked,
            b"10000000000000000\r\n",
            b"",
            Err(ChunkSizeOverflow),
            b"10000000000000000\r\n",
        ),
        // Chunk sizes are bounded to 2^63-1 like lengths (issue 22, item 19).
        (
            Chunked,
            b"7fffffffffffffff\r\nab",
            b"ab",
            Err(UnexpectedEof),
            b"",
        ),
        (
            Chunked,
            b"8000000000000000\r\n",
            b"",
            Err(ChunkSizeOverflow),
            b"8000000000000000\r\n",
        ),
        (
            Chunked,
            b"000ffffffffffffffff\r\nab",
            b"",
            Err(ChunkSizeOverflow),
            b"000ffffffffffffffff\r\nab",
        ),
        (
            Chunked,
            b"5\r\nhelloX\r\n",
            b"hello",
            Err(InvalidChunkTerminator),
            b"X\r\n",
        ),
        (
            Chunked,
            b"5\r\nhello\n0\r\n\r\n",
            b"hello",
            Err(InvalidChunkTerminator),
            b"\n0\r\n\r\n",
        ),
        (
            Chunked,
            b"5\r\nhello\r\n0\r\nX : y\r\n\r\n",
            b"hello",
            Err(InvalidTrailer),
            b"\r\n0\r\nX : y\r\n\r\n",
        ),
        (
            Chunked,
            b"0\r\n y\r\n\r\n",
            b"",
            Err(InvalidTrailer),
            b"0\r\n y\r\n\r\n",
        ),
        (
            Chunked,
            b"0\r\nX: a\0\r\n\r\n",
            b"",
            Err(InvalidTrailer),
            b"0\r\nX: a\0\r\n\r\n",
        ),
        (
            Chunked,
            b"0\r\nX: y\n\r\n",
            b"",
            Err(BareLf),
            b"0\r\nX: y\n\r\n",
        ),
        (Chunked, b"0\r\n\n", b"", Err(BareLf), b"0\r\n\n"),
        (Chunked, b"0\r\n\rx", b"", Err(InvalidTrailer), b"0\r\n\rx"),
        (Chunked, b"5\r\nhel", b"hel", Err(UnexpectedEof), b""),
        (
            Chunked,
            b"5\r\nhello\r\n0\r\n",
            b"hello",
            Err(UnexpectedEof),
            b"",
        ),
        (Chunked, b"", b"", Err(UnexpectedEof), b""),
    ]
}

#[test]
fn body_table() {
    let limits = Limits::default();
    for (kind, wire, data, result, rest) in table() {
        let run = assert_body_splits(kind, &limits, wire);
        let show = String::from_utf8_lossy(wire);
        assert_eq!(run.result, result, "{kind:?} {show:?}");
        assert_eq!(run.data, data, "{kind:?} {show:?}");
        // After an error too: the bytes from the offset the error was reported at.
        assert_eq!(run.rest, rest, "{kind:?} {show:?}");
    }
}

#[test]
fn chunk_line_and_trailer_limits() {
    let limits = Limits {
        max_chunk_line: 16,
        max_trailers: 32,
        ..Limits::default()
    };
    // The 16-byte line is fine (CRLF included), 17 is too long.
    let ok = b"5;aaaaaaaaaaaa\r\nhello\r\n0\r\n\r\n";
    assert_eq!(ok.iter().position(|&b| b == b'\n'), Some(15));
    assert_eq!(assert_body_splits(Chunked, &limits, ok).result, Ok(true));
    let long = b"5;aaaaaaaaaaaaa\r\nhello\r\n0\r\n\r\n";
    assert_eq!(
        assert_body_splits(Chunked, &limits, long).result,
        Err(ChunkLineTooLong)
    );
    // Endless extension or zero padding is cut off at the limit, not buffered.
    let endless = [b"0".repeat(100).as_slice(), b"1\r\nx\r\n0\r\n\r\n"].concat();
    assert_eq!(
        assert_body_splits(Chunked, &limits, &endless).result,
        Err(ChunkLineTooLong)
    );
    // Trailers: 32 bytes in all (final CRLF included) are fine, 33 not.
    let t_ok = b"0\r\nX-A: 01234567890123456789012\r\n\r\n";
    assert_eq!(assert_body_splits(Chunked, &limits, t_ok).result, Ok(true));
    let t_big = b"0\r\nX-A: 012345678901234567890123\r\n\r\n";
    assert_eq!(
        assert_body_splits(Chunked, &limits, t_big).result,
        Err(TrailersTooLarge)
    );
    assert_eq!(TrailersTooLarge.status(), 431);
    assert_eq!(ChunkLineTooLong.status(), 400);
}

#[test]
fn chunk_line_parser() {
    use crate::http::chunked::parse_chunk_line;
    let l = Limits::default();
    assert_eq!(
        parse_chunk_line(b"1a;x=y\r\nrest", &l),
        Ok(Status::Complete((8, 26)))
    );
    assert_eq!(parse_chunk_line(b"0\r\n", &l), Ok(Status::Complete((3, 0))));
    assert_eq!(parse_chunk_line(b"1a;x=y\r", &l), Ok(Status::Partial));
    assert_eq!(parse_chunk_line(b"", &l), Ok(Status::Partial));
    assert_eq!(parse_chunk_line(b"1a;x\ny\r\n", &l), Err(BareLf));
    assert_eq!(parse_chunk_line(b"g\r\n", &l), Err(InvalidChunkSize));
    assert_eq!(
        parse_chunk_line(b"7fffffffffffffff\r\n", &l),
        Ok(Status::Complete((18, i64::MAX as u64)))
    );
    assert_eq!(
        parse_chunk_line(b"ffffffffffffffff\r\n", &l),
        Err(ChunkSizeOverflow)
    );
    assert_eq!(
        parse_chunk_line(b"fffffffffffffffff", &l),
        Err(ChunkSizeOverflow)
    );
}

#[test]
fn decode_returns_one_run_per_call() {
    let l = Limits::default();
    let mut d = BodyDecoder::new(Chunked, &l);
    let wire = b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nX";
    let a = d.decode(wire).unwrap();
    assert_eq!((a.consumed, a.data, a.done), (6, &b"abc"[..], false));
    let b = d.decode(&wire[6..]).unwrap();
    assert_eq!((b.consumed, b.data, b.done), (7, &b"de"[..], false));
    let c = d.decode(&wire[13..]).unwrap();
    assert_eq!((c.consumed, c.data, c.done), (7, &b""[..], true));
    assert_eq!(&wire[20..], b"X");
    assert!(d.is_done());
    assert_eq!(d.finish(), Ok(()));
    // A done decoder consumes nothing more (and its empty `data` still points into the input).
    let more = b"more";
    let e = d.decode(more).unwrap();
    assert_eq!(e.consumed, 0);
    assert_eq!(e.data.as_ptr(), more.as_ptr());
}
