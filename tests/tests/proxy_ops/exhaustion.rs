//! Descriptor exhaustion (issue 25): the `proxy` process started with RLIMIT_NOFILE 256
//! (soft and hard, so it cannot raise it) under more client connections than that. It sheds
//! with clear counts (the accept errors on /metrics and in its error log, a request that finds
//! no socket for its upstream while none is in flight answered 503 and counted as
//! `no_resources`; one with others in flight waits for them to give a socket back), never spins (its CPU
//! time over the exhausted period, read from /proc, stays a small part of that period), and
//! serves normally by itself once the clients go.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};
use tests::process::ProxyProcess;
use tests::raw::{self, Client, End, WAIT};
use tests::scrape::{scrape, value};

const LIMIT: u64 = 256;
/// More than the proxy can hold: the rest wait in its backlog.
const CLIENTS: usize = 400;

/// An admin address nobody else is likely to take: a loopback address of this process's
/// own (127.25.x.y from the pid) on a port the kernel just handed out.
fn admin_addr() -> SocketAddr {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let pid = std::process::id();
    SocketAddr::from(([127, 25, (pid >> 8) as u8, pid as u8], port))
}

fn spawn(origin: SocketAddr, admin: SocketAddr) -> ProxyProcess {
    let mut cmd = ProxyProcess::command();
    cmd.args(["--listen", "127.0.0.1:0", "--workers", "1", "--no-pin"])
        .args([
            "--upstream",
            &origin.to_string(),
            "--admin",
            &admin.to_string(),
        ])
        // No pooled upstream connection: a request needs a new socket.
        .args(["--keepalive", "0", "--header-timeout", "60s"]);
    limit_files(&mut cmd);
    ProxyProcess::start(&mut cmd)
}

fn limit_files(cmd: &mut Command) {
    limit_files_to(cmd, LIMIT)
}

fn limit_files_to(cmd: &mut Command, limit: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the forked child before exec; setrlimit is async-signal-safe and reads
    // only a value on this stack.
    unsafe {
        cmd.pre_exec(move || {
            let rl = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// CPU time (user + system) process `pid` used so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command (which may hold spaces) start after its ')'.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the command.
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis((f[11] + f[12]) * 1000 / hz)
}

/// `addr` as /proc/net/tcp writes it.
fn proc_net_hex(addr: SocketAddr) -> String {
    let SocketAddr::V4(v4) = addr else {
        panic!("IPv4 only: {addr}")
    };
    let ip = u32::from_ne_bytes(v4.ip().octets());
    format!("{ip:08X}:{:04X}", v4.port())
}

/// Whether the proxy listening on `listen` accepted client `c`: its end of the connection
/// has an inode (a socket not accepted yet has none).
fn is_accepted(listen: SocketAddr, c: &TcpStream) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let (ours, theirs) = (
        proc_net_hex(listen),
        proc_net_hex(c.local_addr().expect("addr")),
    );
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() > 9 && f[1] == ours && f[2] == theirs && f[9] != "0"
    })
}

fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .count() as u64
}

