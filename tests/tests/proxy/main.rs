//! The proxy's request path end to end, in-process over real sockets on 127.0.0.1: framing on
//! the wire, smuggling, route actions (return, static files), streaming, upgrades, 100-continue,
//! early answers, failures and retries, the upstream pool, drain, the connection cap and fair
//! service to a crowd of clients. One module per concern.

mod basic;
mod client_limits;
mod config;
mod conn_cap;
mod differential;
mod drain;
mod early;
mod early_ok;
mod expect_continue;
mod failures;
mod fairness;
mod hashing;
mod held_head;
mod interim;
mod pool;
mod proxy_protocol;
mod real_ip;
mod rejected_body;
mod return_action;
mod rewrite;
mod routes;
mod send_proxy;
mod slow_reader;
mod smuggling;
mod splice;
mod static_files;
mod steer_cpu;
mod stream;
mod upstream_framing;
mod wire;
mod ws;
