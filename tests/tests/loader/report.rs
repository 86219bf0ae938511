//! The loader's outputs from synthetic results: the ab-style report (field names and numbers
//! exact), the `--json` schema (keys present, histograms decode to the same counts), the SVG
//! plot, the compare table, and /proc CPU times of this very process.

use loader::compare::{Comparison, Round, Side};
use loader::stats::{new_histogram, Counts, Histograms, LoadMode, RunResult, UrlResult};
use loader::sysinfo::SysInfo;
use shared::runtime::DriverKind;
use std::time::{Duration, SystemTime};

/// 200 complete requests in 2 s on 4 connections; every figure chosen so the report's
/// numbers can be computed by hand.
fn synthetic() -> RunResult {
    let mut totals = Counts {
        attempts: 213,
        completed: 200,
        non_2xx: 10,
        keep_alive: 190,
        bytes_received: 204_800,
        body_bytes: 160_000,
        bytes_sent: 16_000,
        ..Counts::default()
    };
    totals.failures.connect = 1;
    totals.failures.read = 2;
    totals.failures.parse = 1;
    totals.failures.length = 3;
    totals.failures.timeout = 4;
    totals.failures.write = 5;
    totals.status = vec![(200, 190), (404, 10)];

    let mut hist = Histograms::default();
    // Total: 100 requests of 1 ms and 100 of 2 ms (exact: below 2048 µs nothing is rounded).
    hist.total.record_n(1000, 100).unwrap();
    hist.total.record_n(2000, 100).unwrap();
    // Every histogram distinct from the others, so a report or document that reads the wrong
    // one shows it.
    hist.uncorrected.record_n(700, 200).unwrap();
    // 10 requests opened a connection (100 µs), 190 reused one (0).
    hist.connect.record_n(0, 190).unwrap();
    hist.connect.record_n(100, 10).unwrap();
    hist.processing.record_n(900, 200).unwrap();
    hist.waiting.record_n(800, 200).unwrap();
    hist.connect_per_connection.record_n(100, 10).unwrap();

    let url = UrlResult {
        url: "http://127.0.0.1:8080/index.html".into(),
        host: "127.0.0.1".into(),
        port: 8080,
        path: "/index.html".into(),
        document_length: Some(800),
        server_software: Some("test/1.0".into()),
        counts: totals.clone(),
        latency: Default::default(),
        hist: hist.total.clone(),
    };
    let started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    RunResult {
        started,
        ended: started + Duration::from_secs(2),
        elapsed: Duration::from_secs(2),
        drain: None,
        warmup: None,
        requests: Vec::new(),
        interrupted: false,
        concurrency: 4,
        pipeline: 1,
        keep_alive: true,
        http10: false,
        method: "GET".into(),
        mode: LoadMode::ClosedLoop,
        workers: 1,
        driver: DriverKind::Epoll,
        pinning: "1 worker, not pinned".into(),
        urls: vec![url],
        totals,
        hist,
        connections_opened: 10,
        tls: None,
        tls_protocol: None,
        source_addresses: 0,
        server_software: Some("test/1.0".into()),
        accept_variable_length: false,
        sends_body: false,
        spin: false,
        shard: None,
    }
}

/// Every recorded value of a histogram with its count (a macro: this crate does not name
/// the histogram type).
macro_rules! recorded {
    ($h:expr) => {
        $h.iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect::<Vec<(u64, u64)>>()
    };
}

fn line_with<'a>(report: &'a str, prefix: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{report}"))
}

