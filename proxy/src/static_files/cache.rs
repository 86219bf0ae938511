//! The per-worker open-file cache (nginx's `open_file_cache`, on by default here).
//!
//! - Each site's root directory fd, and each file or directory looked up beneath it, is kept
//!   for [`VALID`]; after that the next request opens it again. A file changed in place is
//!   therefore served as it was for at most that long (nginx's `open_file_cache_valid`, 60 s
//!   by default there, short here).
//! - A small file's bytes (at most [`MEM_FILE_MAX`], [`MEM_TOTAL_MAX`] per worker) are read
//!   once and sent from memory: one write for head and body.
//! - Failures are not cached (nginx's `open_file_cache_errors off`), so a file that appears
//!   is served on the next request, and a missing root is found again as soon as it exists.
//! - At most [`MAX_ENTRIES`] per site; when full, expired entries go, and if none had
//!   expired, all do (bounded, simple, and only under a flood of distinct names).
//!
//! The cache is thread-local: one per worker thread, never shared, never locked.

use super::meta::{content_type, etag, ETag};
use super::open::{self, FileInfo, Kind, OpenError, Resolver};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long an opened file or root is trusted without looking again.
pub const VALID: Duration = Duration::from_secs(1);
/// Entries per site and worker.
pub const MAX_ENTRIES: usize = 4096;
/// Files up to this size are kept in memory. Measured (benches/static_vs_nginx.sh): a 64 B
/// file from memory costs ~20% less CPU than head + sendfile; a 32 KB one 50-80% more (two
/// copies of the body instead of none). Sizes in between were not measured.
pub const MEM_FILE_MAX: u64 = 8 * 1024;
/// Bytes of file contents kept in memory per worker and site.
pub const MEM_TOTAL_MAX: usize = 16 * 1024 * 1024;

/// An opened regular file and what its responses say about it.
#[derive(Debug)]
pub struct File {
    pub fd: OwnedFd,
    pub info: FileInfo,
    pub etag: ETag,
    pub last_modified: [u8; crate::http_date::LEN],
    pub content_type: &'static str,
    /// The whole file, for small ones.
    pub body: Option<Bytes>,
}

/// What a path names.
#[derive(Debug, Clone)]
pub enum Found {
    File(Rc<File>),
    Dir,
}

struct Entry {
    found: Found,
    opened: Instant,
}

/// One site's cache on one worker.
struct SiteCache {
    root_path: PathBuf,
    root: Option<(Rc<OwnedFd>, Instant)>,
    files: HashMap<Box<[u8]>, Entry>,
    mem_bytes: usize,
    resolver: Resolver,
}

thread_local! {
    static SITES: RefCell<Vec<SiteCache>> = const { RefCell::new(Vec::new()) };
}

/// Look `rel` (relative to `root`, as `path::resolve` made it) up: from the cache while it is
/// valid, else opened beneath the root. `rel` may be used as scratch and is restored.
pub fn lookup(root: &Path, rel: &mut Vec<u8>, now: Instant) -> Result<Found, OpenError> {
    SITES.with(|sites| {
        let mut sites = sites.borrow_mut();
        let i = match sites.iter().position(|s| s.root_path == root) {
            Some(i) => i,
            None => {
                sites.push(SiteCache {
                    root_path: root.to_path_buf(),
                    root: None,
                    files: HashMap::new(),
                    mem_bytes: 0,
                    resolver: Resolver::Openat2,
                });
                sites.len() - 1
            }
        };
        sites[i].lookup(rel, now)
    })
}

impl SiteCache {
    fn lookup(&mut self, rel: &mut Vec<u8>, now: Instant) -> Result<Found, OpenError> {
        if let Some(e) = self.files.get(&rel[..]) {
            if now.saturating_duration_since(e.opened) < VALID {
                return Ok(e.found.clone());
            }
        }
        let root = self.root_fd(now)?;
        let fd = open::open_beneath(root.as_fd(), rel, &mut self.resolver)?;
        let info = open::stat(fd.as_fd())?;
        let found = match info.kind {
            Kind::Dir => Found::Dir,
            Kind::Other => return Err(OpenError::NotFound),
            Kind::File => Found::File(Rc::new(self.file(fd, info, rel))),
        };
        self.insert(rel, found.clone(), now);
        Ok(found)
    }

    /// The root's fd, opened again once it is older than `VALID` (so a root that was
    /// missing, or replaced, is seen).
    fn root_fd(&mut self, now: Instant) -> Result<Rc<OwnedFd>, OpenError> {
        if let Some((fd, opened)) = &self.root {
            if now.saturating_duration_since(*opened) < VALID {
                return Ok(fd.clone());
            }
        }
        self.root = None;
        let fd = Rc::new(open::open_root(&self.root_path)?);
        self.root = Some((fd.clone(), now));
        Ok(fd)
    }

    fn file(&mut self, fd: OwnedFd, info: FileInfo, rel: &[u8]) -> File {
        let body = (info.size <= MEM_FILE_MAX
            && self.mem_bytes + info.size as usize <= MEM_TOTAL_MAX)
            .then(|| {
                let mut b = vec![0u8; info.size as usize];
                open::pread_exact(fd.as_fd(), &mut b, 0).ok()?;
                Some(Bytes::from(b))
            })
            .flatten();
        File {
            etag: etag(info.mtime, info.size),
            last_modified: crate::http_date::imf_fixdate(info.mtime.max(0) as u64),
            content_type: content_type(rel),
            body,
            fd,
            info,
        }
    }

    fn insert(&mut self, rel: &[u8], found: Found, now: Instant) {
        if self.files.len() >= MAX_ENTRIES && !self.files.contains_key(rel) {
            self.files
                .retain(|_, e| now.saturating_duration_since(e.opened) < VALID);
            if self.files.len() >= MAX_ENTRIES {
                self.files.clear();
            }
            self.mem_bytes = self.files.values().map(|e| mem_of(&e.found)).sum();
        }
        self.mem_bytes += mem_of(&found);
        let entry = Entry { found, opened: now };
        if let Some(old) = self.files.insert(rel.into(), entry) {
            self.mem_bytes -= mem_of(&old.found);
        }
    }
}

fn mem_of(f: &Found) -> usize {
    match f {
        Found::File(f) => f.body.as_ref().map_or(0, Bytes::len),
        Found::Dir => 0,
    }
}
