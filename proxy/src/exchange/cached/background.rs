//! The one revalidation of a stale entry served within its `stale-while-revalidate` (RFC 5861
//! 3): run on the connection whose request started it, after that request was answered from
//! the store, so the client already has its response; it gets nothing of the revalidation
//! (a pipelined next request of its own waits for it, as any request on one HTTP/1.1
//! connection waits for the one before). A 304 refreshes the entry, another storable answer
//! replaces it (read whole from the upstream, sent nowhere), and a failure leaves it as it
//! was: the next request within the window starts another.

use super::super::client_watch::Watch;
use super::super::outcome::Answered;
use super::super::{relay_response, upstream_answer, Serving};
use super::fetch::{
    apply_304, consume_head, fill_head, filling_request, finish_fill, Fetch, Response,
};
use crate::cache::{validate, Handle, Store};
use crate::config::GroupId;
use crate::conn::{ClientConn, Next};
use crate::relay::FillSink;
use crate::request::RequestInfo;
use bytes::Buf;
use std::cell::RefCell;

/// [`revalidate`] in an allocation of its own, as a fetch is (`fetch::fetch_apart`).
pub(super) fn revalidate_apart<'a>(
    c: &'a mut ClientConn,
    req: &'a RequestInfo,
    group: GroupId,
    f: Fetch<'a>,
    then: Next,
) -> std::pin::Pin<Box<impl std::future::Future<Output = Next> + 'a>> {
    Box::pin(revalidate(c, req, group, f, then))
}

/// Revalidate the entry `f` fills (and validates, with a validator) now that the client was
/// answered; then go on as the answer said (`then`). The request head is still at the front
/// of `from_client`; it is consumed here.
async fn revalidate(
    c: &mut ClientConn,
    req: &RequestInfo,
    group: GroupId,
    f: Fetch<'_>,
    then: Next,
) -> Next {
    let Some((store, fill, _)) = f.fill else {
        c.from_client.advance(req.head_len);
        return then;
    };
    // The client is gone: nobody to revalidate for; a later request will.
    if matches!(then, Next::Close) {
        store.borrow_mut().abandon(fill);
        c.from_client.advance(req.head_len);
        return then;
    }
    let (w, g) = (c.w.clone(), c.g.clone());
    let fetch_req = filling_request(&mut c.to_upstream, req, true);
    if let Some((_, stored)) = &f.validates {
        validate::make_conditional(&mut c.to_upstream, validate::validators(&stored.head));
    }
    c.response_fields.want(true);
    // The record (and the access log line) is the client's answer's: what the revalidation
    // does upstream is not noted there. The head stays for storing to read (a GET or HEAD
    // that came without a body).
    let rec = c.rec;
    let how = Serving {
        interim: false,
        keep_head: true,
        watch: Watch::Off,
    };
    let answered = upstream_answer(c, &w, &g, &fetch_req, group, how).await;
    c.rec = rec;
    c.response_fields.want(false);
    let Ok(a) = answered else {
        consume_head(c, req, true);
        store.borrow_mut().abandon(fill);
        return then;
    };
    store_unsent(c, req, group, a, &f, (store, fill)).await;
    c.rec = rec;
    then
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
    let (_, filled) = relay_response(c, a, group, Some(sink)).await;
    finish_fill(store, fill, filled, &w, &g);
}