#[test]
fn descriptor_exhaustion_sheds_with_counts_without_spinning_and_recovers() {
    let limit = shared::net::raise_nofile_limit();
    assert!(limit > 2 * CLIENTS as u64 + 100, "open-files limit {limit}");
    let o = tests::origin();
    let admin = admin_addr();
    let mut p = spawn(o.addr(), admin);
    assert!(p.summary.contains("open files 256"), "{}", p.summary);
    let pid = p.id();
    // More connections than descriptors: the proxy holds what it can, the rest wait.
    let held: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| TcpStream::connect(p.addr).expect("connect (backlog)"))
        .collect();
    // The event: the first failed accept is logged, naming the cause.
    let line = p.wait_line("accept", Duration::from_secs(10));
    assert!(line.contains("open files"), "{line}");
    // The exhausted period: from this first log line to the next one (the error log's
    // interval is 5 s; it comes with the count of the errors it held back). A loop that spun
    // would burn a core all along; backing off, the worker uses a sliver of it.
    let (t0, cpu0) = (Instant::now(), cpu_time(pid));
    assert_eq!(open_fds(pid), LIMIT, "the table is full");
    // A held connection the proxy took asks for an upstream: there is no socket for it, so
    // 503, counted as the proxy's own shortage. (Which ones it took is the kernel's choice:
    // with TCP_DEFER_ACCEPT a silent connection reaches the accept queue late.)
    let taken = held
        .iter()
        .find(|c| is_accepted(p.addr, c))
        .expect("a connection the proxy accepted");
    let mut first = Client::from_stream(taken.try_clone().expect("clone"));
    first.stream.set_write_timeout(Some(WAIT)).expect("timeout");
    first
        .stream
        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("sent");
    let r = first
        .response(WAIT)
        .unwrap_or_else(|r| panic!("no answer: {}", raw::show(&r)));
    raw::assert_well_formed(&r, 503);
    let line = p.wait_line("similar errors suppressed", Duration::from_secs(30));
    let (period, cpu) = (t0.elapsed(), cpu_time(pid).saturating_sub(cpu0));
    eprintln!("exhausted for {period:?}: {cpu:?} of CPU; {line}");
    assert!(
        period >= Duration::from_secs(4),
        "not rate-limited: {period:?}"
    );
    assert!(
        cpu < period / 5,
        "the proxy spins while exhausted: {cpu:?} of CPU in {period:?}"
    );
    let suppressed: f64 = line
        .split(" similar errors suppressed")
        .next()
        .and_then(|l| l.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line}"));
    // The clients go; the proxy serves again by itself (the backlog's connections are
    // accepted and end as they closed).
    drop(first);
    drop(held);
    let served = tests::eventually(Duration::from_secs(10), || {
        let r = raw::exchange(
            p.addr,
            b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            WAIT,
        );
        r.end == End::Closed && r.responses().first().map(|r| r.status) == Some(200)
    });
    assert!(served, "the proxy did not recover");
    // The counts, once its descriptors are back: every failed accept (the logged ones and
    // those held back), the one request shed with 503. The errors held back include that
    // request's two failed connects (the first, and the one after a pass of the loop in case a
    // socket closed in it: `exchange::room`).
    let m = scrape(admin);
    let accept_errors = value(&m, "proxy_accept_errors_total");
    let logged_accepts = 1.0 + suppressed - 2.0;
    assert!(
        accept_errors >= logged_accepts,
        "accept errors {accept_errors}, logged {logged_accepts}"
    );
    assert_eq!(
        value(&m, r#"proxy_request_faults_total{kind="no_resources"}"#),
        1.0
    );
    assert_eq!(
        value(&m, r#"proxy_requests_total{route="/",code="5xx"}"#),
        1.0
    );
    assert!(value(&m, r#"proxy_requests_total{route="/",code="2xx"}"#) >= 1.0);
}

/// Out of descriptors for upstream sockets while other requests are in flight: a request
/// waits for one of them to end (its socket closes and frees a descriptor) instead of getting
/// 503 at once, as HAProxy queues at its `maxconn`. The proxy can hold 64 descriptors: 40
/// clients leave it room for about a dozen upstream sockets, and the 40 requests (each held
/// 200 ms by the origin, none pooled) all get 200, a dozen at a time.
#[test]
fn a_request_short_of_descriptors_waits_for_one_in_flight_to_end() {
    const FEW: u64 = 64;
    const CLIENTS: usize = 40;
    let o = tests::origin();
    let mut cmd = ProxyProcess::command();
    cmd.args(["--listen", "127.0.0.1:0", "--workers", "1", "--no-pin"])
        .args(["--upstream", &o.addr().to_string()])
        .args(["--keepalive", "0", "--connect-timeout", "20s"]);
    limit_files_to(&mut cmd, FEW);
    let p = ProxyProcess::start(&mut cmd);
    let pid = p.id();
    let before = open_fds(pid);
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| Client::connect(p.addr)).collect();
    // Every client accepted (each holds a descriptor) before any request is whole: what is
    // left is what the upstream sockets share. (A first line makes the connection acceptable
    // through TCP_DEFER_ACCEPT.)
    for c in &mut clients {
        c.send(b"GET /?delay=200ms HTTP/1.1\r\n").expect("sent");
    }
    let accepted = tests::eventually(WAIT, || {
        clients.iter().all(|c| is_accepted(p.addr, &c.stream))
    });
    assert!(accepted, "not every client was accepted");
    let room = FEW - open_fds(pid);
    assert!(
        room < CLIENTS as u64 / 2,
        "{room} descriptors left (baseline {before}): the requests would not run short"
    );
    for c in &mut clients {
        c.send(b"Host: t\r\n\r\n").expect("sent");
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c
            .response(WAIT)
            .unwrap_or_else(|r| panic!("client {i}: no answer: {}", raw::show(&r)));
        assert_eq!(
            r.status, 200,
            "client {i} ({room} descriptors for upstream sockets)"
        );
    }
    assert_eq!(o.requests(), CLIENTS as u64);
}
