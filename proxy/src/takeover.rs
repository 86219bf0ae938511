//! Binary takeover: a new `proxy` takes the listening sockets of the running one over a Unix
//! socket (SCM_RIGHTS), starts serving on them, and the old one drains and exits. No
//! connection is refused or lost: the sockets themselves move, with the connections queued on
//! them, and neither process ever closes them while the other needs them.
//!
//! Why SCM_RIGHTS and not a second process joining the SO_REUSEPORT group (`--takeover` with
//! the old one draining): when the old process closes its sockets, the connections the kernel
//! had queued on them are reset, unless `net.ipv4.tcp_migrate_req=1` (Linux 5.14+, a host-wide
//! setting the proxy cannot rely on); and the kernel spreads new connections over both groups
//! until then. Handing the sockets over loses nothing, needs no sysctl and works for any
//! worker count (HAProxy's `-x`, Envoy's hot restart, Katran's socket passing do the same).
//!
//! The exchange, on a SOCK_SEQPACKET socket (message boundaries keep each batch of
//! descriptors with its description):
//! 1. new → old: `proxy-takeover 1`
//! 2. old → new: batches of `listener CONFIGURED BOUND` lines, one per descriptor attached,
//!    every worker's SO_REUSEPORT socket of every listener; then `end`, with the admin
//!    listener's socket attached when there is one (on `end`, so that a process from before
//!    this, which drops what comes with `end`, still takes over: it binds its own admin socket
//!    beside that one, as it did).
//! 3. the new process starts its workers on them (more workers than sockets: it binds more
//!    sockets into the same group; fewer: a worker takes several), serves its admin listener
//!    on the socket handed over if it is configured at that address (otherwise it binds its
//!    own), binds the control socket for the next takeover (renamed over the path: no moment
//!    without one), then new → old: `ready`.
//! 4. the old process's admin thread stops accepting (what it accepted is answered; what is
//!    queued stays queued for the new process: one socket, now only the new process's, so no
//!    scrape after `ready` gets the old process's counters). Its workers stop accepting (each
//!    accept in flight is cancelled and its outcome awaited, and a connection it had taken is
//!    served: a cancelled io_uring accept dropped unawaited can lose the connection it had
//!    taken), answer the next request of each connection with `Connection: close`, and exit
//!    when none is left (at once if none was) or at the shutdown timeout.
//!
//! If the new process fails before `ready` (a broken config, a crash), the old one never
//! stopped: it goes on serving and takes the next takeover. If the old one cannot be told
//! `ready` (it went away after handing over, a SIGTERM meanwhile), the new one serves on, with
//! a warning: it holds the sockets and the path already, and stopping would leave nothing
//! listening.
//!
//! Only the proxy's own user takes part: the socket file is created 0600, and each side
//! checks the other's uid (SO_PEERCRED) before anything crosses. Otherwise a local user who
//! can reach the path would take the listening sockets (and the traffic), or hand a new
//! process sockets of their own.

use shared::shutdown::ShutdownFlag;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const HELLO: &[u8] = b"proxy-takeover 1";
const END: &[u8] = b"end";
const READY: &[u8] = b"ready";
/// Descriptors per message (the kernel's SCM_MAX_FD is 253).
const BATCH: usize = 200;
/// Longest a takeover waits on the other side at one step. The new process's `ready` comes
/// after it started its workers: generous.
const STEP_WAIT: Duration = Duration::from_secs(30);
/// How often the control thread looks at the shutdown flag.
const TICK: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    #[error("cannot take over from {path}: {source} (is a proxy running with --takeover-socket {path}?)")]
    Connect { path: String, source: io::Error },
    #[error("takeover from {path}: {what}")]
    Exchange { path: String, what: String },
    #[error("cannot listen for takeovers on {path}: {source}")]
    Bind { path: String, source: io::Error },
    #[error("another proxy listens for takeovers on {0}: start this one with --takeover to take over from it, or give another --takeover-socket")]
    InUse(String),
    #[error("takeover from {path} refused: {source}")]
    Peer { path: String, source: PeerError },
}

/// Why the process at the other end of the takeover socket is not taken as a peer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("cannot read its credentials (SO_PEERCRED): {0}")]
    Credentials(io::Error),
    #[error("the process at the other end (pid {pid}) runs as uid {uid}, not as this proxy's uid {ours}")]
    OtherUser { pid: i32, uid: u32, ours: u32 },
}

