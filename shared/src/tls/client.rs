//! The TLS client configuration: what the loader's HTTPS connections and the proxy's HTTPS
//! upstreams verify, offer and remember.
//!
//! - **Trust** ([`Trust`]): the system store, a CA file (`--cacert`), or nothing (`--insecure`,
//!   labs only: the server's handshake signature is still checked, its certificate is not).
//!   System roots come from rustls-native-certs: the same store curl, wrk and nginx (OpenSSL)
//!   read (`/etc/ssl/certs`, `SSL_CERT_FILE`, `SSL_CERT_DIR`), so a company CA installed on the
//!   machine is trusted here too; webpki-roots would compile in Mozilla's list and ignore it.
//! - **curl's `--cacert` rule**: a server certificate that equals, byte for byte, a certificate
//!   in the CA file is trusted even where webpki rejects the chain (the `openssl req -x509`
//!   kind is a CA certificate, which webpki refuses as an end entity); its name and validity
//!   period are still checked. curl does the same through OpenSSL's partial-chain flag.
//!   Without a CA file such a certificate fails as an unknown issuer.
//! - **ALPN** `http/1.1`.
//! - **Resumption**: one in-memory session store per [`ClientTls::config`] call. A thread-per-core
//!   user calls it once per worker, so a worker's connections resume each other's sessions and
//!   no lock is shared between workers (rustls's store takes a mutex per handshake: uncontended
//!   when one thread uses it). A TLS 1.3 ticket is used once; rustls keeps up to 8 per server.
//! - **Counting**: each config counts the server certificates it verified ([`HandshakeCounter`]).
//!   A resumed handshake verifies none, so full handshakes = verified certificates and resumed
//!   = completed handshakes − full, without reaching into the connection.

use super::validity::Validity;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_name, Resumption, WebPkiServerVerifier};
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Sessions remembered per store: server names, each with up to 8 TLS 1.3 tickets.
const SESSION_CACHE: usize = 256;

/// What a server certificate is verified against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The system's trust store (rustls-native-certs).
    System,
    /// The certificates in a PEM file, with curl's rule for a server certificate in it.
    CaFile(PathBuf),
    /// No verification of the certificate (labs only).
    Insecure,
}

/// How to build a [`ClientTls`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTlsOptions {
    pub trust: Trust,
    /// Offer session resumption (TLS 1.3 tickets, TLS 1.2 tickets and session ids).
    pub resumption: bool,
}

impl Default for ClientTlsOptions {
    fn default() -> Self {
        ClientTlsOptions {
            trust: Trust::System,
            resumption: true,
        }
    }
}

/// Why a TLS client configuration could not be built; each names the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum ClientTlsError {
    #[error("CA file {}: {source}", path.display())]
    CaRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("CA file {}: not PEM: {reason}", path.display())]
    CaNotPem { path: PathBuf, reason: String },
    #[error("CA file {}: no PEM certificate in it", path.display())]
    CaEmpty { path: PathBuf },
    #[error("CA file {}: certificate {index} is not usable: {reason}", path.display())]
    CaBadCertificate {
        path: PathBuf,
        /// 1-based, in file order.
        index: usize,
        reason: String,
    },
    #[error("system trust store: no usable certificate found ({detail}); give --cacert FILE")]
    NoSystemRoots { detail: String },
    #[error("TLS client configuration: {0}")]
    Config(String),
}

/// Counts the server certificates a config verified (its full handshakes). One per
/// [`ClientTls::config`]: per worker, so the atomic is never contended.
#[derive(Debug, Clone, Default)]
pub struct HandshakeCounter(Arc<AtomicU64>);

impl HandshakeCounter {
    /// Server certificates verified so far (full handshakes that got past the certificate).
    pub fn verified(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The loaded trust and options; [`ClientTls::config`] makes the rustls configs from it.
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// `None` with `--insecure`.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    /// The CA file's certificates, for curl's rule.
    pinned: Arc<[CertificateDer<'static>]>,
    resumption: bool,
}

impl ClientTls {
    /// Load the trust roots (reads the CA file or the system store once).
    pub fn new(opts: &ClientTlsOptions) -> Result<ClientTls, ClientTlsError> {
        let (roots, pinned) = match &opts.trust {
            Trust::Insecure => {
                return Ok(ClientTls {
                    webpki: None,
                    pinned: Arc::new([]),
                    resumption: opts.resumption,
                })
            }
            Trust::System => (system_roots()?, Vec::new()),
            Trust::CaFile(path) => {
                let certs = read_ca_file(path)?;
                (ca_roots(path, &certs)?, certs)
            }
        };
        let webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), super::provider())
                .build()
                .map_err(|e| ClientTlsError::Config(e.to_string()))?;
        Ok(ClientTls {
            webpki: Some(webpki),
            pinned: pinned.into(),
            resumption: opts.resumption,
        })
    }

