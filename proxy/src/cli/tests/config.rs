//! Quick mode and overrides against the config file they stand for (the config's own tests,
//! `config/tests.rs`, need no flags).

use crate::cli::{config_from_args, Cli};
use crate::config::tests::MINIMAL;
use crate::config::*;
use shared::runtime::DriverChoice;
use std::time::Duration;

#[test]
fn body_min_rate_is_read_as_a_rate_and_checked_with_its_key() {
    assert_eq!(
        from_toml("p.toml", MINIMAL).unwrap().timeouts.body_min_rate,
        500
    );
    for (value, want) in [
        ("\"1KiB/s\"", 1024),
        ("\"500B/s\"", 500),
        ("\"2000\"", 2000),
        ("300", 300),
        ("\"0\"", 0),
        ("0", 0),
    ] {
        let text = format!("{MINIMAL}[timeouts]\nbody_min_rate = {value}\n");
        let cfg = from_toml("p.toml", &text).unwrap_or_else(|e| panic!("{value}: {e}"));
        assert_eq!(cfg.timeouts.body_min_rate, want, "{value}");
    }
    for bad in ["\"fast\"", "\"1KiB/h\"", "-1", "\"1.5\""] {
        let text = format!("{MINIMAL}[timeouts]\nbody_min_rate = {bad}\n");
        let err = from_toml("p.toml", &text).unwrap_err().to_string();
        assert!(
            err.starts_with("p.toml:7: key `timeouts.body_min_rate`: "),
            "{bad}: {err}"
        );
        assert!(!err.contains('\n'), "one line: {err}");
    }
    for n in [0, 500, 1024, 3 << 20, 1500] {
        assert_eq!(parse_rate(&format_rate(n)), Ok(n), "{n}");
    }
    // The flag, in quick mode; not given, the file's value (or the default) stays.
    let quick = "--listen 127.0.0.1:8080 --upstream 127.0.0.1:9001";
    let c = cli(&format!("{quick} --body-min-rate 2KiB/s"))
        .config()
        .unwrap();
    assert_eq!(c.timeouts.body_min_rate, 2048);
    let c = cli(&format!("{quick} --body-min-rate 0")).config().unwrap();
    assert_eq!(c.timeouts.body_min_rate, 0);
    let c = cli(quick).config().unwrap();
    assert_eq!(c.timeouts.body_min_rate, DEFAULT_BODY_MIN_RATE);
}

fn cli(args: &str) -> Cli {
    Cli::parse_from(std::iter::once("proxy").chain(args.split_whitespace())).unwrap()
}

/// Quick mode builds the file-layer value a file would give: the same config comes out.
#[test]
fn quick_mode_is_the_file_it_stands_for() {
    let quick = cli(
        "--listen 127.0.0.1:8080 --upstream 127.0.0.1:9001 --upstream localhost:9002 \
         --balance random2 --keepalive 3 --max-fails 2 --fail-timeout 4s",
    );
    let file = schema::parse(
        "q.toml",
        "[[listen]]\naddr = \"127.0.0.1:8080\"\n[upstream.default]\nbalance = \"random2\"\n\
         keepalive = 3\nservers = [\n  { addr = \"127.0.0.1:9001\", max_fails = 2, fail_timeout = \"4s\" },\n\
         { addr = \"localhost:9002\", max_fails = 2, fail_timeout = \"4s\" },\n]\n",
    )
    .unwrap();
    let q = quick.config().unwrap();
    let f = resolve(&file, &Overrides::default()).unwrap();
    assert_eq!(q.source, "command line");
    assert_eq!(f.source, "q.toml");
    let show = |c: &Config| format!("{:?}", (&c.listeners, &c.groups, &c.routes, &c.timeouts));
    assert_eq!(show(&q), show(&f));
    let show = |c: &Config| format!("{:?}", (&c.headers, &c.limits, &c.runtime));
    assert_eq!(show(&q), show(&f));
}

