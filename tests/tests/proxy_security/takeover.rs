//! Issue 22, item 15: the takeover socket is its owner's alone. Its file is created 0600 (no
//! moment with wider permissions), and both sides check the other's credentials
//! (SO_PEERCRED): a process of another user neither takes the listening sockets of a running
//! proxy nor hands its own to a new one.
//!
//! The other user is a child running this test binary as uid 65534 (`takeover_child`, which
//! plays its part as the environment says); that needs root, so those tests say so and pass
//! without it (the credential check itself is also unit-tested in `proxy::takeover`).

use crate::takeover_peer;
use shared::origin::Origin;
use std::io::BufRead;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use tests::process::{Process, ProxyProcess, READY};
use tests::reload::Scratch;

/// The unprivileged user the child runs as.
const OTHER_UID: u32 = 65534;
/// Tells the child its part: `connect PATH` or `serve PATH`.
const ROLE: &str = "PROXY_SECURITY_TAKEOVER_CHILD";

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn spawn_proxy(o: &Origin, socket: &Path) -> ProxyProcess {
    let mut cmd = ProxyProcess::command();
    cmd.args(["--listen", "127.0.0.1:0", "--workers", "1", "--no-pin"])
        .args([
            "--shutdown-timeout",
            "1s",
            "--upstream",
            &o.addr().to_string(),
        ])
        .arg("--takeover-socket")
        .arg(socket);
    ProxyProcess::start(&mut cmd)
}

/// This test binary, running only `takeover_child`, as uid 65534, with part `role`.
fn child(role: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("current_exe"));
    cmd.args([
        "takeover::takeover_child",
        "--exact",
        "--ignored",
        "--nocapture",
    ])
    .env(ROLE, role)
    .uid(OTHER_UID)
    .gid(OTHER_UID)
    .stdin(Stdio::null());
    cmd
}

/// The child's verdict: its line that starts with `CHILD `.
fn verdict(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("CHILD "))
        .map(str::to_string)
        .unwrap_or_else(|| {
            panic!(
                "the child said nothing ({}): {text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

#[test]
fn the_takeover_socket_file_is_created_0600() {
    let o = tests::origin();
    let dir = Scratch::new("sec-takeover-mode");
    let socket = dir.path("takeover.sock");
    let _p = spawn_proxy(&o, &socket);
    let mode = std::fs::metadata(&socket)
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "the takeover socket's mode is {:o}",
        mode & 0o777
    );
}

/// Another user cannot connect at all (the file's mode); given a file anyone may connect to,
/// the proxy itself refuses a peer of another uid: no descriptor crosses, and it goes on
/// serving without draining.
#[test]
fn a_process_of_another_user_cannot_take_the_sockets() {
    if !is_root() {
        eprintln!("skipped: needs root to run a child as uid {OTHER_UID}");
        return;
    }
    let o = tests::origin();
    let dir = Scratch::new("sec-takeover-other");
    let socket = dir.path("takeover.sock");
    let mut p = spawn_proxy(&o, &socket);
    let role = format!("connect {}", socket.display());

    let out = child(&role).output().expect("run the child");
    let said = verdict(&out);
    assert!(said.starts_with("connect-failed"), "{said}");

    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = child(&role).output().expect("run the child");
    let said = verdict(&out);
    assert!(
        said.starts_with("refused: 0 descriptors"),
        "a process of uid {OTHER_UID} was answered: {said}"
    );
    let line = p.wait_line("takeover refused", READY);
    assert!(line.contains(&format!("uid {OTHER_UID}")), "{line}");
    let mut c = tests::inproc::Client::connect(p.addr);
    assert_eq!(c.get("/").status, 200, "the proxy stopped serving");
    assert!(p.exit_within(std::time::Duration::ZERO).is_none());
}

/// A new process started with `--takeover` refuses the sockets of a process of another
/// user listening on the takeover path: a one-line error naming its uid, exit 1.
#[test]
fn a_new_process_refuses_the_sockets_of_another_user() {
    if !is_root() {
        eprintln!("skipped: needs root to run a child as uid {OTHER_UID}");
        return;
    }
    let o = tests::origin();
    let dir = Scratch::new("sec-takeover-foreign");
    // The child creates its socket here.
    std::fs::set_permissions(dir.path(""), std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = dir.path("takeover.sock");
    // Built (on first use) before the child starts waiting for it.
    let mut cmd = ProxyProcess::command();
    let mut old = child(&format!("serve {}", socket.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run the child");
    // Its first line of its own says it listens (the harness's own lines come before).
    let mut lines = std::io::BufReader::new(old.stdout.take().expect("stdout")).lines();
    let listening = lines.find(|l| l.as_ref().map_or(true, |l| l.starts_with("CHILD ")));
    let listening = listening.and_then(Result::ok).unwrap_or_default();
    assert_eq!(listening, "CHILD listening", "the child did not listen");

    cmd.args(["--listen", "127.0.0.1:0", "--workers", "1", "--no-pin"])
        .args(["--upstream", &o.addr().to_string(), "--takeover"])
        .arg("--takeover-socket")
        .arg(&socket)
        .stdout(Stdio::null());
    let mut new = Process::spawn(&mut cmd);
    let status = new.exit_within(READY);
    let _ = old.kill();
    let _ = old.wait();
    let said: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        status.is_some_and(|s| s.code() == Some(1)),
        "the new process took the sockets of uid {OTHER_UID} and runs ({status:?}); \
         the child: {said:?}"
    );
    let (_, err) = new.finish(READY);
    assert!(
        err.contains("refused") && err.contains(&format!("uid {OTHER_UID}")),
        "{err}; the child: {said:?}"
    );
}

/// The other user's part, run by the tests above as a child (ignored otherwise).
#[test]
#[ignore = "a child of the takeover tests, run as another user"]
fn takeover_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let said = match role.split_once(' ') {
        Some(("connect", path)) => take(Path::new(path)),
        Some(("serve", path)) => hand_over(Path::new(path)),
        _ => format!("unknown role {role:?}"),
    };
    println!("CHILD {said}");
}

/// Ask the proxy at `path` for its sockets, as a new process would.
fn take(path: &Path) -> String {
    use proxy::takeover::{connect, recv, send, seqpacket};
    let s = seqpacket().expect("seqpacket");
    if let Err(e) = connect(&s, path) {
        return format!("connect-failed: {e}");
    }
    if let Err(e) = send(&s, b"proxy-takeover 1", &[]) {
        return format!("refused: 0 descriptors (send: {e})");
    }
    let mut got = 0;
    loop {
        match recv(&s) {
            Ok((text, _)) if text.is_empty() || text == b"end" => {
                let how = String::from_utf8_lossy(&text).into_owned();
                let verdict = if got == 0 { "refused" } else { "taken" };
                return format!("{verdict}: {got} descriptors, then {how:?}");
            }
            Ok((_, fds)) => got += fds.len(),
            Err(e) => return format!("refused: {got} descriptors (receive: {e})"),
        }
    }
}

/// Listen on `path` as an old process would and hand over a listening socket of ours.
fn hand_over(path: &Path) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().unwrap();
    let line = format!("listener {addr} {addr}");
    let listener = takeover_peer::listen(path);
    println!("CHILD listening");
    match takeover_peer::exchange(&listener, &[(line, OwnedFd::from(l))]) {
        Ok(said) => format!("said {}", String::from_utf8_lossy(&said)),
        Err(e) => format!("failed: {e}"),
    }
}
