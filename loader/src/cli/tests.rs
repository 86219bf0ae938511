//! The command line's parsing and validation, tested without running anything.

use super::*;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("loader").chain(args.iter().copied()))
}

#[test]
fn plain_run_flags() {
    let c = parse(&[
        "-c",
        "8",
        "-n",
        "100",
        "--threads",
        "2",
        "-H",
        "X-A: b",
        "-k",
        "http://127.0.0.1:1/x",
    ])
    .unwrap();
    assert!(c.command.is_none());
    let o = c.load.to_options(&c.urls).unwrap();
    assert_eq!(
        (o.connections, o.requests, o.runtime.workers),
        (8, Some(100), 2)
    );
    assert_eq!(o.headers, vec![("X-A".to_string(), "b".to_string())]);
    assert_eq!(o.deadline(), None);
    assert_eq!(o.method, "GET");
    let c = parse(&["-i", "http://127.0.0.1:1/"]).unwrap();
    let o = c.load.to_options(&c.urls).unwrap();
    assert_eq!(
        (o.method.as_str(), o.deadline()),
        ("HEAD", Some(DEFAULT_DURATION))
    );
}

#[test]
fn subcommands_parse() {
    let c = parse(&[
        "origin",
        "--listen",
        "127.0.0.1:0",
        "--delay",
        "5",
        "--workers",
        "1",
    ])
    .unwrap();
    match c.command {
        Some(Command::Origin(o)) => {
            assert_eq!(o.delay, Some(Duration::from_millis(5)));
            assert_eq!(o.body_size, 32 * 1024);
        }
        other => panic!("{other:?}"),
    }
    let c = parse(&[
        "compare",
        "http://127.0.0.1:1/",
        "http://127.0.0.1:2/",
        "-n",
        "10",
        "--watch-pid",
        "1",
        "--watch-pid",
        "2",
    ])
    .unwrap();
    match c.command {
        Some(Command::Compare(cmp)) => {
            assert_eq!(cmp.rounds, 3);
            assert_eq!(cmp.watch_pid, vec![1, 2]);
            assert_eq!(cmp.load.requests, Some(10));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_input_is_refused() {
    assert!(parse(&[]).is_err());
    assert!(parse(&["-c", "0", "http://x/"]).is_err());
    assert!(parse(&["-d", "0s", "http://x/"]).is_err());
    assert!(parse(&["--rate", "-1", "http://x/"]).is_err());
    assert!(parse(&["--close", "-k", "http://x/"]).is_err());
    let c = parse(&["https://127.0.0.1/"]).unwrap();
    let o = c.load.to_options(&c.urls).unwrap();
    assert_eq!((o.urls[0].port, o.tls.resumption), (443, true));
    assert_eq!(o.tls.trust, shared::tls::Trust::System);
    let c = parse(&["--cacert", "/x.pem", "--no-resume", "https://127.0.0.1/"]).unwrap();
    let o = c.load.to_options(&c.urls).unwrap();
    assert_eq!(o.tls.trust, shared::tls::Trust::CaFile("/x.pem".into()));
    assert!(!o.tls.resumption);
    let c = parse(&["--cacert", "/x.pem", "--insecure", "https://127.0.0.1/"]).unwrap();
    let o = c.load.to_options(&c.urls).unwrap();
    assert_eq!(o.tls.trust, shared::tls::Trust::Insecure);
    let c = parse(&["-H", "NoColon", "http://127.0.0.1:1/"]).unwrap();
    assert!(c.load.to_options(&c.urls).is_err());
    let c = parse(&["--close", "--pipeline", "4", "http://127.0.0.1:1/"]).unwrap();
    assert!(c.load.to_options(&c.urls).is_err());
}

/// `--rate` (and a `--stages` target other than 0) is at least 0.001 req/s, the unit
/// `--shard` splits rates in: a rate far below it cannot be scheduled.
#[test]
fn a_rate_below_a_thousandth_is_refused() {
    let e = |args: &[&str]| parse(args).unwrap_err().to_string();
    for r in ["1e-19", "1e-300", "0.0009", "0.0000001k"] {
        let msg = e(&["--rate", r, "http://x/"]);
        assert!(msg.contains(&format!("invalid rate '{r}'")), "{r}: {msg}");
        assert!(msg.contains("at least 0.001"), "{r}: {msg}");
    }
    let msg = e(&["compare", "http://x/", "http://y/", "--rate", "1e-300"]);
    assert!(msg.contains("at least 0.001"), "{msg}");
    for s in ["1s:1e-300", "10s:100,10s:0.0001"] {
        let msg = e(&["--stages", s, "http://x/"]);
        assert!(msg.contains("0 or at least 0.001"), "{s}: {msg}");
    }
    assert_eq!(
        parse(&["--rate", "0.001", "http://x/"]).unwrap().load.rate,
        Some(0.001)
    );
    assert!(parse(&["--stages", "10s:0.001,10s:0", "http://x/"]).is_ok());
    // Options built without the parser are checked by `validate` (a plain --rate only: with
    // --stages the rate is the ramp's mean, which paces nothing).
    let mut o = RunOptions::for_urls(&["http://127.0.0.1:1/"]).unwrap();
    o.rate = Some(1e-19);
    let msg = o.validate().unwrap_err().to_string();
    assert!(msg.contains("at least 0.001"), "{msg}");
    o.stages = Some(vec![(Duration::from_secs(2000), 0.001)]);
    o.rate = Some(0.0005);
    o.validate().unwrap();
}

/// A header value from `-H` or a `--targets` file is field-value (RFC 9110 5.5: visible
/// characters, spaces, tabs, obs-text): a bare CR or LF would end the field on the wire
/// (another header injected), and no other control character belongs in one either. Both
/// paths refuse the same values, the error naming the control character (escaped) and, for a
/// file, the file and the line.
#[test]
fn header_values_with_control_characters_are_refused_from_h_and_targets() {
    let path = std::env::temp_dir().join(format!("loader-ctl-targets-{}", std::process::id()));
    let file = path.display().to_string();
    for (value, shown) in [
        ("a\rInjected: 1", "'\\r'"),
        ("a\nInjected: 1", "'\\n'"),
        ("a\0b", "'\\0'"),
        ("a\x01b", "'\\u{1}'"),
        ("a\x1b[31mred", "'\\u{1b}'"),
        ("a\x7fb", "'\\u{7f}'"),
    ] {
        let h = format!("X-A: {value}");
        let c = parse(&["-H", &h, "http://127.0.0.1:1/"]).unwrap();
        let e = c.load.to_options(&c.urls).unwrap_err().to_string();
        assert!(e.contains("control character"), "-H {h:?}: {e}");
        assert!(e.contains(shown), "-H {h:?}: {e}");
        assert!(!e.contains(['\r', '\n']), "-H {h:?}: not escaped: {e:?}");

        if h.contains('\n') {
            continue; // in a file, LF ends the line: the rest is a header line of its own
        }
        std::fs::write(&path, format!("GET http://127.0.0.1:1/\n{h}\n")).unwrap();
        let c = parse(&["--targets", &file]).unwrap();
        let e = c.load.to_options(&c.urls).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--targets {file}:2: ")),
            "{h:?}: {e}"
        );
        assert!(e.contains("control character"), "{h:?}: {e}");
        assert!(e.contains(shown), "{h:?}: {e}");
        assert!(!e.contains(['\r', '\n']), "{h:?}: not escaped: {e:?}");
    }
    // Tabs and obs-text are field-value.
    let c = parse(&["-H", "X-A: a\tb \u{e9}", "http://127.0.0.1:1/"]).unwrap();
    let o = c.load.to_options(&c.urls).unwrap();
    assert_eq!(o.headers, [("X-A".into(), "a\tb \u{e9}".into())]);
    std::fs::write(&path, "GET http://127.0.0.1:1/\nX-A: a\tb \u{e9}\n").unwrap();
    let c = parse(&["--targets", &file]).unwrap();
    let o = c.load.to_options(&c.urls).unwrap();
    let spec = &o.per_url.unwrap()[0];
    assert_eq!(spec.headers, [("X-A".into(), "a\tb \u{e9}".into())]);
    let _ = std::fs::remove_file(&path);
}

/// `-T` is a header value too (ab's Content-Type): a CR in it started another header.
#[test]
fn a_content_type_with_control_characters_is_refused() {
    let path = std::env::temp_dir().join(format!("loader-ctl-type-{}", std::process::id()));
    std::fs::write(&path, b"a=1").unwrap();
    let file = path.display().to_string();
    for t in ["text/plain\rX-Injected: 1", "text/plain\nX: 1", "a\x01b"] {
        let c = parse(&["--body", &file, "-T", t, "http://127.0.0.1:1/"]).unwrap();
        let e = c.load.to_options(&c.urls).unwrap_err().to_string();
        assert!(
            e.contains("-T") && e.contains("control character"),
            "{t:?}: {e}"
        );
        assert!(!e.contains(['\r', '\n']), "{t:?}: not escaped: {e:?}");
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn body_file_content_type_and_repeated_headers() {
    let path = std::env::temp_dir().join(format!("loader-body-{}", std::process::id()));
    std::fs::write(&path, b"a=1&b=2").unwrap();
    let file = path.display().to_string();
    let c = parse(&[
        "--body",
        &file,
        "-T",
        "application/x-www-form-urlencoded",
        "-H",
        "X-One: 1",
        "-H",
        "X-Two:2",
        "http://127.0.0.1:1/",
    ])
    .unwrap();
    let o = c.load.to_options(&c.urls).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(o.body.as_deref(), Some(&b"a=1&b=2"[..]));
    assert_eq!(o.method, "POST", "a body makes it a POST, as ab -p does");
    assert_eq!(
        o.content_type.as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        o.headers,
        [("X-One".into(), "1".into()), ("X-Two".into(), "2".into())]
    );
    let c = parse(&["-m", "PUT", "--body", "/dev/null", "http://127.0.0.1:1/"]).unwrap();
    assert_eq!(c.load.to_options(&c.urls).unwrap().method, "PUT");
}

#[test]
fn file_errors_name_the_flag_the_file_and_the_line() {
    let err = |args: &[&str]| {
        let c = parse(args).unwrap();
        c.load.to_options(&c.urls).unwrap_err().to_string()
    };
    let e = err(&["--body", "/nonexistent/body", "http://127.0.0.1:1/"]);
    assert!(e.starts_with("--body /nonexistent/body: "), "{e}");
    let e = err(&["--urls", "/nonexistent/urls"]);
    assert!(e.starts_with("--urls /nonexistent/urls: "), "{e}");

    let path = std::env::temp_dir().join(format!("loader-urls-{}", std::process::id()));
    let file = path.display().to_string();
    std::fs::write(
        &path,
        "# two good, one bad\nhttp://127.0.0.1:1/a\n\nftp://x/\n",
    )
    .unwrap();
    let e = err(&["--urls", &file]);
    assert!(
        e.starts_with(&format!("--urls {file}:4: invalid URL 'ftp://x/'")),
        "{e}"
    );
    std::fs::write(
        &path,
        "http://127.0.0.1:1/a\n# c\nhttp://127.0.0.1:2/b?x=1\n",
    )
    .unwrap();
    let c = parse(&["--urls", &file, "-n", "4"]).unwrap();
    let o = c.load.to_options(&c.urls).unwrap();
    let paths: Vec<&str> = o.urls.iter().map(|u| u.path.as_str()).collect();
    assert_eq!(paths, ["/a", "/b?x=1"]);
    std::fs::write(&path, "# nothing\n").unwrap();
    let e = err(&["--urls", &file]);
    assert!(e.ends_with("no URL in the file"), "{e}");
    let _ = std::fs::remove_file(&path);
}

mod shard_flags {
    use super::super::*;
    use crate::shard::{schedule_offset, Shard, ShardRun, INDEX_ENV};
    use std::time::UNIX_EPOCH;

    #[test]
    fn shard_flags_apply_to_the_options() {
        use clap::Parser;
        let parse = |args: &[&str], env: Option<&'static str>| {
            let cli = Cli::try_parse_from(
                ["loader"]
                    .iter()
                    .chain(args)
                    .chain(&["http://127.0.0.1:1/"]),
            )
            .unwrap();
            let mut o = RunOptions::for_urls(&cli.urls).unwrap();
            o.requests = cli.load.requests;
            o.rate = cli.load.rate;
            cli.load
                .dist
                .apply(&mut o, |k| {
                    env.filter(|_| k == INDEX_ENV).map(str::to_string)
                })
                .map(|()| o)
        };
        let o = parse(
            &["-n", "10", "--rate", "400", "--shard", "auto/4"],
            Some("3"),
        )
        .unwrap();
        assert_eq!((o.requests, o.rate), (Some(2), Some(100.0)));
        let run = o.shard.unwrap();
        assert_eq!(run.shard, Shard { index: 4, count: 4 });
        assert_eq!(
            (run.requests_total, run.rate_total),
            (Some(10), Some(400.0))
        );
        // Shard 4 of 4 at 400 req/s in total sends 3/400 s after shard 1.
        assert_eq!(
            schedule_offset(o.shard),
            Duration::from_secs_f64(3.0 / 400.0)
        );
        let o = parse(&["--shard", "1/4", "--rate", "400"], None).unwrap();
        assert_eq!(schedule_offset(o.shard), Duration::ZERO);
        // A total too small to offset by (only options built without the parser have one)
        // puts the shard's start far off instead of panicking.
        let far = ShardRun {
            shard: Shard { index: 2, count: 4 },
            rate_total: Some(1e-300),
            ..o.shard.unwrap()
        };
        assert!(schedule_offset(Some(far)) > Duration::from_secs(86_400 * 365));
        let o = parse(&["--hdr-log", "x.hlog", "--start-at", "1767225600"], None).unwrap();
        assert_eq!(o.hdr_log.unwrap().interval, Duration::from_secs(1));
        assert_eq!(
            o.start_at,
            Some(UNIX_EPOCH + Duration::from_secs(1_767_225_600))
        );
        assert!(parse(&["--shard", "auto/4"], None).is_err());
        let c = Cli::try_parse_from([
            "loader",
            "compare",
            "http://127.0.0.1:1/",
            "http://127.0.0.1:2/",
            "--shard",
            "1/2",
        ])
        .unwrap();
        let Some(Command::Compare(c)) = c.command else {
            panic!("compare")
        };
        assert!(c.load.dist.only_for_runs("compare").is_err());
    }
}

mod ceiling_flags {
    use super::super::*;
    use crate::ceiling::Objective;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(
            ["loader", "ceiling"]
                .into_iter()
                .chain(args.iter().copied()),
        )
    }

    fn ceiling(args: &[&str]) -> CeilingArgs {
        match parse(args).unwrap().command {
            Some(Command::Ceiling(c)) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags() {
        let c = ceiling(&[
            "--p99",
            "10ms",
            "http://127.0.0.1:1/",
            "http://127.0.0.1:2/",
        ]);
        assert_eq!(c.url_b.as_deref(), Some("http://127.0.0.1:2/"));
        assert_eq!(
            c.objective(),
            Some(Objective {
                quantile: 0.99,
                limit_us: 10_000
            })
        );
        assert_eq!(c.precision, 0.02);
        assert_eq!(c.max_time, Duration::from_secs(300));
        assert!(c.validate().is_ok());
        let c = ceiling(&[
            "--p999",
            "1s",
            "--precision",
            "5",
            "--spin",
            "http://127.0.0.1:1/",
        ]);
        assert!(c.load.spin, "--spin is passed through to the steps");
        assert_eq!(c.objective().unwrap().quantile, 0.999);
        assert_eq!(c.precision, 0.05);
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&["http://127.0.0.1:1/"]).is_err(), "no objective");
        assert!(parse(&["--p99", "0ms", "http://127.0.0.1:1/"]).is_err());
        assert!(parse(&["--p99", "1ms", "--precision", "0", "http://x/"]).is_err());
        assert!(parse(&["--p99", "1ms", "--precision", "100%", "http://x/"]).is_err());
        let e = |a: &[&str]| ceiling(a).validate().unwrap_err();
        assert!(parse(&["--p99", "1ms", "--p50", "1ms", "http://x/"]).is_err());
        assert!(e(&["--p99", "1ms", "--rate", "10", "http://x/"]).starts_with("--rate"));
        assert!(e(&["--p99", "1ms", "-n", "10", "http://x/"]).starts_with("-n"));
        assert!(
            e(&["--p99", "1ms", "--from", "10", "--upper", "5", "http://x/"]).contains("above")
        );
    }

    /// A first step that cannot hold one request at its rate sends nothing: the search then
    /// blamed the loader (GENERATOR-LIMITED) and shrank to 0 req/s. It is a usage error naming
    /// the rate's flag and -d.
    #[test]
    fn a_first_step_shorter_than_one_request_is_refused() {
        let e = |a: &[&str]| ceiling(a).validate().unwrap_err();
        let msg = e(&[
            "--p99",
            "50ms",
            "--from",
            "2",
            "--upper",
            "2",
            "-d",
            "300ms",
            "http://x/",
        ]);
        assert!(
            msg.starts_with("--from 2 req/s") && msg.contains("-d 300ms"),
            "{msg}"
        );
        // The default step (5s) at the lowest rate the parser takes.
        let msg = e(&["--p99", "50ms", "--from", "0.004", "http://x/"]);
        assert!(
            msg.starts_with("--from 0.004 req/s") && msg.contains("-d 5s"),
            "{msg}"
        );
        let msg = e(&["--p99", "50ms", "--upper", "0.1", "http://x/"]);
        assert!(msg.starts_with("--upper 0.1 req/s"), "{msg}");
        // One request a step is enough.
        assert!(
            ceiling(&["--p99", "1s", "--from", "2", "-d", "500ms", "http://x/"])
                .validate()
                .is_ok()
        );
    }

    /// A --max-time that cannot hold each URL's probe and one step of each, at their longest
    /// (a step: its warm-up, -d and twice --timeout, for the warm-up's last requests and the
    /// drain), would stop the search before it says anything: a usage error naming it. (With
    /// two URLs and -d 2s, --max-time 3s ran A's probe only and left B out of the report.)
    #[test]
    fn a_max_time_shorter_than_the_first_steps_is_refused() {
        let e = |a: &[&str]| ceiling(a).validate().unwrap_err();
        let msg = e(&[
            "--p99",
            "1s",
            "--max-time",
            "3s",
            "-d",
            "2s",
            "http://a/",
            "http://b/",
        ]);
        assert!(msg.starts_with("--max-time 3s"), "{msg}");
        let msg = e(&[
            "--p99",
            "1s",
            "--from",
            "10",
            "-d",
            "500ms",
            "--timeout",
            "5s",
            "--max-time",
            "2s",
            "http://a/",
        ]);
        assert!(
            msg.starts_with("--max-time 2s") && msg.contains("--timeout"),
            "{msg}"
        );
        // Room for one step (100 ms of warm-up, 300 ms, twice 210 ms at most).
        assert!(ceiling(&[
            "--p99",
            "1s",
            "--from",
            "10",
            "-d",
            "300ms",
            "--warmup",
            "100ms",
            "--timeout",
            "200ms",
            "--max-time",
            "1s",
            "http://a/",
        ])
        .validate()
        .is_ok());
    }

    /// Sharding, a start time and interval logs are a plain run's: a search ignored them
    /// (started at once, sent the whole rate, kept the last step's log only).
    #[test]
    fn run_only_flags_are_refused() {
        let e = |a: &[&str]| ceiling(a).validate().unwrap_err();
        for (flag, value) in [
            ("--shard", "1/2"),
            ("--start-at", "1767225600"),
            ("--hdr-log", "x.hlog"),
            ("--series", "x.csv"),
        ] {
            let msg = e(&["--p99", "1ms", flag, value, "http://x/"]);
            assert!(msg.starts_with(flag), "{flag}: {msg}");
            assert!(msg.contains("not to ceiling"), "{flag}: {msg}");
        }
    }
}

/// -c above the requests to make (-n, or this shard's part of it) is capped at them: no
/// connection would have a request.
#[test]
fn connections_are_capped_at_the_requests() {
    let opts = |args: &[&str]| {
        let c = parse(args).unwrap();
        c.load.to_options(&c.urls).unwrap()
    };
    assert_eq!(
        opts(&["-n", "2", "-c", "300", "http://127.0.0.1:1/"]).connections,
        2
    );
    assert_eq!(
        opts(&["-n", "300", "-c", "300", "http://127.0.0.1:1/"]).connections,
        300
    );
    // Shard 1 of 3 of -n 10 makes 4.
    let o = opts(&[
        "--shard",
        "1/3",
        "-n",
        "10",
        "-c",
        "50",
        "http://127.0.0.1:1/",
    ]);
    assert_eq!(o.connections, 4);
    let o = opts(&["-n", "5", "-c", "50", "--rate", "10", "http://127.0.0.1:1/"]);
    assert_eq!(o.connections, 5);
    assert_eq!(
        opts(&["-d", "1s", "-c", "300", "http://127.0.0.1:1/"]).connections,
        300
    );
}

/// ab's -g keeps every request's times up to 1000000 per worker (the documented bound), in a
/// timed run too; when some were not kept, a note says how many were written.
#[test]
fn gnuplot_keeps_up_to_a_million_rows_per_worker_and_says_when_it_dropped_some() {
    let rows = |args: &[&str]| {
        let c = parse(&[args, &["-g", "g.tsv", "http://127.0.0.1:1/"]].concat()).unwrap();
        let (o, _) = run::load_options(&c.urls, &c.load, &c.compat).unwrap();
        o.record_requests
    };
    assert_eq!(rows(&["-d", "1s"]), Some(1_000_000));
    assert_eq!(rows(&["-t", "1"]), Some(50_000)); // ab's -t: at most 50000 requests
    assert_eq!(rows(&["-n", "20"]), Some(20));
    assert_eq!(rows(&["-n", "5000000"]), Some(1_000_000));
    assert_eq!(run::gnuplot_note(20, 20), None);
    let note = run::gnuplot_note(1_000_000, 1_500_000).unwrap();
    assert!(note.contains("1000000 of the 1500000"), "{note}");
}
