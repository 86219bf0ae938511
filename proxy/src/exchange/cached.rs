//! A request on a cached route: the I/O around the cache's sans-IO core (`crate::cache`).
//!
//! - The time is read once per request; the request head is not parsed again: its fields are
//!   read where the one parse found them (`request::HeadFields`, on the connection). The
//!   decision ([`decide`]) takes them, the route's settings and the worker's store, and no
//!   borrow of the store outlives it.
//! - Hit: the stored head (no hop-by-hop fields, no framing, no Age or X-Cache) with `Age`,
//!   `X-Cache: HIT` and `Content-Length`, then the body (head only for HEAD): from memory, or
//!   with sendfile from the worker's body file for bodies of 4 KiB and more
//!   (`cache::memfd`). A client's own If-None-Match / If-Modified-Since that the stored
//!   validators match gets a 304.
//! - Validation: a `no-cache` request, or a stale entry, with an ETag or Last-Modified is
//!   fetched with a conditional request ([`validate`]); a 304 refreshes the entry (RFC 9111
//!   4.3.4) and serves it (`X-Cache: REVALIDATED`), a 200 replaces it (MISS).
//! - Stream: a request collapsed on a fill that declared its length streams the entry as it
//!   fills. Wait: a fill without a head (or without a length) is under way; wait for it to
//!   change and decide again.
//! - Miss/Stale: `begin_fill`, fetch upstream (with GET for a HEAD, as nginx does), and copy
//!   the body into the entry while it streams to the client; on upstream error or timeout a
//!   stale entry within `stale_if_error` is served (`X-Cache: STALE`), else 502/504.
//! - Unsafe methods with a non-error answer invalidate the key here and on every other worker
//!   (through the workers' inbox); `PURGE` from `purge_from` does the same at once: 200 when
//!   this worker had the key, 404 when it did not (the other workers are told either way);
//!   from elsewhere 403 (ngx_cache_purge's answer to a client outside `purge_allowed`).
//! - The proxy's own answers carry X-Cache too ([`fail_with`]): MISS after a lookup (a failed
//!   fill, only-if-cached with nothing stored), BYPASS when the cache was not used (unsafe
//!   methods, credentials, a body over `max_body`, PURGE answers).

use super::outcome::Answered;
use super::response_head::Head;
use super::{answer, relay_response, start_tunnel};
use crate::cache::validate;
use crate::cache::{
    self, classify, CacheStatus, Fetched, Handle, Hit, Key, Lookup, Millis, OwnedKey, Read,
    RequestClass, Store,
};
use crate::config::cache::CacheEntry;
use crate::config::Action;
use crate::conn::Next;
use crate::conn::{cork_last_answer, linger_close, respond_error_with, ClientConn};
use crate::error::ProxyError;
use crate::forward::{end_client_head, ClientFraming};
use crate::generation::Generation;
use crate::io::IoFail;
use crate::preconditions::Outcome;
use crate::relay::FillSink;
use crate::request::{body_too_large, Named, RequestInfo};
use crate::worker::ProxyWorker;
use bytes::{Buf, Bytes, BytesMut};
use monoio::io::AsyncWriteRentExt;
use shared::http::encode::{
    write_header, write_header_u64, write_simple_response_with, write_status_line,
};
use shared::http::framing::is_hop_by_hop;
use shared::http::{parse_final_response, BodyKind, Limits, RequestMethod, Status, Version};
use std::cell::RefCell;
use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

/// Bodies up to this size are copied behind the head and sent with one write; larger ones
/// go out with the head in one `writev`, straight from the stored `Bytes` (no copy).
/// (Small enough that the connection's head buffer stays within the size the worker keeps
/// for reuse.)
const COPY_BODY_MAX: usize = 1024;
/// How many times a request waits for a fill of its key before fetching on its own.
const MAX_WAITS: usize = 8;

/// The time every cache decision of a request is made at.
pub fn now_millis() -> Millis {
    shared::clock::coarse_unix().as_millis() as Millis
}

/// What the cache does with one request, decided with no I/O.
enum Decision {
    /// The store answers (`X-Cache: HIT`).
    Stored(FromStore),
    /// A fill of the key is under way: wait for it; if it takes too long, fetch on our
    /// own, falling back on `stale` (a stored response of the variant) if the upstream fails.
    Wait {
        fill: Handle,
        stale: Option<Handle>,
    },
    /// Fetch from the upstream, filling `fill` (a miss) and falling back on `stale`;
    /// conditionally when `validates` holds a stored response with a validator.
    Fetch {
        fill: Option<Handle>,
        stale: Option<Handle>,
        validates: Option<(Handle, Hit)>,
    },
    /// Forward without the cache; `invalidate`: a non-error answer removes the key.
    Forward {
        invalidate: bool,
    },
    Purge,
    /// Only-if-cached and nothing is: 504 (RFC 9111 5.2.1.7).
    NotCached,
}

/// What the store answers with.
enum FromStore {
    Hit(Hit),
    /// A hit whose validators match the client's own conditional request: 304.
    NotModified(Hit),
    /// A hit (or a fill streaming) the client's If-Match or If-Unmodified-Since fails: 412.
    PreconditionFailed,
    /// An entry filling with a declared length, streamed as it fills.
    Stream {
        entry: Handle,
        head: Bytes,
        age: u64,
        len: u64,
    },
}

