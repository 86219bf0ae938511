//! A server's last response head, kept parsed, and the client head last written for it: what
//! `forward::prepare_response` takes instead of parsing and writing again when a server
//! repeats its head. Plain data, so that the generation that holds one per server needs
//! nothing of the forwarding code.

use bytes::BytesMut;
use shared::http::{HeadMemo, Version};

/// A server's last response head, kept parsed ([`HeadMemo`]), and the client's head last
/// written for it. A head taken from the memo and relayed to a request alike in what the
/// client head depends on ([`ClientKey`]) gets the same client head: it is copied, not
/// written field by field (the fields' hop-by-hop checks, Connection names, edits and
/// encoding cost more than a head taken from the memo).
#[derive(Debug, Default)]
pub struct ResponseMemo {
    pub(crate) head: HeadMemo,
    client_key: Option<ClientKey>,
    client: Vec<u8>,
}

/// What a client head is written from: the head (the memo's `kept_id`), the request's
/// version and whether it asked for a WebSocket (with the head, they decide the framing), and
/// the route's edits, by address (0: none; a generation's configuration, which holds them,
/// outlives its memos).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientKey {
    pub kept: u64,
    pub version: Version,
    pub websocket: bool,
    pub edits_at: usize,
}

impl ResponseMemo {
    /// Append to `out` the client head kept for `key`, or have `write` append it and keep
    /// what it wrote (`out` holds nothing else: the caller sees to it).
    pub(crate) fn client_head(
        &mut self,
        key: ClientKey,
        out: &mut BytesMut,
        write: impl FnOnce(&mut BytesMut),
    ) {
        if self.client_key == Some(key) {
            out.extend_from_slice(&self.client);
            return;
        }
        write(out);
        self.client.clear();
        self.client.extend_from_slice(out);
        self.client_key = Some(key);
    }
}
