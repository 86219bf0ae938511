//! The chunked decoder: never panic, and a split anywhere gives the same payload and outcome
//! as the one-shot decode.
#![no_main]

include!("../checks/chunked.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| { check(data) });
