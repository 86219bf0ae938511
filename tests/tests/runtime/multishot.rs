//! Multishot receives (vendored monoio's `TcpStream::enable_multishot_recv`, switched on per
//! worker by `shared::runtime::multishot_recv`): every byte in order when readers fall behind
//! and the buffer ring runs dry, nothing lost to a read dropped by a timeout, a FIN sent when
//! such a connection is closed, and the epoll driver reading as before.

use monoio::io::AsyncReadRent;
use monoio::net::{TcpListener, TcpStream};
use shared::runtime::{run_on, DriverKind};
use std::io::{Read, Write};
use std::os::fd::IntoRawFd;
use std::sync::mpsc;
use std::time::Duration;

const CONNS: usize = 64;
const PER_CONN: usize = 64 * 1024;

use tests::fast_uring;

/// Byte `i` of connection `conn`'s stream: a pattern that a reordered, lost or repeated
/// chunk cannot reproduce.
fn pattern(conn: usize, i: usize) -> u8 {
    ((conn * 31 + i * 7 + i / 251) % 251) as u8
}

/// A listener bound now (so clients may connect before the runtime runs), for `serve`.
fn listener() -> (std::net::TcpListener, std::net::SocketAddr) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let a = l.local_addr().expect("local addr");
    (l, a)
}

/// The listener on the current runtime's driver.
fn serve(l: std::net::TcpListener) -> TcpListener {
    l.set_nonblocking(true).expect("nonblocking");
    TcpListener::from_std(l).expect("listener on the runtime")
}

/// A client connected to `addr` that writes what it is sent, and ends its stream when the
/// sender is dropped.
fn scripted_client(
    addr: std::net::SocketAddr,
) -> (mpsc::Sender<&'static [u8]>, std::thread::JoinHandle<()>) {
    let (go_tx, go_rx) = mpsc::channel::<&'static [u8]>();
    let client = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        while let Ok(bytes) = go_rx.recv() {
            s.write_all(bytes).expect("write");
        }
    });
    (go_tx, client)
}

/// Read `s` to its end in reads of at most 1000 bytes (so a ring buffer is read in several
/// pieces), sleeping between the first reads so arrivals pile up; returns the bytes.
async fn read_slowly(mut s: TcpStream) -> Vec<u8> {
    let mut got = Vec::with_capacity(PER_CONN);
    for n in 0.. {
        let (r, buf) = s.read(Vec::with_capacity(1000)).await;
        match r {
            Ok(0) => break,
            Ok(_) => got.extend_from_slice(&buf),
            Err(e) => panic!("read failed after {} bytes: {e}", got.len()),
        }
        if n < 20 {
            monoio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    got
}

#[test]
fn every_byte_arrives_in_order_when_readers_fall_behind_and_the_ring_runs_dry() {
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    // Every client writes its whole stream and its FIN before any is read: then the first
    // receives armed take every buffer of the ring (128 x 16 KiB for 64 x 64 KiB waiting).
    let (sent_tx, sent_rx) = mpsc::channel();
    let client = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in 0..CONNS {
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            let data: Vec<u8> = (0..PER_CONN).map(|i| pattern(c, i)).collect();
            s.write_all(&data).expect("write");
            s.shutdown(std::net::Shutdown::Write).expect("shutdown");
            conns.push(s);
        }
        sent_tx.send(()).expect("signal");
        conns
    });
    let (streams, stats) = run_on(driver, 256, async move {
        let l = serve(l);
        let mut accepted = Vec::new();
        for _ in 0..CONNS {
            let (mut s, _) = l.accept().await.expect("accept");
            assert!(s.enable_multishot_recv(), "multishot refused on io_uring");
            accepted.push(s);
        }
        sent_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the clients did not finish writing");
        let readers: Vec<_> = accepted
            .into_iter()
            .map(|s| monoio::spawn(read_slowly(s)))
            .collect();
        let mut streams = Vec::new();
        for r in readers {
            streams.push(r.await);
        }
        (streams, monoio::net::tcp::multishot_stats())
    })
    .expect("runtime");
    drop(client.join().expect("client thread"));
    // Accept order is connection order here (one client connecting in turn).
    for (c, got) in streams.iter().enumerate() {
        assert_eq!(got.len(), PER_CONN, "connection {c}: byte count");
        if let Some(i) = (0..PER_CONN).find(|&i| got[i] != pattern(c, i)) {
            panic!("connection {c}: byte {i} is wrong");
        }
    }
    assert!(stats.armed >= CONNS as u64, "{stats:?}");
    assert!(
        stats.arrivals >= (CONNS * PER_CONN / (16 * 1024)) as u64 / 2,
        "{stats:?}"
    );
    assert!(stats.capped > 0, "no receive was capped: {stats:?}");
    assert!(stats.starved > 0, "the ring never ran dry: {stats:?}");
    assert!(
        stats.plain > 0,
        "no read fell back to a one-shot receive: {stats:?}"
    );
}

