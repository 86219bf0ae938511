//! `loader ceiling` through its binary, against the built-in origin with a known ceiling
//! (`max_rate`, a token bucket per worker): the search finds it within 10%; two URLs run
//! A B A B; `--max-time` stops the search; a target that fails every step has no ceiling
//! and exits 1; Ctrl-C prints what was found so far.
//!
//! The verdicts do not depend on the machine's speed: above the origin's rate its answers
//! per second are capped by the bucket (a step there cannot reach 97% of the offered rate,
//! however fast the machine), and the latency objectives are generous (500 ms) so a busy
//! machine's jitter does not fail a step below it. Steps are sub-second.

use serde_json::Value;
use shared::origin::{Origin, OriginConfig};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;
use tests::process::Process;

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn spawn(args: &[&str]) -> Process {
    Process::spawn(
        Command::new(tests::bin("loader"))
            .arg("ceiling")
            .args(args)
            .stdout(Stdio::piped()),
    )
}

fn finish(child: Process) -> Run {
    let out = child.output(Duration::from_secs(120));
    Run {
        status: out.status,
        stdout: tests::text(&out.stdout),
        stderr: tests::text(&out.stderr),
    }
}

fn ceiling(args: &[&str]) -> Run {
    finish(spawn(args))
}

/// The searches whose verdict is a ceiling run one at a time (the other tests of this file
/// would otherwise compete with them for the machine's two cores).
static SEARCHES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A search whose ceiling the test checks. When the loader reports itself as the limit
/// (`GENERATOR-LIMITED`: a stall of the machine made it send late), the run says nothing
/// about the target and is run again, up to three times.
fn trusted_search(args: &[&str]) -> Run {
    let _one = SEARCHES.lock().unwrap_or_else(|p| p.into_inner());
    let mut r = ceiling(args);
    for _ in 0..2 {
        if !r.stdout.contains("GENERATOR-LIMITED") {
            break;
        }
        eprintln!("generator-limited run, again:\n{}", r.stdout);
        r = ceiling(args);
    }
    r
}

fn limited_origin(max_rate: f64) -> Origin {
    Origin::start(OriginConfig {
        max_rate: Some(max_rate),
        body_size: 256,
        ..OriginConfig::default()
    })
    .unwrap()
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("loader-ceiling-{}-{name}", std::process::id()))
}

/// The rate of the `Ceiling: N req/s at OBJ (URL)` line for `url`.
fn ceiling_of(stdout: &str, url: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Ceiling: ") && l.contains(&format!("({url})")))
        .unwrap_or_else(|| panic!("no Ceiling line for {url}:\n{stdout}"));
    let n = line["Ceiling: ".len()..].split(' ').next().unwrap();
    assert!(n.bytes().all(|b| b.is_ascii_digit()), "{line}");
    n.parse().unwrap()
}

/// Common step flags: sub-second steps, one worker, a generous objective.
const STEPS: &[&str] = &[
    "--p99",
    "500ms",
    "-d",
    "500ms",
    "--warmup",
    "250ms",
    "-c",
    "20",
    "--threads",
    "1",
    "-q",
];

fn read_json(path: &PathBuf) -> Value {
    let v = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let _ = std::fs::remove_file(path);
    v
}

#[test]
fn finds_a_known_ceiling_within_ten_percent() {
    let o = limited_origin(200.0);
    let url = o.url("/");
    let json = temp_path("one.json");
    let plot = temp_path("one.svg");
    let mut args = STEPS.to_vec();
    let (j, p) = (json.display().to_string(), plot.display().to_string());
    args.extend([
        "--from",
        "120",
        "--precision",
        "3%",
        "--json",
        &j,
        "--plot",
        &p,
        &url,
    ]);
    let r = trusted_search(&args);
    assert!(r.status.success(), "{}\n{}", r.stdout, r.stderr);
    let c = ceiling_of(&r.stdout, &url);
    assert!(
        (180.0..=220.0).contains(&c),
        "ceiling {c}, known 200:\n{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains(&format!("Ceiling: {c:.0} req/s at p99 <= 500ms ({url})")),
        "{}",
        r.stdout
    );
    // The table has every step, and --json every step with its histograms.
    let doc = read_json(&json);
    assert_eq!(doc["schema"], "loader-ceiling/1");
    let steps = doc["steps"].as_array().unwrap();
    assert!(steps.len() >= 3, "{doc}");
    for (i, s) in steps.iter().enumerate() {
        assert!(
            r.stdout
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{} ", i + 1))),
            "step {} missing from the table:\n{}",
            i + 1,
            r.stdout
        );
        assert!(s["run"]["histograms"]["total"].as_str().unwrap().len() > 10);
        assert!(s["run"]["histograms"]["send_lateness"].is_string());
    }
    assert_eq!(steps[0]["offered"], 120.0);
    assert_eq!(doc["urls"][0]["ceiling"].as_f64().unwrap().round(), c);
    // A step well above the bucket's rate failed (the search bracketed the ceiling).
    assert!(steps
        .iter()
        .any(|s| s["verdict"] != "pass" && s["offered"].as_f64().unwrap() > c));
    let svg = std::fs::read_to_string(&plot).unwrap();
    let _ = std::fs::remove_file(&plot);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("polyline") && svg.contains(&url));
}

