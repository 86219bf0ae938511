//! Answers stored for other requests and sent to nobody: a cache fetch whose client left
//! while other requests wait on its fill (the client's request is a 499; the fill goes on for
//! the others, as nginx's `proxy_cache_lock` waiters are served).

use super::super::outcome::Answered;
use super::super::relay_response;
use super::fetch::{apply_304, consume_head, fill_head, finish_fill, Fetch, Response};
use crate::cache::{Handle, Store};
use crate::config::GroupId;
use crate::conn::{ClientConn, Next};
use crate::error::ProxyError;
use crate::relay::FillSink;
use crate::request::RequestInfo;
use std::cell::RefCell;

/// The client left while its fetch awaited the answer, and other requests wait on the fill:
/// the answer fills the entry for them (sent nowhere); the client's request is a 499.
pub(super) async fn for_the_others(
    c: &mut ClientConn,
    req: &RequestInfo,
    group: GroupId,
    answered: Result<Answered<'_>, Option<ProxyError>>,
    f: &Fetch<'_>,
) -> Next {
    c.rec.failed(ProxyError::ClientGone);
    if let Some((store, h, _)) = f.fill {
        match answered {
            Ok(a) => store_unsent(c, req, group, a, f, (store, h)).await,
            Err(_) => {
                consume_head(c, req, true);
                store.borrow_mut().abandon(h);
            }
        }
    }
    Next::Close
}

/// Store the answer `a` to `req` (whose head is still at the front of `from_client`, and is
/// consumed here) in entry `fill` of `store` without sending any of it to the client: a
/// revalidation after an answer from the store, or a fill other requests wait on after its
/// own client left. A 304 to a validation refreshes the stored entry; another storable answer
/// replaces it (read whole from the upstream); the rest leave it as it was.
pub(super) async fn store_unsent(
    c: &mut ClientConn,
    req: &RequestInfo,
    group: GroupId,
    a: Answered<'_>,
    f: &Fetch<'_>,
    (store, fill): (&RefCell<Store>, Handle),
) {
    let (w, g) = (c.w.clone(), c.g.clone());
    if f.validates.is_some() && a.head.resp.status == 304 {
        store.borrow_mut().abandon(fill);
        // A 304 whose ETag selects nothing leaves the entry as it was.
        let _ = apply_304(c, group, a, f, req.head_len);
        consume_head(c, req, true);
        return;
    }
    let resp = Response {
        info: &a.head.resp,
        ub: &a.head.ub,
    };
    let kept = c.fields.with(&c.from_client[..req.head_len], |_, request| {
        fill_head(request, &resp, &c.response_fields, &w, &g, f)
    });
    consume_head(c, req, true);
    // A full answer that is not stored supersedes the stale entry all the same (RFC 9111
    // 4.3.3), unless it is an error (RFC 5861 4 lets the stale one stand).
    if let (false, Some(stale)) = (kept, f.stale) {
        if !matches!(a.head.resp.status, 500 | 502 | 503 | 504) {
            store.borrow_mut().abandon(stale);
        }
    }
    let sink = FillSink {
        store,
        handle: kept.then_some(fill),
        head_only: true,
        silent: true,
    };
    // Nothing of it goes to the client: its HEAD or not, no error answer either (`silent`).
    let (_, filled) = relay_response(c, a, group, Some(sink)).await;
    finish_fill(store, fill, filled, &w, &g);
}
