//! Reaching a server: the connection (TCP, a PROXY protocol header first where the group
//! sends one, then TLS for a TLS group) within the connect timeout, counted against it.

use crate::config::{GroupId, Server, ServerId};
use crate::conn::ClientConn;
use crate::error::ProxyError;
use crate::pool::Upstream;
use crate::worker::ProxyWorker;
use rustls::pki_types::ServerName;
use shared::stream::Stream;
use std::sync::Arc;
use std::time::Duration;

/// How to reach one server: its config, and for a TLS group this worker's client config and
/// the name to send and verify.
pub(super) struct Dest<'a> {
    pub server: &'a Server,
    pub tls: Option<(&'a Arc<rustls::ClientConfig>, &'a ServerName<'static>)>,
    /// A PROXY protocol header to send first (`[upstream.NAME] proxy_protocol`), before TLS.
    pub proxy_header: Option<Vec<u8>>,
}

/// Connect (and for TLS, handshake) within `limit`; a failure is told on stderr, naming
/// the server and its `group`.
async fn connect(
    w: &ProxyWorker,
    (group, to): (&str, Dest<'_>),
    limit: Duration,
) -> Result<Upstream, ProxyError> {
    let server = to.server;
    w.stats.upstream_connects.incr();
    let r = monoio::time::timeout(limit, async {
        let mut tcp = shared::net::connect_any(&server.addrs, None).await?;
        if let Some(header) = to.proxy_header {
            use monoio::io::AsyncWriteRentExt;
            tcp.write_all(header).await.0?;
        }
        let Some((cfg, name)) = to.tls else {
            return Ok(Stream::Plain(tcp));
        };
        // The handshake in an allocation of its own: its state (a rustls connection, 1.8 KB)
        // would otherwise be part of every client connection's task, TLS upstream or not.
        let t = Box::pin(shared::stream::connect(tcp, cfg.clone(), name.clone())).await;
        t.map(|t| Stream::Tls(Box::new(t))).map_err(|e| {
            // A handshake that failed is the server's fault (or its certificate's): never a
            // shortage of descriptors.
            std::io::Error::new(std::io::ErrorKind::ConnectionAborted, format!("tls: {e}"))
        })
    });
    match r.await {
        Ok(Ok(stream)) => Ok(Upstream {
            stream,
            requests: 0,
            reused: false,
            splices: false,
            nonblocking: false,
        }),
        Ok(Err(e)) => {
            let error = connect_error(&e);
            let at = (group, server.name.as_str());
            w.obs
                .upstream_error(at, error, format_args!("connect: {e}"));
            Err(error)
        }
        Err(_) => {
            let at = (group, server.name.as_str());
            let error = ProxyError::ConnectTimeout;
            w.obs
                .upstream_error(at, error, format_args!("connect timed out"));
            Err(error)
        }
    }
}

/// What a failed connect means: the server refused (or is unreachable), or the proxy itself
/// has no descriptor or buffer to spare (then no other server would do better either).
fn connect_error(e: &std::io::Error) -> ProxyError {
    if shared::net::is_resource_exhaustion(e) {
        ProxyError::NoResources
    } else {
        ProxyError::UpstreamRefused
    }
}

/// The PROXY protocol header of an upstream connection made for client connection `c`'s
/// request: the request's client (`ClientAddr`: a PROXY header's source, or a trusted
/// peer's X-Forwarded-For, whose port is not known: 0) and the address it reached the proxy
/// at (getsockname, once per such connection).
pub(super) fn send_proxy_header(
    c: &ClientConn,
    v: crate::config::send_proxy::SendProxy,
) -> Vec<u8> {
    let client = c.ip.client().addr();
    let unspecified = match client {
        std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    };
    let local = c.stream.tcp().local_addr();
    let local = local.unwrap_or_else(|_| std::net::SocketAddr::new(unspecified, 0));
    v.header(client, local)
}

/// `connect`, counted against server `s` of group `g`.
pub(super) async fn counted_connect(
    w: &ProxyWorker,
    gen: &crate::generation::Generation,
    to: Dest<'_>,
    limit: Duration,
    server: (GroupId, ServerId),
) -> Result<Upstream, ProxyError> {
    w.count_server(gen, server, |m| m.connects += 1);
    let group = gen.cfg.groups.get(server.0).map_or("", |g| g.name.as_str());
    connect(w, (group, to), limit).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_is_not_the_servers_fault() {
        let err = |code| connect_error(&std::io::Error::from_raw_os_error(code));
        assert_eq!(err(libc::EMFILE), ProxyError::NoResources);
        assert_eq!(err(libc::ENFILE), ProxyError::NoResources);
        assert_eq!(err(libc::ENOBUFS), ProxyError::NoResources);
        assert_eq!(err(libc::ECONNREFUSED), ProxyError::UpstreamRefused);
        assert_eq!(err(libc::ENETUNREACH), ProxyError::UpstreamRefused);
    }
}
