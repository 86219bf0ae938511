//! The loader through its binary: the report on stdout (and nothing else there), `--json` and
//! `--plot` files, exit statuses (0 completed, 1 nothing succeeded, 2 usage), one-line usage
//! errors, and `loader compare` with `--watch-pid`.

use shared::origin::{Origin, OriginConfig};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use tests::process::Process;

/// Run the loader binary with `args`; killed (and the test failed) after 60 s.
fn loader(args: &[&str]) -> Output {
    Process::spawn(
        Command::new(tests::bin("loader"))
            .args(args)
            .stdout(Stdio::piped()),
    )
    .output(Duration::from_secs(60))
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("loader-cli-{}-{name}", std::process::id()))
}

/// One worker, unpinned: the machine is shared with the origin running in this process.
const SMALL: &[&str] = &["--threads", "1", "--no-pin"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = SMALL.to_vec();
    v.extend_from_slice(extra);
    v
}

#[test]
fn report_on_stdout_counts_exactly_what_the_origin_served() {
    let origin = tests::origin();
    let url = origin.url("/page");
    let out = loader(&args(&["-n", "200", "-c", "4", &url]));
    let stdout = tests::text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        tests::text(&out.stderr)
    );
    assert!(
        stdout.contains("\nComplete requests:      200\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\nFailed requests:        0\n"), "{stdout}");
    assert!(
        stdout.contains("\nDocument Path:          /page\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nDocument Length:        64 bytes\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\nConcurrency Level:      4\n"), "{stdout}");
    assert!(stdout.contains("  code 200 -- 200\n"), "{stdout}");
    // stdout carries the report only: it starts with ab's first line.
    assert!(stdout.starts_with("Server Software:"), "{stdout}");
    assert!(!tests::text(&out.stderr).contains("Complete requests"));
    assert_eq!(origin.requests(), 200);
}

#[test]
fn json_and_plot_files() {
    let origin = tests::origin();
    let url = origin.url("/");
    let json_path = temp_path("run.json");
    let svg_path = temp_path("run.svg");
    let out = loader(&args(&[
        "-n",
        "100",
        "-c",
        "2",
        "-q",
        "--json",
        json_path.to_str().unwrap(),
        "--plot",
        svg_path.to_str().unwrap(),
        &url,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    for key in [
        "schema",
        "context",
        "complete_requests",
        "failed_requests",
        "requests_per_second",
        "connection_times_ms",
        "percentiles_ms",
        "percentile_spectrum",
        "histograms",
        "socket_errors",
        "totals",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}");
    }
    assert_eq!(v["complete_requests"], 100);
    assert_eq!(v["totals"]["status"]["200"], 100);
    assert!(v["context"]["sysctls"].get("net.core.somaxconn").is_some());
    let total = loader::json::decode_histogram(v["histograms"]["total"].as_str().unwrap()).unwrap();
    assert_eq!(total.len(), 100);
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<polyline").count(), 1);
    let _ = std::fs::remove_file(json_path);
    let _ = std::fs::remove_file(svg_path);
    assert_eq!(origin.requests(), 100);
}

/// `compare` and `ceiling` check every output path before any load, as a plain run does: a
/// path that cannot be written is a usage error (exit 2) naming the flag, and the target
/// sees no request (the whole comparison or search used to run, then fail with exit 1).
#[test]
fn compare_and_ceiling_check_their_output_paths_before_the_load() {
    let origin = tests::origin();
    let (a, b) = (origin.url("/a"), origin.url("/b"));
    let bad = "/nonexistent/loader-test/out";
    let search: &[&str] = &["ceiling", "--p99", "1s", "--from", "10", "--upper", "10"];
    let search = [search, &["-d", "100ms", "-c", "1", "-q"]].concat();
    for (head, flag) in [
        (
            vec!["compare", &a, &b, "-n", "1", "-c", "1", "-q"],
            "--json",
        ),
        (
            vec!["compare", &a, &b, "-n", "1", "-c", "1", "-q"],
            "--plot",
        ),
        ([search.clone(), vec![&a]].concat(), "--json"),
        ([search.clone(), vec![&a]].concat(), "--plot"),
    ] {
        let mut argv = head.clone();
        argv.extend([flag, bad]);
        argv.extend(SMALL);
        let out = loader(&argv);
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{argv:?}: {}",
            tests::text(&out.stdout)
        );
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{argv:?}: not one line: {stderr}");
        assert!(
            lines[0].starts_with(&format!("loader: {flag} {bad}: ")),
            "{argv:?}: {stderr}"
        );
    }
    assert_eq!(
        origin.requests(),
        0,
        "a load ran before the paths were checked"
    );
}

/// `compare --urls FILE` (or `--targets FILE`) would send the file's URLs from both sides, A
/// and B no longer being what the table names: a usage error, with no load run.
#[test]
fn compare_refuses_url_files() {
    let origin = tests::origin();
    let (a, b) = (origin.url("/a"), origin.url("/b"));
    let file = temp_path("compare-urls.txt");
    std::fs::write(&file, format!("{}\n", origin.url("/from-the-file"))).unwrap();
    let f = file.display().to_string();
    for flag in ["--urls", "--targets"] {
        let argv = ["compare", &a, &b, "-n", "2", "-c", "1", "-q", flag, &f];
        let out = loader(&[&argv[..], SMALL].concat());
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{flag}: {}",
            tests::text(&out.stdout)
        );
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{flag}: not one line: {stderr}");
        assert!(lines[0].starts_with(&format!("loader: {flag}")), "{stderr}");
        assert!(lines[0].contains("compare"), "{stderr}");
    }
    let _ = std::fs::remove_file(&file);
    assert_eq!(origin.requests(), 0);
}

