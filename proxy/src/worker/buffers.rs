//! A worker's buffers kept for reuse: a connection or a response that ends gives its
//! buffers back, and the next one takes them (no allocation per connection or per request
//! once the pools are warm). The same goes for the frames client connections serve requests
//! in (`pooled`): an idle connection holds neither.

use bytes::BytesMut;
use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Size of the buffers that carry response bodies (and request bodies being streamed).
pub const RELAY_BUF: usize = 64 * 1024;
/// Initial size of a client connection's read buffer (grows up to the head limit when needed).
const CLIENT_BUF: usize = 8 * 1024;
/// Relay buffers kept for reuse per worker.
const BUF_POOL_MAX: usize = 1024;
/// Initial size of a connection's head-building buffers.
const HEAD_BUF: usize = 1024;
/// Connection buffer sets kept for reuse per worker (a connection per request must not pay
/// three allocations).
const CONN_POOL_MAX: usize = 4096;
/// Request frames kept for reuse per worker: as many as connections served requests at once.
const FRAME_POOL_MAX: usize = 4096;
/// What each pool keeps once the worker is quiet (`BufferPools::trim`): entries unused for a
/// whole trim interval are freed down to this many (relay buffers: `RELAY_IDLE`, 1 MiB).
const IDLE_KEEP: usize = 64;
const RELAY_IDLE: usize = 16;

/// A pool's entries, and the fewest it held since its last trim: that many sat unused through
/// the whole interval (a pool is a stack: its bottom entries were not taken), so they may go.
struct Kept<T> {
    items: Vec<T>,
    low: usize,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept {
            items: Vec::new(),
            low: 0,
        }
    }
}

impl<T> Kept<T> {
    fn take(&mut self) -> Option<T> {
        let t = self.items.pop();
        self.low = self.low.min(self.items.len());
        t
    }

    fn give(&mut self, t: T, max: usize) {
        if self.items.len() < max {
            self.items.push(t);
        }
    }

    fn len(&self) -> usize {
        self.items.len()
    }

    /// Free the entries unused since the last trim, keeping at least `idle`: how many went.
    fn trim(&mut self, idle: usize) -> usize {
        let surplus = self.low.min(self.items.len().saturating_sub(idle));
        if surplus > 0 {
            self.items.drain(..surplus);
            self.items.shrink_to(self.items.len().max(idle));
        }
        self.low = self.items.len();
        surplus
    }
}

/// What a client connection uses only while it serves requests, taken when its bytes arrive
/// and given back when it goes idle: what it read, the two heads it builds, and what a
/// request's access log line, its cache lookup and a cache fetch keep of the heads (their
/// vectors keep their room from request to request, connection to connection).
#[derive(Default)]
pub struct ConnBufs {
    pub from_client: BytesMut,
    pub to_upstream: BytesMut,
    pub to_client: BytesMut,
    pub logreq: crate::access_log::LogRequest,
    pub fields: crate::request::HeadFields,
    pub response_fields: crate::forward::ResponseFields,
    /// `ClientConn::received`: shared with a streamed body's future, which may be dropped
    /// unfinished (pooled with the buffers: no allocation per frame).
    pub received: std::rc::Rc<std::cell::Cell<u64>>,
}

/// The worker's pools of reusable buffers.
#[derive(Default)]
pub struct BufferPools {
    relay: RefCell<Kept<BytesMut>>,
    conn: RefCell<Kept<ConnBufs>>,
    /// Allocations of finished request frames (`pooled`), each an `Option<F>` left `None`.
    frames: RefCell<Kept<Box<dyn Any>>>,
    /// Boxed iovec pairs for cache hits written with one `writev` (reused: a hit allocates
    /// nothing).
    #[allow(clippy::vec_box)] // each pair is handed to the runtime: its address must not move
    iovecs: RefCell<Kept<Box<[libc::iovec; 2]>>>,
    /// Pipes for spliced bodies.
    pub pipes: crate::splice::Pipes,
}

impl BufferPools {
    /// A relay buffer with at least `RELAY_BUF` bytes of room.
    pub fn take_buf(&self) -> BytesMut {
        self.relay
            .borrow_mut()
            .take()
            .unwrap_or_else(|| BytesMut::with_capacity(RELAY_BUF))
    }

    /// Give a relay buffer back for reuse.
    pub fn give_buf(&self, mut b: BytesMut) {
        b.clear();
        // Reclaims the consumed front in place (no allocation for a buffer we own alone).
        b.reserve(RELAY_BUF);
        self.relay.borrow_mut().give(b, BUF_POOL_MAX);
    }

    /// Buffers for a client connection whose bytes arrived.
    pub fn take_conn_bufs(&self) -> ConnBufs {
        self.conn.borrow_mut().take().unwrap_or_else(|| ConnBufs {
            from_client: BytesMut::with_capacity(CLIENT_BUF),
            to_upstream: BytesMut::with_capacity(HEAD_BUF),
            to_client: BytesMut::with_capacity(HEAD_BUF),
            ..ConnBufs::default()
        })
    }

