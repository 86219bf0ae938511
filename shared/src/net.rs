//! Sockets: SO_REUSEPORT listener groups, TCP_NODELAY, outgoing connects from a chosen source
//! address, the open-files limit, and the accept back-off that keeps EMFILE from spinning.
//!
//! The address rule, one for the proxy's upstreams and the loader's URLs: a host name is
//! resolved once, at start, and its addresses are tried in [`connect_order`] (IPv4 first, then
//! IPv6, each family in the resolver's order, as curl does), so `localhost` reaches a server
//! listening on 127.0.0.1 even where the resolver lists `::1` first.

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Raise RLIMIT_NOFILE's soft limit to the hard limit (nginx's `worker_rlimit_nofile`).
/// Returns the soft limit now in force.
pub fn raise_nofile_limit() -> u64 {
    // An unlimited hard limit cannot be the soft limit (setrlimit refuses more than
    // fs.nr_open): aim for nr_open then.
    let nr_open = || -> Option<libc::rlim_t> {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    // SAFETY: getrlimit/setrlimit write/read a plain struct we own.
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 0;
        }
        let target = if rl.rlim_max == libc::RLIM_INFINITY {
            nr_open().unwrap_or(rl.rlim_cur).max(rl.rlim_cur)
        } else {
            rl.rlim_max
        };
        if rl.rlim_cur < target {
            let want = libc::rlimit {
                rlim_cur: target,
                rlim_max: rl.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                rl.rlim_cur = target;
            }
        }
        rl.rlim_cur as u64
    }
}

/// One listening socket with SO_REUSEPORT, bound and listening.
pub fn reuseport_listener(addr: SocketAddr, backlog: u32) -> io::Result<std::net::TcpListener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(backlog.min(i32::MAX as u32) as i32)?;
    Ok(sock.into())
}

/// Set TCP_NODELAY on a listening socket: Linux copies it to every accepted socket, so
/// connections get it without a setsockopt each (Nagle would hold small responses back:
/// Monolake's 44 ms stall).
pub fn nodelay_listener(l: &std::net::TcpListener) -> std::io::Result<()> {
    SockRef::from(l).set_nodelay(true)
}

/// How long (seconds) the kernel holds a silent connection back from accept.
const DEFER_ACCEPT_SECS: libc::c_int = 1;

/// Set TCP_DEFER_ACCEPT on a listening socket: the kernel hands a connection to accept only
/// once its first bytes arrived (an HTTP client always speaks first), so the first read of a
/// new connection finds the request there instead of arming a poll and waking the worker a
/// second time. For connection-per-request clients that was ~15 % of the proxy's CPU per
/// request. A client that connects and stays silent is accepted anyway once the delay ends
/// (the SYN-ACK retransmission after ~1 s), then gets the header timeout as before.
pub fn defer_accept_listener(l: &std::net::TcpListener) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let secs: libc::c_int = DEFER_ACCEPT_SECS;
    // SAFETY: a valid fd and a c_int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            &secs as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `n` SO_REUSEPORT listeners on one address, one per worker. With port 0 the first bind
/// picks the port and the others bind that same port (each binding port 0 would get its own).
///
/// A fixed port another process already listens on is refused with `AddrInUse`, although
/// SO_REUSEPORT would let this process join that process's group (same user) and silently
/// share its connections: a second copy started by mistake must fail, as nginx without
/// `reuseport` does.
pub fn reuseport_group(
    addr: SocketAddr,
    n: usize,
    backlog: u32,
) -> io::Result<Vec<std::net::TcpListener>> {
    if addr.port() != 0 {
        ensure_not_listened_on(addr)?;
    }
    let first = reuseport_listener(addr, backlog)?;
    let bound = first.local_addr()?;
    let mut all = vec![first];
    for _ in 1..n {
        all.push(reuseport_listener(bound, backlog)?);
    }
    Ok(all)
}

/// Fail with `AddrInUse` if some socket listens on `addr`: a probe bound without SO_REUSEPORT
/// conflicts with every listener on the port (SO_REUSEPORT or not), while SO_REUSEADDR lets it
/// ignore connections left in TIME_WAIT by an earlier run. The probe never listens and is
/// closed at once. (Another process binding in between is not caught; this is a check for
/// mistakes, not a lock.)
///
/// A listener closed a moment ago can still be listening: an io_uring accept in flight holds
/// it until the ring's teardown (asynchronous in the kernel, a few milliseconds) cancels it.
/// So a conflict is retried for up to `LISTENER_TEARDOWN`, and a restart right after a stop
/// (or an origin restarted by a test) still binds.
pub fn ensure_not_listened_on(addr: SocketAddr) -> io::Result<()> {
    const LISTENER_TEARDOWN: Duration = Duration::from_secs(1);
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    probe.set_reuse_address(true)?;
    if addr.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    let start = std::time::Instant::now();
    loop {
        match probe.bind(&addr.into()) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                if start.elapsed() >= LISTENER_TEARDOWN {
                    return Err(addr_in_use());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // Other bind errors (EADDRNOTAVAIL, EACCES) are the real bind's to report.
            _ => return Ok(()),
        }
    }
}

