//! Stored bodies in a per-worker memfd (issue 10's measurement: sendfile from the page cache
//! beat `writev` from memory for bodies over [`FILE_BODY_MIN`], memory won below it; see
//! docs/CONFIGURATION.md, the response cache). A hit of such a body is sent with sendfile(2),
//! no copy through user space, as nginx serves its cache files.
//!
//! The file is mapped read-only once, whole, when the store is made: the kernel allows
//! `vm.max_map_count` (65,530 by default) mappings to the whole process, workers, stores and
//! the allocator together, and a mapping per body ran that out at ~65,000 bodies (the next
//! `malloc` that needed a mapping failed, an abort). The mapping spans [`span`] bytes of the
//! file, reserved address space only: pages exist where bodies are written.
//!
//! Each body is written once at a page-aligned offset taken from the ranges free in that span
//! (best fit), and its entry's `Bytes` is a view of the mapping there, so the page cache holds
//! the only copy (streaming readers, stale hits and validation read the mapping). When the
//! last `Bytes` of a body goes (the entry is removed and no response is still being sent from
//! it), its pages are punched out of the file (`fallocate(PUNCH_HOLE)`) and its range is free
//! again: a body being sent is never cut short, the file holds only live bodies, and its
//! offsets stay within the span. A range whose punch fails is never used again (pages
//! sendfile handed to a socket would be written over while it sends them). A body that finds no free range, or whose write fails, stays
//! in memory.

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Bodies at least this long go to the file. Below it `writev` from memory costs less CPU per
/// hit than `send` + `sendfile` (two syscalls and page references instead of one copy):
/// measured at 2 KiB and 8 KiB with `TARGETS="ours ours-memory" SIZES="2k 8k"`.
pub const FILE_BODY_MIN: usize = 4096;

const PAGE: u64 = 4096;

/// The smallest span worth a file: below it, no file (every body in memory).
const SPAN_MIN: u64 = 1 << 20;

/// The most iovecs one `pwritev` takes (Linux's `UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// Where a stored body lies in the worker's body file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRange {
    pub fd: RawFd,
    pub offset: u64,
}

/// The bytes of file a store of `max_bytes` maps. Its bodies take at most about twice their
/// counted bytes of file (each is rounded up to whole pages, and is at least a page long); the
/// other half leaves room for bodies removed while a response is still sent from them, and
/// for the gaps between free ranges.
pub fn span(max_bytes: u64) -> u64 {
    page_round(max_bytes.saturating_mul(4)).max(SPAN_MIN)
}

/// One worker's body file.
#[derive(Debug)]
pub struct BodyFile {
    arena: Arc<Arena>,
}

/// The file, its one mapping and its free ranges, shared by the store and every body's
/// `Bytes` (the last one to go unmaps and closes it).
struct Arena {
    fd: OwnedFd,
    base: *const u8,
    span: u64,
    free: Mutex<Free>,
    /// Ranges whose pages could not be punched out: never reused ([`Arena::release`]).
    punch_failures: AtomicU64,
}

// SAFETY: the mapping is process-wide and read-only; the free ranges are behind a mutex.
unsafe impl Send for Arena {}
// SAFETY: as above: nothing but the mutex is changed through a shared reference.
unsafe impl Sync for Arena {}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("fd", &self.fd)
            .field("span", &self.span)
            .finish_non_exhaustive()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: our mapping, unmapped once: no body's `Bytes` is left (each holds the arena).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.span as usize) };
    }
}

fn page_round(n: u64) -> u64 {
    n.div_ceil(PAGE).saturating_mul(PAGE)
}

