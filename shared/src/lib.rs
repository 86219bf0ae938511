//! Shared core of the proxy and the loader.
//!
//! # Layout
//! - [`accept`]: the accept loop of the proxy and the origin, with the EMFILE back-off.
//! - [`http`]: the sans-IO HTTP/1.1 codec (RFC 9112): heads, framing, chunked, encoders.
//! - [`runtime`]: thread-per-core bootstrap: one pinned monoio runtime per core, driver fallback.
//! - [`net`]: sockets: SO_REUSEPORT listeners, TCP_NODELAY, accept back-off, RLIMIT_NOFILE.
//! - [`shutdown`]: SIGINT/SIGTERM to a process-wide flag, and each worker's local view of it.
//! - [`inbox`]: a message to one worker or to every worker (purge, scrape, reload), woken by a
//!   socket the worker's driver awaits.
//! - [`counter`]: single-writer counters, written by their worker and read by anyone.
//! - [`base64`]: standard base64, for the WebSocket handshake and the loader's JSON.
//! - [`stream`]: one stream type for plain and TLS connections (read, write, shutdown with
//!   close_notify, idle liveness, scheme), and the TLS adapter over rustls.
//! - [`tls`]: TLS configurations (rustls + ring): a listener's certificates (PEM, SNI,
//!   resumption); the client side: trust, `--cacert` rule, resumption.
//! - [`units`]: durations (`500ms`, `3s`, `2m`) and sizes (`32KiB`, `1MiB`).
//! - [`config`]: TOML files with errors naming file, line and key; one-line CLI errors.
//! - [`origin`]: the scriptable origin server used by tests, benchmarks and `loader origin`.
//! - [`proxy_protocol`]: the PROXY protocol header (v1, v2), read and written, sans-IO.
//! - [`linger`]: waits of a few milliseconds sharing one ticker per worker (no timer each).
//! - [`log`]: lines on stderr that never panic (`shared::log!`), for everything after start.

pub mod accept;
pub mod base64;
pub mod bounded_read;
pub mod civil;
pub mod clock;
pub mod config;
pub mod contain;
pub mod counter;
pub mod deadline;
pub mod http;
pub mod inbox;
pub mod linger;
pub mod log;
pub mod net;
pub mod origin;
pub mod pinning;
pub mod proxy_protocol;
pub mod runtime;
pub mod shutdown;
pub mod steer;
pub mod stream;
pub mod tls;
pub mod units;
