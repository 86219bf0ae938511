//! TLS configuration shared by the proxy and the loader (rustls 0.23 with the aws-lc-rs provider).
//! The handshakes and the stream are in `crate::stream`.
//!
//! - [`server`]: a listener's side: PEM chains and keys, SNI, TLS 1.2/1.3, ALPN, resumption.
//! - [`client`]: the client side (loader connections, proxy HTTPS upstreams): trust roots from a
//!   CA file or the system store, `--insecure`, ALPN `http/1.1`, session resumption, curl's
//!   `--cacert` rule for self-signed servers, and the count of full handshakes.
//! - [`validity`]: a certificate's notBefore/notAfter read from its DER, for the `--cacert` rule
//!   (webpki does not expose them).
//!
//! Crypto provider: aws-lc-rs, given explicitly to every config builder (no process-wide
//! default to install). Its handshakes cost less than ring's; it builds with a C compiler.

pub mod client;
pub mod server;
pub mod validity;

pub use client::{ClientTls, ClientTlsError, ClientTlsOptions, HandshakeCounter, Trust};

/// The crypto provider every config is built with.
pub fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}
