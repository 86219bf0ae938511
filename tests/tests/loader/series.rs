//! Load shaped over time and over requests: `--series FILE` (a line per second whose counts
//! add up to the report's totals exactly, over workers, failures and the drain of a timed
//! run), `--stages` (a ramping open-loop rate) and `--targets` (vegeta's request files).

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
    // Each shard sends its own half of the ramp's requests: 100 each, 200 together.
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
    let o2 = cli_options(&[
        "--threads",
        "1",
        "-c",
        "2",
        "--stages",
        "400ms:250,400ms:250,400ms:0",
        "--shard",
        "2/2",
        &server.url,
    ]);
    let r2 = run(&o2);
    let both = r.totals.attempts + r2.totals.attempts;
    assert!((190..=200).contains(&both), "{both}");
}

/// `--stages` with `--warmup`: the measured run is the whole ramp, from its start. The ramp's
/// clock started with the warm-up, so the warm-up used up the ramp's first part: 400ms:250,
/// 400ms:250 holds 150 requests and 100 were measured; a warm-up longer than the ramp left
/// nothing to measure (exit 1, no explanation).
#[test]
fn stages_with_warmup_measure_the_whole_ramp() {
    let o = tests::origin();
    let url = o.url("/");
    for (stages, warmup, want) in [
        ("400ms:250,400ms:250", "400ms", 145..=150),
        ("200ms:50", "400ms", 4..=5),
    ] {
        let args = ["--threads", "1", "-c", "4", "--stages", stages];
        let o = cli_options(&[&args[..], &["--warmup", warmup, &url]].concat());
        let r = run(&o);
        let t = &r.totals;
        assert_eq!(t.failures.total(), 0, "{stages}: {t:?}");
        assert!(
            want.contains(&t.attempts),
            "{stages} --warmup {warmup}: {t:?}"
        );
        assert_eq!(t.completed, t.attempts, "{stages}: {t:?}");
    }
}

/// `--targets` in vegeta's HTTP format: each request with its own method, headers and body,
/// taken round-robin (exact shares of -n) or at random; the origin's count is the report's.
#[test]
fn targets_file_requests_round_robin_and_random() {
    let o = tests::capturing_origin();
    let dir = tests::temp_dir("targets");
    let body = dir.join("thing.json");
    std::fs::write(&body, br#"{"thing":1}"#).unwrap();
    let file = dir.join("targets.txt");
    let text = format!(
        "GET {}\nX-Account-ID: 8675309\n\nPOST {}\nContent-Type: application/json\n@{}\n\n\
         # the last one\nDELETE {}\n",
        o.url("/dragon?item=ball"),
        o.url("/things"),
        body.display(),
        o.url("/remove")
    );
    std::fs::write(&file, text).unwrap();
    let f = file.to_str().unwrap();
    let opt = cli_options(&["--threads", "1", "-n", "30", "-c", "3", "--targets", f]);
    let r = run(&opt);
    assert_eq!(
        (r.totals.completed, r.totals.failures.total()),
        (30, 0),
        "{:?}",
        r.totals
    );
    let got = o.captured();
    let count = |p: &[u8]| got.iter().filter(|r| r.starts_with(p)).count();
    assert_eq!(count(b"GET /dragon?item=ball "), 10);
    assert_eq!(count(b"POST /things "), 10);
    assert_eq!(count(b"DELETE /remove "), 10);
    let get = got.iter().find(|r| r.starts_with(b"GET")).unwrap();
    assert!(tests::text(get).contains("\r\nX-Account-ID: 8675309\r\n"));
    let post = tests::text(got.iter().find(|r| r.starts_with(b"POST")).unwrap());
    assert!(
        post.contains("\r\nContent-Type: application/json\r\n"),
        "{post}"
    );
    assert!(post.contains("\r\nContent-Length: 11\r\n"), "{post}");
    // At random: every request is taken, the shares add up to -n.
    let before = o.requests();
    let opt = cli_options(&[
        "--threads",
        "1",
        "-n",
        "90",
        "-c",
        "3",
        "--targets",
        f,
        "--targets-order",
        "random",
    ]);
    let r = run(&opt);
    assert_eq!(r.totals.completed, 90);
    assert_eq!(o.requests() - before, 90);
    let shares: Vec<u64> = r.urls.iter().map(|u| u.counts.attempts).collect();
    assert_eq!(shares.iter().sum::<u64>(), 90);
    assert!(shares.iter().all(|&n| n > 0), "{shares:?}");
}
