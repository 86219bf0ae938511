//! Chunked transfer coding (RFC 9112 section 7.1). The chunk-size line parser is ours:
//! httparse's `parse_chunk_size` lets any byte, bare LF included, through a chunk extension.
//!
//! ```text
//! chunked-body = *chunk last-chunk trailer-section CRLF
//! chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size   = 1*HEXDIG
//! chunk-ext    = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! chunk-ext-name = token
//! chunk-ext-val  = token / quoted-string
//! ```
//!
//! Framing bytes go through a byte-at-a-time state machine (they are a few bytes per chunk);
//! chunk data is handed out as one slice. Extensions are parsed to that grammar exactly and
//! then ignored: a parser that skips "anything up to CRLF" and one that honours quoted
//! strings disagree on where a line ends (`;a="x<CRLF>..."`), so anything off-grammar is an
//! error, whitespace not followed by `;` included (`5 <CRLF>`). Trailer fields are checked
//! like header fields and dropped, the forbidden ones (RFC 9110 6.5.1) with the rest.
//! Line and trailer sizes are bounded by [`Limits`].

use super::framing::{is_tchar, MAX_LENGTH};
use super::{body::Decoded, CodecError, Limits, Status};

/// State of a chunked body decoder.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: ChunkedState,
    /// While in a size line: the size read so far. In `Data`: payload bytes left in the chunk.
    remaining: u64,
    /// Bytes of the current chunk-size line, or of the whole trailer section.
    line_len: usize,
    max_chunk_line: usize,
    max_trailers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkedState {
    /// At the start of a chunk-size line: a hex digit is due.
    SizeStart,
    /// Inside the hex digits.
    Size,
    /// Whitespace after the size (BWS): more whitespace or `;`.
    SizeWs,
    /// After `;` (BWS): whitespace or the first byte of an extension name.
    ExtPreName,
    /// Inside an extension name: name bytes, whitespace, `=`, `;` or CR.
    ExtName,
    /// Whitespace after an extension name: `=` or `;`.
    ExtNameWs,
    /// After `=` (BWS): a token or a quoted string.
    ExtPreValue,
    /// Inside a token value: value bytes, whitespace, `;` or CR.
    ExtToken,
    /// Inside a quoted-string value.
    ExtQuoted,
    /// After a backslash in a quoted string: the escaped byte.
    ExtQuotedPair,
    /// After the closing quote: whitespace, `;` or CR.
    ExtAfterQuote,
    /// Whitespace after a value (BWS): more whitespace or `;`.
    ExtWs,
    /// CR of the size line seen: LF is due.
    SizeLf,
    /// Chunk payload; `remaining > 0`.
    Data,
    /// After the payload: CR is due.
    DataCr,
    /// After the payload's CR: LF is due.
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    TrailerName,
    TrailerValue,
    /// CR of a trailer line seen: LF is due.
    TrailerLf,
    /// CR of the final empty line seen: LF is due.
    EndLf,
    Done,
}

fn hex_value(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'f' => Some(u64::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(b - b'A' + 10)),
        _ => None,
    }
}

use super::framing::is_field_value_byte as is_value_byte;

/// `qdtext` (RFC 9110 5.6.4): HTAB, SP, VCHAR except `"` and `\`, obs-text.
fn is_qdtext(b: u8) -> bool {
    is_value_byte(b) && b != b'"' && b != b'\\'
}

impl ChunkedDecoder {
    pub fn new(limits: &Limits) -> Self {
        ChunkedDecoder {
            state: ChunkedState::SizeStart,
            remaining: 0,
            line_len: 0,
            max_chunk_line: limits.max_chunk_line,
            max_trailers: limits.max_trailers,
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == ChunkedState::Done
    }

    /// Decode from `input`: framing bytes are consumed; at most one run of payload is returned.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, CodecError> {
        let mut pos = 0;
        while pos < input.len() {
            match self.state {
                ChunkedState::Data => {
                    let avail = (input.len() - pos) as u64;
                    let n = self.remaining.min(avail) as usize;
                    self.remaining -= n as u64;
                    if self.remaining == 0 {
                        self.state = ChunkedState::DataCr;
                    }
                    return Ok(Decoded {
                        consumed: pos + n,
                        data: &input[pos..pos + n],
                        done: false,
                    });
                }
                ChunkedState::Done => break,
                _ => {
                    self.step(input[pos])?;
                    pos += 1;
                }
            }
        }
        Ok(Decoded {
            consumed: pos,
            // Empty, but still inside `input`: callers turn `data` into offsets.
            data: &input[pos..pos],
            done: self.state == ChunkedState::Done,
        })
    }

