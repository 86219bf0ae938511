//! The answer to a request a route's guard refused (`crate::limit`): 403 for `allow`/`deny`,
//! 429 with `Retry-After` for a rate limit. Rendered whole at the one decision, as a
//! `return` is, and sent the same way (`conn::send_answer`): a request body that arrived
//! whole is skipped and the connection kept; one still on its way is never read, and the
//! connection closes after the answer (a lingering close, so the client reads it).

use super::RequestInfo;
use crate::answer::{body_skippable, AnswerCtx};
use crate::limit::Refusal;
use bytes::BytesMut;
use shared::http::encode::{fmt_decimal, write_simple_answer};
use shared::http::{RequestMethod, Version};

/// Render the refusal of `req` (with `arrived` bytes after its head already read) into
/// `out`: the body to skip (`None`: close) and whether the connection closes. `cached`: the
/// route has a response cache, whose every answer says `X-Cache` (BYPASS: the cache was not
/// used), as its other own errors do.
pub(crate) fn render(
    w: AnswerCtx<'_>,
    why: Refusal,
    cached: bool,
    req: &RequestInfo,
    arrived: usize,
    out: &mut BytesMut,
) -> (Option<usize>, bool) {
    let skip = body_skippable(req.body, arrived);
    let pipelined = skip.is_some_and(|n| arrived > n);
    // HTTP/1.0 keep-alive would need the answer to say so: such a client gets a close.
    let close = !req.keep_alive
        || skip.is_none()
        || req.version != Version::Http11
        || (w.draining && !pipelined);
    out.clear();
    let mut digits = [0u8; 20];
    let mut fields: [(&[u8], &[u8]); 2] = [(b"X-Cache", b"BYPASS"), (b"", b"")];
    let mut n = usize::from(cached);
    let status = match why {
        Refusal::Denied => 403,
        Refusal::Limited { retry_after } => {
            let secs = fmt_decimal(u64::from(retry_after), &mut digits);
            fields[n] = (b"Retry-After", secs);
            n += 1;
            429
        }
    };
    // To a HEAD the same head, no body (its Content-Length says what a GET would get).
    let head_only = req.method == RequestMethod::Head;
    write_simple_answer(out, Version::Http11, status, close, &fields[..n], head_only);
    (skip, close)
}