/// A request on cached route `route`.
pub async fn run(c: &mut ClientConn, req: RequestInfo, route: usize, group: usize) -> Next {
    let g = c.g.clone();
    let (
        Action::Proxy {
            cache: Some(cfg), ..
        },
        Some(store),
    ) = (&g.cfg.routes[route].action, g.caches[route].as_deref())
    else {
        return super::run(c, req, group).await;
    };
    // Refused here on a cached route, so the answer carries X-Cache.
    if body_too_large(req.body, g.cfg.limits.max_body) {
        c.rec.cache = Some(CacheStatus::Bypass);
        return fail_with(c, ProxyError::BodyTooLarge, CacheStatus::Bypass).await;
    }
    let mut waits = 0;
    let mut now = now_millis();
    let https = c.stream.is_tls();
    loop {
        // The key is read from the client buffer for the decision (no copy on a hit), and
        // copied only for what outlives the head: a fetch, a purge.
        let d = c.fields.with(&c.cin[..req.head_len], |method, fields| {
            let key = key_of(&c.cin, &req, https);
            decide((method, fields), &req, cfg, store, key, now)
        });
        let key = || OwnedKey::new(key_of(&c.cin, &req, https));
        match d {
            Decision::Stored(answer) => {
                c.rec.cache = Some(CacheStatus::Hit);
                c.cin.advance(req.head_len);
                return from_store(c, &req, store, answer).await;
            }
            Decision::Wait { fill, stale } => {
                if waits < MAX_WAITS && wait_change(store, fill, g.cfg.timeouts.read).await {
                    waits += 1;
                    now = now_millis();
                    continue;
                }
                // The fill takes too long: fetch on our own, without storing (a stale
                // entry still serves if the upstream fails).
                c.rec.cache = Some(CacheStatus::Miss);
                let f = Fetch {
                    cache: Some((store, cfg.as_ref())),
                    stale,
                    ..Fetch::plain(CacheStatus::Miss)
                };
                let key = key();
                return fetch_apart(c, &req, group, &key, f).await;
            }
            Decision::Fetch {
                fill,
                stale,
                validates,
            } => {
                let f = Fetch {
                    status: CacheStatus::Miss,
                    fill: fill.map(|h| (store, h, cfg.as_ref())),
                    cache: Some((store, cfg.as_ref())),
                    stale,
                    validates,
                    invalidate: false,
                    request_time: now,
                };
                let key = key();
                return fetch_apart(c, &req, group, &key, f).await;
            }
            Decision::Forward { invalidate } => {
                c.rec.cache = Some(CacheStatus::Bypass);
                let f = Fetch {
                    invalidate,
                    ..Fetch::plain(CacheStatus::Bypass)
                };
                let key = key();
                return fetch_apart(c, &req, group, &key, f).await;
            }
            Decision::Purge => {
                let key = key();
                return purge(c, &req, cfg, &key).await;
            }
            Decision::NotCached => {
                c.cin.advance(req.head_len);
                return fail_with(c, ProxyError::UpstreamTimeout, CacheStatus::Miss).await;
            }
        }
    }
}

/// Answer a request the store answers (`X-Cache: HIT`): a hit, a 304 or a 412 from a stored
/// response, or an entry streamed as it fills.
async fn from_store(
    c: &mut ClientConn,
    req: &RequestInfo,
    store: &RefCell<Store>,
    answer: FromStore,
) -> Next {
    match answer {
        FromStore::Hit(hit) => send_hit(c, req, hit).await,
        FromStore::NotModified(hit) => send_not_modified(c, req, &hit, CacheStatus::Hit).await,
        FromStore::PreconditionFailed => send_precondition_failed(c, req, CacheStatus::Hit).await,
        FromStore::Stream {
            entry,
            head,
            age,
            len,
        } => {
            let out = Stored::new(&head, age, CacheStatus::Hit, len);
            stream_entry(c, req, store, entry, out).await
        }
    }
}

