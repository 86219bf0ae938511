//! SIGHUP on the `proxy` binary: the config file is read again and every worker moves to a
//! new generation while it serves. Under continuous load (our loader at a fixed rate,
//! keep-alive) no request fails; kept-alive connections move to a switched upstream at their
//! next request; a broken file is rejected and the old config serves on; quick mode has no
//! file to reload; pools of servers that stay are kept; a listener change is named, not
//! applied.

use std::path::Path;
use std::time::Duration;
use tests::inproc::Client;
use tests::process::{ProxyProcess, READY};
use tests::reload::{
    assert_no_failure, config_text, loader_report, start_loader, write_config, Scratch,
};

/// `proxy --config FILE` with `workers` workers; killed on drop if still running.
fn spawn(file: &Path, workers: u32) -> ProxyProcess {
    spawn_with(file, workers, &[])
}

fn spawn_with(file: &Path, workers: u32, extra: &[&str]) -> ProxyProcess {
    let mut cmd = ProxyProcess::command();
    cmd.arg("--config").arg(file);
    cmd.args(["--workers", &workers.to_string(), "--no-pin"])
        .args(extra);
    ProxyProcess::start(&mut cmd)
}

#[test]
fn reload_under_load_moves_kept_alive_connections_to_the_new_upstream_without_a_failure() {
    let (a, b) = (tests::origin(), tests::origin());
    let dir = Scratch::new("reload-switch");
    let file = dir.path("proxy.toml");
    write_config(&file, &config_text("127.0.0.1:0", &[a.addr()], ""));
    let mut p = spawn(&file, 2);
    let json = dir.path("load.json");
    let url = format!("http://{}/", p.addr);
    let loader = start_loader(&url, 400, 8, "4s", &json);
    // The load is on: origin A serves it.
    assert!(tests::eventually(READY, || a.requests() >= 50), "no load");

    write_config(&file, &config_text("127.0.0.1:0", &[b.addr()], ""));
    p.signal(libc::SIGHUP);
    let line = p.wait_line("proxy: reload:", READY);
    assert!(line.contains("generation 2"), "{line}");
    assert!(line.contains("upstream app changed"), "{line}");
    assert!(line.contains("on 2 workers"), "{line}");
    // Every worker took generation 2 before the line: the loader's kept-alive connections
    // (it opens no new ones) reach B from their next request on.
    assert!(
        tests::eventually(READY, || b.requests() >= 50),
        "B got no load"
    );
    // Requests already on generation 1 finish there. Each of the loader's 8 connections
    // waits for its answer before it sends again (no pipelining), and its next request goes
    // to B; the origin answers at once, so once B has served 200 (25 a connection on
    // average, the rate spread over all 8) nothing is still on its way to A.
    assert!(
        tests::eventually(READY, || b.requests() >= 200),
        "B's load stopped"
    );
    let a_after = a.requests();

    let report = loader_report(loader, &json);
    assert_no_failure(&report, 400);
    assert_eq!(
        a.requests(),
        a_after,
        "A still got requests after B had taken the load"
    );
    assert_eq!(
        a.requests() + b.requests(),
        report["complete_requests"].as_u64().unwrap(),
        "every request reached one origin"
    );
    assert!(p.exit_within(Duration::ZERO).is_none(), "the proxy exited");
}

