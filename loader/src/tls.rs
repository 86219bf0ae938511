//! HTTPS connections: a connection's stream (plain or TLS), and the TLS handshake with the
//! kind it was (full or resumed).
//!
//! Each worker makes its own rustls config from the run's [`ClientTls`] ([`WorkerTls::new`]),
//! so its connections share one session store (a `--close` run resumes the sessions of the
//! worker's earlier connections) and no lock is shared between workers.
//!
//! Full or resumed, per connection and exactly: the config's verifier counts the certificates
//! it verifies, and a resumed handshake verifies none. The counter is the worker's, but the
//! verifier runs synchronously inside a poll of the connection whose handshake it is (the
//! worker is one thread), so the count's change across *this* handshake future's polls is
//! this connection's, whatever other connections do between them ([`Attributed`]).
//!
//! The handshake runs inside the connection's attempt, under its `--timeout`, after the TCP
//! connect: a server that accepts and never answers the ClientHello is a connect timeout.

use monoio::buf::{IoBuf, IoBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use monoio::BufResult;
use monoio_rustls::{ClientTlsStream, TlsConnector, TlsError};
use rustls::pki_types::ServerName;
use shared::tls::{ClientTls, ClientTlsError, HandshakeCounter};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A connection's byte stream.
pub enum Stream {
    Plain(TcpStream),
    /// Boxed: a rustls connection is a few KiB, a plain slot should not carry that.
    Tls(Box<ClientTlsStream<TcpStream>>),
}

impl Stream {
    /// One read (plaintext, for TLS).
    #[inline]
    pub async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            Stream::Plain(s) => s.read(buf).await,
            Stream::Tls(s) => s.read(buf).await,
        }
    }

    /// Write all of `buf` (encrypted and flushed, for TLS).
    #[inline]
    pub async fn write_all<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            Stream::Plain(s) => s.write_all(buf).await,
            Stream::Tls(s) => s.write_all(buf).await,
        }
    }
}

/// How a handshake went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeKind {
    /// The server's certificate was sent and verified.
    Full,
    /// A session was resumed: no certificate.
    Resumed,
}

/// One worker's TLS client: its rustls config (own session store) and its verifier's count.
pub struct WorkerTls {
    connector: TlsConnector,
    counter: HandshakeCounter,
}

impl WorkerTls {
    pub fn new(tls: &ClientTls) -> Result<WorkerTls, ClientTlsError> {
        let (config, counter) = tls.config()?;
        Ok(WorkerTls {
            connector: TlsConnector::from(config),
            counter,
        })
    }

    /// The TLS handshake on a connected socket: SNI and the certificate's name from `name`,
    /// ALPN `http/1.1`. The error is the reason, for the first-failure line.
    pub async fn handshake(
        &self,
        tcp: TcpStream,
        name: ServerName<'static>,
    ) -> Result<(Stream, HandshakeKind), String> {
        let hs = Attributed {
            fut: std::pin::pin!(self.connector.connect(name, tcp)),
            counter: &self.counter,
            verified: 0,
        };
        let (res, verified) = hs.await;
        let stream = res.map_err(reason)?;
        let kind = if verified > 0 {
            HandshakeKind::Full
        } else {
            HandshakeKind::Resumed
        };
        Ok((Stream::Tls(Box::new(stream)), kind))
    }
}

/// monoio-rustls's error, down to the rustls or socket error that says why.
fn reason(e: TlsError) -> String {
    match e {
        TlsError::Rustls(e) => e.to_string(),
        TlsError::Io(e) => match e.get_ref() {
            Some(inner) => inner.to_string(),
            None => e.to_string(),
        },
    }
}

/// A handshake future and the certificates the worker's verifier verified while it was
/// being polled: this handshake's own (see the module notes).
struct Attributed<'a, F> {
    fut: Pin<&'a mut F>,
    counter: &'a HandshakeCounter,
    verified: u64,
}

impl<F: Future> Future for Attributed<'_, F> {
    type Output = (F::Output, u64);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let before = self.counter.verified();
        let polled = self.fut.as_mut().poll(cx);
        let during = self.counter.verified() - before;
        self.verified += during;
        polled.map(|out| (out, self.verified))
    }
}

/// The server name of an `https://` URL's host: a DNS name, or an IP address (no SNI is sent
/// for an address; the certificate must name the address).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string())
        .map_err(|_| format!("'{host}' is not a valid TLS server name"))
}
