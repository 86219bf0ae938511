//! Vendored change: multishot receives into a ring of provided buffers.
//!
//! One `IORING_OP_RECV` with `IORING_RECV_MULTISHOT` stays armed on a socket and posts a
//! completion per arrival, each in a buffer the kernel picks from the thread's buffer ring: no
//! submission, no failed first attempt and no poll to arm per read, and an idle connection
//! holds no buffer. The reader copies what arrived into its own buffer and gives the ring
//! buffer back at once.
//!
//! The state of each socket's receive lives here, outside the one-shot `Ops` slab, because one
//! submission completes many times. A reader that falls behind is bounded: once
//! `QUEUE_CAP` arrivals wait unread the receive is canceled, and armed again when the reader
//! has caught up. The ring is shared: while fewer than `ARM_MIN` of its buffers are free, a
//! read that would arm a receive is a plain one-shot read into the reader's buffer instead,
//! and so is the next read of a socket whose receive the kernel ended for want of a buffer
//! (ENOBUFS). A few sockets taking most of the ring (large bodies arriving while their
//! readers are busy elsewhere) thus leave the others reading as without multishot.

use std::{
    alloc::{alloc_zeroed, dealloc, Layout},
    cmp::Reverse,
    collections::{BinaryHeap, VecDeque},
    io,
    os::unix::io::RawFd,
    sync::atomic::{AtomicU16, Ordering},
    task::{Context, Poll, Waker},
};

use io_uring::{cqueue, opcode, squeue, types};

/// Tags a multishot receive's user_data (below the reserved values near `u64::MAX`).
pub(crate) const MULTI_TAG: u64 = 1 << 62;

/// Buffers in each thread's ring, and their size: 2 MiB per thread, shared by all its sockets.
const RING_ENTRIES: u16 = 128;
const BUF_SIZE: usize = 16 * 1024;
/// The buffer group id of the ring.
pub(crate) const BGID: u16 = 0x6d6f;
/// Unread arrivals per socket before its receive is canceled.
const QUEUE_CAP: usize = 4;
/// Entries the registry keeps room for when it gives a crowd's room back (`Multi::shrink`):
/// about 56 KiB, so a thread that serves a few hundred sockets does not grow again each time.
const KEEP_SLOTS: usize = 1024;
/// Free buffers the ring must have for a receive to be armed.
const ARM_MIN: u16 = RING_ENTRIES / 4;
/// `IORING_REGISTER_PBUF_RING`, and its flag for incremental consumption (kernel 6.12+).
const IORING_REGISTER_PBUF_RING: libc::c_uint = 22;
const IOU_PBUF_RING_INC: u16 = 2;
/// In a completion of an incrementally consumed ring: the kernel goes on filling this buffer.
const IORING_CQE_F_BUF_MORE: u32 = 1 << 4;

/// `struct io_uring_buf_reg`.
#[repr(C)]
struct BufReg {
    ring_addr: u64,
    ring_entries: u32,
    bgid: u16,
    flags: u16,
    resv: [u64; 3],
}

/// What became of one buffer of an incrementally consumed ring since it was provided.
#[derive(Clone, Copy)]
struct Slices {
    /// Bytes the kernel has put in it (the next arrival starts there).
    filled: u32,
    /// Arrivals in it not read whole yet.
    unread: u16,
    /// The kernel may put more in it (no completion without `IORING_CQE_F_BUF_MORE` yet).
    kernel: bool,
}

/// The thread's ring of provided buffers.
///
/// Where the kernel consumes them incrementally (6.12+), arrivals are packed one after the
/// other into the buffer at the ring's head: a 60-byte request takes 60 bytes of a buffer,
/// not a whole 16 KiB one, so thousands of connections with a request each waiting share a
/// few buffers instead of running the ring dry at 128. A buffer goes back to the kernel once
/// the kernel has filled it and every arrival in it has been read.
pub(crate) struct BufRing {
    ring: *mut types::BufRingEntry,
    bufs: *mut u8,
    tail: u16,
    /// Buffers the kernel may pick (given to it and not yet come back in a completion).
    free: u16,
    /// Per buffer, where the kernel consumes them incrementally; empty otherwise.
    slices: Box<[Slices]>,
}