/// The overrides are a value: applied to the same file again (a reload), they give the same
/// config; applied to another file, they still win where given.
#[test]
fn overrides_can_be_applied_again() {
    let c = cli(
        "--config unused.toml --listen 127.0.0.1:0 --backlog 9 --read-timeout 2s --no-x-real-ip \
         --max-body 10 --workers 2 --driver epoll --no-pin --max-connections 5",
    );
    let ov = c.overrides();
    let first = resolve(&schema::parse("a.toml", MINIMAL).unwrap(), &ov).unwrap();
    let text = format!("{MINIMAL}[timeouts]\nread = \"9s\"\nheader = \"1s\"\n");
    let again = resolve(&schema::parse("a.toml", &text).unwrap(), &ov).unwrap();
    for cfg in [&first, &again] {
        assert_eq!(cfg.listeners.len(), 1);
        assert_eq!(cfg.listeners[0].addr, "127.0.0.1:0".parse().unwrap());
        assert_eq!(cfg.listeners[0].backlog, 9);
        assert_eq!(cfg.timeouts.read, Duration::from_secs(2));
        assert!(!cfg.headers.x_real_ip && cfg.headers.x_forwarded_for);
        assert_eq!(
            (cfg.limits.max_body, cfg.limits.max_connections),
            (Some(10), 5)
        );
        let r = &cfg.runtime;
        assert_eq!(
            (r.workers, r.driver, r.pin),
            (2, DriverChoice::Epoll, false)
        );
    }
    assert_eq!(first.timeouts.header, Timeouts::default().header);
    assert_eq!(again.timeouts.header, Duration::from_secs(1));
}

#[test]
fn validate_catches_configs_built_in_code() {
    let mut c = cli("--listen 127.0.0.1:1 --upstream 127.0.0.1:2")
        .config()
        .unwrap();
    validate(&c).unwrap();
    c.groups[GroupId::new(0)].servers[ServerId::new(0)].weight = 0;
    assert!(validate(&c).unwrap_err().contains("weight 0"));
    c.groups[GroupId::new(0)].servers[ServerId::new(0)].weight = u32::MAX;
    assert!(validate(&c).unwrap_err().contains("at most 1000"));
    c.groups[GroupId::new(0)].servers[ServerId::new(0)].weight = 1;
    c.groups[GroupId::new(0)].servers[ServerId::new(0)]
        .addrs
        .clear();
    assert!(validate(&c).unwrap_err().contains("no address"));
    c.groups[GroupId::new(0)].servers[ServerId::new(0)].addrs =
        vec!["127.0.0.1:0".parse().unwrap()];
    assert!(validate(&c).unwrap_err().contains("port 0"));
    c.groups[GroupId::new(0)].servers[ServerId::new(0)].addrs =
        vec!["127.0.0.1:2".parse().unwrap()];
    c.routes[RouteId::new(0)].action = Action::Proxy {
        group: GroupId::new(3),
        cache: None,
    };
    assert!(validate(&c).unwrap_err().contains("does not exist"));
    c.routes.clear();
    assert!(validate(&c).unwrap_err().contains("no route"));
    c.listeners.clear();
    assert!(validate(&c).unwrap_err().contains("no listen"));
}

