//! Stored bodies in a per-worker memfd (issue 10's measurement: sendfile from the page cache
//! beat `writev` from memory for bodies over [`FILE_BODY_MIN`], memory won below it; see
//! docs/CONFIGURATION.md, the response cache). A hit of such a body is sent with sendfile(2),
//! no copy through user space, as nginx serves its cache files.
//!
//! Each body is written once at a page-aligned offset, then mapped read-only: the entry's
//! `Bytes` is that mapping, so the page cache holds the only copy (streaming readers, stale
//! hits and validation read the mapping). When the last `Bytes` of a body goes (the entry is
//! removed and no response is still being sent from it), the mapping is unmapped and its pages
//! are punched out of the file (`fallocate(PUNCH_HOLE)`): a body being sent is never cut
//! short, and the file holds only live bodies (its size only grows, as a sparse file).

use bytes::Bytes;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Bodies at least this long go to the file. Below it `writev` from memory costs less CPU per
/// hit than `send` + `sendfile` (two syscalls and page references instead of one copy):
/// measured at 2 KiB and 8 KiB with `TARGETS="ours ours-memory" SIZES="2k 8k"`.
pub const FILE_BODY_MIN: usize = 4096;

const PAGE: u64 = 4096;

/// Where a stored body lies in the worker's body file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRange {
    pub fd: RawFd,
    pub offset: u64,
}

/// One worker's body file.
#[derive(Debug)]
pub struct BodyFile {
    fd: Arc<OwnedFd>,
    /// Where the next body goes (page-aligned).
    next: u64,
}

fn page_round(n: u64) -> u64 {
    n.div_ceil(PAGE) * PAGE
}

impl BodyFile {
    pub fn new() -> io::Result<BodyFile> {
        // SAFETY: a plain syscall with a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"proxy-cache".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: memfd_create returned a new descriptor nobody else owns.
        let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(BodyFile { fd, next: 0 })
    }

    /// Move `body` into the file: the mapped copy and its range, or `None` (a write or the
    /// mapping failed: the body stays in memory).
    pub fn put(&mut self, body: &[u8]) -> Option<(Bytes, FileRange)> {
        let offset = self.next;
        let len = body.len() as u64;
        let fd = self.fd.as_raw_fd();
        let mut done = 0;
        while done < body.len() {
            let rest = &body[done..];
            // SAFETY: `rest` is valid for its length; the fd is ours.
            let n = unsafe {
                libc::pwrite(
                    fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    (offset + done as u64) as libc::off_t,
                )
            };
            if n <= 0 {
                punch(fd, offset, done as u64);
                return None;
            }
            done += n as usize;
        }
        let map_len = page_round(len) as usize;
        // SAFETY: a read-only shared mapping of pages of our file that were just written.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            punch(fd, offset, len);
            return None;
        }
        self.next = offset + map_len as u64;
        let mapped = Mapped {
            ptr: ptr.cast(),
            len: body.len(),
            map_len,
            offset,
            file: self.fd.clone(),
        };
        Some((Bytes::from_owner(mapped), FileRange { fd, offset }))
    }
}

/// A body's read-only mapping; dropping it unmaps it and gives its pages back.
struct Mapped {
    ptr: *const u8,
    len: usize,
    map_len: usize,
    offset: u64,
    file: Arc<OwnedFd>,
}

// SAFETY: the mapping is process-wide and read-only; nothing in it is tied to a thread.
unsafe impl Send for Mapped {}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `map_len >= len` readable bytes until `drop`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; the file is still open (we hold it).
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.map_len) };
        punch(self.file.as_raw_fd(), self.offset, self.map_len as u64);
    }
}

/// Give the pages of `len` bytes at `offset` back. A failure leaves them in use until the
/// worker ends: nothing else depends on it.
fn punch(fd: RawFd, offset: u64, len: u64) {
    if len == 0 {
        return;
    }
    // SAFETY: a plain syscall on an open fd.
    unsafe {
        libc::fallocate(
            fd,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            page_round(len) as libc::off_t,
        );
    }
}
