//! The security review's defects (issue 22), one module per concern, in one test binary:
//! each test drives a real proxy over raw sockets on 127.0.0.1 and failed before its fix.

#[path = "../proxy_common/mod.rs"]
mod proxy_common;
#[path = "../reload_common/mod.rs"]
mod reload_common;

mod access_log_fifo;
mod freeze;
mod stderr_closed;
mod takeover;
mod takeover_peer;
