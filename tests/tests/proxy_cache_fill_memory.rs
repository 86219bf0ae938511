//! A fill's memory follows what the store counts against `max_bytes`: a body that arrives in
//! tiny pieces (a chunked response of one-byte chunks, each a payload run of its own) must
//! not cost a heap block and a `Bytes` per piece while the store counts only its bytes (that
//! was ~64 times more memory than counted: four such fills under a 4 MiB store held 256 MB).
//!
//! A global allocator of this test binary counts the live bytes each thread allocated (each
//! test uses its store from its own thread alone).

use bytes::Bytes;
use proxy::cache::vary::VarySpec;
use proxy::cache::{Append, Freshness, Handle, Key, Lookup, Read, Storable, Store};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Live;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn add(n: i64) {
    // A thread being torn down has no counter left: nothing of this test runs there.
    let _ = LIVE.try_with(|c| c.set(c.get() + n));
}

// SAFETY: forwards to the system allocator unchanged; the counter is a const-initialised
// thread-local Cell (touching it never allocates).
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        add(l.size() as i64);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        add(-(l.size() as i64));
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        add(n as i64 - l.size() as i64);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

fn live() -> i64 {
    LIVE.with(Cell::get)
}

const T: u64 = 1_700_000_000_000;

fn key(target: &[u8]) -> Key<'_> {
    Key {
        https: false,
        host: b"fill.test",
        target,
    }
}

fn fresh() -> Storable {
    Storable {
        freshness: Freshness {
            response_time: T,
            corrected_initial_age: 0,
            lifetime: 60_000,
            forbids_stale: false,
            stale_while_revalidate: 0,
            stale_if_error: None,
        },
        vary: VarySpec::default(),
    }
}

/// A fill of `target` with its head in (`declared`: its Content-Length, if any).
fn begin(s: &mut Store, target: &[u8], declared: Option<u64>) -> Handle {
    let h = s.begin_fill(key(target)).expect("room");
    let head = Bytes::from_static(b"HTTP/1.1 200 OK\r\n");
    assert!(s.fill_head(h, 200, head, fresh(), declared));
    h
}

fn byte(i: u64) -> u8 {
    (i % 251) as u8
}

#[test]
fn fills_of_one_byte_pieces_hold_about_the_bytes_they_count() {
    // Four fills at once, chunked (no declared length), one byte per append, interleaved.
    let mut s = Store::new(4 << 20, 1 << 20);
    let fills: Vec<Handle> = (0..4)
        .map(|i| begin(&mut s, format!("/f{i}").as_bytes(), None))
        .collect();
    let (counted0, live0) = (s.bytes(), live());
    let n = 200_000u64;
    for i in 0..n {
        for &h in &fills {
            assert_eq!(s.append(h, &[byte(i)]), Append::Kept);
        }
    }
    let counted = (s.bytes() - counted0) as i64;
    let held = live() - live0;
    assert_eq!(counted, 4 * n as i64);
    assert!(
        held <= 2 * counted + (256 << 10),
        "{counted} body bytes counted, {held} bytes allocated for them"
    );
    for (i, &h) in fills.iter().enumerate() {
        assert!(s.finish(h));
        let Lookup::Hit(hit) = s.lookup(key(format!("/f{i}").as_bytes()), &[], false, T) else {
            panic!("/f{i}: a hit")
        };
        assert_eq!(hit.body.len() as u64, n);
        assert!(hit
            .body
            .iter()
            .enumerate()
            .all(|(j, &b)| b == byte(j as u64)));
    }
}

#[test]
fn a_reader_streaming_a_fill_piece_by_piece_sees_every_byte_as_it_arrives() {
    // A reader that keeps up with a fill of one-byte pieces (it reads after each) gets each
    // byte at once, and its reads leave nothing behind in the store.
    let mut s = Store::new(4 << 20, 1 << 20);
    let n = 100_000u64;
    let h = begin(&mut s, b"/streamed", Some(n));
    let (counted0, live0) = (s.bytes(), live());
    let mut got = 0u64;
    for i in 0..n {
        assert_eq!(s.append(h, &[byte(i)]), Append::Kept);
        match s.read(h, got) {
            Read::Data(b) => {
                assert_eq!(&b[..], &[byte(i)][..], "byte {i}");
                got += b.len() as u64;
            }
            other => panic!("byte {i}: {other:?}"),
        }
        assert_eq!(s.read(h, got), Read::Pending);
    }
    let counted = (s.bytes() - counted0) as i64;
    let held = live() - live0;
    assert!(
        held <= 2 * counted + (64 << 10),
        "{counted} body bytes counted, {held} bytes allocated for them"
    );
    assert!(s.finish(h));
    assert_eq!(s.read(h, n), Read::End);
}
