//! Load from many machines, merged exactly (issue 14): several loader processes on this
//! machine, each a shard (`--shard auto/N` with `JOB_COMPLETION_INDEX` set as a Kubernetes
//! Indexed Job sets it, through `scripts/k8s/local-shards.sh`), against one origin;
//! `loader merge` of their results; `--rate` split over 4 shards; `--hdr-log` read back with
//! the hdrhistogram crate's interval-log reader; the manifests in `scripts/k8s/` parsed as
//! YAML.

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use loader::json::decode_histogram;
use loader::RunOptions;
use serde_json::Value;
use shared::origin::{Origin, OriginConfig};
use shared::shutdown::ShutdownFlag;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn origin() -> Origin {
    Origin::start(OriginConfig {
        body_size: 64,
        ..OriginConfig::default()
    })
    .expect("origin")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("loader-dist-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn line_value<'a>(report: &'a str, label: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no '{label}' in:\n{report}"))
        .trim()
}

/// A percentile as the report and the JSON give it (ab's and wrk's rank, the top of its
/// bucket within the exact min and max): of the histogram `h`, whose values' exact min and
/// max are `min_max` (µs).
fn peer_percentile_ms(h: &Histogram<u64>, min_max: (u64, u64), p: f64) -> f64 {
    let sums = loader::stats::LatencySummary {
        count: h.len(),
        min_us: min_max.0,
        max_us: min_max.1,
        ..Default::default()
    };
    loader::figures::Times::new(h, &sums).percentile_us(p) as f64 / 1000.0
}

