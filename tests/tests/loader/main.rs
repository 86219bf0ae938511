//! The load generator end to end: its engine and counts, the command line and the process,
//! reports and distributions, the ceiling search, failures, HTTPS. One module per concern. (Its
//! allocation test is a binary of its own: it installs a counting global allocator.)

mod ceiling;
mod cli;
mod counts;
mod dist;
mod engine;
mod failures;
mod faults;
mod hostile;
mod merge_input;
mod peers;
mod process;
mod report;
mod series;
mod tls;
mod tls_process;

use loader::stats::RunResult;
use loader::RunOptions;
use shared::shutdown::ShutdownFlag;

/// Options for `urls` over `connections`: one worker, unpinned (the machine is shared with
/// the origin in this process), quiet, a 5 s timeout.
fn opts(urls: &[String], connections: usize) -> RunOptions {
    let mut o = RunOptions::for_urls(urls).expect("valid URLs");
    o.connections = connections;
    o.runtime.workers = 1;
    o.runtime.pin = false;
    o.quiet = true;
    o.timeout = std::time::Duration::from_secs(5);
    o
}

/// Run the loader in-process with `o`.
fn run(o: &RunOptions) -> RunResult {
    loader::run(o, ShutdownFlag::new()).expect("run starts")
}
