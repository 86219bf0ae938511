//! A worker's buffers kept for reuse: a connection or a response that ends gives its
//! buffers back, and the next one takes them (no allocation per connection or per request
//! once the pools are warm).

use bytes::BytesMut;
use std::cell::RefCell;

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

/// A client connection's own buffers: what it read, and the two heads it builds.
#[derive(Default)]
pub struct ConnBufs {
    pub from_client: BytesMut,
    pub to_upstream: BytesMut,
    pub to_client: BytesMut,
}

/// The worker's pools of reusable buffers.
#[derive(Default)]
pub struct BufferPools {
    relay: RefCell<Vec<BytesMut>>,
    conn: RefCell<Vec<ConnBufs>>,
    /// Boxed iovec pairs for cache hits written with one `writev` (reused: a hit allocates
    /// nothing).
    #[allow(clippy::vec_box)] // each pair is handed to the runtime: its address must not move
    iovecs: RefCell<Vec<Box<[libc::iovec; 2]>>>,
    /// Pipes for spliced bodies.
    pub pipes: crate::splice::Pipes,
}

impl BufferPools {
    /// A relay buffer with at least `RELAY_BUF` bytes of room.
    pub fn take_buf(&self) -> BytesMut {
        self.relay
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| BytesMut::with_capacity(RELAY_BUF))
    }

    /// Give a relay buffer back for reuse.
    pub fn give_buf(&self, mut b: BytesMut) {
        b.clear();
        // Reclaims the consumed front in place (no allocation for a buffer we own alone).
        b.reserve(RELAY_BUF);
        let mut bufs = self.relay.borrow_mut();
        if bufs.len() < BUF_POOL_MAX {
            bufs.push(b);
        }
    }

    /// Buffers for a new client connection.
    pub fn take_conn_bufs(&self) -> ConnBufs {
        self.conn.borrow_mut().pop().unwrap_or_else(|| ConnBufs {
            from_client: BytesMut::with_capacity(CLIENT_BUF),
            to_upstream: BytesMut::with_capacity(HEAD_BUF),
            to_client: BytesMut::with_capacity(HEAD_BUF),
        })
    }

    /// Give a finished connection's buffers back, unless one grew large (an upload or a
    /// re-chunked body): those are freed so idle memory stays small.
    pub fn give_conn_bufs(&self, mut b: ConnBufs) {
        if b.from_client.capacity() == 0
            && b.to_upstream.capacity() == 0
            && b.to_client.capacity() == 0
        {
            // A connection that ended waiting between requests: its set is in the pool.
            return;
        }
        let small = |x: &mut BytesMut, size: usize| {
            x.clear();
            x.reserve(size);
            x.capacity() <= 2 * size && x.capacity() >= size
        };
        if small(&mut b.from_client, CLIENT_BUF)
            && small(&mut b.to_upstream, HEAD_BUF)
            && small(&mut b.to_client, HEAD_BUF)
        {
            let mut pool = self.conn.borrow_mut();
            if pool.len() < CONN_POOL_MAX {
                pool.push(b);
            }
        }
    }

    pub fn take_iovecs(&self) -> Box<[libc::iovec; 2]> {
        self.iovecs.borrow_mut().pop().unwrap_or_else(|| {
            let empty = libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            };
            Box::new([empty; 2])
        })
    }

    pub fn give_iovecs(&self, iov: Box<[libc::iovec; 2]>) {
        let mut pool = self.iovecs.borrow_mut();
        if pool.len() < CONN_POOL_MAX {
            pool.push(iov);
        }
    }
}
