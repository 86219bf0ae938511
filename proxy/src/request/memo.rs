//! The worker's last proxied request head and what its one parse made of it: the same bytes
//! from the same client under the same configuration make the same decision, so a
//! keep-alive client repeating its request (a load generator, a health probe, a poller)
//! gets it without a parse, a routing and an upstream head written field by field: the
//! kept upstream head is copied. Only what the head's bytes, the peer and the configuration
//! decide is kept; what changes per request is not: the access rules and rate limits run on
//! every request, and whether bytes of a next request came behind this one is decided from
//! the buffer each time.

use super::{ClientAddr, Dispatch, HeadFields, IpText, RequestInfo};
use crate::config::Config;
use bytes::BytesMut;
use std::cell::RefCell;
use std::net::IpAddr;
use std::sync::Arc;

/// Heads longer than this are parsed every time (and not copied into the memo): nearly every
/// client's repeated head is shorter (a browser's with its cookies is about 500 bytes to 1 KiB).
const MAX_KEPT: usize = 2048;

/// One decided request: the key (the configuration, the peer, the head's bytes) and what the
/// parse made of it.
struct Kept {
    /// Held, so that its address names this configuration alone while the memo keeps it.
    cfg: Arc<Config>,
    /// The peer's address and whether it spoke TLS (`X-Forwarded-Proto`, `X-Forwarded-For`).
    peer: (IpAddr, bool),
    head: Vec<u8>,
    /// The client the head's fields named (`real_ip_from`), if any.
    real: Option<IpText>,
    info: RequestInfo,
    upstream: Vec<u8>,
    /// A cached route's fields' positions (empty for the others).
    fields: HeadFields,
}

thread_local! {
    /// The worker's memo: one request, the last one kept.
    static MEMO: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

fn peer_key(ip: &ClientAddr) -> (IpAddr, bool) {
    (ip.peer().ip(), ip.scheme() == b"https")
}

/// The decision kept for the request at the start of `buf`, if its head is the kept head
/// (byte for byte, so the parse ends where it ended), from a peer at the kept address, under
/// `cfg`: `out` gets the upstream head, `fields` the fields' positions, `ip` the client the
/// head named. The caller still decides what is not kept (`pipelined`, the guards).
pub(super) fn recall(
    cfg: &Arc<Config>,
    buf: &[u8],
    ip: &mut ClientAddr,
    out: &mut BytesMut,
    fields: &mut HeadFields,
) -> Option<RequestInfo> {
    MEMO.with_borrow(|m| {
        let k = m.as_ref()?;
        let same = buf.get(..k.head.len()) == Some(&k.head[..])
            && k.peer == peer_key(ip)
            && Arc::ptr_eq(&k.cfg, cfg);
        if !same {
            return None;
        }
        ip.set_real(k.real.clone());
        out.clear();
        out.extend_from_slice(&k.upstream);
        if matches!(k.info.dispatch, Dispatch::Cached { .. }) {
            fields.copy_from(&k.fields);
        }
        Some(k.info)
    })
}

/// Keep the decision `info` for the head at the start of `buf` (parsed under `cfg` from
/// client `ip`), with the upstream head in `out` and the fields' positions in `fields`.
pub(super) fn keep(
    cfg: &Arc<Config>,
    buf: &[u8],
    ip: &ClientAddr,
    info: &RequestInfo,
    out: &[u8],
    fields: &HeadFields,
) {
    let Some(head) = buf.get(..info.head_len).filter(|h| h.len() <= MAX_KEPT) else {
        return;
    };
    MEMO.with_borrow_mut(|m| {
        let k = m.get_or_insert_with(|| Kept {
            cfg: cfg.clone(),
            peer: peer_key(ip),
            head: Vec::new(),
            real: None,
            info: *info,
            upstream: Vec::new(),
            fields: HeadFields::default(),
        });
        if !Arc::ptr_eq(&k.cfg, cfg) {
            k.cfg = cfg.clone();
        }
        k.peer = peer_key(ip);
        k.head.clear();
        k.head.extend_from_slice(head);
        k.real = ip.real().cloned();
        k.info = *info;
        k.upstream.clear();
        k.upstream.extend_from_slice(out);
        if matches!(info.dispatch, Dispatch::Cached { .. }) {
            k.fields.copy_from(fields);
        }
    });
}
