//! Versions `HTTP/1.2` to `HTTP/1.9`, read as HTTP/1.1: RFC 9112 2.3 says a recipient SHOULD
//! process a message with a higher minor version as the highest it speaks (nginx and HAProxy
//! do, for requests and responses), while httparse knows only 1.0 and 1.1 and stops at the
//! version. Cold: only such messages pay for this second look.

use super::head::RequestParts;
use super::Version;

/// A response head's parts, borrowed from the buffer: status, reason, fields and the head's
/// length.
pub(super) type ResponseParts<'h, 'b> = (
    Version,
    u16,
    Option<&'b str>,
    &'h [httparse::Header<'b>],
    usize,
);

/// httparse stopped at the version of `req`'s request line: if it is `HTTP/1.x` with x from
/// 2 to 9, read the head as HTTP/1.1. httparse has already checked the method and the
/// target; the rest of the line is read here and the fields by httparse's own field parser
/// (the same rules as in a request it parses whole). Anything else gives back the error
/// httparse would have given, for the usual classification (so a CR in the wrong place or a
/// bare LF is judged exactly as after `HTTP/1.1`).
#[cold]
pub(super) fn request<'h, 'b>(
    window: &'b [u8],
    req: httparse::Request<'h, 'b>,
) -> httparse::Result<RequestParts<'h, 'b>> {
    let httparse::Request {
        method: Some(method),
        path: Some(target),
        headers,
        ..
    } = req
    else {
        return Err(httparse::Error::Version);
    };
    // The version starts after the single space that ends the target.
    let at = target.as_ptr() as usize - window.as_ptr() as usize + target.len() + 1;
    let line_len = match window.get(at..).unwrap_or_default() {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'2'..=b'9', end @ ..] => match end {
            [] | [b'\r'] => return Ok(httparse::Status::Partial),
            [b'\r', b'\n', ..] => at + 10,
            // A bare LF: taken as a line end here, refused by the head's CRLF checks.
            [b'\n', ..] => at + 9,
            _ => return Err(httparse::Error::NewLine),
        },
        _ => return Err(httparse::Error::Version),
    };
    Ok(
        match httparse::parse_headers(&window[line_len..], headers)? {
            httparse::Status::Complete((len, fields)) => httparse::Status::Complete((
                method,
                target,
                Version::Http11,
                fields,
                line_len + len,
            )),
            httparse::Status::Partial => httparse::Status::Partial,
        },
    )
}

/// httparse stopped at the version of a status line: if it is `HTTP/1.x ` with x from 2 to 9,
/// read the head as HTTP/1.1. The status code and reason are judged by httparse itself, on a
/// copy of the status line that says `HTTP/1.1` (same bytes, same offsets: the reason is
/// taken from `window` at the copy's offsets), the fields by httparse's field parser. A bare
/// LF ending the line is taken as its end here and refused by the head's CRLF checks, as after
/// `HTTP/1.1`. Anything else gives back httparse's `Version` error.
#[cold]
pub(super) fn response<'h, 'b>(
    window: &'b [u8],
    headers: &'h mut [httparse::Header<'b>],
) -> httparse::Result<ResponseParts<'h, 'b>> {
    // Empty lines before the status line are skipped as httparse skips them.
    let lead = window
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let rest = &window[lead..];
    if !matches!(
        rest,
        [
            b'H',
            b'T',
            b'T',
            b'P',
            b'/',
            b'1',
            b'.',
            b'2'..=b'9',
            b' ',
            ..
        ]
    ) {
        return Err(httparse::Error::Version);
    }
    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
        return Ok(httparse::Status::Partial);
    };
    let line = &rest[..=nl];
    let mut copy = Vec::with_capacity(line.len() + 2);
    copy.extend_from_slice(line);
    copy[7] = b'1';
    copy.extend_from_slice(b"\r\n");
    let mut none = [];
    let mut res = httparse::Response::new(&mut none);
    let (code, reason) = match res.parse(&copy)? {
        httparse::Status::Complete(_) => {
            // (An empty reason need not point into the copy at all.)
            let reason = res.reason.map(|r| {
                (r.as_ptr() as usize)
                    .checked_sub(copy.as_ptr() as usize)
                    .and_then(|at| line.get(at..at + r.len()))
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .unwrap_or("")
            });
            (res.code.ok_or(httparse::Error::Status)?, reason)
        }
        // The copy ends with an empty line: complete, or refused.
        httparse::Status::Partial => return Err(httparse::Error::Status),
    };
    let fields_at = lead + nl + 1;
    Ok(
        match httparse::parse_headers(&window[fields_at..], headers)? {
            httparse::Status::Complete((len, fields)) => {
                httparse::Status::Complete((Version::Http11, code, reason, fields, fields_at + len))
            }
            httparse::Status::Partial => httparse::Status::Partial,
        },
    )
}