#[test]
fn a_read_dropped_by_a_timeout_loses_nothing() {
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    let (go_tx, client) = scripted_client(addr);
    let got = run_on(driver, 64, async move {
        let (mut s, _) = serve(l).accept().await.expect("accept");
        assert!(s.enable_multishot_recv());
        // Armed, nothing sent yet: the read must time out (not end, not fail).
        let r =
            monoio::time::timeout(Duration::from_millis(20), s.read(Vec::with_capacity(64))).await;
        assert!(
            r.is_err(),
            "a read with nothing sent ended: {:?}",
            r.map(|x| x.0)
        );
        go_tx.send(b"hello").expect("client");
        let r =
            monoio::time::timeout(Duration::from_millis(5), s.read(Vec::with_capacity(64))).await;
        // Whether or not this short read caught it, "hello" must come out whole, once.
        let mut got = match r {
            Ok((Ok(_), buf)) => buf,
            Ok((Err(e), _)) => panic!("read failed: {e}"),
            Err(_) => Vec::new(),
        };
        go_tx.send(b" world").expect("client");
        drop(go_tx);
        loop {
            let (r, buf) = s.read(Vec::with_capacity(64)).await;
            match r {
                Ok(0) => break,
                Ok(_) => got.extend_from_slice(&buf),
                Err(e) => panic!("read failed: {e}"),
            }
        }
        got
    })
    .expect("runtime");
    client.join().expect("client thread");
    assert_eq!(got, b"hello world");
}

/// `multishot_ready` waits without a buffer and takes nothing: a wait with nothing sent
/// times out (and loses nothing), a wait after bytes arrived ends at once and the read then
/// gets them whole, the end of the stream ends a wait too (and reads as 0); a stream without
/// a multishot receive says `false` at once.
#[test]
fn a_bufferless_wait_ends_when_bytes_or_the_end_arrive_and_takes_nothing() {
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    let (go_tx, client) = scripted_client(addr);
    run_on(driver, 64, async move {
        let (mut s, _) = serve(l).accept().await.expect("accept");
        assert!(
            !s.multishot_ready().await,
            "ready without a multishot receive"
        );
        assert!(s.enable_multishot_recv());
        let quiet = monoio::time::timeout(Duration::from_millis(20), s.multishot_ready()).await;
        assert!(quiet.is_err(), "a wait with nothing sent ended: {quiet:?}");
        go_tx.send(b"ping").expect("client");
        assert!(s.multishot_ready().await, "a wait with bytes arrived");
        // Twice: waiting takes nothing.
        assert!(s.multishot_ready().await);
        let (r, buf) = s.read(Vec::with_capacity(64)).await;
        assert_eq!(r.expect("read"), 4);
        assert_eq!(buf, b"ping");
        drop(go_tx);
        assert!(s.multishot_ready().await, "a wait at the end of the stream");
        let (r, _) = s.read(Vec::with_capacity(64)).await;
        assert_eq!(r.expect("read at the end"), 0);
    })
    .expect("runtime");
    client.join().expect("client thread");
}

