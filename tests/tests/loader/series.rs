//! `--series FILE`: a line per second whose counts add up to the report's totals exactly,
//! over workers, failures and the drain of a timed run.

use crate::{opts, run};
use std::collections::HashMap;
use std::time::Duration;

/// The lines of a series file as maps of column to value (CSV with its header, or JSON lines).
fn read_series(path: &std::path::Path) -> Vec<HashMap<String, f64>> {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "jsonl") {
        return text
            .lines()
            .map(|l| serde_json::from_str::<HashMap<String, f64>>(l).expect("a JSON object"))
            .collect();
    }
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    assert_eq!(header, loader::series::COLUMNS);
    lines
        .map(|l| {
            header
                .iter()
                .zip(l.split(','))
                .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
                .collect()
        })
        .collect()
}

fn sum(lines: &[HashMap<String, f64>], k: &str) -> u64 {
    lines.iter().map(|l| l[k] as u64).sum()
}

/// Two workers, open loop for 1.3 s, a quarter of the requests dropped by the origin: the
/// seconds' sent, completed and failures add up to the report's, and the last, partial second
/// ends after the drain.
#[test]
fn seconds_add_up_to_the_report() {
    let o = tests::capturing_origin();
    let ok = o.url("/ok?size=8");
    let urls = [ok.clone(), ok.clone(), ok, o.url("/drop?drop")];
    let dir = tests::temp_dir("series");
    for name in ["s.csv", "s.jsonl"] {
        let path = dir.join(name);
        let mut opt = opts(&urls, 4);
        opt.runtime.workers = 2;
        opt.rate = Some(200.0);
        opt.duration = Some(Duration::from_millis(1300));
        opt.series = Some(path.clone());
        let r = run(&opt);
        let t = &r.totals;
        let lines = read_series(&path);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["elapsed_s"], 1.0);
        assert!(lines[1]["elapsed_s"] > 1.2, "{lines:?}");
        assert_eq!(sum(&lines, "sent"), t.attempts, "{t:?}");
        assert_eq!(sum(&lines, "completed"), t.completed, "{t:?}");
        assert_eq!(sum(&lines, "failed"), t.failures.not_completed(), "{t:?}");
        assert_eq!(sum(&lines, "read"), t.failures.read, "{t:?}");
        assert_eq!(sum(&lines, "unanswered"), t.failures.unanswered, "{t:?}");
        assert!(t.failures.read > 0 && t.completed > 0, "{t:?}");
        assert!(
            lines[0]["p99_ms"] > 0.0 && lines[0]["rate"] > 0.0,
            "{lines:?}"
        );
    }
}

/// The options a command line gives, as the binary builds them.
fn cli_options(args: &[&str]) -> loader::RunOptions {
    use clap::Parser;
    let argv = std::iter::once("loader").chain(args.iter().copied());
    let c = loader::cli::Cli::try_parse_from(argv).expect("parses");
    let mut o = c.load.to_options(&c.urls).expect("valid");
    o.runtime.pin = false;
    o.quiet = true;
    o
}

/// `--stages 400ms:250,400ms:250,400ms:0`: 0 -> 250 req/s, 250, 250 -> 0: 50 + 100 + 50
/// requests due in 1.2 s, open loop. The server's arrival times show the ramp (the middle
/// third busiest), the counts are the origin's, and the series has the ramp's seconds.
#[test]
fn stages_ramp_the_rate() {
    let arrivals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = arrivals.clone();
    let server = crate::hostile::Scripted::start(move |_, _| {
        seen.lock().unwrap().push(std::time::Instant::now());
        crate::hostile::Act::Answer(crate::hostile::ok("ok"))
    });
    let dir = tests::temp_dir("stages");
    let series = dir.join("s.csv");
    let o = cli_options(&[
        "--threads",
        "1",
        "-c",
        "4",
        "--stages",
        "400ms:250,400ms:250,400ms:0",
        "--series",
        series.to_str().unwrap(),
        &server.url,
    ]);
    assert_eq!(o.duration, Some(Duration::from_millis(1200)));
    let r = run(&o);
    let t = &r.totals;
    assert_eq!(t.completed, server.logged(), "{t:?}");
    assert_eq!(t.failures.total(), 0, "{t:?}");
    // A send due just before the end may miss it on a busy machine; none beyond the ramp.
    assert!((190..=200).contains(&t.attempts), "{t:?}");
    let times = arrivals.lock().unwrap().clone();
    let first = times[0];
    let third = |i: u32| {
        let (from, to) = (
            Duration::from_millis(400) * i,
            Duration::from_millis(400) * (i + 1),
        );
        times
            .iter()
            .filter(|t| (from..to).contains(&t.duration_since(first)))
            .count()
    };
    let (a, b, c) = (third(0), third(1), third(2));
    assert!(b > a && b > c, "arrivals per 400 ms: {a} {b} {c}");
    let lines = read_series(&series);
    assert_eq!(sum(&lines, "sent"), t.attempts);
    assert_eq!(sum(&lines, "completed"), t.completed);
    // Each shard ramps through its part of every target.
    let o = cli_options(&[
        "--threads",
        "1",
        "-c",
        "2",
        "--stages",
        "400ms:250,400ms:250,400ms:0",
        "--shard",
        "1/2",
        &server.url,
    ]);
    let r = run(&o);
    assert!((95..=100).contains(&r.totals.attempts), "{:?}", r.totals);
}
