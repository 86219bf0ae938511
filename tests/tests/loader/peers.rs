//! The command lines of wrk, wrk2 and ab, as their READMEs and man pages write them (with
//! sub-second durations and small counts), run by the loader binary against the test origin:
//! each must run unchanged and count exactly what the origin served.

use std::process::{Command, Output, Stdio};
use std::time::Duration;
use tests::process::Process;

/// The loader binary with `args` as a user of another tool types them (plus --no-pin: the
/// machine is shared); killed (and failed) after 60 s.
fn loader(args: &[&str]) -> Output {
    Process::spawn(
        Command::new(tests::bin("loader"))
            .arg("--no-pin")
            .args(args)
            .stdout(Stdio::piped()),
    )
    .output(Duration::from_secs(60))
}

/// The value after `label` on its line of the report.
fn value<'a>(report: &'a str, label: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no '{label}' in:\n{report}"))
        .trim()
}

/// Exit 0 and Complete requests equal to what the origin served; returns the report.
fn ran_exactly(out: &Output, served: u64) -> String {
    let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        value(&stdout, "Complete requests:"),
        served.to_string(),
        "{stdout}"
    );
    assert_eq!(value(&stdout, "Failed requests:"), "0", "{stdout}");
    stdout
}

/// wrk's README: `wrk -t12 -c400 -d30s --latency URL`.
#[test]
fn wrk_readme_command_line() {
    let o = tests::origin();
    let out = loader(&["-t2", "-c8", "-d300ms", "--latency", &o.url("/index.html")]);
    let report = ran_exactly(&out, o.requests());
    assert!(value(&report, "Workers:").starts_with("2 "), "{report}");
    assert!(
        report.contains("\n  Latency Distribution\n     50%"),
        "{report}"
    );
    assert!(report.contains("\n     99%"), "{report}");
}

/// wrk2's README: `wrk -t2 -c100 -d30s -R2000 URL`: open loop, latency corrected.
#[test]
fn wrk2_readme_command_line() {
    let o = tests::origin();
    let out = loader(&["-t2", "-c10", "-d500ms", "-R200", &o.url("/index.html")]);
    let report = ran_exactly(&out, o.requests());
    assert!(report.contains("corrected"), "{report}");
    // wrk2 reads -R 2k as 2000.
    let out = loader(&["-t1", "-c2", "-d200ms", "-R", "0.2k", &o.url("/")]);
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
}

/// wrk's `-s script.lua`: one line saying scripts are not supported and what to use.
#[test]
fn wrk_scripts_are_refused_in_one_line() {
    let o = tests::origin();
    for args in [
        &["-t2", "-c10", "-d1s", "-s", "post.lua", "URL"][..],
        &["-c10", "-s", "post.lua", "URL"][..],
    ] {
        let url = o.url("/");
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "URL" { url.as_str() } else { *a })
            .collect();
        let out = loader(&args);
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("Lua scripts are not supported"), "{stderr}");
    }
    assert_eq!(o.requests(), 0);
}

