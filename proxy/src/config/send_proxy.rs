//! `[upstream.NAME] proxy_protocol = "v1" | "v2"`: each new connection to the group's servers
//! starts with a PROXY protocol header naming the client (HAProxy's `send-proxy` and
//! `send-proxy-v2`). Such a connection carries one client's requests: it is never pooled.

use serde::Deserialize;
use std::net::SocketAddr;

/// Which PROXY protocol header the group's connections start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SendProxy {
    V1,
    V2,
}

impl SendProxy {
    /// The header of a connection made for a client at `client` that reached the proxy at
    /// `local`.
    pub fn header(self, client: SocketAddr, local: SocketAddr) -> Vec<u8> {
        let mut out = Vec::with_capacity(shared::proxy_protocol::MAX_V1_LEN);
        match self {
            SendProxy::V1 => shared::proxy_protocol::write_v1(&mut out, client, local),
            SendProxy::V2 => shared::proxy_protocol::write_v2(&mut out, client, local),
        }
        out
    }

    /// The header of the proxy's own connections (health checks): v1 `UNKNOWN`, v2 `LOCAL`,
    /// as HAProxy's checks send, so the server accepts them and keeps their own address.
    pub fn own_header(self) -> &'static [u8] {
        match self {
            SendProxy::V1 => shared::proxy_protocol::V1_UNKNOWN,
            SendProxy::V2 => &shared::proxy_protocol::V2_LOCAL,
        }
    }
}
