//! The worker's last proxied request head and what its one parse made of it: the same bytes
//! under the same configuration make the same decision, so a client repeating its request
//! (a load generator, a health probe, a poller, every client of an API that sends the same
//! head) gets it without a parse, a routing and an upstream head written field by field: the
//! kept upstream head is copied, with this request's peer address written where the kept one
//! stood. Only what the head's bytes, the peer and the configuration decide is kept; what
//! changes per request is not: the access rules and rate limits run on every request, and
//! whether bytes of a next request came behind this one is decided from the buffer each time.

use super::{AddrSpots, ClientAddr, Dispatch, HeadFields, IpText, RequestInfo};
use crate::config::hash_key::HashKey;
use crate::config::{Balance, Config};
use bytes::BytesMut;
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// Heads longer than this are parsed every time (and not copied into the memo): nearly every
/// client's repeated head is shorter (a browser's with its cookies is about 500 bytes to 1 KiB).
const MAX_KEPT: usize = 2048;

/// One decided request: the key (the configuration, the peer's scheme and, where it decides
/// more than the forwarding fields' text, its address; the head's bytes) and what the parse
/// made of it.
struct Kept {
    /// Weak: a reload's old configuration (its TLS keys among the rest) goes with its
    /// generation, not with the memo; the allocation stays while this is held, so its address
    /// names that configuration alone.
    cfg: Weak<Config>,
    /// The peer spoke TLS (`X-Forwarded-Proto`).
    https: bool,
    /// The peer's address, and whether the decision holds for that peer alone: where it is
    /// trusted to name the client (`real_ip_from`), or hashed to pick the server. Otherwise
    /// the address is only the forwarding fields' text, at `spots` in `upstream`.
    peer: IpText,
    by_peer: bool,
    head: Vec<u8>,
    /// The client the head's fields named (`real_ip_from`), if any.
    real: Option<IpText>,
    info: RequestInfo,
    upstream: Vec<u8>,
    spots: AddrSpots,
    /// A cached route's fields' positions (empty for the others).
    fields: HeadFields,
}

thread_local! {
    /// The worker's memo: one request, the last one kept.
    static MEMO: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

fn https(ip: &ClientAddr) -> bool {
    ip.scheme() == b"https"
}

/// The decision kept for the request at the start of `buf`, if its head is the kept head
/// (byte for byte, so the parse ends where it ended), from a peer alike in what the decision
/// depends on, under `cfg`: `out` gets the upstream head, `fields` the fields' positions, `ip`
/// the client the head named. The caller still decides what is not kept (`pipelined`, the
/// guards).
pub(super) fn recall(
    cfg: &Arc<Config>,
    buf: &[u8],
    ip: &mut ClientAddr,
    out: &mut BytesMut,
    fields: &mut HeadFields,
) -> Option<RequestInfo> {
    MEMO.with_borrow(|m| {
        let k = m.as_ref()?;
        let same_peer = k.peer.ip() == ip.peer().ip();
        let same = buf.get(..k.head.len()) == Some(&k.head[..])
            && k.https == https(ip)
            && (same_peer || !k.by_peer)
            && std::ptr::eq(k.cfg.as_ptr(), Arc::as_ptr(cfg));
        if !same {
            return None;
        }
        ip.set_real(k.real.clone());
        out.clear();
        if same_peer {
            out.extend_from_slice(&k.upstream);
        } else {
            // Not by peer: no field names a client, so each address written is the peer's.
            let mut from = 0;
            for at in k.spots.iter() {
                out.extend_from_slice(&k.upstream[from..at]);
                out.extend_from_slice(ip.peer().as_bytes());
                from = at + k.peer.as_bytes().len();
            }
            out.extend_from_slice(&k.upstream[from..]);
        }
        if matches!(k.info.dispatch, Dispatch::Cached { .. }) {
            fields.copy_from(&k.fields);
        }
        Some(k.info)
    })
}

/// Whether the decision for a request holds for its peer alone: a peer may be trusted to
/// name the client (`real_ip_from`), or its address picks the server (a hash of it).
/// Otherwise the peer's address is only the forwarding fields' text.
fn by_peer(cfg: &Config, info: &RequestInfo) -> bool {
    let group = match info.dispatch {
        Dispatch::Proxy { group } | Dispatch::Cached { group, .. } => Some(group),
        _ => None,
    };
    let hashed = group.is_some_and(|g| {
        let g = &cfg.groups[g];
        g.balance == Balance::Hash && g.hash_key == HashKey::RemoteAddr
    });
    hashed || !cfg.headers.real_ip_from.is_empty()
}

/// Keep the decision `info` for the head at the start of `buf` (parsed under `cfg` from
/// client `ip`), with the upstream head in `out` (the client's addresses at `spots`) and the
/// fields' positions in `fields`.
pub(super) fn keep(
    cfg: &Arc<Config>,
    buf: &[u8],
    ip: &ClientAddr,
    info: &RequestInfo,
    (out, spots): (&[u8], AddrSpots),
    fields: &HeadFields,
) {
    let Some(head) = buf.get(..info.head_len).filter(|h| h.len() <= MAX_KEPT) else {
        return;
    };
    MEMO.with_borrow_mut(|m| {
        // The last entry's storage is reused, and its configuration's weak count left alone
        // while it is the same (the count is shared with the other workers).
        let (weak, mut kept_head, mut upstream, mut kept_fields) = match m.take() {
            Some(k) if std::ptr::eq(k.cfg.as_ptr(), Arc::as_ptr(cfg)) => {
                (k.cfg, k.head, k.upstream, k.fields)
            }
            Some(k) => (Arc::downgrade(cfg), k.head, k.upstream, k.fields),
            None => (
                Arc::downgrade(cfg),
                Vec::new(),
                Vec::new(),
                HeadFields::default(),
            ),
        };
        kept_head.clear();
        kept_head.extend_from_slice(head);
        upstream.clear();
        upstream.extend_from_slice(out);
        if matches!(info.dispatch, Dispatch::Cached { .. }) {
            kept_fields.copy_from(fields);
        }
        *m = Some(Kept {
            cfg: weak,
            by_peer: by_peer(cfg, info),
            https: https(ip),
            peer: ip.peer().clone(),
            head: kept_head,
            real: ip.real().cloned(),
            info: *info,
            upstream,
            spots,
            fields: kept_fields,
        });
    });
}