/// The cache's decision for the request whose method and fields are `head` (as its one parse
/// found them: `request::HeadFields`).
fn decide(
    (method, fields): (&str, &[httparse::Header<'_>]),
    req: &RequestInfo,
    cfg: &CacheEntry,
    store: &RefCell<Store>,
    key: Key<'_>,
    now: Millis,
) -> Decision {
    let class = classify(method, fields, cfg);
    let has_body = !matches!(req.body, BodyKind::Empty | BodyKind::Length(0));
    match class {
        RequestClass::Lookup { .. } if has_body || req.websocket => {
            Decision::Forward { invalidate: false }
        }
        RequestClass::Lookup {
            revalidate,
            only_if_cached,
        } => {
            let mut s = store.borrow_mut();
            match s.lookup(key, fields, revalidate, now) {
                Lookup::Hit(hit) => {
                    match validate::precondition(fields, validate::validators(&hit.head)) {
                        Outcome::Proceed => Decision::Stored(FromStore::Hit(hit)),
                        Outcome::NotModified => Decision::Stored(FromStore::NotModified(hit)),
                        Outcome::Failed => Decision::Stored(FromStore::PreconditionFailed),
                    }
                }
                Lookup::Stream {
                    entry,
                    status,
                    head,
                    age,
                    len,
                } => match validate::precondition(fields, validate::validators(&head)) {
                    Outcome::Proceed => Decision::Stored(FromStore::Stream {
                        entry,
                        head,
                        age,
                        len,
                    }),
                    Outcome::NotModified => Decision::Stored(FromStore::NotModified(Hit {
                        status,
                        head,
                        body: Bytes::new(),
                        age,
                        file: None,
                    })),
                    Outcome::Failed => Decision::Stored(FromStore::PreconditionFailed),
                },
                Lookup::Wait(fill) => {
                    // What `revalidate` finds is any complete entry of the variant.
                    let stale = match s.lookup(key, fields, true, now) {
                        Lookup::Stale(h) => Some(h),
                        _ => None,
                    };
                    Decision::Wait { fill, stale }
                }
                _ if only_if_cached => Decision::NotCached,
                Lookup::Stale(h) => {
                    let stored = s.stored(h, now);
                    let validates = stored
                        .filter(|hit| validate::validators(&hit.head).any())
                        .map(|hit| (h, hit));
                    Decision::Fetch {
                        fill: s.begin_fill(key),
                        stale: Some(h),
                        validates,
                    }
                }
                Lookup::Miss => Decision::Fetch {
                    fill: s.begin_fill(key),
                    stale: None,
                    validates: None,
                },
            }
        }
        RequestClass::Bypass(_) => Decision::Forward { invalidate: false },
        RequestClass::Invalidate => Decision::Forward { invalidate: true },
        RequestClass::Purge => Decision::Purge,
    }
}

/// The cache key of the request whose head is in `cin`, from a client on a connection
/// that is HTTPS or not: the authority (absolute-form or Host) and the target's origin form
/// as the request layer read it (`RequestInfo::target`; `/` when empty), as the origin gets
/// them.
fn key_of<'a>(cin: &'a [u8], req: &RequestInfo, https: bool) -> Key<'a> {
    let host = req.authority.map_or(&[][..], |a| a.get(cin));
    let target = match req.target.get(cin) {
        b"" => b"/",
        t => t,
    };
    Key::new(https, host, target)
}

/// Wait until entry `h` changes (or `limit` passes: `false`).
async fn wait_change(store: &RefCell<Store>, h: Handle, limit: Duration) -> bool {
    let mut subscribed = false;
    let changed = poll_fn(|cx| {
        if subscribed {
            return Poll::Ready(());
        }
        subscribed = true;
        if store.borrow_mut().subscribe(h, cx.waker()) {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    });
    monoio::time::timeout(limit, changed).await.is_ok()
}

/// The head of a response served from the store.
struct Stored<'a> {
    head: &'a [u8],
    age: u64,
    status: CacheStatus,
    len: u64,
    /// Whether Content-Length is sent (not on a 304).
    length: bool,
}

impl<'a> Stored<'a> {
    fn new(head: &'a [u8], age: u64, status: CacheStatus, len: u64) -> Self {
        Stored {
            head,
            age,
            status,
            len,
            length: true,
        }
    }

    /// The whole client head into `out`: stored fields, Age, X-Cache, Content-Length,
    /// Connection as the client needs it, the empty line. Returns whether the connection
    /// stays.
    fn write(&self, w: &ProxyWorker, req: &RequestInfo, out: &mut BytesMut) -> bool {
        let keep = req.keep_alive && (!w.draining() || req.pipelined);
        out.clear();
        out.extend_from_slice(self.head);
        write_header_u64(out, b"Age", self.age);
        write_header(out, b"X-Cache", self.status.as_str().as_bytes());
        // RFC 9110 8.6: never on a 204 (the stored head's status line, written by
        // `stored_head`, says which it is).
        let no_content = self.head.get(9..12) == Some(&b"204"[..]);
        if self.length && !no_content {
            write_header_u64(out, b"Content-Length", self.len);
        }
        if !keep {
            write_header(out, b"Connection", b"close");
        } else if req.version == Version::Http10 {
            write_header(out, b"Connection", b"keep-alive");
        }
        out.extend_from_slice(b"\r\n");
        keep
    }
}

fn next_after(keep: bool) -> Next {
    if keep {
        Next::KeepAlive
    } else {
        Next::Finished
    }
}

/// 412 to a request whose If-Match or If-Unmodified-Since the stored response fails (as
/// nginx answers from its cache); the connection stays as the request asked.
async fn send_precondition_failed(
    c: &mut ClientConn,
    req: &RequestInfo,
    status: CacheStatus,
) -> Next {
    let keep = req.keep_alive && (!c.w.draining() || req.pipelined);
    send_simple(c, 412, keep, status).await
}

