//! Helpers for the loader's HTTPS tests: rcgen certificates written to PEM files, and a small
//! blocking rustls HTTPS server (a thread per connection) that counts connections, requests
//! and its own full and resumed handshakes.
//!
//! Why a server of its own: the scriptable origin (`shared::origin`) learns TLS with the
//! proxy side of the TLS issue, on another branch; this one is enough to test the client and
//! is independent of the loader's code (rustls's blocking `StreamOwned`, not monoio).

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{HandshakeKind, ServerConfig, ServerConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A certificate and its key.
pub struct Issued {
    pub cert: rcgen::Certificate,
    pub key: KeyPair,
}

impl Issued {
    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A server's TLS config presenting this certificate: the default versions, no client
    /// certificate asked for.
    pub fn server_config(&self) -> ServerConfig {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![self.der()], key)
            .unwrap()
    }
}

pub struct Spec<'a> {
    pub names: &'a [&'a str],
    /// basicConstraints CA:TRUE (a CA, or the `openssl req -x509` kind of server certificate).
    pub ca: bool,
    pub expired: bool,
}

fn params(spec: &Spec<'_>) -> CertificateParams {
    let names: Vec<String> = spec.names.iter().map(|s| s.to_string()).collect();
    let mut p = CertificateParams::new(names.clone()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name
        .push(DnType::CommonName, names[0].clone());
    if spec.ca {
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    if spec.expired {
        p.not_before = rcgen::date_time_ymd(2001, 1, 1);
        p.not_after = rcgen::date_time_ymd(2002, 1, 1);
    }
    p
}

/// ECDSA P-256, self-signed.
pub fn self_signed(spec: Spec<'_>) -> Issued {
    let key = KeyPair::generate().unwrap();
    let cert = params(&spec).self_signed(&key).unwrap();
    Issued { cert, key }
}

/// ECDSA P-256, signed by `ca`.
pub fn signed_by(ca: &Issued, spec: Spec<'_>) -> Issued {
    let key = KeyPair::generate().unwrap();
    let cert = params(&spec).signed_by(&key, &ca.cert, &ca.key).unwrap();
    Issued { cert, key }
}

/// Write `certs` as one PEM file in a fresh temporary directory; returns its path, which
/// takes the directory with it when dropped.
pub fn pem_file(name: &str, certs: &[&Issued]) -> crate::TempFile {
    let file = crate::TempFile::new("loader-tls", name);
    let pem: String = certs.iter().map(|c| c.cert.pem()).collect();
    std::fs::write(&file, pem).unwrap();
    file
}

/// A test CA's PEM file (in a fresh folder) and a leaf for `localhost` signed by it.
pub fn ca_and_leaf() -> (crate::TempFile, Issued) {
    let ca = self_signed(Spec {
        names: &["Test CA"],
        ca: true,
        expired: false,
    });
    let leaf = signed_by(
        &ca,
        Spec {
            names: &["localhost"],
            ca: false,
            expired: false,
        },
    );
    (pem_file("ca.pem", &[&ca]), leaf)
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub full: AtomicU64,
    pub resumed: AtomicU64,
    /// Connections that ended before their handshake completed.
    pub failed_handshakes: AtomicU64,
}

impl ServerStats {
    pub fn get(&self) -> (u64, u64, u64, u64) {
        let g = |a: &AtomicU64| a.load(Ordering::SeqCst);
        (
            g(&self.connections),
            g(&self.requests),
            g(&self.full),
            g(&self.resumed),
        )
    }
}

/// A blocking HTTPS server on 127.0.0.1:0 answering every request with a 5-byte body,
/// keep-alive unless the request says `Connection: close`. Threads end with the process.
pub struct TlsServer {
    pub addr: SocketAddr,
    pub stats: Arc<ServerStats>,
}

impl TlsServer {
    pub fn start(cert: &Issued) -> TlsServer {
        TlsServer::answering(cert, RESPONSE)
    }

    /// Like `start`, answering each keep-alive request with `answer`, written at once.
    pub fn answering(cert: &Issued, answer: &[u8]) -> TlsServer {
        let cfg = cert.server_config();
        TlsServer::serving(cfg, answer, AfterAnswer::KeepAlive)
    }

    /// Like `start`, answering each request with a close-delimited response (no
    /// Content-Length, not chunked: the body ends where the connection does), then closing:
    /// with a close_notify first (`close_notify`), or with TCP's FIN alone, which a client cannot
    /// tell from a truncation.
    pub fn close_delimited(cert: &Issued, close_notify: bool) -> TlsServer {
        let cfg = cert.server_config();
        let after = if close_notify {
            AfterAnswer::CloseNotify
        } else {
            AfterAnswer::TcpClose
        };
        TlsServer::serving(cfg, CLOSE_DELIMITED, after)
    }

    /// Like `start`, speaking only `version` and requiring a client certificate signed by
    /// `client_ca` (mutual TLS): a client without one fails its handshake, which under TLS
    /// 1.3 the client learns only after its own side of the handshake is done.
    pub fn requiring_client_cert(
        cert: &Issued,
        client_ca: &Issued,
        version: &'static rustls::SupportedProtocolVersion,
    ) -> TlsServer {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(client_ca.der()).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let cfg = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![cert.der()], key)
            .unwrap();
        TlsServer::serving(cfg, RESPONSE, AfterAnswer::KeepAlive)
    }

    fn serving(mut cfg: ServerConfig, answer: &[u8], after: AfterAnswer) -> TlsServer {
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let cfg = Arc::new(cfg);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(ServerStats::default());
        let st = stats.clone();
        let answer: Arc<[u8]> = answer.into();
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { continue };
                st.connections.fetch_add(1, Ordering::SeqCst);
                let (cfg, st, answer) = (cfg.clone(), st.clone(), answer.clone());
                std::thread::spawn(move || serve(cfg, tcp, &st, &answer, after));
            }
        });
        TlsServer { addr, stats }
    }

    pub fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.addr.port())
    }
}

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
const RESPONSE_CLOSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
const CLOSE_DELIMITED: &[u8] = b"HTTP/1.1 200 OK\r\n\r\nhello";