/// While most of the ring's buffers hold arrivals nobody read, a wait that would have to arm
/// a receive says `false` at once (the caller then reads into a buffer of its own, and that
/// read gets the bytes): a shared ring is not drained further by idle connections.
///
/// The counts are exact, whatever the load on the machine: every byte is in the sockets'
/// receive queues before any receive is armed, so each receive takes its 64 KiB as four full
/// 16 KiB ring buffers (its `QUEUE_CAP`) and nothing more comes after; and each receive's
/// four arrivals are counted before the next connection is looked at. (It used to arm each
/// receive while the client might still be writing: arrivals came in pieces and late, the
/// count of receives armed before the ring was low varied, and one arrival too many past a
/// canceled receive could empty the ring.)
#[test]
fn a_bufferless_wait_is_refused_while_the_ring_is_low() {
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    // x 64 KiB: 25 receives armed hold 100 of the ring's 128 buffers; the rest are refused.
    const FULL: usize = 30;
    const ARMED: usize = 25;
    let (sent_tx, sent_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in 0..FULL {
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            let data: Vec<u8> = (0..PER_CONN).map(|i| pattern(c, i)).collect();
            s.write_all(&data).expect("write");
            conns.push(s);
        }
        let mut last = std::net::TcpStream::connect(addr).expect("connect");
        sent_tx.send(()).expect("signal");
        // Sent only once the server says so.
        go_rx.recv().expect("go");
        last.write_all(b"late").expect("write");
        // Held open until the server is done.
        let _ = go_rx.recv();
        conns
    });
    let got = run_on(driver, 256, async move {
        use std::os::fd::AsRawFd;
        let l = serve(l);
        let mut held = Vec::new();
        for _ in 0..FULL {
            held.push(l.accept().await.expect("accept").0);
        }
        sent_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the client did not finish writing");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let until = |what: &str, done: &dyn Fn() -> bool| {
            assert!(std::time::Instant::now() < deadline, "{what}");
            !done()
        };
        for s in &held {
            while until("64 KiB never queued", &|| {
                queue_len(s.as_raw_fd(), libc::FIONREAD) as usize == PER_CONN
            }) {
                monoio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let mut armed = 0;
        for (i, s) in held.iter_mut().enumerate() {
            assert!(s.enable_multishot_recv());
            if !s.multishot_ready().await {
                let stats = monoio::net::tcp::multishot_stats();
                assert!(
                    stats.arrivals > 96,
                    "connection {i} refused with the ring not low: {stats:?}"
                );
                continue;
            }
            armed += 1;
            // Its four arrivals are in (and counted) before the next connection's turn.
            let want = 4 * armed as u64;
            while until("arrivals never counted", &|| {
                monoio::net::tcp::multishot_stats().arrivals >= want
            }) {
                monoio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let stats = monoio::net::tcp::multishot_stats();
        assert_eq!(
            (armed, stats.arrivals),
            (ARMED, 4 * ARMED as u64),
            "{FULL} x 64 KiB held: {stats:?}"
        );
        let (mut s, _) = l.accept().await.expect("accept");
        assert!(s.enable_multishot_recv());
        // Low, not empty (the kernel itself would refuse a receive on an empty ring): the
        // refusal below is the wait's own.
        assert_eq!(stats.starved, 0, "{stats:?}");
        let wait = monoio::time::timeout(Duration::from_secs(5), s.multishot_ready()).await;
        assert_eq!(wait, Ok(false), "a wait armed a receive on a low ring");
        go_tx.send(()).expect("client");
        let (r, buf) = s.read(Vec::with_capacity(64)).await;
        assert_eq!(r.expect("read"), 4);
        drop(go_tx);
        drop(held);
        buf
    })
    .expect("runtime");
    drop(client.join().expect("client thread"));
    assert_eq!(got, b"late");
}

/// Close a multishot connection the proxy's two ways: `close(2)` on the raw fd (its
/// `Stream::close_now`) and monoio's drop (a close op). The client must see the FIN while
/// the runtime goes on running.
#[test]
fn closing_a_multishot_connection_sends_its_fin() {
    let Some(driver) = fast_uring() else { return };
    for raw_close in [true, false] {
        let (l, addr) = listener();
        let (eof_tx, eof_rx) = mpsc::channel();
        let client = std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(addr).expect("connect");
            s.write_all(b"ping").expect("write");
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            let mut buf = [0u8; 16];
            let r = s.read(&mut buf).map_err(|e| e.kind());
            eof_tx.send(r).expect("signal");
        });
        let r = run_on(driver, 64, async move {
            let (mut s, _) = serve(l).accept().await.expect("accept");
            assert!(s.enable_multishot_recv());
            let (r, buf) = s.read(Vec::with_capacity(16)).await;
            assert_eq!((r.expect("read"), &buf[..]), (4, &b"ping"[..]));
            if raw_close {
                let fd = s.into_raw_fd();
                // SAFETY: `into_raw_fd` gave us the open fd.
                unsafe { libc::close(fd) };
            } else {
                drop(s);
            }
            // Keep the loop turning until the client has its answer.
            for _ in 0..10_000 {
                if let Ok(r) = eof_rx.try_recv() {
                    return r;
                }
                monoio::time::sleep(Duration::from_millis(1)).await;
            }
            panic!("the client saw nothing within 10 s");
        })
        .expect("runtime");
        client.join().expect("client thread");
        assert_eq!(
            r,
            Ok(0),
            "raw close {raw_close}: the client did not read end of stream"
        );
    }
}

