//! A TLS server's configuration from PEM files: certificate chains and keys, several chosen by
//! SNI with a default, TLS 1.2 and 1.3, ALPN `http/1.1` (or `http/1.0`), session resumption.
//!
//! - Keys: RSA, ECDSA (P-256, P-384) and Ed25519, in PKCS#8, PKCS#1 (`BEGIN RSA PRIVATE KEY`)
//!   or SEC1 (`BEGIN EC PRIVATE KEY`) PEM, as `openssl req -x509 -newkey ...` writes them.
//! - Errors name the file and the problem: missing, not PEM, no certificate or key in it, a key
//!   that does not match its certificate. An expired certificate, or one not valid for an SNI
//!   name it is chosen for, is a warning (nginx starts with either, without a word).
//! - Resumption is on: TLS 1.3 (and 1.2) tickets from one rotating key set (rustls's
//!   `Ticketer`: a new key every 6 hours, the previous one still accepted) and a TLS 1.2
//!   session-ID cache. Both live in the `ServerConfig`, built once and shared by every worker
//!   through one `Arc`, so a client resumes on whichever worker SO_REUSEPORT gives it; their
//!   locks are taken once per handshake, never per request.
//! - [`server_config`] is a plain function of the spec: a reload builds a new one, and
//!   [`ServerTls::keep_resumption`] gives it the old one's ticket keys and session cache, so
//!   clients resume across a reload as they do across workers.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// TLS 1.2 sessions remembered for session-ID resumption (nginx's `shared:SSL:1m` holds ~4000).
const SESSION_CACHE: usize = 16 * 1024;

/// A certificate chain and its key, as files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Certificates picked by the SNI name a client sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SniCert {
    /// Host names (`example.com`) and wildcards (`*.example.com`).
    pub names: Vec<String>,
    pub files: CertFiles,
}

/// What a TLS listener serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsSpec {
    /// For clients without SNI or with a name no `sni` entry has.
    pub default: CertFiles,
    pub sni: Vec<SniCert>,
}

/// A built server configuration and what is worth a warning (expired certificates).
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub config: Arc<ServerConfig>,
    pub warnings: Vec<String>,
}

impl ServerTls {
    /// This configuration with `old`'s ticketer and TLS 1.2 session cache: a reload on the
    /// same listener keeps its clients' tickets and session IDs valid (nginx keeps its
    /// `ssl_session_cache` and ticket keys across a reload too). Both are `Arc`s: the old and
    /// new generation share one key set and one cache while handshakes of both run.
    pub fn keep_resumption(&mut self, old: &ServerTls) {
        let mut cfg = (*self.config).clone();
        cfg.ticketer = old.config.ticketer.clone();
        cfg.session_storage = old.config.session_storage.clone();
        self.config = Arc::new(cfg);
    }
}

/// Why a [`ServerTlsSpec`] built no configuration: one line naming the file and the
/// problem, and the `sni` entry it is about, so a config file's error can name that entry's
/// line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SpecError {
    /// The index in [`ServerTlsSpec::sni`]; `None`: the default pair, or the whole.
    pub entry: Option<usize>,
    pub message: String,
}

impl SpecError {
    /// The error about `entry` (a closure, for `map_err`).
    fn at(entry: Option<usize>) -> impl Fn(String) -> SpecError + Copy {
        move |message| SpecError { entry, message }
    }
}

