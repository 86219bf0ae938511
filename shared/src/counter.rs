//! Single-writer counters: written only by the worker that owns them, read by anyone.
//!
//! A plain load + store (no read-modify-write, no lock prefix) is enough because exactly one
//! thread writes; readers on other threads see a recent value, which is all metrics,
//! progress lines and reports need. Keep each worker's counters in a struct of its own aligned
//! to a cache line pair (`#[repr(align(128))]`): separate allocations alone can be adjacent,
//! and two workers writing one line would make every increment a cache miss.

use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with one writer. `add` must only be called from the owning worker.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }

    /// Add `n`. Only the owning worker may call this (a racing second writer would lose counts).
    #[inline]
    pub fn add(&self, n: u64) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    #[inline]
    pub fn incr(&self) {
        self.add(1)
    }

    /// Set a gauge value (e.g. open connections). Only the owning worker may call this.
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed)
    }

    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_writer_counts_are_seen_by_readers() {
        let c = std::sync::Arc::new(Counter::new());
        let w = c.clone();
        std::thread::spawn(move || {
            for _ in 0..10_000 {
                w.incr();
            }
        })
        .join()
        .unwrap();
        assert_eq!(c.get(), 10_000);
        c.set(3);
        assert_eq!(c.get(), 3);
    }
}