/// A slow target that keeps up passes: 200 req/s answered in 100 ms each, well within the
/// objective. The achieved rate over the step plus its drain (one latency) came out at
/// 0.5/0.6 of the offered one, and every step failed on the rate.
#[test]
fn a_slow_target_that_keeps_up_passes() {
    let slow = Origin::start(OriginConfig {
        delay: Duration::from_millis(100),
        body_size: 256,
        ..OriginConfig::default()
    })
    .unwrap();
    let url = slow.url("/");
    let json = temp_path("slow.json");
    let j = json.display().to_string();
    let r = trusted_search(&[
        "--p99",
        "1s",
        "-d",
        "500ms",
        "--warmup",
        "250ms",
        "-c",
        "40",
        "--threads",
        "1",
        "--from",
        "200",
        "--upper",
        "200",
        "--json",
        &j,
        "-q",
        &url,
    ]);
    assert!(r.status.success(), "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "Ceiling: 200 req/s at p99 <= 1s ({url}); at least"
        )),
        "{}",
        r.stdout
    );
    let doc = read_json(&json);
    let step = &doc["steps"].as_array().unwrap()[0];
    assert_eq!(step["verdict"], "pass", "{step}");
    assert!(step["achieved"].as_f64().unwrap() >= 194.0, "{step}");
}

#[test]
fn two_urls_alternate_and_b_is_given_as_a_share_of_a() {
    let a = limited_origin(200.0);
    let b = limited_origin(100.0);
    let (ua, ub) = (a.url("/"), b.url("/"));
    let json = temp_path("two.json");
    let j = json.display().to_string();
    let me = std::process::id().to_string();
    let mut args = STEPS.to_vec();
    args.extend(["--from", "60", "--precision", "5%", "--json", &j]);
    args.extend(["--watch-pid", &me, &ua, &ub]);
    let r = trusted_search(&args);
    assert!(r.status.success(), "{}\n{}", r.stdout, r.stderr);
    let (ca, cb) = (ceiling_of(&r.stdout, &ua), ceiling_of(&r.stdout, &ub));
    assert!((180.0..=220.0).contains(&ca), "A {ca}:\n{}", r.stdout);
    assert!((90.0..=110.0).contains(&cb), "B {cb}:\n{}", r.stdout);
    assert!(r.stdout.contains("B's ceiling is "), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!("pid {me} us/req")),
        "{}",
        r.stdout
    );
    let doc = read_json(&json);
    let steps = doc["steps"].as_array().unwrap();
    let sides: Vec<&str> = steps.iter().map(|s| s["side"].as_str().unwrap()).collect();
    // While both searches run, the steps alternate, A first, at the same rate to begin with.
    assert_eq!(&sides[..4], ["A", "B", "A", "B"], "{sides:?}");
    assert_eq!(steps[0]["offered"], steps[1]["offered"]);
    let share = doc["b_percent_of_a"].as_f64().unwrap();
    assert!((share - cb / ca * 100.0).abs() < 2.0, "{share}");
    assert!(steps
        .iter()
        .all(|s| s["watched_cpu"][0]["pid"].as_u64() == Some(std::process::id() as u64)));
}

