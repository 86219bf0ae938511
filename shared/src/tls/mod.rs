//! TLS configuration: what a listener serves ([`server`]); the handshakes and the stream are
//! in `crate::stream`.

pub mod server;
mod validity;