/// A short answer of the proxy's own (`status` with its reason as the body), with `X-Cache:
/// cache`; `Connection: close` unless `keep`.
async fn send_simple(c: &mut ClientConn, status: u16, keep: bool, cache: CacheStatus) -> Next {
    c.cout.clear();
    let fields: [(&[u8], &[u8]); 1] = [(b"X-Cache", cache.as_str().as_bytes())];
    write_simple_response_with(&mut c.cout, Version::Http11, status, !keep, &fields);
    if c.send_cout().await.is_err() {
        return client_gone(&mut c.rec);
    }
    next_after(keep)
}

/// A 304 from a stored response whose validators match the client's condition (as nginx
/// answers conditional requests from its cache).
async fn send_not_modified(
    c: &mut ClientConn,
    req: &RequestInfo,
    hit: &Hit,
    status: CacheStatus,
) -> Next {
    let head = validate::not_modified_head(&hit.head);
    let mut out = Stored::new(&head, hit.age, status, 0);
    out.length = false;
    send_stored(c, req, out, None).await
}

/// A fresh stored response (`X-Cache: HIT`), from the body file when it has a copy there.
async fn send_hit(c: &mut ClientConn, req: &RequestInfo, hit: Hit) -> Next {
    let len = hit.body.len() as u64;
    let out = Stored::new(&hit.head, hit.age, CacheStatus::Hit, len);
    // sendfile writes the socket itself: never under TLS (the memory path encrypts).
    match (
        hit.file,
        req.method == RequestMethod::Head || c.stream.is_tls(),
    ) {
        (Some(file), false) => send_from_file(c, req, out, hit.body, file).await,
        _ => send_stored(c, req, out, Some(hit.body)).await,
    }
}

/// Send a stored response: the head, then `body` (none for HEAD).
async fn send_stored(
    c: &mut ClientConn,
    req: &RequestInfo,
    out: Stored<'_>,
    body: Option<Bytes>,
) -> Next {
    let w = c.w.clone();
    let keep = out.write(&w, req, &mut c.cout);
    let head_only = req.method == RequestMethod::Head;
    let body = body.filter(|b| !head_only && !b.is_empty());
    let separate = match body {
        Some(b) if b.len() <= COPY_BODY_MAX => {
            c.cout.extend_from_slice(&b);
            None
        }
        other => other,
    };
    if !keep {
        cork_last_answer(c);
    }
    let sent = match separate {
        None => c.send_cout().await.is_ok(),
        Some(body) => {
            let (buf, send) = (std::mem::take(&mut c.cout), c.g.cfg.timeouts.send);
            let written = write_head_and_body(c, &w, buf, body, send).await;
            written.map(|b| c.cout = b).is_some()
        }
    };
    if !sent {
        return client_gone(&mut c.rec);
    }
    next_after(keep)
}

/// Send a stored response whose body is in the worker's body file: the head with
/// `send(MSG_MORE)`, the body with `sendfile(2)`, both direct non-blocking syscalls; whatever
/// the socket did not take goes out from `body` (the file's mapping) the usual way. `body`
/// keeps the file range alive (its pages are punched out only when its last `Bytes` goes).
async fn send_from_file(
    c: &mut ClientConn,
    req: &RequestInfo,
    out: Stored<'_>,
    body: Bytes,
    file: crate::cache::memfd::FileRange,
) -> Next {
    use std::os::fd::AsRawFd;
    let fd = match &c.stream {
        shared::stream::Stream::Plain(s) => s.as_raw_fd(),
        // TLS encrypts in user space: the body goes out from memory.
        shared::stream::Stream::Tls(_) => return send_stored(c, req, out, Some(body)).await,
    };
    // sendfile takes no flags: only a non-blocking socket keeps it off the worker thread's
    // back when the client stops reading. A socket that cannot be switched gets the body
    // from memory through the runtime.
    if shared::stream::ensure_nonblocking(fd, &mut c.nonblocking).is_err() {
        return send_stored(c, req, out, Some(body)).await;
    }
    let w = c.w.clone();
    let keep = out.write(&w, req, &mut c.cout);
    if !keep {
        cork_last_answer(c);
    }
    let flags = libc::MSG_MORE | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    // SAFETY: `cout` is valid for its length.
    let n = unsafe { libc::send(fd, c.cout.as_ptr().cast(), c.cout.len(), flags) };
    let head = match sent(n) {
        Some(n) => n,
        None => return client_gone(&mut c.rec),
    };
    c.rec.wrote(&c.cout[..head]);
    let send = c.g.cfg.timeouts.send;
    if head < c.cout.len() {
        let mut buf = std::mem::take(&mut c.cout);
        buf.advance(head);
        match write_head_and_body(c, &w, buf, body, send).await {
            Some(b) => c.cout = b,
            None => return client_gone(&mut c.rec),
        }
        return next_after(keep);
    }
    let mut offset = file.offset as libc::off_t;
    // SAFETY: both fds are open (the body file lives as long as the worker's store).
    let n = unsafe { libc::sendfile(fd, file.fd, &mut offset, body.len()) };
    let done = match sent(n) {
        Some(n) => n,
        None => return client_gone(&mut c.rec),
    };
    if done < body.len() && write_bytes(c, body.slice(done..), send).await.is_err() {
        return client_gone(&mut c.rec);
    }
    c.rec.wrote_body(body.len() as u64);
    next_after(keep)
}

