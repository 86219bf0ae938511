//! Health checks a reload brings: a group that had no `health` table gets one by a reload
//! (in process, the reload SIGHUP runs, 2 workers); its checks start on the new generation,
//! a server whose `/healthz` fails goes down on every worker and stops receiving requests.
//!
//! Readiness is the workers' `health_changes` counter, never a sleep; the origins capture
//! every request, so the counts of `/x` requests per server are exact.

use crate::health_origin::{hits, switched_origin, traffic};
use proxy::reload::{Outcome, Source};
use std::net::SocketAddr;
use std::path::Path;
use tests::strict::{wait_for, READY};

const CHECK: &str =
    r#"path = "/healthz", interval = "400ms", timeout = "400ms", rise = 2, fall = 2, expect = 200"#;

/// Group `app` over `servers`, `group_extra` added to its table.
fn text(servers: &[SocketAddr], group_extra: &str) -> String {
    let list: Vec<String> = servers.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 2\npin = false\n\
         [timeouts]\nshutdown = \"2s\"\n\n[upstream.app]\nservers = [{}]\n{group_extra}\n",
        list.join(", ")
    )
}

fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write config");
    std::fs::rename(&tmp, path).expect("rename config");
}

#[test]
fn a_health_table_added_by_a_reload_checks_the_group_and_takes_a_failing_server_out() {
    let (a, a_health) = switched_origin();
    let (b, _b_health) = switched_origin();
    let dir = std::env::temp_dir().join(format!("health-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("proxy.toml");
    write(&file, &text(&[a.addr(), b.addr()], ""));
    let cfg = proxy::config::load(&file).expect("config");
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];

    // No checks yet: A's failing /healthz goes unseen and A keeps its share.
    a_health.set(500);
    traffic(addr, 4);
    assert_eq!((hits(&a, "/x"), hits(&b, "/x")), (2, 2));
    assert_eq!(hits(&a, "/healthz"), 0, "checked before any health table");

    write(
        &file,
        &text(&[a.addr(), b.addr()], &format!("health = {{ {CHECK} }}")),
    );
    let source = Source::File {
        path: file.clone(),
        overrides: Default::default(),
    };
    let outcome = p.reloader(source).reload();
    assert!(matches!(outcome, Outcome::Applied(_)), "{outcome}");

    // The new generation checks A and every worker takes it out.
    wait_for(READY, "a going down after the reload", || {
        p.stats().iter().all(|s| s.health_changes.get() >= 1)
    });
    assert!(hits(&a, "/healthz") >= 2, "A went down without checks");
    traffic(addr, 10);
    assert_eq!(
        (hits(&a, "/x"), hits(&b, "/x")),
        (2, 12),
        "A is out: B takes every request"
    );
    // B passes its checks: it never changed.
    assert!(hits(&b, "/healthz") >= 1, "B is not checked");
    p.shutdown().expect("clean shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}
