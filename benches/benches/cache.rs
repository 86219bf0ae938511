//! The cost of a cache hit's lookup in one worker's store (hash, map probe, chain walk, Vary
//! match, LRU relink, two reference-counted `Bytes` views), and proof that it allocates
//! nothing: a counting allocator wraps the system one and the bench fails if a lookup
//! allocates.
//!
//! Run: `cargo bench -p benches --bench cache`

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use proxy::cache::vary::VarySpec;
use proxy::cache::{Freshness, Key, Lookup, Storable, Store};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the counter is a thread-local Cell
// (const-initialised, so touching it never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

const NOW: u64 = 1_700_000_000_000;
const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nLast-Modified: Sun, 29 Nov 2026 22:10:41 GMT\r\n";

fn request() -> Vec<httparse::Header<'static>> {
    [
        ("Host", "www.example.com"),
        (
            "User-Agent",
            "Mozilla/5.0 (X11; Linux x86_64) Chrome/124.0.0.0",
        ),
        ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8"),
        ("Accept-Encoding", "gzip, deflate, br, zstd"),
        ("Accept-Language", "en-US,en;q=0.9"),
    ]
    .iter()
    .map(|&(name, v)| httparse::Header {
        name,
        value: v.as_bytes(),
    })
    .collect()
}

/// A store of `n` entries of `body` bytes, every one with `Vary: Accept-Encoding`.
fn store(n: usize, body: usize) -> Store {
    let mut s = Store::new(1 << 30, 1 << 20);
    let req = request();
    let vary = [httparse::Header {
        name: "Vary",
        value: b"Accept-Encoding",
    }];
    let data = vec![b'x'; body];
    for i in 0..n {
        let target = format!("/static/page-{i}.html?v=3");
        let key = Key {
            https: false,
            host: b"www.example.com",
            target: target.as_bytes(),
        };
        let h = s.begin_fill(key).expect("room");
        let st = Storable {
            freshness: Freshness {
                response_time: NOW,
                corrected_initial_age: 0,
                lifetime: 3_600_000,
                forbids_stale: false,
                stale_while_revalidate: 0,
                stale_if_error: None,
            },
            vary: VarySpec::new(&vary, &req).expect("no star"),
        };
        assert!(s.fill_head(h, 200, Bytes::from_static(HEAD), st, Some(body as u64)));
        s.append(h, &data);
        assert!(s.finish(h));
    }
    s
}

fn hit(c: &mut Criterion) {
    let req = request();
    let mut g = c.benchmark_group("cache_hit_lookup");
    for (name, body) in [("64B", 64), ("32KiB", 32 << 10)] {
        let mut s = store(10_000, body);
        let target = b"/static/page-4242.html?v=3";
        let key = Key {
            https: false,
            host: b"WWW.example.com",
            target,
        };
        // The proof: a thousand hits, zero allocations.
        let before = allocs();
        for _ in 0..1000 {
            match s.lookup(key, &req, false, NOW + 1000) {
                Lookup::Hit(h) => assert_eq!(h.body.len(), body),
                other => panic!("expected a hit: {other:?}"),
            }
        }
        let n = allocs() - before;
        assert_eq!(n, 0, "a hit lookup allocated {n} times in 1000 lookups");
        eprintln!("cache_hit_lookup/{name}: 0 allocations in 1000 hits (10,000 entries)");
        g.bench_function(name, |b| {
            b.iter(|| match s.lookup(black_box(key), &req, false, NOW + 1000) {
                Lookup::Hit(h) => black_box(h.body.len()),
                _ => unreachable!(),
            })
        });
    }
    g.finish();
}

criterion_group!(benches, hit);
criterion_main!(benches);