#[test]
fn the_epoll_driver_reads_as_before() {
    let (l, addr) = listener();
    let client = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(b"epoll").expect("write");
    });
    let got = run_on(DriverKind::Epoll, 64, async move {
        let (mut s, _) = serve(l).accept().await.expect("accept");
        assert!(!s.enable_multishot_recv(), "multishot on the epoll driver");
        let mut got = Vec::new();
        loop {
            let (r, buf) = s.read(Vec::with_capacity(64)).await;
            match r.expect("read") {
                0 => break got,
                _ => got.extend_from_slice(&buf),
            }
        }
    })
    .expect("runtime");
    client.join().expect("client thread");
    assert_eq!(got, b"epoll");
}

/// A read takes every arrival already queued that fits in its buffer, as one recv(2) takes
/// what the socket holds: 40 KiB that came in several ring buffers (16 KiB each) is one read
/// into a 64 KiB buffer, not three (a proxied 32 KiB body was two reads and two writes
/// onward). A buffer smaller than what is queued stops inside an arrival, and the next read
/// goes on from there, every byte in order.
#[test]
fn a_read_takes_every_queued_arrival_that_fits() {
    const SENT: usize = 40 * 1024;
    let data: Vec<u8> = (0..SENT).map(|i| pattern(0, i)).collect();
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    let mut client = std::net::TcpStream::connect(addr).expect("connect");
    let (got, lens) = run_on(driver, 64, async move {
        use std::os::fd::AsRawFd;
        let (mut s, _) = serve(l).accept().await.expect("accept");
        assert!(s.enable_multishot_recv());
        let (mut got, mut lens) = (Vec::new(), Vec::new());
        for caps in [&[64 * 1024][..], &[20 * 1024, 64 * 1024]] {
            client.write_all(&data).expect("client write");
            assert!(s.multishot_ready().await);
            // The event: every byte sent sits in the receive's queue (nothing left in flight
            // from the client's socket, nothing left in ours for the kernel to receive).
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while queue_len(client.as_raw_fd(), libc::TIOCOUTQ)
                + queue_len(s.as_raw_fd(), libc::FIONREAD)
                > 0
            {
                assert!(std::time::Instant::now() < deadline, "bytes never queued");
                monoio::time::sleep(Duration::from_millis(1)).await;
            }
            for &cap in caps {
                let (r, buf) = s.read(Vec::with_capacity(cap)).await;
                lens.push(r.expect("read"));
                got.extend_from_slice(&buf);
            }
        }
        (got, lens)
    })
    .expect("runtime");
    assert_eq!(lens, [SENT, 20 * 1024, SENT - 20 * 1024], "bytes per read");
    let data: Vec<u8> = (0..SENT).map(|i| pattern(0, i)).collect();
    assert!(
        got[..SENT] == data[..] && got[SENT..] == data[..],
        "bytes in order"
    );
}

/// Bytes in a socket's send queue (`TIOCOUTQ`) or receive queue (`FIONREAD`).
fn queue_len(fd: i32, request: libc::c_ulong) -> i32 {
    let mut n: libc::c_int = 0;
    // SAFETY: an ioctl that writes one int, on an open socket.
    let r = unsafe { libc::ioctl(fd, request, &mut n) };
    assert_eq!(r, 0, "ioctl: {}", std::io::Error::last_os_error());
    n
}

