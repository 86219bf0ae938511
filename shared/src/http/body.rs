//! Incremental body decoding across arbitrary read boundaries.
//!
//! `Empty` and `Tunnel` bodies are done at once: for a tunnel, the bytes after the head
//! belong to the tunnel, not to a message body, and the caller relays them itself.

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
        let state = match kind {
            BodyKind::Empty | BodyKind::Tunnel | BodyKind::Length(0) => State::Done,
            BodyKind::Length(n) => State::Length { remaining: n },
            BodyKind::Chunked => State::Chunked(chunked::ChunkedDecoder::new(limits)),
            BodyKind::CloseDelimited => State::CloseDelimited,
        };
        BodyDecoder { state }
    }

    /// Decode from `input`. Returns at most one contiguous run of payload per call; call
    /// again with the rest of the input while `consumed < input.len()` and not `done`.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, CodecError> {
        match &mut self.state {
            State::Length { remaining } => {
                let n = (*remaining).min(input.len() as u64) as usize;
                *remaining -= n as u64;
                let done = *remaining == 0;
                if done {
                    self.state = State::Done;
                }
                Ok(Decoded {
                    consumed: n,
                    data: &input[..n],
                    done,
                })
            }
            State::Chunked(c) => {
                let d = c.decode(input)?;
                if d.done {
                    self.state = State::Done;
                }
                Ok(d)
            }
            State::CloseDelimited => Ok(Decoded {
                consumed: input.len(),
                data: input,
                done: false,
            }),
            State::Done => Ok(Decoded {
                consumed: 0,
                data: &input[..0],
                done: true,
            }),
        }
    }

    /// Payload bytes still to come that need no decoding (what is left of a Content-Length
    /// body): a reader may drop up to this many unread and [`BodyDecoder::skip`] them. 0 for
    /// a chunked body (its framing must be read), a close-delimited one, or a finished one.
    pub fn skippable(&self) -> u64 {
        match self.state {
            State::Length { remaining } => remaining,
            _ => 0,
        }
    }

    /// `n` payload bytes, at most [`BodyDecoder::skippable`], went by unread. Returns whether
    /// the body is complete.
    pub fn skip(&mut self, n: u64) -> bool {
        if let State::Length { remaining } = &mut self.state {
            *remaining -= n.min(*remaining);
            if *remaining == 0 {
                self.state = State::Done;
            }
        }
        matches!(self.state, State::Done)
    }

    /// The peer closed the stream: `Ok` if the body is complete (or close-delimited).
    pub fn finish(&mut self) -> Result<(), CodecError> {
        match self.state {
            State::CloseDelimited | State::Done => {
                self.state = State::Done;
                Ok(())
            }
            State::Length { .. } | State::Chunked(_) => Err(CodecError::UnexpectedEof),
        }
    }

    /// The bytes a Content-Length body still expects; `None` for any other framing.
    pub fn length_remaining(&self) -> Option<u64> {
        match self.state {
            State::Length { remaining } => Some(remaining),
            _ => None,
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }
}