#[test]
fn a_broken_file_on_sighup_is_rejected_with_its_line_and_key_and_the_old_config_serves() {
    let a = tests::origin();
    let dir = Scratch::new("reload-broken");
    let file = dir.path("proxy.toml");
    write_config(&file, &config_text("127.0.0.1:0", &[a.addr()], ""));
    let mut p = spawn(&file, 1);
    let mut c = Client::connect(p.addr);
    assert_eq!(c.get("/before").status, 200);

    // Line 5: a key the group does not have.
    write_config(
        &file,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[upstream.app]\nservrs = [\"127.0.0.1:1\"]\n",
    );
    p.signal(libc::SIGHUP);
    let line = p.wait_line("reload rejected", READY);
    assert!(line.contains("generation 1 keeps running"), "{line}");
    assert!(
        line.contains("proxy.toml:5: key `upstream.app.servrs`"),
        "{line}"
    );

    // The kept-alive connection and a new one are served by generation 1.
    assert_eq!(c.get("/after").status, 200);
    assert_eq!(Client::connect(p.addr).get("/new").status, 200);
    assert_eq!(a.requests(), 3);

    // A good file after the broken one is generation 2.
    write_config(&file, &config_text("127.0.0.1:0", &[a.addr()], ""));
    p.signal(libc::SIGHUP);
    let line = p.wait_line("proxy: reload:", READY);
    assert!(line.contains("generation 2"), "{line}");
    assert_eq!(c.get("/again").status, 200);
}

#[test]
fn a_hash_weight_past_the_cap_on_sighup_is_rejected_and_the_old_config_serves() {
    let a = tests::origin();
    let dir = Scratch::new("reload-weight");
    let file = dir.path("proxy.toml");
    let good = config_text("127.0.0.1:0", &[a.addr()], "");
    write_config(&file, &good);
    let mut p = spawn(&file, 1);
    let mut c = Client::connect(p.addr);
    assert_eq!(c.get("/before").status, 200);

    // Once validated, then the workers building its ring aborted the whole process.
    let servers = format!("servers = [\"{}\"]", a.addr());
    let huge = format!(
        "servers = [{{ addr = \"{}\", weight = 4294967295 }}]\nbalance = \"hash\"",
        a.addr()
    );
    write_config(&file, &good.replace(&servers, &huge));
    p.signal(libc::SIGHUP);
    let line = p.wait_line("reload rejected", READY);
    assert!(line.contains("generation 1 keeps running"), "{line}");
    assert!(
        line.contains("proxy.toml:5: key `upstream.app.servers[0].weight`"),
        "{line}"
    );
    assert_eq!(c.get("/after").status, 200);
    assert_eq!(Client::connect(p.addr).get("/new").status, 200);
    assert!(p.exit_within(Duration::ZERO).is_none(), "the proxy exited");
}

#[test]
fn quick_mode_sighup_says_there_is_no_file_and_keeps_serving() {
    let a = tests::origin();
    let mut p = ProxyProcess::start(
        ProxyProcess::command()
            .args(["--listen", "127.0.0.1:0", "--workers", "2", "--no-pin"])
            .arg("--upstream")
            .arg(a.addr().to_string()),
    );
    let mut c = Client::connect(p.addr);
    assert_eq!(c.get("/").status, 200);
    p.signal(libc::SIGHUP);
    let line = p.wait_line("SIGHUP", READY);
    assert!(line.contains("no configuration file to reload"), "{line}");
    assert_eq!(c.get("/").status, 200);
    assert_eq!(Client::connect(p.addr).get("/").status, 200);
    // A second one too (SIGHUP stays handled).
    p.signal(libc::SIGHUP);
    p.wait_line("no configuration file to reload", READY);
    assert_eq!(c.get("/").status, 200);
    assert!(p.exit_within(Duration::ZERO).is_none(), "the proxy exited");
}

#[test]
fn pools_of_servers_that_stay_are_kept_across_a_reload() {
    let a = tests::origin();
    let dir = Scratch::new("reload-pools");
    let file = dir.path("proxy.toml");
    write_config(&file, &config_text("127.0.0.1:0", &[a.addr()], ""));
    let mut p = spawn(&file, 1);
    let mut c = Client::connect(p.addr);
    for _ in 0..5 {
        assert_eq!(c.get("/").status, 200);
    }
    let conns = a.connections();
    assert_eq!(conns, 1, "one pooled upstream connection");

    // A change elsewhere (a timeout): the server stays, so does its pool.
    let extra = "read = \"30s\"\n";
    write_config(&file, &config_text("127.0.0.1:0", &[a.addr()], extra));
    p.signal(libc::SIGHUP);
    let line = p.wait_line("proxy: reload:", READY);
    assert!(line.contains("generation 2"), "{line}");
    assert!(line.contains("timeouts"), "{line}");
    assert!(line.contains("kept 1/1 server pools (1 idle"), "{line}");
    for _ in 0..5 {
        assert_eq!(c.get("/").status, 200);
    }
    assert_eq!(Client::connect(p.addr).get("/").status, 200);
    assert_eq!(a.connections(), conns, "the upstream connection was reused");
    assert_eq!(a.requests(), 11);
}

#[test]
fn a_listener_change_is_logged_as_needing_a_restart_and_not_applied() {
    let a = tests::origin();
    let dir = Scratch::new("reload-listen");
    let file = dir.path("proxy.toml");
    write_config(&file, &config_text("127.0.0.1:0", &[a.addr()], ""));
    let mut p = spawn(&file, 2);
    let other = tests::ClosedPort::new();
    let moved = format!("127.0.0.1:{}", other.port());
    write_config(&file, &config_text(&moved, &[a.addr()], ""));
    p.signal(libc::SIGHUP);
    let line = p.wait_line("proxy: reload:", READY);
    assert!(line.contains("generation 2"), "{line}");
    assert!(
        line.contains(&format!(
            "not applied, kept as started (needs a restart or a takeover): listeners 127.0.0.1:0 -> {moved}"
        )),
        "{line}"
    );
    // Still served where it was; nothing was bound where the file now says.
    assert_eq!(Client::connect(p.addr).get("/").status, 200);
    assert!(std::net::TcpStream::connect(other.addr()).is_err());
}

#[test]
fn flags_given_at_start_still_apply_after_a_reload() {
    let (a, b) = (tests::origin(), tests::origin());
    let dir = Scratch::new("reload-flags");
    let file = dir.path("proxy.toml");
    // The file allows any body; the flag limits it to 16 bytes.
    write_config(&file, &config_text("127.0.0.1:0", &[a.addr()], ""));
    let mut p = spawn_with(&file, 1, &["--max-body", "16"]);
    let post =
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 32\r\n\r\n0123456789abcdef0123456789abcdef";
    let mut c = Client::connect(p.addr);
    c.send(post);
    assert_eq!(c.response().status, 413);

    write_config(&file, &config_text("127.0.0.1:0", &[b.addr()], ""));
    p.signal(libc::SIGHUP);
    let line = p.wait_line("proxy: reload:", READY);
    assert!(line.contains("upstream app changed"), "{line}");
    assert!(!line.contains("limits"), "the limit did not change: {line}");
    let mut c = Client::connect(p.addr);
    c.send(post);
    assert_eq!(c.response().status, 413, "--max-body after the reload");
    assert_eq!(Client::connect(p.addr).get("/").status, 200);
    assert_eq!((a.requests(), b.requests()), (0, 1));
}