impl BufRing {
    fn ring_layout() -> Layout {
        let size = RING_ENTRIES as usize * std::mem::size_of::<types::BufRingEntry>();
        Layout::from_size_align(size, 4096).expect("ring layout")
    }

    fn bufs_layout() -> Layout {
        Layout::from_size_align(RING_ENTRIES as usize * BUF_SIZE, 4096).expect("bufs layout")
    }

    /// Allocate the ring and its buffers, register them with `uring`, provide every buffer.
    pub(crate) fn new(uring: &io_uring::IoUring) -> io::Result<BufRing> {
        // SAFETY: non-zero sizes; both blocks are freed in `Drop` (after the ring is torn
        // down or the group unregistered, see `UringInner::drop`).
        let ring = unsafe { alloc_zeroed(Self::ring_layout()) } as *mut types::BufRingEntry;
        if ring.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let bufs = unsafe { alloc_zeroed(Self::bufs_layout()) };
        if bufs.is_null() {
            unsafe { dealloc(ring as *mut u8, Self::ring_layout()) };
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let mut me = BufRing {
            ring,
            bufs,
            tail: 0,
            free: 0,
            slices: Box::new([]),
        };
        match Self::register(uring, ring as u64, IOU_PBUF_RING_INC) {
            Ok(()) => {
                me.slices = vec![
                    Slices {
                        filled: 0,
                        unread: 0,
                        kernel: true,
                    };
                    RING_ENTRIES as usize
                ]
                .into_boxed_slice()
            }
            // Before 6.12: whole buffers.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                Self::register(uring, ring as u64, 0)?
            }
            Err(e) => return Err(e),
        }
        for bid in 0..RING_ENTRIES {
            me.push(bid);
        }
        me.publish();
        Ok(me)
    }

