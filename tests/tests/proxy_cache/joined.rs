//! Requests that join a fill under way: what they may be answered from (RFC 9111 4: a
//! stored response used without validation must be fresh), and what becomes of them when the
//! key is invalidated or the entry evicted while they stream it (RFC 9111 4.4: invalidation
//! concerns later requests).

use crate::cache_proxy::{proxy, request, x_cache};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use tests::raw::{self, Client};

/// The whole body of the held fill.
const BODY: &[u8] = b"0123456789abcdefghij";
/// The bytes of it sent with the head; the rest comes at `release`.
const FIRST: usize = 5;

/// An origin whose first request is answered at once with a 200 head (the fields `fields`,
/// then `Content-Length`) and the first [`FIRST`] bytes of [`BODY`], and the rest when the
/// test sends on `release`; every later request, at once: a POST 303 to `/login`, anything
/// else `200 apart` (max-age=60).
struct HeldFill {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    release: Sender<()>,
}

impl HeldFill {
    fn start(fields: &'static str) -> HeldFill {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let (release, gate) = mpsc::channel::<()>();
        let seen = requests.clone();
        std::thread::spawn(move || {
            let mut gate = Some(gate);
            for s in l.incoming().flatten() {
                let (seen, gate) = (seen.clone(), gate.take());
                std::thread::spawn(move || serve(s, fields, &seen, gate));
            }
        });
        HeldFill {
            addr,
            requests,
            release,
        }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Answer the requests of one connection; with `gate` (the first connection), its first one
/// is the held fill.
fn serve(mut s: TcpStream, fields: &str, seen: &AtomicUsize, mut gate: Option<Receiver<()>>) {
    let mut pending = Vec::new();
    while let Ok(head) = raw::read_request_head(&mut s, &mut pending) {
        seen.fetch_add(1, Ordering::SeqCst);
        let sent = match gate.take() {
            Some(gate) => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\n{fields}Content-Length: {}\r\n\r\n",
                    BODY.len()
                );
                let first = [head.as_bytes(), &BODY[..FIRST]].concat();
                s.write_all(&first)
                    .and_then(|()| gate.recv().map_err(std::io::Error::other))
                    .and_then(|()| s.write_all(&BODY[FIRST..]))
            }
            None if head.starts_with(b"POST ") => s.write_all(
                b"HTTP/1.1 303 See Other\r\nLocation: /login\r\nContent-Length: 0\r\n\r\n",
            ),
            None => s.write_all(
                b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\napart",
            ),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Send `GET /f` on a new connection.
fn get(addr: SocketAddr) -> Client {
    let mut c = Client::connect(addr);
    c.send(b"GET /f HTTP/1.1\r\nHost: cache.test\r\n\r\n")
        .expect("send");
    c
}

/// Read on `c` until its response head and `body` bytes after it are in; the head's text.
/// The bytes stay buffered for a parse of the whole response.
fn head_and(c: &mut Client, body: usize) -> String {
    loop {
        let got = c.buffered();
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            if got.len() - (i + 4) >= body {
                return String::from_utf8_lossy(&got[..i + 4]).into_owned();
            }
        }
        c.stream.set_read_timeout(Some(raw::WAIT)).unwrap();
        if let Err(end) = c.fill() {
            panic!("{end:?} after {:?}", String::from_utf8_lossy(c.buffered()));
        }
    }
}

#[test]
fn a_fill_that_is_not_fresh_is_no_answer_to_the_requests_that_join_it() {
    // RFC 9111 4: a stored response is used without validation only while fresh; 5.2.2.4:
    // no-cache never. A request that came while such a response was filling was streamed it
    // (HIT, the origin asked once): now it goes to the origin itself, as it would once the
    // fill is complete. A fresh fill is still joined.
    let cases = [
        ("Cache-Control: no-cache\r\nETag: \"a\"\r\n", "MISS"),
        ("Cache-Control: max-age=0\r\nETag: \"b\"\r\n", "MISS"),
        ("Cache-Control: max-age=10\r\nAge: 100\r\n", "MISS"),
        ("Cache-Control: max-age=60\r\n", "HIT"),
    ];
    for (fields, joiner) in cases {
        let o = HeldFill::start(fields);
        let (p, addr) = proxy(&[o.addr], &[], |_| {});
        let mut a = get(addr);
        // A has the head: the entry has it too (it is stored before it is relayed).
        let head = head_and(&mut a, FIRST);
        assert!(head.contains("X-Cache: MISS"), "{fields}: {head}");
        let mut b = get(addr);
        let head = head_and(&mut b, 0);
        assert!(
            head.contains(&format!("X-Cache: {joiner}")),
            "{fields}: the request that joined: {head}"
        );
        if joiner == "MISS" {
            let r = raw::response(&mut b, "B");
            assert_eq!(&r.body[..], b"apart", "{fields}");
            assert_eq!(o.requests(), 2, "{fields}");
        }
        o.release.send(()).unwrap();
        let r = raw::response(&mut a, "A");
        assert_eq!(&r.body[..], BODY, "{fields}");
        if joiner == "HIT" {
            let r = raw::response(&mut b, "B");
            assert_eq!(&r.body[..], BODY, "{fields}");
            assert_eq!(o.requests(), 1, "{fields}");
        }
        p.shutdown().unwrap();
    }
}

#[test]
fn answers_streaming_a_fill_finish_when_the_key_is_invalidated() {
    // RFC 9111 4.4: an unsafe request's success invalidates the key for the requests after
    // it; responses already being sent finish. B, streaming the entry A's request fills, was
    // cut off at the POST's 303 (or a PURGE) after the bytes it had (then the connection
    // closed); now it gets the whole body, and the fill is not what the key finds after.
    for method in ["POST", "PURGE"] {
        let o = HeldFill::start("Cache-Control: max-age=60\r\n");
        let (p, addr) = proxy(&[o.addr], &[], |c| {
            c.purge_from = vec![proxy::config::cache::Cidr::parse("127.0.0.1").unwrap()];
        });
        let mut a = get(addr);
        assert!(
            head_and(&mut a, FIRST).contains("X-Cache: MISS"),
            "{method}"
        );
        let mut b = get(addr);
        assert!(head_and(&mut b, FIRST).contains("X-Cache: HIT"), "{method}");
        let r = request(addr, method, "/f", "Content-Length: 0\r\n");
        let status = if method == "POST" { 303 } else { 200 };
        assert_eq!(r.status, status, "{method}");
        o.release.send(()).unwrap();
        for (who, c) in [("A", &mut a), ("B", &mut b)] {
            let r = raw::response(c, who);
            assert_eq!(&r.body[..], BODY, "{method}: {who}");
        }
        let r = request(addr, "GET", "/f", "");
        assert_eq!(
            (x_cache(&r), &r.body[..]),
            ("MISS", &b"apart"[..]),
            "{method}: the key was invalidated"
        );
        p.shutdown().unwrap();
    }
}

#[test]
fn answers_streaming_a_fill_finish_when_its_entry_is_evicted_for_another_variant() {
    // `max_variants = 1`: another variant of the key makes the filling entry go (the bound
    // on a key's entries); B, streaming it, was cut off; now it finishes.
    let o = HeldFill::start("Cache-Control: max-age=60\r\nVary: X-V\r\n");
    let (p, addr) = proxy(&[o.addr], &[], |c| c.max_variants = 1);
    let mut a = get(addr);
    assert!(head_and(&mut a, FIRST).contains("X-Cache: MISS"));
    let mut b = get(addr);
    assert!(head_and(&mut b, FIRST).contains("X-Cache: HIT"));
    let r = request(addr, "GET", "/f", "X-V: other\r\n");
    assert_eq!((x_cache(&r), &r.body[..]), ("MISS", &b"apart"[..]));
    o.release.send(()).unwrap();
    for (who, c) in [("A", &mut a), ("B", &mut b)] {
        let r = raw::response(c, who);
        assert_eq!(&r.body[..], BODY, "{who}");
    }
    p.shutdown().unwrap();
}

#[test]
fn the_requests_a_fill_cannot_answer_go_to_the_origin_together() {
    // A fill whose head shows a response that answers no request waiting on it (not fresh,
    // or not storable) sends those requests to the origin each on its own, at once (a pass,
    // as Varnish's hit-for-miss): they started a new fill each, one after the other's head,
    // so the origin saw them one at a time.
    let cases = [
        "Cache-Control: max-age=0\r\nETag: \"b\"\r\n",
        "Cache-Control: no-cache\r\nETag: \"a\"\r\n",
        "Cache-Control: no-store\r\n",
        "Cache-Control: private\r\n",
    ];
    for fields in cases {
        let o = tests::gate::Gate::with_fields(fields);
        let (p, addr) = proxy(&[o.addr], &[], |_| {});
        let mut a = get(addr);
        let first = o.next();
        // The others have been read by the proxy while A's head is held: they wait on its fill.
        let mut others: Vec<Client> = (0..3).map(|_| get(addr)).collect();
        for c in &others {
            tests::wait_until_peer_read(&c.stream, raw::WAIT);
        }
        first.go.send(()).unwrap();
        let r = raw::response(&mut a, "A");
        assert_eq!((x_cache(&r), &r.body[..]), ("MISS", &b"/f"[..]), "{fields}");
        let held: Vec<_> = (0..others.len()).map(|_| o.next()).collect();
        assert_eq!(
            held.iter().map(|h| h.held).max(),
            Some(others.len()),
            "{fields}: the origin held them all at once"
        );
        for h in &held {
            h.go.send(()).unwrap();
        }
        for (i, c) in others.iter_mut().enumerate() {
            let r = raw::response(c, "waiter");
            assert_eq!(
                (x_cache(&r), &r.body[..]),
                ("MISS", &b"/f"[..]),
                "{fields}: {i}"
            );
        }
        p.shutdown().unwrap();
    }
}

#[test]
fn the_requests_a_validation_leaves_stale_validate_together() {
    // A stored no-cache response is validated for each request (RFC 9111 5.2.2.4): the
    // requests that waited on one validation, whose 304 leaves the entry as it was (not
    // fresh), send their own conditional requests at once. They went one at a time, each
    // validation waiting on the one before.
    let o = tests::gate::Gate::with_fields("Cache-Control: no-cache\r\nETag: \"a\"\r\n");
    let (p, addr) = proxy(&[o.addr], &[], |_| {});
    let mut first = get(addr);
    o.next().go.send(()).unwrap();
    let r = raw::response(&mut first, "first");
    assert_eq!((x_cache(&r), &r.body[..]), ("MISS", &b"/f"[..]));
    let mut a = get(addr);
    let validation = o.next();
    let mut others: Vec<Client> = (0..3).map(|_| get(addr)).collect();
    for c in &others {
        tests::wait_until_peer_read(&c.stream, raw::WAIT);
    }
    validation.go.send(()).unwrap();
    let r = raw::response(&mut a, "A");
    assert_eq!((r.status, &r.body[..]), (200, &b"/f"[..]));
    let held: Vec<_> = (0..others.len()).map(|_| o.next()).collect();
    assert_eq!(
        held.iter().map(|h| h.held).max(),
        Some(others.len()),
        "the origin held them all at once"
    );
    for h in &held {
        h.go.send(()).unwrap();
    }
    for (i, c) in others.iter_mut().enumerate() {
        let r = raw::response(c, "waiter");
        assert_eq!((r.status, &r.body[..]), (200, &b"/f"[..]), "{i}");
    }
    p.shutdown().unwrap();
}
