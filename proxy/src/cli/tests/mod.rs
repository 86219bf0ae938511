//! Flags: quick mode, overrides, and what is refused.

use super::*;
use crate::config::{GroupId, RouteId, ServerId};

mod config;

fn cfg(args: &str) -> Result<Config, String> {
    config_from_args(std::iter::once("proxy").chain(args.split_whitespace()))
}

#[test]
fn quick_mode() {
    let c = cfg(
        "--listen 127.0.0.1:8080 --upstream 127.0.0.1:9001 --upstream [::1]:9002 \
                 --upstream localhost:9003 --balance least-conn --workers 2 --no-pin --no-multishot \
                 --read-timeout 250ms --max-body 1MiB --keepalive 8 --no-x-real-ip",
    )
    .unwrap();
    assert_eq!(c.listeners.len(), 1);
    assert_eq!(c.listeners[0].addr, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(c.listeners[0].backlog, DEFAULT_BACKLOG);
    assert_eq!(c.groups.len(), 1);
    let g = &c.groups[GroupId::new(0)];
    assert_eq!(g.name, "default");
    assert_eq!(g.balance, Balance::LeastConn);
    assert_eq!(g.keepalive, 8);
    let addrs: Vec<String> = g.servers.iter().map(|s| s.addrs[0].to_string()).collect();
    assert_eq!(addrs[..2], ["127.0.0.1:9001", "[::1]:9002"]);
    // localhost: every address, IPv4 first (the address rule).
    let local = &g.servers[ServerId::new(2)].addrs;
    assert!(local
        .iter()
        .all(|a| a.port() == 9003 && a.ip().is_loopback()));
    assert_eq!(*local, shared::net::connect_order(local.clone()));
    assert_eq!(g.servers[ServerId::new(2)].name, "localhost:9003");
    assert_eq!(c.routes.len(), 1);
    assert_eq!(
        (
            c.routes[RouteId::new(0)].host.as_deref(),
            c.routes[RouteId::new(0)].path_prefix.as_str(),
            c.routes[RouteId::new(0)].action.group().unwrap().index()
        ),
        (None, "/", 0)
    );
    assert_eq!(c.runtime.workers, 2);
    assert!(!c.runtime.pin);
    assert!(!c.runtime.multishot);
    assert_eq!(c.timeouts.read, Duration::from_millis(250));
    assert_eq!(c.timeouts.header, Timeouts::default().header);
    assert_eq!(c.limits.max_body, Some(1 << 20));
    assert!(!c.headers.x_real_ip && c.headers.x_forwarded_for && c.headers.x_forwarded_proto);
    assert_eq!(c.source, "command line");
    let c = cfg("--listen 8080 --upstream 10.0.0.1 --upstream [::1] --max-body unlimited").unwrap();
    assert_eq!(c.listeners[0].addr, "0.0.0.0:8080".parse().unwrap());
    assert_eq!(
        c.groups[GroupId::new(0)].servers[ServerId::new(0)].addrs,
        ["10.0.0.1:80".parse().unwrap()]
    );
    assert_eq!(
        c.groups[GroupId::new(0)].servers[ServerId::new(1)].addrs,
        ["[::1]:80".parse().unwrap()]
    );
    assert_eq!(c.limits.max_body, None);
}

#[test]
fn bad_command_lines_are_one_line_naming_the_problem() {
    let cases: &[(&str, &[&str])] = &[
        ("--workers 0", &["--workers", "0"]),
        ("--read-timeout 3x", &["--read-timeout", "3x"]),
        ("--idle-timeout 0", &["--idle-timeout", "greater than zero"]),
        ("--balance nope", &["--balance", "nope"]),
        ("--listen nonsense", &["--listen", "nonsense"]),
        ("--frobnicate", &["--frobnicate"]),
        ("--listen 127.0.0.1:1", &["--upstream"]),
        ("--upstream 127.0.0.1:1", &["--listen"]),
        ("", &["--listen", "--config"]),
        (
            "--listen 127.0.0.1:1 --upstream 127.0.0.1:0",
            &["--upstream", "port 0"],
        ),
        (
            "--listen 127.0.0.1:1 --upstream no-such-host.invalid:80",
            &["--upstream", "no-such-host.invalid"],
        ),
        (
            "--listen 127.0.0.1:1 --upstream 127.0.0.1:2 --upstream 127.0.0.1:2",
            &["--upstream", "127.0.0.1:2", "already"],
        ),
        (
            "--listen 127.0.0.1:1 --listen 127.0.0.1:1 --upstream 127.0.0.1:2",
            &["--listen", "127.0.0.1:1", "already"],
        ),
        (
            "--config x.toml --upstream 127.0.0.1:2",
            &["--config", "--upstream"],
        ),
        (
            "--config x.toml --check-config x.toml",
            &["--config", "--check-config"],
        ),
        ("--max-connections 0", &["--max-connections"]),
        ("--max-body 12parsecs", &["--max-body", "12parsecs"]),
    ];
    for (args, words) in cases {
        let e = cfg(args).unwrap_err();
        assert_eq!(e.lines().count(), 1, "{args}: {e}");
        for w in *words {
            assert!(e.contains(w), "{args}: want {w:?} in {e:?}");
        }
    }
    // Port 0 listeners may repeat (each gets its own port).
    cfg("--listen 127.0.0.1:0 --listen 127.0.0.1:0 --upstream 127.0.0.1:2").unwrap();
}

#[test]
fn help_documents_every_flag_with_its_default() {
    let help = Args::command().render_long_help().to_string();
    for arg in Args::command().get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" || long == "version" {
            continue;
        }
        assert!(
            help.contains(&format!("--{long}")),
            "--{long} missing from --help"
        );
        let text = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        assert!(
            text.contains("[default:") || !arg.get_default_values().is_empty(),
            "--{long} does not show its default"
        );
    }
    // Defaults come from config.rs.
    assert!(help.contains(&format!(
        "[default: {}]",
        format_duration(Timeouts::default().header)
    )));
    assert!(help.contains(&format!("[default: {DEFAULT_BACKLOG}]")));
}

