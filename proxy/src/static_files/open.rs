//! Opening a file beneath the site root, so that nothing outside it is ever opened.
//!
//! - `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, relative to a directory fd
//!   of the root: the kernel refuses any resolution that leaves the root (a `..`, an absolute
//!   symlink, a symlink whose target climbs out: `EXDEV`), while symlinks that stay inside
//!   keep working, as they do in nginx.
//! - Where `openat2` is missing (`ENOSYS`, Linux < 5.6, or a seccomp filter that hides it),
//!   a checked walk: one `openat(O_NOFOLLOW)` per component from the root fd. That refuses
//!   every symlink (inside the root too): stricter than needed, never looser.
//! - Files are opened `O_NONBLOCK` so a FIFO planted in the root cannot hang the worker in
//!   `open`; anything that is not a regular file or a directory is 404 after `fstat`, or
//!   before it when `open` already refuses it (a Unix socket, a device without its driver:
//!   `ENXIO`, `ENODEV`).
//!
//! These are blocking syscalls on the worker thread: on a local file system they take
//! microseconds, and the open-file cache (`cache`) makes them rare.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Why a path yields no file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// No such file (or a directory on the way is missing, or the root is): 404.
    NotFound,
    /// Permission denied, or the path would leave the root (through a symlink): 403.
    Forbidden,
    /// Out of descriptors or memory, or an I/O error: 500 (nothing the client did).
    Failed,
}

impl OpenError {
    pub fn status(self) -> u16 {
        match self {
            OpenError::NotFound => 404,
            OpenError::Forbidden => 403,
            OpenError::Failed => 500,
        }
    }

    fn from_errno(e: i32) -> OpenError {
        match e {
            libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG => OpenError::NotFound,
            // Not a file one can serve, found before `fstat` could say so: a Unix socket
            // (ENXIO), a device without its driver (ENXIO, ENODEV). 404, as every other
            // file that is not regular.
            libc::ENXIO | libc::ENODEV => OpenError::NotFound,
            libc::EACCES | libc::EPERM | libc::EXDEV | libc::ELOOP => OpenError::Forbidden,
            _ => OpenError::Failed,
        }
    }
}

/// What `fstat` says about an opened path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    /// A device, a FIFO, a socket: never served.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    pub kind: Kind,
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: i64,
    pub ino: u64,
    /// What changes with the content on the same inode, finer than `mtime`'s seconds: a
    /// rewrite in place within the second moves these, and the status change time moves
    /// whatever the writer does to the mtime (`touch -d`, `cp -p`).
    pub mtime_nsec: i64,
    pub ctime: (i64, i64),
}

/// How files are opened on this system (decided on the first open of each worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    Openat2,
    /// `openat2` is missing: the component walk.
    Walk,
}

/// Open the root directory (absolute path).
pub fn open_root(root: &Path) -> Result<OwnedFd, OpenError> {
    let mut c = root.as_os_str().as_bytes().to_vec();
    c.push(0);
    let c = CStr::from_bytes_with_nul(&c).map_err(|_| OpenError::NotFound)?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(OpenError::from_errno(errno()));
    }
    // SAFETY: `open` returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open `rel` (relative, `/`-separated, no `..`; empty for the root itself) beneath `dir`.
/// `rel` gets a NUL appended for the call and removed again. `Resolver::Openat2` turns into
/// `Walk` for good when the kernel lacks `openat2`.
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &mut Vec<u8>,
    resolver: &mut Resolver,
) -> Result<OwnedFd, OpenError> {
    if rel.is_empty() {
        rel.push(b'.');
        let r = open_beneath(dir, rel, resolver);
        rel.clear();
        return r;
    }
    if *resolver == Resolver::Openat2 {
        rel.push(0);
        let r = openat2_beneath(dir, rel);
        rel.pop();
        match r {
            Err(libc::ENOSYS) | Err(libc::EPERM) if !openat2_works(dir) => {
                *resolver = Resolver::Walk;
            }
            Err(e) => return Err(OpenError::from_errno(e)),
            Ok(fd) => return Ok(fd),
        }
    }
    walk_beneath(dir, rel)
}

const FILE_FLAGS: i32 = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;

/// `openat2(dir, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; `path` ends with NUL.
fn openat2_beneath(dir: BorrowedFd<'_>, path: &[u8]) -> Result<OwnedFd, i32> {
    // SAFETY: all-zero is a valid `open_how` (it is plain integers).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = FILE_FLAGS as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `path` is NUL-terminated and `how` lives across the call; the size passed is
    // the struct's.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether `openat2` exists (an EPERM from a seccomp filter looks like a permission error
/// on the file: ask about `.`, which is always there and always readable by its opener).
fn openat2_works(dir: BorrowedFd<'_>) -> bool {
    openat2_beneath(dir, b".\0").is_ok()
}

/// The fallback: each component opened with `O_NOFOLLOW` from the one before.
fn walk_beneath(dir: BorrowedFd<'_>, rel: &[u8]) -> Result<OwnedFd, OpenError> {
    let mut parts = rel.split(|&b| b == b'/').peekable();
    let mut cur: Option<OwnedFd> = None;
    let mut name = Vec::with_capacity(256);
    while let Some(part) = parts.next() {
        if part.is_empty() || part == b".." {
            return Err(OpenError::Forbidden);
        }
        let last = parts.peek().is_none();
        let flags = if last {
            FILE_FLAGS | libc::O_NOFOLLOW
        } else {
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC
        };
        name.clear();
        name.extend_from_slice(part);
        name.push(0);
        let at = cur.as_ref().map_or(dir.as_raw_fd(), |f| f.as_raw_fd());
        // SAFETY: `name` is NUL-terminated; `at` is an open directory fd we borrow.
        let fd = unsafe { libc::openat(at, name.as_ptr().cast(), flags) };
        if fd < 0 {
            return Err(OpenError::from_errno(errno()));
        }
        // SAFETY: a new descriptor that nothing else owns.
        cur = Some(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    cur.ok_or(OpenError::NotFound)
}

/// `fstat` an opened file.
pub fn stat(fd: BorrowedFd<'_>) -> Result<FileInfo, OpenError> {
    // SAFETY: all-zero is a valid `stat` buffer for the kernel to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` is a writable `stat`.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(OpenError::from_errno(errno()));
    }
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        _ => Kind::Other,
    };
    Ok(FileInfo {
        kind,
        size: st.st_size as u64,
        mtime: st.st_mtime,
        ino: st.st_ino,
        mtime_nsec: st.st_mtime_nsec,
        ctime: (st.st_ctime, st.st_ctime_nsec),
    })
}

/// Read `len` bytes at `offset` (a small file loaded into memory, or a chunk of a body).
pub fn pread_exact(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a writable buffer of `rest.len()` bytes.
        let n = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                rest.as_mut_ptr().cast(),
                rest.len(),
                (offset + done as u64) as libc::off_t,
            )
        };
        match n {
            n if n > 0 => done += n as usize,
            // The file shrank under us: the promised length cannot be sent.
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