    /// Register the ring `ring_addr` as group `BGID` with `flags` (io-uring 0.6 has no flags).
    fn register(uring: &io_uring::IoUring, ring_addr: u64, flags: u16) -> io::Result<()> {
        use std::os::unix::io::AsRawFd;
        let reg = BufReg {
            ring_addr,
            ring_entries: RING_ENTRIES as u32,
            bgid: BGID,
            flags,
            resv: [0; 3],
        };
        // SAFETY: `reg` describes a page-aligned ring of RING_ENTRIES entries that lives until
        // unregistered (see `UringInner::drop`); the kernel copies `reg` itself.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                uring.as_raw_fd(),
                IORING_REGISTER_PBUF_RING,
                &reg as *const BufReg,
                1,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether the kernel packs arrivals into buffers (incremental consumption).
    pub(crate) fn incremental(&self) -> bool {
        !self.slices.is_empty()
    }

    /// A completion brought `len` > 0 bytes in buffer `bid`: where in it they start.
    fn arrived(&mut self, bid: u16, len: u32, flags: u32) -> u32 {
        let Some(s) = self.slices.get_mut(bid as usize) else {
            self.free = self.free.saturating_sub(1);
            return 0;
        };
        let at = s.filled;
        s.filled += len;
        s.unread += 1;
        if flags & IORING_CQE_F_BUF_MORE == 0 {
            s.kernel = false;
            self.free = self.free.saturating_sub(1);
        }
        at
    }

    /// An arrival in buffer `bid` was read whole (or dropped): give the buffer back to the
    /// kernel once nothing in it is left to read and the kernel has finished filling it.
    pub(crate) fn release(&mut self, bid: u16) {
        if let Some(s) = self.slices.get_mut(bid as usize) {
            s.unread = s.unread.saturating_sub(1);
            if s.unread > 0 || s.kernel {
                return;
            }
            *s = Slices {
                filled: 0,
                unread: 0,
                kernel: true,
            };
        }
        self.recycle(bid);
    }

    fn push(&mut self, bid: u16) {
        let slot = (self.tail & (RING_ENTRIES - 1)) as usize;
        // SAFETY: slot < RING_ENTRIES; the kernel reads entries only up to the published tail.
        let e = unsafe { &mut *self.ring.add(slot) };
        e.set_addr(self.buf_ptr(bid) as u64);
        e.set_len(BUF_SIZE as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        self.free += 1;
    }

    fn publish(&self) {
        // SAFETY: the tail field of the ring's first entry, shared with the kernel.
        let tail = unsafe { &*(types::BufRingEntry::tail(self.ring) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }

    /// Give buffer `bid` back to the kernel.
    fn recycle(&mut self, bid: u16) {
        self.push(bid);
        self.publish();
    }

    fn buf_ptr(&self, bid: u16) -> *mut u8 {
        // SAFETY: bid < RING_ENTRIES (the kernel only hands out the ids given to it).
        unsafe { self.bufs.add(bid as usize * BUF_SIZE) }
    }

    /// The `len` bytes of buffer `bid` from `at` on.
    pub(crate) fn bytes(&self, bid: u16, at: u32, len: usize) -> &[u8] {
        let at = (at as usize).min(BUF_SIZE);
        // SAFETY: the kernel wrote `len` bytes there (at + len <= BUF_SIZE) and gave them to us.
        unsafe { std::slice::from_raw_parts(self.buf_ptr(bid).add(at), len.min(BUF_SIZE - at)) }
    }
}

impl BufRing {
    /// Give up the ring and its buffers without freeing them: for a ring the kernel may still
    /// use (its group could not be unregistered). About 2 MiB, once per thread at most.
    pub(crate) fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for BufRing {
    /// Only for a ring no longer registered (or never registered): see `UringInner::drop`.
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts.
        unsafe {
            dealloc(self.ring as *mut u8, Self::ring_layout());
            dealloc(self.bufs, Self::bufs_layout());
        }
    }
}

/// One socket's multishot receive.
#[derive(Default)]
pub(crate) struct Entry {
    /// Arrivals not read yet. A result > 0 holds bytes in a ring buffer.
    queue: VecDeque<Arrival>,
    waker: Option<Waker>,
    /// A receive is in the kernel (its last completion, without F_MORE, not seen yet).
    armed: bool,
    /// A cancel for it was submitted.
    canceling: bool,
    /// The kernel ran out of buffers: the next read is a plain one.
    starved: bool,
    /// The reader is gone: recycle what arrives and free the entry at the last completion.
    dropped: bool,
    /// Waits only: each wait (`poll_ready`) arms a single receive into the ring, and a read
    /// with nothing queued is a plain one-shot receive into the reader's buffer (a socket
    /// that may never wait twice: nothing stays armed, so nothing is canceled at its close).
    once: bool,
    /// Handed out and not freed yet (a closed socket's entry stays live until its receive's
    /// last completion): the kernel may name it, so it never moves.
    live: bool,
}

/// A completion of a socket's receive, kept until read.
#[derive(Clone, Copy)]
struct Arrival {
    res: i32,
    flags: u32,
    /// Where in its buffer the bytes start (0 unless the ring is consumed incrementally).
    at: u32,
}

impl Arrival {
    /// The ring buffer holding this arrival's bytes, if it has any.
    fn buffer(&self) -> Option<u16> {
        cqueue::buffer_select(self.flags).filter(|_| self.res > 0)
    }
}

/// What a read finds.
pub(crate) enum Next<'a> {
    /// Bytes arrived (a ring buffer's, from `offset` on).
    Data(&'a [u8]),
    Eof,
    Err(io::Error),
    /// No buffer was left: read without one this time.
    Plain,
}

/// What a read of a multishot receive ends with.
pub(crate) enum Read {
    Done(io::Result<usize>),
    /// No buffer was left: read without one this time.
    Plain,
}

/// What this thread's multishot receives went through (`monoio::net::tcp::multishot_stats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MultishotStats {
    /// Receives submitted (a connection's first read, and each re-arm).
    pub armed: u64,
    /// Receives canceled because their reader fell `QUEUE_CAP` arrivals behind.
    pub capped: u64,
    /// Receives the kernel ended for want of a buffer (ENOBUFS).
    pub starved: u64,
    /// Reads done as plain one-shot receives: after ENOBUFS, or while the ring was low.
    pub plain: u64,
    /// Arrivals (completions with data).
    pub arrivals: u64,
    /// The kernel packs arrivals into the ring's buffers (incremental consumption, 6.12+).
    pub incremental: bool,
}

/// How big this thread's multishot receive registry is (`multishot_registry`, for tests).
#[doc(hidden)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MultishotRegistry {
    /// Entries handed out and not freed yet.
    pub live: usize,
    /// Entries in the table, live or free.
    pub slots: usize,
    /// Entries the table has room for.
    pub capacity: usize,
    /// Free entries that still hold a queue's allocation.
    pub queues: usize,
}

/// The thread's multishot receives and their buffer ring.
pub(crate) struct Multi {
    pub(crate) stats: MultishotStats,
    pub(crate) ring: Option<BufRing>,
    /// Setting the ring up failed once: do not try again.
    unavailable: bool,
    /// Indexed by the slot in a receive's user_data: an entry never moves while live.
    entries: Vec<Entry>,
    /// The free entries, lowest first: after a crowd the live entries gather at the bottom of
    /// the table and its free top can be cut off (`shrink`). Once per connection, not per read.
    free: BinaryHeap<Reverse<usize>>,
    /// Cancels decided while completions were being reaped, pushed after.
    pending_cancels: Vec<usize>,
}

impl Multi {
    pub(crate) const fn new() -> Multi {
        Multi {
            stats: MultishotStats {
                armed: 0,
                capped: 0,
                starved: 0,
                plain: 0,
                arrivals: 0,
                incremental: false,
            },
            ring: None,
            unavailable: false,
            entries: Vec::new(),
            free: BinaryHeap::new(),
            pending_cancels: Vec::new(),
        }
    }

    /// A new receive state for a socket, `None` if this ring cannot have one. `once`: it
    /// waits only (see `Entry::once`).
    pub(crate) fn open(&mut self, uring: &io_uring::IoUring, once: bool) -> Option<usize> {
        if self.ring.is_none() {
            if self.unavailable {
                return None;
            }
            match BufRing::new(uring) {
                Ok(r) => {
                    self.stats.incremental = r.incremental();
                    self.ring = Some(r)
                }
                Err(_) => {
                    self.unavailable = true;
                    return None;
                }
            }
        }
        let index = match self.free.pop() {
            Some(Reverse(i)) => i,
            None => {
                self.entries.push(Entry::default());
                self.entries.len() - 1
            }
        };
        let e = &mut self.entries[index];
        e.once = once;
        e.live = true;
        Some(index)
    }

    /// Entry `index` receives through a multishot receive from now on (its next arm).
    pub(crate) fn set_multishot(&mut self, index: usize) {
        self.entries[index].once = false;
    }

    /// Whether entry `index` waits only (see `Entry::once`).
    pub(crate) fn once(&self, index: usize) -> bool {
        self.entries[index].once
    }

    /// Whether the end of the stream (or an error) waits in `index`'s queue, behind whatever
    /// bytes arrived before it; Pending while its receive is armed and nothing of the kind
    /// came; `Ready(false)` when no receive is armed (nothing can arrive to tell).
    pub(crate) fn poll_ended(&mut self, index: usize, cx: &mut Context<'_>) -> Poll<bool> {
        let e = &mut self.entries[index];
        if e.queue.iter().any(|a| a.res <= 0) {
            return Poll::Ready(true);
        }
        if !e.armed || e.canceling {
            return Poll::Ready(false);
        }
        match &e.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => e.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    fn free_entry(&mut self, index: usize) {
        // The queue keeps its allocation for the next socket: a connection costs no
        // allocation here once the table is warm (`shrink` gives it back after a crowd). One
        // that grew past its cap (arrivals while its cancel was under way) goes.
        let mut queue = std::mem::take(&mut self.entries[index].queue);
        queue.clear();
        if queue.capacity() > 2 * QUEUE_CAP {
            queue = VecDeque::new();
        }
        self.entries[index] = Entry {
            queue,
            ..Entry::default()
        };
        self.free.push(Reverse(index));
    }

    /// Give back the room of entries freed since the table was last this small: the free
    /// entries above the highest live one are cut off (a live entry's slot is in its
    /// receive's user_data, so none moves), the free ones left below it drop their queues'
    /// allocations, and the table and its free list give their memory back once they are
    /// under a quarter full (down to `KEEP_SLOTS`). Off the read path: a caller's step after
    /// a crowd left (`multishot_shrink`).
    pub(crate) fn shrink(&mut self) {
        let keep = self.entries.iter().rposition(|e| e.live).map_or(0, |i| i + 1);
        self.entries.truncate(keep);
        self.free.retain(|&Reverse(i)| i < keep);
        for e in self.entries.iter_mut().filter(|e| !e.live) {
            e.queue = VecDeque::new();
        }
        if self.entries.capacity() > KEEP_SLOTS && keep < self.entries.capacity() / 4 {
            self.entries.shrink_to(keep.max(KEEP_SLOTS));
        }
        let free = self.free.len();
        if self.free.capacity() > KEEP_SLOTS && free < self.free.capacity() / 4 {
            self.free.shrink_to(free.max(KEEP_SLOTS));
        }
    }

    /// How big the table is (`multishot_registry`).
    pub(crate) fn registry(&self) -> MultishotRegistry {
        MultishotRegistry {
            live: self.entries.len() - self.free.len(),
            slots: self.entries.len(),
            capacity: self.entries.capacity(),
            queues: self
                .entries
                .iter()
                .filter(|e| !e.live && e.queue.capacity() > 0)
                .count(),
        }
    }

    /// Whether arrivals (bytes, the end of the stream, an error) wait unread for `index`.
    pub(crate) fn queued(&self, index: usize) -> bool {
        !self.entries[index].queue.is_empty()
    }

    /// Whether a receive of `index` stays armed in the kernel (armed, not being canceled, not
    /// a single wait): what arrives on the socket will reach its queue.
    pub(crate) fn armed(&self, index: usize) -> bool {
        let e = &self.entries[index];
        e.armed && !e.canceling && !e.once
    }

    /// The reader of `index` is gone. Returns whether a cancel must be submitted.
    pub(crate) fn close(&mut self, index: usize) -> bool {
        let ring = self.ring.as_mut().expect("ring of an open entry");
        let e = &mut self.entries[index];
        for a in e.queue.drain(..) {
            if let Some(bid) = a.buffer() {
                ring.release(bid);
            }
        }
        if e.armed {
            e.dropped = true;
            e.waker = None;
            !std::mem::replace(&mut e.canceling, true)
        } else {
            self.free_entry(index);
            false
        }
    }

    /// A completion for entry `index`.
    pub(crate) fn complete(&mut self, index: usize, res: i32, flags: u32) {
        let more = cqueue::more(flags);
        let ring = self.ring.as_mut().expect("ring of an open entry");
        let mut arrival = Arrival { res, flags, at: 0 };
        match (arrival.buffer(), cqueue::buffer_select(flags)) {
            (Some(bid), _) => arrival.at = ring.arrived(bid, res as u32, flags),
            // A buffer picked for no bytes: whole buffers are ours to give back; an
            // incrementally consumed one was not consumed (the kernel goes on filling it).
            (None, Some(bid)) if !ring.incremental() => {
                ring.free = ring.free.saturating_sub(1);
                ring.release(bid)
            }
            _ => {}
        }
        let e = &mut self.entries[index];
        if !more {
            e.armed = false;
            e.canceling = false;
        }
        if e.dropped {
            if let Some(bid) = arrival.buffer() {
                ring.release(bid);
            }
            if !more {
                self.free_entry(index);
            }
            return;
        }
        match res {
            r if r >= 0 => {
                self.stats.arrivals += (r > 0) as u64;
                e.queue.push_back(arrival)
            }
            r if r == -libc::ENOBUFS => {
                self.stats.starved += 1;
                e.starved = true
            }
            // Our own cancel (the reader fell behind): armed again when it catches up.
            r if r == -libc::ECANCELED => {}
            _ => e.queue.push_back(arrival),
        }
        if more && e.queue.len() >= QUEUE_CAP && !e.canceling {
            self.stats.capped += 1;
            e.canceling = true;
            self.pending_cancels.push(index);
        }
        if let Some(w) = e.waker.take() {
            w.wake();
        }
    }

    /// The receive `poll_next` or `poll_ready` asked to arm could not be submitted. `plain`:
    /// a plain read follows (`poll_next`'s case), counted as one.
    pub(crate) fn disarm(&mut self, index: usize, plain: bool) {
        self.entries[index].armed = false;
        self.stats.armed -= 1;
        self.stats.plain += plain as u64;
    }

    /// A cancel that could not be submitted now: pushed after the next reap.
    pub(crate) fn defer_cancel(&mut self, index: usize) {
        self.pending_cancels.push(index);
    }

    /// Cancels decided during the last reap, to push now.
    pub(crate) fn take_cancels(&mut self) -> Option<Vec<usize>> {
        if self.pending_cancels.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.pending_cancels))
        }
    }