/// What a non-blocking send took: `n` bytes, none if the socket is full, `None` on error.
fn sent(n: isize) -> Option<usize> {
    if n >= 0 {
        return Some(n as usize);
    }
    let e = std::io::Error::last_os_error().kind();
    (e == std::io::ErrorKind::WouldBlock || e == std::io::ErrorKind::Interrupted).then_some(0)
}

/// A response head and a stored body, for one `writev`: the iovec pair lives on the heap (in a
/// box the worker reuses), so its address holds while the runtime owns the value.
struct HeadAndBody {
    iov: Box<[libc::iovec; 2]>,
    head: BytesMut,
    body: Bytes,
}

impl HeadAndBody {
    /// Point the iovecs at what is left after `done` bytes.
    fn skip(&mut self, done: usize) {
        let (h, b) = (&self.head[..], &self.body[..]);
        let (first, second) = if done < h.len() {
            (&h[done..], b)
        } else {
            (&b[done - h.len()..], &b[b.len()..])
        };
        self.iov[0] = libc::iovec {
            iov_base: first.as_ptr() as *mut libc::c_void,
            iov_len: first.len(),
        };
        self.iov[1] = libc::iovec {
            iov_base: second.as_ptr() as *mut libc::c_void,
            iov_len: second.len(),
        };
    }
}

// SAFETY: the iovecs point into `head` and `body`, heap buffers owned by the value and not
// changed while the runtime holds it; the iovec array itself is boxed, so moving the value
// does not move it.
unsafe impl monoio::buf::IoVecBuf for HeadAndBody {
    fn read_iovec_ptr(&self) -> *const libc::iovec {
        self.iov.as_ptr()
    }
    fn read_iovec_len(&self) -> usize {
        2
    }
}

/// Write `head` then `body` with `writev` (as many calls as partial writes need) within
/// `limit`. The head buffer back, or `None`: the client is gone or too slow.
async fn write_head_and_body(
    c: &mut ClientConn,
    w: &ProxyWorker,
    head: BytesMut,
    body: Bytes,
    limit: Duration,
) -> Option<BytesMut> {
    use monoio::io::AsyncWriteRent;
    let total = head.len() + body.len();
    let mut v = HeadAndBody {
        iov: w.take_iovecs(),
        head,
        body,
    };
    let deadline = shared::clock::deadline(limit);
    let mut done = 0;
    while done < total {
        v.skip(done);
        let (r, back) = monoio::time::timeout_at(deadline, c.stream.writev(v))
            .await
            .ok()?;
        v = back;
        match r {
            Ok(n) if n > 0 => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
    w.give_iovecs(v.iov);
    c.rec.wrote(&v.head);
    c.rec.wrote_body(v.body.len() as u64);
    Some(v.head)
}

fn client_gone(rec: &mut crate::record::Record) -> Next {
    rec.failed(ProxyError::ClientGone);
    Next::Close
}

/// Write all of `b` (stored body bytes, shared with the store: no copy).
async fn write_bytes(c: &mut ClientConn, b: Bytes, limit: Duration) -> Result<(), IoFail> {
    match monoio::time::timeout(limit, c.stream.write_all(b)).await {
        Err(_) => Err(IoFail::Timeout),
        Ok((Ok(_), _)) => Ok(()),
        Ok((Err(e), _)) => Err(IoFail::Error(e.kind())),
    }
}

/// Stream an entry that is filling (its length declared) as its bytes arrive.
async fn stream_entry(
    c: &mut ClientConn,
    req: &RequestInfo,
    store: &RefCell<Store>,
    h: Handle,
    out: Stored<'_>,
) -> Next {
    let w = c.w.clone();
    let len = out.len;
    let keep = out.write(&w, req, &mut c.cout);
    if c.send_cout().await.is_err() {
        return client_gone(&mut c.rec);
    }
    if req.method == RequestMethod::Head {
        return next_after(keep);
    }
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
                if !wait_change(store, h, c.g.cfg.timeouts.read).await {
                    c.rec.failed(ProxyError::UpstreamTimeout);
                    return Next::Close;
                }
            }
            // The fill failed midway (the upstream broke off): so does this copy of it,
            // visibly short of its Content-Length.
            Read::End | Read::Dropped => {
                c.rec.failed(ProxyError::UpstreamClosed);
                return Next::Close;
            }
        }
    }
    next_after(keep)
}

/// How a fetch from the upstream relates to the cache.
struct Fetch<'s> {
    status: CacheStatus,
    /// The entry to fill (a storable answer fills it; otherwise it is abandoned).
    fill: Option<(&'s RefCell<Store>, Handle, &'s CacheEntry)>,
    /// The route's store and settings, when the request looked the key up.
    cache: Option<(&'s RefCell<Store>, &'s CacheEntry)>,
    /// A stale entry to serve when the upstream fails (with `cache`).
    stale: Option<Handle>,
    /// The stored entry (and its response) a conditional request validates (with `cache`).
    validates: Option<(Handle, Hit)>,
    /// A non-error answer invalidates the key everywhere.
    invalidate: bool,
    request_time: Millis,
}

