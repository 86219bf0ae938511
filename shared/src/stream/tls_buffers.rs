//! The TLS adapter's buffers, kept per thread: a connection that parks (an HTTPS client idle
//! before or between requests) gives its ciphertext scratch and its write buffer back here,
//! and takes them again when its next record arrives, as the proxy's idle plain connections
//! give their buffer set and request frame back to the worker's pools. An idle HTTPS client
//! then holds rustls's session and nothing of the adapter's (16 KiB and more otherwise).
//!
//! Each thread is one worker (thread-per-core): no lock. Bounded: at most `KEEP` buffers of
//! each kind stay (`KEEP` x 16 KiB scratches, `KEEP` write buffers of at most
//! `WRITE_KEEP_MAX`), the rest are freed as they come back.

use std::cell::RefCell;

/// Ciphertext read per socket read: about one TLS record's worth. With the end of an earlier
/// record it may still bring more plaintext than the session takes at once: the adapter holds
/// the rest back (`TlsStream::pending`).
pub(super) const SCRATCH: usize = 16 * 1024;

/// Buffers of each kind a thread keeps for the next connections that wake.
pub const KEEP: usize = 64;

/// A write buffer grown past this (a large response's records) is freed, not kept.
const WRITE_KEEP_MAX: usize = 64 * 1024;

#[derive(Default)]
struct Pool {
    scratches: Vec<Vec<u8>>,
    writes: Vec<Vec<u8>>,
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

/// An empty ciphertext scratch of exactly `SCRATCH` bytes' capacity.
pub(super) fn take_scratch() -> Vec<u8> {
    POOL.with(|p| p.borrow_mut().scratches.pop())
        .unwrap_or_else(|| Vec::with_capacity(SCRATCH))
}

/// An empty write buffer (a kept one, or one that grows as the first records go out).
pub(super) fn take_write() -> Vec<u8> {
    POOL.with(|p| p.borrow_mut().writes.pop())
        .unwrap_or_default()
}

/// Keep `v` for the next scratch taken (unless `KEEP` are kept already).
pub(super) fn give_scratch(mut v: Vec<u8>) {
    if v.capacity() != SCRATCH {
        return;
    }
    v.clear();
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.scratches.len() < KEEP {
            p.scratches.push(v);
        }
    });
}

/// Keep `v` for the next write buffer taken (unless it grew large or `KEEP` are kept).
pub(super) fn give_write(mut v: Vec<u8>) {
    if v.capacity() == 0 || v.capacity() > WRITE_KEEP_MAX {
        return;
    }
    v.clear();
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.writes.len() < KEEP {
            p.writes.push(v);
        }
    });
}

/// How many buffers this thread keeps: (scratches, write buffers).
pub fn kept() -> (usize, usize) {
    POOL.with(|p| {
        let p = p.borrow();
        (p.scratches.len(), p.writes.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_bounded() {
        let taken: Vec<_> = (0..KEEP + 10).map(|_| take_scratch()).collect();
        assert!(taken.iter().all(|v| v.capacity() == SCRATCH));
        for v in taken {
            give_scratch(v);
        }
        assert_eq!(kept().0, KEEP);
        // A scratch of another size is not kept (a read into it could take more than a
        // record's worth).
        let n = kept().0;
        let _ = take_scratch();
        give_scratch(Vec::with_capacity(SCRATCH * 2));
        assert_eq!(kept().0, n - 1);
        // A write buffer grown large is freed; an empty one is not worth keeping.
        give_write(Vec::with_capacity(WRITE_KEEP_MAX + 1));
        give_write(Vec::new());
        assert_eq!(kept().1, 0);
        let mut w = take_write();
        w.extend_from_slice(b"records");
        give_write(w);
        assert_eq!(kept().1, 1);
        assert!(take_write().is_empty());
    }
}