fn addr_in_use() -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrInUse,
        "address already in use (is another copy running?)",
    )
}

/// Whether this process could bind a listener of its own to `addr` (`--check-config`): a
/// probe with SO_REUSEADDR and SO_REUSEPORT is bound and closed at once, never listening.
/// SO_REUSEPORT lets it bind beside listeners of this user's that have it too (the same
/// proxy already running, as when `systemctl reload` checks first: its listeners are
/// SO_REUSEPORT groups), while a socket of another program (no SO_REUSEPORT) or of another
/// user holds the address against it: `AddrInUse`, with the start's message. Other bind
/// errors (EACCES below port 1024 without the capability, EADDRNOTAVAIL for an address not
/// on this host) are the start's too. A probe that never listens joins no group.
pub fn probe_bind(addr: SocketAddr) -> io::Result<()> {
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    probe.set_reuse_address(true)?;
    probe.set_reuse_port(true)?;
    if addr.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    match probe.bind(&addr.into()) {
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(addr_in_use()),
        r => r,
    }
}

/// A host name that gave no address to connect to.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("cannot resolve `{host}`: {source}")]
    Lookup { host: String, source: io::Error },
    #[error("`{host}` resolves to no address")]
    NoAddress { host: String },
}

/// The addresses of `host` (an IP literal or a name) in the order to try them: never empty.
/// A literal is taken as it is, without a lookup.
pub fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let found = (host, port)
        .to_socket_addrs()
        .map_err(|source| ResolveError::Lookup {
            host: host.to_string(),
            source,
        })?;
    let addrs = connect_order(found);
    if addrs.is_empty() {
        return Err(ResolveError::NoAddress {
            host: host.to_string(),
        });
    }
    Ok(addrs)
}

/// The address rule: IPv4 addresses first, then IPv6, each family in the order given, without
/// repeats (a resolver may list an address once per socket type).
pub fn connect_order(addrs: impl IntoIterator<Item = SocketAddr>) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for a in addrs {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    // A stable sort keeps the resolver's order within each family.
    out.sort_by_key(|a| a.is_ipv6());
    out
}

