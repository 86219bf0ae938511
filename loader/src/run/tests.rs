use super::*;
use crate::stats::record;
use crate::Target;

#[test]
fn shares_split_connections_and_requests_exactly() {
    let got = shares(10, 3, Some(100), 0);
    let want = [(0..4, 40, 0), (4..7, 30, 40), (7..10, 30, 70)];
    let want: Vec<Share> = want
        .into_iter()
        .map(|(slots, q, base)| Share {
            slots,
            quota: Some(q),
            base,
        })
        .collect();
    assert_eq!(got, want);
    // 7 requests over 3 connections: 3, 2, 2; worker 0 has two connections.
    let got = shares(3, 2, Some(7), 0);
    assert_eq!(
        (got[0].quota, got[1].quota, got[1].base),
        (Some(5), Some(2), 5)
    );
    // Without -n: no quota, every walk starts at 0.
    assert!(shares(4, 2, None, 0)
        .iter()
        .all(|s| s.quota.is_none() && s.base == 0));
    // A shard's walks start at its place in the whole load's: with -n after the parts of the
    // shards before it, with -d (no quota) every worker's at the shard's first.
    let got = shares(3, 2, Some(7), 40);
    assert_eq!((got[0].base, got[1].base), (40, 45));
    assert!(shares(4, 2, None, 2).iter().all(|s| s.base == 2));
    for (c, w, n) in [(1, 1, 0), (5, 2, 1), (7, 3, 1000), (64, 2, 63), (3, 3, 2)] {
        let s = shares(c, w, Some(n), 0);
        assert_eq!(
            s.iter().map(|s| s.quota.unwrap()).sum::<u64>(),
            n,
            "{c} {w} {n}"
        );
        assert_eq!(s.iter().map(|s| s.slots.len()).sum::<usize>(), c);
        for pair in s.windows(2) {
            assert_eq!(pair[0].slots.end, pair[1].slots.start);
            assert_eq!(pair[0].base + pair[0].quota.unwrap(), pair[1].base);
        }
    }
}

fn measured(url: usize, status: u16, latency_us: u64, source: Option<usize>) -> Measurements {
    let mut m = Measurements::new(2, 3);
    let c = &mut m.urls[url].counts;
    c.attempts += 1;
    c.completed += 1;
    c.count_status(status);
    m.urls[url].record(latency_us);
    record(&mut m.hist.total, latency_us);
    m.connections_opened = 1;
    if let Some(i) = source {
        m.sources_used[i] = true;
    }
    m
}

#[test]
fn workers_figures_add_up() {
    let t0 = Instant::now();
    let done = vec![
        WorkerDone {
            stats: measured(0, 404, 100, Some(0)),
            ended: t0 + Duration::from_millis(5),
            drain: Some(Drain {
                in_flight: 2,
                took: Duration::from_millis(3),
            }),
        },
        WorkerDone {
            stats: measured(0, 200, 300, Some(2)),
            ended: t0 + Duration::from_millis(9),
            drain: Some(Drain {
                in_flight: 1,
                took: Duration::from_millis(7),
            }),
        },
    ];
    let s = sum_workers(&done, 2, 3, t0);
    assert_eq!(s.urls[0].counts.completed, 2);
    assert_eq!(s.urls[1].counts.completed, 0);
    assert_eq!(
        (s.urls[0].latency.min_us, s.urls[0].latency.max_us),
        (100, 300)
    );
    assert_eq!(s.hist.total.len(), 2);
    assert_eq!(s.connections_opened, 2);
    assert_eq!(s.sources_used, vec![true, false, true]);
    assert_eq!(s.ended, t0 + Duration::from_millis(9));
    // In flight summed, the longest drain.
    let want = Drain {
        in_flight: 3,
        took: Duration::from_millis(7),
    };
    assert_eq!(s.drain, Some(want));
    assert_eq!(s.urls[0].histogram().len(), 2);
    // No worker: the run ends where the measurement started.
    assert_eq!(sum_workers(&[], 2, 0, t0).ended, t0);

    let urls = ["http://127.0.0.1:1/a", "http://127.0.0.1:1/b"];
    let targets = urls.iter().map(|u| Target::parse(u).unwrap()).collect();
    let opts = RunOptions::new(targets);
    let plan = build_requests(&opts);
    let facts = RunFacts {
        measure_start: t0,
        started: SystemTime::UNIX_EPOCH,
        driver: DriverKind::Epoll,
        workers: 2,
        pinning: String::new(),
        interrupted: false,
    };
    let r = merge(&opts, &plan, s, facts);
    assert_eq!(r.elapsed, Duration::from_millis(9));
    assert_eq!(r.totals.completed, 2);
    assert_eq!(r.urls[0].counts.status, vec![(200, 1), (404, 1)]);
    assert_eq!(r.urls[1].path, "/b");
    assert_eq!(r.source_addresses, 2);
    // Closed loop: the uncorrected histogram is the corrected one.
    assert_eq!(r.hist.uncorrected.len(), 2);
}