#[test]
fn local_shards_merge_to_the_origins_count_and_the_exact_percentiles() {
    let o = origin();
    let out = scratch("local");
    let run = Command::new("bash")
        .arg(root().join("scripts/k8s/local-shards.sh"))
        .args(["3", out.to_str().unwrap(), &o.url("/"), "--"])
        .args(["-n", "3001", "-c", "4", "--threads", "1"])
        .env("LOADER", tests::bin("loader"))
        .env("START_DELAY", "1")
        .output()
        .unwrap();
    let report = ok(&run, "local-shards.sh");
    let merged = read_json(&out.join("merged.json"));
    let parts: Vec<Value> = (0..3)
        .map(|k| read_json(&out.join(format!("shard-{k}.json"))))
        .collect();

    // Counts: the parts are 1001 + 1000 + 1000 (the remainder to shard 1), they add up to the
    // merged figure, which is what the origin received.
    let completes: Vec<u64> = parts
        .iter()
        .map(|p| p["complete_requests"].as_u64().unwrap())
        .collect();
    assert_eq!(completes, [1001, 1000, 1000]);
    for (k, p) in parts.iter().enumerate() {
        assert_eq!(
            p["shard"]["index"],
            k as u64 + 1,
            "JOB_COMPLETION_INDEX + 1"
        );
        assert_eq!(p["shard"]["count"], 3);
        assert_eq!(p["shard"]["requests_total"], 3001);
    }
    assert_eq!(merged["complete_requests"], 3001);
    assert_eq!(merged["totals"]["attempts"], 3001);
    assert_eq!(o.requests(), 3001);
    assert_eq!(line_value(&report, "Complete requests:"), "3001");
    assert_eq!(line_value(&report, "Failed requests:"), "0");
    assert_eq!(merged["options"]["connections"], 12, "-c is per shard");
    assert_eq!(merged["merged"]["warnings"], serde_json::json!([]));
    assert!(report.contains("Per-shard breakdown:"), "{report}");

    // Percentiles: one histogram fed every value the shards recorded gives the same figures
    // as the merged report (a mean of the shards' percentiles would not).
    let mut all: Histogram<u64> = Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    for p in &parts {
        let h = decode_histogram(p["histograms"]["total"].as_str().unwrap()).unwrap();
        for v in h.iter_recorded() {
            all.record_n(v.value_iterated_to(), v.count_at_value())
                .unwrap();
        }
    }
    assert_eq!(all.len(), 3001);
    let merged_hist = decode_histogram(merged["histograms"]["total"].as_str().unwrap()).unwrap();
    assert_eq!(merged_hist, all);
    for (key, q) in [("50", 50.0), ("90", 90.0), ("99", 99.0), ("99.9", 99.9)] {
        let want = all.value_at_percentile(q) as f64 / 1000.0;
        assert_eq!(
            merged["percentiles_ms"][key].as_f64().unwrap(),
            want,
            "p{key}"
        );
        let row = report
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}%")))
            .unwrap();
        assert_eq!(row.split_whitespace().nth(1).unwrap(), format!("{want:.3}"));
    }

    // Each shard's interval log holds exactly its complete requests.
    for (k, p) in parts.iter().enumerate() {
        let log = std::fs::read(out.join(format!("shard-{k}.hlog"))).unwrap();
        assert_eq!(
            interval_counts(&log).iter().sum::<u64>(),
            p["complete_requests"]
        );
    }

    // A merged result is a run document: merged again, it gives the same figures.
    let again = Command::new(tests::bin("loader"))
        .arg("merge")
        .arg(out.join("merged.json"))
        .output()
        .unwrap();
    let text = ok(&again, "merge of the merged result");
    assert_eq!(line_value(&text, "Complete requests:"), "3001");
    let p99 = |r: &str| -> String {
        r.lines()
            .find(|l| l.trim_start().starts_with("99%"))
            .unwrap_or_else(|| panic!("no 99% row in:\n{r}"))
            .to_string()
    };
    assert_eq!(p99(&text), p99(&report));

    // The same shard twice: refused (it would be counted twice), exit 2.
    let dup = Command::new(tests::bin("loader"))
        .arg("merge")
        .args([out.join("shard-0.json"), out.join("shard-0.json")])
        .output()
        .unwrap();
    assert_eq!(dup.status.code(), Some(2));
    assert!(tests::text(&dup.stderr).contains("shard 1/3 is given twice"));
    // Two missing: said, and the one given counted.
    let one = Command::new(tests::bin("loader"))
        .arg("merge")
        .arg(out.join("shard-0.json"))
        .output()
        .unwrap();
    let text = ok(&one, "merge of one shard of three");
    assert_eq!(line_value(&text, "Complete requests:"), "1001");
    assert!(text.contains("WARNING: shards missing: 2/3, 3/3"), "{text}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The values per interval of an interval log, read with the hdrhistogram crate.
fn interval_counts(log: &[u8]) -> Vec<u64> {
    IntervalLogIterator::new(log)
        .filter_map(|e| match e.expect("a valid interval log") {
            LogEntry::Interval(i) => Some(i),
            _ => None,
        })
        .map(|i| {
            let bytes = loader_base64(i.encoded_histogram());
            let h: Histogram<u64> = Deserializer::new()
                .deserialize(&mut bytes.as_slice())
                .unwrap();
            h.len()
        })
        .collect()
}

fn loader_base64(s: &str) -> Vec<u8> {
    shared::base64::decode(s).expect("base64")
}

#[test]
fn a_rate_split_over_four_shards_sends_rate_times_duration_in_total() {
    let o = origin();
    let out = scratch("rate");
    let start = SystemTime::now() + Duration::from_secs(1);
    let start = start.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let (rate, secs) = (800.0, 3.0);
    // Started together, waited for together: the shards run at the same time.
    let children: Vec<std::process::Child> = (1..=4)
        .map(|i| {
            Command::new(tests::bin("loader"))
                .args([
                    "-q",
                    "-c",
                    "16",
                    "--threads",
                    "1",
                    "-d",
                    "3s",
                    "--rate",
                    "800",
                ])
                .args(["--shard", &format!("{i}/4")])
                .args(["--start-at", &format!("{start:.3}")])
                .arg("--json")
                .arg(out.join(format!("{i}.json")))
                .arg(o.url("/"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn loader")
        })
        .collect();
    let children: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let (mut attempts, mut complete) = (0, 0);
    for (i, c) in children.iter().enumerate() {
        ok(c, "a shard");
        let v = read_json(&out.join(format!("{}.json", i + 1)));
        assert_eq!(v["rate"]["target"], 200.0, "each shard sends a quarter");
        attempts += v["totals"]["attempts"].as_u64().unwrap();
        complete += v["complete_requests"].as_u64().unwrap();
    }
    // The split itself is exact: each shard's target is a quarter (above), so a split that sent
    // the whole rate from every shard, or too little, fails there. What is sent also depends on
    // the machine keeping up (a starved origin answers slowly and the connections are busy; 1782
    // and 1724 of 2400 were seen with two busy loops beside a build), so the count's bounds are:
    // never over the schedule by more than 1% (on a quiet machine it is within 1% either way), and
    // a quarter of it at least, that is, every shard ran.
    let want = rate * secs;
    assert!(
        attempts as f64 <= want * 1.01 && attempts as f64 >= want * 0.25,
        "{attempts} requests sent in total, want {want} (at most 1% over)"
    );
    // The requests in flight at the deadline are drained, not abandoned: what the shards
    // count is what the origin received.
    assert_eq!(complete, attempts);
    assert_eq!(o.requests(), complete);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn hdr_log_is_read_by_the_hdrhistogram_crates_interval_log_reader() {
    let o = origin();
    let out = scratch("hdrlog");
    let path = out.join("run.hlog");
    let mut opts = RunOptions::for_urls(&[o.url("/")]).unwrap();
    opts.connections = 2;
    opts.duration = Some(Duration::from_millis(1500));
    opts.rate = Some(400.0);
    opts.hdr_log = Some(loader::hdrlog::HdrLogOptions {
        path: path.clone(),
        interval: Duration::from_secs(1),
    });
    let r = loader::run(&opts, ShutdownFlag::new()).unwrap();
    let log = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&log);
    assert!(
        text.starts_with("#[Histogram log format version 1.3]\n"),
        "{text}"
    );
    assert!(text.contains("Values in microseconds"), "{text}");

    let entries: Vec<LogEntry> = IntervalLogIterator::new(&log)
        .collect::<Result<_, _>>()
        .expect("a valid interval log");
    let started = r.started.duration_since(UNIX_EPOCH).unwrap();
    let close = |d: &Duration| d.abs_diff(started) <= Duration::from_millis(1);
    assert!(
        matches!(&entries[0], LogEntry::StartTime(t) if close(t)),
        "{text}"
    );
    assert!(
        matches!(&entries[1], LogEntry::BaseTime(t) if close(t)),
        "{text}"
    );
    let intervals: Vec<_> = entries[2..]
        .iter()
        .map(|e| match e {
            LogEntry::Interval(i) => i,
            other => panic!("{other:?}"),
        })
        .collect();
    // One full interval, then the last, partial one.
    assert_eq!(intervals.len(), 2, "{text}");
    assert_eq!(intervals[0].start_timestamp(), Duration::ZERO);
    assert_eq!(intervals[0].duration(), Duration::from_secs(1));
    assert_eq!(intervals[1].start_timestamp(), Duration::from_secs(1));
    assert!(intervals[1].duration() < Duration::from_secs(1), "{text}");
    assert!(
        intervals[1].duration() >= Duration::from_millis(400),
        "{text}"
    );
    assert_eq!(
        interval_counts(&log).iter().sum::<u64>(),
        r.totals.completed
    );
    let total = decode_histogram(&loader::json::encode_histogram(&r.hist.total)).unwrap();
    assert_eq!(
        intervals.iter().map(|i| i.max()).fold(0.0, f64::max),
        total.max() as f64 / 1000.0,
        "Interval_Max is in ms"
    );

    // With --spin no timer of the worker fires: the interval clock spins like the sends, so
    // the intervals still fall every second.
    let mut spin = opts.clone();
    spin.spin = true;
    let r = loader::run(&spin, ShutdownFlag::new()).unwrap();
    let log = std::fs::read(&path).unwrap();
    let starts: Vec<Duration> = IntervalLogIterator::new(&log)
        .filter_map(|e| match e.expect("a valid interval log") {
            LogEntry::Interval(i) => Some(i.start_timestamp()),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [Duration::ZERO, Duration::from_secs(1)], "--spin");
    assert_eq!(
        interval_counts(&log).iter().sum::<u64>(),
        r.totals.completed
    );

    // A run shorter than one interval still has its histogram line.
    let mut short = RunOptions::for_urls(&[o.url("/")]).unwrap();
    short.connections = 2;
    short.requests = Some(20);
    short.hdr_log = opts.hdr_log.clone();
    let r = loader::run(&short, ShutdownFlag::new()).unwrap();
    assert_eq!(r.totals.completed, 20);
    let log = std::fs::read(&path).unwrap();
    assert_eq!(interval_counts(&log), [20]);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn k8s_manifests_are_valid_yaml_with_one_shard_count() {
    use serde::Deserialize;
    let dir = root().join("scripts/k8s");
    let docs = |name: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        serde_norway::Deserializer::from_str(&text)
            .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{name}: {e}")))
            .collect()
    };
    let job_docs = docs("loader-job.yaml");
    let job = job_docs
        .iter()
        .find(|d| d["kind"] == "Job")
        .expect("a Job in loader-job.yaml");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let args: Vec<&str> = spec["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let shard = args
        .windows(2)
        .find(|w| w[0] == "--shard")
        .map(|w| w[1])
        .expect("--shard in the Job's args");
    let n: u64 = shard.strip_prefix("auto/").unwrap().parse().unwrap();
    assert_eq!(spec["completions"], n);
    assert_eq!(spec["parallelism"], n);
    assert!(
        args.contains(&"--json") && args.contains(&"--start-at"),
        "{args:?}"
    );
    // The args parse as the loader's command line (with the Job's variables filled in).
    let filled: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("$(START_AT)", "2026-12-01T10:00:00Z")
                .replace("$(JOB_COMPLETION_INDEX)", "0")
        })
        .collect();
    let cli: Result<loader::cli::Cli, _> =
        clap::Parser::try_parse_from(std::iter::once("loader".to_string()).chain(filled));
    assert!(cli.is_ok(), "{cli:?}");
    let claim = job_docs
        .iter()
        .find(|d| d["kind"] == "PersistentVolumeClaim")
        .expect("the results volume");
    let merge = &docs("merge-job.yaml")[0];
    // No shard count of its own: every shard file the Job wrote (each carries the count).
    let margs = &merge["spec"]["template"]["spec"]["containers"][0]["args"];
    let script = margs[0].as_str().expect("one shell line");
    assert!(
        script.contains("loader merge") && script.contains("/results/shard-*.json"),
        "{script}"
    );
    assert!(!script.contains("shard-0"), "{script}");
    assert_eq!(
        merge["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        claim["metadata"]["name"]
    );
    // Both Jobs: non-root, read-only root, no capabilities, RuntimeDefault seccomp, and
    // Guaranteed QoS (requests = limits, whole CPUs).
    for (name, job) in [("loader-job.yaml", job), ("merge-job.yaml", merge)] {
        tests::manual::assert_hardened_pod(name, &job["spec"]["template"]["spec"]);
    }
    // The image is built from source (the repository's Dockerfile), target/ left out.
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("cargo build --release --locked -p proxy -p loader"));
    assert!(dockerfile.contains("AS loader") && dockerfile.contains("AS proxy"));
    assert!(dockerfile.contains("USER 65532:65532"));
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "target/"), "{ignore}");
}

#[test]
fn bad_shard_merge_and_log_input_is_named_with_exit_2() {
    let o = origin();
    let out = scratch("bad");
    let not_json = out.join("not.json");
    std::fs::write(&not_json, "{\"schema\": \"something else\"}").unwrap();
    let url = o.url("/");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["merge".into(), "/nonexistent/shard.json".into()],
            "/nonexistent/shard.json: ",
        ),
        (
            vec!["merge".into(), not_json.display().to_string()],
            "not a loader --json result",
        ),
        (
            vec![
                "-n".into(),
                "5".into(),
                "--shard".into(),
                "auto/2".into(),
                url.clone(),
            ],
            "JOB_COMPLETION_INDEX is not set",
        ),
        (
            vec![
                "-n".into(),
                "3".into(),
                "--shard".into(),
                "1/4".into(),
                url.clone(),
            ],
            "-n 3 is fewer than the 4 shards",
        ),
        (
            vec!["--shard".into(), "5/4".into(), url.clone()],
            "invalid shard '5/4'",
        ),
        (
            vec!["--start-at".into(), "tomorrow".into(), url.clone()],
            "invalid time 'tomorrow'",
        ),
        (
            vec![
                "-n".into(),
                "5".into(),
                "--hdr-log".into(),
                "/nonexistent/x.hlog".into(),
                url,
            ],
            "--hdr-log /nonexistent/x.hlog: ",
        ),
    ];
    for (args, want) in cases {
        let got = Command::new(tests::bin("loader"))
            .args(&args)
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&got.stderr);
        assert_eq!(got.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    assert_eq!(o.requests(), 0, "nothing was sent");
    let _ = std::fs::remove_dir_all(&out);
}

