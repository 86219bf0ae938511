//! The sendfile experiment of issue 10 (`--cache-memfd`): hits of bodies over 1 KiB go out
//! with sendfile(2) from a per-worker memfd. The same bytes as from memory, on both drivers,
//! on keep-alive connections (the socket turned non-blocking for it), with a body larger than
//! the socket takes at once (the rest from memory), and after evictions (holes punched).

use std::net::SocketAddr;
use tests::raw::{self, Client};

fn proxy(origin: SocketAddr, extra: &[&str]) -> (proxy::Running, SocketAddr) {
    let mut args = vec!["--cache", "4MiB"];
    args.extend_from_slice(extra);
    tests::start_proxy(&[origin], &args)
}

/// `n` GETs of `path` on one keep-alive connection: each a complete pattern body of `len`,
/// X-Cache as given for the first, HIT after.
fn on_one_connection(addr: SocketAddr, path: &str, len: usize, first: &str, n: usize) {
    let mut c = Client::connect(addr);
    for i in 0..n {
        c.send(format!("GET {path} HTTP/1.1\r\nHost: m\r\n\r\n").as_bytes())
            .unwrap();
        let r = raw::response(&mut c, path);
        let want = if i == 0 { first } else { "HIT" };
        assert_eq!(
            (r.status, r.header("x-cache")),
            (200, Some(want)),
            "{path} #{i}"
        );
        assert!(r.complete && r.is_pattern(len), "{path} #{i}: the body");
        assert_eq!(r.header("content-length"), Some(len.to_string().as_str()));
    }
}

#[test]
fn memfd_hits_send_the_stored_bytes_on_both_drivers() {
    let o = tests::origin();
    for driver in ["io-uring", "epoll"] {
        let (p, addr) = proxy(o.addr(), &["--driver", driver]);
        let before = o.requests();
        on_one_connection(addr, "/m?size=32KiB", 32 * 1024, "MISS", 4);
        // Small bodies stay in memory only: same answers.
        on_one_connection(addr, "/m?size=64", 64, "MISS", 3);
        // HEAD of a memfd entry: the head only.
        let mut c = Client::connect(addr);
        c.send(b"HEAD /m?size=32KiB HTTP/1.1\r\nHost: m\r\n\r\n")
            .unwrap();
        let r = c.response_to(true, raw::WAIT).expect("HEAD answer");
        assert_eq!((r.status, r.header("x-cache")), (200, Some("HIT")));
        assert!(r.body.is_empty());
        assert_eq!(o.requests() - before, 2, "{driver}: two misses");
        p.shutdown().unwrap();
    }
}

#[test]
fn a_body_larger_than_the_socket_takes_finishes_from_memory() {
    let o = tests::origin();
    let (p, addr) = proxy(o.addr(), &[]);
    // 900 KiB is more than a loopback socket takes at once: sendfile sends part, the rest
    // goes out from memory; the client sees one whole body, and the connection stays.
    on_one_connection(addr, "/big?size=900KiB", 900 * 1024, "MISS", 4);
    assert_eq!(o.requests(), 1);
    p.shutdown().unwrap();
}

#[test]
fn evicted_entries_give_their_pages_back_and_new_ones_serve() {
    let o = tests::origin();
    // 4 MiB, 200 KiB bodies: ~20 fit; 60 keys evict the oldest.
    let (p, addr) = proxy(o.addr(), &[]);
    for k in 0..60 {
        on_one_connection(addr, &format!("/e{k}?size=200KiB"), 200 * 1024, "MISS", 2);
    }
    assert!(p.stats()[0].cache_evicted.get() > 30);
    // Every body file in this process (the proxies run in it) holds at most its store's
    // 4 MiB (and page rounding): 12 MiB went through this one.
    let files = memfds();
    assert!(!files.is_empty(), "a body file exists");
    for (path, allocated) in files {
        assert!(allocated <= 5 << 20, "{path}: {allocated} bytes allocated");
    }
    on_one_connection(addr, "/e59?size=200KiB", 200 * 1024, "HIT", 1);
    assert_eq!(o.requests(), 60);
    p.shutdown().unwrap();
}

/// The proxies' body files open in this process, with the bytes each has allocated.
fn memfds() -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .flatten()
    {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if target.to_string_lossy().contains("memfd:proxy-cache") {
            if let Ok(m) = std::fs::metadata(e.path()) {
                out.push((target.to_string_lossy().into_owned(), m.blocks() * 512));
            }
        }
    }
    out
}

/// The most mappings of one body file in this process (the proxies run in it; tests beside
/// this one may run proxies of their own: each file is counted apart, by its inode).
fn most_mappings_of_one_body_file() -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let mut per_file = std::collections::HashMap::<String, usize>::new();
    for line in maps.lines().filter(|l| l.contains("memfd:proxy-cache")) {
        let inode = line.split_whitespace().nth(4).unwrap_or("").to_string();
        *per_file.entry(inode).or_default() += 1;
    }
    per_file.values().copied().max().unwrap_or(0)
}

#[test]
fn stored_bodies_cost_the_process_a_bounded_number_of_mappings() {
    // The kernel's limit (vm.max_map_count, 65,530) is the whole process's: a mapping per
    // stored body ran it out, and the allocator's next mmap failed (an abort). 1500 bodies
    // of 4 KiB, all held (64 MiB), must not cost 1500 mappings.
    let o = tests::origin();
    let (p, addr) = tests::start_proxy(&[o.addr()], &["--cache", "64MiB"]);
    let mut c = Client::connect(addr);
    let n = 1500;
    for k in 0..n {
        let path = format!("/n{k}?size=4KiB");
        c.send(format!("GET {path} HTTP/1.1\r\nHost: m\r\n\r\n").as_bytes())
            .unwrap();
        let r = raw::response(&mut c, &path);
        assert_eq!(
            (r.status, r.header("x-cache")),
            (200, Some("MISS")),
            "{path}"
        );
    }
    let most = most_mappings_of_one_body_file();
    assert!(
        most <= 4,
        "{n} bodies stored: {most} mappings of one body file"
    );
    on_one_connection(addr, "/n0?size=4KiB", 4096, "HIT", 2);
    on_one_connection(addr, &format!("/n{}?size=4KiB", n - 1), 4096, "HIT", 2);
    assert_eq!(o.requests(), n);
    p.shutdown().unwrap();
}
