//! Binary takeover: a new `proxy` started with `--takeover` takes the listening sockets of the
//! one serving `--takeover-socket` (SCM_RIGHTS), the old one drains and exits 0. Under
//! continuous load (our loader at a fixed rate, keep-alive) nothing is refused and no request
//! fails; the port-in-use check lets the new process start on the port in use (and bind more
//! sockets into the group for more workers); the takeover socket passes to the new process,
//! so it can be taken over in turn; mistakes are one clear line.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::inproc::Client;
use tests::process::{Process, ProxyProcess, READY};
use tests::reload::{assert_no_failure, loader_report, start_loader, Scratch};

fn spawn(
    listen: &str,
    upstream: SocketAddr,
    workers: u32,
    socket: &Path,
    take: bool,
) -> ProxyProcess {
    let mut cmd = ProxyProcess::command();
    cmd.args(["--listen", listen, "--no-pin", "--shutdown-timeout", "1s"])
        .args(["--workers", &workers.to_string()])
        .arg("--upstream")
        .arg(upstream.to_string())
        .arg("--takeover-socket")
        .arg(socket);
    if take {
        cmd.arg("--takeover");
    }
    ProxyProcess::start(&mut cmd)
}

#[test]
fn a_takeover_under_load_refuses_nothing_and_fails_nothing() {
    let o = tests::origin();
    let dir = Scratch::new("takeover-load");
    let socket = dir.path("takeover.sock");
    let mut old = spawn("127.0.0.1:0", o.addr(), 2, &socket, false);
    assert!(old.summary.contains("takeover socket"), "{}", old.summary);
    let json = dir.path("load.json");
    let loader = start_loader(&format!("http://{}/", old.addr), 400, 8, "4s", &json);
    assert!(tests::eventually(READY, || o.requests() >= 50), "no load");

    // The new one, on the port in use (the port-in-use check must let it) with more
    // workers than the old one has sockets.
    let port = format!("127.0.0.1:{}", old.addr.port());
    let mut new = spawn(&port, o.addr(), 3, &socket, true);
    assert_eq!(new.addr, old.addr);
    assert!(new.summary.contains("taken over"), "{}", new.summary);
    old.wait_line("handed to the new process; draining", READY);
    let status = old
        .exit_within(READY)
        .expect("the old proxy exits after draining");
    assert!(status.success(), "{status:?}");
    let served_before = o.requests();

    let report = loader_report(loader, &json);
    assert_no_failure(&report, 400);
    // The load went on through the new process after the old one was gone.
    assert!(
        o.requests() > served_before + 50,
        "{} then {}",
        served_before,
        o.requests()
    );
    assert!(
        new.exit_within(Duration::ZERO).is_none(),
        "the new proxy exited"
    );
    assert_eq!(Client::connect(new.addr).get("/").status, 200);
}

#[test]
fn a_kept_alive_connection_is_closed_after_its_next_response_and_the_socket_passes_on() {
    let o = tests::origin();
    let dir = Scratch::new("takeover-chain");
    let socket = dir.path("takeover.sock");
    let mut first = spawn("127.0.0.1:0", o.addr(), 1, &socket, false);
    let mut c = Client::connect(first.addr);
    assert_eq!(c.get("/").status, 200);

    let mut second = spawn("127.0.0.1:0", o.addr(), 1, &socket, true);
    first.wait_line("handed to the new process", READY);
    // The old process still serves the kept-alive connection once, and closes it.
    c.send(&tests::raw::get("/last"));
    let r = c
        .try_response(shared::http::RequestMethod::Other)
        .unwrap_or_else(|e| {
            panic!(
                "{e}; origin requests {}; first: {:?}; second: {:?}",
                o.requests(),
                first.arrived(),
                second.arrived()
            )
        });
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"), "{:?}", r.headers);
    assert!(first.exit_within(READY).expect("first exits").success());
    let mut c2 = Client::connect(second.addr);
    c2.send(&tests::raw::get("/"));
    let r = c2
        .try_response(shared::http::RequestMethod::Other)
        .unwrap_or_else(|e| {
            let ss = Command::new("ss").args(["-tanp"]).output().unwrap();
            let ss = String::from_utf8_lossy(&ss.stdout).into_owned();
            let port = second.addr.port().to_string();
            let lines: Vec<&str> = ss.lines().filter(|l| l.contains(&port)).collect();
            panic!(
                "{e}; second: {:?}; ss:\n{}",
                second.arrived(),
                lines.join("\n")
            )
        });
    assert_eq!(r.status, 200);

    // The takeover socket is the second one's now: a third takes over from it.
    let third = spawn("127.0.0.1:0", o.addr(), 1, &socket, true);
    assert_eq!(third.addr, second.addr);
    second.wait_line("handed to the new process", READY);
    assert!(second.exit_within(READY).expect("second exits").success());
    assert_eq!(Client::connect(third.addr).get("/").status, 200);
}

