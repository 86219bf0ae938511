//! The client's address per request, the one every part of the request model reads
//! (`ClientAddr`: the peer, a PROXY header's source, or a trusted peer's `real_ip_header`),
//! with its text (`crate::ip_text::IpText`, formatted once per connection).

use super::real_ip;
use crate::config::HeaderOptions;
use crate::ip_text::IpText;
use std::net::IpAddr;

/// The client's address for the request being served: the connection's (its peer, or a PROXY
/// protocol header's source) unless a peer in `real_ip_from` named another (`real_ip`), for
/// this request alone. Everything that shows or judges the client reads it here (the forwarded
/// fields, `{remote_addr}`, the access log, `purge_from`); `X-Forwarded-For` appends the peer,
/// the hop the request came from.
pub struct ClientAddr {
    peer: IpText,
    real: Option<IpText>,
}

impl ClientAddr {
    pub fn new(peer: IpText) -> Self {
        ClientAddr { peer, real: None }
    }

    /// The connection's address, for its next request.
    pub fn into_peer(self) -> IpText {
        self.peer
    }

    /// The client's address for this request.
    pub fn client(&self) -> &IpText {
        self.real.as_ref().unwrap_or(&self.peer)
    }

    /// The connection's address (the hop the request came from).
    pub fn peer(&self) -> &IpText {
        &self.peer
    }

    /// The client's address (an IPv4-mapped IPv6 address as IPv4).
    pub fn ip(&self) -> IpAddr {
        self.client().ip()
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.client().as_bytes()
    }

    pub fn scheme(&self) -> &'static [u8] {
        self.peer.scheme()
    }

    /// The client a trusted peer's field named for this request, if any.
    pub(super) fn real(&self) -> Option<&IpText> {
        self.real.as_ref()
    }

    /// This request's client as a head alike in every byte named it (`super::memo`).
    pub(super) fn set_real(&mut self, real: Option<IpText>) {
        self.real = real;
    }

    /// A new request: the peer is the client until its head says otherwise.
    pub fn forget_real(&mut self) {
        self.real = None;
    }

    /// Decide this request's client from its fields (`real_ip::derive`).
    #[inline]
    pub(super) fn derive(&mut self, opts: &HeaderOptions, fields: &[httparse::Header<'_>]) {
        // Without `real_ip_from` the client is the peer: nothing to look at, per request.
        if opts.real_ip_from.is_empty() {
            return;
        }
        let peer = self.peer.ip();
        let name = &opts.real_ip_header;
        self.real = real_ip::derive(peer, &opts.real_ip_from, name, fields).map(|ip| {
            let mut t = IpText::new(ip);
            t.set_https(self.peer.https());
            t
        });
    }
}
