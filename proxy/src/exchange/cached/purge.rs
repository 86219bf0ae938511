//! `PURGE`: a key removed here and on every other worker.

use super::fail_with;
use super::hit::send_simple;
use crate::cache::{CacheStatus, OwnedKey};
use crate::config::cache::CacheEntry;
use crate::conn::{linger_close, ClientConn, Next};
use crate::error::ProxyError;
use crate::request::RequestInfo;
use bytes::Buf;

/// `PURGE`: from `purge_from`, remove the key here and on every other worker.
/// A body sent with it is skipped when it arrived whole (so the connection stays usable);
/// one still on its way is never read: the answer closes the connection, as `return` does.
pub(super) async fn purge(
    c: &mut ClientConn,
    req: &RequestInfo,
    cfg: &CacheEntry,
    key: &OwnedKey,
) -> Next {
    let w = c.w.clone();
    let skip = crate::answer::body_skippable(req.body, c.from_client.len() - req.head_len);
    c.from_client.advance(req.head_len + skip.unwrap_or(0));
    if !cfg.may_purge(c.ip.ip()) {
        return fail_with(c, req, ProxyError::Forbidden, CacheStatus::Bypass).await;
    }
    let removed = crate::worker::invalidate_everywhere(&w, key);
    let status = if removed > 0 { 200 } else { 404 };
    let keep = req.keep_alive && skip.is_some() && (!w.life.draining() || req.pipelined);
    // A purge answers from no stored response: BYPASS.
    let next = send_simple(c, req, status, keep, CacheStatus::Bypass).await;
    if skip.is_none() && matches!(next, Next::Finished) {
        // The body still coming is not read: let the client see the answer first.
        linger_close(c);
        return Next::Close;
    }
    next
}