/// ab's man page: `ab -n 1000 -c 10 -p post.json -T application/json URL`, `ab -kc 10 -n 100
/// URL`, `ab -t 30 -c 10 URL`, `ab -u put.txt ...`, `-C`, `-A`, `-s`, `-q`, `-e`, `-g`.
#[test]
fn ab_man_page_command_lines() {
    let o = tests::capturing_origin();
    let dir = tests::temp_dir("peers-ab");
    let post = dir.join("post.json");
    std::fs::write(&post, br#"{"a":1}"#).unwrap();
    let (csv, tsv) = (dir.join("p.csv"), dir.join("g.tsv"));
    let url = o.url("/form");
    let post_s = post.to_str().unwrap();
    let out = loader(&[
        "-n",
        "40",
        "-c",
        "4",
        "-p",
        post_s,
        "-T",
        "application/json",
        &url,
    ]);
    ran_exactly(&out, 40);
    let out = loader(&["-kc", "4", "-n", "30", &url]);
    ran_exactly(&out, 30);
    let out = loader(&[
        "-n",
        "20",
        "-c",
        "2",
        "-u",
        post_s,
        "-C",
        "s=1",
        "-A",
        "u:p",
        "-s",
        "5",
        "-q",
        "-e",
        csv.to_str().unwrap(),
        "-g",
        tsv.to_str().unwrap(),
        &url,
    ]);
    ran_exactly(&out, 20);
    assert_eq!(o.requests(), 90);
    let got = o.captured();
    let posts = got.iter().filter(|r| r.starts_with(b"POST /form")).count();
    let puts: Vec<String> = got
        .iter()
        .filter(|r| r.starts_with(b"PUT /form"))
        .map(|r| tests::text(r))
        .collect();
    assert_eq!((posts, puts.len()), (40, 20));
    assert!(puts[0].contains("\r\nCookie: s=1\r\n"), "{}", puts[0]);
    // ab's type for -p and -u without -T.
    assert!(
        puts[0].contains("\r\nContent-Type: text/plain\r\n"),
        "{}",
        puts[0]
    );
    assert!(
        puts[0].contains("\r\nAuthorization: Basic dTpw\r\n"),
        "{}",
        puts[0]
    );
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.starts_with("Percentage served,Time in ms\n0,"), "{csv}");
    assert_eq!(csv.lines().count(), 102);
    let tsv = std::fs::read_to_string(&tsv).unwrap();
    assert!(
        tsv.starts_with("starttime\tseconds\tctime\tdtime\tttime\twait\n"),
        "{tsv}"
    );
    assert_eq!(tsv.lines().count(), 21, "a row per request");
    // ab's -t: a time limit (without -d), at most 50000 requests.
    let before = o.requests();
    let out = loader(&["-t", "0.3", "-c", "2", &url]);
    ran_exactly(&out, o.requests() - before);
}

/// An unknown option keeps clap's suggestion on its one line.
#[test]
fn a_mistyped_option_is_one_line_with_the_suggestion() {
    let out = loader(&["--thread", "4", "http://127.0.0.1:1/"]);
    let stderr = tests::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("'--threads'"), "{stderr}");
}

/// ab's `-e`: the 0 % row is the fastest request and the 100 % row the slowest, exactly (as
/// the per-URL table's exact Min and Max say), not the edges of their histogram buckets (at
/// 300 ms a bucket is 256 µs wide).
#[test]
fn ab_csv_first_and_last_rows_are_the_fastest_and_slowest_requests() {
    let o = tests::origin();
    let dir = tests::temp_dir("peers-e-exact");
    let csv = dir.join("p.csv");
    let (a, b) = (o.url("/?delay=300"), o.url("/?delay=300&b"));
    let out = loader(&[
        "-q",
        "-n",
        "4",
        "-c",
        "2",
        "-e",
        csv.to_str().unwrap(),
        &a,
        &b,
    ]);
    let report = ran_exactly(&out, 4);
    let table = &report[report.find("Per-URL breakdown").expect("table")..];
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.contains("delay=300"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{table}"); // two in each table
    let ms = |s: &str| s.parse::<f64>().unwrap();
    let min = rows[..2].iter().map(|r| ms(r[5])).fold(f64::MAX, f64::min);
    let max = rows[..2].iter().map(|r| ms(r[6])).fold(0.0, f64::max);
    let csv = std::fs::read_to_string(&csv).unwrap();
    let row = |p: &str| {
        csv.lines()
            .find_map(|l| l.strip_prefix(&format!("{p},")))
            .map(ms)
            .unwrap_or_else(|| panic!("no row {p} in {csv}"))
    };
    assert_eq!((row("0"), row("100")), (min, max), "{csv}\n{report}");
}

/// `ab -k -n 20 URL` runs one connection (ab's default -c) and `wrk -t1 -d... --latency URL`
/// ten (wrk's): a command line only ab or only wrk would write gets that tool's defaults, and
/// a line on stderr says which.
#[test]
fn a_peers_command_line_without_c_runs_the_peers_connections() {
    let o = tests::origin();
    let out = loader(&["-q", "-k", "-n", "20", &o.url("/")]);
    let report = ran_exactly(&out, 20);
    assert_eq!(value(&report, "Concurrency Level:"), "1", "{report}");
    assert_eq!(o.connections(), 1);
    let stderr = tests::text(&out.stderr);
    assert!(stderr.contains("ab's"), "{stderr}");
    let o = tests::origin();
    let out = loader(&["-q", "-t1", "-d", "200ms", "--latency", &o.url("/")]);
    let report = ran_exactly(&out, o.requests());
    assert_eq!(value(&report, "Concurrency Level:"), "10", "{report}");
    assert!(tests::text(&out.stderr).contains("wrk's"));
}
