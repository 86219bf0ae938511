//! Bounds enforced by the parsers. Every one is configurable; the defaults follow common
//! server practice (nginx's `large_client_header_buffers`, Apache's `LimitRequestFields`).

/// Parser limits. `Default` gives the documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line (method, target, version) before 414. Default 8 KiB.
    pub max_request_line: usize,
    /// Longest head (start line and all header lines, CRLFCRLF included) before 431. Default 64 KiB.
    pub max_head: usize,
    /// Most header fields before 431. Default 100. Must not exceed [`MAX_HEADERS_CAP`].
    pub max_headers: usize,
    /// Longest chunk-size line, extensions included. Default 4 KiB.
    pub max_chunk_line: usize,
    /// Largest trailer section. Default 16 KiB.
    pub max_trailers: usize,
}

/// Hard ceiling for `max_headers`: callers size their header storage with it.
pub const MAX_HEADERS_CAP: usize = 512;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_head: 64 * 1024,
            max_headers: 100,
            max_chunk_line: 4 * 1024,
            max_trailers: 16 * 1024,
        }
    }
}