#[test]
fn max_time_stops_the_search_with_what_was_found() {
    let o = limited_origin(100_000.0);
    let url = o.url("/");
    let json = temp_path("max.json");
    let j = json.display().to_string();
    // A step lasts its warm-up and -d (400 ms), and up to twice --timeout more (the warm-up's
    // last requests and the drain): 1 s leaves room for one, two when the first was quick.
    let r = ceiling(&[
        "--p99",
        "2s",
        "-d",
        "300ms",
        "--warmup",
        "100ms",
        "-c",
        "4",
        "--threads",
        "1",
        "--timeout",
        "200ms",
        "--from",
        "50",
        "--max-time",
        "1s",
        "--json",
        &j,
        "-q",
        &url,
    ]);
    // Exit 0: a ceiling was found (at least one), unless a stall made the loader the limit
    // (a step marked gen-limited in the table).
    assert!(
        r.status.success() || r.stdout.contains("gen-limited"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.contains("Stopped at --max-time"), "{}", r.stdout);
    let doc = read_json(&json);
    let n = doc["steps"].as_array().unwrap().len();
    assert!((1..=2).contains(&n), "{n} steps in 1 s of 400 ms steps");
    assert_eq!(doc["stopped"], "max-time");
    if !r.stdout.contains("gen-limited") {
        assert!(ceiling_of(&r.stdout, &url) >= 50.0);
        assert!(r.stdout.contains("at least: --max-time"), "{}", r.stdout);
    }
}

/// `--max-time` bounds the whole search, whatever the target does: against one that never
/// answers, each step lasts its warm-up, the wait for the warm-up's last requests (a timeout)
/// and the drain (another), and a step starts only if it would end within the limit even so.
/// It was checked against the warm-up and -d only: 10.2 s for --max-time 2s.
#[test]
fn max_time_holds_against_a_target_that_never_answers() {
    let stall = Origin::start(OriginConfig {
        hang: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let url = stall.url("/");
    let json = temp_path("stall-max.json");
    let j = json.display().to_string();
    let r = ceiling(&[
        "--p99",
        "500ms",
        "-d",
        "200ms",
        "--warmup",
        "100ms",
        "-c",
        "2",
        "--threads",
        "1",
        "--timeout",
        "400ms",
        "--from",
        "40",
        "--max-time",
        "1500ms",
        "--json",
        &j,
        "-q",
        &url,
    ]);
    assert_eq!(r.status.code(), Some(1), "{}\n{}", r.stdout, r.stderr);
    let doc = read_json(&json);
    let elapsed = doc["elapsed_s"].as_f64().unwrap();
    assert!(
        elapsed <= 1.5,
        "{elapsed} s past --max-time 1500ms:\n{}",
        r.stdout
    );
    assert_eq!(doc["stopped"], "max-time", "{}", r.stdout);
    assert!(!doc["steps"].as_array().unwrap().is_empty(), "{}", r.stdout);
}

/// Ctrl-C while B's closed-loop probe runs: A was probed, B was not, and both are reported,
/// B as not searched (its cut-short probe was taken for a probe).
#[test]
fn ctrl_c_during_the_probes_reports_every_url() {
    let a = limited_origin(100_000.0);
    let b = limited_origin(100_000.0);
    let (ua, ub) = (a.url("/"), b.url("/"));
    let child = spawn(&[
        "--p99",
        "2s",
        "-d",
        "300ms",
        "-c",
        "2",
        "--threads",
        "1",
        "--timeout",
        "1s",
        &ua,
        &ub,
    ]);
    assert!(
        tests::eventually(Duration::from_secs(60), || b.requests() > 0),
        "B's probe never started"
    );
    child.signal(libc::SIGINT);
    let r = finish(child);
    assert_eq!(r.status.code(), Some(1), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("Interrupted (Ctrl-C)"), "{}", r.stdout);
    assert!(r.stdout.contains("for 2 URLs"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!("B {ub}: not searched")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "Not searched ({ub}): interrupted before its probe ended"
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(&format!("A {ua}: from ")), "{}", r.stdout);
}

#[test]
fn a_target_that_fails_every_step_has_no_ceiling_and_exits_1() {
    let slow = Origin::start(OriginConfig {
        delay: Duration::from_millis(100),
        ..OriginConfig::default()
    })
    .unwrap();
    let url = slow.url("/");
    let r = ceiling(&[
        "--p99",
        "20ms",
        "-d",
        "300ms",
        "--warmup",
        "100ms",
        "-c",
        "8",
        "--threads",
        "1",
        "--from",
        "40",
        "-q",
        &url,
    ]);
    assert_eq!(r.status.code(), Some(1), "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("Ceiling: "), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "No ceiling at p99 <= 20ms ({url}): every step failed, down to 5 req/s"
        )),
        "{}",
        r.stdout
    );
    // A dead port fails every step too (connect errors), with the same verdict.
    let dead = tests::ClosedPort::new();
    let dead_url = format!("http://{}/", dead.addr());
    let r = ceiling(&[
        "--p99",
        "20ms",
        "-d",
        "200ms",
        "--warmup",
        "50ms",
        "-c",
        "2",
        "--threads",
        "1",
        "--from",
        "40",
        "-q",
        &dead_url,
    ]);
    assert_eq!(r.status.code(), Some(1), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("No ceiling"), "{}", r.stdout);
    assert!(r.stdout.contains("FAIL errors"), "{}", r.stdout);
}

/// A target that answers every request at once, 503: each answer is an error (wrk's
/// "Non-2xx or 3xx responses"), every step fails on errors, and there is no ceiling.
#[test]
fn answers_outside_2xx_and_3xx_fail_the_step() {
    let shedding = Origin::start(OriginConfig {
        status: 503,
        body_size: 16,
        ..OriginConfig::default()
    })
    .unwrap();
    let url = shedding.url("/");
    let json = temp_path("503.json");
    let j = json.display().to_string();
    let r = ceiling(&[
        "--p99",
        "500ms",
        "-d",
        "200ms",
        "--warmup",
        "50ms",
        "-c",
        "4",
        "--threads",
        "1",
        "--from",
        "100",
        "--upper",
        "400",
        "--json",
        &j,
        "-q",
        &url,
    ]);
    assert_eq!(r.status.code(), Some(1), "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains(&format!("No ceiling at p99 <= 500ms ({url})")),
        "{}",
        r.stdout
    );
    let doc = read_json(&json);
    for s in doc["steps"].as_array().unwrap() {
        assert_eq!(s["verdict"], "errors", "{s}");
        let answered = s["run"]["complete_requests"].as_u64().unwrap();
        assert!(answered > 0, "{s}");
        assert_eq!(s["non_2xx_3xx"].as_u64(), Some(answered), "{s}");
        assert!(s["errors"].as_u64().unwrap() >= answered, "{s}");
    }
}

/// A target that reads every request and never answers (or closes every connection without
/// answering) fails every step on errors, and it is the target's failure: its connections
/// were busy (or the loader sent on schedule), so no step is put down to the loader. It was:
/// every step "FAIL errors (gen-limited)", run three times, and "GENERATOR-LIMITED".
#[test]
fn a_target_that_stalls_or_closes_is_not_the_loaders_limit() {
    for (what, cfg) in [
        (
            "stalls",
            OriginConfig {
                hang: true,
                ..OriginConfig::default()
            },
        ),
        (
            "closes",
            OriginConfig {
                drop: true,
                ..OriginConfig::default()
            },
        ),
    ] {
        let dead = Origin::start(cfg).unwrap();
        let url = dead.url("/");
        let r = ceiling(&[
            "--p99",
            "500ms",
            "-d",
            "500ms",
            "--warmup",
            "100ms",
            "-c",
            "2",
            "--threads",
            "1",
            "--timeout",
            "200ms",
            "--from",
            "10",
            "-q",
            &url,
        ]);
        assert_eq!(
            r.status.code(),
            Some(1),
            "{what}: {}\n{}",
            r.stdout,
            r.stderr
        );
        assert!(r.stdout.contains("No ceiling"), "{what}: {}", r.stdout);
        assert!(r.stdout.contains("FAIL errors"), "{what}: {}", r.stdout);
        assert!(!r.stdout.contains("gen-limited"), "{what}: {}", r.stdout);
        assert!(
            !r.stdout.contains("GENERATOR-LIMITED"),
            "{what}: {}",
            r.stdout
        );
    }
}

#[test]
fn ctrl_c_prints_what_was_found_so_far() {
    let o = limited_origin(100_000.0);
    let url = o.url("/");
    // Long steps: the search is mid-way when the signal comes.
    let mut child = spawn(&[
        "--p99",
        "2s",
        "-d",
        "400ms",
        "--warmup",
        "100ms",
        "-c",
        "4",
        "--threads",
        "1",
        "--from",
        "50",
        &url,
    ]);
    child.wait_line("step 1:", Duration::from_secs(60));
    child.signal(libc::SIGINT);
    let r = finish(child);
    // Exit 0: a ceiling was found (at least one), unless a stall made the loader the limit
    // (a step marked gen-limited in the table).
    assert!(
        r.status.success() || r.stdout.contains("gen-limited"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(r.stdout.contains("Interrupted (Ctrl-C)"), "{}", r.stdout);
    // Step 1 at 50 req/s passes against an origin 2000 times faster, unless the loader was
    // descheduled through it (then it says so, and the step is run again).
    if !r.stdout.contains("gen-limited") {
        assert!(ceiling_of(&r.stdout, &url) >= 50.0);
        assert!(r.stdout.contains("at least: interrupted"), "{}", r.stdout);
    }
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    for args in [
        &["http://127.0.0.1:1/"][..],
        &["--p99", "10ms", "--rate", "10", "http://127.0.0.1:1/"],
        &[
            "--p99",
            "10ms",
            "--from",
            "10",
            "--upper",
            "5",
            "http://127.0.0.1:1/",
        ],
        &["--p99", "10ms", "--watch-pid", "0", "http://127.0.0.1:1/"],
        // A plain run's flags: the search would ignore them.
        &["--p99", "10ms", "--shard", "1/2", "http://127.0.0.1:1/"],
        &[
            "--p99",
            "10ms",
            "--start-at",
            "4102444800",
            "http://127.0.0.1:1/",
        ],
        &[
            "--p99",
            "10ms",
            "--hdr-log",
            "x.hlog",
            "http://127.0.0.1:1/",
        ],
        // A step that cannot hold one request at the first rate.
        &[
            "--p99",
            "50ms",
            "--from",
            "2",
            "--upper",
            "2",
            "-d",
            "300ms",
            "http://127.0.0.1:1/",
        ],
    ] {
        let r = ceiling(args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("loader: "), "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
    }
}

/// The bucket caps what the origin answers: a closed-loop load as fast as it can go gets no
/// more than the rate times the time, plus the bucket's burst (a count, not a timing: a slow
/// machine only lowers it).
#[test]
fn origin_max_rate_answers_at_most_n_per_second() {
    let o = limited_origin(100.0);
    let mut opts = loader::RunOptions::for_urls(&[o.url("/")]).unwrap();
    opts.connections = 8;
    opts.duration = Some(Duration::from_millis(700));
    let t0 = std::time::Instant::now();
    let r = loader::run(&opts, shared::shutdown::ShutdownFlag::new()).unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let served = o.complete_requests();
    assert!(r.totals.completed > 0, "nothing answered");
    assert!(
        (served as f64) <= 100.0 * wall + 2.0,
        "{served} answered in {wall:.3} s at 100/s"
    );
    assert_eq!(r.totals.failures.total(), 0, "queued, not refused");
}

#[test]
fn upper_bounds_the_search_and_spin_is_passed_through() {
    let o = limited_origin(100_000.0);
    let url = o.url("/");
    let json = temp_path("upper.json");
    let j = json.display().to_string();
    let r = ceiling(&[
        "--p99",
        "2s",
        "-d",
        "300ms",
        "--warmup",
        "100ms",
        "-c",
        "4",
        "--threads",
        "1",
        "--from",
        "50",
        "--upper",
        "100",
        "--spin",
        "--json",
        &j,
        "-q",
        &url,
    ]);
    assert!(
        r.status.success() || r.stdout.contains("gen-limited"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stdout.contains(&format!(
            "Ceiling: 100 req/s at p99 <= 2s ({url}); at least: every step up to --upper passed"
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("--spin"), "{}", r.stdout);
    let doc = read_json(&json);
    let offered: Vec<f64> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        // A step the machine's stalls failed is run again: its verdict does not count.
        .filter(|s| s["rerun"] != true)
        .map(|s| s["offered"].as_f64().unwrap())
        .collect();
    assert_eq!(offered, [50.0, 100.0]);
    assert!(doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["run"]["rate"]["spin"] == true));
}
