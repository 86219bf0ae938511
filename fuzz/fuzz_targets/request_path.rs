//! The proxy's request path as a whole: never panic; one request in, at most one request
//! out; nothing the proxy must strip goes upstream (see `checks/request_path.rs`).
#![no_main]

include!("../checks/request_path.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| check(data));
