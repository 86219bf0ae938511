//! PROXY protocol headers (v1, v2): never panic; an accepted header is bounded, exact and
//! split-safe; written headers read back.
#![no_main]

include!("../checks/proxy_header.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| check(data));
