//! A fill's body as it arrives: copied into blocks that grow with it. A body that comes in
//! tiny pieces (a chunked response of one-byte chunks is a payload run per byte) costs about
//! the bytes the store counts for it; a heap block and a `Bytes` per piece cost ~64 times
//! that, beyond `max_bytes`. Readers streaming the fill get views of the bytes written so far,
//! which are never written again: new bytes go after them, into the same block or the next.

use bytes::Bytes;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// The smallest block: a small body costs no more than this while it fills.
const BLOCK_MIN: usize = 1024;
/// The largest: under glibc's threshold for an allocation with a mapping of its own (pinned
/// at 128 KiB in `main`), so blocks come from the heap, as the pieces did.
const BLOCK_MAX: usize = 64 << 10;

/// The body of a fill so far.
#[derive(Debug, Default)]
pub(super) struct Filled {
    /// The blocks filled up, each a view made once (a read of them is a slice of it).
    full: Vec<Bytes>,
    /// The block being written, and how much of it is.
    last: Option<Arc<Block>>,
    tail: usize,
    len: u64,
}

/// `cap` bytes allocated once, written front to back, each byte once.
struct Block {
    ptr: *mut u8,
    cap: usize,
}

// SAFETY: a byte is written only before any view covers it, by the store that owns the fill;
// views read only bytes written before they were made. No byte is both read and written.
unsafe impl Send for Block {}
// SAFETY: as above.
unsafe impl Sync for Block {}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block").field("cap", &self.cap).finish()
    }
}

impl Block {
    fn new(cap: usize) -> Arc<Block> {
        let buf: Box<[MaybeUninit<u8>]> = Box::new_uninit_slice(cap);
        let ptr = Box::into_raw(buf).cast::<u8>();
        Arc::new(Block { ptr, cap })
    }

    /// Its first `len` bytes.
    ///
    /// # Safety
    /// They are written, and no write to them comes while the slice lives.
    unsafe fn written(&self, len: usize) -> &[u8] {
        debug_assert!(len <= self.cap);
        // SAFETY: the caller's.
        unsafe { std::slice::from_raw_parts(self.ptr, len) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let buf = std::ptr::slice_from_raw_parts_mut(self.ptr.cast::<MaybeUninit<u8>>(), self.cap);
        // SAFETY: the box `new` made, given back once.
        drop(unsafe { Box::from_raw(buf) });
    }
}

/// The first `len` bytes of a block, all written: a reader's `Bytes`.
struct View {
    block: Arc<Block>,
    len: usize,
}

impl AsRef<[u8]> for View {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: a view covers only bytes written before it was made, never written again.
        unsafe { self.block.written(self.len) }
    }
}

impl Filled {
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Append `data`. `declared`: the body's declared length, which no block outgrows.
    pub(super) fn push(&mut self, mut data: &[u8], declared: Option<u64>) {
        while !data.is_empty() {
            let cap = self.next_cap(data.len(), declared);
            let b = self.last.get_or_insert_with(|| Block::new(cap));
            let n = (b.cap - self.tail).min(data.len());
            // SAFETY: bytes `tail..tail + n` of the block are allocated and not yet written,
            // so no view covers them.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b.ptr.add(self.tail), n) };
            self.tail += n;
            self.len += n as u64;
            data = &data[n..];
            if self.tail == b.cap {
                let len = self.tail;
                let block = self.last.take().expect("just written");
                self.full.push(Bytes::from_owner(View { block, len }));
                self.tail = 0;
            }
        }
    }

    /// The next block's size: half of what is in (so the blocks hold at most 1.5 times the
    /// bytes, and a large body takes few of them), enough for the run `want` within the bounds,
    /// and no more than the declared length still to come.
    fn next_cap(&self, want: usize, declared: Option<u64>) -> usize {
        let half = usize::try_from(self.len / 2).unwrap_or(usize::MAX);
        let cap = half.max(want).clamp(BLOCK_MIN, BLOCK_MAX);
        match declared {
            Some(d) if d > self.len => cap.min(usize::try_from(d - self.len).unwrap_or(cap)),
            _ => cap,
        }
    }

    /// Bytes from `offset` on, to the end of the block that holds it; `None`: not in yet.
    pub(super) fn read(&self, offset: u64) -> Option<Bytes> {
        let mut start = 0u64;
        for b in &self.full {
            let end = start + b.len() as u64;
            if offset < end {
                return Some(b.slice((offset - start) as usize..));
            }
            start = end;
        }
        let block = self.last.clone().filter(|_| offset < self.len)?;
        let view = Bytes::from_owner(View {
            block,
            len: self.tail,
        });
        Some(view.slice((offset - start) as usize..))
    }

    /// The body's bytes, block by block.
    pub(super) fn parts(&self) -> impl Iterator<Item = &[u8]> {
        let last = self.last.as_ref().map(|b| {
            // SAFETY: written bytes; no write comes while `self` is borrowed.
            unsafe { b.written(self.tail) }
        });
        self.full.iter().map(|b| &b[..]).chain(last)
    }

    /// The whole body in one `Bytes`: its one block when that is full (no copy), else a copy
    /// of exactly its length (no block's spare room kept with the entry).
    pub(super) fn to_bytes(&self) -> Bytes {
        match (self.full.as_slice(), &self.last) {
            ([], None) => Bytes::new(),
            ([b], None) => b.clone(),
            _ => {
                let mut v = Vec::with_capacity(self.len as usize);
                for p in self.parts() {
                    v.extend_from_slice(p);
                }
                Bytes::from(v)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Filled, BLOCK_MAX};

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn pieces_read_back_whole_and_the_blocks_stay_near_the_length() {
        let body = pattern(300_000);
        let mut f = Filled::default();
        for (i, piece) in body.chunks(7).enumerate() {
            f.push(piece, None);
            let allocated = f.full.iter().map(|b| b.len()).sum::<usize>()
                + f.last.as_ref().map_or(0, |b| b.cap);
            assert!(
                allocated as u64 <= f.len() * 3 / 2 + 1024,
                "piece {i}: {allocated}"
            );
        }
        assert!(f.full.iter().all(|b| b.len() <= BLOCK_MAX));
        assert_eq!(f.len(), body.len() as u64);
        assert_eq!(&f.to_bytes()[..], &body[..]);
        assert_eq!(f.parts().collect::<Vec<_>>().concat(), body);
        let mut at = 0;
        while let Some(b) = f.read(at as u64) {
            assert_eq!(&b[..], &body[at..at + b.len()], "at {at}");
            at += b.len();
        }
        assert_eq!(at, body.len());
    }

    #[test]
    fn a_declared_length_that_comes_in_one_run_is_one_block_shared_not_copied() {
        let body = pattern(5000);
        let mut f = Filled::default();
        f.push(&body, Some(5000));
        assert_eq!(
            (f.full.len(), f.last.is_none()),
            (1, true),
            "one full block"
        );
        let whole = f.to_bytes();
        assert_eq!(whole.as_ptr(), f.full[0].as_ptr(), "no copy");
        assert_eq!(&whole[..], &body[..]);
    }

    #[test]
    fn views_handed_out_keep_their_bytes_while_the_fill_goes_on() {
        let mut f = Filled::default();
        f.push(b"abc", None);
        let first = f.read(0).expect("in");
        f.push(&pattern(200_000), None);
        assert_eq!(&first[..], b"abc");
        assert_eq!(&f.read(1).expect("in")[..2], b"bc");
        drop(f);
        assert_eq!(&first[..], b"abc", "a reader's view outlives the fill");
    }
}
