//! One check: a new connection to the server (TLS for a TLS group, as its requests use),
//! `GET <path>` with `Connection: close`, and the response head, all within the check's
//! timeout. The body is not read: the status decides,
//! and the connection is closed right after the head.

use crate::config::health::HealthCheck;
use crate::config::Server;
use crate::error::ProxyError;
use crate::io::{read_some, IoFail};
use bytes::BytesMut;
use monoio::io::AsyncWriteRentExt;
use rustls::pki_types::ServerName;
use shared::http::{parse_final_response, CodecError, Limits, RequestMethod, Status};
use shared::stream::Stream;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Bytes read at a time while waiting for the head.
const READ_CHUNK: usize = 4096;

/// Why a check failed; `Display` is the reason in the log line.
#[derive(Debug)]
pub enum ProbeFail {
    Connect(std::io::Error),
    /// Nothing (or not the whole head) within the timeout.
    Timeout(Duration),
    Io(std::io::Error),
    /// The TLS handshake failed (certificate, protocol, or a plain-HTTP server).
    Tls(std::io::Error),
    /// The server closed before the response head was complete.
    Closed,
    Invalid(CodecError),
    /// A well-formed answer with a status the check does not accept.
    Status(u16),
}

impl fmt::Display for ProbeFail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeFail::Connect(e) => write!(f, "connect: {e}"),
            ProbeFail::Timeout(d) => write!(
                f,
                "no response within {}",
                shared::units::format_duration(*d)
            ),
            ProbeFail::Io(e) => write!(f, "I/O error: {e}"),
            ProbeFail::Tls(e) => write!(f, "tls: {e}"),
            ProbeFail::Closed => f.write_str("closed before answering"),
            ProbeFail::Invalid(e) => write!(f, "invalid response: {e}"),
            ProbeFail::Status(s) => write!(f, "status {s}"),
        }
    }
}

/// What a check came to.
#[derive(Debug)]
pub enum Probe {
    Passed(u16),
    Failed(ProbeFail),
    /// The proxy had no socket or memory for the check (EMFILE, ENOBUFS...): its own
    /// shortage says nothing about the server, so it counts neither way.
    NoVerdict,
}

/// The check's request for `server`, written once: `Host` is the check's `host`, or the
/// server's name as written in `servers`.
pub fn request(check: &HealthCheck, server: &Server) -> Vec<u8> {
    let host = check.host.as_deref().unwrap_or(&server.host);
    format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: proxy-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        check.path
    )
    .into_bytes()
}

/// For a TLS group: this worker's client config and the name to send and verify.
pub type TlsTo = Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>;

/// Run one check against `addrs` (tried in order, as a request's connect does), over TLS
/// when the group's servers speak it (the handshake counts within the timeout). The answer's
/// head is read within `limits` (`[limits]`), as a request's answer is.
pub async fn probe(
    addrs: &[SocketAddr],
    (tls, limits): (&TlsTo, &Limits),
    request: &[u8],
    check: &HealthCheck,
    proxy_header: &[u8],
) -> Probe {
    let exchange = exchange(addrs, (tls, limits), proxy_header, request);
    let status = match monoio::time::timeout(check.timeout, exchange).await {
        Err(_) => return Probe::Failed(ProbeFail::Timeout(check.timeout)),
        Ok(Err(ProbeFail::Connect(e))) if shared::net::is_resource_exhaustion(&e) => {
            return Probe::NoVerdict
        }
        Ok(Err(f)) => return Probe::Failed(f),
        Ok(Ok(status)) => status,
    };
    if check.expect.passes(status) {
        Probe::Passed(status)
    } else {
        Probe::Failed(ProbeFail::Status(status))
    }
}

