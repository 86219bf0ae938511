//! Response heads to each kind of request method: never panic, consistent head length.
#![no_main]

include!("../checks/response_head.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| { check(data) });