impl BodyFile {
    /// A body file for a store of `max_bytes` (see [`span`]). Where the address space is short
    /// of that span, a smaller one (fewer bodies in the file, the rest in memory).
    pub fn new(max_bytes: u64) -> io::Result<BodyFile> {
        // SAFETY: a plain syscall with a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"proxy-cache".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: memfd_create returned a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut span = span(max_bytes);
        loop {
            // SAFETY: a read-only shared mapping of our own file: pages past its end are never
            // read (only written bodies are), so nothing faults.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    span as usize,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if ptr != libc::MAP_FAILED {
                let arena = Arena {
                    fd,
                    base: ptr.cast(),
                    span,
                    free: Mutex::new(Free::new(span)),
                    punch_failures: AtomicU64::new(0),
                };
                return Ok(BodyFile {
                    arena: Arc::new(arena),
                });
            }
            let e = io::Error::last_os_error();
            if span / 2 < SPAN_MIN {
                return Err(e);
            }
            span = page_round(span / 2);
        }
    }

    /// Ranges left out of use because their pages could not be punched out of the file.
    pub fn punch_failures(&self) -> u64 {
        self.arena.punch_failures.load(Ordering::Relaxed)
    }

    /// Copy the body `parts` (its bytes in order) into the file: a view of it there and its
    /// range, or `None` (no free range fits it, or a write failed: the body stays in memory).
    pub fn put(&mut self, parts: &[&[u8]]) -> Option<(Bytes, FileRange)> {
        let a = &self.arena;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let size = page_round(len as u64);
        let offset = a
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(size)?;
        let fd = a.fd.as_raw_fd();
        if !write_at(fd, parts, offset) {
            a.release(offset, size);
            return None;
        }
        let stored = Stored {
            arena: a.clone(),
            offset,
            len,
            size,
        };
        Some((Bytes::from_owner(stored), FileRange { fd, offset }))
    }
}

/// Write all of `parts`, in order, at `offset` of the file: one `pwritev` for a body in many
/// blocks (a fill's), more only if the kernel takes part of it. `false`: a write failed (no
/// room in memory).
fn write_at(fd: RawFd, parts: &[&[u8]], offset: u64) -> bool {
    let mut iov: Vec<libc::iovec> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        })
        .collect();
    let (mut first, mut at) = (0, offset);
    while first < iov.len() {
        let rest = &iov[first..iov.len().min(first + IOV_MAX)];
        // SAFETY: every iovec points into a part, valid for its length; the fd is ours.
        let n = unsafe { libc::pwritev(fd, rest.as_ptr(), rest.len() as i32, at as libc::off_t) };
        if n <= 0 {
            return false;
        }
        at += n as u64;
        let mut n = n as usize;
        while n > 0 && n >= iov[first].iov_len {
            n -= iov[first].iov_len;
            first += 1;
        }
        if n > 0 {
            let v = &mut iov[first];
            // SAFETY: `n` is less than the iovec's length: still within its part.
            v.iov_base = unsafe { v.iov_base.cast::<u8>().add(n) }.cast();
            v.iov_len -= n;
        }
    }
    true
}

impl Arena {
    /// Give `size` bytes at `offset` back: their pages out of the file, their range free.
    /// Pages sendfile handed to a socket stay referenced by it until sent (a slow client's):
    /// the punch detaches them from the file, so a body written there next is not what that
    /// client gets. A range whose punch failed is never used again: counted, and bounded by
    /// the failures (its pages stay in the file until the worker ends).
    fn release(&self, offset: u64, size: u64) {
        if !punch(self.fd.as_raw_fd(), offset, size) {
            self.punch_failures.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        free.give(offset, size);
    }
}

/// A body in the file: its view of the mapping; dropping it gives its range back.
struct Stored {
    arena: Arc<Arena>,
    offset: u64,
    len: usize,
    /// Its bytes of file (whole pages).
    size: u64,
}

impl AsRef<[u8]> for Stored {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `offset + len` lies within the mapping, written before this view was made,
        // and no other body is written there until this one is dropped.
        unsafe { std::slice::from_raw_parts(self.arena.base.add(self.offset as usize), self.len) }
    }
}

impl Drop for Stored {
    fn drop(&mut self) {
        self.arena.release(self.offset, self.size);
    }
}

/// Give the pages of `len` bytes at `offset` back, out of the file (sockets still sending
/// them keep them apart from it). `false`: the punch failed, the pages are still the file's.
fn punch(fd: RawFd, offset: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    // SAFETY: a plain syscall on an open fd.
    let r = unsafe {
        libc::fallocate(
            fd,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            page_round(len) as libc::off_t,
        )
    };
    r == 0
}

/// The free ranges of a span, by offset (to join neighbours) and by size (best fit: the
/// smallest range that fits, the lowest of those, keeps large ranges for large bodies).
#[derive(Debug)]
struct Free {
    by_offset: BTreeMap<u64, u64>,
    by_size: BTreeSet<(u64, u64)>,
}

