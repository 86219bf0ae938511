//! Why an exchange failed, whose fault it was, and what the client is told.
//!
//! Errors are small `Copy` values: they are created on the request path and must not allocate.
//! The status is only sent when no byte of the response has reached the client yet; after that
//! the only honest signal is closing the connection (a truncated body never looks complete).

use shared::http::CodecError;

/// Whose fault a failure was (decides 4xx vs 5xx, and whether a server is marked failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Client,
    Upstream,
    Internal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    #[error("bad request: {0}")]
    Request(CodecError),
    #[error("client sent the request head too slowly")]
    HeaderTimeout,
    #[error("client sent the request body too slowly")]
    BodyTimeout,
    #[error("client went away")]
    ClientGone,
    #[error("request body larger than the limit")]
    BodyTooLarge,
    #[error("no route for this host and path")]
    NoRoute,
    #[error("method not supported by this proxy")]
    MethodNotSupported,
    /// `PURGE` from an address outside the route's `purge_from`.
    #[error("not allowed from this address")]
    Forbidden,
    #[error("every upstream server refused the connection")]
    UpstreamRefused,
    /// Every server of the group is down by active health checks (nginx: "no live
    /// upstreams", 502).
    #[error("no live upstream server (every one is down by health checks)")]
    NoLiveUpstream,
    #[error("connecting to the upstream timed out")]
    ConnectTimeout,
    #[error("upstream did not answer in time")]
    UpstreamTimeout,
    #[error("upstream closed the connection")]
    UpstreamClosed,
    #[error("upstream I/O error")]
    UpstreamIo,
    #[error("invalid upstream response: {0}")]
    BadResponse(CodecError),
    /// No socket for the upstream connection (EMFILE, ENOBUFS...): the proxy's own
    /// shortage, not the server's, so no server is marked failed for it (nginx answers 500).
    #[error("out of sockets or memory for an upstream connection")]
    NoResources,
    /// Every server the request could go to stayed at its `max_conns` for the whole wait
    /// (HAProxy answers 503 when its `timeout queue` expires).
    #[error("every upstream server stayed at max_conns until the queue timeout")]
    QueueTimeout,
}

impl ProxyError {
    pub fn fault(self) -> Fault {
        use ProxyError::*;
        match self {
            Request(_) | HeaderTimeout | BodyTimeout | ClientGone | BodyTooLarge | NoRoute
            | MethodNotSupported | Forbidden => Fault::Client,
            UpstreamRefused | NoLiveUpstream | ConnectTimeout | UpstreamTimeout
            | UpstreamClosed | UpstreamIo | BadResponse(_) | QueueTimeout => Fault::Upstream,
            NoResources => Fault::Internal,
        }
    }

    /// The status to answer with, if an answer still makes sense.
    pub fn status(self) -> Option<u16> {
        use ProxyError::*;
        Some(match self {
            Request(e) => e.status(),
            HeaderTimeout | BodyTimeout => 408,
            ClientGone => return None,
            BodyTooLarge => 413,
            NoRoute => 404,
            MethodNotSupported => 501,
            Forbidden => 403,
            UpstreamRefused | NoLiveUpstream | UpstreamClosed | UpstreamIo | BadResponse(_) => 502,
            ConnectTimeout | UpstreamTimeout => 504,
            NoResources | QueueTimeout => 503,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_faults() {
        use ProxyError::*;
        for (e, status, fault) in [
            (HeaderTimeout, Some(408), Fault::Client),
            (BodyTooLarge, Some(413), Fault::Client),
            (NoRoute, Some(404), Fault::Client),
            (MethodNotSupported, Some(501), Fault::Client),
            (ClientGone, None, Fault::Client),
            (UpstreamRefused, Some(502), Fault::Upstream),
            (NoLiveUpstream, Some(502), Fault::Upstream),
            (ConnectTimeout, Some(504), Fault::Upstream),
            (UpstreamTimeout, Some(504), Fault::Upstream),
            (NoResources, Some(503), Fault::Internal),
            (QueueTimeout, Some(503), Fault::Upstream),
        ] {
            assert_eq!((e.status(), e.fault()), (status, fault), "{e:?}");
        }
    }
}
