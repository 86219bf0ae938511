//! Reading the upstream's response head: the final head parsed into the client's head as it
//! arrives, re-parsed only when the bytes may have completed it. Interim heads (103 Early
//! Hints, 102) go to an HTTP/1.1 client as soon as each is complete, before the final head is
//! there (or, when the client's connection is busy with the request body, right before it);
//! a response without them costs one look at its first bytes.

use super::client_watch::{abandoned, Watch};
use crate::error::ProxyError;
use crate::forward::{
    prepare_response, starts_interim, write_interims, ResponseFields, ResponseInfo,
};
use crate::io::{read_more_max, read_some_max, write_all, IoFail};
use crate::record::Record;
use crate::request::worth_parsing;
use crate::request::RequestInfo;
use crate::worker::{ProxyWorker, RELAY_BUF};
use bytes::BytesMut;
use monoio::io::AsyncReadRent;
use shared::http::Limits;
use shared::stream::Stream;
use std::cell::RefCell;
use std::time::Duration;

/// Why no response head was read.
#[derive(Debug)]
pub(super) enum HeadFail {
    /// Not one byte arrived (end of stream or error): the request may be sent again. The
    /// read buffer when the read completed.
    Nothing(Option<BytesMut>),
    /// The read timeout passed. `interim_sent`: an interim head (a 103) of this response had
    /// reached the client, which now holds part of the answer: never sent again elsewhere.
    Timeout { interim_sent: bool },
    /// Something arrived but it is not a valid response head.
    Bad(ProxyError),
    /// The client went away while an interim head was sent to it.
    Client,
}

/// A final response head, read from the upstream.
pub(super) struct Head {
    pub(super) resp: ResponseInfo,
    /// The upstream's bytes: the head (`resp.head_len` of them) and what followed it.
    pub(super) ub: BytesMut,
    /// Interim heads of this response already reached the client: it cannot be retried.
    pub(super) interim_sent: bool,
}

/// Where a response head is read from and written to.
pub(super) struct HeadRead<'a> {
    pub(super) req: &'a RequestInfo,
    /// The client's head is written here.
    pub(super) out: &'a mut BytesMut,
    /// The final head's fields are recorded here when a cache fetch wants them.
    pub(super) fields: &'a mut ResponseFields,
    /// The codec limits of the request's generation.
    pub(super) limits: &'a Limits,
    /// The longest wait for each read; `None` when the caller bounds the wait.
    pub(super) read_timeout: Option<Duration>,
    /// The most one read takes (`splice::HEAD_READ` where the body is to be spliced).
    pub(super) at_most: usize,
    /// The client's stream, where the reader may use it: to watch for the client going away
    /// (`watch`), and to send interim heads as they come; with its request's record, which
    /// counts what they sent.
    pub(super) client: Option<(&'a mut Stream, &'a mut Record)>,
    /// Interim heads are forwarded (an HTTP/1.1 client that is answered): as they come with
    /// `client`, without it with the final head.
    pub(super) interim: bool,
    /// Whether the client going away (`client_watch`) ends the wait: `HeadFail::Client`
    /// (499).
    pub(super) watch: Watch<'a>,
    /// The send timeout, for interim heads.
    pub(super) send_timeout: Duration,
    /// The route's `response_headers`, applied to the final head.
    pub(super) edits: Option<&'a crate::config::route_opts::HeaderEdits>,
    /// The server's last head, parsed: a head that repeats it is not parsed again.
    pub(super) memo: Option<&'a RefCell<crate::response_memo::ResponseMemo>>,
}