#[test]
fn quick_static_mode_serves_a_directory() {
    let c = cli("--listen 127.0.0.1:0 --static /srv/files")
        .config()
        .unwrap();
    assert!(c.groups.is_empty());
    assert_eq!(c.routes.len(), 1);
    assert_eq!(c.routes[RouteId::new(0)].path_prefix, "/");
    let Action::Static(site) = &c.routes[RouteId::new(0)].action else {
        panic!("{:?}", c.routes[RouteId::new(0)])
    };
    assert_eq!(site.root.to_str(), Some("/srv/files"));
    let w = warnings(&c);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(
            "command line: route[0] (any host /): static root /srv/files is not a directory"
        ),
        "{w:?}"
    );
    let rel = cli("--listen 127.0.0.1:0 --static sub/dir")
        .config()
        .unwrap();
    let Action::Static(site) = &rel.routes[RouteId::new(0)].action else {
        panic!()
    };
    assert_eq!(site.root, std::env::current_dir().unwrap().join("sub/dir"));
    // Without --listen; with --upstream or --config.
    let e = cli("--static /srv").config().unwrap_err().to_string();
    assert!(e.contains("no --listen"), "{e}");
    for args in [
        "--static /a --upstream 127.0.0.1:1",
        "--static /a --config p.toml",
    ] {
        let argv = std::iter::once("proxy").chain(args.split_whitespace());
        let e = Cli::parse_from(argv).unwrap_err().to_string();
        assert!(e.contains("cannot be used with"), "{args}: {e}");
    }
}

#[test]
fn static_refuses_every_upstream_only_flag() {
    // `--static www --balance hash --max-conns 5 --keepalive 3 --max-fails 9` started with
    // no word about the four flags it ignored.
    for flag in [
        "--balance hash",
        "--balance round-robin",
        "--keepalive 3",
        "--keepalive-timeout 2s",
        "--keepalive-requests 5",
        "--max-conns 5",
        "--max-fails 9",
        "--fail-timeout 2s",
        "--connect-timeout 2s",
        "--read-timeout 2s",
        "--upstream-send-timeout 2s",
        "--no-preserve-host",
        "--no-x-forwarded-for",
        "--no-x-real-ip",
        "--no-x-forwarded-proto",
        "--cache 1MiB",
        "--upstream-ca ca.pem",
        "--upstream-insecure",
        "--health-check /h",
        "--no-splice",
    ] {
        let args = format!("--listen 127.0.0.1:0 --static /srv {flag}");
        let argv = std::iter::once("proxy").chain(args.split_whitespace());
        let e = match config_from_args(argv) {
            Ok(_) => panic!("{flag} beside --static: accepted"),
            Err(e) => e,
        };
        let name = flag.split(' ').next().unwrap();
        assert!(
            e.contains(name) && e.contains("--static") && e.lines().count() == 1,
            "{flag}: {e}"
        );
    }
    // What a file server has as well stays accepted.
    let c = cli("--listen 127.0.0.1:0 --static /srv --max-body 1MiB --idle-timeout 2s --workers 1")
        .config()
        .unwrap();
    assert_eq!(c.limits.max_body, Some(1 << 20));
}

#[test]
fn quick_cache_is_the_file_it_stands_for() {
    let quick = cli("--listen 127.0.0.1:8080 --upstream 127.0.0.1:9001 --cache 2MiB");
    let file = schema::parse(
        "q.toml",
        "[[listen]]\naddr = \"127.0.0.1:8080\"\n[upstream.default]\nservers = [\"127.0.0.1:9001\"]\n\
         [[route]]\nupstream = \"default\"\ncache = { max_bytes = \"2MiB\" }\n",
    )
    .unwrap();
    let q = quick.config().unwrap();
    let f = resolve(&file, &Overrides::default()).unwrap();
    assert_eq!(format!("{:?}", q.routes), format!("{:?}", f.routes));
    assert!(Cli::parse_from([
        "proxy",
        "--listen",
        "127.0.0.1:1",
        "--upstream",
        "127.0.0.1:2",
        "--cache",
        "0"
    ])
    .is_err());
}