fn fields(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn report_has_abs_fields_and_exact_numbers() {
    let report = loader::report::render(&synthetic());
    for expected in [
        "Server Software:        test/1.0",
        "Server Hostname:        127.0.0.1",
        "Server Port:            8080",
        "Document Path:          /index.html",
        "Document Length:        800 bytes",
        "Concurrency Level:      4",
        "Time taken for tests:   2.000 seconds",
        "Complete requests:      200",
        "Failed requests:        11",
        "   (Connect: 1, Receive: 3, Length: 3, Exceptions: 4)",
        "Write errors:           5",
        "Non-2xx responses:      10",
        "Keep-Alive requests:    190",
        "Total transferred:      204800 bytes",
        "HTML transferred:       160000 bytes",
        "Requests per second:    100.00 [#/sec] (mean)",
        "Time per request:       40.000 [ms] (mean)",
        "Time per request:       10.000 [ms] (mean, across all concurrent requests)",
        "Transfer rate:          100.00 [Kbytes/sec] received",
        "Connection Times (ms)",
        "Percentage of the requests served within a certain time (ms)",
        "msecs/connect: 0.100 mean, 0.100 max, 0.100 min",
        "msecs/first-response: 0.800 mean, 0.800 max, 0.800 min",
        "3 bad byte counts",
        "Socket errors: connect 1, read 3, write 5, timeout 4",
        "HTTP response codes:",
        "  code 200 -- 190",
        "  code 404 -- 10",
        "Connections opened:     10",
    ] {
        assert!(
            report.lines().any(|l| l == expected),
            "missing line {expected:?} in:\n{report}"
        );
    }
    // ab's order: the header block, then the counts, then the tables.
    let pos = |s: &str| report.find(s).unwrap();
    assert!(pos("Server Software:") < pos("Document Path:"));
    assert!(pos("Document Length:") < pos("Concurrency Level:"));
    assert!(pos("Complete requests:") < pos("Failed requests:"));
    assert!(pos("Transfer rate:") < pos("Connection Times (ms)"));
    assert!(pos("Connection Times (ms)") < pos("Percentage of the requests"));

    // Connection Times: name, min, mean, sd, median, max.
    assert_eq!(
        fields(line_with(&report, "Connect:")),
        ["Connect:", "0.000", "0.005", "0.022", "0.000", "0.100"]
    );
    assert_eq!(
        fields(line_with(&report, "Processing:")),
        ["Processing:", "0.900", "0.900", "0.000", "0.900", "0.900"]
    );
    assert_eq!(
        fields(line_with(&report, "Waiting:")),
        ["Waiting:", "0.800", "0.800", "0.000", "0.800", "0.800"]
    );
    assert_eq!(
        fields(line_with(&report, "Total:")),
        // ab's sd is the sample's (n - 1): 0.5 × √(200/199).
        ["Total:", "1.000", "1.500", "0.501", "2.000", "2.000"]
    );

    // Percentiles: ab's list, then 99.9, 99.99 and the longest request. ab's 50 % of 200 is
    // stats[100] (0-based): the first of the 2 ms ones.
    for p in [
        "50%", "66%", "75%", "80%", "90%", "95%", "98%", "99%", "99.9%", "99.99%",
    ] {
        assert_eq!(fields(line_with(&report, p)), [p, "2.000"]);
    }
    assert_eq!(
        fields(line_with(&report, "100%")),
        ["100%", "2.000", "(longest", "request)"]
    );

    // Closed loop, keep-alive, one URL: none of the optional blocks.
    assert!(!report.contains("Target rate"));
    assert!(!report.contains("Per-URL breakdown"));
    assert!(!report.contains("Source addresses"));
}

#[test]
fn rate_mode_says_when_the_target_was_missed() {
    let mut r = synthetic();
    r.mode = LoadMode::Rate { target: 200.0 };
    let report = loader::report::render(&r);
    assert!(
        report.contains("Target rate:            200.00 [#/sec]\n"),
        "{report}"
    );
    assert!(
        report.contains("Achieved rate:          100.00 [#/sec]\n"),
        "{report}"
    );
    assert!(
        report.contains("target rate NOT reached: 100.00 of 200.00 req/s (50.0%)"),
        "{report}"
    );
    // The uncorrected percentiles follow, from their own histogram.
    let unc = &report[report.find("Uncorrected").expect("uncorrected table")..];
    assert_eq!(fields(line_with(unc, "50%")), ["50%", "0.700"]);

    r.mode = LoadMode::Rate { target: 100.0 };
    let report = loader::report::render(&r);
    assert!(report.contains("Achieved rate:"));
    assert!(!report.contains("NOT reached"), "{report}");
}

/// The requests went out at the target rate (213 in 2 s for 100/s) and most failed (a
/// refused connect, say): the warning says they failed. It said to add connections or that
/// the server was saturated, which does not help when every send was on time.
#[test]
fn rate_warning_says_the_requests_failed_when_they_went_out_on_schedule() {
    let mut r = synthetic();
    r.mode = LoadMode::Rate { target: 100.0 };
    r.totals.completed = 20;
    let report = loader::report::render(&r);
    let warning = line_with(&report, "WARNING: target rate NOT reached");
    assert!(warning.contains("10.00 of 100.00 req/s"), "{warning}");
    assert!(
        warning.contains("sent at the rate") && warning.contains("193 of the 213 failed"),
        "{warning}"
    );
    assert!(!warning.contains("add connections"), "{warning}");
}

/// A target below one request a second (`--stages 1s:0.001`: a mean of 0.0005) is printed
/// with its significant digits: two decimals showed 0.00.
#[test]
fn a_low_target_rate_is_printed_with_its_digits() {
    let mut r = synthetic();
    for (target, text) in [(0.0005, "0.000500"), (0.25, "0.250"), (200.0, "200.00")] {
        r.mode = LoadMode::Rate { target };
        let report = loader::report::render(&r);
        let line = line_with(&report, "Target rate:");
        assert_eq!(
            line,
            format!("Target rate:            {text} [#/sec]"),
            "{target}"
        );
    }
    // The achieved rate too: 1 completed in 2 s.
    r.totals.completed = 1;
    let report = loader::report::render(&r);
    assert!(
        report.contains("Achieved rate:          0.500 [#/sec]"),
        "{report}"
    );
}

#[test]
fn urls_breakdown_close_sources_and_edge_cases() {
    let mut r = synthetic();
    let mut second = r.urls[0].clone();
    second.url = "http://127.0.0.1:8080/other".into();
    second.path = "/other".into();
    second.document_length = Some(12);
    second.counts.completed = 77;
    r.urls.push(second);
    r.keep_alive = false;
    r.source_addresses = 16;
    r.interrupted = true;
    let report = loader::report::render(&r);
    assert!(report.contains("Per-URL breakdown:"), "{report}");
    let other = line_with(&report, "77 ");
    assert!(other.ends_with("http://127.0.0.1:8080/other"), "{other}");
    assert!(fields(other).contains(&"12"), "{other}");
    assert!(report.contains("Source addresses:       16 "), "{report}");
    assert!(
        report.contains(
            "\nRequests sent:          GET HTTP/1.1, a connection per request (--close)\n"
        ),
        "{report}"
    );
    assert!(report.contains("Interrupted:"), "{report}");
    // ab names one document: with several URLs the report says it is only the first.
    assert!(
        report.contains("Document Path:          /index.html (the first of 2 URLs"),
        "{report}"
    );

    // -l: no length failures, ab's "Variable".
    r.accept_variable_length = true;
    let report = loader::report::render(&r);
    assert!(report.contains("Document Length:        Variable\n"));

    // Nothing completed: no division by zero, no tables of zeros.
    let mut r = synthetic();
    r.totals.completed = 0;
    r.totals.status.clear();
    r.hist = Histograms::default();
    r.urls[0].document_length = None;
    let report = loader::report::render(&r);
    assert!(
        report.contains("Requests per second:    0.00 [#/sec] (mean)"),
        "{report}"
    );
    assert!(!report.contains("Connection Times"), "{report}");
    assert!(
        !report.contains("NaN") && !report.contains("inf"),
        "{report}"
    );
    assert!(report.contains("HTTP response codes: none"), "{report}");
}

#[test]
fn json_has_every_figure_and_histograms_decode_to_the_same_counts() {
    let r = synthetic();
    let sys = SysInfo::collect(Some("epoll".into()));
    let doc = loader::json::document(&r, &sys);
    // It is JSON text that parses back.
    let text = serde_json::to_string(&doc).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for key in [
        "schema",
        "context",
        "server_software",
        "server_hostname",
        "server_port",
        "document_path",
        "document_length",
        "concurrency_level",
        "time_taken_s",
        "complete_requests",
        "failed_requests",
        "totals",
        "requests_per_second",
        "time_per_request_ms",
        "time_per_request_all_ms",
        "transfer_rate_kbytes_per_sec",
        "connection_times_ms",
        "percentiles_ms",
        "percentile_spectrum",
        "msecs_connect",
        "msecs_first_response",
        "bad_byte_counts",
        "socket_errors",
        "connections_opened",
        "source_addresses",
        "urls",
        "histograms",
        "options",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}");
    }
    assert_eq!(v["schema"], "loader-run/1");
    assert_eq!(v["complete_requests"], 200);
    assert_eq!(v["failed_requests"], 11);
    assert_eq!(v["requests_per_second"], 100.0);
    assert_eq!(v["time_per_request_ms"], 40.0);
    assert_eq!(v["totals"]["failures"]["connect"], 1);
    assert_eq!(v["totals"]["failures"]["receive"], 3);
    assert_eq!(v["totals"]["failures"]["exceptions"], 4);
    assert_eq!(v["totals"]["write_errors"], 5);
    assert_eq!(v["totals"]["status"]["404"], 10);
    assert_eq!(v["socket_errors"]["read"], 3);
    assert_eq!(v["connection_times_ms"]["total"]["mean"], 1.5);
    assert_eq!(v["percentiles_ms"]["50"], 2.0);
    assert_eq!(v["percentiles_ms"]["99.99"], 2.0);
    assert_eq!(v["percentiles_ms"]["100"], 2.0);
    assert_eq!(v["msecs_connect"]["mean"], 0.1);
    assert_eq!(v["urls"][0]["document_length"], 800);
    // The spectrum runs to 100 % and counts every request.
    let spectrum = v["percentile_spectrum"].as_array().unwrap();
    assert_eq!(spectrum.last().unwrap()["percentile"], 100.0);
    let counted: u64 = spectrum.iter().map(|p| p["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, 200);
    // Context: version, kernel, sysctls (null where unreadable, never missing).
    let ctx = &v["context"];
    assert_eq!(ctx["loader_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(ctx["driver"], "epoll");
    for key in ["kernel", "cpu_model", "cores", "open_files_limit"] {
        assert!(ctx.get(key).is_some(), "missing context key {key}");
    }
    for s in loader::sysinfo::SYSCTLS {
        assert!(ctx["sysctls"].get(*s).is_some(), "missing sysctl {s}");
    }
    // The encoded histograms decode to exactly the counts recorded: every value, every count.
    let h = &r.hist;
    for (key, want) in [
        ("total", &h.total),
        ("uncorrected", &h.uncorrected),
        ("connect", &h.connect),
        ("processing", &h.processing),
        ("waiting", &h.waiting),
        ("connect_per_connection", &h.connect_per_connection),
    ] {
        let got = loader::json::decode_histogram(v["histograms"][key].as_str().unwrap()).unwrap();
        assert_eq!(recorded!(got), recorded!(want), "{key}");
        assert!(!recorded!(want).is_empty(), "{key}");
    }
    let total = loader::json::decode_histogram(v["histograms"]["total"].as_str().unwrap()).unwrap();
    assert_eq!(total.len(), 200);
    assert_eq!(total.count_at(1000), 100);
    assert_eq!(total.count_at(2000), 100);
    let conn =
        loader::json::decode_histogram(v["histograms"]["connect"].as_str().unwrap()).unwrap();
    assert_eq!((conn.count_at(0), conn.count_at(100)), (190, 10));
    // Decoded histograms merge exactly.
    let mut merged = total.clone();
    merged.add(&total).unwrap();
    assert_eq!(merged.count_at(2000), 200);
    // Closed loop: no rate block.
    assert!(v["rate"].is_null());
}

#[test]
fn plot_is_an_svg_with_every_series() {
    let r = synthetic();
    let mut other = new_histogram();
    other.record_n(3000, 50).unwrap();
    let svg = loader::plot::render(
        "A vs B",
        &[
            loader::plot::Series {
                label: "A: direct".into(),
                hist: &r.hist.total,
            },
            loader::plot::Series {
                label: "B: proxy".into(),
                hist: &other,
            },
        ],
    );
    assert!(svg.starts_with("<?xml"), "{svg}");
    assert_eq!(svg.matches("<svg").count(), 1);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert!(svg.contains("data-label=\"A: direct\"") && svg.contains("data-label=\"B: proxy\""));
    for grid in ["0%", "90%", "99%", "99.9%"] {
        assert!(
            svg.contains(&format!(">{grid}</text>")),
            "no {grid} gridline"
        );
    }
    assert!(svg.contains("Latency (ms)") && svg.contains("Percentile"));
}

#[test]
fn procstat_reads_this_process() {
    let pid = std::process::id();
    let before = loader::procstat::cpu_times(pid).unwrap();
    // Spin until the kernel has charged at least one more clock tick (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut x = 1u64;
    let after = loop {
        for i in 0..100_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        let now = loader::procstat::cpu_times(pid).unwrap();
        if now.total() > before.total() || std::time::Instant::now() > deadline {
            break now;
        }
    };
    assert!(after.total() > before.total(), "CPU time did not grow");
    assert!(after.user >= before.user && after.system >= before.system);
    assert!(loader::procstat::cpu_times(u32::MAX).is_err());
}

#[test]
fn compare_table_has_medians_spreads_and_cpu_lines() {
    let round = |elapsed_ms: u64, user_ms: u64| {
        let mut r = synthetic();
        r.elapsed = Duration::from_millis(elapsed_ms);
        Round {
            result: r,
            watched: vec![Some(loader::procstat::CpuTimes {
                user: Duration::from_millis(user_ms),
                system: Duration::from_millis(2 * user_ms),
            })],
            loader_cpu: None,
        }
    };
    let c = Comparison {
        a: Side {
            url: "http://127.0.0.1:1/".into(),
            rounds: vec![round(2000, 0), round(1000, 0), round(4000, 0)],
        },
        b: Side {
            url: "http://127.0.0.1:2/".into(),
            rounds: vec![round(4000, 20), round(2000, 10), round(4000, 40)],
        },
        watch_pids: vec![4242],
        rounds_planned: 3,
        load: "-n 200 -c 4 keep-alive".into(),
        interrupted: false,
    };
    let table = loader::compare::render(&c);
    assert!(table.contains("Compared over 3 rounds"), "{table}");
    // A: 100, 200, 50 req/s → median 100; B: 50, 100, 50 → 50.
    assert_eq!(
        fields(line_with(&table, "Requests per second")),
        [
            "Requests",
            "per",
            "second",
            "100.00",
            "(50.00-200.00)",
            "50.00",
            "(50.00-100.00)"
        ]
    );
    // Paired ratios: 50 %, 50 %, 100 %.
    assert!(
        line_with(&table, "Performance").ends_with("50.00% (50.00-100.00)"),
        "{table}"
    );
    assert!(
        line_with(&table, "Time taken for tests").contains("2.000 (1.000-4.000)"),
        "{table}"
    );
    // B's pid used 10, 20 and 40 ms user over 200 requests: 50, 100, 200 µs per request.
    assert!(
        line_with(&table, "CPU pid 4242 user").ends_with("100.0 (50.0-200.0)"),
        "{table}"
    );
    assert!(
        line_with(&table, "CPU pid 4242 kernel").ends_with("200.0 (100.0-400.0)"),
        "{table}"
    );
    assert_eq!(
        fields(line_with(&table, "Complete requests (sum)"))[3..],
        ["600", "600"]
    );

    let doc = loader::compare::document(&c, &SysInfo::collect(None));
    assert_eq!(doc["schema"], "loader-compare/1");
    assert_eq!(doc["a"]["rounds"].as_array().unwrap().len(), 3);
    assert_eq!(
        doc["b"]["figures"]["pid_4242_user_us_per_request"]["median"],
        100.0
    );
    let merged =
        loader::json::decode_histogram(doc["b"]["merged"]["histogram_total"].as_str().unwrap())
            .unwrap();
    assert_eq!(merged.len(), 600);
}

#[test]
fn compare_says_which_side_answered_non_2xx() {
    // A side whose answers were errors (a proxy's fast 502s) must not read as the faster one
    // without a word: its non-2xx responses are summed in their own row, a note says its
    // figures include them, and the document carries them. They were counted as completed
    // requests and said nowhere.
    let round = |non_2xx: u64| {
        let mut r = synthetic();
        r.totals.non_2xx = non_2xx;
        Round {
            result: r,
            watched: vec![],
            loader_cpu: None,
        }
    };
    let c = Comparison {
        a: Side {
            url: "http://127.0.0.1:1/".into(),
            rounds: vec![round(0), round(0), round(0)],
        },
        b: Side {
            url: "http://127.0.0.1:2/".into(),
            rounds: vec![round(200), round(150), round(0)],
        },
        watch_pids: vec![],
        rounds_planned: 3,
        load: "-n 200 -c 4 keep-alive".into(),
        interrupted: false,
    };
    let table = loader::compare::render(&c);
    assert_eq!(
        fields(line_with(&table, "Non-2xx responses (sum)"))[3..],
        ["0", "350"],
        "{table}"
    );
    assert!(
        table.contains("B: 350 of 600 responses were not 2xx"),
        "{table}"
    );
    assert!(!table.contains("A: 0 of"), "{table}");
    let doc = loader::compare::document(&c, &SysInfo::collect(None));
    assert_eq!(doc["b"]["merged"]["non_2xx_responses"], 350);
    assert_eq!(doc["a"]["merged"]["non_2xx_responses"], 0);
}

#[test]
fn a_request_body_adds_abs_sent_lines() {
    let mut r = synthetic();
    let report = loader::report::render(&r);
    assert!(!report.contains("Total body sent"), "{report}");
    assert!(!report.contains("kb/s sent"), "{report}");
    // As ab -p prints them: after Total transferred, and under Transfer rate.
    r.sends_body = true;
    r.method = "POST".into();
    r.http10 = true;
    let report = loader::report::render(&r);
    let lines: Vec<&str> = report.lines().collect();
    let at = |p: &str| lines.iter().position(|l| l.starts_with(p)).expect(p);
    assert_eq!(
        lines[at("Total body sent:")],
        "Total body sent:        16000"
    );
    assert_eq!(at("Total body sent:"), at("Total transferred:") + 1);
    let rate = at("Transfer rate:");
    // 204800 bytes received and 16000 sent in 2 s.
    assert_eq!(
        lines[rate],
        "Transfer rate:          100.00 [Kbytes/sec] received"
    );
    assert_eq!(lines[rate + 1], "                        7.81 kb/s sent");
    assert_eq!(lines[rate + 2], "                        107.81 kb/s total");
    assert_eq!(
        lines[at("Requests sent:")],
        "Requests sent:          POST HTTP/1.0, keep-alive"
    );
}

#[test]
fn send_lateness_has_its_table_and_warns_when_it_is_a_tenth_of_the_tail() {
    let mut r = synthetic();
    // Closed loop: no schedule, no lateness section.
    assert!(!loader::report::render(&r).contains("Send lateness"));
    r.mode = LoadMode::Rate { target: 100.0 };
    // The corrected p99 is 2 ms; lateness of 0.5 ms is more than a tenth of it.
    r.hist.send_lateness.record_n(500, 100).unwrap();
    let report = loader::report::render(&r);
    let late = &report[report.find("\nSend lateness (ms").expect("heading") + 1..];
    assert!(late.starts_with("Send lateness (ms, actual minus intended send time, 100 sends"));
    assert_eq!(fields(line_with(late, "99%")), ["99%", "0.500"]);
    assert_eq!(
        fields(line_with(late, "100%")),
        ["100%", "0.500", "(latest", "send)"]
    );
    assert!(
        report.contains(
            "WARNING: the generator sent late: corrected latency includes up to 0.500 ms of \
             its own delay; see --spin\n"
        ),
        "{report}"
    );
    let json = loader::json::run_value(&r);
    assert_eq!(json["rate"]["sent_late_warning_ms"], 0.5);
    assert_eq!(json["rate"]["send_lateness_percentiles_ms"]["99"], 0.5);
    assert!(!json["histograms"]["send_lateness"]
        .as_str()
        .unwrap()
        .is_empty());
    // 0.1 ms is not: the table stays, the warning goes.
    r.hist.send_lateness.reset();
    r.hist.send_lateness.record_n(100, 100).unwrap();
    let report = loader::report::render(&r);
    assert!(report.contains("\nSend lateness (ms"), "{report}");
    assert!(!report.contains("sent late"), "{report}");
    assert_eq!(loader::figures::late_sender(&r), None);
    // The decision alone: strictly more than a tenth of the corrected p99.
    r.hist.send_lateness.reset();
    r.hist.send_lateness.record_n(201, 100).unwrap();
    assert_eq!(loader::figures::late_sender(&r), Some(201));
    r.hist.send_lateness.reset();
    r.hist.send_lateness.record_n(200, 100).unwrap();
    assert_eq!(loader::figures::late_sender(&r), None);
    // The warning's p99 is the table's (the same rank): of 100 sends 0.401 .. 0.500 ms late,
    // the 100th.
    r.hist.send_lateness.reset();
    for us in 401..=500 {
        r.hist.send_lateness.record(us).unwrap();
    }
    let report = loader::report::render(&r);
    let late = &report[report.find("\nSend lateness (ms").expect("heading") + 1..];
    assert_eq!(fields(line_with(late, "99%")), ["99%", "0.500"]);
    assert!(report.contains("includes up to 0.500 ms of"), "{report}");
}

#[test]
fn per_url_percentiles_come_from_each_urls_histogram() {
    let mut r = synthetic();
    let mut second = r.urls[0].clone();
    second.url = "http://127.0.0.1:8080/other".into();
    second.hist = new_histogram();
    second.hist.record_n(200, 5).unwrap();
    r.urls.push(second);
    let report = loader::report::render(&r);
    let table = &report[report.find("Per-URL percentiles").expect("table")..];
    let ending = |url: &str| {
        table
            .lines()
            .find(|l| l.ends_with(url))
            .unwrap_or_else(|| panic!("no row for {url} in:\n{table}"))
    };
    let other = ending("/other");
    assert_eq!(
        fields(other),
        [
            "0.200",
            "0.200",
            "0.200",
            "0.200",
            "0.200",
            "5",
            "http://127.0.0.1:8080/other"
        ]
    );
    let first = ending("/index.html");
    // 50 % of 100 × 1 ms and 100 × 2 ms: the 101st, ab's rank.
    assert_eq!(fields(first)[0], "2.000");
    assert_eq!(fields(first)[5], "200");
    let json = loader::json::run_value(&r);
    assert_eq!(json["urls"][1]["percentiles_ms"]["50"], 0.2);
    let h = loader::json::decode_histogram(json["urls"][1]["histogram"].as_str().unwrap());
    assert_eq!(h.unwrap().len(), 5);
}

/// ms with three decimals, as the report prints them.
fn ms3(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

/// ab's Connection Times (min, mean, sd, max) and the longest request are the requests' own
/// times, not the edges of the histogram's buckets: at 300 ms a bucket is 256 µs wide, so
/// bucket edges fall outside the observed range. A real run against the origin, checked
/// against every request's time (`-g`'s record).
#[test]
fn connection_times_are_the_requests_own_times_not_bucket_edges() {
    let o = tests::origin();
    let mut opt = crate::opts(&[o.url("/?delay=300")], 2);
    opt.requests = Some(4);
    opt.record_requests = Some(4);
    let r = crate::run(&opt);
    let us: Vec<f64> = r.requests.iter().map(|t| t.total_us as f64).collect();
    assert_eq!(us.len(), 4, "{:?}", r.totals);
    let n = us.len() as f64;
    let mean = us.iter().sum::<f64>() / n;
    // ab's sd: the sample standard deviation (n - 1).
    let sd = (us.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)).sqrt();
    let min = us.iter().copied().fold(f64::MAX, f64::min);
    let max = us.iter().copied().fold(0.0, f64::max);
    let report = loader::report::render(&r);
    let total = fields(line_with(&report, "Total:"));
    assert_eq!(
        [total[1], total[2], total[3], total[5]],
        [ms3(min), ms3(mean), ms3(sd), ms3(max)]
            .each_ref()
            .map(|s| s.as_str()),
        "{report}"
    );
    assert_eq!(
        fields(line_with(&report, "100%")),
        ["100%", &ms3(max), "(longest", "request)"]
    );
}

/// The exact times go into `--json` and come back out of it, so a document read back (what
/// `loader merge` adds up) reports the requests' own min, mean, sd and max, not bucket edges
/// (at 2.5 s a bucket is 2 ms wide).
#[test]
fn exact_times_survive_the_json_document() {
    let mut r = synthetic();
    let h = &mut r.hist;
    h.total.reset();
    h.sums.total = Default::default();
    for us in [2_501_217, 2_502_319] {
        loader::stats::record_exact(&mut h.total, &mut h.sums.total, us);
    }
    let doc: loader::json::RunDoc =
        serde_json::from_value(loader::json::run_value(&r)).expect("reads back");
    let back = doc.to_result().expect("a result");
    assert_eq!(back.hist.sums, r.hist.sums);
    let report = loader::report::render(&back);
    let total = fields(line_with(&report, "Total:"));
    assert_eq!(
        [total[1], total[2], total[3], total[5]],
        ["2501.217", "2501.768", "0.779", "2502.319"],
        "{report}"
    );
}

/// ab's percentile table takes stats[n·p/100] (0-based): of ten requests of 100 .. 1000 µs
/// (exact in the histogram), 50 % is the 6th, 66 % the 7th, 80 % the 9th, 90 % the 10th. Its
/// median is stats[n/2], and for an odd count the mean of stats[n/2] and stats[n/2 + 1].
#[test]
fn percentiles_and_medians_take_abs_ranks() {
    let mut r = synthetic();
    r.hist.total.reset();
    for k in 1..=10 {
        r.hist.total.record(k * 100).unwrap();
    }
    let report = loader::report::render(&r);
    for (p, ms) in [
        ("50%", "0.600"),
        ("66%", "0.700"),
        ("75%", "0.800"),
        ("80%", "0.900"),
        ("90%", "1.000"),
        ("99%", "1.000"),
    ] {
        assert_eq!(fields(line_with(&report, p)), [p, ms], "{report}");
    }
    assert_eq!(fields(line_with(&report, "Total:"))[4], "0.600", "{report}");
    let json = loader::json::run_value(&r);
    assert_eq!(json["percentiles_ms"]["50"], 0.6);
    assert_eq!(json["percentiles_ms"]["90"], 1.0);
    // Nine: ab's median is (500 + 600) / 2, its 50 % the 5th.
    r.hist.total.reset();
    for k in 1..=9 {
        r.hist.total.record(k * 100).unwrap();
    }
    let report = loader::report::render(&r);
    assert_eq!(fields(line_with(&report, "Total:"))[4], "0.550", "{report}");
    assert_eq!(fields(line_with(&report, "50%")), ["50%", "0.500"]);
}

/// wrk's "Non-2xx or 3xx responses" (its status > 399) beside ab's "Non-2xx responses" (which
/// counts the 302s too).
#[test]
fn wrks_non_2xx_or_3xx_line_leaves_redirects_out() {
    let mut r = synthetic();
    r.totals.status = vec![(200, 180), (302, 10), (404, 6), (503, 4)];
    r.totals.non_2xx = 20;
    let report = loader::report::render(&r);
    assert!(
        report.lines().any(|l| l == "Non-2xx responses:      20"),
        "{report}"
    );
    assert!(
        report.lines().any(|l| l == "Non-2xx or 3xx responses: 10"),
        "{report}"
    );
    let pos = |s: &str| report.find(s).unwrap();
    assert!(pos("Socket errors:") < pos("Non-2xx or 3xx responses:"));
}