impl Free {
    fn new(span: u64) -> Free {
        let mut f = Free {
            by_offset: BTreeMap::new(),
            by_size: BTreeSet::new(),
        };
        f.insert(0, span);
        f
    }

    fn insert(&mut self, offset: u64, size: u64) {
        self.by_offset.insert(offset, size);
        self.by_size.insert((size, offset));
    }

    fn delete(&mut self, offset: u64, size: u64) {
        self.by_offset.remove(&offset);
        self.by_size.remove(&(size, offset));
    }

    /// The offset of `size` free bytes, now taken.
    fn take(&mut self, size: u64) -> Option<u64> {
        let &(have, offset) = self.by_size.range((size, 0)..).next()?;
        self.delete(offset, have);
        if have > size {
            self.insert(offset + size, have - size);
        }
        Some(offset)
    }

    /// `size` bytes at `offset` are free again, joined with the free ranges they touch.
    fn give(&mut self, mut offset: u64, mut size: u64) {
        let before = self
            .by_offset
            .range(..offset)
            .next_back()
            .map(|(&o, &s)| (o, s));
        if let Some((o, s)) = before.filter(|&(o, s)| o + s == offset) {
            self.delete(o, s);
            offset = o;
            size += s;
        }
        let after = self.by_offset.get(&(offset + size)).copied();
        if let Some(s) = after {
            self.delete(offset + size, s);
            size += s;
        }
        self.insert(offset, size);
    }
}

#[cfg(test)]
mod tests {
    use super::{BodyFile, Free, IOV_MAX};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_body_in_more_parts_than_one_write_takes_reads_back_whole() {
        let body: Vec<u8> = (0..(IOV_MAX * 3 / 2) * 7)
            .map(|i| (i % 251) as u8)
            .collect();
        let parts: Vec<&[u8]> = body.chunks(7).chain([&[][..]]).collect();
        let mut f = BodyFile::new(1 << 20).expect("a body file");
        let (stored, range) = f.put(&parts).expect("room");
        assert_eq!(&stored[..], &body[..]);
        let mut back = vec![0u8; body.len()];
        // SAFETY: a read into our buffer from our open file.
        let n = unsafe {
            libc::pread(
                range.fd,
                back.as_mut_ptr().cast(),
                back.len(),
                range.offset as libc::off_t,
            )
        };
        assert_eq!(n, body.len() as isize);
        assert_eq!(back, body, "the file holds it");
    }

    #[test]
    fn a_range_whose_pages_could_not_be_punched_is_not_reused() {
        // Pages sendfile handed to a socket stay referenced until sent: only the punch
        // detaches them from the file before the range is written again.
        let mut f = BodyFile::new(1 << 20).expect("a body file");
        let span = f.arena.span;
        let (stored, range) = f.put(&[&[7u8; 5000]]).expect("room");
        // The file's descriptor now names /dev/null (the mapping keeps the file): the punch
        // fails.
        let null = std::fs::File::open("/dev/null").expect("/dev/null");
        // SAFETY: both descriptors are open; the arena's is closed once, by its owner.
        assert!(unsafe { libc::dup2(null.as_raw_fd(), range.fd) } >= 0);
        drop(stored);
        let free = f.arena.free.lock().unwrap();
        let free: u64 = free.by_offset.values().sum();
        assert_eq!(free, span - 8192, "the range is not free again");
        assert_eq!(f.punch_failures(), 1);
    }

    #[test]
    fn free_ranges_fit_best_and_join_again() {
        let mut f = Free::new(100);
        assert_eq!(f.take(10), Some(0));
        assert_eq!(f.take(20), Some(10));
        assert_eq!(f.take(5), Some(30));
        assert_eq!(f.take(70), None, "65 left");
        f.give(10, 20);
        // Best fit: the 20 freed at 10, not the 65 at 35.
        assert_eq!(f.take(15), Some(10));
        f.give(0, 10);
        f.give(25, 5);
        f.give(10, 15);
        f.give(30, 5);
        assert_eq!(f.by_offset.len(), 1, "all joined: {:?}", f.by_offset);
        assert_eq!(f.take(100), Some(0));
    }
}
