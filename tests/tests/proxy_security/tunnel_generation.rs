//! Item 9: a WebSocket tunnel held the configuration generation its upgrade was served on
//! for its whole life, and with it that generation's pools (idle upstream connections),
//! response stores and open-file caches, whatever reloads came since. A tunnel now keeps
//! only the timeouts it needs.
//!
//! Observed through the old generation's pool: each generation's upstream keeps one idle
//! pooled connection; once the generation is freed, that connection closes at the origin.

use proxy::reload::{Outcome, Source};
use shared::origin::Origin;
use std::io::{Read, Write};
use std::net::SocketAddr;
use tests::process::READY;
use tests::raw::{exchange, show, Client, WAIT};
use tests::reload::{config_text, write_config, Scratch};

const RELOADS: usize = 3;

const UPGRADE: &[u8] =
    b"GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

/// One worker over the single upstream `origin` (everything routes to it).
fn text(origin: &Origin) -> String {
    config_text(
        "127.0.0.1:0",
        &[origin.addr()],
        "\n[runtime]\nworkers = 1\npin = false\n",
    )
}

/// A WebSocket tunnel through the proxy (the origin echoes).
fn open_tunnel(addr: SocketAddr) -> Client {
    let mut c = Client::connect(addr);
    c.send(UPGRADE).expect("send the upgrade");
    let r = c
        .response(WAIT)
        .unwrap_or_else(|r| panic!("no answer to the upgrade: {}", show(&r)));
    assert_eq!(r.status, 101, "{r:?}");
    c
}

fn echo(c: &mut Client, msg: &[u8]) {
    c.stream.write_all(msg).expect("write into the tunnel");
    c.stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut got = vec![0u8; msg.len()];
    c.stream.read_exact(&mut got).expect("the echo");
    assert_eq!(got, msg);
}

#[test]
fn tunnels_open_across_reloads_do_not_keep_their_generation() {
    let origins: Vec<Origin> = (0..=RELOADS).map(|_| tests::origin()).collect();
    let dir = Scratch::new("sec-tunnel-generation");
    let file = dir.path("proxy.toml");
    write_config(&file, &text(&origins[0]));
    let running = proxy::start(proxy::config::load(&file).expect("config")).expect("proxy");
    let addr = running.listen_addrs()[0];
    let mut reloader = running.reloader(Source::File {
        path: file.clone(),
        overrides: Default::default(),
    });
    let mut tunnels = Vec::new();
    for gen in 0..RELOADS {
        let o = &origins[gen];
        // A tunnel, then a request whose upstream connection stays in this generation's pool
        // (in that order: an upgrade takes a pooled connection when there is one).
        tunnels.push(open_tunnel(addr));
        let req = b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        let reply = exchange(addr, req, WAIT);
        assert!(
            reply.responses().first().is_some_and(|r| r.status == 200),
            "{}",
            show(&reply)
        );
        let mut open = 0;
        let both = tests::eventually(READY, || {
            open = o.open_connections();
            open == 2
        });
        assert!(
            both,
            "origin {gen}: {open} connections open, expected the pooled one and the tunnel"
        );

        // The next generation has another server: nothing of this one's pool is carried.
        write_config(&file, &text(&origins[gen + 1]));
        let outcome = reloader.reload();
        assert!(matches!(outcome, Outcome::Applied(_)), "{outcome}");

        let freed = tests::eventually(READY, || {
            open = o.open_connections();
            open == 1
        });
        assert!(
            freed,
            "origin {gen}: {open} connections still open after the reload: the idle pooled \
             one of the old generation was kept (only the tunnel should be left)"
        );
    }
    // The tunnels still carry bytes.
    for (i, t) in tunnels.iter_mut().enumerate() {
        echo(t, format!("tunnel {i}").as_bytes());
    }
    running.shutdown().expect("clean shutdown");
}
