//! A HEAD miss fills its entry with a GET: when the answer is not stored, the client's
//! connection goes on at its head, the GET's body left unread.

use crate::cache_proxy::{proxy, x_cache};
use crate::scripted::{answer, raw_answer, Answer, Scripted};
use std::sync::mpsc::Sender;
use tests::raw::{self, Client};

/// The upstream and client errors counted over the proxy's workers.
fn errors(p: &proxy::Running) -> (u64, u64) {
    p.stats().iter().fold((0, 0), |(u, c), s| {
        (u + s.upstream_errors.get(), c + s.client_errors.get())
    })
}

fn send(c: &mut Client, method: &str, path: &str) {
    c.send(format!("{method} {path} HTTP/1.1\r\nHost: cache.test\r\n\r\n").as_bytes())
        .expect("send");
}

/// `fields` (a 200) and a 64 KiB body, held by the origin after half of it.
fn held_mid_body(fields: &[&str]) -> (Answer, Sender<()>) {
    answer("200 OK", fields, &[b'x'; 64 << 10]).held_at(32 << 10)
}

/// A chunked 200 (`max-age=60`) whose first chunk is over the route's max_object (1 KiB),
/// held by the origin after it: the fill is dropped while the body streams.
fn chunked_over_max_object() -> (Answer, Sender<()>) {
    let mut raw =
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    raw.extend_from_slice(b"800\r\n");
    raw.extend_from_slice(&[b'x'; 0x800]);
    raw.extend_from_slice(b"\r\n");
    let at = raw.len();
    raw.extend_from_slice(b"800\r\n");
    raw.extend_from_slice(&[b'y'; 0x800]);
    raw.extend_from_slice(b"\r\n0\r\n\r\n");
    raw_answer(raw).held_at(at)
}

#[test]
fn a_head_miss_that_is_not_stored_leaves_the_body_unread() {
    // nginx finalizes a HEAD whose GET is not cacheable at its head and closes the upstream.
    // The proxy read the whole GET body before the connection's next request: with the
    // origin pausing mid-body, the HEAD's head came at once and the next answer only when the
    // origin went on (a 5 MiB object over max_object paused 4 s: 4.02 s; a 300 MB no-store
    // body was read whole for every HEAD).
    let cases = [
        ("no-store", held_mid_body(&["Cache-Control: no-store"])),
        (
            "private",
            held_mid_body(&["Cache-Control: private, max-age=60"]),
        ),
        (
            "over max_object by its length",
            held_mid_body(&["Cache-Control: max-age=60"]),
        ),
        ("over max_object mid-body", chunked_over_max_object()),
    ];
    for (what, (first, release)) in cases {
        let next = answer("200 OK", &["Cache-Control: no-store"], b"next");
        let o = Scripted::start(vec![first, next]);
        let (p, addr) = proxy(&[o.addr()], &[], |c| c.max_object = 1024);
        let mut c = Client::connect(addr);
        send(&mut c, "HEAD", "/h");
        let r = c
            .response_to(true, raw::WAIT)
            .unwrap_or_else(|r| panic!("{what}: HEAD: {}", raw::show(&r)));
        assert_eq!((r.status, x_cache(&r)), (200, "MISS"), "{what}");
        assert!(r.body.is_empty(), "{what}: a HEAD answer has no body");
        assert!(o.head(0).starts_with("get /h "), "{what}: {}", o.head(0));
        // The origin still holds the rest of the first body.
        send(&mut c, "GET", "/next");
        let r = c.response_to(false, raw::WAIT).unwrap_or_else(|r| {
            panic!(
                "{what}: the next request waited on the unread body: {}",
                raw::show(&r)
            )
        });
        assert_eq!((r.status, &r.body[..]), (200, &b"next"[..]), "{what}");
        assert_eq!(o.requests(), 2, "{what}");
        assert!(o.head(1).starts_with("get /next "), "{what}: {}", o.head(1));
        // The client's HEAD was answered: no error on either side.
        assert_eq!(errors(&p), (0, 0), "{what}: (upstream, client) errors");
        drop(release);
        p.shutdown().unwrap();
    }
}

#[test]
fn a_head_miss_that_is_stored_reads_the_body_into_the_entry() {
    // The other side of the above: a storable answer is read whole for the entry, and the
    // next request is a hit.
    let o = Scripted::start(vec![answer(
        "200 OK",
        &["Cache-Control: max-age=60"],
        b"stored",
    )]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let mut c = Client::connect(addr);
    send(&mut c, "HEAD", "/s");
    let r = c.response_to(true, raw::WAIT).expect("HEAD");
    assert_eq!(
        (r.status, x_cache(&r), r.header("content-length")),
        (200, "MISS", Some("6"))
    );
    send(&mut c, "GET", "/s");
    let r = raw::response(&mut c, "GET /s");
    assert_eq!(
        (r.status, x_cache(&r), &r.body[..], o.requests()),
        (200, "HIT", &b"stored"[..], 1)
    );
    p.shutdown().unwrap();
}

#[test]
fn requests_collapsed_on_a_head_miss_that_is_not_stored_are_answered() {
    // A GET that joined the HEAD's fill while the origin held its head goes upstream on its
    // own once the head says no-store: it is not left waiting on a body nobody reads.
    let big = answer("200 OK", &["Cache-Control: no-store"], &[b'x'; 64 << 10]);
    let (big, head_gate) = big.held();
    let (big, body_gate) = big.held_at(32 << 10);
    let o = Scripted::start(vec![
        big,
        answer("200 OK", &["Cache-Control: no-store"], b"own"),
    ]);
    let (p, addr) = proxy(&[o.addr()], &[], |_| {});
    let mut head = Client::connect(addr);
    send(&mut head, "HEAD", "/c");
    assert!(tests::eventually(raw::WAIT, || o.requests() == 1));
    let mut get = Client::connect(addr);
    send(&mut get, "GET", "/c");
    head_gate.send(()).unwrap();
    let r = head.response_to(true, raw::WAIT).expect("HEAD");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    let r = raw::response(&mut get, "the collapsed GET");
    assert_eq!((r.status, &r.body[..], o.requests()), (200, &b"own"[..], 2));
    drop(body_gate);
    p.shutdown().unwrap();
}
