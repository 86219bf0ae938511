//! The `static` action's I/O: a request answered from a directory (the rules and the
//! sans-IO parts are `crate::static_files`).
//!
//! # Layout
//! - this file: [`serve`], the entry point, and the response decided from the open file;
//! - [`send`]: the body, from memory, `sendfile(2)` or `pread` + write.

mod send;

use crate::conn::{cork_last_answer, linger_close, ClientConn, Next};
use crate::request::RequestInfo;
use crate::static_files::cache::{self, Found};
use crate::static_files::decide::{decide, Conditions, Method, Validators};
use crate::static_files::respond::{self, Body, Conn};
use crate::static_files::{path, StaticQuery, StaticSite};
use bytes::Buf;
use shared::http::target::normalize_path;
use shared::http::BodyKind;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

thread_local! {
    /// The decoded path of the request being answered (grown once, then reused).
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(256));
    /// The normalised path of a directory redirect (grown once, then reused).
    static LOCATION: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Answer one request from `site`. The request head is `req.head_len` bytes at the front of
/// `c.from_client`, and `q` was taken from it; both are consumed here. Writes the whole response
/// and says whether the connection goes on.
///
/// A request body (rare on GET) is skipped when it arrived whole with the head; otherwise
/// the connection closes after the response (the body is not read).
pub async fn serve(
    c: &mut ClientConn,
    site: &StaticSite,
    req: &RequestInfo,
    q: &StaticQuery,
) -> Next {
    let w = c.w.clone();
    let after_head = c.from_client.len() - req.head_len;
    let body_len = match req.body {
        BodyKind::Empty => Some(0),
        BodyKind::Length(n) if n <= after_head as u64 => Some(n as usize),
        _ => None,
    };
    let conn = Conn {
        version: req.version,
        keep_alive: req.keep_alive && body_len.is_some() && (!w.life.draining() || req.pipelined),
    };
    c.to_client.clear();
    let plan = prepare(c, site, q, conn, std::time::Instant::now());
    // nginx's `add_header` applies to files too: the route's `response_headers`, on the
    // statuses it applies to.
    if let Some(e) = c.g.cfg.routes[req.route].response_edits() {
        if respond::edits_apply(plan.status) {
            e.apply_to_head(&mut c.to_client, 0);
        }
    }
    c.from_client.advance(req.head_len + body_len.unwrap_or(0));
    if !conn.keep_alive && body_len.is_some() {
        cork_last_answer(c);
    }
    let sent = send::response(c, plan).await;
    match (sent, conn.keep_alive) {
        (Err(_), _) => Next::Close,
        (Ok(()), true) => Next::KeepAlive,
        (Ok(()), false) if body_len.is_none() => {
            linger_close(c);
            Next::Close
        }
        (Ok(()), false) => Next::Finished,
    }
}

/// A response decided: its head is in `to_client`, and the body to follow.
pub(crate) struct Plan {
    status: u16,
    file: Option<Rc<cache::File>>,
    body: Body,
}

impl Plan {
    /// A response the server makes itself (`respond::simple`): its head is all of it.
    fn simple(status: u16) -> Plan {
        Plan {
            status,
            file: None,
            body: Body::None,
        }
    }
}

/// Decide the response and write its head (and a small body) into `c.to_client`.
fn prepare(
    c: &mut ClientConn,
    site: &StaticSite,
    q: &StaticQuery,
    conn: Conn,
    now: Instant,
) -> Plan {
    let buf = &c.from_client[..];
    let out = &mut c.to_client;
    let files = &c.g.statics;
    let method = q.method.unwrap_or(Method::Other);
    let head = method == Method::Head;
    let simple = |out: &mut _, status| {
        respond::simple(out, status, None, head, conn);
        Plan::simple(status)
    };
    if method == Method::Other {
        return simple(out, 405);
    }
    let Some(target) = q.target.map(|t| t.get(buf)) else {
        return simple(out, 400);
    };
    let (path, query) = path::split_query(target);
    let path = if path.is_empty() { &b"/"[..] } else { path };
    SCRATCH.with(|scratch| {
        let rel = &mut *scratch.borrow_mut();
        let resolved = match path::resolve(path, rel) {
            Ok(r) => r,
            Err(e) => return simple(out, e.status()),
        };
        if resolved.dir {
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(site.index.as_bytes());
        }
        match files.lookup(&site.root, rel, now) {
            Err(e) => simple(out, e.status()),
            // A directory named like the index file is not an index.
            Ok(Found::Dir) if resolved.dir => simple(out, 404),
            Ok(Found::Dir) => redirect_to_dir(out, path, query, head, conn),
            Ok(Found::File(f)) => file_plan(out, f, method, &q.conditions(buf), conn),
        }
    })
}

/// `path` names a directory but does not end in `/`: a 301 to it with the slash (and the
/// query). The Location is the normalised path (`normalize_path`: slashes merged, dot
/// segments resolved, still a URL), so it starts with exactly one `/`: from the
/// raw path, `GET //images` answered `Location: //images/`, which a browser reads as the
/// host `images`. Escapes stay escaped (`/my%20dir/`).
fn redirect_to_dir(
    out: &mut bytes::BytesMut,
    path: &[u8],
    query: Option<&[u8]>,
    head: bool,
    conn: Conn,
) -> Plan {
    LOCATION.with_borrow_mut(|scratch| {
        // The router refused every path without a normal form before this route was chosen.
        match normalize_path(path, scratch) {
            Ok(dir) => {
                let slash: &[u8] = if dir.ends_with(b"/") { b"" } else { b"/" };
                let q: &[u8] = query.map_or(b"", |_| b"?");
                let location = [dir, slash, q, query.unwrap_or(b"")];
                respond::simple(out, 301, Some(&location), head, conn);
                Plan::simple(301)
            }
            Err(_) => {
                respond::simple(out, 400, None, head, conn);
                Plan::simple(400)
            }
        }
    })
}

fn file_plan(
    out: &mut bytes::BytesMut,
    f: Rc<cache::File>,
    method: Method,
    cond: &Conditions<'_>,
    conn: Conn,
) -> Plan {
    let v = Validators {
        size: f.info.size,
        mtime: f.info.mtime,
        etag: f.etag.as_bytes(),
    };
    let reply = decide(method, cond, &v);
    let body = respond::file_head(out, &f, reply, method == Method::Head, conn);
    Plan {
        status: respond::status_of(reply),
        file: Some(f),
        body,
    }
}
