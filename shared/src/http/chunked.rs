//! Chunked transfer coding (RFC 9112 section 7.1). The chunk-size line parser is ours:
//! httparse's `parse_chunk_size` lets any byte, bare LF included, through a chunk extension.

/// State of a chunked body decoder.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    // codec helper: named states, e.g. `state: ChunkedState, remaining: u64, line_len: usize`
}
