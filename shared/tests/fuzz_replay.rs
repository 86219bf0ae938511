//! A short replay of the fuzz targets in `cargo test`: each target's body (the very code the
//! libFuzzer binaries run, `include!`d from `fuzz/checks/`) on every file of the committed
//! seed corpus under `fuzz/seeds/<target>/`, plus every prefix of each file (the cuts a
//! fuzzer tries first).

mod chunked {
    include!("../../fuzz/checks/chunked.rs");
}
mod request_head {
    include!("../../fuzz/checks/request_head.rs");
}
mod response_head {
    include!("../../fuzz/checks/response_head.rs");
}
mod proxy_header {
    include!("../../fuzz/checks/proxy_header.rs");
}

use std::path::PathBuf;

/// Every seed of `target`, by file name; the corpus must exist and be non-trivial.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("directory entry").path();
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path.display().to_string(), data)
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 10,
        "{}: only {} seeds",
        dir.display(),
        out.len()
    );
    out
}

fn replay(target: &str, check: fn(&[u8])) {
    for (name, data) in seeds(target) {
        for n in 0..=data.len() {
            let run = std::panic::catch_unwind(|| check(&data[..n]));
            assert!(run.is_ok(), "{target} panicked on {name}, first {n} bytes");
        }
    }
}

#[test]
fn request_head_seeds() {
    replay("request_head", request_head::check);
}

#[test]
fn response_head_seeds() {
    replay("response_head", response_head::check);
}

#[test]
fn chunked_seeds() {
    replay("chunked", chunked::check);
}

#[test]
fn proxy_header_seeds() {
    replay("proxy_header", proxy_header::check);
}
