//! `--steer cpu`: a connection is served by the worker pinned to the CPU that handled its
//! first packet. Over loopback that is the connecting thread's CPU, so a client thread pinned
//! to a worker's CPU reaches that worker and no other, for each worker in turn. Read from the
//! proxy's per-worker accept counters.

use std::time::Duration;
use tests::inproc::Client;
use tests::strict::{proxy, wait_for};

const EACH: u64 = 12;

fn accepted(p: &proxy::Running) -> Vec<u64> {
    p.stats().iter().map(|s| s.connections.get()).collect()
}

#[test]
fn each_connection_reaches_the_worker_on_the_cpu_it_came_from() {
    let origin = tests::strict::capturing_origin();
    // The tests' proxies run unpinned (`--no-pin`); this one is pinned (`on`: whatever a
    // cgroup CPU quota says).
    let mut cfg = tests::proxy_config(&[origin.addr()], &["--workers", "2", "--steer", "cpu"]);
    cfg.runtime.set_pin_mode(shared::runtime::PinMode::On);
    let p = proxy::start(cfg).expect("proxy starts");
    let addr = p.listen_addrs()[0];
    // This needs two CPUs in the CPU set (the proxy pins 2 workers only then): fail loudly
    // where they are missing rather than pass without steering anything.
    let cores: Vec<usize> = p
        .cores()
        .iter()
        .map(|c| c.expect("2 workers pinned (steering by CPU needs 2 CPUs in the CPU set)"))
        .collect();
    assert_eq!(cores.len(), 2);
    for (worker, &cpu) in cores.iter().enumerate() {
        let before = accepted(&p);
        std::thread::spawn(move || {
            assert!(shared::pinning::pin_this_thread(cpu), "pin to CPU {cpu}");
            for _ in 0..EACH {
                let mut c = Client::connect(addr);
                assert_eq!(c.get("/").status, 200);
            }
        })
        .join()
        .unwrap();
        let mut want = before.clone();
        want[worker] += EACH;
        // Each connection was accepted before its answer came: the counts are final now.
        assert_eq!(
            accepted(&p),
            want,
            "{EACH} connections from CPU {cpu} all reach worker {worker} (before: {before:?})"
        );
    }
    // The kernel's hash (the default) spreads one CPU's connections over both workers.
    let (p, addr) = proxy(&[origin.addr()], &["--workers", "2"]);
    let cpu = cores[0];
    std::thread::spawn(move || {
        assert!(shared::pinning::pin_this_thread(cpu), "pin to CPU {cpu}");
        for _ in 0..40 {
            assert_eq!(Client::connect(addr).get("/").status, 200);
        }
    })
    .join()
    .unwrap();
    wait_for(Duration::from_secs(5), "40 accepts", || {
        accepted(&p).iter().sum::<u64>() == 40
    });
    let spread = accepted(&p);
    assert!(spread.iter().all(|&n| n > 0), "{spread:?}");
}
