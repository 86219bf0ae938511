//! `max_conns` across a reload that changes the group (in process, the reload SIGHUP runs, one
//! worker): a server kept by address shares its requests in flight and the group's queue
//! with the generation before, so the bound holds for the whole proxy while old requests
//! finish, a queued request keeps its place ahead of the new generation's, and a changed
//! `max_conns` applies to the requests already in flight.
//!
//! The origin holds every request until the test lets it go, and reports each arrival: the
//! order and the concurrency it saw are exact, and readiness is an arrival or the queue gauge.

use proxy::reload::{Outcome, Source};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use tests::gate::Gate;
use tests::inproc::Client;
use tests::raw;
use tests::strict::{wait_for, READY};

/// One worker, an admin listener, group `app` of the one server `server` (a TOML table).
fn text(server: &str) -> String {
    format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[admin]\naddr = \"127.0.0.1:0\"\n\
         [runtime]\nworkers = 1\npin = false\n[timeouts]\nshutdown = \"2s\"\nconnect = \"10s\"\n\
         [upstream.app]\nservers = [{server}]\n[[route]]\npath = \"/\"\nupstream = \"app\"\n"
    )
}

struct Setup {
    p: proxy::Running,
    file: PathBuf,
    dir: PathBuf,
    admin: SocketAddr,
}

impl Setup {
    fn start(name: &str, server: &str) -> Setup {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("proxy.toml");
        write(&file, &text(server));
        let p = proxy::start(proxy::config::load(&file).expect("config")).expect("proxy starts");
        let admin = p.admin_addr().expect("admin");
        Setup {
            p,
            file,
            dir,
            admin,
        }
    }

    fn client(&self, path: &str) -> Client {
        let mut c = Client::connect(self.p.listen_addrs()[0]);
        c.send(&raw::get(path));
        c
    }

    fn reload(&self, server: &str) {
        write(&self.file, &text(server));
        let source = Source::File {
            path: self.file.clone(),
            overrides: Default::default(),
        };
        let outcome = self.p.reloader(source).reload();
        assert!(matches!(outcome, Outcome::Applied(_)), "{outcome}");
    }

    fn queued(&self) -> f64 {
        let m = tests::scrape::scrape(self.admin);
        tests::scrape::value(&m, r#"proxy_upstream_queued{group="app"}"#)
    }

    /// Until `n` requests wait in the queue; a request reaching `gate` first fails the test.
    fn until_queued(&self, n: f64, gate: &Gate, what: &str) {
        wait_for(READY, what, || {
            if let Ok(x) = gate.arrived.try_recv() {
                panic!("{} reached the origin, {} held: {what}", x.path, x.held);
            }
            self.queued() == n
        });
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write config");
    std::fs::rename(&tmp, path).expect("rename config");
}

fn answered(c: &mut Client, path: &str) {
    let r = c.response();
    assert_eq!((r.status, tests::text(&r.body)), (200, path.to_string()));
}

#[test]
fn a_reload_keeps_the_requests_in_flight_and_the_queue_of_a_server_it_keeps() {
    let gate = Gate::start();
    let server = |t: &str| {
        format!(
            "{{ addr = \"{}\", max_conns = 1, fail_timeout = \"{t}\" }}",
            gate.addr
        )
    };
    let s = Setup::start("reload-max-conns", &server("10s"));
    let mut a = s.client("/a");
    let go_a = gate.next().go;
    let mut b = s.client("/b");
    s.until_queued(1.0, &gate, "/b queues behind /a");

    // Another fail_timeout: the group changed, its one server stays.
    s.reload(&server("11s"));
    let mut c = s.client("/c");
    s.until_queued(
        2.0,
        &gate,
        "/c queues behind /b while /a holds the one room",
    );

    go_a.send(()).unwrap();
    answered(&mut a, "/a");
    let next = gate.next();
    assert_eq!(
        (next.path.as_str(), next.held),
        ("/b", 1),
        "the first queued goes first"
    );
    next.go.send(()).unwrap();
    answered(&mut b, "/b");
    let next = gate.next();
    assert_eq!((next.path.as_str(), next.held), ("/c", 1));
    next.go.send(()).unwrap();
    answered(&mut c, "/c");
    assert_eq!(gate.peak.load(SeqCst), 1, "max_conns = 1 was exceeded");
}

#[test]
fn a_reload_that_changes_max_conns_applies_it_to_the_requests_in_flight() {
    let gate = Gate::start();
    let server = |n: u32| format!("{{ addr = \"{}\", max_conns = {n} }}", gate.addr);
    let s = Setup::start("reload-max-conns-changed", &server(1));
    let mut a = s.client("/a");
    let go_a = gate.next().go;
    let mut b = s.client("/b");
    s.until_queued(1.0, &gate, "/b queues behind /a");

    // Room for one more: the queued request takes it at once, /a still in flight.
    s.reload(&server(2));
    let next = gate.next();
    assert_eq!((next.path.as_str(), next.held), ("/b", 2));
    let go_b = next.go;
    let mut c = s.client("/c");
    s.until_queued(1.0, &gate, "/c queues while /a and /b hold both rooms");
    go_a.send(()).unwrap();
    answered(&mut a, "/a");
    let next = gate.next();
    assert_eq!((next.path.as_str(), next.held), ("/c", 2));
    let go_c = next.go;

    // Down to one: with two in flight, a new request waits for both to end.
    s.reload(&server(1));
    let mut d = s.client("/d");
    s.until_queued(
        1.0,
        &gate,
        "/d queues while two are in flight on max_conns = 1",
    );
    go_b.send(()).unwrap();
    answered(&mut b, "/b");
    go_c.send(()).unwrap();
    answered(&mut c, "/c");
    let next = gate.next();
    assert_eq!(
        (next.path.as_str(), next.held),
        ("/d", 1),
        "/d went out beside /c"
    );
    next.go.send(()).unwrap();
    answered(&mut d, "/d");
    assert_eq!(gate.peak.load(SeqCst), 2);
}

#[test]
fn an_open_tunnel_holds_its_room_across_a_reload_until_it_ends() {
    // The tunnel's room is its server's in-flight count and the group's queue, not the
    // generation: the reload's generation sees it (the gauge, the bound), and the tunnel's
    // end wakes the request queued in the new generation.
    let origin = tests::ws::echo_origin(None);
    let server =
        |t: &str| format!("{{ addr = \"{origin}\", max_conns = 1, fail_timeout = \"{t}\" }}");
    let s = Setup::start("reload-max-conns-tunnel", &server("10s"));
    let mut t = Client::connect(s.p.listen_addrs()[0]);
    t.send(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
    assert_eq!(t.response().status, 101);
    s.reload(&server("11s"));
    let in_flight = format!(r#"proxy_upstream_in_flight{{group="app",server="{origin}"}}"#);
    let m = tests::scrape::scrape(s.admin);
    assert_eq!(tests::scrape::value(&m, &in_flight), 1.0, "the open tunnel");
    let mut b = s.client("/b");
    wait_for(READY, "/b queues behind the tunnel", || s.queued() == 1.0);
    t.stream.shutdown(std::net::Shutdown::Write).unwrap();
    t.read_to_close();
    answered(&mut b, "/b");
}
