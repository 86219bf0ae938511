//! Codec tests: tables of raw wire bytes and exact outcomes, each valid case replayed split
//! at every byte boundary ("shotgun"), and a seeded property test.

mod body;
mod encode;
mod prop;
mod reader;
mod request;
mod response;

use super::{
    parse_request, parse_response, BodyDecoder, BodyKind, CodecError, Limits, RequestMethod,
    Status, Version,
};

/// An owned copy of a parsed request head, comparable across parses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Req {
    pub method: String,
    pub target: String,
    pub version: Version,
    pub headers: Vec<(String, Vec<u8>)>,
    pub head_len: usize,
    pub authority: Option<Vec<u8>>,
    pub body: BodyKind,
    pub keep_alive: bool,
    pub expect_continue: bool,
    pub upgrade: Option<Vec<u8>>,
}

/// An owned copy of a parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Res {
    pub version: Version,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub head_len: usize,
    pub body: BodyKind,
    pub keep_alive: bool,
}

pub type Parsed<T> = Result<Status<T>, CodecError>;

fn own_headers(h: &[httparse::Header<'_>]) -> Vec<(String, Vec<u8>)> {
    h.iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect()
}

pub fn req_with(buf: &[u8], limits: &Limits) -> Parsed<Req> {
    let mut storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS_CAP];
    Ok(match parse_request(buf, &mut storage, limits)? {
        Status::Partial => Status::Partial,
        Status::Complete(h) => Status::Complete(Req {
            method: h.method.to_string(),
            target: h.target.to_string(),
            version: h.version,
            headers: own_headers(h.headers),
            head_len: h.head_len,
            authority: h.authority.map(<[u8]>::to_vec),
            body: h.body,
            keep_alive: h.keep_alive,
            expect_continue: h.expect_continue,
            upgrade: h.upgrade.map(<[u8]>::to_vec),
        }),
    })
}

pub fn req(buf: &[u8]) -> Parsed<Req> {
    req_with(buf, &Limits::default())
}

pub fn res_with(buf: &[u8], method: RequestMethod, limits: &Limits) -> Parsed<Res> {
    let mut storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS_CAP];
    Ok(match parse_response(buf, &mut storage, method, limits)? {
        Status::Partial => Status::Partial,
        Status::Complete(h) => Status::Complete(Res {
            version: h.version,
            status: h.status,
            reason: h.reason.to_string(),
            headers: own_headers(h.headers),
            head_len: h.head_len,
            body: h.body,
            keep_alive: h.keep_alive,
        }),
    })
}

pub fn res(buf: &[u8], method: RequestMethod) -> Parsed<Res> {
    res_with(buf, method, &Limits::default())
}

/// Differential check: a head this codec accepts must read the same to plain httparse
/// (method, target, version, every header name and value, head length). Our layer only
/// ever rejects more; it must never see a different message in the same bytes.
pub fn assert_request_agrees_with_httparse(wire: &[u8], ours: &Req) {
    let as_11 = written_as_http11(wire);
    let show = String::from_utf8_lossy(wire);
    let wire = as_11.as_deref().unwrap_or(wire);
    let mut storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS_CAP];
    let mut plain = httparse::Request::new(&mut storage);
    assert_eq!(
        plain.parse(wire),
        Ok(httparse::Status::Complete(ours.head_len)),
        "{show:?}"
    );
    assert_eq!(plain.method, Some(ours.method.as_str()), "{show:?}");
    assert_eq!(plain.path, Some(ours.target.as_str()), "{show:?}");
    let minor = match ours.version {
        Version::Http10 => 0,
        Version::Http11 => 1,
    };
    assert_eq!(plain.version, Some(minor), "{show:?}");
    assert_eq!(own_headers(plain.headers), ours.headers, "{show:?}");
}

/// httparse reads only HTTP/1.0 and 1.1: a request line in `HTTP/1.2` to `HTTP/1.9`, which
/// the codec reads as 1.1 (RFC 9112 2.3), is compared as the same head written `HTTP/1.1`.
fn written_as_http11(wire: &[u8]) -> Option<Vec<u8>> {
    let lead = wire
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let lf = lead + wire[lead..].iter().position(|&b| b == b'\n')?;
    let end = if wire[lf - 1] == b'\r' { lf - 1 } else { lf };
    let minor = end.checked_sub(1)?;
    match wire.get(end.checked_sub(8)?..end)? {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'2'..=b'9'] => {
            let mut copy = wire.to_vec();
            copy[minor] = b'1';
            Some(copy)
        }
        _ => None,
    }
}

/// A status line in `HTTP/1.2` to `HTTP/1.9` (read as 1.1), as the same head written
/// `HTTP/1.1`.
fn response_as_http11(wire: &[u8]) -> Option<Vec<u8>> {
    let lead = wire
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    match wire.get(lead..lead + 9)? {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'2'..=b'9', b' '] => {
            let mut copy = wire.to_vec();
            copy[lead + 7] = b'1';
            Some(copy)
        }
        _ => None,
    }
}

