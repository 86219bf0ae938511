//! Lines on stderr that never panic and never block a worker: [`log!`](crate::log!)
//! (`shared::log!("...", ...)`), `eprintln!`'s arguments, one line each.
//!
//! `eprintln!` panics when the write fails: a stderr pipe whose reader is gone gives EPIPE,
//! and a panic there would end the connection or the thread, so a proxy that could not log
//! would fail. Here a line that cannot be written is lost and nothing else happens. Each line
//! is formatted first and written with one `write_all` (stderr is unbuffered: `eprintln!`
//! writes each piece of its format on its own), so lines from several threads do not mix.
//!
//! A write to stderr blocks while its pipe is full: a reader that stalls (a paused pager, a
//! journal that is behind) would stop the thread that logs. A thread that must never block
//! (a proxy worker: [`defer_on_this_thread`]) hands its lines to one writer thread through a
//! bounded queue instead; when the queue is full the line is dropped and counted, and the
//! writer says how many were dropped once it can write again. The signal thread defers too (it
//! is the one thread that takes SIGTERM; a line queued when a second signal forces the exit is
//! lost). Other threads (start-up, the loader's) write directly, so their lines keep their
//! order with what the process prints on exit.

use std::cell::Cell;
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Lines a deferring thread may have waiting for the writer; beyond, lines are dropped.
pub const QUEUE_LINES: usize = 1024;

thread_local! {
    static DEFER: Cell<bool> = const { Cell::new(false) };
}

static WRITER: OnceLock<Option<SyncSender<String>>> = OnceLock::new();
/// Lines queued and not yet written (for [`flush`]).
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// Lines dropped because the queue was full, not yet reported.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// From now on this thread's lines go through the writer thread (started on first use):
/// its logging never waits for stderr.
pub fn defer_on_this_thread() {
    if writer().is_some() {
        DEFER.with(|d| d.set(true));
    }
}

fn writer() -> Option<&'static SyncSender<String>> {
    WRITER
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<String>(QUEUE_LINES);
            let spawned = std::thread::Builder::new()
                .name("log-writer".into())
                .spawn(move || {
                    for text in rx {
                        write_stderr(&text);
                        PENDING.fetch_sub(1, Ordering::Release);
                        let dropped = DROPPED.swap(0, Ordering::AcqRel);
                        if dropped > 0 {
                            write_stderr(&format!(
                                "warning: {dropped} log lines dropped: stderr was not being read\n"
                            ));
                        }
                    }
                });
            // Without the thread every line is written directly, as before.
            spawned.ok().map(|_| tx)
        })
        .as_ref()
}

/// Write `args` and a newline to stderr (or queue it, on a deferring thread); a failed write
/// is ignored.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut text = match args.as_str() {
        Some(s) => String::with_capacity(s.len() + 1) + s,
        None => args.to_string(),
    };
    text.push('\n');
    if DEFER.with(Cell::get) {
        if let Some(tx) = writer() {
            PENDING.fetch_add(1, Ordering::AcqRel);
            match tx.try_send(text) {
                Ok(()) => return,
                Err(TrySendError::Full(_)) => {
                    PENDING.fetch_sub(1, Ordering::AcqRel);
                    DROPPED.fetch_add(1, Ordering::AcqRel);
                    return;
                }
                Err(TrySendError::Disconnected(t)) => {
                    PENDING.fetch_sub(1, Ordering::AcqRel);
                    text = t;
                }
            }
        }
    }
    write_stderr(&text);
}

fn write_stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Wait until every queued line is written, at most `limit` (a stderr nobody reads must not
/// hold the process's exit). True when nothing is left.
pub fn flush(limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while PENDING.load(Ordering::Acquire) > 0 {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// `eprintln!` that never panics: see [`log`](crate::log).
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log::line(::std::format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferring_thread_queues_and_flush_waits_for_the_writer() {
        std::thread::spawn(|| {
            defer_on_this_thread();
            assert!(DEFER.with(Cell::get));
            crate::log!("shared::log test line (deferred)");
        })
        .join()
        .unwrap();
        assert!(
            flush(Duration::from_secs(5)),
            "the writer left lines queued"
        );
        assert_eq!(PENDING.load(Ordering::Acquire), 0);
    }
}
