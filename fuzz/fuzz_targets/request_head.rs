//! Request heads: never panic; a head that parses reads the same to plain httparse, and a
//! prefix cut inside it is never complete.
#![no_main]

include!("../checks/request_head.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| { check(data) });
