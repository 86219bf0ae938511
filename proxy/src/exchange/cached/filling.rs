//! A request collapsed on a fill that declared its length: the entry streamed to the client
//! as its bytes arrive.

use super::hit::{write_bytes, Stored};
use super::{client_gone, next_after, wait_change};
use crate::cache::{Handle, Read, Store};
use crate::conn::{ClientConn, Next};
use crate::error::ProxyError;
use crate::request::RequestInfo;
use shared::http::RequestMethod;
use std::cell::RefCell;

/// A request reading an entry ([`Store::open_reader`]) for as long as this lives: taken out
/// of the store meanwhile (invalidated, evicted), the entry stays for it until it is done.
struct Reading<'s> {
    store: &'s RefCell<Store>,
    h: Handle,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        // Dropped with the request's future, never inside a borrow of the store (none is
        // held across an await).
        self.store.borrow_mut().close_reader(self.h);
    }
}

/// Stream an entry that is filling (its length declared) as its bytes arrive.
pub(super) async fn stream_entry(
    c: &mut ClientConn,
    req: &RequestInfo,
    store: &RefCell<Store>,
    h: Handle,
    out: Stored<'_>,
) -> Next {
    // Taken before the first await: the lookup that chose the entry ran in this same poll.
    let _reading = store
        .borrow_mut()
        .open_reader(h)
        .then_some(Reading { store, h });
    let w = c.w.clone();
    let len = out.len;
    let edits = c.g.cfg.routes[req.route].response_edits();
    let keep = out.write(&w, req, edits, &mut c.to_client);
    if c.send_cout().await.is_err() {
        return client_gone(&mut c.rec);
    }
    if req.method == RequestMethod::Head {
        return next_after(keep);
    }
    // The fill reads its upstream under the route's read timeout: a wait for its next bytes
    // lasts as long.
    let read_timeout = c.g.cfg.routes[req.route].timeouts(&c.g.cfg.timeouts).read;
    let mut offset = 0u64;
    while offset < len {
        let read = store.borrow_mut().read(h, offset);
        match read {
            Read::Data(b) => {
                let n = b.len() as u64;
                offset += n;
                if write_bytes(c, b, c.g.cfg.timeouts.send).await.is_err() {
                    return client_gone(&mut c.rec);
                }
                c.rec.wrote_body(n);
            }
            Read::Pending => {
                if !wait_change(store, h, read_timeout).await {
                    c.rec.failed(ProxyError::UpstreamTimeout);
                    return Next::Close;
                }
            }
            // The fill failed midway (the upstream broke off): so does this copy of it,
            // visibly short of its Content-Length. (Invalidated or evicted, it would still be
            // here for this reader.)
            Read::End | Read::Dropped => {
                c.rec.failed(ProxyError::UpstreamClosed);
                return Next::Close;
            }
        }
    }
    next_after(keep)
}
