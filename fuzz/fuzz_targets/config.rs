//! The config loader (TOML text, as `--check-config` reads it): never panics; an error is
//! one line naming the file and the line or key (see `checks/config.rs`).
#![no_main]

include!("../checks/config.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| check(data));