/// What the server does after an answer (a request saying `Connection: close` is answered
/// and closed with a close_notify whatever this says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterAnswer {
    KeepAlive,
    /// close_notify, then the TCP close.
    CloseNotify,
    /// The TCP close alone (no close_notify).
    TcpClose,
}

fn serve(
    cfg: Arc<ServerConfig>,
    tcp: TcpStream,
    st: &ServerStats,
    answer: &[u8],
    after: AfterAnswer,
) {
    let conn = ServerConnection::new(cfg).unwrap();
    let mut tls = StreamOwned::new(conn, tcp);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut counted = false;
    loop {
        // An error (a reset, a failed handshake) ends the connection like EOF.
        let n = tls.read(&mut chunk).unwrap_or_default();
        if !counted && !tls.conn.is_handshaking() {
            counted = true;
            match tls.conn.handshake_kind() {
                Some(HandshakeKind::Resumed) => st.resumed.fetch_add(1, Ordering::SeqCst),
                _ => st.full.fetch_add(1, Ordering::SeqCst),
            };
        }
        if n == 0 {
            if !counted {
                st.failed_handshakes.fetch_add(1, Ordering::SeqCst);
            }
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            buf.drain(..end + 4);
            st.requests.fetch_add(1, Ordering::SeqCst);
            if head.contains("connection: close") {
                let _ = tls.write_all(RESPONSE_CLOSE);
                tls.conn.send_close_notify();
                let _ = tls.flush();
                return;
            }
            if tls.write_all(answer).is_err() {
                return;
            }
            match after {
                AfterAnswer::KeepAlive => {}
                AfterAnswer::CloseNotify => {
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                    return;
                }
                AfterAnswer::TcpClose => {
                    let _ = tls.flush();
                    let _ = tls.sock.shutdown(std::net::Shutdown::Both);
                    return;
                }
            }
        }
    }
}

/// A server that accepts TCP connections and never says a word (a stalled handshake).
/// Holds every connection until the process ends.
pub fn silent_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for tcp in listener.incoming().flatten() {
            held.push(tcp);
        }
    });
    addr
}