#[test]
fn nothing_listening_exits_1_with_every_attempt_counted() {
    // Bound and not listening for the whole test: connects are refused.
    let closed = tests::ClosedPort::new();
    let port = closed.port();
    let url = format!("http://127.0.0.1:{port}/");
    let out = loader(&args(&["-n", "20", "-c", "2", "-q", &url]));
    let stdout = tests::text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{}",
        tests::text(&out.stderr)
    );
    assert!(stdout.contains("\nComplete requests:      0\n"), "{stdout}");
    assert!(
        stdout.contains("\nFailed requests:        20\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(Connect: 20, Receive: 0, Length: 0, Exceptions: 0)"),
        "{stdout}"
    );
    // The report counts; stderr says why, once.
    let stderr = tests::text(&out.stderr);
    let why: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(&format!("connect to 127.0.0.1:{port} failed: ")))
        .collect();
    assert_eq!(why.len(), 1, "{stderr}");
    assert!(why[0].contains("refused"), "{stderr}");
}

#[test]
fn usage_errors_exit_2_with_one_line_naming_the_problem() {
    for (flags, names) in [
        (&["-c", "0", "http://127.0.0.1:1/"][..], "connections"),
        (&["-d", "3x", "http://127.0.0.1:1/"][..], "3x"),
        // ab's seconds below a nanosecond: a zero load period or timeout, as -d 0 would be.
        (
            &["-t", "0.0000000001", "http://127.0.0.1:1/"][..],
            "more than zero",
        ),
        (
            &["-s", "0.0000000001", "http://127.0.0.1:1/"][..],
            "more than zero",
        ),
        (
            &["--no-such-flag", "http://127.0.0.1:1/"][..],
            "--no-such-flag",
        ),
        (
            &["--cacert", "/nonexistent/ca.pem", "https://127.0.0.1:1/"][..],
            "CA file /nonexistent/ca.pem",
        ),
        (&["-n", "10"][..], "required"),
        (&["compare", "http://127.0.0.1:1/"][..], "<URL_B>"),
        (
            &["--body", "/nonexistent/body", "http://127.0.0.1:1/"][..],
            "--body /nonexistent/body",
        ),
        // An ab command line (its defaults noted), more connections than requests (noted
        // too): when it is a usage error, the error alone.
        (
            &["-k", "-n", "2", "-H", "bad", "http://127.0.0.1:1/"][..],
            "invalid header",
        ),
        (
            &[
                "-c",
                "9",
                "-n",
                "2",
                "--close",
                "--pipeline",
                "2",
                "http://127.0.0.1:1/",
            ][..],
            "--pipeline",
        ),
        // ab: "Cannot mix HEAD with other methods"; a HEAD has no body.
        (&["-i", "-p", "Cargo.toml", "http://127.0.0.1:1/"][..], "-i"),
        (&["-i", "-u", "Cargo.toml", "http://127.0.0.1:1/"][..], "-i"),
        (
            &["-i", "--body", "Cargo.toml", "http://127.0.0.1:1/"][..],
            "-i",
        ),
    ] {
        let out = loader(flags);
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{flags:?}: stdout {:?}",
            tests::text(&out.stdout)
        );
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{flags:?}: not one line: {stderr}");
        assert!(lines[0].contains(names), "{flags:?}: {stderr}");
        // One style for every error of both binaries: `NAME: message`.
        assert!(lines[0].starts_with("loader: "), "{flags:?}: {stderr}");
        assert!(!lines[0].contains("error: "), "{flags:?}: {stderr}");
    }
}