/// The process at the other end of the Unix socket `s` must run as uid `ours`. SO_PEERCRED
/// gives the credentials it had when it connected (an accepted connection) or listened (a
/// connected one): the kernel's, not what the peer says.
/// Its pid, as the kernel gave it then.
pub fn check_peer(s: &OwnedFd, ours: u32) -> Result<i32, PeerError> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `len` bytes into `cred`, a ucred on this stack, and
    // the new length into `len`; the descriptor is open.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::addr_of_mut!(cred).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(PeerError::Credentials(io::Error::last_os_error()));
    }
    if cred.uid != ours {
        return Err(PeerError::OtherUser {
            pid: cred.pid,
            uid: cred.uid,
            ours,
        });
    }
    Ok(cred.pid)
}

/// This process's effective uid: the one its files and sockets are created as.
fn our_uid() -> u32 {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A listening socket handed over, with the address it was configured as.
pub struct Handed {
    pub configured: SocketAddr,
    pub socket: std::net::TcpListener,
}

/// The new process's side: the old process's sockets, and the connection on which it waits
/// for `ready`.
pub struct Inherited {
    path: PathBuf,
    conn: OwnedFd,
    /// The old process's pid (SO_PEERCRED), for the lines that name it.
    peer_pid: i32,
    sockets: Vec<Handed>,
    /// The old process's admin listener, if it sent it.
    admin: Option<std::net::TcpListener>,
}

impl Inherited {
    /// Ask the process listening on `path` for its listening sockets.
    pub fn request(path: &Path) -> Result<Inherited, TakeoverError> {
        // The socket file this takeover asks: another file there later means another process
        // took over meanwhile.
        let asked = file_id(path).ok();
        let conn = seqpacket()
            .and_then(|s| connect(&s, path).map(|()| s))
            .map_err(|source| TakeoverError::Connect {
                path: path.display().to_string(),
                source,
            })?;
        let peer_pid = check_peer(&conn, our_uid()).map_err(|source| TakeoverError::Peer {
            path: path.display().to_string(),
            source,
        })?;
        let fail = |what: String| TakeoverError::Exchange {
            path: path.display().to_string(),
            what,
        };
        set_timeouts(&conn, STEP_WAIT).map_err(|e| fail(e.to_string()))?;
        let cut = |step: &str, e: Option<io::Error>| fail(cut_short(path, asked, step, e));
        send(&conn, HELLO, &[]).map_err(|e| cut("send", Some(e)))?;
        let mut sockets = Vec::new();
        let admin = loop {
            let (text, fds) = recv(&conn).map_err(|e| cut("receive", Some(e)))?;
            if text.is_empty() {
                return Err(cut("receive", None));
            }
            if text == END {
                break fds.into_iter().next().map(std::net::TcpListener::from);
            }
            let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
            if lines.len() != fds.len() {
                return Err(fail(format!(
                    "{} descriptions for {} descriptors",
                    lines.len(),
                    fds.len()
                )));
            }
            for (line, fd) in lines.into_iter().zip(fds) {
                let configured = parse_line(line)
                    .ok_or_else(|| fail(format!("bad line {:?}", String::from_utf8_lossy(line))))?;
                let socket = std::net::TcpListener::from(fd);
                socket
                    .set_nonblocking(true)
                    .map_err(|e| fail(e.to_string()))?;
                sockets.push(Handed { configured, socket });
            }
        };
        Ok(Inherited {
            path: path.to_path_buf(),
            conn,
            peer_pid,
            sockets,
            admin,
        })
    }

    /// The old process's admin socket, if it is bound to `addr` (else it is closed here: the
    /// old process still has it, and closes it when it lets go of it).
    pub fn take_admin(&mut self, addr: SocketAddr) -> Option<std::net::TcpListener> {
        let s = self.admin.take()?;
        (s.local_addr().ok() == Some(addr)).then_some(s)
    }

    /// The sockets configured as `addr` or bound to it (taken out of what is left).
    pub fn take(&mut self, addr: SocketAddr) -> Vec<std::net::TcpListener> {
        let (mine, rest): (Vec<Handed>, Vec<Handed>) = std::mem::take(&mut self.sockets)
            .into_iter()
            .partition(|h| h.configured == addr || h.socket.local_addr().is_ok_and(|a| a == addr));
        self.sockets = rest;
        mine.into_iter().map(|h| h.socket).collect()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The old process's pid.
    pub fn peer_pid(&self) -> i32 {
        self.peer_pid
    }

    /// Tell the old process to drain. Sockets no listener of ours took (the new config
    /// dropped their address) are closed, told or not: their queued connections are reset,
    /// as a restart would. Returns how many that was.
    pub fn ready(self) -> Result<usize, TakeoverError> {
        let dropped = self.sockets.len();
        send(&self.conn, READY, &[]).map_err(|e| TakeoverError::Exchange {
            path: self.path.display().to_string(),
            what: format!("send ready: {e}"),
        })?;
        Ok(dropped)
    }
}

/// What a takeover cut short before the sockets came means (`e` the error of `step`; `None`:
/// the old process closed the connection), said plainly. The old process serves one takeover
/// at a time and closes its takeover socket once it handed over: a second new process waiting
/// on it is reset then, and the path names the winner's socket; while the first is under way,
/// the second waits, up to `STEP_WAIT`.
fn cut_short(path: &Path, asked: Option<(u64, u64)>, step: &str, e: Option<io::Error>) -> String {
    let what = e
        .as_ref()
        .map_or("closed".to_string(), |e| format!("{step}: {e}"));
    let late = e.as_ref().is_some_and(|e| {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    });
    if late {
        return format!(
            "no answer within {}s ({what}): another takeover is under way (the process there \
             hands over to one new process at a time), or that process is stuck",
            STEP_WAIT.as_secs()
        );
    }
    match file_id(path).ok() {
        Some(now) if Some(now) != asked => format!(
            "another process took over first ({what}): the path now names its takeover \
             socket; take over again to replace that one"
        ),
        None => format!("the process there stopped before handing its sockets over ({what})"),
        Some(_) => format!(
            "the process there closed the connection before handing its sockets over ({what}): \
             it was stopping, handing over to another process, or refused this one (its log \
             says why)"
        ),
    }
}

fn parse_line(line: &[u8]) -> Option<SocketAddr> {
    let text = std::str::from_utf8(line).ok()?;
    let mut words = text.split(' ');
    (words.next()? == "listener").then_some(())?;
    words.next()?.parse().ok()
}

/// The old process's side: the control socket and its thread.
pub struct Control {
    path: PathBuf,
    /// The file at `path` is ours while it has this (device, inode).
    id: (u64, u64),
}

impl Control {
    /// Listen for takeovers on `path`. `replace`: this process took over from the one there
    /// (the path is renamed over, so a takeover always finds one of the two); otherwise a
    /// path another proxy answers on is refused, and a stale file is removed.
    pub fn bind(path: &Path, replace: bool) -> Result<(Control, OwnedFd), TakeoverError> {
        let shown = path.display().to_string();
        let err = |source| TakeoverError::Bind {
            path: shown.clone(),
            source,
        };
        if !replace && path.exists() {
            let probe = seqpacket().map_err(err)?;
            if connect(&probe, path).is_ok() {
                return Err(TakeoverError::InUse(shown));
            }
            std::fs::remove_file(path).map_err(err)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let s = seqpacket().map_err(err)?;
        bind_listen(&s, &tmp).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)?;
        let id = file_id(path).map_err(err)?;
        let control = Control {
            path: path.to_path_buf(),
            id,
        };
        Ok((control, s))
    }

    /// Remove the path if it is still ours (a process that took over put its own there).
    fn unlink_if_ours(&self) {
        if file_id(&self.path).is_ok_and(|id| id == self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn file_id(path: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Puts a process's steering program back on a listener's group.
pub type Resteer = dyn Fn(&std::net::TcpListener) -> io::Result<()> + Send;

/// What the control thread hands over and whom it tells.
pub struct Serve {
    pub control: Control,
    pub listener: OwnedFd,
    /// Copies of every worker's listening socket, with their configured address.
    pub sockets: Vec<(SocketAddr, std::net::TcpListener)>,
    /// A copy of the admin listener's socket.
    pub admin: Option<std::net::TcpListener>,
    /// The process is stopping (SIGTERM): the copies are closed at once, or the sockets
    /// would keep listening with no one accepting.
    pub flag: Arc<ShutdownFlag>,
    /// Called once a new process is ready: stop accepting on the admin socket and start the
    /// drain (returns once the admin thread let go and every worker drains).
    pub on_ready: Box<dyn FnOnce() + Send>,
    /// Put this process's steering program back on a listener's group: a new process that
    /// failed after taking the sockets may have replaced or removed it.
    pub resteer: Box<Resteer>,
}

/// Run the control socket on a thread of its own until a takeover completes or the process
/// stops.
pub fn spawn(s: Serve) -> io::Result<()> {
    std::thread::Builder::new()
        .name("takeover".into())
        .spawn(move || control_loop(s))?;
    Ok(())
}

fn control_loop(s: Serve) {
    let Serve {
        control,
        listener,
        sockets,
        admin,
        flag,
        on_ready,
        resteer,
    } = s;
    loop {
        if flag.is_set() {
            control.unlink_if_ours();
            return;
        }
        let conn = match accept_within(&listener, TICK) {
            Ok(Some(c)) => c,
            Ok(None) => continue,
            Err(e) => {
                shared::log!("proxy: takeover socket: accept: {e}");
                std::thread::sleep(TICK);
                continue;
            }
        };
        if let Err(e) = check_peer(&conn, our_uid()) {
            shared::log!("proxy: takeover refused: {e}");
            continue;
        }
        match hand_over(&conn, &sockets, admin.as_ref()) {
            Ok(()) => {
                on_ready();
                shared::log!(
                    "proxy: takeover: {} listening sockets handed to the new process; draining",
                    sockets.len()
                );
                // The path now names the new process's socket: not ours to remove.
                return;
            }
            Err(e) => {
                shared::log!("proxy: takeover aborted, still serving: {e}");
                restore_steering(&sockets, &resteer);
            }
        }
    }
}

/// After an aborted takeover: this process's program on each of its groups again (one socket
/// of a group stands for all of it).
fn restore_steering(sockets: &[(SocketAddr, std::net::TcpListener)], resteer: &Resteer) {
    let mut done: Vec<SocketAddr> = Vec::new();
    for (addr, l) in sockets {
        if done.contains(addr) {
            continue;
        }
        done.push(*addr);
        if let Err(e) = resteer(l) {
            shared::log!("proxy: takeover aborted: steering of {addr} not restored: {e}");
        }
    }
}

/// One takeover: the hello, the sockets, the `ready`.
fn hand_over(
    conn: &OwnedFd,
    sockets: &[(SocketAddr, std::net::TcpListener)],
    admin: Option<&std::net::TcpListener>,
) -> io::Result<()> {
    set_timeouts(conn, STEP_WAIT)?;
    let (hello, _) = recv(conn)?;
    if hello != HELLO {
        return Err(io::Error::other(format!(
            "unknown request {:?}",
            String::from_utf8_lossy(&hello)
        )));
    }
    for batch in sockets.chunks(BATCH) {
        let mut text = Vec::new();
        let mut fds = Vec::with_capacity(batch.len());
        for (configured, socket) in batch {
            if !text.is_empty() {
                text.push(b'\n');
            }
            let bound = socket.local_addr()?;
            text.extend_from_slice(format!("listener {configured} {bound}").as_bytes());
            fds.push(socket.as_raw_fd());
        }
        send(conn, &text, &fds)?;
    }
    let admin: Vec<RawFd> = admin.iter().map(|a| a.as_raw_fd()).collect();
    send(conn, END, &admin)?;
    match recv(conn) {
        Ok((r, _)) if r == READY => Ok(()),
        Ok((r, _)) if r.is_empty() => Err(io::Error::other(
            "the new process went away before it was ready",
        )),
        Ok((r, _)) => Err(io::Error::other(format!(
            "expected ready, got {:?}",
            String::from_utf8_lossy(&r)
        ))),
        Err(e) => Err(e),
    }
}

// --- Unix SOCK_SEQPACKET sockets and SCM_RIGHTS, with libc ----------------------------------
// Public for the end-to-end tests, which play the other side of an exchange.

pub fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn unix_addr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path longer than {} bytes", addr.sun_path.len() - 1),
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

pub fn connect(s: &OwnedFd, path: &Path) -> io::Result<()> {
    let (addr, len) = unix_addr(path)?;
    // SAFETY: `addr` is a valid sockaddr_un of `len` bytes; the descriptor is open.
    let rc = unsafe { libc::connect(s.as_raw_fd(), std::ptr::addr_of!(addr).cast(), len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Bind `s` to `path` with a file only its owner may connect to (0600), then listen. Linux
/// creates the file with the socket's own mode less the umask, so the socket is fchmod'ed
/// first: the file never has wider permissions, and the process-wide umask is not touched
/// (other threads create files meanwhile). The file is chmod'ed too before listening, for a
/// kernel that would not take the socket's mode: no connection is possible before listen.
pub fn bind_listen(s: &OwnedFd, path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (addr, len) = unix_addr(path)?;
    // SAFETY: fchmod(2) on our open descriptor; no memory is passed.
    if unsafe { libc::fchmod(s.as_raw_fd(), 0o600) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as in `connect`.
    if unsafe { libc::bind(s.as_raw_fd(), std::ptr::addr_of!(addr).cast(), len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    // SAFETY: listen(2) on our open descriptor.
    if unsafe { libc::listen(s.as_raw_fd(), 4) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Accept one connection, waiting up to `wait`; `None` if none came.
pub fn accept_within(l: &OwnedFd, wait: Duration) -> io::Result<Option<OwnedFd>> {
    let mut pfd = libc::pollfd {
        fd: l.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as libc::c_int) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(None)
        } else {
            Err(e)
        };
    }
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: accept4 on our listening descriptor, no peer address asked for.
    let fd = unsafe {
        libc::accept4(
            l.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn set_timeouts(s: &OwnedFd, wait: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_usec: wait.subsec_micros() as libc::suseconds_t,
    };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: a valid timeval of the size given, on our open descriptor.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                std::ptr::addr_of!(tv).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One message: `data` with `fds` attached (SCM_RIGHTS).
pub fn send(s: &OwnedFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = if fds.is_empty() {
        0
    } else {
        unsafe { libc::CMSG_SPACE(fd_bytes as u32) as usize }
    };
    // u64 elements: the control buffer must be aligned for cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; all zeroes is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if space > 0 {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds CMSG_SPACE(fd_bytes) aligned bytes, so the first
        // header and its data (CMSG_LEN(fd_bytes)) fit; `fds` is copied into it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(c), fd_bytes);
        }
    }
    // SAFETY: `msg` points at live buffers (`iov`, `control`) for the duration of the call.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One message and the descriptors attached to it (owned from here on). An empty message:
/// the peer closed.
pub fn recv(s: &OwnedFd) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut data = vec![0u8; 64 * 1024];
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((BATCH * std::mem::size_of::<RawFd>()) as u32) };
    let mut control = vec![0u64; (space as usize).div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; all zeroes is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = (control.len() * 8) as _;
    // SAFETY: `msg` points at live buffers for the duration of the call; MSG_CMSG_CLOEXEC
    // keeps received descriptors from leaking into children.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg_control` with well-formed headers; CMSG_NXTHDR walks
    // them within `msg_controllen`; each SCM_RIGHTS payload is an array of open descriptors
    // now owned by this process.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let p = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(p.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::other("message truncated"));
    }
    data.truncate(n as usize);
    Ok((data, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_and_their_descriptions_cross_a_seqpacket_pair() {
        let mut pair = [0; 2];
        // SAFETY: socketpair fills two descriptors we then own.
        let rc =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, pair.as_mut_ptr()) };
        assert_eq!(rc, 0);
        // SAFETY: fresh descriptors from socketpair.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        send(&a, b"listener 127.0.0.1:0 x", &[l.as_raw_fd()]).unwrap();
        send(&a, END, &[]).unwrap();
        let (text, fds) = recv(&b).unwrap();
        assert_eq!(text, b"listener 127.0.0.1:0 x");
        assert_eq!(parse_line(&text), Some("127.0.0.1:0".parse().unwrap()));
        assert_eq!(fds.len(), 1);
        let got = std::net::TcpListener::from(fds.into_iter().next().unwrap());
        assert_eq!(got.local_addr().unwrap(), addr, "the same socket");
        let (end, none) = recv(&b).unwrap();
        assert!(end == END && none.is_empty());
        drop(a);
        assert_eq!(recv(&b).unwrap().0, b"");
    }

    #[test]
    fn a_peer_of_another_uid_is_refused() {
        let mut pair = [0; 2];
        // SAFETY: socketpair fills two descriptors we then own.
        let rc =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, pair.as_mut_ptr()) };
        assert_eq!(rc, 0);
        // SAFETY: fresh descriptors from socketpair.
        let (a, _b) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let me = our_uid();
        assert!(check_peer(&a, me).is_ok(), "our own uid");
        let other = me.wrapping_add(1);
        match check_peer(&a, other) {
            Err(PeerError::OtherUser { pid, uid, ours }) => {
                assert_eq!((pid as u32, uid, ours), (std::process::id(), me, other));
            }
            r => panic!("another uid was not refused: {r:?}"),
        }
        let e = check_peer(&a, other).unwrap_err().to_string();
        assert!(
            e.contains(&format!("uid {me}")) && e.contains(&other.to_string()),
            "{e}"
        );
    }

    #[test]
    fn the_socket_file_is_created_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("proxy-takeover-mode-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.sock");
        let s = seqpacket().unwrap();
        bind_listen(&s, &path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(mode, 0o600, "{mode:o}");
    }
}
