//! HTTPS connections: the TLS handshake over `shared::stream` (the stream type the proxy uses
//! too), and the kind it was (full or resumed).
//!
//! Each worker makes its own rustls config from the run's [`ClientTls`] ([`WorkerTls::new`]),
//! so its connections share one session store (a `--close` run resumes the sessions of the
//! worker's earlier connections) and no lock is shared between workers.
//!
//! The handshake runs inside the connection's attempt, under its `--timeout`, after the TCP
//! connect: a server that accepts and never answers the ClientHello is a connect failure at the
//! timeout, said once with a hint at http:// (`run::handshake_timed_out`).

use monoio::net::TcpStream;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use shared::stream::Stream;
use shared::tls::{ClientTls, ClientTlsError};
use std::sync::Arc;

/// How a handshake went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeKind {
    /// The server's certificate was sent and verified.
    Full,
    /// A session was resumed: no certificate.
    Resumed,
}

/// One worker's TLS client: its rustls config, with its own session store.
pub struct WorkerTls {
    config: Arc<ClientConfig>,
}

impl WorkerTls {
    pub fn new(tls: &ClientTls) -> Result<WorkerTls, ClientTlsError> {
        let (config, _) = tls.config()?;
        Ok(WorkerTls { config })
    }

    /// The TLS handshake on a connected socket: SNI and the certificate's name from `name`,
    /// ALPN `http/1.1`. The error is the reason, for the first-failure line.
    pub async fn handshake(
        &self,
        tcp: TcpStream,
        name: ServerName<'static>,
    ) -> Result<(Stream, HandshakeKind), String> {
        let t = shared::stream::connect(tcp, self.config.clone(), name)
            .await
            .map_err(|e| handshake_error(&e))?;
        let kind = match t.session().handshake_kind() {
            Some(rustls::HandshakeKind::Resumed) => HandshakeKind::Resumed,
            _ => HandshakeKind::Full,
        };
        Ok((Stream::Tls(Box::new(t)), kind))
    }
}

/// Why a handshake failed, for the first-failure line: the rustls error (an alert, a
/// certificate that does not verify), not its io::Error wrapping; a certificate as a sentence
/// that names the way out, not rustls's Debug text; a server answering in plain HTTP with
/// the hint to use http://.
fn handshake_error(e: &std::io::Error) -> String {
    // A plain-HTTP server that reads the ClientHello as the start of a request and gives up
    // on it closes without a byte rustls could call corrupt.
    let gone = match e.kind() {
        std::io::ErrorKind::UnexpectedEof => Some("closed the connection"),
        std::io::ErrorKind::ConnectionReset => Some("reset the connection"),
        _ => None,
    };
    if let Some(gone) = gone {
        return format!(
            "the server {gone} before answering the ClientHello (is the server speaking plain \
             HTTP? try http://)"
        );
    }
    let Some(inner) = e.get_ref() else {
        return e.to_string();
    };
    match inner.downcast_ref::<rustls::Error>() {
        Some(rustls::Error::InvalidCertificate(c)) => format!(
            "the server's certificate {} (--cacert FILE trusts the CA, or the certificate, in \
             FILE; --insecure verifies nothing)",
            certificate_problem(c)
        ),
        Some(rustls::Error::AlertReceived(a)) => alert_reason(*a),
        // A record whose first byte is no TLS content type: what a plain-HTTP server's answer
        // to the ClientHello ("HTTP/1.1 400 ...", 'H' = 0x48) reads as.
        Some(e @ rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => {
            format!("{e} (is the server speaking plain HTTP? try http://)")
        }
        _ => inner.to_string(),
    }
}

/// A fatal alert from the server, as the first-failure line says it: `None` when `e` is none.
pub fn alert_received(e: &std::io::Error) -> Option<String> {
    match e.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::AlertReceived(a) => Some(alert_reason(*a)),
        _ => None,
    }
}

/// rustls's words for a received alert, and what a certificate_required one means.
fn alert_reason(a: rustls::AlertDescription) -> String {
    let why = rustls::Error::AlertReceived(a).to_string();
    if a == rustls::AlertDescription::CertificateRequired {
        format!("{why} (the server requires a client certificate; the loader sends none)")
    } else {
        why
    }
}

/// What is wrong with a certificate, to follow "the server's certificate".
fn certificate_problem(c: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    match c {
        C::UnknownIssuer => "is not signed by a CA trusted here".into(),
        C::Expired | C::ExpiredContext { .. } => "has expired".into(),
        C::NotValidYet | C::NotValidYetContext { .. } => "is not valid yet".into(),
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "does not name the URL's host".into()
        }
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            "is not one for a server (its extended key usage)".into()
        }
        C::Revoked => "has been revoked".into(),
        C::BadSignature => "has a signature that does not verify".into(),
        // webpki's error for a certificate that is a CA's, used by the server as its own:
        // what `openssl req -x509` makes, verified against a store it is not in.
        C::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
            "is a CA certificate used as the server's own (self-signed, as openssl req -x509 \
             makes), not signed by a CA trusted here"
                .into()
        }
        other => format!("does not verify ({other})"),
    }
}

/// ab's "SSL/TLS Protocol" of a session: `TLSv1.3, TLS13_AES_128_GCM_SHA256, X25519, ALPN
/// http/1.1`.
pub fn describe(session: &rustls::Connection) -> String {
    let version = session
        .protocol_version()
        .map_or("?".to_string(), |v| format!("{v:?}").replace('_', "."));
    let suite = session
        .negotiated_cipher_suite()
        .map_or("?".to_string(), |c| format!("{:?}", c.suite()));
    let mut s = format!("{version}, {suite}");
    if let Some(kx) = session.negotiated_key_exchange_group() {
        s += &format!(", {:?}", kx.name());
    }
    if let Some(alpn) = session.alpn_protocol() {
        s += &format!(", ALPN {}", String::from_utf8_lossy(alpn));
    }
    s
}

/// The server name of an `https://` URL's host: a DNS name, or an IP address (no SNI is sent
/// for an address; the certificate must name the address).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string())
        .map_err(|_| format!("'{host}' is not a valid TLS server name"))
}
