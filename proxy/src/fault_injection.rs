//! Faults on demand, for tests only: compiled with the `fault-injection` feature, which
//! nothing enables but the tests crate's dev build (`tests/Cargo.toml`); a release build
//! (`cargo build --release -p proxy`) has none of it.
//!
//! A request whose target is one of those given to [`panic_on`] panics in its connection's
//! handling, after its head was read and before it is dispatched: what a bug on the request
//! path would do. The test checks that the panic ends that connection alone.

use std::sync::Mutex;

/// Targets whose requests panic. A lock, read per request: only in a test build.
static PANIC_ON: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// From now on a request for exactly `target` (its origin-form, as sent) panics, in every
/// proxy of this process.
pub fn panic_on(target: &str) {
    PANIC_ON
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(target.as_bytes().to_vec());
}

/// Panic if the request whose head is `head` asks for a target given to [`panic_on`].
pub(crate) fn before_dispatch(head: &[u8]) {
    let target = head.split(|&b| b == b' ').nth(1).unwrap_or_default();
    let hit = PANIC_ON
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|t| t == target);
    if hit {
        panic!(
            "fault injection: a panic for {}",
            String::from_utf8_lossy(target)
        );
    }
}