/// Build the server configuration `spec` describes.
pub fn server_config(spec: &ServerTlsSpec) -> Result<ServerTls, SpecError> {
    let provider = Arc::new(aes128_first(super::provider().as_ref().clone()));
    let mut warnings = Vec::new();
    let default =
        Arc::new(load_pair(&spec.default, &provider, &mut warnings).map_err(SpecError::at(None))?);
    let mut resolver = SniResolver {
        exact: HashMap::new(),
        wildcard: Vec::new(),
        default,
    };
    // Each name's entry: a name in two picks one certificate only, so it is refused (as a
    // duplicate route is) rather than left to the table's order.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, s) in spec.sni.iter().enumerate() {
        let here = SpecError::at(Some(i));
        if s.names.is_empty() {
            // Its certificate would be loaded for no client.
            return Err(here(format!(
                "sni entry with no names (certificate {}): list the names it is chosen for",
                s.files.cert.display()
            )));
        }
        let ck = Arc::new(load_pair(&s.files, &provider, &mut warnings).map_err(here)?);
        for name in &s.names {
            resolver.add(name, &ck, &s.files.cert).map_err(here)?;
            // Twice in one entry is the same certificate: no choice to refuse.
            if let Some(j) = seen.insert(sni_key(name), i).filter(|&j| j != i) {
                return Err(here(format!(
                    "sni name `{name}` is in sni[{j}] (certificate {}) and sni[{i}] \
                     (certificate {}): a name picks one certificate",
                    spec.sni[j].files.cert.display(),
                    s.files.cert.display()
                )));
            }
            if !valid_for(&ck.cert[0], name) {
                warnings.push(format!(
                    "certificate {} is not valid for sni name `{name}` (clients will refuse it)",
                    s.files.cert.display()
                ));
            }
        }
    }
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| SpecError::at(None)(format!("tls: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    // The server's order decides ALPN in rustls: a client offering both gets http/1.1; one
    // offering only http/1.0 gets it (nginx selects it too) rather than alert 120.
    cfg.alpn_protocols = vec![b"http/1.1".to_vec(), b"http/1.0".to_vec()];
    // The server's order decides (see `aes128_first`).
    cfg.ignore_client_order = true;
    cfg.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()
        .map_err(|e| SpecError::at(None)(format!("tls: {e}")))?;
    cfg.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    // One ticket per connection: the one its client's next connection resumes with.
    cfg.send_tls13_tickets = 1;
    Ok(ServerTls {
        config: Arc::new(cfg),
        warnings,
    })
}

/// The provider with AES-128-GCM before AES-256-GCM (TLS 1.3 and 1.2 alike), as Go's TLS
/// server and Cloudflare order them: as safe in practice and cheaper per byte. OpenSSL clients
/// (wrk, curl) offer AES-256 first; with `ignore_client_order` the server picks AES-128.
fn aes128_first(mut p: CryptoProvider) -> CryptoProvider {
    use rustls::CipherSuite as C;
    let rank = |s: &rustls::SupportedCipherSuite| match s.suite() {
        C::TLS13_AES_128_GCM_SHA256 => 0,
        C::TLS13_AES_256_GCM_SHA384 => 1,
        C::TLS13_CHACHA20_POLY1305_SHA256 => 2,
        C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 3,
        C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 | C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 4,
        _ => 5,
    };
    // Stable: ECDSA and RSA suites keep their relative order.
    p.cipher_suites.sort_by_key(rank);
    p
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    crate::bounded_read::read_capped(path, crate::bounded_read::MAX_SMALL_FILE)
        .map_err(|e| format!("{what} {}: {e}", path.display()))
}

/// The certificate chain in `path` (PEM), leaf first.
pub fn load_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, "certificate file")?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificate file {}: not PEM: {e}", path.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "certificate file {}: no PEM certificate (BEGIN CERTIFICATE) in it",
            path.display()
        ));
    }
    Ok(chain)
}

/// The private key in `path` (PEM: PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path, "key file")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        format!(
            "key file {}: no PEM private key (PKCS#8, RSA or EC) in it: {e}",
            path.display()
        )
    })
}

/// A chain and its key, checked to belong together; an expired leaf adds a warning.
fn load_pair(
    f: &CertFiles,
    provider: &CryptoProvider,
    warnings: &mut Vec<String>,
) -> Result<CertifiedKey, String> {
    let chain = load_chain(&f.cert)?;
    let key = load_key(&f.key)?;
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("key file {}: unusable key: {e}", f.key.display()))?;
    if let Some(v) = super::validity::Validity::of(&chain[0]) {
        if v.not_after < now_unix() {
            warnings.push(format!(
                "certificate {} expired on {} (clients will refuse it)",
                f.cert.display(),
                date(v.not_after)
            ));
        }
    }
    let ck = CertifiedKey::new(chain, signer);
    match ck.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(ck),
        Err(_) => Err(format!(
            "key file {} does not match certificate {}",
            f.key.display(),
            f.cert.display()
        )),
    }
}

