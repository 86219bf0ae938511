//! The workers' inbox (`shared::inbox`): the round trip of a message from this thread to a
//! worker and its answer back (`ask_all` with one and with two workers), and what an idle
//! worker costs (CPU time of the process while the workers sit on their inboxes).
//!
//! Run: `cargo bench -p benches --bench inbox`

use criterion::{criterion_group, criterion_main, Criterion};
use shared::inbox::{Post, Reply};
use shared::runtime::{select_driver, spawn_workers, DriverChoice, RuntimeConfig, Workers};
use shared::shutdown::ShutdownFlag;
use std::time::Duration;

enum Msg {
    Ping(Reply<u64>),
}

fn workers(n: usize, driver: DriverChoice) -> (Post<Msg>, Workers) {
    let cfg = RuntimeConfig {
        workers: n,
        pin: false,
        pin_forced: false,
        driver,
        entries: 256,
        multishot: true,
    };
    let kind = select_driver(&cfg).expect("driver");
    eprintln!("driver: {kind}");
    let post: Post<Msg> = Post::new(n).expect("post");
    let p = post.clone();
    let w = spawn_workers(
        &cfg,
        kind,
        ShutdownFlag::new(),
        "bench",
        vec![(); n],
        move |ctx, ()| {
            let post = p.clone();
            async move {
                let mut inbox = post.inbox(ctx.id).expect("inbox");
                let mut n = 0u64;
                while let Some(Msg::Ping(r)) = inbox.recv().await {
                    n += 1;
                    r.send(n);
                }
            }
        },
    )
    .expect("workers");
    (post, w)
}

/// utime + stime of this process, in microseconds.
fn cpu_us() -> u64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

/// The process's CPU over one second of idling.
fn idle_cpu_us() -> u64 {
    let t0 = cpu_us();
    std::thread::sleep(Duration::from_secs(1));
    cpu_us() - t0
}

/// Idle workers without an inbox: what the runtime and its shutdown tick cost alone.
fn baseline(n: usize, driver: DriverChoice) -> u64 {
    let cfg = RuntimeConfig {
        workers: n,
        pin: false,
        pin_forced: false,
        driver,
        entries: 256,
        multishot: true,
    };
    let kind = select_driver(&cfg).expect("driver");
    let flag = ShutdownFlag::new();
    let w = spawn_workers(
        &cfg,
        kind,
        flag.clone(),
        "idle",
        vec![(); n],
        |ctx, ()| async move { ctx.shutdown.wait().await },
    )
    .expect("workers");
    let used = idle_cpu_us();
    flag.trigger();
    w.join().expect("join");
    used
}

fn round_trip(c: &mut Criterion) {
    for (name, driver) in [
        ("io_uring", DriverChoice::Auto),
        ("epoll", DriverChoice::Epoll),
    ] {
        eprintln!(
            "idle without inbox ({name}, 2 workers): {} µs CPU in 1s",
            baseline(2, driver)
        );
    }
    let mut g = c.benchmark_group("inbox_round_trip");
    for (name, driver) in [
        ("io_uring", DriverChoice::Auto),
        ("epoll", DriverChoice::Epoll),
    ] {
        for n in [1usize, 2] {
            let (post, w) = workers(n, driver);
            g.bench_function(format!("{name}/{n}_workers"), |b| {
                b.iter(|| {
                    post.ask_all(|_, r| Msg::Ping(r), Duration::from_secs(10))
                        .expect("answers")
                })
            });
            // Idle: the workers park on their inboxes; the process's CPU over one second
            // (the shutdown watch's 50 ms tick included) is what idling costs.
            eprintln!(
                "idle with inbox ({name}, {n} workers): {} µs CPU in 1s",
                idle_cpu_us()
            );
            post.close_all();
            w.join().expect("join");
        }
    }
    g.finish();
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