    /// Give a connection's buffers back (it went idle or closed), unless one grew large (an
    /// upload or a re-chunked body): those are freed so idle memory stays small.
    pub fn give_conn_bufs(&self, mut b: ConnBufs) {
        let small = |x: &mut BytesMut, size: usize| {
            x.clear();
            x.reserve(size);
            x.capacity() <= 2 * size && x.capacity() >= size
        };
        if small(&mut b.from_client, CLIENT_BUF)
            && small(&mut b.to_upstream, HEAD_BUF)
            && small(&mut b.to_client, HEAD_BUF)
        {
            self.conn.borrow_mut().give(b, CONN_POOL_MAX);
        }
    }

    /// Run the future `make` builds in a frame of this pool: the allocation of a frame that
    /// finished (a `make` of the same type) when there is one, a new one otherwise. A client
    /// connection serves its requests in one, so that its idle state is a small task without
    /// its requests' large one, and a keep-alive request costs no allocation.
    pub fn pooled<F: Future + 'static>(&self, make: impl FnOnce() -> F) -> Pooled<'_, F> {
        let reused = self.frames.borrow_mut().take();
        let frame = match reused.map(|b| b.downcast::<Option<F>>()) {
            Some(Ok(mut b)) => {
                *b = Some(make());
                b
            }
            _ => Box::new(Some(make())),
        };
        Pooled {
            pool: self,
            frame: Some(Box::into_pin(frame)),
        }
    }

    /// Off the request path, on the worker's one-second tick: free what the pools held unused
    /// since the last trim, down to their idle bound (`IDLE_KEEP` frames and buffer sets,
    /// `RELAY_IDLE` relay buffers). A crowd that came and went leaves the bound behind, not
    /// its peak. Whether anything was freed.
    pub fn trim(&self) -> bool {
        let freed = self.frames.borrow_mut().trim(IDLE_KEEP)
            + self.conn.borrow_mut().trim(IDLE_KEEP)
            + self.relay.borrow_mut().trim(RELAY_IDLE)
            + self.iovecs.borrow_mut().trim(IDLE_KEEP);
        freed > 0
    }

    pub fn take_iovecs(&self) -> Box<[libc::iovec; 2]> {
        self.iovecs.borrow_mut().take().unwrap_or_else(|| {
            let empty = libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            };
            Box::new([empty; 2])
        })
    }

    pub fn give_iovecs(&self, iov: Box<[libc::iovec; 2]>) {
        self.iovecs.borrow_mut().give(iov, CONN_POOL_MAX);
    }
}

/// A future running in a frame of a worker's pool (`BufferPools::pooled`); the frame goes back
/// to the pool when it is dropped.
pub struct Pooled<'a, F: Future + 'static> {
    pool: &'a BufferPools,
    frame: Option<Pin<Box<Option<F>>>>,
}

impl<F: Future + 'static> Future for Pooled<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.frame.as_mut().and_then(|f| f.as_mut().as_pin_mut()) {
            Some(f) => f.poll(cx),
            None => Poll::Pending,
        }
    }
}

impl<F: Future + 'static> Drop for Pooled<'_, F> {
    fn drop(&mut self) {
        let Some(mut frame) = self.frame.take() else {
            return;
        };
        // The future is dropped in place, where it was pinned.
        frame.set(None);
        let mut frames = self.pool.frames.borrow_mut();
        if frames.len() < FRAME_POOL_MAX {
            // SAFETY: the frame holds `None`: nothing pinned lives in it any more, so its
            // allocation may move out of the `Pin` and hold another future later.
            let frame = unsafe { Pin::into_inner_unchecked(frame) };
            frames.give(frame, FRAME_POOL_MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;

    #[test]
    fn a_trim_frees_only_what_sat_unused_down_to_the_idle_bound() {
        let mut k = Kept::default();
        for i in 0..100 {
            k.give(i, 1000);
        }
        // Nothing was taken since the (first) trim's count began at 0: nothing goes.
        assert_eq!(k.trim(8), 0);
        assert_eq!(k.len(), 100);
        // 30 in use for a while and back: 70 sat unused through the interval, and go (the
        // idle bound of 8 is below what stays).
        let taken: Vec<_> = (0..30).map(|_| k.take().unwrap()).collect();
        for t in taken {
            k.give(t, 1000);
        }
        assert_eq!(k.trim(8), 70);
        assert_eq!(k.len(), 30);
        // A quiet interval: everything above the idle bound goes.
        assert_eq!(k.trim(8), 22);
        assert_eq!(k.len(), 8);
        assert_eq!(k.trim(8), 0);
        // In steady use (all taken at some point), nothing goes.
        let taken: Vec<_> = (0..8).map(|_| k.take().unwrap()).collect();
        for t in taken {
            k.give(t, 1000);
        }
        assert_eq!(k.trim(0), 0);
    }
}
