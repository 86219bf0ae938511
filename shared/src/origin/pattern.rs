//! The body bytes the origin sends: `PATTERN` repeated and truncated, so a test can check
//! any received body (or any part of it, given its offset) without keeping a copy.

use std::sync::OnceLock;

/// The repeating unit of every generated body.
pub const PATTERN: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// Longest piece [`piece`] returns.
pub const MAX_PIECE: usize = 64 * 1024;

/// The body of `len` bytes the origin sends (for tests).
pub fn expected_body(len: usize) -> Vec<u8> {
    PATTERN.iter().copied().cycle().take(len).collect()
}

/// Body bytes `offset..offset + len` (`len <= MAX_PIECE`) as a static slice: large bodies
/// are written straight from it, without a copy per response.
pub fn piece(offset: usize, len: usize) -> &'static [u8] {
    static BLOCK: OnceLock<Vec<u8>> = OnceLock::new();
    let block = BLOCK.get_or_init(|| expected_body(MAX_PIECE + PATTERN.len()));
    let start = offset % PATTERN.len();
    &block[start..start + len.min(MAX_PIECE)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_match_the_whole() {
        let whole = expected_body(200_000);
        assert_eq!(&whole[..40], b"abcdefghijklmnopqrstuvwxyz0123456789abcd");
        for (off, len) in [(0, 10), (35, 2), (36, 36), (1000, MAX_PIECE), (123_457, 5)] {
            assert_eq!(piece(off, len), &whole[off..off + len]);
        }
    }
}