    /// What the reader of `index` gets now, or Pending (then `arm` tells whether a receive
    /// must be submitted first).
    pub(crate) fn poll_next(
        &mut self,
        index: usize,
        offset: usize,
        cx: &mut Context<'_>,
        arm: &mut bool,
    ) -> Poll<Next<'_>> {
        let e = &mut self.entries[index];
        if let Some(&a) = e.queue.front() {
            return Poll::Ready(match (a.res, a.buffer()) {
                (r, Some(bid)) => {
                    let ring = self.ring.as_ref().expect("ring of an open entry");
                    Next::Data(&ring.bytes(bid, a.at, r as usize)[offset..])
                }
                (0, _) => Next::Eof,
                (r, _) if r < 0 => Next::Err(io::Error::from_raw_os_error(-r)),
                _ => Next::Err(io::Error::other("multishot receive without a buffer")),
            });
        }
        if !e.armed {
            if e.once {
                // Reads go to the socket; only a wait uses the ring.
                return Poll::Ready(Next::Plain);
            }
            let low = self.ring.as_ref().is_none_or(|r| r.free < ARM_MIN);
            if std::mem::take(&mut e.starved) || low {
                self.stats.plain += 1;
                return Poll::Ready(Next::Plain);
            }
            e.armed = true;
            self.stats.armed += 1;
            *arm = true;
        }
        match &e.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => e.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Whether the reader of `index` would find something now (bytes, the end, an error),
    /// taking nothing; Pending otherwise (then `arm` tells whether a receive must be
    /// submitted first). `Ready(false)`: no receive is armed and none may be now (the ring is
    /// low, or the kernel ran out of buffers): wait by reading into a buffer instead.
    pub(crate) fn poll_ready(&mut self, index: usize, cx: &mut Context<'_>, arm: &mut bool) -> Poll<bool> {
        let low = self.ring.as_ref().is_none_or(|r| r.free < ARM_MIN);
        let e = &mut self.entries[index];
        if !e.queue.is_empty() {
            return Poll::Ready(true);
        }
        if !e.armed {
            if e.starved || low {
                return Poll::Ready(false);
            }
            e.armed = true;
            self.stats.armed += 1;
            *arm = true;
        }
        match &e.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => e.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The bytes of `index`'s front arrival when it is data (what a read with room left after
    /// the arrival before it takes too).
    pub(crate) fn front_data(&self, index: usize) -> Option<&[u8]> {
        let a = *self.entries[index].queue.front()?;
        let bid = a.buffer()?;
        Some(self.ring.as_ref()?.bytes(bid, a.at, a.res as usize))
    }

    /// The front arrival of `index` is read up to `upto` bytes: drop it (and recycle its
    /// buffer) when it is read whole. Returns whether it was.
    pub(crate) fn consume(&mut self, index: usize, upto: usize) -> bool {
        let e = &mut self.entries[index];
        let Some(&a) = e.queue.front() else {
            return true;
        };
        if a.res > 0 && upto < a.res as usize {
            return false;
        }
        e.queue.pop_front();
        if let Some(bid) = a.buffer() {
            self.ring
                .as_mut()
                .expect("ring of an open entry")
                .release(bid);
        }
        true
    }
}

/// The submission that arms entry `index` on `fd`: a multishot receive, or for an entry that
/// waits only (`once`) a single receive into a buffer of the ring (length 0: as much as the
/// buffer the kernel picks holds).
pub(crate) fn recv_sqe(fd: RawFd, index: usize, once: bool) -> squeue::Entry {
    let sqe = if once {
        opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), 0)
            .buf_group(BGID)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
    } else {
        opcode::RecvMulti::new(types::Fd(fd), BGID).build()
    };
    sqe.user_data(MULTI_TAG | index as u64)
}