/// Many connections with a small request each waiting share the ring's buffers: the kernel
/// packs arrivals one after the other into a buffer (incremental consumption, kernel 6.12+),
/// so 600 of them (more than the ring's 128 buffers) neither run it dry nor make it low, and
/// each reader gets its own bytes. With whole buffers, the 97th arrival made the ring low.
#[test]
fn small_arrivals_of_many_connections_share_ring_buffers() {
    const MANY: usize = 600;
    const SMALL: usize = 100;
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    let client = std::thread::spawn(move || {
        (0..MANY)
            .map(|c| {
                let mut s = std::net::TcpStream::connect(addr).expect("connect");
                let data: Vec<u8> = (0..SMALL).map(|i| pattern(c, i)).collect();
                s.write_all(&data).expect("write");
                s
            })
            .collect::<Vec<_>>()
    });
    let (got, refused, stats) = run_on(driver, 1024, async move {
        let l = serve(l);
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..MANY {
            let (mut s, _) = l.accept().await.expect("accept");
            assert!(s.enable_multishot_recv(), "multishot refused on io_uring");
            // Arms the receive and waits until its arrival is queued, reading nothing.
            if !s.multishot_ready().await {
                refused += 1;
            }
            held.push(s);
        }
        let stats = monoio::net::tcp::multishot_stats();
        let mut got = Vec::new();
        for mut s in held {
            let (r, buf) = s.read(Vec::with_capacity(4 * SMALL)).await;
            r.expect("read");
            got.push(buf);
        }
        (got, refused, stats)
    })
    .expect("runtime");
    drop(client.join().expect("client thread"));
    assert!(
        stats.incremental,
        "the kernel refused an incrementally consumed buffer ring (IOU_PBUF_RING_INC, \
         kernel 6.12+): {stats:?}"
    );
    assert_eq!(refused, 0, "waits refused for a low ring: {stats:?}");
    assert_eq!((stats.starved, stats.plain), (0, 0), "{stats:?}");
    // Accept order is connection order here (one client connecting in turn).
    for (c, got) in got.iter().enumerate() {
        let want: Vec<u8> = (0..SMALL).map(|i| pattern(c, i)).collect();
        assert_eq!(got, &want, "connection {c}'s bytes");
    }
}