#[test]
fn takeover_mistakes_are_one_line_and_a_non_zero_exit() {
    let o = tests::origin();
    let dir = Scratch::new("takeover-mistakes");
    let socket = dir.path("takeover.sock");
    let run = |args: &[&str]| {
        let mut cmd = Command::new(tests::bin("proxy"));
        cmd.args(["--listen", "127.0.0.1:0", "--workers", "1", "--no-pin"])
            .arg("--upstream")
            .arg(o.addr().to_string())
            .args(args);
        let (status, err) = Process::spawn(&mut cmd).finish(READY);
        (status.code(), err)
    };
    let path = socket.to_str().unwrap();

    // Nobody serves the socket.
    let (code, err) = run(&["--takeover-socket", path, "--takeover"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot take over from {path}")),
        "{err}"
    );

    // --takeover needs the socket.
    let (code, err) = run(&["--takeover"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--takeover-socket"), "{err}");

    // A second proxy on a socket another one serves, without --takeover.
    let _running = spawn("127.0.0.1:0", o.addr(), 1, &socket, false);
    let (code, err) = run(&["--takeover-socket", path]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("another proxy listens for takeovers"), "{err}");
}

#[test]
fn a_new_process_that_fails_before_it_is_ready_leaves_the_old_one_serving() {
    let o = tests::origin();
    let dir = Scratch::new("takeover-fails");
    let socket = dir.path("takeover.sock");
    let mut old = spawn("127.0.0.1:0", o.addr(), 1, &socket, false);
    let mut c = Client::connect(old.addr);
    assert_eq!(c.get("/").status, 200);
    // The new one takes the sockets, then cannot bind its second listener (an address of
    // TEST-NET-1, on no interface here).
    let nowhere = "192.0.2.1:8080";
    let mut cmd = Command::new(tests::bin("proxy"));
    cmd.args(["--listen", "127.0.0.1:0", "--listen", nowhere])
        .args([
            "--workers",
            "1",
            "--no-pin",
            "--upstream",
            &o.addr().to_string(),
        ])
        .arg("--takeover-socket")
        .arg(&socket)
        .arg("--takeover");
    let (status, err) = Process::spawn(&mut cmd).finish(READY);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot listen on {nowhere}")),
        "{err}"
    );
    let line = old.wait_line("takeover aborted, still serving", READY);
    assert!(line.contains("went away before it was ready"), "{line}");
    // Nothing changed for the old one's clients, and it can still be taken over.
    assert_eq!(c.get("/").status, 200);
    assert_eq!(Client::connect(old.addr).get("/").status, 200);
    let new = spawn("127.0.0.1:0", o.addr(), 1, &socket, true);
    old.wait_line("handed to the new process", READY);
    assert_eq!(Client::connect(new.addr).get("/").status, 200);
}

/// A proxy in front of `o` with an admin listener at `admin` and its takeover socket at
/// `socket`, `(workers, shutdown timeout)`; taking the running one over when `take`.
fn with_admin(
    o: &shared::origin::Origin,
    admin: std::net::SocketAddr,
    socket: &std::path::Path,
    (workers, shutdown): (&str, &str),
    take: bool,
) -> ProxyProcess {
    let mut cmd = ProxyProcess::command();
    cmd.args(["--listen", "127.0.0.1:0", "--no-pin", "--workers", workers])
        .args(["--shutdown-timeout", shutdown])
        .args(["--upstream", &o.addr().to_string()])
        .args(["--admin", &admin.to_string()])
        .arg("--takeover-socket")
        .arg(socket);
    if take {
        cmd.arg("--takeover");
    }
    ProxyProcess::start(&mut cmd)
}

/// The admin address passes to the new process too: it serves the admin socket the old one
/// hands over instead of failing on the address in use, and answers there once the old one is
/// gone.
#[test]
fn a_takeover_keeps_the_admin_address() {
    let o = tests::origin();
    let dir = Scratch::new("takeover-admin");
    let socket = dir.path("takeover.sock");
    let admin = tests::ClosedPort::new();
    let start = |take| with_admin(&o, admin.addr(), &socket, ("1", "1s"), take);
    let mut old = start(false);
    let new = start(true);
    old.wait_line("handed to the new process", READY);
    let exited = old.exit_within(READY);
    assert!(
        exited.is_some_and(|s| s.success()),
        "{exited:?} {:?}",
        old.arrived()
    );
    let r = tests::raw::exchange(
        admin.addr(),
        b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
        tests::raw::WAIT,
    );
    assert_eq!(
        r.responses().first().map(|x| x.status),
        Some(200),
        "{}",
        tests::raw::show(&r)
    );
    assert!(new.summary.contains("taken over"), "{}", new.summary);
}

/// Once the new process is ready, the admin address is its alone: while the old one still
/// drains a kept-alive connection, every scrape is the new process's (its request count is 0,
/// the old one's is not), never a mix of the two that a Prometheus would read as a counter
/// reset. The old one still serves its connection.
#[test]
fn after_a_takeover_every_scrape_is_the_new_process() {
    let o = tests::origin();
    let dir = Scratch::new("takeover-admin-scrapes");
    let socket = dir.path("takeover.sock");
    let admin = tests::ClosedPort::new();
    let start = |take| with_admin(&o, admin.addr(), &socket, ("2", "60s"), take);
    let requests = || {
        let m = tests::scrape::scrape(admin.addr());
        tests::scrape::total(&m, "proxy_request_duration_seconds_count")
    };
    let mut old = start(false);
    let mut held = Client::connect(old.addr);
    for _ in 0..3 {
        assert_eq!(held.get("/").status, 200);
    }
    assert_eq!(requests(), 3.0);

    let _new = start(true);
    old.wait_line("handed to the new process; draining", READY);
    let seen: Vec<f64> = (0..40).map(|_| requests()).collect();
    assert!(
        seen.iter().all(|&n| n == 0.0),
        "scrapes after the takeover, by their request count (the old process had 3): {seen:?}"
    );

    // The old process still serves its connection once; a stop ends its wait for the rest.
    held.send(&tests::raw::get("/last"));
    let r = held
        .try_response(shared::http::RequestMethod::Other)
        .unwrap_or_else(|e| panic!("{e}; old: {:?}", old.arrived()));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"), "{:?}", r.headers);
    old.signal(libc::SIGTERM);
    let exited = old.exit_within(READY);
    assert!(
        exited.is_some_and(|s| s.success()),
        "{exited:?} {:?}",
        old.arrived()
    );
    assert_eq!(requests(), 0.0);
}

/// With nothing left to serve after the handover (no connection open, no accept that took
/// one), the old process exits then, not at the shutdown timeout: its accepts still waiting
/// for a connection are cancelled and their outcome awaited, so one that took a connection
/// meanwhile would still serve it.
#[test]
fn an_idle_old_process_exits_once_handed_over_not_at_the_timeout() {
    let o = tests::origin();
    let dir = Scratch::new("takeover-idle");
    let socket = dir.path("takeover.sock");
    let start = |listen: &str, take: bool| {
        let mut cmd = ProxyProcess::command();
        cmd.args(["--listen", listen, "--no-pin", "--workers", "2"])
            .args([
                "--shutdown-timeout",
                "60s",
                "--upstream",
                &o.addr().to_string(),
            ])
            .arg("--takeover-socket")
            .arg(&socket);
        if take {
            cmd.arg("--takeover");
        }
        ProxyProcess::start(&mut cmd)
    };
    let mut old = start("127.0.0.1:0", false);
    for _ in 0..4 {
        let r = tests::raw::exchange(
            old.addr,
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            tests::raw::WAIT,
        );
        assert_eq!(r.responses().first().map(|x| x.status), Some(200));
    }
    let new = start(&format!("127.0.0.1:{}", old.addr.port()), true);
    old.wait_line("handed to the new process; draining", READY);
    // Patience far below the 60 s timeout: only an exit on having nothing to serve fits.
    let exited = old.exit_within(READY);
    assert!(
        exited.is_some_and(|s| s.success()),
        "{exited:?} {:?}",
        old.arrived()
    );
    assert_eq!(Client::connect(new.addr).get("/").status, 200);
}

/// The old process goes away after handing its sockets over and before the new one's `ready`
/// (a SIGTERM meanwhile): here a stand-in for it closes its end of the takeover connection
/// right after `end`. The new process, already serving on the sockets, says so in one line
/// and goes on serving, and the takeover path is its own: a third process takes over from it.
#[test]
fn a_new_process_whose_old_one_went_away_before_ready_goes_on_serving() {
    use proxy::takeover::{accept_within, bind_listen, recv, send, seqpacket};
    use std::os::fd::AsRawFd;
    let o = tests::origin();
    let dir = Scratch::new("takeover-old-gone");
    let socket = dir.path("takeover.sock");
    let public = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = public.local_addr().unwrap();
    let control = seqpacket().expect("seqpacket");
    bind_listen(&control, &socket).expect("listen on the takeover path");
    let old = std::thread::spawn(move || -> Result<(), String> {
        let conn = match accept_within(&control, READY) {
            Ok(Some(c)) => c,
            Ok(None) => return Err("nobody connected".into()),
            Err(e) => return Err(format!("accept: {e}")),
        };
        let (hello, _) = recv(&conn).map_err(|e| format!("receive hello: {e}"))?;
        if hello != b"proxy-takeover 1" {
            return Err(format!("hello: {:?}", String::from_utf8_lossy(&hello)));
        }
        let line = format!("listener {addr} {addr}");
        send(&conn, line.as_bytes(), &[public.as_raw_fd()]).map_err(|e| e.to_string())?;
        send(&conn, b"end", &[]).map_err(|e| e.to_string())?;
        // Gone before the new process, which still starts its workers, can say `ready`.
        drop(conn);
        drop(control);
        Ok(())
    });
    let mut cmd = ProxyProcess::command();
    cmd.args(["--listen", &addr.to_string(), "--no-pin", "--workers", "1"])
        .args([
            "--shutdown-timeout",
            "1s",
            "--upstream",
            &o.addr().to_string(),
        ])
        .arg("--takeover-socket")
        .arg(&socket)
        .arg("--takeover");
    let mut new = Process::spawn(cmd.stdout(std::process::Stdio::null()));
    let warning = new.wait_line("ready", READY);
    old.join().unwrap().expect("the stand-in's exchange");
    assert!(warning.contains("warning"), "{warning}");
    assert!(warning.contains("serving"), "{warning}");
    let summary = new.wait_line("listening on ", READY);
    assert!(summary.contains(&addr.to_string()), "{summary}");
    assert_eq!(Client::connect(addr).get("/").status, 200);
    assert!(
        new.exit_within(Duration::ZERO).is_none(),
        "{:?}",
        new.arrived()
    );

    // The path names the new process's socket: a third process takes over from it.
    let third = spawn(&addr.to_string(), o.addr(), 1, &socket, true);
    assert!(third.summary.contains("taken over"), "{}", third.summary);
    new.wait_line("handed to the new process", READY);
    assert!(new.exit_within(READY).expect("it exits").success());
    assert_eq!(Client::connect(third.addr).get("/").status, 200);
}

/// Two takeovers at once: the old process hands over to one and closes its takeover socket with
/// the other's connection still waiting on it (reset). The loser says plainly that another
/// process took over first, not "Connection reset by peer". Here a stand-in for the old
/// process and the winner: the winner's socket is renamed over the path, as a new process
/// does, before the old one lets go of its own.
#[test]
fn a_takeover_that_another_one_beat_says_so() {
    use proxy::takeover::{bind_listen, seqpacket};
    use std::os::fd::AsRawFd;
    let o = tests::origin();
    let dir = Scratch::new("takeover-lost");
    let socket = dir.path("takeover.sock");
    let old = seqpacket().expect("seqpacket");
    bind_listen(&old, &socket).expect("listen on the takeover path");
    let mut cmd = Command::new(tests::bin("proxy"));
    cmd.args(["--listen", "127.0.0.1:0", "--workers", "1", "--no-pin"])
        .args(["--upstream", &o.addr().to_string()])
        .arg("--takeover-socket")
        .arg(&socket)
        .arg("--takeover");
    let loser = Process::spawn(&mut cmd);
    // The loser's connection waits in the old process's backlog, never accepted.
    let mut pfd = libc::pollfd {
        fd: old.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on an open descriptor.
    let n = unsafe { libc::poll(&mut pfd, 1, READY.as_millis() as libc::c_int) };
    assert_eq!(n, 1, "the new process never connected");
    let winner = seqpacket().expect("seqpacket");
    let tmp = dir.path("winner.tmp");
    bind_listen(&winner, &tmp).expect("the winner's socket");
    std::fs::rename(&tmp, &socket).expect("rename over the path");
    drop(old);
    let (status, err) = loser.finish(READY);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(": another process took over first ("),
        "the line says so before the system's error: {err}"
    );
    drop(winner);
}
