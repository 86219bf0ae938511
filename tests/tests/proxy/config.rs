//! The proxy's configuration from the outside: the example file, `--check-config`, broken
//! files, bad flags, `--help` and `--version`. Exit codes need the process boundary, so most
//! of these spawn the built binary; the example is also loaded in-process.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use tests::inproc::Proxy;
use tests::process::ProxyProcess;

/// The example, copied into a folder of its own with the certificate files it names.
fn example() -> tests::TempFile {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proxy/proxy.example.toml");
    tests::tls::example_with_certs(&src)
}

fn proxy(args: &[&str]) -> Output {
    Command::new(tests::bin("proxy"))
        .args(args)
        .output()
        .expect("run proxy")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A config file in a directory of its own, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!("proxy-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write config");
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The smallest valid file (lines 1-5).
const MINIMAL: &str =
    "[[listen]]\naddr = \"127.0.0.1:8080\"\n\n[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";

const GOOD: &str =
    "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";

#[test]
fn example_parses_and_validates_in_process() {
    let cfg = proxy::config::load(example()).expect("the example loads");
    proxy::config::validate(&cfg).expect("the example validates");
    assert_eq!(cfg.groups.len(), 3);
    assert_eq!(cfg.routes.len(), 7);
    assert!(
        cfg.listeners[2].tls.is_some() && cfg.groups[proxy::config::GroupId::new(1)].tls.is_some()
    );
    // Every key of the schema appears in the example: each section's keys are all present.
    let text = std::fs::read_to_string(example()).unwrap();
    for key in [
        "addr",
        "backlog",
        "servers",
        "weight",
        "max_fails",
        "fail_timeout",
        "balance",
        "hash_key",
        "resolve",
        "keepalive",
        "keepalive_timeout",
        "keepalive_requests",
        "health",
        "interval",
        "timeout",
        "rise",
        "fall",
        "expect",
        "host",
        "path",
        "upstream",
        "return",
        "status",
        "location",
        "content_type",
        "static",
        "root",
        "index",
        "connect",
        "read",
        "upstream_send",
        "header",
        "body",
        "send",
        "idle",
        "shutdown",
        "preserve_host",
        "x_forwarded_for",
        "x_real_ip",
        "x_forwarded_proto",
        "max_body",
        "max_connections",
        "max_request_line",
        "max_head",
        "max_headers",
        "max_chunk_line",
        "max_trailers",
        "workers",
        "driver",
        "pin",
        "format",
        "cert",
        "key",
        "names",
        "ca",
        "sni",
        "insecure",
        "rate",
        "burst",
        "connections",
        "table_size",
        "allow",
        "deny",
        "limit",
        "strip_prefix",
        "request_headers",
        "response_headers",
        "retry",
        "request_buffering",
    ] {
        let set = text.lines().any(|l| {
            l.trim_start().starts_with(&format!("{key} = ")) || l.contains(&format!(" {key} = "))
        });
        assert!(set, "the example does not set `{key}`");
    }
}

/// The example with what it names of this host moved into its folder: its fixed ports to
/// port 0 (a check binds them: another program may hold 8080 here) and its access log beside it.
fn example_here() -> tests::TempFile {
    let path = example();
    let log = path.parent().unwrap().join("access.log");
    let text = std::fs::read_to_string(&path).unwrap();
    let moved = [
        ("\"127.0.0.1:8080\"", "\"127.0.0.1:0\""),
        ("\"[::1]:8080\"", "\"[::1]:0\""),
        ("\"127.0.0.1:8443\"", "\"127.0.0.1:0\""),
        ("\"127.0.0.1:9901\"", "\"127.0.0.1:0\""),
        (
            "\"/var/log/proxy/access.log\"",
            &format!("\"{}\"", log.display()),
        ),
    ];
    let text = moved.iter().fold(text, |t, (from, to)| {
        assert!(t.contains(from), "the example no longer has {from}");
        t.replace(from, to)
    });
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_config_on_the_example_succeeds() {
    let path = example_here();
    let path = path.to_str().unwrap();
    let out = proxy(&["--check-config", path]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The example's static root (proxy/www) does not exist: a warning, and still a success.
    let www = Path::new(path).parent().unwrap().join("www");
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "proxy: warning: {path}: route[4] (any host /static/): static root {} is not a \
             directory (yet): its requests get 404 until it is\n\
             proxy: configuration file {path} test is successful",
            www.display()
        )
    );
    let good = TempFile::new("good.toml", GOOD);
    let out = proxy(&["--check-config", good.path()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Where it is shipped, with the example certificates beside it (proxy/tls/), as a user on a
/// fresh clone runs it: no error in the file; the check opens what a start opens, so all it
/// may find is what this host lacks (the access log's /var/log/proxy, a port in use). The
/// example is a reference, not a starting config (that is scripts/systemd/proxy.toml).
#[test]
fn check_config_on_the_shipped_example_finds_no_file_error() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proxy/proxy.example.toml");
    let out = proxy(&["--check-config", src.to_str().unwrap()]);
    let err = stderr(&out);
    if out.status.code() == Some(0) {
        assert!(err.ends_with("test is successful\n"), "{err}");
    } else {
        assert_eq!(out.status.code(), Some(2), "{err}");
        let host = [
            "proxy: cannot open the access log /var/log/proxy/",
            "proxy: cannot listen on ",
        ];
        let first = err.lines().next().unwrap_or_default();
        assert!(host.iter().any(|h| first.starts_with(h)), "{err}");
    }
}

#[test]
fn broken_files_exit_2_naming_file_line_and_key() {
    let cases: &[(&str, String, &str, &[&str])] = &[
        (
            "syntax.toml",
            format!("{GOOD}[timeouts\nread = \"1s\"\n"),
            ":6:",
            &["table"],
        ),
        (
            "unknown.toml",
            format!("{GOOD}[timeouts]\nreed = \"1s\"\n"),
            ":7:",
            &["reed"],
        ),
        (
            "duration.toml",
            format!("{GOOD}[timeouts]\nread = \"3x\"\n"),
            ":7:",
            &["timeouts.read", "3x"],
        ),
        (
            "route.toml",
            format!("{GOOD}\n[[route]]\npath = \"/\"\nupstream = \"nope\"\n"),
            ":9:",
            &["route[0].upstream", "nope"],
        ),
        (
            "health.toml",
            format!("{GOOD}health = {{ interval = \"1s\", timeout = \"2s\" }}\n"),
            ":6:",
            &[
                "upstream.app.health",
                "timeout (2s) is longer than interval (1s)",
            ],
        ),
        (
            "expect.toml",
            format!("{GOOD}health = {{ expect = \"7xx\" }}\n"),
            ":6:",
            &["upstream.app.health.expect", "7xx"],
        ),
        (
            "rate.toml",
            format!("{GOOD}[client_limits]\nrate = \"10/x\"\n"),
            ":7:",
            &["client_limits.rate", "`10/x` is not a request rate"],
        ),
        (
            "burst.toml",
            format!("{GOOD}[client_limits]\nrate = \"1/s\"\nburst = -1\n"),
            ":8:",
            &["client_limits.burst", "burst must be 0 or more"],
        ),
        (
            "table.toml",
            format!("{GOOD}[client_limits]\ntable_size = 0\n"),
            ":7:",
            &["client_limits.table_size"],
        ),
        (
            "cidr.toml",
            format!("{GOOD}\n[[route]]\npath = \"/\"\nupstream = \"app\"\nallow = [\"10.0.0.0/33\"]\n"),
            ":10:",
            &["route[0].allow", "10.0.0.0/33", "prefix length"],
        ),
        (
            "limit.toml",
            format!("{GOOD}\n[[route]]\npath = \"/\"\nupstream = \"app\"\nlimit = {{ rate = \"5/h\" }}\n"),
            ":10:",
            &["route[0].limit.rate", "5/h"],
        ),
        (
            "retry.toml",
            format!("{GOOD}\n[[route]]\npath = \"/\"\nupstream = \"app\"\nretry = {{ on = [\"sometimes\"] }}\n"),
            ":10:",
            &["route[0].retry", "sometimes"],
        ),
        (
            "headers.toml",
            format!("{GOOD}\n[[route]]\npath = \"/\"\nupstream = \"app\"\nrequest_headers = {{ remove = [\"Content-Length\"] }}\n"),
            ":10:",
            &["route[0].request_headers", "Content-Length"],
        ),
        ("missing.toml", String::new(), "", &["listen"]),
        (
            "proxy_protocol.toml",
            GOOD.replace("\n\n", "\nproxy_protocol = \"yes\"\n"),
            ":3:",
            &["listen[0].proxy_protocol", "boolean"],
        ),
        (
            "send_proxy.toml",
            format!("{GOOD}proxy_protocol = \"v3\"\n"),
            ":6:",
            &["upstream.app.proxy_protocol", "v3", "v1"],
        ),
        (
            "real_ip_from.toml",
            format!("{GOOD}[headers]\nreal_ip_from = [\"10.0.0.0/33\"]\n"),
            ":7:",
            &["headers.real_ip_from", "10.0.0.0/33", "prefix length"],
        ),
        // Passed the check, then aborted the start allocating the hash ring.
        (
            "weight.toml",
            GOOD.replace(
                "[\"127.0.0.1:9001\"]",
                "[{ addr = \"127.0.0.1:9001\", weight = 4294967295 }]\nbalance = \"hash\"",
            ),
            ":5:",
            &["upstream.app.servers[0].weight", "1000"],
        ),
        (
            "real_ip_header.toml",
            format!("{GOOD}[headers]\nreal_ip_header = \"X Real IP\"\n"),
            ":7:",
            &["headers.real_ip_header", "not a field name"],
        ),
    ];
    for (name, text, line, words) in cases {
        let f = TempFile::new(name, text);
        for mode in ["--check-config", "--config"] {
            let out = proxy(&[mode, f.path()]);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{name} {mode}: {err}");
            let first = err.lines().next().unwrap_or_default();
            let want = format!("proxy: {}{line}", f.path());
            assert!(
                first.starts_with(&want),
                "{name} {mode}: want {want:?}, got {first:?}"
            );
            for w in *words {
                assert!(first.contains(w), "{name} {mode}: want {w:?} in {first:?}");
            }
            if mode == "--check-config" {
                assert!(err.contains("test failed"), "{name}: {err}");
                assert_eq!(err.lines().count(), 2, "{name}: {err}");
            } else {
                assert_eq!(err.lines().count(), 1, "{name}: {err}");
            }
        }
    }
    let out = proxy(&["--check-config", "/nonexistent/proxy.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("proxy: /nonexistent/proxy.toml: "),
        "{}",
        stderr(&out)
    );
}

/// Every kind of file error, in-process: the message starts `file:line: key `k``.
#[test]
fn file_errors_name_line_and_key_in_process() {
    let err = |text: &str| {
        proxy::config::from_toml("p.toml", text)
            .unwrap_err()
            .to_string()
    };
    let cases: &[(&str, &str, &[&str])] = &[
        // Syntax.
        ("[[listen]\naddr = 1\n", "p.toml:1:", &[]),
        // Unknown keys, at every level.
        ("lisen = 1\n", "p.toml:1:", &["lisen"]),
        (&format!("{MINIMAL}[timeouts]\nconect = \"1s\"\n"), "p.toml:7: key `timeouts", &["conect"]),
        (
            "[[listen]]\naddr = \"127.0.0.1:1\"\n[upstream.a]\nservers = [{ addr = \"127.0.0.1:2\", wieght = 2 }]\n",
            "p.toml:4: key `upstream.a.servers[0]",
            &["wieght"],
        ),
        // Bad values.
        (&format!("{MINIMAL}[timeouts]\nread = \"3x\"\n"), "p.toml:7: key `timeouts.read`", &["3x"]),
        (&format!("{MINIMAL}[timeouts]\nread = \"0s\"\n"), "p.toml:7: key `timeouts.read`", &["greater than zero"]),
        ("[[listen]]\naddr = \"nonsense\"\n", "p.toml:2: key `listen[0].addr`", &["nonsense"]),
        (
            "[[listen]]\naddr = \"127.0.0.1:1\"\n[upstream.a]\nservers = [{ addr = \"127.0.0.1:2\", weight = 0 }]\n",
            "p.toml:4: key `upstream.a.servers[0].weight`",
            &["nonzero"],
        ),
        // A weight past the cap: once aborted the start (and a reload) building the hash ring.
        (
            "[[listen]]\naddr = \"127.0.0.1:1\"\n[upstream.a]\nbalance = \"hash\"\nservers = [{ addr = \"127.0.0.1:2\", weight = 4294967295 }]\n",
            "p.toml:5: key `upstream.a.servers[0].weight`",
            &["1000"],
        ),
        (&format!("{MINIMAL}[upstream.a]\nservers = [\"x:y:z\"]\n"), "p.toml:7: key `upstream.a.servers[0]`", &["x:y:z"]),
        (&format!("{MINIMAL}balance = \"nope\"\n"), "p.toml:6: key `upstream.app.balance`", &["nope"]),
        (&format!("{MINIMAL}[runtime]\nworkers = 0\n"), "p.toml:7: key `runtime.workers`", &["auto"]),
        (&format!("{MINIMAL}[runtime]\ndriver = \"kqueue\"\n"), "p.toml:7: key `runtime.driver`", &["kqueue"]),
        (&format!("{MINIMAL}[limits]\nmax_headers = 100000\n"), "p.toml:7: key `limits.max_headers`", &["512"]),
        (&format!("{MINIMAL}[limits]\nmax_body = \"lots\"\n"), "p.toml:7: key `limits.max_body`", &["lots"]),
        (&format!("{MINIMAL}[[route]]\npath = \"api\"\nupstream = \"app\"\n"), "p.toml:7: key `route[0].path`", &["/"]),
        // A route's own upstream options (issue 27 c).
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nstrip_prefix = 1\n"), "p.toml:8: key `route[0].strip_prefix`", &["bool"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nrequest_headers = {{ set = {{ \"X-A\" = \"a\\r\\nX-B: b\" }} }}\n"), "p.toml:8: key `route[0].request_headers`", &["X-A", "control"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nrequest_headers = {{ set = {{ \"X A\" = \"a\" }} }}\n"), "p.toml:8: key `route[0].request_headers`", &["X A", "field name"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nrequest_headers = {{ remove = [\"Transfer-Encoding\"] }}\n"), "p.toml:8: key `route[0].request_headers`", &["Transfer-Encoding", "framing"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nrequest_headers = {{ remove = [\"host\"] }}\n"), "p.toml:8: key `route[0].request_headers`", &["host", "set it instead"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nrequest_headers = {{ add = {{}} }}\n"), "p.toml:8: key `route[0].request_headers", &["add"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nresponse_headers = {{ set = {{ \"Connection\" = \"close\" }} }}\n"), "p.toml:8: key `route[0].response_headers`", &["Connection", "hop-by-hop"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nresponse_headers = {{ set = {{ \"X\" = \"a\\u0000\" }} }}\n"), "p.toml:8: key `route[0].response_headers`", &["NUL"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nresponse_headers = {{ set = {{ \"X\" = \"1\" }}, remove = [\"x\"] }}\n"), "p.toml:8: key `route[0].response_headers`", &["twice"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\ntimeouts = {{ read = \"3x\" }}\n"), "p.toml:8: key `route[0].timeouts.read`", &["3x"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\ntimeouts = {{ connect = \"0s\" }}\n"), "p.toml:8: key `route[0].timeouts.connect`", &["greater than zero"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\ntimeouts = {{ header = \"1s\" }}\n"), "p.toml:8: key `route[0].timeouts", &["header", "upstream_send"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nretry = {{ tries = 0 }}\n"), "p.toml:8: key `route[0].retry`", &["tries = 0"]),
        (&format!("{MINIMAL}[retry]\non = [\"5xx\"]\n"), "p.toml:6: key `retry`", &["on", "5xx"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nretry = {{ tries = 11 }}\n"), "p.toml:8: key `route[0].retry`", &["1 to 10"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nretry = {{ on = [\"200\"] }}\n"), "p.toml:8: key `route[0].retry`", &["200", "400 to 599"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nretry = {{ methods = \"some\" }}\n"), "p.toml:8: key `route[0].retry`", &["some", "idempotent"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nretry = {{ tries = 2, when = [] }}\n"), "p.toml:8: key `route[0].retry", &["when"]),
        (&format!("{MINIMAL}[[route]]\nreturn = {{ status = 200 }}\nstrip_prefix = true\n"), "p.toml:6: key `route[0].strip_prefix`", &["upstream"]),
        (&format!("{MINIMAL}[[route]]\nreturn = {{ status = 200 }}\nretry = {{ tries = 2 }}\n"), "p.toml:6: key `route[0].retry`", &["upstream"]),
        (&format!("{MINIMAL}[[route]]\nstatic = {{ root = \"www\" }}\nretry = {{ tries = 2 }}\n"), "p.toml:6: key `route[0].retry`", &["upstream"]),
        (&format!("{MINIMAL}[[route]]\nreturn = {{ status = 200 }}\nrequest_buffering = false\n"), "p.toml:6: key `route[0].request_buffering`", &["upstream"]),
        (&format!("{MINIMAL}[[route]]\nupstream = \"app\"\nrequest_buffering = \"off\"\n"), "p.toml:8: key `route[0].request_buffering`", &["bool"]),
        // Checks across keys.
        (
            &format!("{MINIMAL}\n[[route]]\npath = \"/\"\nupstream = \"app\"\n\n[[route]]\npath = \"/api/\"\nupstream = \"ap\"\n"),
            "p.toml:13: key `route[1].upstream`",
            &["ap", "app"],
        ),
        (
            &format!("{MINIMAL}[[route]]\nupstream = \"app\"\n[[route]]\nupstream = \"app\"\n"),
            "p.toml:8: key `route[1]`",
            &["already"],
        ),
        // Routes that could never match: a host with a port (the router reads the Host field
        // without its port, so this was `example.com` again), and a path that decodes to an
        // earlier route's (the router kept the first and dropped the other without a word).
        (
            &format!("{MINIMAL}[[route]]\nhost = \"example.com:8443\"\nupstream = \"app\"\n"),
            "p.toml:7: key `route[0].host`",
            &["example.com:8443", "port", "listen"],
        ),
        (
            &format!("{MINIMAL}[[route]]\nhost = \"[::1]:80\"\nupstream = \"app\"\n"),
            "p.toml:7: key `route[0].host`",
            &["[::1]:80", "port"],
        ),
        (
            &format!("{MINIMAL}[[route]]\npath = \"/api/\"\nupstream = \"app\"\n[[route]]\npath = \"/%61pi/\"\nupstream = \"app\"\n"),
            "p.toml:9: key `route[1]`",
            &["`/%61pi/`", "route[0]", "`/api/`", "already"],
        ),
        (
            &format!("{MINIMAL}[[route]]\nhost = \"a.test\"\npath = \"/x//y/\"\nupstream = \"app\"\n[[route]]\nhost = \"A.Test.\"\npath = \"/x/y/\"\nupstream = \"app\"\n"),
            "p.toml:10: key `route[1]`",
            &["`/x/y/`", "route[0]", "`/x//y/`", "a.test"],
        ),
        (
            &format!("{MINIMAL}[[listen]]\naddr = \"127.0.0.1:8080\"\n"),
            "p.toml:6: key `listen[1].addr`",
            &["127.0.0.1:8080"],
        ),
        (
            &format!("{MINIMAL}[upstream.b]\nservers = [\n  \"127.0.0.1:1\",\n  \"no-such-host.invalid:80\",\n]\n"),
            "p.toml:9: key `upstream.b.servers[1]`",
            &["no-such-host.invalid"],
        ),
        (&format!("{MINIMAL}[upstream.b]\nservers = []\n"), "p.toml:6: key `upstream.b.servers`", &["at least one"]),
        (&format!("{MINIMAL}[upstream.b]\nservers = [\"127.0.0.1:1\"]\n"), "p.toml: key `route`", &["[[route]]"]),
        ("[upstream.a]\nservers = [\"127.0.0.1:1\"]\n", "p.toml: key `listen`", &["[[listen]]"]),
        ("[[listen]]\naddr = \"127.0.0.1:1\"\n", "p.toml: key `upstream`", &["upstream"]),
    ];
    for (text, prefix, words) in cases {
        let e = err(text);
        assert!(e.starts_with(prefix), "want {prefix:?}, got {e:?}\n{text}");
        for w in *words {
            assert!(e.contains(w), "want {w:?} in {e:?}");
        }
        assert!(!e.contains("serde_spanned"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn bad_flags_exit_2_with_one_line_naming_them() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["--workers", "0"], &["--workers", "0"]),
        (&["--read-timeout", "3x"], &["--read-timeout", "3x"]),
        (&["--balance", "nope"], &["--balance", "nope"]),
        (&["--listen", "nonsense"], &["--listen", "nonsense"]),
        (&["--no-such-flag"], &["--no-such-flag"]),
        (&["--listen", "127.0.0.1:0"], &["--upstream"]),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "no-such-host.invalid:80",
            ],
            &["no-such-host.invalid"],
        ),
        (&[], &["--listen"]),
    ];
    for (args, words) in cases {
        let out = proxy(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        for w in *words {
            assert!(err.contains(w), "{args:?}: want {w:?} in {err:?}");
        }
        // One style for a flag's error and a file's: `proxy: message` (no clap `error:`).
        assert!(err.starts_with("proxy: "), "{args:?}: {err}");
        assert!(!err.contains("error: "), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_mentions_every_flag_and_its_default() {
    let out = proxy(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--listen",
        "--upstream",
        "--static",
        "--config",
        "--check-config",
        "--workers",
        "--driver",
        "--no-pin",
        "--pin",
        "--balance",
        "--connect-timeout",
        "--read-timeout",
        "--upstream-send-timeout",
        "--header-timeout",
        "--body-timeout",
        "--body-min-rate",
        "--send-timeout",
        "--idle-timeout",
        "--shutdown-timeout",
        "--max-body",
        "--max-connections",
        "--backlog",
        "--keepalive",
        "--keepalive-timeout",
        "--keepalive-requests",
        "--max-fails",
        "--fail-timeout",
        "--no-preserve-host",
        "--no-x-forwarded-for",
        "--no-x-real-ip",
        "--no-x-forwarded-proto",
        "--cache",
        "--admin",
        "--access-log",
        "--access-log-format",
        "--health-check",
        "--upstream-ca",
        "--upstream-insecure",
        "--cache-no-sendfile",
        "--tls-cert",
        "--tls-key",
        "--takeover-socket",
        "--takeover",
        "--no-multishot",
        "--no-splice",
        "--steer",
        "--max-conns",
        "--proxy-protocol",
        "--completions",
        "--version",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
    // Each flag's entry (up to the next flag) carries its default.
    let options = help.split("  -h, --help").next().unwrap_or_default();
    let entries: Vec<&str> = options.split("\n      --").skip(1).collect();
    assert_eq!(entries.len(), 49, "{help}");
    for e in entries {
        assert!(e.contains("[default: "), "no default in: --{e}");
    }
    for default in [
        "[default: 10s]",
        "[default: 75s]",
        "[default: round-robin]",
        "[default: unlimited]",
        "[default: 500B/s]",
    ] {
        assert!(help.contains(default), "{default} missing");
    }
}

#[test]
fn version_works() {
    let out = proxy(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("proxy {}", env!("CARGO_PKG_VERSION"))
    );
}

/// A file's routes drive the real data path: host routes first, longest prefix, 404 otherwise.
#[test]
fn file_routes_reach_their_groups() {
    let a = tests::origin();
    let b = tests::origin();
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\
         [upstream.a]\nservers = [\"{}\"]\n\
         [upstream.b]\nservers = [{{ addr = \"{}\", weight = 3 }}]\n\
         [[route]]\nhost = \"b.example\"\nupstream = \"b\"\n\
         [[route]]\npath = \"/b/\"\nupstream = \"b\"\n\
         [[route]]\npath = \"/a/\"\nupstream = \"a\"\n\
         [runtime]\nworkers = 1\npin = false\n[timeouts]\nshutdown = \"2s\"\n",
        a.addr(),
        b.addr()
    );
    let cfg = proxy::config::from_toml("routes.toml", &text).expect("config");
    proxy::config::validate(&cfg).expect("valid");
    let p = Proxy::start(cfg);
    let ask = |host: &str, path: &str| {
        let mut c = p.connect();
        c.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        c.response().status
    };
    // (host, path, status, requests seen by a and b so far)
    let cases = [
        ("x.example", "/a/1", 200, (1, 0)),
        ("x.example", "/b/1", 200, (1, 1)),
        ("B.Example:8080", "/a/1", 200, (1, 2)),
        ("b.example", "/anything", 200, (1, 3)),
        ("x.example", "/", 404, (1, 3)),
        ("x.example", "/ab", 404, (1, 3)),
    ];
    for (host, path, status, (na, nb)) in cases {
        assert_eq!(ask(host, path), status, "{host} {path}");
        assert_eq!((a.requests(), b.requests()), (na, nb), "{host} {path}");
    }
    p.stop();
}

/// The binary in quick mode: prints its summary, serves, and exits 0 on SIGTERM.
#[test]
fn binary_starts_serves_and_stops_on_sigterm() {
    let o = tests::origin();
    let upstream = o.addr().to_string();
    // The summary is printed once the listeners are bound: no sleep needed.
    let mut p = ProxyProcess::start(
        ProxyProcess::command()
            .args(["--listen", "127.0.0.1:0", "--upstream", &upstream])
            .args(["--workers", "1", "--no-pin", "--shutdown-timeout", "2s"]),
    );
    let mut c = tests::inproc::Client::connect(p.addr);
    assert_eq!(c.get("/").status, 200);
    assert_eq!(o.requests(), 1);
    p.signal(libc::SIGTERM);
    drop(c);
    let status = p.exit_within(Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(0));
}

/// The address rule end to end: an upstream given by host name (`localhost`, whatever order
/// the resolver lists `::1` and 127.0.0.1 in) reaches an origin on 127.0.0.1, in quick mode
/// and from a file alike.
#[test]
fn upstream_host_names_reach_an_ipv4_origin() {
    let o = tests::origin();
    let upstream = format!("localhost:{}", o.addr().port());
    let quick = proxy::cli::config_from_args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        upstream.as_str(),
        "--workers",
        "1",
        "--no-pin",
        "--shutdown-timeout",
        "2s",
    ])
    .expect("quick mode");
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[upstream.app]\nservers = [\"{upstream}\"]\n\
         [runtime]\nworkers = 1\npin = false\n[timeouts]\nshutdown = \"2s\"\n"
    );
    let file = proxy::config::from_toml("names.toml", &text).expect("file");
    for (n, cfg) in [quick, file].into_iter().enumerate() {
        let addrs = &cfg.groups[proxy::config::GroupId::new(0)].servers
            [proxy::config::ServerId::new(0)]
        .addrs;
        assert_eq!(addrs[0], o.addr(), "IPv4 first: {addrs:?}");
        let p = Proxy::start(cfg);
        let mut c = p.connect();
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.response().status, 200);
        assert_eq!(o.requests(), n as u64 + 1);
        p.stop();
    }
}

/// docs/man/proxy.1 is what the clap definitions make (`UPDATE_MAN=1` rewrites it).
#[test]
fn man_page_is_current() {
    use clap::CommandFactory;
    tests::manual::check_man_page(proxy::cli::Args::command());
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    tests::manual::check_completions("proxy", &["check-config", "takeover-socket", "pin"]);
}

/// A config, certificate or key file is read up to 16 MiB: before, `--config /dev/zero` (or a
/// certificate named so) read until an allocation failed (here, in a bounded address space:
/// an abort). One line naming the file, exit 2.
#[test]
fn an_endless_config_or_certificate_file_is_refused_at_its_limit() {
    let o = tests::origin();
    let up = o.addr().to_string();
    let cases: [&[&str]; 3] = [
        &["--config", "/dev/zero"],
        &["--check-config", "/dev/zero"],
        &[
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &up,
            "--tls-cert",
            "/dev/zero",
            "--tls-key",
            "/dev/zero",
        ],
    ];
    for args in cases {
        let mut cmd = Command::new(tests::bin("proxy"));
        cmd.args(args).stdout(std::process::Stdio::piped());
        tests::process::limit_address_space(&mut cmd, 1 << 30);
        let out = tests::process::Process::spawn(&mut cmd).output(Duration::from_secs(60));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("/dev/zero: larger than 16 MiB"),
            "{args:?}: {err}"
        );
        // `--check-config` adds nginx -t's "test failed" line.
        let lines = if args[0] == "--check-config" { 2 } else { 1 };
        assert_eq!(err.trim_end().lines().count(), lines, "{args:?}: {err}");
    }
}
