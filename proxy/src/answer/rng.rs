//! A per-worker pseudo-random generator for `{random:A-B}`: wyrand (Wang Yi's, the one Go's
//! runtime and fastrand use), one multiply per number, and Lemire's multiply-shift with
//! rejection for an exactly uniform range. Not for secrets: it only has to be fast and even.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};

pub struct Rng {
    state: Cell<u64>,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng {
            state: Cell::new(seed),
        }
    }

    /// Seeded from the process's hash keys (std's per-process random source) and `salt`, so
    /// workers and runs differ.
    pub fn from_entropy(salt: u64) -> Rng {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        Rng::new(h.finish())
    }

    pub fn next_u64(&self) -> u64 {
        let s = self.state.get().wrapping_add(0xa076_1d64_78bd_642f);
        self.state.set(s);
        let t = u128::from(s) * u128::from(s ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) as u64) ^ (t as u64)
    }

    /// Uniform over `lo..=hi` (`lo <= hi`).
    pub fn between(&self, lo: u64, hi: u64) -> u64 {
        let span = hi.wrapping_sub(lo).wrapping_add(1);
        if span == 0 {
            // The whole u64 range.
            return self.next_u64();
        }
        // Lemire, "Fast Random Integer Generation in an Interval" (2019): the high half of
        // x * span is uniform once the low half's biased values are rejected.
        let mut m = u128::from(self.next_u64()) * u128::from(span);
        if (m as u64) < span {
            let threshold = span.wrapping_neg() % span;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(span);
            }
        }
        lo + (m >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_covered_evenly_and_never_left() {
        let r = Rng::new(42);
        let mut seen = [0u32; 21];
        for _ in 0..210_000 {
            let n = r.between(1, 21);
            assert!((1..=21).contains(&n), "{n}");
            seen[(n - 1) as usize] += 1;
        }
        // 10,000 expected per value; a fair generator stays well within ±5%.
        for (i, &c) in seen.iter().enumerate() {
            assert!((9_500..=10_500).contains(&c), "{}: {c}", i + 1);
        }
        assert_eq!(r.between(7, 7), 7);
        let top = r.between(u64::MAX - 1, u64::MAX);
        assert!(top >= u64::MAX - 1);
        let _ = r.between(0, u64::MAX);
    }

    #[test]
    fn seeds_differ() {
        assert_ne!(
            Rng::from_entropy(0).next_u64(),
            Rng::from_entropy(1).next_u64()
        );
    }
}