/// Whether `leaf` is valid for the SNI name `name` (already checked to be a host name or
/// `*.domain`): for a wildcard, for a name one label under its domain, as clients match.
fn valid_for(leaf: &CertificateDer<'_>, name: &str) -> bool {
    let probe = match name.strip_prefix('*') {
        Some(domain) => format!("sni-check{domain}"),
        None => name.to_string(),
    };
    let Ok(host) = rustls::pki_types::ServerName::try_from(probe) else {
        return false;
    };
    webpki::EndEntityCert::try_from(leaf)
        .is_ok_and(|cert| cert.verify_is_valid_for_subject_name(&host).is_ok())
}

/// Picks the certificate by SNI: an exact name, then the longest matching wildcard, then
/// the default.
#[derive(Debug)]
struct SniResolver {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `(".example.com", key)` for `*.example.com`, longest suffix first.
    wildcard: Vec<(String, Arc<CertifiedKey>)>,
    default: Arc<CertifiedKey>,
}

impl SniResolver {
    fn add(&mut self, name: &str, ck: &Arc<CertifiedKey>, cert: &Path) -> Result<(), String> {
        if name.is_empty() {
            return Err(format!(
                "sni name is empty (certificate {}): a host name or `*.domain`",
                cert.display()
            ));
        }
        let lower = sni_key(name);
        // A dot still there (`a.test..`) would be kept by `DnsName` and match no client.
        if lower.ends_with('.') {
            return Err(format!(
                "sni name `{name}` (certificate {}): not a host name",
                cert.display()
            ));
        }
        if let Some(suffix) = lower.strip_prefix('*') {
            if !suffix.starts_with('.') || suffix.len() < 2 {
                return Err(format!(
                    "sni name `{name}` (certificate {}): a wildcard is `*.domain`",
                    cert.display()
                ));
            }
            self.wildcard.push((suffix.to_string(), ck.clone()));
            self.wildcard
                .sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        } else {
            if rustls::pki_types::DnsName::try_from(lower.as_str()).is_err() {
                return Err(format!(
                    "sni name `{name}` (certificate {}): not a host name",
                    cert.display()
                ));
            }
            self.exact.insert(lower, ck.clone());
        }
        Ok(())
    }

    fn pick(&self, name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = name else {
            return self.default.clone();
        };
        let lower = name.to_ascii_lowercase();
        if let Some(ck) = self.exact.get(&lower) {
            return ck.clone();
        }
        for (suffix, ck) in &self.wildcard {
            // One label under the wildcard's domain, as certificates match.
            if let Some(label) = lower.strip_suffix(suffix.as_str()) {
                if !label.is_empty() && !label.contains('.') {
                    return ck.clone();
                }
            }
        }
        self.default.clone()
    }
}

/// The form an `sni` name is matched in: lower case, without the trailing dot of a fully
/// qualified name (`Api.Example.com.`), as routes read hosts. Clients send no dot (RFC 6066
/// 3), so a name kept with it would never be chosen. One dot only: `a.test..` stays invalid.
fn sni_key(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.strip_suffix('.') {
        Some(bare) => bare.to_string(),
        None => lower,
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.pick(hello.server_name()))
    }
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// `YYYY-MM-DD` of Unix seconds.
fn date(secs: i64) -> String {
    let (y, m, d) = crate::civil::civil_from_days(secs.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(super::date(1709208000), "2024-02-29");
        assert_eq!(super::date(0), "1970-01-01");
        assert_eq!(super::date(2524607999), "2049-12-31");
    }
}