#[test]
fn quick_health_check_is_the_file_it_stands_for() {
    let quick = cli("--listen 127.0.0.1:8080 --upstream 127.0.0.1:9001 --health-check /healthz");
    let file = from_toml(
        "q.toml",
        "[[listen]]\naddr = \"127.0.0.1:8080\"\n[upstream.default]\nservers = [\"127.0.0.1:9001\"]\n\
         health = { path = \"/healthz\" }\n",
    )
    .unwrap();
    let q = quick.config().unwrap();
    assert_eq!(
        q.groups[GroupId::new(0)].health,
        file.groups[GroupId::new(0)].health
    );
    assert!(q.groups[GroupId::new(0)].health.is_some());
    let none = cli("--listen 127.0.0.1:8080 --upstream 127.0.0.1:9001");
    assert!(none.config().unwrap().groups[GroupId::new(0)]
        .health
        .is_none());
    for bad in ["healthz", "/a b"] {
        let args = ["proxy", "--upstream", "127.0.0.1:2", "--health-check", bad];
        assert!(Cli::parse_from(args).is_err(), "{bad}");
    }
}

/// The quick-mode flags about the --upstream servers mean nothing beside a file (whose
/// upstreams have their own keys): refused, not silently ignored.
#[test]
fn upstream_flags_are_refused_beside_a_config_file() {
    for flag in [
        "--cache 1MiB",
        "--health-check /h",
        "--upstream-insecure",
        "--upstream-ca ca.pem",
    ] {
        for file in ["--config p.toml", "--check-config p.toml"] {
            let args = format!("{file} {flag}");
            let argv = std::iter::once("proxy").chain(args.split_whitespace());
            let e = Cli::parse_from(argv)
                .map(|_| ())
                .expect_err(&args)
                .to_string();
            assert!(e.contains("cannot be used with"), "{args}: {e}");
        }
    }
}

#[test]
fn quick_mode_mixing_plain_and_tls_servers_is_refused() {
    // Quick mode's group is checked as a file's (`config::tests::
    // a_group_mixing_plain_and_tls_servers_is_refused`), `--upstream-ca`/`-insecure` its `tls`.
    for (args, words) in [
        (
            "--upstream 127.0.0.1:2 --upstream https://127.0.0.1:3",
            ["127.0.0.1:2", "https://127.0.0.1:3", "--upstream-insecure"],
        ),
        (
            "--upstream http://127.0.0.1:2 --upstream 127.0.0.1:3 --upstream-insecure",
            ["http://127.0.0.1:2", "127.0.0.1:3", "--upstream-insecure"],
        ),
    ] {
        let argv = ["proxy", "--listen", "127.0.0.1:1"];
        let argv = argv.into_iter().chain(args.split_whitespace());
        let e = config_from_args(argv).expect_err(args);
        assert!(
            e.contains("mixes plain") && e.lines().count() == 1,
            "{args}: {e}"
        );
        for w in words {
            assert!(e.contains(w), "{args}: want {w:?} in {e:?}");
        }
    }
}

#[test]
fn flag_values_echoed_in_errors_keep_the_error_one_line() {
    // As a file's values (`config::tests::values_echoed_in_errors_keep_the_error_one_line`).
    let e = config_from_args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--access-log",
        "/no/such/dir\x1b[31m/a.log",
        "--upstream",
        "127.0.0.1:1",
    ]);
    // Opened by the start (and --check-config), with its path echoed.
    let e = crate::preflight::check(&e.unwrap(), None)
        .unwrap_err()
        .to_string();
    assert!(
        !e.contains(|c: char| c.is_control()) && e.contains(r"dir\u{1b}[31m/a.log"),
        "{e:?}"
    );
    let argv = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "a\r\nb:80",
    ];
    let e = config_from_args(argv).unwrap_err();
    assert!(
        !e.contains(|c: char| c.is_control()) && e.contains(r"a\r\nb:80"),
        "{e:?}"
    );
}

#[test]
fn a_max_body_flag_of_zero_is_refused_pointing_to_unlimited() {
    let e = config_from_args(["proxy", "--max-body", "0"]).unwrap_err();
    assert!(
        e.contains("--max-body") && e.contains("\"unlimited\"") && e.lines().count() == 1,
        "{e}"
    );
}