/// A cancel of entry `index`'s receive (its completion is ignored).
pub(crate) fn cancel_sqe(index: usize) -> squeue::Entry {
    opcode::AsyncCancel::new(MULTI_TAG | index as u64)
        .build()
        .user_data(super::CANCEL_USERDATA)
}

/// What this thread's multishot receives went through; zeros off io_uring or outside a runtime.
pub fn multishot_stats() -> MultishotStats {
    if !crate::driver::CURRENT.is_set() {
        return MultishotStats::default();
    }
    crate::driver::CURRENT.with(|inner| match inner {
        crate::driver::Inner::Uring(this) => super::UringInner::multi_stats(this),
        #[allow(unreachable_patterns)]
        _ => MultishotStats::default(),
    })
}

/// Give back the room of this thread's multishot receive registry that sockets since closed
/// took (it grows to the most sockets with a receive at once, about 100 bytes each): for a
/// step after a crowd of connections left, not for every close (it walks the table). Entries
/// still in use, or whose receive the kernel has not finished yet, stay where they are; new
/// sockets take the lowest free entries, so the table's top empties as connections turn over
/// and a later call gives it back. Does nothing off io_uring or outside a runtime.
pub fn multishot_shrink() {
    if !crate::driver::CURRENT.is_set() {
        return;
    }
    crate::driver::CURRENT.with(|inner| match inner {
        crate::driver::Inner::Uring(this) => super::UringInner::multi_shrink(this),
        #[allow(unreachable_patterns)]
        _ => {}
    })
}

