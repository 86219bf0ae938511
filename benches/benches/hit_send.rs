//! How a cache hit's body should leave: `write` from the worker's memory (what the store keeps
//! now, `Bytes`) or `sendfile` from a per-worker memfd (what nginx gets from the page cache).
//! Measured as the sending thread's CPU time (utime + stime, RUSAGE_THREAD) per response over
//! loopback TCP, with a reader thread draining the other end; rounds interleave the two ways
//! and the summary is the median with the [min-max] spread.
//!
//! Run: `cargo bench -p benches --bench hit_send` (ROUNDS=5 and SENDS=20000 by default).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// CPU time of this thread, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// A connected pair over 127.0.0.1 with a thread reading and discarding everything.
fn sink() -> TcpStream {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let tx = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (mut rx, _) = l.accept().expect("accept");
    tx.set_nodelay(true).expect("nodelay");
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 << 10];
        while matches!(rx.read(&mut buf), Ok(n) if n > 0) {}
    });
    tx
}

fn memfd_with(body: &[u8]) -> OwnedFd {
    // SAFETY: memfd_create with a NUL-terminated name; the fd is owned from here on.
    let fd = unsafe { libc::memfd_create(c"cache".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` was just created and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(fd.try_clone().expect("dup"));
    f.write_all(body).expect("fill memfd");
    fd
}

/// CPU ns per response: `head` then the body, `sends` times.
fn run(way: &str, head: &[u8], body: &[u8], memfd: &OwnedFd, sends: usize) -> f64 {
    let mut s = sink();
    let t0 = thread_cpu_ns();
    for _ in 0..sends {
        match way {
            "write" => {
                // One writev of head and body, as the hit path would send it.
                let iov = [std::io::IoSlice::new(head), std::io::IoSlice::new(body)];
                let mut left = head.len() + body.len();
                let mut sent = 0;
                while left > 0 {
                    let n = if sent == 0 {
                        s.write_vectored(&iov).expect("writev")
                    } else {
                        let all: Vec<u8> = [head, body].concat();
                        s.write(&all[sent..]).expect("write")
                    };
                    sent += n;
                    left -= n;
                }
            }
            _ => {
                // The head from memory with MSG_MORE, the body by sendfile from the memfd.
                // SAFETY: valid fd and buffer; the length is the buffer's.
                let n = unsafe {
                    libc::send(
                        s.as_raw_fd(),
                        head.as_ptr().cast(),
                        head.len(),
                        libc::MSG_MORE,
                    )
                };
                assert_eq!(n as usize, head.len());
                let mut off: libc::off_t = 0;
                while (off as usize) < body.len() {
                    // SAFETY: both fds are open; `off` is a valid in/out offset.
                    let n = unsafe {
                        libc::sendfile(
                            s.as_raw_fd(),
                            memfd.as_raw_fd(),
                            &mut off,
                            body.len() - off as usize,
                        )
                    };
                    assert!(n > 0, "sendfile: {}", std::io::Error::last_os_error());
                }
            }
        }
    }
    let ns = thread_cpu_ns() - t0;
    drop(s);
    ns as f64 / sends as f64
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes --bench; `cargo test` passes nothing we need to run for.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rounds = env("ROUNDS", 5);
    let sends = env("SENDS", 20_000);
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 32768\r\nAge: 3\r\nX-Cache: HIT\r\n\r\n";
    for size in [64usize, 32 << 10] {
        let body = vec![b'x'; size];
        let memfd = memfd_with(&body);
        let mut ratios = Vec::new();
        let mut per = [Vec::new(), Vec::new()];
        for r in 0..rounds {
            let order = if r % 2 == 0 {
                ["write", "sendfile"]
            } else {
                ["sendfile", "write"]
            };
            let mut got = [0.0; 2];
            for way in order {
                let i = usize::from(way == "sendfile");
                got[i] = run(way, head, &body, &memfd, sends);
                per[i].push(got[i]);
            }
            ratios.push(got[1] / got[0]);
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0], v[v.len() - 1])
        };
        let (w, wl, wh) = med(&mut per[0]);
        let (f, fl, fh) = med(&mut per[1]);
        let (q, ql, qh) = med(&mut ratios);
        println!(
            "hit body {size:>5} B: writev {:.2} µs [{:.2}-{:.2}], send+sendfile(memfd) {:.2} µs [{:.2}-{:.2}], sendfile/writev {q:.2} [{ql:.2}-{qh:.2}] ({rounds} rounds x {sends})",
            w / 1e3, wl / 1e3, wh / 1e3, f / 1e3, fl / 1e3, fh / 1e3
        );
    }
}