    /// Whether certificates are verified (false with `--insecure`).
    pub fn verifies(&self) -> bool {
        self.webpki.is_some()
    }

    /// A rustls config with its own session store and its own counter: call once per worker.
    pub fn config(&self) -> Result<(Arc<ClientConfig>, HandshakeCounter), ClientTlsError> {
        let provider = super::provider();
        let counter = HandshakeCounter::default();
        let verifier = Arc::new(self.verifier(&provider, &counter));
        let mut cfg = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientTlsError::Config(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        cfg.resumption = if self.resumption {
            Resumption::in_memory_sessions(SESSION_CACHE)
        } else {
            Resumption::disabled()
        };
        Ok((Arc::new(cfg), counter))
    }
}

impl ClientTls {
    fn verifier(&self, provider: &CryptoProvider, counter: &HandshakeCounter) -> Verifier {
        Verifier {
            webpki: self.webpki.clone(),
            pinned: self.pinned.clone(),
            algs: provider.signature_verification_algorithms,
            counter: counter.clone(),
        }
    }
}

/// The PEM certificates of a CA file, in order.
fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, ClientTlsError> {
    let pem = crate::bounded_read::read_capped(path, crate::bounded_read::MAX_SMALL_FILE).map_err(
        |source| ClientTlsError::CaRead {
            path: path.to_owned(),
            source,
        },
    )?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ClientTlsError::CaNotPem {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(ClientTlsError::CaEmpty {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// Every certificate of the CA file as a trust anchor; one that does not parse is an error.
fn ca_roots(
    path: &Path,
    certs: &[CertificateDer<'static>],
) -> Result<RootCertStore, ClientTlsError> {
    let mut roots = RootCertStore::empty();
    for (i, cert) in certs.iter().enumerate() {
        roots
            .add(cert.clone())
            .map_err(|e| ClientTlsError::CaBadCertificate {
                path: path.to_owned(),
                index: i + 1,
                reason: e.to_string(),
            })?;
    }
    Ok(roots)
}

/// The system store; certificates that do not parse are skipped (as OpenSSL does), an empty
/// store is an error.
fn system_roots() -> Result<RootCertStore, ClientTlsError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let detail = match found.errors.first() {
            Some(e) => e.to_string(),
            None => "the store is empty".to_string(),
        };
        return Err(ClientTlsError::NoSystemRoots { detail });
    }
    Ok(roots)
}

/// webpki, then curl's rule for a certificate in the CA file; or nothing (`--insecure`).
#[derive(Debug)]
struct Verifier {
    webpki: Option<Arc<WebPkiServerVerifier>>,
    pinned: Arc<[CertificateDer<'static>]>,
    algs: WebPkiSupportedAlgorithms,
    counter: HandshakeCounter,
}

impl Verifier {
    /// curl's rule: `leaf` is in the CA file, valid now and for `name`. `Err(rejected)` (the
    /// webpki error) when it is not in the file.
    fn pinned_leaf(
        &self,
        leaf: &CertificateDer<'_>,
        name: &ServerName<'_>,
        now: UnixTime,
        rejected: Error,
    ) -> Result<(), Error> {
        if !self.pinned.iter().any(|p| p.as_ref() == leaf.as_ref()) {
            return Err(rejected);
        }
        let parsed = ParsedCertificate::try_from(leaf)?;
        verify_server_name(&parsed, name)?;
        let validity = Validity::of(leaf).ok_or(CertificateError::BadEncoding)?;
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        if now < validity.not_before {
            return Err(CertificateError::NotValidYet.into());
        }
        if !validity.contains(now) {
            return Err(CertificateError::Expired.into());
        }
        Ok(())
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if let Some(webpki) = &self.webpki {
            let checked = webpki.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            );
            if let Err(rejected) = checked {
                self.pinned_leaf(end_entity, server_name, now, rejected)?;
            }
        }
        self.counter.add();
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algs.supported_schemes()
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
