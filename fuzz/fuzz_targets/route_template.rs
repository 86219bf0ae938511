//! Routes and `return` templates from fuzzed text, then a fuzzed request: never panics;
//! one route, one well-framed answer (see `checks/route_template.rs`).
#![no_main]

include!("../checks/route_template.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| check(data));
