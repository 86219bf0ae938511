//! systemd's Type=notify from the outside: the proxy binary with `$NOTIFY_SOCKET` pointing at
//! a Unix datagram socket of the test's sends READY=1 once it listens, RELOADING=1 (with
//! MONOTONIC_USEC) then READY=1 around a SIGHUP reload, and STOPPING=1 on SIGTERM.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;
use tests::process::ProxyProcess;

fn next(sink: &UnixDatagram) -> String {
    let mut buf = [0u8; 512];
    let n = sink
        .recv(&mut buf)
        .expect("a notification within the timeout");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn ready_reloading_and_stopping_reach_the_notify_socket() {
    let dir = tests::temp_dir("notify");
    let sock = dir.join("notify.sock");
    let sink = UnixDatagram::bind(&sock).expect("bind the notify socket");
    sink.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let config = dir.join("proxy.toml");
    std::fs::write(
        &config,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 1\npin = false\n\
         [upstream.app]\nservers = [\"127.0.0.1:9\"]\n",
    )
    .unwrap();
    let mut cmd = ProxyProcess::command();
    cmd.arg("--config").arg(&config).env("NOTIFY_SOCKET", &sock);
    let mut p = ProxyProcess::start(&mut cmd);
    assert_eq!(next(&sink), "READY=1");
    p.signal(libc::SIGHUP);
    let reloading = next(&sink);
    let usec = reloading
        .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
        .unwrap_or_else(|| panic!("{reloading:?}"));
    assert!(usec.parse::<u64>().is_ok_and(|u| u > 0), "{reloading:?}");
    assert_eq!(next(&sink), "READY=1");
    p.wait_line("reload", Duration::from_secs(10));
    p.signal(libc::SIGTERM);
    assert_eq!(next(&sink), "STOPPING=1");
    assert!(p
        .exit_within(Duration::from_secs(10))
        .is_some_and(|s| s.success()));
}

#[test]
fn a_notify_socket_that_is_no_address_is_a_one_line_error() {
    let out = ProxyProcess::command()
        .args(["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9"])
        .env("NOTIFY_SOCKET", "relative/path")
        .output()
        .expect("run proxy");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("proxy: $NOTIFY_SOCKET is \"relative/path\""),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
