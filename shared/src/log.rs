//! Lines on stderr that never panic: [`log!`](crate::log!) (`shared::log!("...", ...)`),
//! `eprintln!`'s arguments, one line each.
//!
//! `eprintln!` panics when the write fails: a stderr pipe whose reader is gone gives EPIPE,
//! and the release profile turns the panic into an abort, so a proxy that could not log
//! would die. Here a line that cannot be written is lost and nothing else happens. Each line
//! is formatted first and written with one `write_all` (stderr is unbuffered: `eprintln!`
//! writes each piece of its format on its own), so lines from several threads do not mix.

use std::io::Write;

/// Write `args` and a newline to stderr; a failed write is ignored.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut text = match args.as_str() {
        Some(s) => String::with_capacity(s.len() + 1) + s,
        None => args.to_string(),
    };
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `eprintln!` that never panics: see [`log`](crate::log).
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log::line(::std::format_args!($($arg)*))
    };
}
