//! The response cache end to end (issue 10): the built-in origin behind the proxy, raw-socket
//! clients, and the origin's request count as the proof of what reached it.

use proxy::config::cache::Cidr;
use shared::origin::{Framing, Origin, OriginConfig};
use std::net::SocketAddr;
use std::time::Duration;

use crate::cache_proxy::{first_after_expiry, proxy, request, x_cache};
use tests::raw::{self, Client, Response};

fn get(addr: SocketAddr, path: &str) -> Response {
    request(addr, "GET", path, "")
}

#[test]
fn hits_are_served_from_memory_without_reaching_the_origin() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let first = get(addr, "/page?size=32KiB");
    assert_eq!((first.status, x_cache(&first)), (200, "MISS"));
    assert!(first.is_pattern(32 * 1024));
    for i in 0..3 {
        let r = get(addr, "/page?size=32KiB");
        assert_eq!((r.status, x_cache(&r)), (200, "HIT"), "request {i}");
        assert!(r.is_pattern(32 * 1024), "hit body");
        assert_eq!(r.header("content-length"), Some("32768"));
        assert!(r.header("age").is_some(), "Age on a hit");
    }
    // A small page, on one keep-alive connection.
    let mut c = Client::connect(addr);
    for i in 0..3 {
        c.send(b"GET /small HTTP/1.1\r\nHost: cache.test\r\n\r\n")
            .unwrap();
        let r = raw::response(&mut c, "small");
        assert_eq!(x_cache(&r), if i == 0 { "MISS" } else { "HIT" });
        assert!(r.is_pattern(64));
    }
    assert_eq!(o.requests(), 2, "only the two misses reached the origin");
    let s = &p.stats()[0];
    let want = (5, 2);
    let seen = tests::settled(raw::WAIT, &want, || {
        (s.cache_hits.get(), s.cache_misses.get())
    });
    assert_eq!(seen, want);
    p.shutdown().unwrap();
}

#[test]
fn concurrent_misses_make_one_upstream_request() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let path = "/slow?delay=1s&size=20000";
    let send = |addr| {
        let mut c = Client::connect(addr);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n\r\n").as_bytes())
            .unwrap();
        c
    };
    let mut first = send(addr);
    // The first request reached the origin (which holds it for a second): the others
    // arrive while its fill is under way.
    assert!(tests::eventually(raw::WAIT, || o.requests() == 1));
    let mut others: Vec<Client> = (0..4).map(|_| send(addr)).collect();
    let r = raw::response(&mut first, "first");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    for (i, c) in others.iter_mut().enumerate() {
        let r = raw::response(c, "collapsed");
        assert_eq!(
            (r.status, x_cache(&r)),
            (200, "HIT"),
            "collapsed request {i}"
        );
        assert!(r.is_pattern(20000), "collapsed body {i}");
    }
    assert_eq!(
        o.requests(),
        1,
        "five concurrent misses, one origin request"
    );
    p.shutdown().unwrap();
}

#[test]
fn variants_are_stored_apart() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let path = "/v?header=Vary:Accept-Language";
    let en = "Accept-Language: en\r\n";
    let fr = "Accept-Language: fr\r\n";
    assert_eq!(x_cache(&request(addr, "GET", path, en)), "MISS");
    assert_eq!(x_cache(&request(addr, "GET", path, fr)), "MISS");
    assert_eq!(x_cache(&request(addr, "GET", path, en)), "HIT");
    assert_eq!(x_cache(&request(addr, "GET", path, fr)), "HIT");
    assert_eq!(o.requests(), 2);
    // `Vary: *` is never stored.
    let star = "/star?header=Vary:*";
    assert_eq!(x_cache(&get(addr, star)), "MISS");
    assert_eq!(x_cache(&get(addr, star)), "MISS");
    assert_eq!(o.requests(), 4);
    p.shutdown().unwrap();
}

#[test]
fn set_cookie_private_and_credentials_are_not_stored() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    for path in [
        "/c?header=Set-Cookie:a%3Db",
        "/p?header=Cache-Control:private",
    ] {
        let a = get(addr, path);
        let b = get(addr, path);
        assert_eq!((x_cache(&a), x_cache(&b)), ("MISS", "MISS"), "{path}");
        assert_eq!(b.header("set-cookie").is_some(), path.starts_with("/c"));
    }
    assert_eq!(o.requests(), 4);
    // A request with a Cookie bypasses (the route does not allow credentials).
    let r = request(addr, "GET", "/cookie", "Cookie: s=1\r\n");
    assert_eq!(x_cache(&r), "BYPASS");
    assert_eq!(x_cache(&get(addr, "/cookie")), "MISS");
    assert_eq!(o.requests(), 6);
    p.shutdown().unwrap();
}

