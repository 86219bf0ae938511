//! Sans-IO HTTP/1.1 codec (RFC 9112), shared by the proxy and the loader.
//!
//! # Layout
//! - [`error`]: [`CodecError`], one small `Copy` enum; every variant maps to a status.
//! - [`limits`]: [`Limits`], the bounds every parser enforces.
//! - [`head`]: request and response heads parsed with httparse into borrowed views
//!   (`minor`: versions 1.2 to 1.9 read as 1.1).
//! - [`framing`]: [`BodyKind`], decided once per message in RFC 9112 section 6.3 order,
//!   and the keep-alive rules.
//! - [`chunked`]: our own chunk-size line and trailer parser.
//! - [`body`]: [`BodyDecoder`], incremental body decoding across arbitrary read boundaries.
//! - [`response`]: the response side decided once: the final head after interim ones
//!   ([`parse_final_response`]) and [`ResponseReader`], whole responses counted.
//! - [`target`]: request targets: absolute-form to origin-form.
//! - [`encode`]: head serializers into a reusable `BytesMut`, chunk framing, canned responses.
//!
//! Invariants: nothing here does I/O or allocates per header; incomplete input is never an
//! error (`Status::Partial`); every error closes the connection it came from.

pub mod body;
pub mod chunked;
pub mod encode;
pub mod error;
pub mod framing;
pub mod head;
pub mod limits;
mod minor;
pub mod response;
pub mod target;

pub use body::{BodyDecoder, Decoded};
pub use error::CodecError;
pub use framing::BodyKind;
pub use head::{parse_request, parse_response, RequestHead, RequestMethod, ResponseHead};
pub use limits::Limits;
pub use response::{
    parse_final_response, parse_final_response_memo, HeadMemo, ReadStep, Response, ResponseReader,
};

/// Outcome of a push parser: either a complete value or a need for more bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status<T> {
    Complete(T),
    Partial,
}

/// The HTTP versions this codec speaks. A request in `HTTP/1.2` to `HTTP/1.9` is read as
/// `Http11` (RFC 9112 2.3); other versions are `CodecError::UnsupportedVersion` (505).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

#[cfg(test)]
mod tests;
