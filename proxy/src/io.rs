//! Socket I/O with deadlines over monoio's owned buffers.
//!
//! monoio passes buffers by value and hands them back with the result. When a deadline fires,
//! the in-flight operation is dropped together with its buffer, so these helpers return the
//! buffer only on completion: a timeout always means "close this connection", never "retry".

use bytes::BytesMut;
use monoio::buf::{IoBuf, IoBufMut, SliceMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use monoio::time::Instant;
use shared::deadline::timeout_at;
use std::io;
use std::time::Duration;

/// Why an I/O step did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoFail {
    /// The deadline passed; the buffer is gone.
    Timeout,
    /// The socket failed (reset, broken pipe...); the buffer is gone.
    Error(io::ErrorKind),
}

/// Read once, appending to `buf` (its spare capacity grown to at least `min_spare` first).
/// `Ok((0, buf))` is end of stream.
pub async fn read_more<S: AsyncReadRent>(
    s: &mut S,
    buf: BytesMut,
    min_spare: usize,
    deadline: Instant,
) -> Result<(usize, BytesMut), IoFail> {
    read_more_max(s, buf, min_spare, usize::MAX, deadline).await
}

/// `read_more` taking at most `max` bytes.
pub async fn read_more_max<S: AsyncReadRent>(
    s: &mut S,
    buf: BytesMut,
    min_spare: usize,
    max: usize,
    deadline: Instant,
) -> Result<(usize, BytesMut), IoFail> {
    match timeout_at(deadline, read_some_max(s, buf, min_spare, max)).await {
        Err(_) => Err(IoFail::Timeout),
        Ok(r) => r,
    }
}

/// `read_more`, at once, when the stream's multishot receive already holds what arrived
/// (`Stream::read_queued`): no future, no timer. `Err(buf)`: nothing waits; read with
/// `read_more`.
pub fn read_queued(
    s: &mut shared::stream::Stream,
    buf: BytesMut,
    min_spare: usize,
) -> Result<Result<(usize, BytesMut), IoFail>, BytesMut> {
    if !s.arrived() {
        return Err(buf);
    }
    match s.read_queued(spare_room(buf, min_spare, usize::MAX)) {
        Ok((Ok(n), slice)) => Ok(Ok((n, slice.into_inner()))),
        Ok((Err(e), _)) => Ok(Err(IoFail::Error(e.kind()))),
        Err(slice) => Err(slice.into_inner()),
    }
}

/// `read_more` without a deadline: for a read that something else bounds.
pub async fn read_some<S: AsyncReadRent>(
    s: &mut S,
    buf: BytesMut,
    min_spare: usize,
) -> Result<(usize, BytesMut), IoFail> {
    read_some_max(s, buf, min_spare, usize::MAX).await
}

/// `read_some` taking at most `max` bytes.
pub async fn read_some_max<S: AsyncReadRent>(
    s: &mut S,
    buf: BytesMut,
    min_spare: usize,
    max: usize,
) -> Result<(usize, BytesMut), IoFail> {
    match s.read(spare_room(buf, min_spare, max)).await {
        (Ok(n), slice) => Ok((n, slice.into_inner())),
        (Err(e), _) => Err(IoFail::Error(e.kind())),
    }
}

/// The room a read of at most `max` bytes appends into: at least `min_spare` bytes after
/// what `buf` holds.
fn spare_room(mut buf: BytesMut, min_spare: usize, max: usize) -> SliceMut<BytesMut> {
    if buf.capacity() - buf.len() < min_spare {
        // Reclaims the already-consumed front of the buffer before allocating.
        buf.reserve(min_spare);
    }
    let len = buf.len();
    let cap = buf.capacity().min(len.saturating_add(max));
    buf.slice_mut(len..cap)
}

/// A failed write: why, how much of the range went before it failed, and the buffer when the
/// socket (not the deadline) failed.
#[derive(Debug)]
pub struct WriteFail {
    pub fail: IoFail,
    pub buf: Option<BytesMut>,
    /// Bytes of the range the socket took before the failure: the peer may have them, so
    /// they count as sent. A write the deadline cut is taken to have delivered nothing (its
    /// cancelled operation had not completed).
    pub written: usize,
}

/// Write all of `buf[start..end]` within `limit` (a peer that stops reading for that long
/// loses the connection).
pub async fn write_range<S: AsyncWriteRent>(
    s: &mut S,
    buf: BytesMut,
    start: usize,
    end: usize,
    limit: Duration,
) -> Result<BytesMut, WriteFail> {
    if start == end {
        return Ok(buf);
    }
    let deadline = shared::clock::deadline(limit);
    // Kept outside the timed future: a timeout drops the future, not what its writes took.
    let mut at = start;
    let done = timeout_at(deadline, write_from(s, buf, &mut at, end)).await;
    let written = at - start;
    match done {
        Err(_) => Err(WriteFail {
            fail: IoFail::Timeout,
            buf: None,
            written,
        }),
        Ok(Ok(buf)) => Ok(buf),
        Ok(Err((kind, buf))) => Err(WriteFail {
            fail: IoFail::Error(kind),
            buf: Some(buf),
            written,
        }),
    }
}

/// Write `buf[*at..end]`, moving `at` past what each write took (monoio's `write_all`, with
/// its progress seen from outside).
async fn write_from<S: AsyncWriteRent>(
    s: &mut S,
    mut buf: BytesMut,
    at: &mut usize,
    end: usize,
) -> Result<BytesMut, (io::ErrorKind, BytesMut)> {
    while *at < end {
        let (r, slice) = s.write(buf.slice(*at..end)).await;
        buf = slice.into_inner();
        match r {
            Ok(0) => return Err((io::ErrorKind::WriteZero, buf)),
            Ok(n) => *at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((e.kind(), buf)),
        }
    }
    Ok(buf)
}

/// One write of `buf[start..end]` (what the socket takes of it at once, at least a byte),
/// within `limit`: how much it took, and the buffer. A failure delivered nothing.
pub async fn write_once<S: AsyncWriteRent>(
    s: &mut S,
    buf: BytesMut,
    (start, end): (usize, usize),
    limit: Duration,
) -> Result<(usize, BytesMut), WriteFail> {
    let deadline = shared::clock::deadline(limit);
    match timeout_at(deadline, s.write(buf.slice(start..end))).await {
        Err(_) => Err(WriteFail {
            fail: IoFail::Timeout,
            buf: None,
            written: 0,
        }),
        Ok((Ok(0), slice)) => Err(WriteFail {
            fail: IoFail::Error(io::ErrorKind::WriteZero),
            buf: Some(slice.into_inner()),
            written: 0,
        }),
        Ok((Ok(n), slice)) => Ok((n, slice.into_inner())),
        Ok((Err(e), slice)) => Err(WriteFail {
            fail: IoFail::Error(e.kind()),
            buf: Some(slice.into_inner()),
            written: 0,
        }),
    }
}

/// Write all of `buf`.
pub async fn write_all<S: AsyncWriteRent>(
    s: &mut S,
    buf: BytesMut,
    limit: Duration,
) -> Result<BytesMut, WriteFail> {
    let len = buf.len();
    write_range(s, buf, 0, len, limit).await
}

/// Offset of `part` inside `whole` (`part` must be a sub-slice of `whole`).
#[inline]
pub fn offset_in(whole: &[u8], part: &[u8]) -> usize {
    (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize)
}