/// The registry of multishot receives gives a crowd's room back (`multishot_shrink`, issue
/// 25): after 1,500 connections with an armed receive closed, its table falls from the peak to
/// at most 1,024 entries and the freed entries' queues are freed; an entry still live (its
/// socket open, or its cancel not completed by the kernel) never moves, a live one at the top
/// keeps the table at its height, and a new socket takes the lowest free entry, so the top
/// empties.
#[test]
fn the_receive_registry_gives_a_crowds_room_back_and_moves_no_live_entry() {
    const CROWD: usize = 1500;
    const KEPT: usize = 10;
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    run_on(driver, 1024, async move {
        use monoio::io::AsyncWriteRentExt;
        use monoio::net::tcp::{multishot_registry, multishot_shrink};
        let l = &serve(l);
        // A pair with a multishot receive armed on its accepted end and one byte read through
        // it (so its queue was allocated).
        let pair = || async move {
            let mut c = TcpStream::connect(addr).await.expect("connect");
            let (mut s, _) = l.accept().await.expect("accept");
            assert!(s.enable_multishot_recv(), "multishot refused on io_uring");
            let (r, _) = c.write_all(b"x").await;
            r.expect("write");
            assert!(s.multishot_ready().await, "wait refused");
            let (r, buf) = s.read(Vec::with_capacity(8)).await;
            assert_eq!((r.expect("read"), &buf[..]), (1, &b"x"[..]));
            (c, s)
        };
        // Each kept pair's bytes still reach their reader through its entry.
        async fn echo_through(pairs: &mut [(TcpStream, TcpStream)], what: &'static [u8]) {
            for (c, s) in pairs.iter_mut() {
                let (r, _) = c.write_all(what).await;
                r.expect("write");
                let (r, buf) = s.read(Vec::with_capacity(64)).await;
                assert_eq!((r.expect("read"), &buf[..]), (what.len(), what));
            }
        }
        // Until the kernel completed every cancel (the entries of closed sockets freed).
        let settle = move |live: usize| async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while multishot_registry().live != live {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{:?}",
                    multishot_registry()
                );
                monoio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        let mut pairs = Vec::with_capacity(CROWD);
        for _ in 0..CROWD {
            pairs.push(pair().await);
        }
        let peak = multishot_registry();
        assert_eq!((peak.live, peak.slots), (CROWD, CROWD), "{peak:?}");
        let mut top = pairs.pop().expect("the top pair");
        pairs.truncate(KEPT);
        // The closed receives' cancels are not completed yet: nothing may move or go.
        multishot_shrink();
        let r = multishot_registry();
        assert_eq!(
            (r.live, r.slots, r.capacity),
            (CROWD, CROWD, peak.capacity),
            "{r:?}"
        );
        settle(KEPT + 1).await;
        // A new socket takes the lowest free entry (KEPT), not one near the top.
        let newcomer = pair().await;
        multishot_shrink();
        let r = multishot_registry();
        // The live top entry holds the table's height; the free entries' queues are gone.
        assert_eq!((r.live, r.slots, r.queues), (KEPT + 2, CROWD, 0), "{r:?}");
        echo_through(&mut pairs, b"kept, after a shrink").await;
        echo_through(std::slice::from_mut(&mut top), b"the top, after a shrink").await;
        drop(top);
        settle(KEPT + 1).await;
        multishot_shrink();
        let r = multishot_registry();
        assert_eq!((r.live, r.slots), (KEPT + 1, KEPT + 1), "{r:?}");
        assert!(
            r.capacity <= 1024,
            "the table kept its peak room: {r:?} (peak {peak:?})"
        );
        pairs.push(newcomer);
        echo_through(&mut pairs, b"kept, after the top went").await;
        // It grows again as before.
        for _ in 0..20 {
            pairs.push(pair().await);
        }
        let r = multishot_registry();
        assert_eq!((r.live, r.slots), (KEPT + 21, KEPT + 21), "{r:?}");
    })
    .expect("runtime");
}

/// `read_queued` reads what the multishot receive already holds at once, with no future:
/// nothing when nothing arrived (the buffer comes back), the bytes once a wait saw them come
/// (a buffer smaller than the arrival stops inside it, and the next read goes on from there),
/// then nothing again, and the end of the stream as 0. Without a multishot receive (before
/// one is enabled, or on the epoll driver) it never reads.
#[test]
fn a_read_of_what_the_receive_holds_completes_at_once() {
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    let (go_tx, client) = scripted_client(addr);
    run_on(driver, 64, async move {
        let (mut s, _) = serve(l).accept().await.expect("accept");
        let buf = s
            .read_queued(Vec::with_capacity(64))
            .expect_err("a read at once without a multishot receive");
        assert!(s.enable_multishot_recv());
        let buf = s.read_queued(buf).expect_err("a read at once of nothing");
        assert_eq!(buf.capacity(), 64, "the buffer comes back as it went");
        go_tx.send(b"GET / HTTP/1.1\r\n\r\n").expect("client");
        assert!(s.multishot_ready().await, "a wait with bytes arrived");
        let (r, got) = s.read_queued(Vec::with_capacity(4)).expect("arrived");
        assert_eq!(r.expect("read"), 4);
        assert_eq!(got, b"GET ");
        let (r, got) = s.read_queued(buf).expect("the rest of the arrival");
        assert_eq!(r.expect("read"), 14);
        assert_eq!(got, b"/ HTTP/1.1\r\n\r\n");
        let buf = s
            .read_queued(Vec::with_capacity(64))
            .expect_err("everything was read");
        drop(go_tx);
        assert!(s.multishot_ready().await, "a wait with the end arrived");
        let (r, _) = s.read_queued(buf).expect("the end arrived");
        assert_eq!(r.expect("read"), 0, "the end reads as 0");
    })
    .expect("runtime");
    client.join().expect("client thread");
    on_epoll_after_bytes(|mut s| async move {
        let (r, buf) = s.read(Vec::with_capacity(1)).await;
        assert_eq!(r.expect("read"), 1, "{buf:?}");
        s.read_queued(Vec::with_capacity(64))
            .expect_err("a read at once on the epoll driver");
    });
}

