//! The per-worker open-file cache (nginx's `open_file_cache`, on by default here).
//!
//! - Each site's root directory fd, and each file or directory looked up beneath it, is kept
//!   for [`VALID`]; after that the next request opens it again. A file replaced (renamed
//!   over, deleted) is therefore served as it was for at most that long (nginx's
//!   `open_file_cache_valid`, 60 s by default there, short here).
//! - A file changed in place (truncated and written again, as `cp` does): one kept in memory
//!   is served as it was read, bytes and validators alike, for at most [`VALID`]; one sent
//!   from its descriptor is `fstat`ed again on each hit, and opened anew when its size, mtime
//!   or ctime moved, so its length and validators are the bytes' that follow. (The body is
//!   read at send time: a file that shrinks while it is sent cannot fill the length
//!   announced, and the connection closes short of it.)
//! - A small file's bytes (at most [`MEM_FILE_MAX`], [`MEM_TOTAL_MAX`] per worker) are read
//!   once and sent from memory: one write for head and body.
//! - Failures are not cached (nginx's `open_file_cache_errors off`), so a file that appears
//!   is served on the next request, and a missing root is found again as soon as it exists.
//! - At most [`MAX_ENTRIES`] per site; when full, expired entries go, and if none had
//!   expired, all do (bounded, simple, and only under a flood of distinct names).
//! - Expired entries hold descriptors (and pin files deleted since) for nothing: the worker
//!   sweeps them out on its pool-sweeping tick, at most once per [`VALID`] per site
//!   ([`Sites::sweep`]), so an idle site closes its files within a few seconds.
//!
//! The caches belong to a configuration generation ([`Sites`], in `generation.rs`): one per
//! static root of its routes, per worker, never shared, never locked. A reload carries over
//! the cache of every root the new generation still serves; the others go with the old
//! generation (once no request holds it), and their descriptors with them.

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
    /// When expired entries were last swept out.
    swept: Option<Instant>,
}

/// One generation's open-file caches on one worker: one per static root of its routes (routes
/// that share a root share its cache).
#[derive(Default)]
pub struct Sites {
    sites: Vec<Rc<RefCell<SiteCache>>>,
}

impl Sites {
    /// Empty caches for the static roots `roots` (a root named twice gets one cache).
    pub fn new<'a>(roots: impl IntoIterator<Item = &'a Path>) -> Sites {
        let mut sites = Sites::default();
        for root in roots {
            if sites.find(root).is_none() {
                let cache = SiteCache::new(root);
                sites.sites.push(Rc::new(RefCell::new(cache)));
            }
        }
        sites
    }

    /// Take over `prev`'s cache of every root served here too (what was opened stays open);
    /// the caches of roots no longer served stay with `prev`, and close with it. Returns how
    /// many were taken over.
    pub fn carry_over(&mut self, prev: &Sites) -> usize {
        let mut kept = 0;
        for site in &mut self.sites {
            let root = site.borrow().root_path.clone();
            if let Some(old) = prev.find(&root) {
                *site = old.clone();
                kept += 1;
            }
        }
        kept
    }

    /// Static roots with a cache.
    pub fn len(&self) -> usize {
        self.sites.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    fn find(&self, root: &Path) -> Option<&Rc<RefCell<SiteCache>>> {
        self.sites.iter().find(|s| s.borrow().root_path == root)
    }

    /// Look `rel` (relative to `root`, as `path::resolve` made it) up: from the cache while
    /// it is valid, else opened beneath the root. `rel` may be used as scratch and is
    /// restored. A root this generation does not serve (never: a request's site comes from
    /// its generation) is looked up without a cache.
    pub fn lookup(&self, root: &Path, rel: &mut Vec<u8>, now: Instant) -> Result<Found, OpenError> {
        match self.find(root) {
            Some(site) => site.borrow_mut().lookup(rel, now),
            None => SiteCache::new(root).lookup(rel, now),
        }
    }

    /// Close what expired: entries and root descriptors older than [`VALID`], which the next
    /// request would open again anyway. At most once per `VALID` per site: bounded work
    /// (at most [`MAX_ENTRIES`] entries looked at) however often it is called.
    pub fn sweep(&self, now: Instant) {
        for site in &self.sites {
            site.borrow_mut().sweep(now);
        }
    }
}