    /// One framing byte.
    fn step(&mut self, b: u8) -> Result<(), CodecError> {
        use ChunkedState::*;
        match self.state {
            SizeStart | Size | SizeWs | ExtPreName | ExtName | ExtNameWs | ExtPreValue
            | ExtToken | ExtQuoted | ExtQuotedPair | ExtAfterQuote | ExtWs | SizeLf => {
                self.line_len += 1;
                if self.line_len > self.max_chunk_line {
                    return Err(CodecError::ChunkLineTooLong);
                }
            }
            TrailerStart | TrailerName | TrailerValue | TrailerLf | EndLf => {
                self.line_len += 1;
                if self.line_len > self.max_trailers {
                    return Err(CodecError::TrailersTooLarge);
                }
            }
            _ => {}
        }
        self.state = match (self.state, b) {
            (SizeStart | Size, _) if hex_value(b).is_some() => {
                // Bounded like Content-Length (see `MAX_LENGTH`), leading zeros free.
                if self.remaining > MAX_LENGTH >> 4 {
                    return Err(CodecError::ChunkSizeOverflow);
                }
                self.remaining = (self.remaining << 4) | hex_value(b).unwrap_or(0);
                Size
            }
            (
                SizeStart | Size | SizeWs | ExtPreName | ExtName | ExtNameWs | ExtPreValue
                | ExtToken | ExtQuoted | ExtQuotedPair | ExtAfterQuote | ExtWs | TrailerStart
                | TrailerValue,
                b'\n',
            ) => return Err(CodecError::BareLf),
            (SizeStart, _) => return Err(CodecError::InvalidChunkSize),
            (Size | SizeWs, b' ' | b'\t') => SizeWs,
            (Size | SizeWs, b';') => ExtPreName,
            (Size, b'\r') => SizeLf,
            (Size | SizeWs, _) => return Err(CodecError::InvalidChunkSize),
            // chunk-ext, to the grammar in the module doc.
            (ExtPreName | ExtPreValue, b' ' | b'\t') => self.state,
            (ExtPreName | ExtName, _) if is_tchar(b) => ExtName,
            (ExtName | ExtNameWs, b' ' | b'\t') => ExtNameWs,
            (ExtName | ExtNameWs, b'=') => ExtPreValue,
            (ExtName | ExtNameWs | ExtToken | ExtAfterQuote | ExtWs, b';') => ExtPreName,
            (ExtName | ExtToken | ExtAfterQuote, b'\r') => SizeLf,
            (ExtPreValue, b'"') => ExtQuoted,
            (ExtPreValue | ExtToken, _) if is_tchar(b) => ExtToken,
            (ExtToken | ExtAfterQuote | ExtWs, b' ' | b'\t') => ExtWs,
            (ExtQuoted, b'"') => ExtAfterQuote,
            (ExtQuoted, b'\\') => ExtQuotedPair,
            (ExtQuoted, _) if is_qdtext(b) => ExtQuoted,
            // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
            (ExtQuotedPair, _) if is_value_byte(b) => ExtQuoted,
            (
                ExtPreName | ExtName | ExtNameWs | ExtPreValue | ExtToken | ExtQuoted
                | ExtQuotedPair | ExtAfterQuote | ExtWs,
                _,
            ) => return Err(CodecError::InvalidChunkExtension),
            (SizeLf, b'\n') => {
                self.line_len = 0;
                if self.remaining == 0 {
                    TrailerStart // last-chunk
                } else {
                    Data
                }
            }
            (SizeLf, _) => return Err(CodecError::InvalidChunkSize),
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => {
                self.line_len = 0;
                SizeStart
            }
            (DataCr | DataLf, _) => return Err(CodecError::InvalidChunkTerminator),
            (TrailerStart, b'\r') => EndLf,
            (TrailerStart, _) if is_tchar(b) => TrailerName,
            (TrailerStart, _) => return Err(CodecError::InvalidTrailer),
            (TrailerName, b':') => TrailerValue,
            (TrailerName, _) if is_tchar(b) => TrailerName,
            (TrailerName, _) => return Err(CodecError::InvalidTrailer),
            (TrailerValue, b'\r') => TrailerLf,
            (TrailerValue, _) if is_value_byte(b) => TrailerValue,
            (TrailerValue, _) => return Err(CodecError::InvalidTrailer),
            (TrailerLf, b'\n') => TrailerStart,
            (TrailerLf, _) => return Err(CodecError::InvalidTrailer),
            (EndLf, b'\n') => Done,
            (EndLf, _) => return Err(CodecError::InvalidTrailer),
            // `decode` hands Data bytes out in bulk and stops at Done.
            (Data | Done, _) => return Err(CodecError::InvalidChunkSize),
        };
        Ok(())
    }
}

/// Parse one chunk-size line (`1*HEXDIG [chunk-ext] CRLF`) at the start of `buf`:
/// `Complete((line_len, size))` with the CRLF included in `line_len`.
pub fn parse_chunk_line(buf: &[u8], limits: &Limits) -> Result<Status<(usize, u64)>, CodecError> {
    let mut d = ChunkedDecoder::new(limits);
    for (i, &b) in buf.iter().enumerate() {
        let size = d.remaining;
        d.step(b)?;
        if matches!(d.state, ChunkedState::Data | ChunkedState::TrailerStart) {
            return Ok(Status::Complete((i + 1, size)));
        }
    }
    Ok(Status::Partial)
}
