//! Round trip through monoio's `sync` feature: a queue whose sender wakes the worker task's
//! waker from another thread (monoio forwards the waker to the owner thread and unparks it
//! through its eventfd). Compare with `cargo bench -p benches --bench inbox` (ask_all with one
//! worker): same message, same reply channel.
//!
//! Run: `cargo run --release --manifest-path benches/sync-inbox/Cargo.toml -- [epoll]`

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Slot {
    queue: VecDeque<mpsc::Sender<u64>>,
    waker: Option<Waker>,
}

fn main() {
    let epoll = std::env::args().any(|a| a == "epoll");
    let shared: Arc<Mutex<Slot>> = Arc::default();
    let s = shared.clone();
    // Detached: the process exits when the measurement is done.
    std::thread::spawn(move || {
        let body = async move {
            let mut n = 0u64;
            loop {
                let reply = poll_fn(|cx| {
                    let mut slot = s.lock().unwrap();
                    match slot.queue.pop_front() {
                        Some(r) => Poll::Ready(r),
                        None => {
                            slot.waker = Some(cx.waker().clone());
                            Poll::Pending
                        }
                    }
                })
                .await;
                n += 1;
                if reply.send(n).is_err() {
                    return;
                }
            }
        };
        if epoll {
            monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
                .build()
                .unwrap()
                .block_on(body)
        } else {
            monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
                .build()
                .unwrap()
                .block_on(body)
        }
    });
    let round = || {
        let (tx, rx) = mpsc::channel();
        let waker = {
            let mut slot = shared.lock().unwrap();
            slot.queue.push_back(tx);
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        rx.recv_timeout(Duration::from_secs(10)).expect("answer")
    };
    for _ in 0..10_000 {
        round();
    }
    let mut samples = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..50_000 {
            round();
        }
        samples.push(t.elapsed().as_nanos() as f64 / 50_000.0 / 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "monoio sync-feature round trip ({}): median {:.2} µs [min {:.2}, max {:.2}] over 7 x 50,000",
        if epoll { "epoll" } else { "io_uring" },
        samples[3],
        samples[0],
        samples[6]
    );
    std::process::exit(0);
}
