//! The chunked decoder: never panic, and a split anywhere gives the same payload and outcome
//! as the one-shot decode.
#![no_main]

use libfuzzer_sys::fuzz_target;
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

fuzz_target!(|data: &[u8]| {
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
});
