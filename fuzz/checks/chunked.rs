// The chunked decoder: never panic, and a split anywhere gives the same payload and outcome
// as the one-shot decode.
//
// Shared by the libFuzzer target (`fuzz_targets/chunked.rs`) and the corpus replay in
// `cargo test` (`shared/tests/fuzz_replay.rs`), both through `include!`: plain `//`
// comments only, no inner attributes.

use shared::http::{BodyDecoder, BodyKind, CodecError, Limits};

/// Payload, outcome (`Ok(done)`) and bytes left over, feeding `pieces` like a connection.
fn run(pieces: &[&[u8]], limits: &Limits) -> (Vec<u8>, Result<bool, CodecError>) {
    let mut d = BodyDecoder::new(BodyKind::Chunked, limits);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for p in pieces {
        buf.extend_from_slice(p);
        while !d.is_done() {
            match d.decode(&buf) {
                Err(e) => return (out, Err(e)),
                Ok(x) => {
                    assert!(x.consumed <= buf.len());
                    out.extend_from_slice(x.data);
                    let consumed = x.consumed;
                    buf.drain(..consumed);
                    if consumed == 0 {
                        break;
                    }
                }
            }
        }
    }
    let done = d.is_done();
    (
        out,
        if done {
            Ok(true)
        } else {
            d.finish().map(|()| false)
        },
    )
}

/// A lenient reference decoder on httparse's `parse_chunk_size` (which lets anything through
/// an extension): `(payload, bytes consumed)` of a complete body, `None` if it fails.
/// Whatever our strict decoder accepts, this one must read the same way.
fn reference(mut input: &[u8]) -> Option<(Vec<u8>, usize)> {
    let total = input.len();
    let mut out = Vec::new();
    loop {
        // httparse caps a size at 16 digits, leading zeros included; RFC 9112 does not.
        let zeros = input.iter().take_while(|&&b| b == b'0').count();
        let pad = if input.get(zeros).is_some_and(u8::is_ascii_hexdigit) {
            zeros
        } else {
            zeros.saturating_sub(1)
        };
        input = &input[pad..];
        let (line, size) = match httparse::parse_chunk_size(input) {
            Ok(httparse::Status::Complete(x)) => x,
            _ => return None,
        };
        input = &input[line..];
        if size == 0 {
            // Trailer lines up to the empty one.
            loop {
                let end = input.windows(2).position(|w| w == b"\r\n")?;
                input = &input[end + 2..];
                if end == 0 {
                    return Some((out, total - input.len()));
                }
            }
        }
        let size = usize::try_from(size).ok()?;
        if input.len() < size + 2 || &input[size..size + 2] != b"\r\n" {
            return None;
        }
        out.extend_from_slice(&input[..size]);
        input = &input[size + 2..];
    }
}

pub fn check(data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let limits = Limits {
        max_chunk_line: 64,
        max_trailers: 256,
        ..Limits::default()
    };
    // First byte picks the split point.
    let split = data[0] as usize % data.len();
    let body = &data[1..];
    let split = split.min(body.len());
    let whole = run(&[body], &limits);
    let halves = run(&[&body[..split], &body[split..]], &limits);
    assert_eq!(whole, halves);
    // Differential: a body we accept reads the same to the lenient reference.
    if let (data, Ok(true)) = &whole {
        let (ref_data, _) = reference(body).expect("accepted by us, rejected by the reference");
        assert_eq!(&ref_data, data);
    }
}
