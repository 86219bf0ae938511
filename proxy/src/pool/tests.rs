//! A pooled connection counts as watched only while its multishot receive is in the kernel:
//! one the kernel ended for want of ring buffers, or one armed only now (its submission
//! queued, the worker not in the kernel since), is peeked at when taken. Otherwise a stray
//! response sent on it while it was idle is the next client's answer (helper review of
//! session 45).

use super::*;
use crate::config::{Balance, Server, UpstreamGroup};
use monoio::io::AsyncReadRent;
use shared::runtime::{drivers_here, spawn_workers, DriverKind, RuntimeConfig};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

const STRAY: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nSTRAY";

/// Deadline of every wait for an event here.
const WAIT: Duration = Duration::from_secs(10);

fn group() -> UpstreamGroup {
    UpstreamGroup {
        name: "g".into(),
        servers: vec![Server {
            name: "s".into(),
            host: "s".into(),
            addrs: vec![([127, 0, 0, 1], 9).into()],
            weight: 1,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            max_conns: 0,
        }]
        .into(),
        balance: Balance::RoundRobin,
        hash_key: Default::default(),
        resolve: None,
        keepalive: 1024,
        // Far beyond the test: only the look at `take` can catch the stray bytes.
        keepalive_timeout: Duration::from_secs(600),
        keepalive_requests: 100,
        keepalive_check: Duration::from_secs(300),
        health: None,
        tls: None,
        proxy_protocol: None,
    }
}

/// A plain upstream connection that carried one request, and its origin's end.
async fn pair(l: &TcpListener) -> (Upstream, TcpStream) {
    let ours = monoio::net::TcpStream::connect(l.local_addr().unwrap())
        .await
        .expect("connect");
    let (peer, _) = l.accept().expect("accept");
    let up = Upstream {
        stream: Stream::Plain(ours),
        requests: 1,
        reused: false,
        splices: false,
        nonblocking: false,
    };
    (up, peer)
}

/// Bytes written on `s` its peer's kernel has not acknowledged (SIOCOUTQ).
fn unacked(s: &TcpStream) -> libc::c_int {
    let mut n: libc::c_int = 0;
    // SAFETY: an open socket and a c_int out pointer, what TIOCOUTQ (SIOCOUTQ) writes.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    assert_eq!(rc, 0, "ioctl(SIOCOUTQ)");
    n
}

/// Run the worker (io_uring with multishot receives) until `cond` holds, entering the
/// kernel between looks; false at the deadline.
async fn until(mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + WAIT;
    while !cond() {
        if Instant::now() > end {
            return false;
        }
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

/// What `take` gave: nothing, or the connection and what its next read brings.
async fn taken(pool: &mut ServerPool) -> String {
    match pool.take(Instant::now()) {
        None => "not reused".to_string(),
        Some(mut up) => {
            let (r, buf) = up.stream.read(vec![0u8; 256]).await;
            let n = r.unwrap_or(0);
            format!(
                "reused; its next read: {:?}",
                String::from_utf8_lossy(&buf[..n])
            )
        }
    }
}

/// `test` on one worker with multishot receives; what it says.
fn on_a_worker<F: std::future::Future<Output = String> + 'static>(test: fn() -> F) -> String {
    assert!(
        drivers_here().contains(&DriverKind::UringFast),
        "this test needs io_uring with the fast flags (multishot receives)"
    );
    let cfg = RuntimeConfig {
        workers: 1,
        pin: false,
        pin_forced: false,
        multishot: true,
        ..RuntimeConfig::default()
    };
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let flag = shared::shutdown::ShutdownFlag::new();
    let w = spawn_workers(
        &cfg,
        DriverKind::UringFast,
        flag,
        "pool-test",
        vec![tx],
        move |_, tx| async move {
            let _ = tx.send(test().await);
        },
    )
    .expect("worker");
    let said = rx.recv_timeout(WAIT * 3).expect("the test's verdict");
    let _ = w.join();
    said
}

#[test]
fn a_watched_connection_whose_receive_the_kernel_ended_is_peeked_when_taken() {
    let said = on_a_worker(|| async {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let g = group();
        let mut pool = ServerPool::new(&g);
        let (up, mut peer) = pair(&l).await;
        pool.put(up, Instant::now());
        // Other pooled connections whose origins send more than the worker's ring holds:
        // nobody reads a pooled connection, so their receives take every buffer.
        let mut fillers_pool = ServerPool::new(&g);
        let mut fillers = Vec::new();
        for _ in 0..48 {
            let (f, fp) = pair(&l).await;
            fillers_pool.put(f, Instant::now());
            fp.set_nonblocking(true).unwrap();
            fillers.push(fp);
        }
        let starved = || monoio::net::tcp::multishot_stats().starved;
        let chunk = vec![b'x'; 256 * 1024];
        let drained = until(|| {
            for fp in &mut fillers {
                let _ = fp.write(&chunk);
            }
            starved() > 0
        })
        .await;
        if !drained {
            return "the ring never ran out of buffers".to_string();
        }
        // The stray response arrives with no buffer left: the kernel ends its receive.
        let before = starved();
        peer.write_all(STRAY).unwrap();
        if !until(|| starved() > before).await {
            return "the stray response's receive did not end".to_string();
        }
        let said = taken(&mut pool).await;
        drop(fillers_pool);
        said
    });
    assert_eq!(said, "not reused");
}

#[test]
fn a_connection_taken_before_its_new_receive_reached_the_kernel_is_peeked() {
    let said = on_a_worker(|| async {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut pool = ServerPool::new(&group());
        let (up, mut peer) = pair(&l).await;
        peer.write_all(STRAY).unwrap();
        // In our socket once acknowledged; the worker does not enter the kernel before
        // `take` (no await in between), so `put`'s new receive is not submitted yet.
        let end = Instant::now() + WAIT;
        while unacked(&peer) != 0 {
            if Instant::now() > end {
                return "the stray response never arrived".to_string();
            }
            std::thread::yield_now();
        }
        pool.put(up, Instant::now());
        taken(&mut pool).await
    });
    assert_eq!(said, "not reused");
}
