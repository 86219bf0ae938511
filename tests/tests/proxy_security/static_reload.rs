//! Item 6: the static open-file cache dropped no site. Every reload to a new root left the
//! old root's descriptor and those of the files it served open on each worker (and pinned
//! deleted files) for the life of the process. A generation's site caches now go with it.

use std::path::Path;
use std::time::Duration;
use tests::process::{ProxyProcess, READY};
use tests::raw::{exchange, show, WAIT};
use tests::reload::{write_config, Scratch};

const RELOADS: usize = 20;
const FILES: [&str; 3] = ["a.txt", "b.txt", "c.txt"];

/// A config that serves `root` on `/`, nothing else.
fn static_config(root: &Path) -> String {
    format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[[route]]\npath = \"/\"\nstatic = {{ root = \"{}\" }}\n\n\
         [timeouts]\nshutdown = \"800ms\"\n",
        root.display()
    )
}

/// The descriptors process `pid` holds open now.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/PID/fd")
        .count()
}

/// GET every file of generation `gen`'s root (one connection each, closed after the
/// response) and check that it came from that root.
fn serve_all(p: &ProxyProcess, gen: usize) {
    for f in FILES {
        let req = format!("GET /{f} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let reply = exchange(p.addr, req.as_bytes(), WAIT);
        let resp = reply.responses();
        let want = format!("root {gen} file {f}\n");
        assert!(
            resp.len() == 1 && resp[0].status == 200 && resp[0].body == want.as_bytes(),
            "GET /{f} of root {gen}: {}",
            show(&reply)
        );
    }
}

#[test]
fn reloads_to_new_static_roots_do_not_keep_old_descriptors_open() {
    let dir = Scratch::new("sec-static-reload");
    for gen in 0..=RELOADS {
        let root = dir.path(&format!("root-{gen}"));
        std::fs::create_dir_all(&root).expect("root");
        for f in FILES {
            let text = format!("root {gen} file {f}\n");
            std::fs::write(root.join(f), text).expect("file");
        }
    }
    let file = dir.path("proxy.toml");
    write_config(&file, &static_config(&dir.path("root-0")));
    let mut cmd = ProxyProcess::command();
    cmd.arg("--config")
        .arg(&file)
        .args(["--workers", "1", "--no-pin"]);
    let mut p = ProxyProcess::start(&mut cmd);
    serve_all(&p, 0);
    // One root's worth of cached descriptors is the steady state.
    let baseline = open_fds(p.id());

    for gen in 1..=RELOADS {
        write_config(&file, &static_config(&dir.path(&format!("root-{gen}"))));
        p.signal(libc::SIGHUP);
        let line = p.wait_line("proxy: reload:", READY);
        assert!(line.contains(&format!("generation {}", gen + 1)), "{line}");
        serve_all(&p, gen);
    }

    // The last root's files and a few descriptors of connections still closing; before the
    // fix every old root kept 1 + FILES.len() descriptors (80 more after 20 reloads).
    let bound = baseline + 4;
    let mut now = open_fds(p.id());
    let settled = tests::eventually(READY, || {
        now = open_fds(p.id());
        now <= bound
    });
    assert!(
        settled,
        "descriptors grew with reloads: {baseline} after serving one root, {now} after \
         {RELOADS} reloads each serving {} files from a new root",
        FILES.len()
    );
    assert!(p.exit_within(Duration::ZERO).is_none(), "the proxy exited");
}
