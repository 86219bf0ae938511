//! The load generator: an HTTP/1.1 client on thread-per-core monoio workers that is never the
//! bottleneck, with ab's, wrk's and http_load's figures in one report.
//!
//! # Layout
//! Layers that only look down (`python3 shared/tools/modcycles.py loader/src` finds no
//! circle), from the bottom:
//! - plain data and leaves: [`target`] (URLs, [`Target`]), [`targets`] (`--targets`,
//!   vegeta's request files), [`shard`] (`--shard I/N` and
//!   `--start-at`), [`options`] (the validated [`RunOptions`], no clap), [`tls`], [`srcaddr`]
//!   (spreading `--close` connects over 127.0.0.0/8), [`pace`] (waiting on the timer or
//!   spinning), [`histcodec`], [`procstat`], [`sysinfo`];
//! - what a run measured: [`stats`] (per-worker figures, the merged [`RunResult`]) and
//!   [`figures`] (ab's derived figures);
//! - the run: [`plan`] (request bytes, send schedule), [`tickets`] (a worker's share of `-n`
//!   and its walk over the URLs), [`worker`] (one worker's state shared
//!   by its connections: tickets, counting, connecting), [`conn`] (one connection's request
//!   loop), [`hdrlog`] (`--hdr-log` interval logs), [`series`] (`--series`, a line per second), [`run`](mod@run) (all workers: [`run()`] spawns
//!   them, splits connections and `-n`, warm-up, deadline, merge), [`progress`] (the live
//!   line);
//! - output: [`report`] (the ab-style text), [`json`] (the `--json` document's serde types,
//!   written and read back), [`plot`] (`--plot` SVG), [`peer_formats`] (ab's `-e` and `-g`
//!   files, wrk's `--latency` block);
//! - commands built on runs: [`merge`] (`loader merge`, shards added exactly), [`compare`]
//!   (`loader compare URL_A URL_B`, interleaved rounds), [`ceiling`] (`loader ceiling`, the
//!   highest rate within a latency objective);
//! - [`cli`] at the top: clap types, validation into the plain options, dispatch.

pub mod ceiling;
pub mod cli;
pub mod compare;
pub mod conn;
pub mod figures;
pub mod hdrlog;
pub mod histcodec;
pub mod input;
pub mod intervals;
pub mod json;
pub mod measured_start;
pub mod merge;
pub mod options;
pub mod pace;
pub mod peer_formats;
pub mod plan;
pub mod plot;
pub mod procstat;
pub mod progress;
pub mod report;
pub mod run;
pub mod series;
pub mod shard;
pub mod srcaddr;
pub mod stats;
pub mod sysinfo;
pub mod target;
pub mod targets;
pub mod tickets;
pub mod tls;
pub mod worker;

pub use options::RunOptions;
pub use run::run;
pub use stats::RunResult;
pub use target::Target;

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
