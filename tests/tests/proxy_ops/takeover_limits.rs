//! Client limits across a binary takeover: the new process attaches its own steering program
//! to the listener groups it takes over (here with fewer workers than the old one had
//! sockets), so one client's count stays exact on the new process; and a new process that
//! fails after taking the sockets (having replaced the program) leaves the old one counting
//! exactly: the old process puts its program back.

use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use tests::process::{Process, ProxyProcess, READY};
use tests::raw::{Client, WAIT};
use tests::reload::Scratch;

fn spawn(dir: &Scratch, name: &str, listen: &str, workers: u32, take: bool) -> ProxyProcess {
    let limits = "[client_limits]\nrate = \"1/m\"\nburst = 10\n";
    ProxyProcess::start(&mut command(dir, name, listen, workers, take, limits))
}

/// The proxy with `extra` in its file (sections), workers unpinned.
fn command(
    dir: &Scratch,
    name: &str,
    listen: &str,
    workers: u32,
    take: bool,
    extra: &str,
) -> Command {
    let file = dir.path(name);
    let text = format!(
        "[[listen]]\naddr = \"{listen}\"\n[runtime]\nworkers = {workers}\npin = false\n\
         [timeouts]\nshutdown = \"1s\"\n{extra}\
         [[route]]\npath = \"/\"\nreturn = {{ status = 200 }}\n"
    );
    std::fs::write(&file, text).unwrap();
    let socket = dir.path("takeover.sock");
    let mut cmd = ProxyProcess::command();
    cmd.arg("--config")
        .arg(&file)
        .arg("--takeover-socket")
        .arg(&socket);
    if take {
        cmd.arg("--takeover");
    }
    cmd
}

/// How many of `n` requests from `from`, each on a new connection, got 429.
fn limited_of(to: SocketAddr, from: &str, n: usize) -> usize {
    let mut limited = 0;
    for i in 0..n {
        let ip: IpAddr = from.parse().unwrap();
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&SocketAddr::new(ip, 0).into()).unwrap();
        s.connect(&to.into()).unwrap();
        let mut c = Client::from_stream(s.into());
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let r = c
            .response(WAIT)
            .unwrap_or_else(|r| panic!("request {i}: {}", tests::raw::show(&r)));
        match r.status {
            200 => {}
            429 => limited += 1,
            s => panic!("request {i}: {s}"),
        }
    }
    limited
}

#[test]
fn a_new_process_steers_the_groups_it_took_over_and_counts_exactly() {
    let dir = Scratch::new("takeover-limits");
    let mut old = spawn(&dir, "old.toml", "127.0.0.1:0", 3, false);
    assert!(
        old.summary.contains("client limits: exact"),
        "{}",
        old.summary
    );
    assert_eq!(limited_of(old.addr, "127.0.0.1", 30), 19);
    let port = format!("127.0.0.1:{}", old.addr.port());
    let mut new = spawn(&dir, "new.toml", &port, 2, true);
    assert!(
        new.summary.contains("client limits: exact"),
        "{}",
        new.summary
    );
    old.wait_line("handed to the new process; draining", READY);
    assert!(old.exit_within(READY).is_some_and(|s| s.success()));
    // The new process counts from zero (its own buckets), over its 2 workers and the 3
    // sockets it took: 11 pass, wherever the kernel would have put the connections.
    assert_eq!(limited_of(new.addr, "127.0.0.2", 30), 19);
    assert_eq!(limited_of(new.addr, "127.0.0.1", 30), 19);
    new.signal(libc::SIGTERM);
    assert!(new.exit_within(READY).is_some());
}

#[test]
fn a_takeover_that_fails_leaves_the_old_process_steering_by_address() {
    let dir = Scratch::new("takeover-limits-abort");
    let mut old = spawn(&dir, "old.toml", "127.0.0.1:0", 3, false);
    assert!(
        old.summary.contains("client limits: exact"),
        "{}",
        old.summary
    );
    // The new process counts no clients (so it takes the old program off the groups it
    // took over) and then fails to start: its access log cannot be opened.
    let port = format!("127.0.0.1:{}", old.addr.port());
    let log = "[access_log]\npath = \"/nonexistent/dir/access.log\"\n";
    let mut cmd = command(&dir, "new.toml", &port, 2, true, log);
    let (status, err) = Process::spawn(cmd.stdout(Stdio::null())).finish(READY);
    assert!(!status.success(), "{err}");
    assert!(err.contains("/nonexistent/dir/access.log"), "{err}");
    old.wait_line("takeover aborted, still serving", READY);
    // Each address's connections still reach one worker: 11 of 30 pass (the burst and the
    // one the rate allows), however the kernel's hash would spread them over 3 workers.
    assert_eq!(limited_of(old.addr, "127.0.0.3", 30), 19);
    assert_eq!(limited_of(old.addr, "127.0.0.4", 30), 19);
    old.signal(libc::SIGTERM);
    assert!(old.exit_within(READY).is_some());
}