/// Connect to the first of `addrs` that accepts, trying them in order (see [`connect`]). The
/// error is the last address's. Callers bound the whole attempt with their connect timeout.
pub async fn connect_any(
    addrs: &[SocketAddr],
    src: Option<IpAddr>,
) -> io::Result<monoio::net::TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to");
    for &dst in addrs {
        match connect(dst, src).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connect to `dst`, with TCP_NODELAY set. With `src`, the socket is bound to that address
/// first with IP_BIND_ADDRESS_NO_PORT, so the kernel picks the port at connect time per
/// (src, dst) pair: spreading sources over 127.0.0.0/8 multiplies the ephemeral ports.
pub async fn connect(dst: SocketAddr, src: Option<IpAddr>) -> io::Result<monoio::net::TcpStream> {
    let stream = match src {
        None => monoio::net::TcpStream::connect_addr(dst).await?,
        Some(ip) => {
            let sock = Socket::new(Domain::for_address(dst), Type::STREAM, Some(Protocol::TCP))?;
            sock.set_nonblocking(true)?;
            set_bind_address_no_port(&sock);
            sock.bind(&SocketAddr::new(ip, 0).into())?;
            match sock.connect(&dst.into()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                Err(e) => return Err(e),
            }
            let stream = monoio::net::TcpStream::from_std(sock.into())?;
            stream.writable(false).await?;
            use std::os::fd::{AsRawFd, BorrowedFd};
            // SAFETY: the fd is owned by `stream`, which outlives this borrow.
            let fd = unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) };
            if let Some(e) = SockRef::from(&fd).take_error()? {
                return Err(e);
            }
            stream
        }
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn set_bind_address_no_port(sock: &Socket) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: valid fd, option value is a c_int that lives across the call.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            &one as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Whether an accept error is about resources (EMFILE, ENFILE, ENOBUFS, ENOMEM): the socket
/// stays ready, so retrying at once would spin a core. Back off instead.
pub fn is_resource_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// How long to pause the accept loop after an accept error.
pub fn accept_backoff(e: &io::Error) -> Duration {
    if is_resource_exhaustion(e) {
        Duration::from_millis(10)
    } else {
        // ECONNABORTED and friends: the next connection is fine; yield briefly.
        Duration::from_millis(1)
    }
}

/// A log line at most once per `every`; counts what it swallowed in between.
#[derive(Debug)]
pub struct RateLimitedLog {
    every: Duration,
    last: Option<std::time::Instant>,
    suppressed: u64,
}

impl RateLimitedLog {
    pub const fn new(every: Duration) -> Self {
        RateLimitedLog {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// Call `emit(suppressed_since_last)` if the interval has passed, else count the event.
    pub fn log(&mut self, emit: impl FnOnce(u64)) {
        let now = std::time::Instant::now();
        match self.last {
            Some(t) if now.duration_since(t) < self.every => self.suppressed += 1,
            _ => {
                emit(self.suppressed);
                self.suppressed = 0;
                self.last = Some(now);
            }
        }
    }
}

/// At most `burst` lines in each window of `every`; the lines past them are counted, and the
/// count is told once, before the first line let through in a later window: a failure that
/// repeats thousands of times a second costs a few lines a second, not a line per event.
#[derive(Debug)]
pub struct BurstLog {
    every: Duration,
    burst: u32,
    /// When the current window began, and the lines let through in it.
    window: Option<(std::time::Instant, u32)>,
    suppressed: u64,
}

/// What [`BurstLog::admit`] says about one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Write it, after a line telling of this many lines held back before it (when not 0).
    Write { suppressed: u64 },
    /// Hold it back (it is counted).
    Hold,
}

impl BurstLog {
    pub const fn new(every: Duration, burst: u32) -> Self {
        BurstLog {
            every,
            burst,
            window: None,
            suppressed: 0,
        }
    }

    /// Whether a line that comes at `now` is written.
    pub fn admit(&mut self, now: std::time::Instant) -> Admit {
        let (start, used) = match self.window {
            Some((start, used)) if now.saturating_duration_since(start) < self.every => {
                (start, used)
            }
            _ => (now, 0),
        };
        if used >= self.burst {
            self.suppressed += 1;
            return Admit::Hold;
        }
        self.window = Some((start, used + 1));
        Admit::Write {
            suppressed: std::mem::take(&mut self.suppressed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_log_lets_a_few_lines_a_window_through_and_tells_what_it_held() {
        let mut l = BurstLog::new(Duration::from_secs(1), 3);
        let t0 = std::time::Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let first: Vec<Admit> = (0..5).map(|i| l.admit(at(i * 100))).collect();
        let write = |suppressed| Admit::Write { suppressed };
        assert_eq!(
            first,
            [write(0), write(0), write(0), Admit::Hold, Admit::Hold]
        );
        // A new window: the first line comes with the count held back.
        assert_eq!(l.admit(at(1000)), write(2));
        assert_eq!(l.admit(at(1100)), write(0));
        assert_eq!(l.admit(at(1200)), write(0));
        assert_eq!(l.admit(at(1300)), Admit::Hold);
        // Long after: a window of its own, with the one held.
        assert_eq!(l.admit(at(60_000)), write(1));
    }

    #[test]
    fn reuseport_group_shares_one_port() {
        let g = reuseport_group("127.0.0.1:0".parse().unwrap(), 3, 128).unwrap();
        let port = g[0].local_addr().unwrap().port();
        assert_ne!(port, 0);
        assert!(g.iter().all(|l| l.local_addr().unwrap().port() == port));
    }

    #[test]
    fn a_port_another_group_listens_on_is_refused() {
        let g = reuseport_group("127.0.0.1:0".parse().unwrap(), 2, 128).unwrap();
        let taken = g[0].local_addr().unwrap();
        let e = reuseport_group(taken, 2, 128).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(e.to_string().contains("already in use"), "{e}");
        // A plain listener (no SO_REUSEPORT) too.
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let e = reuseport_group(plain.local_addr().unwrap(), 1, 128).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        // Once closed, the port can be bound again, even with the listener's side of a
        // connection left in TIME_WAIT (it closed first).
        let mut c = std::net::TcpStream::connect(taken).unwrap();
        // The listeners are non-blocking: poll them until one has the connection.
        let accepted = (0..2000)
            .find_map(|_| {
                let s = g.iter().find_map(|l| l.accept().ok());
                if s.is_none() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                s
            })
            .expect("connection accepted");
        drop(accepted);
        let _ = std::io::Read::read(&mut c, &mut [0u8; 1]);
        drop(c);
        drop(g);
        let again = reuseport_group(taken, 2, 128).unwrap();
        assert_eq!(again[1].local_addr().unwrap(), taken);
    }

    #[test]
    fn addresses_are_tried_ipv4_first_in_resolver_order() {
        let a = |s: &str| -> SocketAddr { s.parse().unwrap() };
        // (what the resolver returned, the order tried)
        let cases: &[(&[&str], &[&str])] = &[
            (&[], &[]),
            (&["127.0.0.1:80"], &["127.0.0.1:80"]),
            (&["[::1]:80"], &["[::1]:80"]),
            // `localhost` where the resolver puts ::1 first.
            (&["[::1]:80", "127.0.0.1:80"], &["127.0.0.1:80", "[::1]:80"]),
            (
                &["[::1]:80", "10.0.0.2:80", "[::2]:80", "10.0.0.1:80"],
                &["10.0.0.2:80", "10.0.0.1:80", "[::1]:80", "[::2]:80"],
            ),
            // Once per socket type: each address is tried once.
            (
                &["127.0.0.1:80", "127.0.0.1:80", "[::1]:80", "[::1]:80"],
                &["127.0.0.1:80", "[::1]:80"],
            ),
        ];
        for (given, want) in cases {
            let got = connect_order(given.iter().map(|s| a(s)));
            let want: Vec<SocketAddr> = want.iter().map(|s| a(s)).collect();
            assert_eq!(got, want, "{given:?}");
        }
    }

    #[test]
    fn literals_are_not_looked_up_and_names_are_ordered() {
        assert_eq!(
            resolve("10.1.2.3", 81).unwrap(),
            ["10.1.2.3:81".parse().unwrap()]
        );
        assert_eq!(resolve("::1", 81).unwrap(), ["[::1]:81".parse().unwrap()]);
        assert_eq!(resolve("[::1]", 81).unwrap(), ["[::1]:81".parse().unwrap()]);
        let local = resolve("localhost", 82).unwrap();
        assert!(local.iter().all(|a| a.ip().is_loopback() && a.port() == 82));
        assert_eq!(local, connect_order(local.clone()));
        let e = resolve("no-such-host.invalid", 80).unwrap_err().to_string();
        assert!(e.contains("no-such-host.invalid"), "{e}");
    }

    /// Every address is tried in order: a refused one is passed over, on either driver.
    #[test]
    fn connect_any_tries_the_next_address() {
        // Bound without listen for the whole test: connects are refused, and no other test
        // can take the port in between.
        let closed =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        closed
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let refused = closed.local_addr().unwrap().as_socket().unwrap();
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open_addr = open.local_addr().unwrap();
        for driver in crate::runtime::drivers_here() {
            let (peer, refused_kind, none_kind) = crate::runtime::run_on(driver, 64, async {
                let s = connect_any(&[refused, open_addr], None).await.unwrap();
                let peer = s.peer_addr().unwrap();
                let e = connect_any(&[refused], None).await.unwrap_err();
                let none = connect_any(&[], None).await.unwrap_err();
                (peer, e.kind(), none.kind())
            })
            .expect("runtime");
            assert_eq!(peer, open_addr);
            assert_eq!(refused_kind, io::ErrorKind::ConnectionRefused);
            assert_eq!(none_kind, io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn rate_limited_log_swallows_bursts() {
        let mut l = RateLimitedLog::new(Duration::from_secs(3600));
        let mut emitted = vec![];
        for _ in 0..5 {
            l.log(|n| emitted.push(n));
        }
        assert_eq!(emitted, vec![0]);
        assert_eq!(l.suppressed, 4);
    }

    #[test]
    fn nofile_limit_is_raised_to_hard() {
        let cur = raise_nofile_limit();
        // SAFETY: plain struct out-parameter.
        let hard = unsafe {
            let mut rl: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
            rl.rlim_max
        };
        if hard == libc::RLIM_INFINITY {
            let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert!(cur >= nr_open.min(1024), "{cur}");
        } else {
            assert_eq!(cur, hard as u64);
        }
    }

    #[test]
    fn accepted_sockets_inherit_nodelay_from_the_listener() {
        let l = reuseport_listener("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        nodelay_listener(&l).unwrap();
        l.set_nonblocking(false).unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert!(s.nodelay().unwrap());
        drop(c);
    }

    #[test]
    fn listeners_defer_accept_until_the_client_speaks() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let l = reuseport_listener("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        defer_accept_listener(&l).unwrap();
        let mut secs: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a valid fd, and a c_int with its length for the kernel to fill in.
        let r = unsafe {
            libc::getsockopt(
                l.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                &mut secs as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!(r, 0);
        assert!(secs > 0, "TCP_DEFER_ACCEPT is set");
        // A client that speaks is accepted at once, its bytes already there.
        l.set_nonblocking(false).unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        let (s, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        s.set_nonblocking(true).unwrap();
        let n = std::io::Read::read(&mut &s, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n");
    }
}