/// The same for response heads (version, status, reason, headers, head length).
pub fn assert_response_agrees_with_httparse(wire: &[u8], ours: &Res) {
    let as_11 = response_as_http11(wire);
    let show = String::from_utf8_lossy(wire);
    let wire = as_11.as_deref().unwrap_or(wire);
    let mut storage = [httparse::EMPTY_HEADER; crate::http::limits::MAX_HEADERS_CAP];
    let mut plain = httparse::Response::new(&mut storage);
    assert_eq!(
        plain.parse(wire),
        Ok(httparse::Status::Complete(ours.head_len)),
        "{show:?}"
    );
    assert_eq!(plain.code, Some(ours.status), "{show:?}");
    assert_eq!(plain.reason, Some(ours.reason.as_str()), "{show:?}");
    let minor = match ours.version {
        Version::Http10 => 0,
        Version::Http11 => 1,
    };
    assert_eq!(plain.version, Some(minor), "{show:?}");
    assert_eq!(own_headers(plain.headers), ours.headers, "{show:?}");
}

/// The head length of a complete parse, if any.
pub trait HeadLen {
    fn head_len(&self) -> usize;
}
impl HeadLen for Req {
    fn head_len(&self) -> usize {
        self.head_len
    }
}
impl HeadLen for Res {
    fn head_len(&self) -> usize {
        self.head_len
    }
}

/// Feeds `parse` every prefix of `wire`: before the head is complete the answer must be
/// `Partial` (or, for a bad head, the very error of the one-shot parse); from the head's end
/// on it must equal the one-shot parse.
pub fn assert_prefixes<T: HeadLen + PartialEq + std::fmt::Debug>(
    wire: &[u8],
    parse: impl Fn(&[u8]) -> Parsed<T>,
) {
    let full = parse(wire);
    for n in 0..wire.len() {
        let p = parse(&wire[..n]);
        match (&full, &p) {
            (Ok(Status::Complete(f)), _) if n >= f.head_len() => {
                assert_eq!(
                    p,
                    full,
                    "prefix of {n} bytes of {:?}",
                    String::from_utf8_lossy(wire)
                )
            }
            (_, Ok(Status::Partial)) => {}
            _ => assert_eq!(
                p,
                full,
                "prefix of {n} bytes of {:?}",
                String::from_utf8_lossy(wire)
            ),
        }
    }
}

/// Everything a body decode produced: payload, outcome, and bytes left for the next message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyRun {
    pub data: Vec<u8>,
    /// `Ok(true)`: ended by framing; `Ok(false)`: ended by `finish` at EOF.
    pub result: Result<bool, CodecError>,
    pub rest: Vec<u8>,
}

/// Decodes a body arriving in `pieces`, as a connection would: unconsumed bytes stay in the
/// buffer and the next read is appended; at the end of input the peer closes (`finish`).
pub fn decode_pieces(kind: BodyKind, limits: &Limits, pieces: &[&[u8]]) -> BodyRun {
    let mut d = BodyDecoder::new(kind, limits);
    let mut buf: Vec<u8> = Vec::new();
    let mut data = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        buf.extend_from_slice(piece);
        loop {
            if d.is_done() {
                break;
            }
            match d.decode(&buf) {
                // Left over after an error: what the decoder had not consumed, and every byte
                // not yet read. Split-dependent (a size line may be consumed digit by digit).
                Err(e) => {
                    pieces[i + 1..]
                        .iter()
                        .for_each(|p| buf.extend_from_slice(p));
                    return BodyRun {
                        data,
                        result: Err(e),
                        rest: buf,
                    };
                }
                Ok(out) => {
                    assert!(out.consumed <= buf.len());
                    // `data` lies inside the consumed input, even when empty: the proxy's
                    // relay turns it into offsets into its buffer.
                    let at = (out.data.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
                    assert!(at <= out.consumed && out.consumed - at >= out.data.len());
                    data.extend_from_slice(out.data);
                    let (consumed, done) = (out.consumed, out.done);
                    buf.drain(..consumed);
                    if done {
                        assert!(d.is_done());
                        break;
                    }
                    if consumed == 0 {
                        break; // needs more input
                    }
                }
            }
        }
    }
    if d.is_done() {
        return BodyRun {
            data,
            result: Ok(true),
            rest: buf,
        };
    }
    let result = d.finish().map(|()| false);
    BodyRun {
        data,
        result,
        rest: buf,
    }
}

/// One-shot, every 2-piece split and byte-by-byte decodes all agree; returns the one-shot run.
pub fn assert_body_splits(kind: BodyKind, limits: &Limits, wire: &[u8]) -> BodyRun {
    let whole = decode_pieces(kind, limits, &[wire]);
    let show = String::from_utf8_lossy(wire);
    for n in 0..=wire.len() {
        let split = decode_pieces(kind, limits, &[&wire[..n], &wire[n..]]);
        assert_same_run(&split, &whole, wire, &format!("split at {n} of {show:?}"));
    }
    let bytes: Vec<&[u8]> = wire.chunks(1).collect();
    let by_byte = decode_pieces(kind, limits, &bytes);
    assert_same_run(&by_byte, &whole, wire, &format!("byte by byte {show:?}"));
    whole
}

/// A split decode agrees with the one-shot one: same payload and outcome, and the same
/// leftover when the body ended. After an error the leftover is still the tail of the wire
/// (nothing invented, nothing reordered), but how much of a size line was consumed before it
/// depends on where the reads fell.
pub fn assert_same_run(split: &BodyRun, whole: &BodyRun, wire: &[u8], what: &str) {
    assert_eq!(
        (&split.data, split.result),
        (&whole.data, whole.result),
        "{what}"
    );
    match whole.result {
        Ok(_) => assert_eq!(split.rest, whole.rest, "{what}"),
        Err(_) => assert!(wire.ends_with(&split.rest), "{what}: {split:?}"),
    }
}