/// How big this thread's multishot receive registry is (for tests); zeros off io_uring or
/// outside a runtime.
#[doc(hidden)]
pub fn multishot_registry() -> MultishotRegistry {
    if !crate::driver::CURRENT.is_set() {
        return MultishotRegistry::default();
    }
    crate::driver::CURRENT.with(|inner| match inner {
        crate::driver::Inner::Uring(this) => super::UringInner::multi_registry(this),
        #[allow(unreachable_patterns)]
        _ => MultishotRegistry::default(),
    })
}

/// A socket's multishot receive, for `TcpStream`'s reads.
pub(crate) struct MultiRecv {
    driver: std::rc::Rc<std::cell::UnsafeCell<super::UringInner>>,
    index: usize,
    /// Bytes of the first waiting arrival already read.
    offset: usize,
}

impl MultiRecv {
    /// A multishot receive state on the current thread's io_uring driver; `None` under the
    /// legacy driver or where the buffer ring cannot be set up. `once`: it waits only
    /// (`Entry::once`) until `set_multishot`.
    pub(crate) fn open(once: bool) -> Option<MultiRecv> {
        if !crate::driver::CURRENT.is_set() {
            return None;
        }
        crate::driver::CURRENT.with(|inner| match inner {
            crate::driver::Inner::Uring(this) => {
                super::UringInner::multi_open(this, once).map(|index| MultiRecv {
                    driver: this.clone(),
                    index,
                    offset: 0,
                })
            }
            #[allow(unreachable_patterns)]
            _ => None,
        })
    }