/// Connect, send (after `proxy_header`, the group's own PROXY protocol header, if any, before
/// TLS), read up to the end of the response head: its status.
async fn exchange(
    addrs: &[SocketAddr],
    (tls, limits): (&TlsTo, &Limits),
    proxy_header: &[u8],
    request: &[u8],
) -> Result<u16, ProbeFail> {
    let mut tcp = shared::net::connect_any(addrs, None)
        .await
        .map_err(ProbeFail::Connect)?;
    if !proxy_header.is_empty() {
        use monoio::io::AsyncWriteRentExt;
        tcp.write_all(proxy_header.to_vec())
            .await
            .0
            .map_err(ProbeFail::Io)?;
    }
    let mut stream = match tls {
        None => Stream::Plain(tcp),
        Some((cfg, name)) => shared::stream::connect(tcp, cfg.clone(), name.clone())
            .await
            .map(|t| Stream::Tls(Box::new(t)))
            .map_err(ProbeFail::Tls)?,
    };
    let (res, _) = stream.write_all(request.to_vec()).await;
    res.map_err(ProbeFail::Io)?;
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        if let Some(status) = head_status(&buf, limits)? {
            return Ok(status);
        }
        if buf.len() >= limits.max_head {
            return Err(ProbeFail::Invalid(CodecError::HeadTooLarge));
        }
        match read_some(&mut stream, buf, READ_CHUNK).await {
            // A TLS server's close without close_notify is a close before answering too.
            Ok((0, _)) | Err(IoFail::Error(std::io::ErrorKind::UnexpectedEof)) => {
                return Err(ProbeFail::Closed)
            }
            Ok((_, b)) => buf = b,
            Err(IoFail::Error(kind)) => return Err(ProbeFail::Io(kind.into())),
            // `read_some` has no deadline of its own (the check's timeout bounds it).
            Err(IoFail::Timeout) => return Err(ProbeFail::Io(std::io::ErrorKind::TimedOut.into())),
        }
    }
}

/// The final status once the head in `buf` is complete (interim 1xx heads skipped), with as
/// many fields as `limits.max_headers` allows (room for them sized as a request's answer's).
fn head_status(buf: &[u8], limits: &Limits) -> Result<Option<u16>, ProbeFail> {
    let parsed = crate::request::with_headers(limits.max_headers, |headers| {
        match parse_final_response(buf, headers, RequestMethod::Other, limits) {
            Ok(Status::Complete(head)) => Ok(Some(head.status)),
            Ok(Status::Partial) => Ok(None),
            Err(e) => Err(ProxyError::BadResponse(e)),
        }
    });
    parsed.map_err(|e| match e {
        ProxyError::BadResponse(e) => ProbeFail::Invalid(e),
        // Not reached: the parse fails with nothing else.
        other => ProbeFail::Io(std::io::Error::other(other.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_status_skips_interim_and_waits_for_the_end() {
        let l = Limits::default();
        let full = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n";
        for cut in 0..full.len() {
            assert_eq!(head_status(&full[..cut], &l).unwrap(), None, "{cut}");
        }
        assert_eq!(head_status(full, &l).unwrap(), Some(503));
        assert!(matches!(
            head_status(b"SMTP ready\r\n\r\n", &l),
            Err(ProbeFail::Invalid(_))
        ));
    }

    /// Up to `max_headers` fields, as a request's answer: 80 under the default 100, 150 under
    /// 200; one more is invalid.
    #[test]
    fn head_status_takes_as_many_fields_as_max_headers() {
        let head = |n: usize| {
            let fields: String = (0..n).map(|i| format!("X-H{i}: v\r\n")).collect();
            format!("HTTP/1.1 200 OK\r\n{fields}Content-Length: 0\r\n\r\n")
        };
        let l = Limits::default();
        assert_eq!(head_status(head(80).as_bytes(), &l).unwrap(), Some(200));
        let l = Limits {
            max_headers: 200,
            ..Limits::default()
        };
        assert_eq!(head_status(head(150).as_bytes(), &l).unwrap(), Some(200));
        assert!(matches!(
            head_status(head(200).as_bytes(), &l),
            Err(ProbeFail::Invalid(CodecError::TooManyHeaders))
        ));
    }

    #[test]
    fn request_names_the_host() {
        let server = Server {
            name: "app.internal:8080".into(),
            host: "app.internal:8080".into(),
            addrs: vec![([127, 0, 0, 1], 8080).into()],
            weight: 1,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            max_conns: 0,
        };
        let mut check = HealthCheck {
            path: "/healthz?full=1".into(),
            ..HealthCheck::default()
        };
        let r = String::from_utf8(request(&check, &server)).unwrap();
        assert!(
            r.starts_with("GET /healthz?full=1 HTTP/1.1\r\nHost: app.internal:8080\r\n"),
            "{r}"
        );
        assert!(r.ends_with("Connection: close\r\n\r\n"));
        check.host = Some("health.example".into());
        let r = String::from_utf8(request(&check, &server)).unwrap();
        assert!(r.contains("\r\nHost: health.example\r\n"), "{r}");
    }
}