#[test]
fn entries_expire() {
    let o = tests::origin();
    // Long enough for the HIT below on a loaded machine; the wait after it ends at expiry.
    let (p, addr) = proxy(&[o.addr()], &[], |c| c.ttl = Duration::from_millis(1000));
    assert_eq!(x_cache(&get(addr, "/e")), "MISS");
    assert_eq!(x_cache(&get(addr, "/e")), "HIT");
    // The entry's lifetime (the route's ttl) passes: the next answer is fetched again.
    assert_eq!(x_cache(&first_after_expiry(addr, "GET", "/e", "")), "MISS");
    assert_eq!(o.requests(), 2);
    // A response's own max-age wins over the ttl: max-age=0 is stale at once.
    let zero = "/z?header=Cache-Control:max-age%3D0";
    assert_eq!(x_cache(&get(addr, zero)), "MISS");
    assert_eq!(x_cache(&get(addr, zero)), "MISS");
    assert_eq!(o.requests(), 4);
    p.shutdown().unwrap();
}

#[test]
fn no_cache_requests_revalidate() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    assert_eq!(x_cache(&get(addr, "/n")), "MISS");
    assert_eq!(x_cache(&get(addr, "/n")), "HIT");
    let r = request(addr, "GET", "/n", "Cache-Control: no-cache\r\n");
    assert_eq!(x_cache(&r), "MISS");
    assert_eq!(o.requests(), 2, "no-cache went to the origin");
    assert_eq!(x_cache(&get(addr, "/n")), "HIT");
    assert_eq!(o.requests(), 2);
    p.shutdown().unwrap();
}

#[test]
fn a_stale_entry_is_served_when_the_origin_fails() {
    let port = tests::ClosedPort::new();
    let o = Origin::start_on(OriginConfig::default(), port.addr(), 1).expect("origin");
    let (p, addr) = proxy(&[port.addr()], &[], |c| {
        c.ttl = Duration::from_millis(300);
        c.stale_if_error = Duration::from_secs(60);
    });
    let (p2, addr2) = proxy(&[port.addr()], &[], |c| c.ttl = Duration::from_millis(300));
    assert_eq!(x_cache(&get(addr, "/s?size=500")), "MISS");
    assert_eq!(x_cache(&get(addr2, "/s?size=500")), "MISS");
    o.stop();
    // Past the ttl; the port refuses connections (held, never listening).
    let r = first_after_expiry(addr, "GET", "/s?size=500", "");
    assert_eq!((r.status, x_cache(&r)), (200, "STALE"));
    assert!(r.is_pattern(500));
    // Without stale_if_error: 502.
    let r = first_after_expiry(addr2, "GET", "/s?size=500", "");
    assert_eq!(r.status, 502);
    let stale = tests::settled(raw::WAIT, &1, || p.stats()[0].cache_stale.get());
    assert_eq!(stale, 1);
    p.shutdown().unwrap();
    p2.shutdown().unwrap();
}

#[test]
fn a_successful_post_invalidates_the_key() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    assert_eq!(x_cache(&get(addr, "/i")), "MISS");
    assert_eq!(x_cache(&get(addr, "/i")), "HIT");
    let r = request(addr, "POST", "/i", "Content-Length: 2\r\n\r\nab");
    assert_eq!((r.status, x_cache(&r)), (200, "BYPASS"));
    assert_eq!(x_cache(&get(addr, "/i")), "MISS");
    assert_eq!(o.requests(), 3);
    // A failed POST does not.
    assert_eq!(x_cache(&get(addr, "/i")), "HIT");
    let r = request(addr, "POST", "/i?status=500", "Content-Length: 0\r\n");
    assert_eq!(r.status, 500);
    assert_eq!(x_cache(&get(addr, "/i")), "HIT");
    p.shutdown().unwrap();
}

/// Requests on new connections until every worker has served one more request of `path`
/// than `before` (per worker hits + misses); bounded.
fn until_every_worker_served(p: &proxy::Running, addr: SocketAddr, path: &str, before: &[u64]) {
    let served = |i: usize| {
        let s = &p.stats()[i];
        s.cache_hits.get() + s.cache_misses.get()
    };
    for _ in 0..500 {
        if (0..before.len()).all(|i| served(i) > before[i]) {
            return;
        }
        get(addr, path);
    }
    panic!("the kernel never spread 500 connections over both workers");
}

#[test]
fn purge_removes_the_key_on_every_worker() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &["--workers", "2"], |c| {
        c.purge_from = vec![Cidr::parse("127.0.0.1").unwrap()];
    });
    until_every_worker_served(&p, addr, "/g", &[0, 0]);
    let misses = |i: usize| p.stats()[i].cache_misses.get();
    assert_eq!((misses(0), misses(1)), (1, 1), "one miss per worker");
    assert_eq!(o.requests(), 2);
    let r = request(addr, "PURGE", "/g", "");
    assert_eq!(
        r.status, 200,
        "the key was stored on the worker that took the PURGE"
    );
    // The other worker carried it out (an event: its counter).
    assert!(tests::eventually(raw::WAIT, || {
        p.stats()
            .iter()
            .map(|s| s.cache_purges_received.get())
            .sum::<u64>()
            == 1
    }));
    let before: Vec<u64> = (0..2)
        .map(|i| p.stats()[i].cache_hits.get() + p.stats()[i].cache_misses.get())
        .collect();
    let hits_before: Vec<u64> = (0..2).map(|i| p.stats()[i].cache_hits.get()).collect();
    until_every_worker_served(&p, addr, "/g", &before);
    assert_eq!(
        (misses(0), misses(1)),
        (2, 2),
        "each worker missed again after the purge"
    );
    assert_eq!(o.requests(), 4);
    assert!(p.stats()[0].cache_hits.get() >= hits_before[0]);
    // Purging what is not stored: 404.
    assert_eq!(request(addr, "PURGE", "/never", "").status, 404);
    p.shutdown().unwrap();
}