    /// Read what arrived on `fd` into `buf`. `Err(buf)`: the ring had no buffer left; read
    /// this once without it.
    pub(crate) async fn read<T: crate::buf::IoBufMut>(
        &mut self,
        fd: RawFd,
        mut buf: T,
    ) -> Result<crate::BufResult<usize, T>, T> {
        let (dst, cap) = (buf.write_ptr(), buf.bytes_total());
        match self.read_into(fd, dst, cap).await {
            Read::Done(Ok(n)) => {
                // SAFETY: `n` bytes were copied into the buffer.
                unsafe { buf.set_init(n) };
                Ok((Ok(n), buf))
            }
            Read::Done(Err(e)) => Ok((Err(e), buf)),
            Read::Plain => Err(buf),
        }
    }

    /// Drop up to `max` bytes of what arrived on `fd` without copying them: what a read into
    /// a buffer of `max` bytes would have taken, the buffers of the ring recycled. `None`:
    /// the ring had no buffer left (counted as a plain read, though none is made here); read
    /// instead.
    pub(crate) async fn discard(&mut self, fd: RawFd, max: usize) -> Option<std::io::Result<usize>> {
        match self.read_into(fd, std::ptr::null_mut(), max).await {
            Read::Done(res) => Some(res),
            Read::Plain => None,
        }
    }

    /// `read` into the first iovec of `buf` that has room.
    pub(crate) async fn readv<T: crate::buf::IoVecBufMut>(
        &mut self,
        fd: RawFd,
        mut buf: T,
    ) -> Result<crate::BufResult<usize, T>, T> {
        let (mut dst, mut cap) = (std::ptr::null_mut(), 0);
        // SAFETY: the buffer's own iovec array, `write_iovec_len` long.
        let iovecs = unsafe {
            std::slice::from_raw_parts(buf.write_iovec_ptr(), buf.write_iovec_len())
        };
        if let Some(v) = iovecs.iter().find(|v| v.iov_len > 0) {
            (dst, cap) = (v.iov_base as *mut u8, v.iov_len);
        }
        match self.read_into(fd, dst, cap).await {
            Read::Done(Ok(n)) => {
                // SAFETY: `n` bytes were copied into the buffer's first iovec with room.
                unsafe { buf.set_init(n) };
                Ok((Ok(n), buf))
            }
            Read::Done(Err(e)) => Ok((Err(e), buf)),
            Read::Plain => Err(buf),
        }
    }