impl SiteCache {
    fn new(root: &Path) -> SiteCache {
        SiteCache {
            root_path: root.to_path_buf(),
            root: None,
            files: HashMap::new(),
            mem_bytes: 0,
            resolver: Resolver::Openat2,
            swept: None,
        }
    }

    fn sweep(&mut self, now: Instant) {
        let fresh = |t: Instant| now.saturating_duration_since(t) < VALID;
        if self.swept.is_some_and(fresh) {
            return;
        }
        self.swept = Some(now);
        if self
            .root
            .as_ref()
            .is_some_and(|(_, opened)| !fresh(*opened))
        {
            self.root = None;
        }
        self.files.retain(|_, e| fresh(e.opened));
        self.mem_bytes = self.files.values().map(|e| mem_of(&e.found)).sum();
    }

    fn lookup(&mut self, rel: &mut Vec<u8>, now: Instant) -> Result<Found, OpenError> {
        if let Some(e) = self.files.get(&rel[..]) {
            if now.saturating_duration_since(e.opened) < VALID && unchanged(&e.found) {
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

/// Whether a cached entry still describes its file. A file sent from its descriptor is read
/// at send time, so a rewrite in place (truncate + write, as `cp` does) would go out under
/// the old length and validators: such a file is looked at again (`fstat`) on every hit,
/// and opened anew once its size, mtime or ctime moved. A file kept in memory is sent as it
/// was read, consistent with its validators, and a directory has nothing to go stale.
fn unchanged(found: &Found) -> bool {
    match found {
        Found::File(f) if f.body.is_none() => {
            open::stat(f.fd.as_fd()).is_ok_and(|now| now == f.info)
        }
        _ => true,
    }
}

fn mem_of(f: &Found) -> usize {
    match f {
        Found::File(f) => f.body.as_ref().map_or(0, Bytes::len),
        Found::Dir => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root with one small file, under a scratch directory of its own.
    fn root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("static-cache-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f.txt"), b"f").unwrap();
        dir
    }

    /// (entries, root fd held) of the site of `root`.
    fn held(sites: &Sites, root: &Path) -> (usize, bool) {
        let s = sites.find(root).expect("a cache for the root").borrow();
        (s.files.len(), s.root.is_some())
    }

    #[test]
    fn expired_entries_are_swept_at_most_once_per_validity() {
        let r = root("sweep");
        let sites = Sites::new([&*r, &*r]);
        assert_eq!(sites.len(), 1, "routes on one root share its cache");
        let t0 = Instant::now();
        let found = sites.lookup(&r, &mut b"f.txt".to_vec(), t0);
        assert!(matches!(found, Ok(Found::File(_))), "{found:?}");
        assert_eq!(held(&sites, &r), (1, true));
        // Still valid: nothing goes.
        sites.sweep(t0);
        assert_eq!(held(&sites, &r), (1, true));
        // Expired, but swept less than VALID ago: left for the next sweep.
        sites.sweep(t0 + VALID / 2);
        assert_eq!(held(&sites, &r), (1, true));
        sites.sweep(t0 + VALID);
        assert_eq!(
            held(&sites, &r),
            (0, false),
            "expired: entry and root closed"
        );
        let _ = std::fs::remove_dir_all(&r);
    }

    #[test]
    fn a_reload_keeps_the_caches_of_roots_still_served_and_no_other() {
        let (a, b) = (root("keep-a"), root("keep-b"));
        let old = Sites::new([&*a, &*b]);
        let now = Instant::now();
        for r in [&a, &b] {
            old.lookup(r, &mut b"f.txt".to_vec(), now).expect("found");
        }
        let mut new = Sites::new([&*b]);
        assert_eq!(new.carry_over(&old), 1);
        assert!(Rc::ptr_eq(new.find(&b).unwrap(), old.find(&b).unwrap()));
        assert_eq!(held(&new, &b), (1, true), "b's open files are kept");
        assert!(
            new.find(&a).is_none(),
            "a's cache stays with the old generation"
        );
        // Only the old generation holds a's cache: dropping it closes a's descriptors.
        let a_cache = Rc::downgrade(old.find(&a).unwrap());
        drop(old);
        assert!(a_cache.upgrade().is_none());
        let _ = std::fs::remove_dir_all(&a);
        let _ = std::fs::remove_dir_all(&b);
    }
}