/// A file with non-default values, for override tests.
fn temp_file(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("proxy-cli-{}-{name}.toml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn flags_override_the_file_where_given() {
    let path = temp_file(
        "override",
        "[[listen]]\naddr = \"127.0.0.1:8080\"\nbacklog = 10\n[upstream.a]\nservers = [\"127.0.0.1:9001\"]\n\
         [timeouts]\nread = \"7s\"\nheader = \"3s\"\n[limits]\nmax_connections = 5\nmax_body = 100\n\
         [runtime]\nworkers = 3\ndriver = \"epoll\"\n[headers]\nx_real_ip = false\n",
    );
    let p = path.display().to_string();
    // Nothing given: the file's values stand.
    let c = cfg(&format!("--config {p}")).unwrap();
    assert_eq!(c.listeners[0].backlog, 10);
    assert_eq!(
        (c.timeouts.read, c.timeouts.header),
        (Duration::from_secs(7), Duration::from_secs(3))
    );
    assert_eq!(
        (c.limits.max_connections, c.limits.max_body),
        (5, Some(100))
    );
    assert_eq!(
        (c.runtime.workers, c.runtime.driver),
        (3, shared::runtime::DriverChoice::Epoll)
    );
    assert!(c.runtime.pin && !c.headers.x_real_ip && c.headers.x_forwarded_for);
    assert_eq!(c.source, p);
    // Given: flags win, the rest stays the file's.
    let c = cfg(&format!(
        "--config {p} --listen 127.0.0.1:0 --workers 1 --driver auto --no-pin --read-timeout 1s \
         --max-connections 9 --max-body unlimited --no-x-forwarded-for"
    ))
    .unwrap();
    assert_eq!(c.listeners.len(), 1);
    assert_eq!(c.listeners[0].addr.port(), 0);
    assert_eq!(c.listeners[0].backlog, DEFAULT_BACKLOG);
    assert_eq!(
        (c.timeouts.read, c.timeouts.header),
        (Duration::from_secs(1), Duration::from_secs(3))
    );
    assert_eq!((c.limits.max_connections, c.limits.max_body), (9, None));
    assert_eq!(
        (c.runtime.workers, c.runtime.driver),
        (1, shared::runtime::DriverChoice::Auto)
    );
    assert!(!c.runtime.pin && !c.headers.x_real_ip && !c.headers.x_forwarded_for);
    let c = cfg(&format!("--config {p} --backlog 77")).unwrap();
    assert_eq!(c.listeners[0].backlog, 77);
    // --check-config reads the file the same way.
    let c = cfg(&format!("--check-config {p}")).unwrap();
    assert_eq!(c.timeouts.read, Duration::from_secs(7));
    std::fs::remove_file(path).unwrap();
}

#[test]
fn file_errors_name_the_file() {
    let path = temp_file("bad", "[[listen]]\naddr = \"127.0.0.1:1\"\n[upstream.a]\nservers = [{ addr = \"127.0.0.1:2\", weight = 0 }]\n");
    let p = path.display().to_string();
    let e = cfg(&format!("--config {p}")).unwrap_err();
    assert!(
        e.starts_with(&format!("{p}:4: key `upstream.a.servers[0].weight`")),
        "{e}"
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn pin_flag_overrides_the_file_and_no_pin_is_off() {
    use shared::runtime::PinMode;
    assert_eq!(
        cfg("--listen 127.0.0.1:0 --upstream 127.0.0.1:1")
            .unwrap()
            .runtime
            .pin_mode(),
        PinMode::Auto
    );
    let on = cfg("--listen 127.0.0.1:0 --upstream 127.0.0.1:1 --pin on").unwrap();
    assert_eq!(on.runtime.pin_mode(), PinMode::On);
    let off = cfg("--listen 127.0.0.1:0 --upstream 127.0.0.1:1 --no-pin").unwrap();
    assert_eq!(off.runtime.pin_mode(), PinMode::Off);
    let both = config_from_args(["proxy", "--pin", "on", "--no-pin"]).unwrap_err();
    assert!(
        both.contains("--no-pin") && both.contains("--pin"),
        "{both}"
    );
}