    /// `read`, at once and without a future, when arrivals already wait (`queued`): a
    /// keep-alive connection's next request, which a wait (`ready`) saw come. `Err(buf)`
    /// when none waits, or `buf` has no room (where `read` gives `Ok(0)`): read with `read`.
    pub(crate) fn read_queued<T: crate::buf::IoBufMut>(
        &mut self,
        fd: RawFd,
        mut buf: T,
    ) -> Result<crate::BufResult<usize, T>, T> {
        let (dst, cap) = (buf.write_ptr(), buf.bytes_total());
        if cap == 0 || !self.queued() {
            return Err(buf);
        }
        // With an arrival queued the read completes in this poll: the waker is never kept.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let read = super::UringInner::multi_poll_read(
            &self.driver,
            self.index,
            fd,
            &mut self.offset,
            &mut cx,
            dst,
            cap,
        );
        match read {
            std::task::Poll::Ready(Read::Done(Ok(n))) => {
                // SAFETY: `n` bytes were copied into the buffer.
                unsafe { buf.set_init(n) };
                Ok((Ok(n), buf))
            }
            std::task::Poll::Ready(Read::Done(Err(e))) => Ok((Err(e), buf)),
            _ => Err(buf),
        }
    }

    /// Wait, holding no buffer, until a read would complete at once. `false` at once when
    /// no receive can be armed now (see `Multi::poll_ready`).
    pub(crate) async fn ready(&mut self, fd: RawFd) -> bool {
        std::future::poll_fn(|cx| super::UringInner::multi_poll_ready(&self.driver, self.index, fd, cx))
            .await
    }

    async fn read_into(&mut self, fd: RawFd, dst: *mut u8, cap: usize) -> Read {
        std::future::poll_fn(|cx| {
            super::UringInner::multi_poll_read(
                &self.driver,
                self.index,
                fd,
                &mut self.offset,
                cx,
                dst,
                cap,
            )
        })
        .await
    }
}

impl MultiRecv {
    /// Whether arrivals wait unread (what a peek of the socket can no longer see).
    pub(crate) fn queued(&self) -> bool {
        // SAFETY: the driver is this thread's; no borrow of it is held across this call.
        let inner = unsafe { &*self.driver.get() };
        inner.multi.queued(self.index)
    }

    /// See `Multi::armed`.
    pub(crate) fn armed(&self) -> bool {
        // SAFETY: the driver is this thread's; no borrow of it is held across this call.
        let inner = unsafe { &*self.driver.get() };
        inner.multi.armed(self.index)
    }

    /// Receive through a multishot receive from now on (a state opened `once`).
    pub(crate) fn set_multishot(&mut self) {
        // SAFETY: the driver is this thread's; no borrow of it is held across this call.
        let inner = unsafe { &mut *self.driver.get() };
        inner.multi.set_multishot(self.index)
    }

    /// Whether the state waits only (opened `once`, not switched).
    pub(crate) fn once(&self) -> bool {
        // SAFETY: the driver is this thread's; no borrow of it is held across this call.
        let inner = unsafe { &*self.driver.get() };
        inner.multi.once(self.index)
    }

    /// Resolves `true` once the end of the stream or an error arrived (behind any bytes),
    /// `false` at once when no receive is armed to tell (see `Multi::poll_ended`). Arms
    /// nothing and takes nothing.
    pub(crate) async fn ended(&self) -> bool {
        std::future::poll_fn(|cx| {
            // SAFETY: the driver is this thread's; no borrow of it is held across this call.
            let inner = unsafe { &mut *self.driver.get() };
            inner.multi.poll_ended(self.index, cx)
        })
        .await
    }
}

impl Drop for MultiRecv {
    fn drop(&mut self) {
        super::UringInner::multi_close(&self.driver, self.index);
    }
}
