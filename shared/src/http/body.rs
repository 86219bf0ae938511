//! Incremental body decoding across arbitrary read boundaries.

use super::{chunked, BodyKind, CodecError, Limits};

/// What one `decode` call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Input bytes consumed (framing included); the caller drops these from its buffer.
    pub consumed: usize,
    /// Payload bytes found in the consumed input (a sub-slice of it; empty if none).
    pub data: &'a [u8],
    /// The body ended with this call; bytes after `consumed` belong to the next message.
    pub done: bool,
}

/// Decodes one message body. Feed it bytes with `decode` until `done`; at end of stream call
/// `finish`, which accepts a close-delimited body and rejects a truncated one.
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    state: State,
}

#[derive(Debug, Clone)]
enum State {
    Length { remaining: u64 },
    Chunked(chunked::ChunkedDecoder),
    CloseDelimited,
    Done,
}

impl BodyDecoder {
    pub fn new(kind: BodyKind, limits: &Limits) -> Self {
        let _ = (kind, limits, State::Done, State::CloseDelimited);
        todo!("codec helper")
    }

    /// Decode from `input`. Returns at most one contiguous run of payload per call; call
    /// again with the rest of the input while `consumed < input.len()` and not `done`.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, CodecError> {
        let _ = input;
        todo!("codec helper")
    }

    /// The peer closed the stream: `Ok` if the body is complete (or close-delimited).
    pub fn finish(&mut self) -> Result<(), CodecError> {
        todo!("codec helper")
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }
}
