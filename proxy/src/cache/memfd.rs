//! The experiment of issue 10: stored bodies also kept in a per-worker memfd, so a hit can be
//! sent with sendfile(2) from the page cache (no copy through user space, as nginx serves its
//! cache files) instead of `writev` from memory. Switched on per route with `memfd = true`
//! (quick mode: `--cache-memfd`); off by default. Measured with `benches/cache_vs_peers.sh`
//! (targets `ours` and `ours-memfd`, same run, interleaved).
//!
//! Bodies are laid out one after another at page-aligned offsets; a removed body's pages are
//! given back with `fallocate(PUNCH_HOLE)`, so the file holds only live bodies (its size only
//! grows, as a sparse file). The body stays in memory as well (streaming readers, stale hits
//! and validation read it there): in this experiment a memfd body counts once against
//! `max_bytes` but takes its bytes twice.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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
    fd: OwnedFd,
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
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(BodyFile { fd, next: 0 })
    }

    /// Copy `body` into the file: its range, or `None` if the write failed (the entry is then
    /// served from memory).
    pub fn put(&mut self, body: &[u8]) -> Option<FileRange> {
        let offset = self.next;
        let mut done = 0;
        while done < body.len() {
            let rest = &body[done..];
            // SAFETY: `rest` is valid for its length; the fd is ours.
            let n = unsafe {
                libc::pwrite(
                    self.fd.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    (offset + done as u64) as libc::off_t,
                )
            };
            if n <= 0 {
                self.release(offset, done as u64);
                return None;
            }
            done += n as usize;
        }
        self.next = offset + page_round(body.len() as u64);
        Some(FileRange {
            fd: self.fd.as_raw_fd(),
            offset,
        })
    }

    /// Give the pages of a removed body back.
    pub fn release(&mut self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        // SAFETY: a plain syscall on our fd. A failure leaves the pages in use until the
        // worker ends: nothing else depends on it.
        unsafe {
            libc::fallocate(
                self.fd.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                page_round(len) as libc::off_t,
            );
        }
    }
}