impl Fetch<'_> {
    fn plain(status: CacheStatus) -> Self {
        Fetch {
            status,
            fill: None,
            cache: None,
            stale: None,
            validates: None,
            invalidate: false,
            request_time: 0,
        }
    }
}

/// [`fetch`] in an allocation of its own. Its state (an upstream exchange, a fill, a
/// revalidation) is most of a cached route's: inline, every client connection's task would
/// carry those 6-7 KB, idle or serving hits, for a cost a miss pays once (one allocation
/// beside an upstream exchange).
fn fetch_apart<'a>(
    c: &'a mut ClientConn,
    req: &'a RequestInfo,
    group: usize,
    key: &'a OwnedKey,
    f: Fetch<'a>,
) -> std::pin::Pin<Box<impl std::future::Future<Output = Next> + 'a>> {
    Box::pin(fetch(c, req, group, key, f))
}

/// Forward the request, with `X-Cache` on the answer; fill, invalidate or fall back on a
/// stale entry as `f` says.
async fn fetch(
    c: &mut ClientConn,
    req: &RequestInfo,
    group: usize,
    key: &OwnedKey,
    f: Fetch<'_>,
) -> Next {
    let w = c.w.clone();
    let g = c.g.clone();
    // The record's cache status (a validation's is decided by its answer, below).
    c.rec.cache = Some(f.status);
    let head_only = req.method == RequestMethod::Head;
    // A HEAD miss fills the entry with a GET.
    let fetch_req = if head_only && f.fill.is_some() {
        to_get(&mut c.uout);
        RequestInfo {
            method: RequestMethod::Other,
            ..*req
        }
    } else {
        *req
    };
    if let Some((_, stored)) = &f.validates {
        validate::make_conditional(&mut c.uout, validate::validators(&stored.head));
    }
    // The request headers storing decides on (Authorization, Vary), kept past the exchange.
    let req_head =
        (f.fill.is_some() || f.validates.is_some()).then(|| c.cin[..req.head_len].to_vec());
    let answered = answer(c, &w, &g, &fetch_req, group).await;
    let limits = &g.cfg.limits.codec;
    let not_modified = f.validates.is_some()
        && matches!(&answered, Ok(a) if answer_status(limits, &a.head.ub) == 304);
    // A validation counts as a miss unless the origin answers 304.
    if f.validates.is_some() {
        c.rec.cache = Some(match not_modified {
            true => CacheStatus::Revalidated,
            false => CacheStatus::Miss,
        });
    }
    let a = match answered {
        Ok(a) => a,
        Err(e) => {
            if let Some((store, h, _)) = f.fill {
                store.borrow_mut().abandon(h);
            }
            return upstream_failed(c, req, &f, e).await;
        }
    };
    if let (true, Some(rh)) = (not_modified, &req_head) {
        if let Some((store, h, _)) = f.fill {
            store.borrow_mut().abandon(h);
        }
        return revalidated(c, req, group, a, &f, rh).await;
    }
    let fill = match (f.fill, &req_head) {
        (Some((store, h, _)), Some(rh)) => {
            let resp_head = &a.head.ub[..a.head.resp.head_len];
            let kept = c
                .fields
                .with(rh, |_, request| fill_head(request, resp_head, &w, &g, &f));
            Some(FillSink {
                store,
                handle: kept.then_some(h),
                head_only,
            })
        }
        _ => None,
    };
    let limits = &g.cfg.limits.codec;
    if f.invalidate && crate::cache::policy::invalidates(answer_status(limits, &a.head.ub)) {
        crate::worker::invalidate_everywhere(&w, key);
    }
    write_header(&mut c.cout, b"X-Cache", f.status.as_str().as_bytes());
    if !has_age(&c.cout) {
        write_header(&mut c.cout, b"Age", b"0");
    }
    end_client_head(&mut c.cout, &a.head.resp);
    if a.head.resp.framing == ClientFraming::Tunnel {
        return start_tunnel(c, a.up, a.head).await;
    }
    let started = fill.as_ref().and_then(|s| s.handle.map(|h| (s.store, h)));
    let (next, filled) = relay_response(c, a, group, fill).await;
    if let Some((store, h)) = started {
        {
            let mut s = store.borrow_mut();
            let done = filled.is_some_and(|h| s.finish(h));
            if !done {
                s.abandon(h);
            }
        }
        sync_stats(&w, &g);
    }
    next
}

/// The upstream gave no answer: a stale entry within `stale_if_error`, else the error.
async fn upstream_failed(
    c: &mut ClientConn,
    req: &RequestInfo,
    f: &Fetch<'_>,
    e: Option<ProxyError>,
) -> Next {
    // The stale entry serves whether or not a fill could be started.
    if let (Some(h), Some((store, cfg))) = (f.stale, f.cache) {
        let hit =
            store
                .borrow_mut()
                .stale_hit(h, now_millis(), cfg.stale_if_error.as_millis() as Millis);
        if let Some(hit) = hit {
            c.rec.cache = Some(CacheStatus::Stale);
            let len = hit.body.len() as u64;
            let out = Stored::new(&hit.head, hit.age, CacheStatus::Stale, len);
            return send_stored(c, req, out, Some(hit.body)).await;
        }
    }
    match e {
        Some(e) => fail_with(c, e, f.status).await,
        None => Next::Close,
    }
}

