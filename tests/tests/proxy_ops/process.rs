//! The `proxy` binary as a process: start-up summary, bounded memory while streaming 100 MB
//! both ways, and SIGTERM's graceful exit.

use shared::origin::{expected_body, PATTERN};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tests::inproc::Client;
use tests::process::{Process, ProxyProcess};

/// The proxy (1 worker, unpinned) over `upstream`; killed on drop if still running.
fn spawn(upstream: SocketAddr) -> ProxyProcess {
    spawn_with(upstream, &[], None)
}

/// With extra flags, and optionally the open-files limit (soft, hard) it starts under.
fn spawn_with(upstream: SocketAddr, extra: &[&str], nofile: Option<(u64, u64)>) -> ProxyProcess {
    spawn_full(upstream, extra, nofile, false)
}

/// `ignore_sigint`: started the way a shell starts a background job (SIGINT ignored).
fn spawn_full(
    upstream: SocketAddr,
    extra: &[&str],
    nofile: Option<(u64, u64)>,
    ignore_sigint: bool,
) -> ProxyProcess {
    let mut cmd = ProxyProcess::command();
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--no-pin",
        "--upstream",
    ])
    .arg(upstream.to_string())
    .args(extra);
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the forked child before exec; setrlimit and signal are
    // async-signal-safe and only read values on this stack.
    unsafe {
        cmd.pre_exec(move || {
            if let Some((soft, hard)) = nofile {
                let rl = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if ignore_sigint {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    ProxyProcess::start(&mut cmd)
}

/// Peak and current resident set size in KiB (VmHWM, VmRSS) of process `pid`.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Resident file-backed pages (RssFile: the binary's code and data) of process `pid`, KiB.
fn file_backed_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("RssFile:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

const HUNDRED_MB: usize = 100 << 20;

/// Patience for an effect that should come promptly (generous: the machine is shared).
const WAIT: Duration = Duration::from_secs(10);

#[test]
fn summary_names_workers_driver_listener_and_upstream() {
    let o = tests::origin();
    let p = spawn(o.addr());
    let s = &p.summary;
    assert!(s.contains("1 worker"), "{s}");
    assert!(s.contains("driver"), "{s}");
    assert!(s.contains(&o.addr().to_string()), "{s}");
    assert!(s.contains("open files"), "{s}");
    assert!(s.contains("limits:") && s.contains("round-robin"), "{s}");
    let mut c = Client::connect(p.addr);
    assert_eq!(c.get("/").status, 200);
}

#[test]
fn hundred_megabytes_both_ways_in_bounded_memory() {
    let o = tests::origin();
    let p = spawn(o.addr());
    let mut c = Client::connect(p.addr);

    // Download: read and verify as it streams, never holding the body.
    c.send(format!("GET /?size={HUNDRED_MB} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        c.stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {HUNDRED_MB}")),
        "{head}"
    );
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0usize;
    while got < HUNDRED_MB {
        let n = c
            .stream
            .read(&mut buf[..(HUNDRED_MB - got).min(1 << 16)])
            .unwrap();
        assert!(n > 0, "closed after {got} bytes");
        for (i, b) in buf[..n].iter().enumerate() {
            assert_eq!(*b, PATTERN[(got + i) % PATTERN.len()], "byte {}", got + i);
        }
        got += n;
    }

    // Upload on the same connection.
    c.send(
        format!("PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: {HUNDRED_MB}\r\n\r\n").as_bytes(),
    );
    let block = expected_body(1 << 16);
    for _ in 0..HUNDRED_MB / block.len() {
        c.stream.write_all(&block).unwrap();
    }
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(o.body_bytes(), HUNDRED_MB as u64);

    let (hwm, rss) = memory_kib(p.id());
    let code = file_backed_kib(p.id());
    eprintln!(
        "proxy memory after 100 MB each way: peak {hwm} KiB, now {rss} KiB ({code} KiB of it \
         the binary's pages)"
    );
    // docs/OPERATIONS.md's claim: a long transfer stays under 10 MB resident. The binary's own
    // pages are not what a transfer costs: a debug build of the proxy (rustls and ring
    // linked in) maps ~9 MB of them at start, a release build ~4 MB.
    assert!(
        (hwm - code) * 1024 < 10_000_000,
        "peak resident memory {hwm} KiB (now {rss} KiB, {code} KiB file-backed)"
    );
}

/// Open descriptors of process `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Idle clients hold no buffers and no request state: a new connection waits for its first
/// bytes, and a keep-alive one for its next request, holding no buffer (a single receive into
/// the worker's buffer ring, then a multishot one) and no request frame (taken from the
/// worker's pool when bytes arrive): each costs the proxy a small task and its socket. Both
/// states, 1,000 clients each, on a proxy of their own: RSS delta per client. Before: 10.5 KB
/// (new) and 8.5 KB (one request answered) with a release build, as benches/idle_memory.sh
/// measures; after, about 0.7 KB (release) and 1.1 KB (debug). The bound fails if a client
/// holds its 8 KiB read buffer or its request frame (4.7 KB). While the crowd is held, a new
/// client is answered, and every idle one still is.
#[test]
fn idle_clients_hold_no_buffers_nor_request_state() {
    let _turn = crate::one_crowd_at_a_time();
    // Waits without a buffer need io_uring with the fast flags: required, as everywhere.
    if tests::fast_uring().is_none() {
        return;
    }
    const N: usize = 1000;
    let limit = shared::net::raise_nofile_limit();
    assert!(
        limit > 2 * N as u64 + 200,
        "open-files limit {limit}: too low for {N} clients"
    );
    let o = tests::origin();
    for keep_alive in [false, true] {
        let p = spawn_with(o.addr(), &["--header-timeout", "60s"], None);
        assert!(p.summary.contains("multishot receives"), "{}", p.summary);
        let what = if keep_alive { "keep-alive" } else { "new" };
        let client = || {
            let mut c = Client::connect(p.addr);
            if keep_alive {
                assert_eq!(c.get("/?size=64").status, 200);
            }
            c
        };
        // Warm-up: the worker's pools and first allocations are not what a client costs.
        drop((0..50).map(|_| client()).collect::<Vec<_>>());
        let mut probe = Client::connect(p.addr);
        assert_eq!(probe.get("/?size=64").status, 200);
        let fds = open_fds(p.id());
        let (_, before) = memory_kib(p.id());
        let mut clients: Vec<Client> = (0..N).map(|_| client()).collect();
        // Every client accepted; the probe's answer comes after their tasks ran (one worker).
        assert!(
            tests::eventually(WAIT, || open_fds(p.id()) >= fds + N),
            "{what}: the proxy holds {} of {N} clients",
            open_fds(p.id()) - fds
        );
        assert_eq!(probe.get("/?size=64").status, 200, "{what}");
        let (_, after) = memory_kib(p.id());
        let per_client = after.saturating_sub(before) * 1024 / N as u64;
        eprintln!("{N} idle {what} clients: {before} -> {after} KiB, {per_client} bytes each");
        assert!(
            per_client < 2048,
            "{what}: {per_client} bytes per idle client ({before} -> {after} KiB)"
        );
        // A new client is answered, and so is every idle one, on its own connection.
        assert_eq!(client().get("/?size=64").status, 200, "{what}");
        for c in clients.iter_mut().step_by(97) {
            assert_eq!(c.get("/?size=64").status, 200, "{what}");
        }
    }
}

/// The in-flight request is a POST whose body is still coming: it cannot finish before the
/// signal. The idle connection closing shows the shutdown began; only then does the client
/// send its body (after the proxy's 100 Continue: it reads a small body whole before the
/// request goes upstream), and the answer still comes, with `Connection: close`.
#[test]
fn sigterm_finishes_in_flight_requests_and_exits_zero() {
    graceful_stop_finishes_in_flight_requests(libc::SIGTERM);
}

/// SIGQUIT is nginx's graceful stop (`nginx -s quit`): the same as SIGTERM here. (It killed
/// the proxy at once: the request in flight got no answer, exit by signal 3.)
#[test]
fn sigquit_is_a_graceful_stop_as_sigterm_is() {
    graceful_stop_finishes_in_flight_requests(libc::SIGQUIT);
}

fn graceful_stop_finishes_in_flight_requests(signal: libc::c_int) {
    let o = tests::origin();
    let mut p = spawn(o.addr());
    let mut idle = Client::connect(p.addr);
    assert_eq!(idle.get("/").status, 200);
    let mut busy = Client::connect(p.addr);
    busy.send(
        b"POST /?size=1000 HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    );
    busy.expect_100();
    p.signal(signal);
    idle.assert_closed();
    busy.send(b"abcd");
    let r = busy
        .try_response(shared::http::RequestMethod::Other)
        .unwrap_or_else(|e| panic!("{e}; exit {:?}", p.exit_within(Duration::ZERO)));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, expected_body(1000));
    assert_eq!(r.header("connection"), Some("close"));
    busy.assert_closed();
    // (No "nothing listens any more" probe: the process has exited, and its freed port may
    // already belong to another test.)
    let status = p.exit_within(WAIT);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
}

#[test]
fn open_files_limit_is_raised_to_the_hard_limit() {
    let o = tests::origin();
    let p = spawn_with(o.addr(), &[], Some((64, 4096)));
    assert!(p.summary.contains("open files 4096"), "{}", p.summary);
}

/// With the fd table full, accept fails with EMFILE while connections wait in the backlog:
/// the accept loop must back off (not spin a core: counted, not timed), log rate-limited, and
/// serve again once connections close.
#[test]
fn emfile_backs_off_without_spinning_and_recovers() {
    const LIMIT: u64 = 64;
    let o = tests::origin();
    let mut p = spawn_with(o.addr(), &["--header-timeout", "30s"], Some((LIMIT, LIMIT)));
    assert!(
        p.summary.contains(&format!("open files {LIMIT}")),
        "{}",
        p.summary
    );
    // More connections than descriptors: the proxy holds what it can, the rest wait.
    let held: Vec<std::net::TcpStream> = (0..LIMIT + 40)
        .map(|_| std::net::TcpStream::connect(p.addr).expect("connect (backlog)"))
        .collect();
    // Wait for the effect: the first EMFILE is logged.
    let line = p
        .next_line(Duration::from_secs(5))
        .expect("an accept error is logged");
    assert!(
        line.contains("accept") && line.contains("open files"),
        "{line}"
    );
    // The next line comes once the log's interval (5 s) has passed, with the count of the
    // errors it swallowed meanwhile. Each failed accept is followed by a 10 ms pause, so that
    // count is at most one per 10 ms of the interval, however fast or loaded the machine (a
    // slower machine only fails fewer accepts); a loop that spins fails hundreds of thousands.
    let t = Instant::now();
    let line = p
        .next_line(Duration::from_secs(30))
        .expect("the accept errors go on and are logged again");
    let elapsed = t.elapsed();
    assert!(
        elapsed >= Duration::from_secs(4),
        "not rate-limited: a second line after {elapsed:?}: {line}"
    );
    let suppressed: u64 = line
        .split(" similar errors suppressed")
        .next()
        .and_then(|l| l.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of suppressed errors: {line}"));
    let bound = 2 * elapsed.as_millis() as u64 / 10 + 100;
    assert!(
        (1..=bound).contains(&suppressed),
        "the accept loop spins: {suppressed} failed accepts in {elapsed:?} (at most {bound})"
    );
    drop(held);
    // Recovers: a new connection is served (the closed ones free their descriptors).
    let mut c = Client::connect(p.addr);
    assert_eq!(c.get("/").status, 200);
}

/// A second proxy on a port the first listens on fails at start ("address in use") instead
/// of silently joining the first one's SO_REUSEPORT group and sharing its connections.
#[test]
fn second_proxy_on_the_same_port_fails_at_start() {
    let o = tests::origin();
    let first = spawn(o.addr());
    let second = Process::spawn(
        ProxyProcess::command()
            .args(["--listen", &first.addr.to_string(), "--upstream"])
            .arg(o.addr().to_string())
            .args(["--workers", "2", "--no-pin"])
            .stdout(Stdio::null()),
    );
    let (status, err) = second.finish(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&first.addr.to_string()) && err.contains("already in use"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // The first one is unaffected.
    let mut c = Client::connect(first.addr);
    assert_eq!(c.get("/").status, 200);
}

/// SIGTERM with a request the upstream never answers: the shutdown deadline ends it, and
/// the process still exits 0, soon after the deadline.
#[test]
fn sigterm_deadline_ends_requests_that_do_not_finish() {
    let o = tests::origin();
    let mut p = spawn_with(o.addr(), &["--shutdown-timeout", "300ms"], None);
    let mut busy = Client::connect(p.addr);
    busy.send(b"GET /?hang=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(
        tests::eventually(WAIT, || o.requests() == 1),
        "the request never reached the origin"
    );
    let t = Instant::now();
    p.signal(libc::SIGTERM);
    let status = p.exit_within(Duration::from_secs(5));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    // The client is not left hanging, nor given something that looks like an answer: its
    // connection is closed (EOF or reset; a read timeout would mean it was left open).
    let err = busy
        .try_response(shared::http::RequestMethod::Other)
        .unwrap_err();
    assert!(
        err == "closed before the response head" || err.contains("reset"),
        "{err}"
    );
}

/// A second signal means "stop now": exit 1 without waiting for the deadline.
#[test]
fn second_signal_exits_at_once() {
    let o = tests::origin();
    let mut p = spawn_with(o.addr(), &["--shutdown-timeout", "30s"], None);
    let mut busy = Client::connect(p.addr);
    busy.send(b"GET /?hang=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(
        tests::eventually(WAIT, || o.requests() == 1),
        "the request never reached the origin"
    );
    p.signal(libc::SIGTERM);
    p.signal(libc::SIGINT);
    let status = p.exit_within(Duration::from_secs(5));
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{status:?}");
}

/// Nothing a client does makes the proxy log: bad requests, limits, timeouts, aborted
/// connections and plain requests leave stderr silent after the summary.
#[test]
fn nothing_a_client_does_is_logged() {
    let o = tests::origin();
    let mut p = spawn_with(
        o.addr(),
        &["--header-timeout", "200ms", "--max-body", "10"],
        None,
    );
    let bad: [&[u8]; 6] = [
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/3.0\r\nHost: t\r\n\r\n",
        b"CONNECT a:1 HTTP/1.1\r\nHost: a:1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n01234567890",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t", // header timeout
    ];
    for _ in 0..5 {
        for req in bad {
            let mut c = Client::connect(p.addr);
            c.send(req);
            let _ = c.read_to_close();
        }
        // A client that goes away mid-request.
        let mut c = Client::connect(p.addr);
        c.send(b"GET /?delay=20ms HTTP/1.1\r\nHost: t\r\n\r\n");
        drop(c);
        let mut c = Client::connect(p.addr);
        assert_eq!(c.get("/").status, 200);
    }
    let logged = p.arrived();
    assert!(logged.is_empty(), "{logged:?}");
}

/// `proxy ... &` in a script starts with SIGINT ignored: SIGINT still stops it gracefully
/// (the signals are blocked in every thread, and Linux queues a blocked signal even when
/// ignored, so the `sigwait` thread still takes it).
#[test]
fn sigint_works_when_started_as_a_background_job() {
    let o = tests::origin();
    let mut p = spawn_full(o.addr(), &[], None, true);
    let mut c = Client::connect(p.addr);
    assert_eq!(c.get("/").status, 200);
    p.signal(libc::SIGINT);
    let status = p.exit_within(Duration::from_secs(5));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
}

/// The proxy itself runs out of descriptors for an upstream connection (the client's was the
/// last one): 503, the proxy's shortage, not a 502 blaming the server; and requests succeed
/// again once descriptors free up.
#[test]
fn no_descriptor_for_an_upstream_connection_is_503() {
    const LIMIT: u64 = 48;
    let o = tests::origin();
    // No pooling: every request opens (and then closes) its own upstream connection.
    let p = spawn_with(o.addr(), &["--keepalive", "0"], Some((LIMIT, LIMIT)));
    let fd_dir = format!("/proc/{}/fd", p.id());
    let open_fds = || std::fs::read_dir(&fd_dir).unwrap().count();
    let mut held = Vec::new();
    let refused = loop {
        assert!(
            held.len() < LIMIT as usize,
            "the proxy never ran out of descriptors"
        );
        let before = open_fds();
        let mut c = Client::connect(p.addr);
        c.stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response();
        if r.status != 200 {
            break r;
        }
        // Wait for the effect: this request's upstream socket is closed, its client one held.
        // (Not asserted: the loop's own check, a 503 within LIMIT requests, is the verdict.)
        tests::eventually(Duration::from_secs(2), || open_fds() == before + 1);
        held.push(c);
    };
    assert_eq!(
        refused.status,
        503,
        "{:?}",
        String::from_utf8_lossy(&refused.head)
    );
    assert_eq!(refused.header("connection"), Some("close"));
    let len = refused.body.len().to_string();
    assert_eq!(refused.header("content-length"), Some(len.as_str()));
    drop(held);
    let mut c = Client::connect(p.addr);
    assert_eq!(c.get("/").status, 200);
}

/// HTTPS idle clients give their buffers back as plain ones do: after the handshake, and
/// after a keep-alive request, an HTTPS client parks (a receive into the worker's ring waits
/// for its next record) holding no request frame, no buffer set and none of the TLS
/// adapter's own buffers (its 16 KiB ciphertext scratch, its write buffer: back to the
/// thread's pool). What stays is rustls's session: its keys and its record reader's 4 KiB.
/// Before: about 23.5 KB each (the frame, the buffer set and the adapter's buffers held);
/// the bound fails if any of them is held again. While the crowd is held, a new client is
/// answered, and every idle one still is.
#[test]
fn idle_https_clients_hold_no_buffers_nor_request_state() {
    let _turn = crate::one_crowd_at_a_time();
    if tests::fast_uring().is_none() {
        return;
    }
    const N: usize = 500;
    let limit = shared::net::raise_nofile_limit();
    assert!(limit > 2 * N as u64 + 200, "open-files limit {limit}");
    let o = tests::origin();
    let ca = tests::tls::Ca::new();
    let dir = tests::temp_dir("idle-https");
    let (cert, key) = ca.leaf_files(&dir, "leaf", &["localhost"]);
    let cfg = tests::tls::client_config(&ca.der(), false);
    for keep_alive in [false, true] {
        let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
        let flags = [
            "--header-timeout",
            "60s",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ];
        let p = spawn_with(o.addr(), &flags, None);
        let what = if keep_alive { "keep-alive" } else { "new" };
        let client = || {
            let mut c = tests::tls::TlsClient::connect(p.addr, &cfg, "localhost").expect(what);
            if keep_alive {
                assert_eq!(c.get("/?size=64").status, 200);
            }
            c
        };
        drop((0..50).map(|_| client()).collect::<Vec<_>>());
        let mut probe = client();
        assert_eq!(probe.get("/?size=64").status, 200);
        let fds = open_fds(p.id());
        let (_, before) = memory_kib(p.id());
        let mut clients: Vec<_> = (0..N).map(|_| client()).collect();
        assert!(
            tests::eventually(WAIT, || open_fds(p.id()) >= fds + N),
            "{what}: the proxy holds {} of {N} clients",
            open_fds(p.id()) - fds
        );
        assert_eq!(probe.get("/?size=64").status, 200, "{what}");
        let (_, after) = memory_kib(p.id());
        let per_client = after.saturating_sub(before) * 1024 / N as u64;
        eprintln!(
            "{N} idle HTTPS {what} clients: {before} -> {after} KiB, {per_client} bytes each"
        );
        assert!(
            per_client < IDLE_HTTPS_BOUND,
            "{what}: {per_client} bytes per idle HTTPS client ({before} -> {after} KiB)"
        );
        assert_eq!(client().get("/?size=64").status, 200, "{what}");
        for c in clients.iter_mut().step_by(47) {
            assert_eq!(c.get("/?size=64").status, 200, "{what}");
        }
    }
}

/// Half the 23.5 KB an idle HTTPS client cost before it parked.
const IDLE_HTTPS_BOUND: u64 = 11_750;

/// After a crowd closes, the proxy's memory returns to where it was before it, within the
/// pools' idle bound: 1,000 clients connect and each sends a request that the origin holds
/// for 300 ms, so every one of them is served at once (1,000 request frames, buffer sets
/// and relay buffers in use together); then all close. The pools give back what was not used
/// for a whole second, down to their idle bound (docs/OPERATIONS.md: 64 frames, 64 buffer
/// sets, 16 relay buffers per worker), and what they free goes back to the system.
///
/// "Closed" is counted in descriptors against the proxy at rest: the ones it holds with no
/// client plus its upstream pool's `--keepalive` (a burst's surplus goes after a second
/// idle). A baseline counted right after the warm-up, as this test once did, held whatever
/// warm-up clients the proxy had not closed yet: when it had closed them all, the 64 idle
/// upstream connections the crowd left (against the warm-up's 50) never went below it.
#[test]
fn memory_returns_to_the_baseline_after_a_crowd_closes() {
    let _turn = crate::one_crowd_at_a_time();
    const N: usize = 1000;
    const KEEPALIVE: usize = 8;
    let limit = shared::net::raise_nofile_limit();
    assert!(limit > 2 * N as u64 + 200, "open-files limit {limit}");
    let o = tests::origin();
    let keepalive = KEEPALIVE.to_string();
    let flags = ["--header-timeout", "60s", "--keepalive", &keepalive];
    let p = spawn_with(o.addr(), &flags, None);
    // Counted once a request was answered: the start-up line can come before the worker made
    // its ring (a loaded machine: 6 of 30 starts here), which a count taken at once misses.
    // The request leaves one pooled upstream connection.
    // Its end read to the close, so the proxy had closed its side (after pooling the
    // upstream connection) before the count.
    let mut first = Client::connect(p.addr);
    first.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let answer = String::from_utf8_lossy(&first.read_to_close()).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer:?}");
    let no_client = open_fds(p.id()) - 1;
    let at_rest = || open_fds(p.id()) <= no_client + KEEPALIVE;
    let crowd = |n: usize| {
        let mut clients: Vec<Client> = (0..n).map(|_| Client::connect(p.addr)).collect();
        for c in clients.iter_mut() {
            c.send(b"GET /?size=64&delay=300ms HTTP/1.1\r\nHost: t\r\n\r\n");
        }
        for c in clients.iter_mut() {
            assert_eq!(c.response().status, 200);
        }
    };
    // Warm-up: the first allocations (the ring, the pools' first entries, the runtime's
    // tables) are not what a crowd leaves behind.
    crowd(50);
    assert!(
        tests::eventually(WAIT, at_rest),
        "the warm-up's connections stay open: {} descriptors, {no_client} with no client",
        open_fds(p.id())
    );
    let before = memory_kib(p.id()).1;
    crowd(N);
    let (peak, _) = memory_kib(p.id());
    assert!(
        tests::eventually(WAIT, at_rest),
        "the crowd's connections stay open: {} descriptors, {no_client} with no client",
        open_fds(p.id())
    );
    // The pools trim on a one-second tick: wait for the memory to come down (an event,
    // polled), and fail if it does not within the patience.
    let back = |rss: u64| rss <= before + RETURN_BOUND_KIB;
    let returned = tests::eventually(Duration::from_secs(10), || back(memory_kib(p.id()).1));
    let after = memory_kib(p.id()).1;
    eprintln!(
        "{N} clients served at once, closed: {before} KiB before, peak {peak}, {after} after"
    );
    assert!(
        returned,
        "{after} KiB after the crowd closed, {before} KiB before (peak {peak}): more than \
         {RETURN_BOUND_KIB} KiB stays"
    );
}

/// What may stay resident after a crowd closed: the pools' idle bound (64 frames and buffer
/// sets, 16 relay buffers: about 2 MB at most, less as touched pages) plus the allocator's
/// and the runtime's slack. Measured (debug build): 15 MB stayed before the pools trimmed,
/// 1.8 MB after; 2.99-3.02 MB in 2026-12 (three runs each of two builds a session apart, the
/// same), which the earlier bound of 3 MiB failed by 50 KB once: 4 MiB still tells a trim
/// that works from one that does not.
const RETURN_BOUND_KIB: u64 = 4096;

/// SIGUSR2 (nginx's binary upgrade) does not kill the proxy: one line says an upgrade here is a
/// new process started with --takeover, and it goes on serving.
#[test]
fn sigusr2_is_ignored_with_a_line_that_points_to_takeover() {
    let o = tests::origin();
    let mut p = spawn(o.addr());
    p.signal(libc::SIGUSR2);
    let line = p.wait_line("SIGUSR2", WAIT);
    assert!(line.contains("--takeover"), "{line}");
    assert_eq!(Client::connect(p.addr).get("/").status, 200);
    assert!(p.exit_within(Duration::ZERO).is_none(), "{:?}", p.arrived());
    p.signal(libc::SIGUSR2);
    p.wait_line("SIGUSR2", WAIT);
    assert_eq!(Client::connect(p.addr).get("/").status, 200);
    assert_eq!(p.arrived(), Vec::<String>::new(), "one line per signal");
}

/// The second stop signal exits at once (exit 1, requests in flight cut) with one line saying
/// so, and the access log lines of the requests that finished are written first: here one
/// that finished after the first signal, when the workers' flush tick had ended.
#[test]
fn a_second_signal_says_so_and_writes_the_access_log_first() {
    let gate = tests::gate::Gate::start();
    let dir = tests::temp_dir("stop-now-log");
    let log = dir.join("access.log");
    let log_arg = log.to_str().unwrap().to_string();
    let extra = ["--shutdown-timeout", "30s", "--access-log", &log_arg];
    let p = spawn_with(gate.addr, &extra, None);
    let mut idle = Client::connect(p.addr);
    idle.send(&tests::raw::get("/idle"));
    gate.next().go.send(()).unwrap();
    assert_eq!(idle.response().status, 200);
    let mut held = Client::connect(p.addr);
    held.send(&tests::raw::get("/held"));
    let _held = gate.next();
    let mut done = Client::connect(p.addr);
    done.send(&tests::raw::get("/done"));
    let finish = gate.next();
    p.signal(libc::SIGTERM);
    // The workers took the stop: idle connections close, the flush tick ends.
    idle.assert_closed();
    finish.go.send(()).unwrap();
    assert_eq!(done.response().status, 200);
    p.signal(libc::SIGTERM);
    let ProxyProcess { process, .. } = p;
    let (status, err) = process.finish(WAIT);
    assert_eq!(status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("second stop signal"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    let written = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        written.contains("GET /done "),
        "access log: {written:?}; stderr: {err}"
    );
}

/// A graceful stop waits for requests in flight, not for a lingering close: a client that
/// goes on sending after its answer (a refused head here) is read for a moment more, then
/// closed, and the process ends long before `lingering_time` (30 s) or the shutdown timeout.
#[test]
fn a_graceful_stop_does_not_wait_out_a_lingering_close() {
    let o = tests::origin();
    let mut p = spawn_with(o.addr(), &["--shutdown-timeout", "60s"], None);
    let mut c = tests::raw::Client::connect(p.addr);
    c.send(b"BAD REQUEST LINE\r\n\r\n").expect("send");
    let r = tests::raw::response(&mut c, "the refused head");
    assert_eq!(r.status, 400);
    // The client keeps sending (the proxy lingers, reading it) until the connection ends.
    let mut s = c.stream.try_clone().expect("clone");
    let sender = std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(40) {
            if s.write_all(b"x").is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    });
    p.signal(libc::SIGTERM);
    let status = p.exit_within(WAIT);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
    assert!(
        sender.join().expect("sender"),
        "the connection outlived the process"
    );
}

/// The admin listener's address, from the summary's `admin: http://ADDR/metrics ...` line.
fn admin_addr(summary: &str) -> SocketAddr {
    summary
        .split("admin: http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no admin address in the summary: {summary}"))
}

/// A graceful stop ends the admin listener's lingering closes as the workers end theirs
/// (`STOPPING_LINGER`): an admin client that goes on sending after its answer (a refused
/// POST with a body still coming) is closed while a request in flight still holds the
/// drain, long before `lingering_time` (30 s); then the process exits once that request is
/// answered. (They went on for as long as the drain did: until the workers ended.)
#[test]
fn a_graceful_stop_ends_the_admin_listeners_lingering_close() {
    let gate = tests::gate::Gate::start();
    let extra = ["--shutdown-timeout", "60s", "--admin", "127.0.0.1:0"];
    let mut p = spawn_with(gate.addr, &extra, None);
    let admin = admin_addr(&p.summary);
    let mut held = Client::connect(p.addr);
    held.send(&tests::raw::get("/held"));
    let arrival = gate.next();
    let mut c = tests::raw::Client::connect(admin);
    c.send(b"POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n")
        .expect("send");
    let r = tests::raw::response(&mut c, "the refused POST");
    assert_eq!(r.status, 405);
    // The client keeps sending its body (the admin thread lingers, reading it) until the
    // connection ends; it gives up well short of `lingering_time`.
    let mut s = c.stream.try_clone().expect("clone");
    let sender = std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if s.write_all(b"x").is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    });
    p.signal(libc::SIGTERM);
    assert!(
        sender.join().expect("sender"),
        "the admin connection was still lingering 20 s after the stop"
    );
    // The drain was still on: the request in flight is answered, then the process exits.
    arrival.go.send(()).expect("the gate");
    let r = held.response();
    assert_eq!(r.status, 200);
    let status = p.exit_within(WAIT);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
}
