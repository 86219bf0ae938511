//! Criterion benchmarks live in `benches/benches/`; the peer-comparison scripts in `benches/*.sh`.