/// The proxy's own error answer on a cached route, with its `X-Cache` field: MISS for a
/// lookup that found nothing to serve (a failed fill, as nginx's `$upstream_cache_status`
/// says), BYPASS for a request that did not use the cache.
async fn fail_with(c: &mut ClientConn, e: ProxyError, status: CacheStatus) -> Next {
    respond_error_with(c, e, &[(b"X-Cache", status.as_str().as_bytes())]).await;
    Next::Close
}

/// The origin answered our conditional request 304: the stored entry's head and freshness
/// are updated from it (RFC 9111 4.3.4) and the client gets the stored response (`X-Cache:
/// REVALIDATED`), or a 304 if its own request was conditional and the stored response
/// matches it. A 304 whose strong ETag is not the stored one updates nothing (4.3.4): 502.
async fn revalidated(
    c: &mut ClientConn,
    req: &RequestInfo,
    group: usize,
    a: Answered<'_>,
    f: &Fetch<'_>,
    req_head: &[u8],
) -> Next {
    let w = c.w.clone();
    let (Some((store, cfg)), Some((entry, stored))) = (f.cache, &f.validates) else {
        return Next::Close;
    };
    let Answered {
        server,
        up,
        head: Head { resp, ub },
        ..
    } = a;
    let g = c.g.clone();
    let limits = &g.cfg.limits.codec;
    let mut fields = vec![httparse::EMPTY_HEADER; limits.max_headers];
    let parsed = parse_final_response(
        &ub[..resp.head_len],
        &mut fields,
        RequestMethod::Other,
        limits,
    );
    // The stored response refreshed, and the client's own preconditions against it.
    let answer = c.fields.with(req_head, |_, request| match parsed {
        Ok(Status::Complete(h))
            if validate::selects(validate::validators(&stored.head).etag, h.headers) =>
        {
            let to = Refresh {
                store,
                entry: *entry,
                cfg,
                request,
                request_time: f.request_time,
            };
            let hit = refresh(&to, stored, h.headers);
            let pre = validate::precondition(request, validate::validators(&hit.head));
            Some((hit, pre))
        }
        _ => None,
    });
    // A 304 has no body: the upstream connection is clean unless more bytes followed it.
    if resp.upstream_keep_alive && ub.len() == resp.head_len {
        g.pools[group][server]
            .borrow_mut()
            .put(up, std::time::Instant::now());
    }
    w.give_buf(ub);
    let Some((hit, pre)) = answer else {
        let e = ProxyError::BadResponse(shared::http::CodecError::InvalidStatus);
        return fail_with(c, e, CacheStatus::Miss).await;
    };
    match pre {
        Outcome::Proceed => {}
        Outcome::NotModified => {
            return send_not_modified(c, req, &hit, CacheStatus::Revalidated).await
        }
        Outcome::Failed => return send_precondition_failed(c, req, CacheStatus::Revalidated).await,
    }
    let len = hit.body.len() as u64;
    let out = Stored::new(&hit.head, hit.age, CacheStatus::Revalidated, len);
    send_stored(c, req, out, Some(hit.body)).await
}

/// The entry a 304 refreshes, and what storing decides with.
struct Refresh<'a> {
    store: &'a RefCell<Store>,
    entry: Handle,
    cfg: &'a CacheEntry,
    request: &'a [httparse::Header<'a>],
    request_time: Millis,
}

/// Update the stored response `stored` with the fields of a 304 (`new`): the response to
/// serve, and the entry refreshed (or removed, if the updated head is no longer storable).
fn refresh(to: &Refresh<'_>, stored: &Hit, new: &[httparse::Header<'_>]) -> Hit {
    let merged = validate::updated_fields(&stored.head, new);
    let fields: Vec<httparse::Header<'_>> = merged
        .iter()
        .filter_map(|&(n, value)| {
            let name = std::str::from_utf8(n).ok()?;
            Some(httparse::Header { name, value })
        })
        .collect();
    let line = stored
        .head
        .split(|&b| b == b'\r')
        .next()
        .unwrap_or_default();
    // "HTTP/1.1 200 OK": the reason is what follows the status code.
    let reason = line.splitn(3, |&b| b == b' ').nth(2).unwrap_or_default();
    let reason = std::str::from_utf8(reason).unwrap_or_default();
    let head = stored_head(stored.status, reason, &fields);
    let at = Fetched {
        request_time: to.request_time,
        response_time: now_millis(),
    };
    let len = Some(stored.body.len() as u64);
    let age = match cache::storable(to.request, stored.status, &fields, len, at, to.cfg) {
        Ok(st) => {
            let age = st.freshness.age_secs(at.response_time);
            if !to.store.borrow_mut().refresh(to.entry, head.clone(), st) {
                to.store.borrow_mut().abandon(to.entry);
            }
            age
        }
        Err(_) => {
            to.store.borrow_mut().abandon(to.entry);
            cache::fetched_age(&fields, at)
        }
    };
    // Served from memory: the entry's file range may be gone with the entry.
    Hit {
        status: stored.status,
        head,
        body: stored.body.clone(),
        age,
        file: None,
    }
}