/// `scripts/k8s/ssh-shards.sh` with `ssh` and `scp` replaced by local stand-ins (no host is
/// reached: "ssh HOST CMD" runs CMD here, "scp" copies with the `HOST:` prefixes removed), so
/// the script's own steps are checked: copy, start every shard with its index and one
/// --start-at, fetch the results, merge.
#[test]
fn the_ssh_variant_runs_every_shard_and_merges() {
    use std::os::unix::fs::PermissionsExt;
    let o = origin();
    let out = scratch("ssh");
    let stubs = out.join("bin");
    let remote = out.join("remote");
    std::fs::create_dir_all(&stubs).unwrap();
    std::fs::create_dir_all(&remote).unwrap();
    let stub = |name: &str, body: &str| {
        let p = stubs.join(name);
        std::fs::write(&p, format!("#!/usr/bin/env bash\nset -e\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    stub("ssh", "shift; exec bash -c \"$*\"");
    stub(
        "scp",
        "args=(); for a in \"$@\"; do [ \"$a\" = -q ] || args+=(\"${a#*:}\"); done\n\
         exec cp \"${args[@]}\"",
    );
    let path = format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap());
    let results = out.join("results");
    let run = Command::new("bash")
        .arg(root().join("scripts/k8s/ssh-shards.sh"))
        .arg(&results)
        .arg(o.url("/"))
        .args(["--", "-n", "301", "-c", "2", "--threads", "1"])
        .env("PATH", path)
        .env("HOSTS", "load1 load2")
        .env("REMOTE_DIR", &remote)
        .env("START_DELAY", "1")
        .env("LOADER", tests::bin("loader"))
        .output()
        .unwrap();
    let report = ok(&run, "ssh-shards.sh");
    assert_eq!(line_value(&report, "Complete requests:"), "301");
    assert_eq!(o.requests(), 301);
    for k in 0..2 {
        let v = read_json(&results.join(format!("loader-shard-{k}.json")));
        assert_eq!(v["shard"]["index"], k + 1);
        assert_eq!(v["complete_requests"], [151, 150][k as usize]);
        assert!(results.join(format!("loader-shard-{k}.hlog")).exists());
    }
    assert!(!report.contains("WARNING"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Every value of `hists` recorded one by one into a fresh histogram of `sigfig` digits:
/// what one run would have held had it recorded all the parts' requests itself.
fn fed(hists: &[Histogram<u64>], sigfig: u8) -> Histogram<u64> {
    let mut all = Histogram::new_with_bounds(1, 3_600_000_000, sigfig).unwrap();
    for h in hists {
        for v in h.iter_recorded() {
            all.record_n(v.value_iterated_to(), v.count_at_value())
                .unwrap();
        }
    }
    all
}

fn hist_at(v: &Value, pointer: &str) -> Histogram<u64> {
    let s = v
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {pointer}"));
    decode_histogram(s).unwrap()
}

/// The report's row for `p` of a percentile table that follows the line starting `heading`.
fn row_after<'a>(report: &'a str, heading: &str, p: &str) -> &'a str {
    report
        .lines()
        .skip_while(|l| !l.starts_with(heading))
        .find(|l| l.trim_start().starts_with(p))
        .unwrap_or_else(|| panic!("no {p} row after '{heading}' in:\n{report}"))
}

/// What part A added, merged: two `--rate -d` shards with several URLs against a slow origin
/// (requests in flight at the stop are certain). The merged drain sums the in-flight
/// requests and takes the longest drain; the merged send-lateness and per-URL histograms are
/// exactly one histogram fed every part's values, and the merged report prints their
/// percentiles as a single run's report does; the interval logs hold the drained requests too.
#[test]
fn merged_drain_send_lateness_and_per_url_percentiles_are_exact() {
    let o = Origin::start(OriginConfig {
        body_size: 64,
        delay: Duration::from_millis(50),
        ..OriginConfig::default()
    })
    .expect("origin");
    let out = scratch("partA");
    let urls = [o.url("/a"), o.url("/b"), o.url("/c")];
    let start = SystemTime::now() + Duration::from_secs(1);
    let start = start.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    // Per shard 200 req/s over 20 connections: a send every 100 ms per connection, twice the
    // origin's delay, so sends wait for their time (send lateness is measured).
    let children: Vec<std::process::Child> = (1..=2)
        .map(|i| {
            Command::new(tests::bin("loader"))
                .args(["-q", "-c", "20", "--threads", "1", "-d", "1500ms"])
                .args(["--rate", "400", "--timeout", "10s"])
                .args(["--shard", &format!("{i}/2")])
                .args(["--start-at", &format!("{start:.3}")])
                .arg("--json")
                .arg(out.join(format!("{i}.json")))
                .arg("--hdr-log")
                .arg(out.join(format!("{i}.hlog")))
                .args(&urls)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn loader")
        })
        .collect();
    let parts: Vec<Value> = children
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            ok(&c.wait_with_output().unwrap(), "a shard");
            read_json(&out.join(format!("{}.json", i + 1)))
        })
        .collect();
    let merge = Command::new(tests::bin("loader"))
        .arg("merge")
        .args([out.join("1.json"), out.join("2.json")])
        .arg("--json")
        .arg(out.join("merged.json"))
        .output()
        .unwrap();
    let report = ok(&merge, "loader merge");
    let merged = read_json(&out.join("merged.json"));

    // Counts: the drain answered everything, so the parts add up to what the origin received.
    let sum = |p: &str| -> u64 {
        parts
            .iter()
            .map(|v| v.pointer(p).unwrap().as_u64().unwrap())
            .sum()
    };
    let complete = sum("/complete_requests");
    assert_eq!(merged["complete_requests"], complete);
    assert_eq!(o.requests(), complete, "every request the origin received");
    assert_eq!(
        line_value(&report, "Complete requests:"),
        complete.to_string()
    );
    assert_eq!(line_value(&report, "Failed requests:"), "0");
    assert!(report.contains("\n   (Unanswered at end: 0)\n"), "{report}");

    // The drain: in flight summed, the longest drain.
    let in_flight = sum("/drain/in_flight_at_stop");
    assert!(in_flight >= 1, "a 50 ms origin at 400 req/s: {parts:?}");
    let longest = parts
        .iter()
        .map(|v| v["drain"]["drain_s"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(merged["drain"]["in_flight_at_stop"], in_flight);
    assert_eq!(merged["drain"]["drain_s"].as_f64().unwrap(), longest);
    assert_eq!(merged["drain"]["unanswered"], 0);
    assert!(
        report.contains(&format!(
            "In flight at the stop:  {in_flight} (drained in {:.3} ms",
            longest * 1000.0
        )),
        "{report}"
    );

    // Each shard's interval log holds exactly its complete requests, the drained ones too.
    for (k, p) in parts.iter().enumerate() {
        let log = std::fs::read(out.join(format!("{}.hlog", k + 1))).unwrap();
        assert!(p["drain"]["in_flight_at_stop"].as_u64().is_some());
        assert_eq!(
            interval_counts(&log).iter().sum::<u64>(),
            p["complete_requests"]
        );
    }

    // Send lateness: the merged histogram is one histogram fed both parts' values, and the
    // report's table is its percentiles.
    let late = fed(
        &parts
            .iter()
            .map(|p| hist_at(p, "/histograms/send_lateness"))
            .collect::<Vec<_>>(),
        3,
    );
    assert!(!late.is_empty(), "sends waited for their time");
    assert_eq!(hist_at(&merged, "/histograms/send_lateness"), late);
    assert_eq!(merged["rate"]["send_lateness_count"], late.len());
    let heading = format!(
        "Send lateness (ms, actual minus intended send time, {} sends",
        late.len()
    );
    assert!(report.contains(&heading), "{report}");
    let sums = &merged["histograms"]["sums_us"]["send_lateness"];
    let (min, max) = (sums["min_us"].as_u64(), sums["max_us"].as_u64());
    for (key, q) in [("50", 50.0), ("90", 90.0), ("99", 99.0)] {
        let want = peer_percentile_ms(&late, (min.unwrap(), max.unwrap()), q);
        let got = merged["rate"]["send_lateness_percentiles_ms"][key].as_f64();
        assert_eq!(got, Some(want), "lateness p{key}");
        let row = row_after(&report, "Send lateness", &format!("{key}%"));
        assert_eq!(
            row.split_whitespace().nth(1),
            Some(format!("{want:.3}").as_str())
        );
    }

    // Per URL: the merged histogram is one 2-digit histogram fed both parts' values of the
    // URL; the JSON and the report's per-URL table give its percentiles.
    let merged_urls = merged["urls"].as_array().unwrap();
    assert_eq!(merged_urls.len(), 3);
    for (k, url) in urls.iter().enumerate() {
        let mine: Vec<Histogram<u64>> = parts
            .iter()
            .map(|p| {
                assert_eq!(p["urls"][k]["url"], *url);
                hist_at(p, &format!("/urls/{k}/histogram"))
            })
            .collect();
        let want = fed(&mine, 2);
        assert!(!want.is_empty(), "{url}");
        assert_eq!(merged_urls[k]["url"], *url);
        assert_eq!(hist_at(&merged, &format!("/urls/{k}/histogram")), want);
        assert_eq!(merged_urls[k]["counts"]["completed"], want.len());
        let row = report
            .lines()
            .skip_while(|l| !l.starts_with("Per-URL percentiles"))
            .find(|l| l.ends_with(&format!("  {url}")))
            .unwrap_or_else(|| panic!("no per-URL row for {url} in:\n{report}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        for (i, (key, q)) in [("50", 50.0), ("90", 90.0), ("99", 99.0), ("99.9", 99.9)]
            .into_iter()
            .enumerate()
        {
            let l = &merged_urls[k]["latency_us"];
            let min_max = (l["min"].as_u64().unwrap(), l["max"].as_u64().unwrap());
            let ms = peer_percentile_ms(&want, min_max, q);
            assert_eq!(
                merged_urls[k]["percentiles_ms"][key].as_f64(),
                Some(ms),
                "{url} p{key}"
            );
            assert_eq!(cols[i], format!("{ms:.3}"), "{url} p{key}: {row}");
        }
        assert_eq!(cols[5], want.len().to_string(), "{row}");
    }
    assert_eq!(
        merged["merged"]["warnings"],
        serde_json::json!([]),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `-n` over the shards of `urls`, in-process, each shard as `--shard I/N -n total` makes it:
/// the completed requests per URL, all shards together. `workers` per shard, `c` connections.
fn per_url_over_shards(
    urls: &[String],
    total: u64,
    count: u32,
    c: usize,
    workers: usize,
) -> Vec<u64> {
    per_url_over_shards_in(
        loader::targets::TargetsOrder::RoundRobin,
        urls,
        total,
        count,
        c,
        workers,
    )
}

fn per_url_over_shards_in(
    order: loader::targets::TargetsOrder,
    urls: &[String],
    total: u64,
    count: u32,
    c: usize,
    workers: usize,
) -> Vec<u64> {
    use loader::shard::{Shard, ShardRun};
    let mut per_url = vec![0; urls.len()];
    for index in 1..=count {
        let shard = Shard { index, count };
        let mut o = RunOptions::for_urls(urls).unwrap();
        o.connections = c;
        o.runtime.workers = workers;
        o.runtime.pin = false;
        o.quiet = true;
        o.targets_order = order;
        o.requests = Some(shard.requests(total).unwrap());
        o.shard = Some(ShardRun {
            shard,
            requests_total: Some(total),
            rate_total: None,
            duration: None,
        });
        let r = loader::run(&o, ShutdownFlag::new()).expect("run starts");
        for (i, u) in r.urls.iter().enumerate() {
            per_url[i] += u.counts.completed;
        }
    }
    per_url
}

/// The shards together send each URL what the unsharded run sends it: the URLs' walk is one
/// over the whole load, not one restarted at the first URL by every shard (which sent
/// 3 / 0 / 0 for 3 requests over 3 shards and 3 URLs).
#[test]
fn the_shards_walk_the_urls_as_one_run_does() {
    let o = origin();
    let urls: Vec<String> = ["/a", "/b", "/c", "/d"].iter().map(|p| o.url(p)).collect();
    let three = &urls[..3];
    assert_eq!(per_url_over_shards(three, 3, 3, 1, 1), [1, 1, 1]);
    assert_eq!(per_url_over_shards(three, 6, 3, 1, 1), [2, 2, 2]);
    assert_eq!(per_url_over_shards(&urls, 4, 2, 1, 1), [1, 1, 1, 1]);
    // Uneven parts (4, 3, 3) over workers of their own: the unsharded run's 3, 3, 2, 2.
    assert_eq!(per_url_over_shards(&urls, 10, 3, 3, 2), [3, 3, 2, 2]);
}

/// `--targets-order random`: each shard draws its own sequence. Every shard's workers were
/// seeded alike (worker 1 with 1, ...), so the shards sent the same URLs in the same order.
#[test]
fn random_order_shards_draw_sequences_of_their_own() {
    let o = origin();
    let urls: Vec<String> = (0..64).map(|i| o.url(&format!("/{i}"))).collect();
    let random = loader::targets::TargetsOrder::Random;
    let per_url = per_url_over_shards_in(random, &urls, 4, 4, 1, 1);
    assert_eq!(per_url.iter().sum::<u64>(), 4);
    assert!(per_url.iter().all(|&n| n <= 1), "{per_url:?}");
}