/// Read until a whole final response head is in `ub` (and the client's head is in `to.out`).
pub(super) async fn read_response_head<R: AsyncReadRent>(
    w: &ProxyWorker,
    up: &mut R,
    mut ub: BytesMut,
    to: HeadRead<'_>,
) -> Result<Head, HeadFail> {
    // Bytes of `ub` already parsed as an incomplete head: a head trickling in is parsed again
    // only when it may have ended (as on the client side), never once per read.
    let mut parsed = 0;
    // Bytes of `ub` at its front that are interim heads the client already has.
    let mut interim_sent = 0;
    let mut to = to;
    loop {
        let had = ub.len();
        let (timeout, at_most, upr) = (to.read_timeout, to.at_most, &mut *up);
        let read = async move {
            match timeout {
                Some(t) => {
                    let until = shared::clock::deadline(t);
                    read_more_max(upr, ub, RELAY_BUF / 4, at_most, until).await
                }
                None => read_some_max(upr, ub, RELAY_BUF / 4, at_most).await,
            }
        };
        let read = match &to.client {
            Some((client, _)) if to.watch.on() => monoio::select! {
                // An answer that came wins over the client's end (it is sent, or found gone).
                biased;
                r = read => r,
                _ = abandoned(client, to.watch) => return Err(HeadFail::Client),
            },
            _ => read.await,
        };
        match read {
            Ok((0, b)) if had == 0 => return Err(HeadFail::Nothing(Some(b))),
            Ok((0, _)) => return Err(HeadFail::Bad(ProxyError::UpstreamClosed)),
            Ok((_, b)) => ub = b,
            Err(IoFail::Timeout) => {
                let interim_sent = interim_sent > 0;
                return Err(HeadFail::Timeout { interim_sent });
            }
            Err(IoFail::Error(_)) if had == 0 => return Err(HeadFail::Nothing(None)),
            // A TLS upstream's TCP close without close_notify, mid-head.
            Err(IoFail::Error(std::io::ErrorKind::UnexpectedEof)) => {
                return Err(HeadFail::Bad(ProxyError::UpstreamClosed))
            }
            Err(IoFail::Error(_)) => return Err(HeadFail::Bad(ProxyError::UpstreamIo)),
        }
        if !worth_parsing(&ub, parsed, to.limits) {
            continue;
        }
        // A client gone while others want the answer gets no interim head.
        if let (true, false, Some((client, rec))) = (to.interim, to.watch.left(), &mut to.client) {
            if starts_interim(&ub[interim_sent..]) {
                let rest = &ub[interim_sent..];
                let (limits, send) = (to.limits, to.send_timeout);
                let to_client = (&mut **client, &mut **rec);
                interim_sent += send_interims(to_client, rest, to.out, limits, send).await?;
            }
        }
        let interim = to.interim.then_some(interim_sent);
        let buf = (&ub[..], interim);
        let (req, edits) = (to.req, to.edits);
        // Borrowed only while the head is parsed, which does not wait.
        let mut memo = to.memo.and_then(|m| m.try_borrow_mut().ok());
        match prepare_response(
            w.life.draining(),
            (to.limits, memo.as_deref_mut()),
            buf,
            req,
            to.out,
            to.fields,
            edits,
        ) {
            Ok(Some(resp)) => {
                let interim_sent = interim_sent > 0;
                return Ok(Head {
                    resp,
                    ub,
                    interim_sent,
                });
            }
            Ok(None) => parsed = ub.len(),
            Err(e) => return Err(HeadFail::Bad(e)),
        }
    }
}

/// Send the complete interim heads at the start of `buf` to the client, rewritten through
/// `out` (the client head's buffer, unused until the final head), counted in its record. The
/// bytes of `buf` they took.
async fn send_interims(
    (client, rec): (&mut Stream, &mut Record),
    buf: &[u8],
    out: &mut BytesMut,
    limits: &Limits,
    send_timeout: Duration,
) -> Result<usize, HeadFail> {
    out.clear();
    let n = write_interims(buf, limits, out).map_err(HeadFail::Bad)?;
    if !out.is_empty() {
        let b = std::mem::take(out);
        *out = match write_all(client, b, send_timeout).await {
            Ok(b) => b,
            Err(e) => {
                rec.wrote_partly(e.buf.as_deref(), e.written);
                return Err(HeadFail::Client);
            }
        };
        rec.wrote(out);
        out.clear();
    }
    Ok(n)
}