/// On the epoll driver, where no multishot receive can be enabled, `check` runs on a
/// server stream whose client sent `epoll` and closed.
fn on_epoll_after_bytes<F: std::future::Future<Output = ()>>(check: impl FnOnce(TcpStream) -> F) {
    let (l, addr) = listener();
    let (go_tx, client) = scripted_client(addr);
    run_on(DriverKind::Epoll, 64, async move {
        let (mut s, _) = serve(l).accept().await.expect("accept");
        assert!(!s.enable_multishot_recv(), "multishot on the epoll driver");
        go_tx.send(b"epoll").expect("client");
        drop(go_tx);
        check(s).await;
    })
    .expect("runtime");
    client.join().expect("client thread");
}

/// `read_queued` on a stream that waits with single receives (`enable_ready_recv`, a
/// connection's first request): what one wait took reads at once, every byte once; bytes
/// and the end queued together read as the bytes, then 0.
#[test]
fn a_read_at_once_after_a_single_receive_wait() {
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    let (go_tx, client) = scripted_client(addr);
    run_on(driver, 64, async move {
        let (mut s, _) = serve(l).accept().await.expect("accept");
        assert!(s.enable_ready_recv());
        go_tx.send(b"first").expect("client");
        assert!(s.multishot_ready().await, "a wait with bytes arrived");
        let (r, got) = s.read_queued(Vec::with_capacity(64)).expect("arrived");
        assert_eq!(r.expect("read"), 5);
        assert_eq!(got, b"first");
        assert!(s.enable_multishot_recv());
        go_tx.send(b"second").expect("client");
        drop(go_tx);
        let mut got = Vec::new();
        loop {
            assert!(
                s.multishot_ready().await,
                "a wait with bytes or the end arrived"
            );
            let (r, buf) = s.read_queued(Vec::with_capacity(64)).expect("arrived");
            match r.expect("read") {
                0 => break,
                _ => got.extend_from_slice(&buf),
            }
        }
        assert_eq!(got, b"second");
        s.read_queued(Vec::with_capacity(64))
            .expect_err("nothing after the end");
    })
    .expect("runtime");
    client.join().expect("client thread");
}

/// `discard` drops up to its count of what arrived without copying it, and a read goes on
/// after the last byte dropped (inside an arrival too); the end of the stream is `Ok(0)`.
/// Without a multishot receive (before one is enabled, or on the epoll driver) it does
/// nothing and says so (`None`: read instead).
#[test]
fn a_discard_drops_bytes_unread_and_a_read_goes_on_after_them() {
    let Some(driver) = fast_uring() else { return };
    let (l, addr) = listener();
    let (go_tx, client) = scripted_client(addr);
    run_on(driver, 64, async move {
        let (mut s, _) = serve(l).accept().await.expect("accept");
        assert!(s.discard(4).await.is_none(), "without a multishot receive");
        assert!(s.enable_multishot_recv());
        go_tx.send(b"0123456789ABCDEF").expect("client");
        let dropped = s.discard(10).await.expect("a multishot receive");
        assert_eq!(dropped.expect("discard"), 10);
        let (r, got) = s.read(Vec::with_capacity(64)).await;
        assert_eq!(r.expect("read"), 6);
        assert_eq!(got, b"ABCDEF", "the read goes on after the bytes dropped");
        go_tx.send(b"tail").expect("client");
        let dropped = s.discard(64).await.expect("a multishot receive");
        assert_eq!(dropped.expect("discard"), 4, "no more than arrived");
        drop(go_tx);
        let end = s.discard(64).await.expect("a multishot receive");
        assert_eq!(end.expect("discard"), 0, "the end of the stream");
    })
    .expect("runtime");
    client.join().expect("client thread");
    on_epoll_after_bytes(|mut s| async move {
        assert!(
            s.discard(4).await.is_none(),
            "a discard on the epoll driver"
        );
        let (r, got) = s.read(Vec::with_capacity(64)).await;
        assert_eq!(
            (r.expect("read"), &got[..]),
            (5, &b"epoll"[..]),
            "nothing dropped"
        );
    });
}
