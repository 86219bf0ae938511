//! TLS test fixtures: certificates made with rcgen (a CA and leaves signed by it, expired
//! ones, self-signed ones), written as PEM files into a fresh folder; a blocking rustls
//! client trusting that CA, with a session store so resumption can be asked for.
//!
//! The RSA and EC key files next to this module are fixed keys in two encodings each
//! (`openssl genrsa -traditional` / `openssl ecparam -genkey`: PKCS#1 and SEC1, and their
//! PKCS#8 forms): rcgen signs with the PKCS#8 form, the proxy loads the other.

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub const RSA_PKCS1: &str = include_str!("tls/rsa2048.pkcs1.pem");
pub const RSA_PKCS8: &str = include_str!("tls/rsa2048.pkcs8.pem");
pub const P256_SEC1: &str = include_str!("tls/p256.sec1.pem");
pub const P256_PKCS8: &str = include_str!("tls/p256.pkcs8.pem");

/// A CA that signs leaves.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    pub fn new() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "test CA");
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A leaf for `names` with a new P-256 key: (cert PEM, key PEM).
    pub fn leaf(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        (self.leaf_with(names, &key, false), key.serialize_pem())
    }

    /// A leaf for `names` with `key`; `expired`: valid in 2020 only.
    pub fn leaf_with(&self, names: &[&str], key: &KeyPair, expired: bool) -> String {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, "leaf");
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2020, 12, 31);
        }
        p.signed_by(key, &self.cert, &self.key).unwrap().pem()
    }

    /// Write a leaf for `names` into `dir` as `stem.crt` / `stem.key`: the two paths.
    pub fn leaf_files(&self, dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let (c, k) = self.leaf(names);
        write_pair(dir, stem, &c, &k)
    }
}

impl Default for Ca {
    fn default() -> Self {
        Ca::new()
    }
}

pub fn write_pair(dir: &Path, stem: &str, cert: &str, key: &str) -> (PathBuf, PathBuf) {
    let (cp, kp) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&cp, cert).unwrap();
    std::fs::write(&kp, key).unwrap();
    (cp, kp)
}

/// A client config trusting `ca`, ALPN http/1.1, TLS 1.2 and 1.3 (or `only12`).
pub fn client_config(ca: &CertificateDer<'static>, only12: bool) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = if only12 {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// A blocking TLS client connection.
pub struct TlsClient {
    pub s: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl TlsClient {
    /// Connect and finish the handshake; `Err`: the handshake failed (its message).
    pub fn connect(addr: SocketAddr, cfg: &Arc<ClientConfig>, sni: &str) -> Result<Self, String> {
        Self::connect_after(addr, cfg, sni, &[])
    }

    /// [`TlsClient::connect`] with `prefix` (a PROXY protocol header) sent first, in the
    /// same write as the ClientHello: the server must take the prefix and nothing past it.
    pub fn connect_after(
        addr: SocketAddr,
        cfg: &Arc<ClientConfig>,
        sni: &str,
        prefix: &[u8],
    ) -> Result<Self, String> {
        let mut tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        tcp.set_nodelay(true).unwrap();
        let name = ServerName::try_from(sni.to_string()).unwrap();
        let mut conn = ClientConnection::new(cfg.clone(), name).map_err(|e| e.to_string())?;
        if !prefix.is_empty() {
            let mut first = prefix.to_vec();
            while conn.wants_write() {
                conn.write_tls(&mut first).map_err(|e| e.to_string())?;
            }
            tcp.write_all(&first).map_err(|e| e.to_string())?;
        }
        let mut s = StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn
                .complete_io(&mut s.sock)
                .map_err(|e| format!("handshake: {e}"))?;
        }
        Ok(TlsClient { s, buf: Vec::new() })
    }

    pub fn resumed(&self) -> bool {
        self.s.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// The leaf certificate the server presented.
    pub fn server_cert(&self) -> CertificateDer<'static> {
        self.s.conn.peer_certificates().unwrap()[0].clone()
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
        self.s.flush().unwrap();
    }

    /// One response (to a non-HEAD request): (status line + headers text, body).
    pub fn response(&mut self) -> crate::raw::Response {
        loop {
            match crate::raw::parse_response(&self.buf, false) {
                crate::raw::Parse::Complete(r, used) => {
                    self.buf.drain(..used);
                    return r;
                }
                crate::raw::Parse::Invalid(e) => panic!("bad response: {e}"),
                crate::raw::Parse::Incomplete(_) => {}
            }
            let mut tmp = [0u8; 16384];
            let n = self.s.read(&mut tmp).expect("read a response");
            assert!(n > 0, "closed before a whole response: {:?}", self.buf);
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }

    pub fn get(&mut self, path: &str) -> crate::raw::Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        self.response()
    }

    /// Bytes already read past the last response.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Read until the server ends the stream: `true` for a close_notify or EOF (a reset or
    /// a 10 s silence fails the test).
    pub fn read_to_end(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        loop {
            let mut tmp = [0u8; 16384];
            match self.s.read(&mut tmp) {
                Ok(0) => return out,
                Ok(n) => out.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return out,
                Err(e) => panic!("read to the end: {e}"),
            }
        }
    }
}

/// A copy of `proxy.example.toml` in a fresh folder with the certificate files it names
/// (`tls/ca.pem`, `tls/example.crt`/`.key`, `tls/api.crt`/`.key`): its path, which takes
/// the folder with it when dropped.
pub fn example_with_certs(example: &Path) -> crate::TempFile {
    let copy = crate::TempFile::new("example", "proxy.example.toml");
    let dir = copy.parent().expect("a folder");
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls).unwrap();
    let ca = Ca::new();
    std::fs::write(tls.join("ca.pem"), ca.pem()).unwrap();
    ca.leaf_files(&tls, "example", &["example.com"]);
    ca.leaf_files(&tls, "api", &["api.example.com", "*.api.example.com"]);
    std::fs::copy(example, &copy).unwrap();
    copy
}
