//! The load generator: an HTTP/1.1 client on thread-per-core monoio workers that is never the
//! bottleneck, with ab's, wrk's and http_load's figures in one report.
//!
//! # Layout
//! - [`cli`]: the command line (clap) and the validated [`RunOptions`] it becomes.
//! - [`plan`]: URLs ([`Target`]), the request bytes encoded once per worker, the send schedule.
//! - [`run`]: the whole run, [`run()`]: spawns the pinned workers, splits connections and `-n`
//!   among them, warm-up, deadline, merge.
//! - [`worker`]: one worker's state shared by its connections: tickets, counting, connecting.
//! - [`conn`]: one connection's request loop (keep-alive, `--close`, `--pipeline`, `--rate`).
//! - [`tls`]: `https://`: the handshake over `shared::stream`, full or resumed.
//! - [`srcaddr`]: spreading `--close` connects over 127.0.0.0/8 source addresses.
//! - [`stats`]: per-worker figures and the merged [`RunResult`].
//! - [`report`], [`json`], [`plot`]: the ab-style text report, `--json`, `--plot` SVG.
//! - [`ceiling`]: `loader ceiling URL [URL_B]`, the search for the highest rate within a
//!   latency objective.
//! - [`compare`]: `loader compare URL_A URL_B`, interleaved rounds; [`procstat`]: /proc CPU times
//!   for `--watch-pid`; [`sysinfo`]: the run's context; [`progress`]: the live line.
//! - [`shard`]: `--shard I/N` (this generator's exact part of `-n` and `--rate`) and
//!   `--start-at`; [`hdrlog`]: `--hdr-log`, HdrHistogram interval logs; [`merge`]:
//!   `loader merge`, shards' results added exactly into one report.

pub mod ceiling;
pub mod cli;
pub mod compare;
pub mod conn;
pub mod hdrlog;
pub mod json;
pub mod merge;
pub mod plan;
pub mod plot;
pub mod procstat;
pub mod progress;
pub mod report;
pub mod run;
pub mod shard;
pub mod srcaddr;
pub mod stats;
pub mod sysinfo;
pub mod tls;
pub mod worker;

pub use cli::RunOptions;
pub use plan::Target;
pub use run::run;
pub use stats::RunResult;

/// Why a run could not start (a bad URL, an unreadable file, a runtime that would not start).
/// Failed requests are not errors: they are counted in the result.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("invalid URL '{url}': {reason}")]
    InvalidUrl { url: String, reason: &'static str },
    /// The TLS client configuration (`--cacert`, the system trust store).
    #[error(transparent)]
    Tls(#[from] shared::tls::ClientTlsError),
    #[error("cannot resolve '{host}': {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    /// A file named by a flag (`--body`, `--urls`) that cannot be read: the message names both.
    #[error("{flag} {path}: {source}")]
    File {
        flag: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Runtime(#[from] shared::runtime::RuntimeError),
}

impl LoadError {
    /// Usage errors exit 2 (the CLI's convention); all of these are about the input.
    pub fn exit_code(&self) -> i32 {
        2
    }
}
