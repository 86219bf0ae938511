//! Reading the upstream's response head: the final head (interim ones skipped) parsed into
//! the client's head as it arrives, re-parsed only when the bytes may have completed it.

use crate::error::ProxyError;
use crate::forward::{prepare_response, ResponseFields, ResponseInfo};
use crate::io::{read_more_max, read_some_max, IoFail};
use crate::request::worth_parsing;
use crate::request::RequestInfo;
use crate::worker::{ProxyWorker, RELAY_BUF};
use bytes::BytesMut;
use monoio::io::AsyncReadRent;
use shared::http::Limits;
use std::time::Duration;

/// Why no response head was read.
#[derive(Debug)]
pub(super) enum HeadFail {
    /// Not one byte arrived (end of stream or error): the request may be sent again. The
    /// read buffer when the read completed.
    Nothing(Option<BytesMut>),
    /// The read timeout passed.
    Timeout,
    /// Something arrived but it is not a valid response head.
    Bad(ProxyError),
}

/// A final response head, read from the upstream.
pub(super) struct Head {
    pub(super) resp: ResponseInfo,
    /// The upstream's bytes: the head (`resp.head_len` of them) and what followed it.
    pub(super) ub: BytesMut,
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
    loop {
        let had = ub.len();
        let read = match to.read_timeout {
            Some(t) => {
                let until = shared::clock::deadline(t);
                read_more_max(up, ub, RELAY_BUF / 4, to.at_most, until).await
            }
            None => read_some_max(up, ub, RELAY_BUF / 4, to.at_most).await,
        };
        match read {
            Ok((0, b)) if had == 0 => return Err(HeadFail::Nothing(Some(b))),
            Ok((0, _)) => return Err(HeadFail::Bad(ProxyError::UpstreamClosed)),
            Ok((_, b)) => ub = b,
            Err(IoFail::Timeout) => return Err(HeadFail::Timeout),
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
        match prepare_response(w.life.draining(), to.limits, &ub, to.req, to.out, to.fields) {
            Ok(Some(resp)) => return Ok(Head { resp, ub }),
            Ok(None) => parsed = ub.len(),
            Err(e) => return Err(HeadFail::Bad(e)),
        }
    }
}