/// A rate below 0.001 req/s (the unit `--shard` splits rates in) is a usage error in every
/// command that takes one. A tinier rate put the connections' staggered first sends (c/R
/// apart) past what the clock holds, and the worker threads panicked.
#[test]
fn a_rate_too_low_to_schedule_is_a_usage_error() {
    let url = "http://127.0.0.1:1/";
    for flags in [
        &["-q", "-c", "3", "-n", "3", "--rate", "1e-19", url][..],
        &["-q", "-c", "3", "-n", "3", "--rate", "1e-300", url][..],
        &["-q", "-d", "1s", "-R", "1e-300", url][..],
        &["-q", "-n", "3", "--rate", "0.0009", url][..],
        &["-q", "--stages", "1s:1e-300", url][..],
        &[
            "compare",
            url,
            "http://127.0.0.1:2/",
            "-n",
            "3",
            "--rate",
            "1e-300",
        ][..],
    ] {
        let out = loader(&args(flags));
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{flags:?}: not one line: {stderr}");
        assert!(lines[0].starts_with("loader: "), "{flags:?}: {stderr}");
        assert!(lines[0].contains("0.001"), "{flags:?}: {stderr}");
    }
}

/// A header value with a control character, from `-H` or a `--targets` file (a bare CR was
/// sent on the wire from the file: a header injected), is a usage error on one line.
#[test]
fn header_values_with_control_characters_are_usage_errors() {
    let path = temp_path("ctl-targets");
    let file = path.display().to_string();
    std::fs::write(&path, "GET http://127.0.0.1:1/\nX-A: a\rInjected: 1\n").unwrap();
    for (flags, names) in [
        (
            &["-n", "1", "-H", "X-A: a\x01b", "http://127.0.0.1:1/"][..],
            "control character '\\u{1}'".to_string(),
        ),
        (
            &["-n", "1", "--targets", &file][..],
            format!("--targets {file}:2: "),
        ),
    ] {
        let out = loader(&args(flags));
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(!stderr.contains('\r'), "{flags:?}: not escaped: {stderr:?}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{flags:?}: not one line: {stderr}");
        assert!(lines[0].starts_with("loader: "), "{flags:?}: {stderr}");
        assert!(lines[0].contains(&names), "{flags:?}: {stderr}");
        assert!(
            lines[0].contains("control character"),
            "{flags:?}: {stderr}"
        );
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn compare_runs_interleaved_rounds_and_reports_watched_cpu() {
    let a = tests::origin();
    let b = tests::origin();
    let (url_a, url_b) = (a.url("/"), b.url("/"));
    // The origins run in this process: watch it.
    let pid = std::process::id().to_string();
    let json_path = temp_path("compare.json");
    let svg_path = temp_path("compare.svg");
    let mut argv = vec!["compare", url_a.as_str(), url_b.as_str()];
    argv.extend(args(&[
        "-n",
        "100",
        "-c",
        "2",
        "--rounds",
        "3",
        "--watch-pid",
        &pid,
        "--json",
        json_path.to_str().unwrap(),
        "--plot",
        svg_path.to_str().unwrap(),
    ]));
    let out = loader(&argv);
    let stdout = tests::text(&out.stdout);
    let stderr = tests::text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.starts_with("Compared over 3 rounds"), "{stdout}");
    for row in [
        "Time taken for tests (s)",
        "Requests per second",
        "Time per request (ms, mean)",
        "p99 (ms)",
        "Transfer rate (Kbytes/sec)",
        "Performance (req/s vs A)",
        &format!("CPU pid {pid} user (us/req)"),
        &format!("CPU pid {pid} kernel (us/req)"),
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(row)),
            "no row {row:?}:\n{stdout}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("Complete requests (sum)")
                && l.split_whitespace().skip(3).eq(["300", "300"])),
        "{stdout}"
    );
    // The rounds alternate, logged on stderr.
    let order: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("round "))
        .map(|l| l.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(
        order,
        ["1/3 A", "1/3 B", "2/3 A", "2/3 B", "3/3 A", "3/3 B"],
        "{stderr}"
    );
    assert_eq!((a.requests(), b.requests()), (300, 300));

    // --json: both sides, every round, the merged histograms; --plot: one curve per side.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(v["schema"], "loader-compare/1");
    for side in ["a", "b"] {
        assert_eq!(v[side]["rounds"].as_array().unwrap().len(), 3);
        assert_eq!(v[side]["merged"]["complete_requests"], 300);
        let h =
            loader::json::decode_histogram(v[side]["merged"]["histogram_total"].as_str().unwrap())
                .unwrap();
        assert_eq!(h.len(), 300);
        assert!(
            v[side]["figures"]["requests_per_second"]["median"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
    assert!(v["b"]["figures"]["performance_vs_a_percent"].is_object());
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 2);
    let _ = std::fs::remove_file(json_path);
    let _ = std::fs::remove_file(svg_path);

    // A pid that does not exist is a usage error.
    let out = loader(&[
        "compare",
        &url_a,
        &url_b,
        "-n",
        "1",
        "--watch-pid",
        "4294967295",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", tests::text(&out.stderr));
    assert!(tests::text(&out.stderr).contains("--watch-pid"));
}

/// `--stages` sets the run's length: a duration given too is a usage error (one line, exit 2),
/// as `-d` or as ab's `-t` time limit. `-t` was ignored: the ramp ran for its own length.
#[test]
fn stages_refuse_a_duration_given_as_d_or_t() {
    for flags in [&["-d", "5"][..], &["-t", "5"][..]] {
        let out = loader(&[&["--stages", "1s:10"], flags, &["http://127.0.0.1:1/"]].concat());
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{flags:?}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{flags:?}: not one line: {stderr}");
        assert!(lines[0].contains("--stages"), "{flags:?}: {stderr}");
    }
}

/// `--body` writes Content-Length itself: one given with -H is sent once when it agrees and
/// is a usage error when it does not; `-T` without a body and `--spin` without `--rate` are
/// usage errors too.
#[test]
fn body_headers_are_checked_and_content_length_sent_once() {
    let body = temp_path("body.txt");
    std::fs::write(&body, b"hello").unwrap();
    let b = body.to_str().unwrap();
    for (flags, names) in [
        (
            &[
                "--body",
                b,
                "-H",
                "Content-Length: 6",
                "http://127.0.0.1:1/",
            ][..],
            "Content-Length: 6",
        ),
        (
            &["-H", "content-length: 3", "http://127.0.0.1:1/"][..],
            "content-length: 3",
        ),
        (&["-T", "text/plain", "http://127.0.0.1:1/"][..], "--body"),
        (&["--spin", "http://127.0.0.1:1/"][..], "--rate"),
    ] {
        let out = loader(flags);
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{flags:?}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{flags:?}: not one line: {stderr}");
        assert!(lines[0].contains(names), "{flags:?}: {stderr}");
    }
    let o = Origin::start(OriginConfig {
        capture: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let url = o.url("/");
    let out = loader(&args(&[
        "-n",
        "2",
        "-c",
        "1",
        "-q",
        "--body",
        b,
        "-H",
        "Content-Length: 5",
        "-T",
        "text/plain",
        &url,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
    let got = o.captured();
    assert_eq!(got.len(), 2);
    for req in got {
        let req = tests::text(&req).to_ascii_lowercase();
        assert_eq!(req.matches("content-length:").count(), 1, "{req}");
        assert!(req.contains("content-length: 5\r\n"), "{req}");
        assert!(req.contains("content-type: text/plain\r\n"), "{req}");
        assert!(req.ends_with("\r\n\r\nhello"), "{req}");
    }
    assert_eq!(o.body_bytes(), 10);
    let _ = std::fs::remove_file(body);
}

/// The Content-Length sent is always the body's length. A `-H "Content-Length: N"` was checked
/// against `--body` alone, and replaced the loader's own on every request: a `--targets`
/// request's own 10-byte @FILE went out under `Content-Length: 0` (`0123456789GET /t2` on the
/// wire, the request smuggling shape) and the run reported Complete 4, Failed 0; `--body` of 7
/// bytes with `-H "Content-Length: 7"` sent 7 for the target's 10 too. Now a `-H`
/// Content-Length that disagrees with any request's body is a usage error naming the target;
/// one that agrees with every body is sent once, as the body's length.
#[test]
fn a_content_length_header_must_agree_with_every_targets_body() {
    let dir = tests::temp_dir("loader-cl-targets");
    let (body7, body10) = (dir.join("body7.txt"), dir.join("body10.txt"));
    std::fs::write(&body7, b"abc\ndef").unwrap();
    std::fs::write(&body10, b"0123456789").unwrap();
    let o = Origin::start(OriginConfig {
        capture: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let targets = dir.join("targets.txt");
    let text = format!(
        "POST {}\nX-T: 1\n@{}\n\nGET {}\n",
        o.url("/t1"),
        body10.display(),
        o.url("/t2")
    );
    std::fs::write(&targets, text).unwrap();
    let t = targets.to_str().unwrap();
    for extra in [
        &["-H", "Content-Length: 0"][..],
        &["--body", body7.to_str().unwrap(), "-H", "Content-Length: 7"][..],
    ] {
        let out = loader(&args(
            &[&["-n", "4", "-c", "1", "-q", "--targets", t], extra].concat(),
        ));
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{extra:?}: not one line: {stderr}");
        assert!(lines[0].contains(&o.url("/t1")), "{extra:?}: {stderr}");
        assert!(lines[0].contains("10 bytes"), "{extra:?}: {stderr}");
    }
    assert!(o.captured().is_empty(), "a request was sent");
    // Agreeing with every body (10, and --body's 10 for the GET): each request carries one
    // Content-Length, its body's.
    let out = loader(&args(&[
        "-n",
        "4",
        "-c",
        "1",
        "-q",
        "--targets",
        t,
        "--body",
        body10.to_str().unwrap(),
        "-H",
        "Content-Length: 10",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
    let got = o.captured();
    assert_eq!(got.len(), 4);
    for req in got {
        let req = tests::text(&req).to_ascii_lowercase();
        assert_eq!(req.matches("content-length:").count(), 1, "{req}");
        assert!(req.contains("content-length: 10\r\n"), "{req}");
        assert!(req.ends_with("\r\n\r\n0123456789"), "{req}");
    }
}

/// RFC 9110 8.6: Content-Length = 1*DIGIT. `-H "Content-Length: +7"` passed the agreement
/// check (Rust's u64 parse takes a leading '+') and was sent as written, which a strict server
/// refuses and a lax one may read otherwise. Now a usage error, as any non-digit value is.
#[test]
fn a_content_length_header_is_digits_only() {
    let body = temp_path("body7.txt");
    std::fs::write(&body, b"abc\ndef").unwrap();
    let b = body.to_str().unwrap();
    for (flags, names) in [
        (&["--body", b, "-H", "content-length: +7"][..], "+7"),
        (&["-H", "Content-Length: +0"][..], "+0"),
        (&["--body", b, "-H", "Content-Length: 7 7"][..], "7 7"),
    ] {
        let out = loader(&args(
            &[flags, &["-n", "1", "http://127.0.0.1:1/"]].concat(),
        ));
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{flags:?}: not one line: {stderr}");
        assert!(lines[0].contains(names), "{flags:?}: {stderr}");
        assert!(lines[0].contains("digits"), "{flags:?}: {stderr}");
    }
    let _ = std::fs::remove_file(body);
}

/// Each field once (RFC 9112 3.2: two Host fields are a 400; RFC 6265 5.4: one Cookie field).
/// `-H "Host: a"` beside a `--targets` request's own Host sent both, as did `-H Host` twice,
/// `-H "Content-Length: 0"` twice and repeated `-C`. Now a name given again replaces the
/// earlier value (a later -H over an earlier one, a target's own line over -H), except Cookie,
/// whose values are joined into one field.
#[test]
fn each_request_field_is_sent_once() {
    let dir = tests::temp_dir("loader-dup-fields");
    let o = Origin::start(OriginConfig {
        capture: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let targets = dir.join("targets.txt");
    let text = format!("GET {}\nHost: b.example\nCookie: c=3\n", o.url("/h"));
    std::fs::write(&targets, text).unwrap();
    let common = [
        "-n",
        "1",
        "-c",
        "1",
        "-q",
        "-H",
        "Host: a.example",
        "-H",
        "Host: z.example",
        "-C",
        "a=1",
        "-C",
        "b=2",
        "-H",
        "Content-Length: 0",
        "-H",
        "content-length: 0",
        "-H",
        "X-A: 1",
        "-H",
        "x-a: 2",
    ];
    let url = o.url("/u");
    let runs: [(&[&str], &str, &str); 2] = [
        (
            &["--targets", targets.to_str().unwrap()],
            "b.example",
            "a=1; b=2; c=3",
        ),
        (&[&url], "z.example", "a=1; b=2"),
    ];
    for (extra, host, cookie) in runs {
        let out = loader(&args(&[&common[..], extra].concat()));
        assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
        let got = o.captured();
        let req = tests::text(got.last().expect("a request")).to_ascii_lowercase();
        // Each line with its CRLF, the last one's included.
        let head = req.split_inclusive("\r\n\r\n").next().unwrap();
        let count = |name: &str| {
            head.lines()
                .filter(|l| l.starts_with(&format!("{name}:")))
                .count()
        };
        for name in ["host", "cookie", "content-length", "x-a"] {
            assert_eq!(count(name), 1, "{name}: {head}");
        }
        assert!(head.contains(&format!("\r\nhost: {host}\r\n")), "{head}");
        assert!(
            head.contains(&format!("\r\ncookie: {cookie}\r\n")),
            "{head}"
        );
        assert!(head.contains("\r\nx-a: 2\r\n"), "{head}");
    }
}

/// docs/man/loader.1 is what the clap definitions make (`UPDATE_MAN=1` rewrites it).
#[test]
fn man_page_is_current() {
    use clap::CommandFactory;
    tests::manual::check_man_page(loader::cli::Cli::command());
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    tests::manual::check_completions("loader", &["connections", "compare", "merge"]);
}

/// The value after `label` on its line of the report.
fn value<'a>(report: &'a str, label: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no '{label}' in:\n{report}"))
        .trim()
}

/// ab refuses -c above -n; the loader runs as many connections as requests, says so in one
/// line on stderr, and ab's Concurrency Level and Time per request (concurrency × time taken /
/// complete) use the connections it ran: -n 2 -c 300 said 300, and a Time per request 150
/// times too long.
#[test]
fn more_connections_than_requests_are_capped_at_n_with_a_note() {
    let origin = tests::origin();
    let url = origin.url("/");
    let out = loader(&args(&["-q", "-n", "2", "-c", "300", &url]));
    let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(value(&stdout, "Concurrency Level:"), "2", "{stdout}");
    let tpr = |suffix: &str| -> f64 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with("Time per request:") && l.ends_with(suffix))
            .unwrap_or_else(|| panic!("no Time per request {suffix} in:\n{stdout}"));
        line.split_whitespace().nth(3).unwrap().parse().unwrap()
    };
    let (mean, across) = (tpr("(mean)"), tpr("concurrent requests)"));
    assert!((mean - 2.0 * across).abs() <= 0.002, "{stdout}");
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("-c 300")).collect();
    assert_eq!(notes.len(), 1, "{stderr}");
    assert_eq!(origin.connections(), 2);
}
