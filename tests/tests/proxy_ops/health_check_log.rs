//! Active health checks seen from the outside: the `proxy` binary with a config file, its
//! start-up summary, and one stderr line per state change, each exactly once, with the reason
//! of the last failed check (an unexpected status, a refused connect, a timeout).
//!
//! Readiness is the lines themselves and the origins' request counts, never a sleep.

use shared::origin::switch::StatusSwitch;
use shared::origin::{Origin, OriginConfig};
use tests::process::ProxyProcess;
use tests::strict::{wait_for, READY};
use tests::ClosedPort;

fn health_probes(o: &Origin) -> usize {
    o.captured()
        .iter()
        .filter(|r| r.starts_with(b"GET /healthz "))
        .count()
}

#[test]
fn each_change_is_logged_once_with_its_reason() {
    let switch = StatusSwitch::new("/healthz", 200);
    let flipping = Origin::start(OriginConfig {
        capture: true,
        switch: Some(switch.clone()),
        ..OriginConfig::default()
    })
    .expect("origin starts");
    let silent = Origin::start(OriginConfig {
        capture: true,
        hang: true,
        ..OriginConfig::default()
    })
    .expect("origin starts");
    let refused = ClosedPort::new();
    let (f, s, r) = (flipping.addr(), silent.addr(), refused.addr());
    let dir = std::env::temp_dir().join(format!("proxy-health-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("health.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 2\npin = false\n\
             [upstream.app]\nservers = [\"{f}\", \"{s}\", \"{r}\"]\n\
             health = {{ path = \"/healthz\", interval = \"400ms\", timeout = \"400ms\", rise = 2, fall = 3, expect = \"2xx\" }}\n"
        ),
    )
    .expect("write config");
    let mut p = ProxyProcess::start(ProxyProcess::command().arg("--config").arg(&file));
    assert!(
        p.summary.contains(
            "    health GET /healthz every 400ms (timeout 400ms, rise 2, fall 3, expect 2xx), checked by worker 0\n"
        ),
        "{}",
        p.summary
    );
    let line = |who, what: &str| format!("proxy: group app server {who} {what}");
    let refused_down = line(r, "down (3 failed checks: connect: Connection refused");
    let silent_down = line(s, "down (3 failed checks: no response within 400ms)");
    let flip_down = line(f, "down (3 failed checks: status 500)");
    let flip_up = line(f, "up (2 passed checks)");
    // The two dead servers go down, in either order.
    let mut seen = [p.wait_line(" down (", READY), p.wait_line(" down (", READY)];
    seen.sort();
    let mut want = [refused_down.clone(), silent_down.clone()];
    want.sort();
    for (got, want) in seen.iter().zip(&want) {
        assert!(got.starts_with(want.as_str()), "got {got:?}, want {want:?}");
    }
    switch.set(500);
    assert_eq!(p.wait_line(&format!(" {f} "), READY), flip_down);
    switch.set(200);
    assert_eq!(p.wait_line(&format!(" {f} "), READY), flip_up);
    // Several more checks of every kind go by: none of them is logged.
    let n = health_probes(&silent);
    wait_for(READY, "more checks", || health_probes(&silent) >= n + 3);
    let n = health_probes(&flipping);
    wait_for(READY, "more checks", || health_probes(&flipping) >= n + 3);
    p.signal(libc::SIGTERM);
    let (status, stderr) = p.process.finish(READY);
    assert!(status.success(), "{status:?}\n{stderr}");
    for needle in [&refused_down, &silent_down, &flip_down, &flip_up] {
        let count = stderr
            .lines()
            .filter(|l| l.starts_with(needle.as_str()))
            .count();
        assert_eq!(count, 1, "{needle:?} in\n{stderr}");
    }
    let changes = stderr
        .lines()
        .filter(|l| l.contains("proxy: group app server"))
        .count();
    assert_eq!(changes, 4, "{stderr}");
    drop(refused);
    let _ = std::fs::remove_dir_all(&dir);
}
