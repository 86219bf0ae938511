//! A cached route's store across a reload (SIGHUP, run in process): kept while the route
//! forwards the same requests to the same origin, a new one when what it forwards changes.

use crate::cache_proxy::x_cache;
use crate::scripted::{answer, Scripted};
use proxy::reload::{Outcome, Source};
use tests::raw::{self, Client};
use tests::reload::{write_config, Scratch};

/// One unpinned worker, route `/api/` to `app` (the origin at `origin`) with a cache and the
/// route lines `route`.
fn text(origin: std::net::SocketAddr, route: &str) -> String {
    format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 1\npin = false\n\
         [timeouts]\nshutdown = \"1s\"\n[upstream.app]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/api/\"\nupstream = \"app\"\ncache = {{ ttl = \"60s\" }}\n{route}\n"
    )
}

fn get(addr: std::net::SocketAddr) -> raw::Response {
    let mut c = Client::connect(addr);
    c.send(b"GET /api/x HTTP/1.1\r\nHost: cache.test\r\n\r\n")
        .expect("send");
    raw::response(&mut c, "GET /api/x")
}

#[test]
fn a_reload_that_changes_what_a_cached_route_forwards_gives_it_a_new_store() {
    // The store kept the route's answers across a reload that added strip_prefix and a
    // request header: GET /api/x, now /x with X-Tenant at the origin, was answered by the
    // stored /api/x (HIT "old"). A reload that changes only the route's answers' way to the
    // client (response_headers) keeps it.
    let fresh = ["Cache-Control: max-age=60"];
    let o = Scripted::start(vec![
        answer("200 OK", &fresh, b"old"),
        answer("200 OK", &fresh, b"new"),
    ]);
    let dir = Scratch::new("cache-reload");
    let file = dir.path("proxy.toml");
    write_config(&file, &text(o.addr(), ""));
    let p = proxy::start(proxy::config::load(&file).expect("config")).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    let mut reloader = p.reloader(Source::File {
        path: file.clone(),
        overrides: Default::default(),
    });
    let seen = |r: &raw::Response| (x_cache(r).to_string(), r.body.clone());
    assert_eq!(seen(&get(addr)), ("MISS".into(), b"old".to_vec()));
    assert_eq!(seen(&get(addr)), ("HIT".into(), b"old".to_vec()));
    let steps: [(&str, &str, &[u8], u64); 2] = [
        (
            "strip_prefix = true\nrequest_headers = { set = { \"X-Tenant\" = \"b\" } }",
            "MISS",
            b"new",
            2,
        ),
        (
            "strip_prefix = true\nrequest_headers = { set = { \"X-Tenant\" = \"b\" } }\n\
             response_headers = { set = { \"X-A\" = \"1\" } }",
            "HIT",
            b"new",
            2,
        ),
    ];
    for (route, xc, body, origin) in steps {
        write_config(&file, &text(o.addr(), route));
        let outcome = reloader.reload();
        assert!(matches!(outcome, Outcome::Applied(_)), "{outcome}");
        let r = get(addr);
        assert_eq!(seen(&r), (xc.into(), body.to_vec()), "after {route:?}");
        assert_eq!(o.requests(), origin, "after {route:?}");
    }
    let head = o.head(1);
    assert!(head.starts_with("get /x http/1.1"), "{head}");
    assert!(head.contains("x-tenant: b"), "{head}");
    p.shutdown().unwrap();
}
