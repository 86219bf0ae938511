//! The body file's bounds: the mappings it costs the process (the kernel allows
//! `vm.max_map_count`, 65,530 by default, to the whole process: workers, every store and the
//! allocator) and the offsets it uses do not grow with the bodies stored.

use super::store::{Append, Key, Lookup, Store};
use super::vary::VarySpec;
use super::{Freshness, Millis, Storable};
use bytes::Bytes;
use std::collections::HashMap;

const T: Millis = 1_700_000_000_000;

fn key(target: &[u8]) -> Key<'_> {
    Key {
        https: false,
        host: b"m",
        target,
    }
}

fn put(s: &mut Store, target: &[u8], body: &[u8]) {
    let h = s.begin_fill(key(target)).expect("room");
    let fresh = Storable {
        freshness: Freshness {
            response_time: T,
            corrected_initial_age: 0,
            lifetime: 10_000,
            forbids_stale: false,
            stale_while_revalidate: 0,
            stale_if_error: None,
        },
        vary: VarySpec::default(),
    };
    let head = Bytes::from_static(b"HTTP/1.1 200 OK\r\n");
    assert!(s.fill_head(h, 200, head, fresh, Some(body.len() as u64)));
    assert_eq!(s.append(h, body), Append::Kept);
    assert!(s.finish(h));
}

fn body(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 7 + j % 251) as u8).collect()
}

/// The most mappings any one body file of this process has (tests beside this one may have
/// files of their own: each is counted apart, by its inode).
fn most_mappings_of_one_body_file() -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let mut per_file: HashMap<&str, usize> = HashMap::new();
    for line in maps.lines().filter(|l| l.contains("memfd:proxy-cache")) {
        let inode = line.split_whitespace().nth(4).unwrap_or("");
        *per_file.entry(inode).or_default() += 1;
    }
    per_file.values().copied().max().unwrap_or(0)
}

#[test]
fn storing_many_bodies_costs_the_process_a_bounded_number_of_mappings() {
    let mut s = Store::new(1 << 30, 1 << 20).with_body_file();
    let n = 3000;
    for i in 0..n {
        put(&mut s, format!("/b{i}").as_bytes(), &body(i, 4096));
    }
    let most = most_mappings_of_one_body_file();
    assert!(
        most <= 4,
        "{n} bodies stored: {most} mappings of one body file"
    );
    for i in [0, n / 2, n - 1] {
        let Lookup::Hit(hit) = s.lookup(key(format!("/b{i}").as_bytes()), &[], false, T) else {
            panic!("/b{i}: a hit")
        };
        assert!(hit.file.is_some(), "/b{i}: in the file");
        assert_eq!(&hit.body[..], &body(i, 4096)[..], "/b{i}: its bytes");
    }
}

#[test]
fn the_body_file_reuses_the_room_of_bodies_it_let_go() {
    let max_bytes = 256 << 10;
    let mut s = Store::new(max_bytes, 64 << 10).with_body_file();
    let mut furthest = 0;
    for i in 0..2000 {
        let target = format!("/e{i}");
        let b = body(i, 8192 + i % 3000);
        put(&mut s, target.as_bytes(), &b);
        let Lookup::Hit(hit) = s.lookup(key(target.as_bytes()), &[], false, T) else {
            panic!("{target}: a hit")
        };
        let file = hit.file.expect("in the file");
        assert_eq!(&hit.body[..], &b[..], "{target}: its bytes");
        furthest = furthest.max(file.offset + b.len() as u64);
    }
    // 2000 bodies of 8-11 KiB went through a store of 256 KiB: the file never reaches far
    // past what the store holds.
    assert!(
        furthest <= 4 * max_bytes,
        "bodies reached offset {furthest} of the file"
    );
}

#[test]
fn bodies_that_find_the_body_file_full_stay_in_memory() {
    let mut s = Store::new(256 << 10, 64 << 10).with_body_file();
    // Responses still being sent hold their bodies' ranges after the store let them go: held
    // long enough, they fill the file's span and new bodies are kept in memory instead.
    let mut sending = Vec::new();
    let mut in_memory = 0;
    for i in 0..40 {
        let target = format!("/h{i}");
        let b = body(i, 64 << 10);
        put(&mut s, target.as_bytes(), &b);
        let Lookup::Hit(hit) = s.lookup(key(target.as_bytes()), &[], false, T) else {
            panic!("{target}: a hit")
        };
        assert_eq!(&hit.body[..], &b[..], "{target}: its bytes");
        in_memory += usize::from(hit.file.is_none());
        sending.push(hit);
    }
    assert!(in_memory > 0, "the span filled up");
    drop(sending);
    put(&mut s, b"/after", &body(1, 64 << 10));
    let Lookup::Hit(hit) = s.lookup(key(b"/after"), &[], false, T) else {
        panic!("a hit")
    };
    assert!(hit.file.is_some(), "the ranges came back");
}
