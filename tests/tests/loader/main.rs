//! The load generator end to end: its engine and counts, the command line and the process,
//! reports and distributions, the ceiling search, failures, HTTPS. One module per concern. (Its
//! allocation test is a binary of its own: it installs a counting global allocator.)

mod ceiling;
mod cli;
mod counts;
mod dist;
mod engine;
mod failures;
mod process;
mod report;
mod tls;
mod tls_process;
