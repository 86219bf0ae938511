//! The codec's error: small and `Copy`, so the partial-read path never allocates.
//! Each variant maps to the status a server answers with; the connection is closed after any.

/// Why a message was rejected. `status()` gives the HTTP status to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("request line too long")]
    RequestLineTooLong, // 414
    #[error("header section too large")]
    HeadTooLarge, // 431
    #[error("too many header fields")]
    TooManyHeaders, // 431
    #[error("invalid method token")]
    InvalidMethod, // 400
    #[error("invalid request target")]
    InvalidTarget, // 400
    #[error("malformed HTTP version")]
    InvalidVersion, // 400
    #[error("unsupported HTTP version")]
    UnsupportedVersion, // 505
    #[error("HTTP/2 connection preface on an HTTP/1 port")]
    Http2Preface, // 400 (and close; a server may also just close)
    #[error("bare LF used as a line ending")]
    BareLf, // 400
    #[error("obsolete line folding")]
    ObsFold, // 400
    #[error("whitespace between header name and colon")]
    WhitespaceBeforeColon, // 400
    #[error("invalid header name")]
    InvalidHeaderName, // 400
    #[error("invalid header value")]
    InvalidHeaderValue, // 400
    #[error("malformed start line")]
    InvalidStartLine, // 400
    #[error("invalid status code")]
    InvalidStatus, // 502 when a proxy reads it from an upstream
    #[error("missing Host header")]
    MissingHost, // 400
    #[error("several Host headers")]
    DuplicateHost, // 400
    #[error("Content-Length together with Transfer-Encoding")]
    ContentLengthWithTransferEncoding, // 400
    #[error("invalid Content-Length")]
    InvalidContentLength, // 400
    #[error("conflicting Content-Length values")]
    ConflictingContentLength, // 400
    #[error("Transfer-Encoding does not end in chunked")]
    TransferEncodingNotChunked, // 400
    #[error("unknown transfer coding")]
    UnknownTransferCoding, // 501
    #[error("malformed Transfer-Encoding")]
    InvalidTransferEncoding, // 400 (a coding that is not a bare token, e.g. `chunked;q=1`)
    #[error("invalid chunk size")]
    InvalidChunkSize, // 400
    #[error("chunk size overflows")]
    ChunkSizeOverflow, // 400
    #[error("chunk-size line too long")]
    ChunkLineTooLong, // 400
    #[error("invalid chunk extension")]
    InvalidChunkExtension, // 400
    #[error("missing CRLF after chunk data")]
    InvalidChunkTerminator, // 400
    #[error("trailer section too large")]
    TrailersTooLarge, // 431
    #[error("invalid trailer field")]
    InvalidTrailer, // 400
    #[error("connection closed before the message was complete")]
    UnexpectedEof, // 400 from a client; 502 from an upstream
    #[error("invalid Host header")]
    InvalidHost, // 400
    #[error("Transfer-Encoding in an HTTP/1.0 message")]
    TransferEncodingHttp10, // 400 (RFC 9112 6.1: framing is faulty); 502 from an upstream
    #[error("chunked applied more than once")]
    ChunkedMoreThanOnce, // 400 (RFC 9112 7: MUST NOT); 502 from an upstream
}

impl CodecError {
    /// The status a server answers with when a *request* fails this way.
    pub fn status(self) -> u16 {
        use CodecError::*;
        match self {
            RequestLineTooLong => 414,
            HeadTooLarge | TooManyHeaders | TrailersTooLarge => 431,
            UnsupportedVersion => 505,
            UnknownTransferCoding => 501,
            InvalidStatus => 502,
            InvalidMethod
            | InvalidTarget
            | InvalidVersion
            | Http2Preface
            | BareLf
            | ObsFold
            | WhitespaceBeforeColon
            | InvalidHeaderName
            | InvalidHeaderValue
            | InvalidStartLine
            | MissingHost
            | InvalidHost
            | DuplicateHost
            | ContentLengthWithTransferEncoding
            | InvalidContentLength
            | ConflictingContentLength
            | TransferEncodingNotChunked
            | InvalidTransferEncoding
            | TransferEncodingHttp10
            | ChunkedMoreThanOnce
            | InvalidChunkSize
            | ChunkSizeOverflow
            | ChunkLineTooLong
            | InvalidChunkExtension
            | InvalidChunkTerminator
            | InvalidTrailer
            | UnexpectedEof => 400,
        }
    }
}
