//! Files the loader reads whole: a body (`--body`, a target's `@FILE`), a `--urls` or
//! `--targets` file, a run document for `loader merge`. Each is read up to a limit, so that a
//! device or an endless pipe given by mistake (`--body /dev/zero`) is refused with one line
//! instead of read until memory runs out; pipes and process substitutions still work.

use std::io;
use std::path::Path;

pub use shared::bounded_read::{read_capped, read_capped_text};

/// The most a body, a URL list or a targets file may hold: 64 MiB.
pub const MAX_INPUT: u64 = 64 << 20;

/// The most a run document may hold (`loader merge`): 256 MiB, far above any run's (a run of a
/// thousand URLs writes a few MB).
pub const MAX_DOCUMENT: u64 = 256 << 20;

/// The most the bodies of one targets file may hold together (each at most [`MAX_INPUT`]).
pub const MAX_BODIES: u64 = 256 << 20;

/// A body: at most [`MAX_INPUT`].
pub fn read_body(path: &Path) -> io::Result<Vec<u8>> {
    read_capped(path, MAX_INPUT)
}