#[test]
fn purge_from_elsewhere_is_forbidden() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    assert_eq!(x_cache(&get(addr, "/f")), "MISS");
    assert_eq!(request(addr, "PURGE", "/f", "").status, 403);
    assert_eq!(x_cache(&get(addr, "/f")), "HIT");
    p.shutdown().unwrap();
}

#[test]
fn an_entry_over_max_object_is_dropped_midway_and_the_client_gets_it_all() {
    let o = Origin::start(OriginConfig {
        framing: Framing::Chunked { chunk_size: 1000 },
        ..OriginConfig::default()
    })
    .expect("origin");
    let (p, addr) = proxy(&[o.addr()], &[], |c| c.max_object = 4000);
    // Chunked: no length declared, so the fill learns it is too large midway.
    for _ in 0..2 {
        let r = get(addr, "/big?size=10000&chunk=1000");
        assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
        assert!(
            r.complete && r.is_pattern(10000),
            "the client got the whole body"
        );
    }
    assert_eq!(o.requests(), 2);
    // Counted once the relay is over, which may be just after the client read its last byte.
    assert!(
        tests::eventually(raw::WAIT, || p.stats()[0].cache_dropped.get() == 2),
        "two fills dropped: {}",
        p.stats()[0].cache_dropped.get()
    );
    // A body within max_object is stored the same way.
    assert_eq!(x_cache(&get(addr, "/ok?size=3000&chunk=1000")), "MISS");
    let r = get(addr, "/ok?size=3000&chunk=1000");
    assert_eq!(x_cache(&r), "HIT");
    assert!(r.is_pattern(3000));
    p.shutdown().unwrap();
}

#[test]
fn head_fills_with_get_and_is_answered_from_the_entry() {
    let o = tests::capturing_origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let r = request(addr, "HEAD", "/h?size=300", "");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    assert_eq!(r.header("content-length"), Some("300"));
    assert!(r.body.is_empty());
    let captured = o.captured();
    assert_eq!(captured.len(), 1);
    assert!(
        captured[0].starts_with(b"GET /h?size=300 "),
        "a HEAD miss fills with GET"
    );
    let r = get(addr, "/h?size=300");
    assert_eq!(x_cache(&r), "HIT");
    assert!(r.is_pattern(300));
    let r = request(addr, "HEAD", "/h?size=300", "");
    assert_eq!(
        (x_cache(&r), r.header("content-length")),
        ("HIT", Some("300"))
    );
    assert!(r.body.is_empty());
    assert_eq!(o.requests(), 1);
    p.shutdown().unwrap();
}

#[test]
fn hits_are_the_same_on_the_epoll_driver() {
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &["--driver", "epoll"], |_| {});
    for (i, path) in ["/d?size=32KiB", "/d?size=32KiB", "/d?size=32KiB"]
        .iter()
        .enumerate()
    {
        let r = get(addr, path);
        assert_eq!(x_cache(&r), if i == 0 { "MISS" } else { "HIT" });
        assert!(r.complete && r.is_pattern(32 * 1024), "request {i}");
    }
    assert_eq!(o.requests(), 1);
    p.shutdown().unwrap();
}

#[test]
fn a_hit_before_a_close_arrives_whole_then_the_connection_ends() {
    // The last answer before a close goes out corked, with the FIN: whole, small or large.
    let o = tests::origin();
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    for (path, len) in [("/small", 64), ("/page?size=32KiB", 32 * 1024)] {
        assert_eq!(x_cache(&get(addr, path)), "MISS");
        for req in ["HTTP/1.1\r\nConnection: close", "HTTP/1.0"] {
            let mut c = Client::connect(addr);
            c.send(format!("GET {path} {req}\r\nHost: cache.test\r\n\r\n").as_bytes())
                .expect("send");
            let r = raw::response(&mut c, path);
            assert_eq!((r.status, x_cache(&r)), (200, "HIT"), "{path} {req:?}");
            assert!(r.is_pattern(len), "{path} {req:?}: the whole body");
            assert!(r.connection_has("close"), "{path} {req:?}");
            raw::assert_closed(&mut c, path);
        }
    }
    assert_eq!(o.requests(), 2, "only the misses reached the origin");
    p.shutdown().unwrap();
}