/// Decide whether the answer is stored and, if so, give the entry its head. `false`: the
/// fill was abandoned.
fn fill_head(
    request: &[httparse::Header<'_>],
    resp_head: &[u8],
    w: &ProxyWorker,
    g: &Generation,
    f: &Fetch<'_>,
) -> bool {
    let Some((store, h, cfg)) = f.fill else {
        return false;
    };
    let limits = &g.cfg.limits.codec;
    let mut resp_fields = vec![httparse::EMPTY_HEADER; limits.max_headers];
    let Ok(Status::Complete(resp)) =
        parse_final_response(resp_head, &mut resp_fields, RequestMethod::Other, limits)
    else {
        store.borrow_mut().abandon(h);
        return false;
    };
    let declared = match resp.body {
        BodyKind::Length(n) => Some(n),
        BodyKind::Empty => Some(0),
        _ => None,
    };
    let at = Fetched {
        request_time: f.request_time,
        response_time: now_millis(),
    };
    match cache::storable(request, resp.status, resp.headers, declared, at, cfg) {
        Ok(st) => {
            let head = stored_head(resp.status, resp.reason, resp.headers);
            let kept = store
                .borrow_mut()
                .fill_head(h, resp.status, head, st, declared);
            sync_stats(w, g);
            kept
        }
        Err(_) => {
            store.borrow_mut().abandon(h);
            false
        }
    }
}

/// The head kept with an entry: status line and end-to-end fields, without hop-by-hop
/// fields, framing, Age or X-Cache (a hit writes its own).
fn stored_head(status: u16, reason: &str, fields: &[httparse::Header<'_>]) -> Bytes {
    let mut out = BytesMut::with_capacity(256);
    write_status_line(&mut out, Version::Http11, status, reason);
    let named = Named::collect(fields);
    for h in fields {
        let n = h.name;
        if is_hop_by_hop(n)
            || n.eq_ignore_ascii_case("content-length")
            || n.eq_ignore_ascii_case("age")
            || n.eq_ignore_ascii_case("x-cache")
            || named.contains(n, fields)
        {
            continue;
        }
        write_header(&mut out, n.as_bytes(), h.value);
    }
    out.freeze()
}

/// The status of the answer whose head begins `ub` (0 if it cannot be read).
fn answer_status(limits: &Limits, ub: &[u8]) -> u16 {
    let mut fields = vec![httparse::EMPTY_HEADER; limits.max_headers];
    match parse_final_response(ub, &mut fields, RequestMethod::Other, limits) {
        Ok(Status::Complete(h)) => h.status,
        _ => 0,
    }
}

/// Whether the client head being built already has an Age field (passed on from upstream).
fn has_age(head: &[u8]) -> bool {
    head.windows(6).any(|w| w.eq_ignore_ascii_case(b"\r\nage:"))
}

/// Turn the upstream request line `HEAD ...` in `uout` into `GET ...`.
fn to_get(uout: &mut BytesMut) {
    if uout.starts_with(b"HEAD ") {
        let rest = uout.split_off(5);
        uout.clear();
        uout.extend_from_slice(b"GET ");
        uout.unsplit(rest);
    }
}

/// The store's eviction and drop counts, mirrored into the worker's counters.
/// (Summed over the stores of generation `g`, one per cached route; called on the miss path
/// only, with no store borrowed.)
fn sync_stats(w: &ProxyWorker, g: &Generation) {
    let (mut evicted, mut dropped) = (0, 0);
    for s in g.caches.iter().flatten() {
        let st = s.borrow().stats();
        evicted += st.evicted + st.variants_evicted;
        dropped += st.dropped_too_large + st.dropped_no_room;
    }
    w.stats.cache_evicted.set(evicted);
    w.stats.cache_dropped.set(dropped);
}

/// `PURGE`: from `purge_from`, remove the key here and on every other worker.
/// A body sent with it is skipped when it arrived whole (so the connection stays usable);
/// one still on its way is never read: the answer closes the connection, as `return` does.
async fn purge(c: &mut ClientConn, req: &RequestInfo, cfg: &CacheEntry, key: &OwnedKey) -> Next {
    let w = c.w.clone();
    let skip = crate::answer::body_skippable(req.body, c.cin.len() - req.head_len);
    c.cin.advance(req.head_len + skip.unwrap_or(0));
    if !cfg.may_purge(c.ip.ip()) {
        return fail_with(c, ProxyError::Forbidden, CacheStatus::Bypass).await;
    }
    let removed = crate::worker::invalidate_everywhere(&w, key);
    let status = if removed > 0 { 200 } else { 404 };
    let keep = req.keep_alive && skip.is_some() && (!w.draining() || req.pipelined);
    // A purge answers from no stored response: BYPASS.
    let next = send_simple(c, status, keep, CacheStatus::Bypass).await;
    if skip.is_none() && matches!(next, Next::Finished) {
        // The body still coming is not read: let the client see the answer first.
        linger_close(c).await;
        return Next::Close;
    }
    next
}
