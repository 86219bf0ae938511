//! Issue 22, item 1: one client that stops reading must not freeze its worker. Responses sent
//! with direct syscalls (a cache hit's `sendfile` from the body file, a static file's
//! `send` + `sendfile`) need the client socket non-blocking at that moment; io_uring accepts
//! blocking sockets. The static path used to restore flags it read once per worker from
//! another socket, turning a socket the cache path had made non-blocking (and remembered as
//! such) blocking again: the next hit's `sendfile` then blocked the worker thread for as long
//! as the client kept its window closed.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use tests::inproc::Proxy;
use tests::raw::{self, Client, End, WAIT};
use tests::reload::Scratch;

/// Larger than the proxy's socket send buffer can grow to (tcp_wmem's 4 MiB) plus the
/// client's receive buffer: a `sendfile` of it on a blocking socket waits for the client.
const BIG: usize = 16 << 20;
/// Over 8 KiB: served with `sendfile`, not from the open-file cache's memory.
const STATIC_LEN: usize = 64 * 1024;

fn static_root() -> Scratch {
    let dir = Scratch::new("sec-freeze");
    std::fs::create_dir_all(dir.path("static")).unwrap();
    std::fs::write(dir.path("static/f.bin"), vec![b'f'; STATIC_LEN]).unwrap();
    dir
}

/// One worker: `/static/` from `root`, everything else through a cache (bodies of 4 KiB and
/// more in the body file, sent with sendfile) to `origin`; a client that takes nothing for
/// 300 ms is dropped.
fn proxy(origin: SocketAddr, root: &Scratch) -> Proxy {
    let text = format!(
        r#"
[[listen]]
addr = "127.0.0.1:0"
[runtime]
workers = 1
pin = false
[upstream.app]
servers = ["{origin}"]
[[route]]
path = "/static/"
static = {{ root = "{root}" }}
[[route]]
path = "/"
upstream = "app"
cache = {{ max_bytes = "64MiB", max_object = "32MiB" }}
[timeouts]
send = "300ms"
shutdown = "1s"
"#,
        root = root.path("").display()
    );
    let cfg = proxy::config::from_toml("freeze.toml", &text).expect("config");
    Proxy::start(cfg)
}

/// GET `path` on `c`: a complete 200 with `len` body bytes and, for a cached route,
/// X-Cache `cache`. The head is parsed by the strict parser; the body is only counted (a
/// large one re-parsed at each read would make this client too slow for the send timeout).
fn get(c: &mut Client, path: &str, len: usize, cache: Option<&str>) {
    c.send(&raw::get(path)).expect("send");
    c.stream.set_read_timeout(Some(WAIT)).unwrap();
    let head_len = loop {
        if let Some(at) = c.buffered().windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if let Err(end) = c.fill() {
            panic!("{path}: {end:?} before the head ended");
        }
    };
    let r = match raw::parse_response_to(&c.buffered()[..head_len], false, true) {
        raw::Parse::Complete(r, _) => r,
        other => panic!("{path}: bad head: {other:?}"),
    };
    c.consume(head_len);
    assert_eq!(r.status, 200, "{path}: {:?}", r.status_line);
    assert_eq!(r.header("content-length"), Some(len.to_string().as_str()));
    assert_eq!(r.header("x-cache"), cache, "{path}");
    while c.buffered().len() < len {
        if let Err(end) = c.fill() {
            panic!(
                "{path}: {end:?} after {} of {len} body bytes",
                c.buffered().len()
            );
        }
    }
    assert_eq!(c.buffered().len(), len, "{path}: bytes after the body");
    c.take_buffered();
}

/// A client whose receive buffer is as small as the kernel allows (set before connecting,
/// so the window it offers stays small).
fn small_window_client(addr: SocketAddr) -> Client {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    s.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    s.connect(&addr.into()).expect("connect");
    let s: TcpStream = s.into();
    s.set_nodelay(true).unwrap();
    Client::from_stream(s)
}

#[test]
fn a_client_that_stops_reading_does_not_freeze_its_worker() {
    let o = tests::origin();
    let root = static_root();
    let p = proxy(o.addr(), &root);
    let (big, small) = (format!("/big?size={BIG}"), "/small?size=8KiB");

    // Another connection first: fills both entries (misses stream from the origin, no
    // sendfile) and is the worker's first static response, on a blocking socket.
    let mut first = Client::connect(p.addr);
    get(&mut first, &big, BIG, Some("MISS"));
    get(&mut first, small, 8192, Some("MISS"));
    get(&mut first, "/static/f.bin", STATIC_LEN, None);

    // The connection that stops reading: a hit (its socket made non-blocking for good), a
    // static file, then the large hit, which it never reads.
    let mut stuck = small_window_client(p.addr);
    get(&mut stuck, small, 8192, Some("HIT"));
    get(&mut stuck, "/static/f.bin", STATIC_LEN, None);
    stuck.send(&raw::get(&big)).expect("send");

    // The same (only) worker answers a new client at once.
    let mut other = Client::connect(p.addr);
    other.send(&raw::get(small)).expect("send");
    let asked = Instant::now();
    let answered = other.response(Duration::from_secs(1));
    assert!(
        answered.as_ref().is_ok_and(|r| r.status == 200),
        "a client of the same worker was not answered within 1 s of asking (after {:?}) while \
         another stopped reading: {}",
        asked.elapsed(),
        answered.err().map_or(String::new(), |r| raw::show(&r))
    );

    // The stuck client is dropped by the send timeout (its request ends as the client's
    // fault, the only one here); what it reads after that ends in EOF or a reset, never in
    // our read timing out.
    let faults = || p.running().stats()[0].client_errors.get();
    assert!(
        tests::eventually(Duration::from_secs(10), || faults() >= 1),
        "the send timeout never dropped the stuck client"
    );
    let r = stuck.until_close(Duration::from_secs(20));
    assert_ne!(
        r.end,
        End::TimedOut,
        "the stuck connection was not closed: got {} bytes",
        r.bytes.len()
    );
    assert!(
        r.bytes.len() < BIG,
        "it got the whole body ({} bytes): it was not dropped",
        r.bytes.len()
    );
    drop(stuck);
    p.stop();
}
