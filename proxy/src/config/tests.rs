//! The file layer and the resolve step together: the example file, defaults, values read,
//! overrides, quick mode against the file it stands for, and `validate` on configs built in code.

use super::*;
use shared::runtime::DriverChoice;

const EXAMPLE: &str = include_str!("../../proxy.example.toml");

/// The example, in a folder of its own with the certificate files it names (`tls/`), made
/// once per test run: its path.
fn example_path() -> &'static std::path::Path {
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("proxy-example-{}", std::process::id()));
        write_example_certs(&dir.join("tls"));
        let path = dir.join("proxy.example.toml");
        std::fs::write(&path, EXAMPLE).unwrap();
        path
    })
}

/// `ca.pem`, `example.crt`/`.key` (example.com) and `api.crt`/`.key` (its SNI names).
fn write_example_certs(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let leaf = |names: &[&str], stem: &str| {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.join(format!("{stem}.crt")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
        cert.pem()
    };
    let ca = leaf(&["ca.example"], "ca");
    std::fs::write(dir.join("ca.pem"), ca).unwrap();
    leaf(&["example.com"], "example");
    leaf(&["api.example.com", "*.api.example.com"], "api");
}

fn example() -> Config {
    load(example_path()).unwrap()
}

pub(crate) const LISTEN: &str = "[[listen]]\naddr = \"127.0.0.1:8080\"\n";

pub(crate) const MINIMAL: &str =
    "[[listen]]\naddr = \"127.0.0.1:8080\"\n\n[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";

#[test]
fn example_parses_with_every_key() {
    let cfg = example();
    assert_eq!(cfg.listeners.len(), 3);
    assert_eq!(cfg.listeners[1].addr, "[::1]:8080".parse().unwrap());
    let tls = cfg.listeners[2]
        .tls
        .as_ref()
        .expect("the third listener is HTTPS");
    let dir = example_path().parent().unwrap();
    assert_eq!(tls.spec.default.cert, dir.join("tls/example.crt"));
    assert_eq!(
        tls.spec.sni[0].names,
        ["api.example.com", "*.api.example.com"]
    );
    assert_eq!(cfg.groups.len(), 3);
    let secure = cfg.groups[GroupId::new(1)]
        .tls
        .as_ref()
        .expect("group `secure` is TLS");
    assert_eq!(
        format!("{:?}", secure.names[ServerId::new(0)]),
        "DnsName(\"api.internal\")"
    );
    assert!(!secure.insecure);
    let app = &cfg.groups[GroupId::new(0)];
    assert_eq!(app.name, "app");
    assert_eq!(app.servers.len(), 3);
    assert_eq!(app.servers[ServerId::new(0)].weight, 2);
    let max_conns = |s: usize| app.servers[ServerId::new(s)].max_conns;
    assert_eq!((max_conns(0), max_conns(1)), (0, 1000));
    assert_eq!(app.servers[ServerId::new(2)].name, "127.0.0.1:9003");
    assert_eq!(
        app.servers[ServerId::new(2)].addrs,
        ["127.0.0.1:9003".parse().unwrap()]
    );
    assert_eq!(app.servers[ServerId::new(2)].weight, 1);
    assert_eq!(cfg.groups[GroupId::new(2)].balance, Balance::Hash);
    assert_eq!(
        cfg.groups[GroupId::new(2)].hash_key,
        crate::config::hash_key::HashKey::Uri
    );
    let h = app
        .health
        .as_ref()
        .expect("the example's app group is checked");
    assert_eq!(h.path, "/healthz");
    assert_eq!(
        (h.interval, h.timeout),
        (Duration::from_secs(2), Duration::from_secs(1))
    );
    assert_eq!((h.rise, h.fall), (2, 3));
    assert_eq!(h.expect, health::Expect::Status(200));
    assert!(cfg.groups.iter().skip(1).all(|g| g.health.is_none()));
    assert_eq!(cfg.routes.len(), 7);
    assert_eq!(
        cfg.routes[RouteId::new(0)].host.as_deref(),
        Some("static.example.com")
    );
    assert_eq!(
        cfg.routes[RouteId::new(0)].action.group(),
        Some(GroupId::new(2))
    );
    assert_eq!(
        cfg.routes[RouteId::new(1)].host.as_deref(),
        Some("*.example.com")
    );
    assert!(matches!(&cfg.routes[RouteId::new(2)].action, Action::Return(r) if r.status() == 302));
    assert!(matches!(&cfg.routes[RouteId::new(3)].action, Action::Return(r) if r.status() == 200));
    let Action::Static(site) = &cfg.routes[RouteId::new(4)].action else {
        panic!("{:?}", cfg.routes[RouteId::new(4)])
    };
    // Relative to the file's folder.
    assert_eq!(site.root, dir.join("www"));
    assert_eq!(site.index, "index.html");
    assert_eq!(
        cfg.routes[RouteId::new(5)].action.group(),
        Some(GroupId::new(0))
    );
    assert!(cfg.routes[RouteId::new(5)].opts.is_none());
    // The route with every option of its own (issue 27 c).
    let api = &cfg.routes[RouteId::new(6)];
    let o = api.opts.as_deref().expect("the /api/ route has options");
    assert_eq!(o.strip, Some("/api/".len()));
    // `request_buffering = true`: the default, said out loud.
    assert!(!o.stream_body && api.buffers_request_body());
    assert_eq!(&*o.request.as_ref().unwrap().block, b"X-Env: prod\r\n");
    assert!(o.request.as_ref().unwrap().drops("x-debug"));
    assert!(o.response.as_ref().unwrap().drops("server"));
    let t = api.timeouts(&cfg.timeouts);
    let secs = std::time::Duration::from_secs;
    assert_eq!(
        (t.connect, t.read, t.upstream_send),
        (secs(1), secs(5), secs(10))
    );
    assert_eq!((t.header, t.idle), (cfg.timeouts.header, cfg.timeouts.idle));
    let r = o.retry.as_ref().unwrap();
    assert_eq!(
        (r.tries, r.connect, r.timeout, r.reset, r.all_methods),
        (3, true, true, true, false)
    );
    assert!(r.on_status(502) && r.on_status(503) && r.on_status(504) && !r.on_status(500));
    // The example's root does not exist here: a warning, not an error.
    assert_eq!(warnings(&cfg).len(), 1, "{:?}", warnings(&cfg));
    assert_eq!(cfg.limits.max_body, None);
    assert_eq!(cfg.source, example_path().display().to_string());
    validate(&cfg).unwrap();
}

#[test]
fn request_buffering_false_streams_every_body_of_its_route_alone() {
    let cfg = from_toml(
        "p.toml",
        &format!(
            "{MINIMAL}[[route]]\npath = \"/up/\"\nupstream = \"app\"\nrequest_buffering = false\n\
             [[route]]\npath = \"/\"\nupstream = \"app\"\n"
        ),
    )
    .unwrap();
    let (up, rest) = (&cfg.routes[RouteId::new(0)], &cfg.routes[RouteId::new(1)]);
    assert!(!up.buffers_request_body());
    assert!(up.opts.as_deref().is_some_and(|o| o.stream_body));
    assert!(rest.buffers_request_body() && rest.opts.is_none());
}

#[test]
fn example_values_are_the_defaults() {
    // The example documents the defaults: the minimal file must give the same values.
    let ex = example();
    let min = from_toml("x", MINIMAL).unwrap();
    assert_eq!(format!("{:?}", ex.timeouts), format!("{:?}", min.timeouts));
    assert_eq!(format!("{:?}", ex.headers), format!("{:?}", min.headers));
    assert_eq!(format!("{:?}", ex.limits), format!("{:?}", min.limits));
    assert_eq!(format!("{:?}", ex.runtime), format!("{:?}", min.runtime));
    assert_eq!(ex.listeners[0].backlog, min.listeners[0].backlog);
    let (e, m) = (&ex.groups[GroupId::new(0)], &min.groups[GroupId::new(0)]);
    let knobs = |g: &UpstreamGroup| {
        (
            g.balance,
            g.keepalive,
            g.keepalive_timeout,
            g.keepalive_requests,
            g.keepalive_check,
        )
    };
    assert_eq!(knobs(e), knobs(m));
    let (e, m) = (&e.servers[ServerId::new(0)], &m.servers[ServerId::new(0)]);
    assert_eq!((e.max_fails, e.fail_timeout), (m.max_fails, m.fail_timeout));
}

#[test]
fn minimal_file_gets_defaults_and_a_default_route() {
    let cfg = from_toml("p.toml", MINIMAL).unwrap();
    assert_eq!(cfg.listeners[0].backlog, DEFAULT_BACKLOG);
    assert_eq!(cfg.routes.len(), 1);
    assert_eq!(cfg.routes[RouteId::new(0)].path_prefix, "/");
    assert_eq!(
        cfg.routes[RouteId::new(0)].action.group(),
        Some(GroupId::new(0))
    );
    let s = &cfg.groups[GroupId::new(0)].servers[ServerId::new(0)];
    assert_eq!(
        (s.weight, s.max_fails, s.fail_timeout),
        (1, DEFAULT_MAX_FAILS, DEFAULT_FAIL_TIMEOUT)
    );
    assert_eq!(cfg.timeouts.header, Timeouts::default().header);
    assert_eq!(cfg.limits.codec, Limits::default());
    assert_eq!(
        cfg.limits.max_connections,
        ProxyLimits::default().max_connections
    );
    assert!(cfg.runtime.pin);
    assert!(cfg.runtime.multishot);
}

#[test]
fn values_are_read() {
    let text = format!(
        "{MINIMAL}[timeouts]\nread = \"250ms\"\nshutdown = 0\n[limits]\nmax_body = \"1MiB\"\nmax_headers = 20\n\
         max_connections = 7\nmax_request_line = 512\nmax_head = \"1KiB\"\n\
         [runtime]\nworkers = 3\ndriver = \"epoll\"\npin = false\nmultishot = false\n[headers]\nx_real_ip = false\n"
    );
    let cfg = from_toml("p.toml", &text).unwrap();
    assert_eq!(cfg.timeouts.read, Duration::from_millis(250));
    assert_eq!(cfg.timeouts.shutdown, Duration::ZERO);
    assert_eq!(cfg.limits.max_body, Some(1 << 20));
    assert_eq!(cfg.limits.codec.max_headers, 20);
    assert_eq!(cfg.limits.codec.max_head, 1024);
    assert_eq!(cfg.limits.codec.max_request_line, 512);
    assert_eq!(cfg.limits.max_connections, 7);
    assert_eq!(cfg.runtime.workers, 3);
    assert_eq!(cfg.runtime.driver, DriverChoice::Epoll);
    assert!(!cfg.runtime.pin);
    assert!(!cfg.runtime.multishot);
    assert!(!cfg.headers.x_real_ip);
    assert!(cfg.headers.x_forwarded_for);
    for (name, want) in [
        ("io_uring", DriverChoice::IoUring),
        ("iouring", DriverChoice::IoUring),
        ("io-uring", DriverChoice::IoUring),
        ("auto", DriverChoice::Auto),
    ] {
        let text = format!("{MINIMAL}[runtime]\ndriver = \"{name}\"\n");
        assert_eq!(from_toml("p.toml", &text).unwrap().runtime.driver, want);
    }
}

#[test]
fn steer_is_read_and_a_bad_value_named() {
    use crate::config::Steer;
    assert_eq!(from_toml("p.toml", MINIMAL).unwrap().steer, Steer::Kernel);
    for (name, want) in [("cpu", Steer::Cpu), ("kernel", Steer::Kernel)] {
        let text = format!("{MINIMAL}[runtime]\nsteer = \"{name}\"\n");
        let cfg = from_toml("p.toml", &text).unwrap();
        assert_eq!((cfg.steer, cfg.steer.name()), (want, name));
    }
    let text = format!("{MINIMAL}[runtime]\nsteer = \"core\"\n");
    let e = from_toml("p.toml", &text).unwrap_err().to_string();
    assert!(
        e.starts_with("p.toml") && e.contains("core") && e.contains("kernel") && e.contains("cpu"),
        "{e}"
    );
}

/// One spelling of the balance names: the file's (serde) is `--balance`'s (clap) and the
/// summary's.
#[test]
fn balance_names_are_spelled_once() {
    use clap::ValueEnum;
    for b in Balance::value_variants() {
        let text = format!("{MINIMAL}balance = \"{}\"\n", b.name());
        assert_eq!(
            from_toml("p.toml", &text).unwrap().groups[GroupId::new(0)].balance,
            *b
        );
        assert_eq!(Balance::from_str(&b.name(), false), Ok(*b));
    }
    assert_eq!(Balance::LeastConn.name(), "least-conn");
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let e = load("/nonexistent/proxy.toml").unwrap_err().to_string();
    assert!(e.starts_with("/nonexistent/proxy.toml: "), "{e}");
}

#[test]
fn routes_take_exactly_one_action() {
    let ok = format!(
        "{LISTEN}[[route]]\npath = \"/r\"\nreturn = {{ status = 302, location = \"/x/{{random:1-21}}\" }}\n\
         [[route]]\nhost = \"*.Example.com\"\npath = \"/s/\"\nstatic = {{ root = \"/srv/www\" }}\n"
    );
    let cfg = from_toml("/etc/p/p.toml", &ok).unwrap();
    // No group is needed when no route proxies.
    assert!(cfg.groups.is_empty());
    assert!(matches!(&cfg.routes[RouteId::new(0)].action, Action::Return(r) if r.status() == 302));
    assert_eq!(
        cfg.routes[RouteId::new(1)].host.as_deref(),
        Some("*.example.com")
    );
    let Action::Static(site) = &cfg.routes[RouteId::new(1)].action else {
        panic!("{:?}", cfg.routes[RouteId::new(1)])
    };
    assert_eq!(
        (site.root.to_str(), site.index.as_str()),
        (Some("/srv/www"), "index.html")
    );
    // A relative root is relative to the file's folder.
    let rel = ok.replace("/srv/www", "www");
    let cfg = from_toml("/etc/p/p.toml", &rel).unwrap();
    let Action::Static(site) = &cfg.routes[RouteId::new(1)].action else {
        panic!()
    };
    assert_eq!(site.root.to_str(), Some("/etc/p/www"));
    let w = warnings(&cfg);
    assert_eq!(
        w,
        [
            "/etc/p/p.toml: route[1] (*.example.com /s/): static root /etc/p/www is not a \
          directory (yet): its requests get 404 until it is"
        ]
    );
}

#[test]
fn route_action_errors_name_the_line_and_key() {
    let group = "[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";
    for (routes, want) in [
        (
            "[[route]]\npath = \"/\"\n",
            "p.toml:5: key `route[0]`: a route needs exactly one of `upstream`, `return` and `static`",
        ),
        (
            "[[route]]\npath = \"/\"\nupstream = \"app\"\nreturn = { status = 200 }\n",
            "p.toml:5: key `route[0]`: a route needs exactly one",
        ),
        (
            "[[route]]\npath = \"/\"\nreturn = { status = 700 }\n",
            "p.toml:7: key `route[0].return`: status 700: expected 200 to 599",
        ),
        (
            "[[route]]\npath = \"/\"\nreturn = { status = 302, location = \"/{rand:1-2}\" }\n",
            "p.toml:7: key `route[0].return`: location: unknown variable `{rand}`",
        ),
        (
            "[[route]]\npath = \"/\"\nreturn = { status = 200, bodyy = \"x\" }\n",
            "unknown field `bodyy`",
        ),
        (
            "[[route]]\npath = \"/\"\nstatic = { root = \"www\", index = \"a/b.html\" }\n",
            "`a/b.html` is not a file name",
        ),
        (
            "[[route]]\nhost = \"*example.com\"\nupstream = \"app\"\n",
            "`*example.com` is not a host name",
        ),
        (
            "[[route]]\nhost = \"a.*.com\"\nupstream = \"app\"\n",
            "is not a host name",
        ),
        ("[[route]]\nhost = \"*.\"\nupstream = \"app\"\n", "is not a host name"),
        (
            "[[route]]\nupstream = \"ap\"\n",
            "no upstream group named `ap` (defined: app)",
        ),
    ] {
        let text = format!("{LISTEN}{group}{routes}");
        let e = from_toml("p.toml", &text).unwrap_err().to_string();
        assert!(e.contains(want), "{routes}: {e}");
    }
    // No group at all.
    let e = from_toml("p.toml", LISTEN).unwrap_err().to_string();
    assert!(e.contains("no upstream group"), "{e}");
    let e = from_toml("p.toml", &format!("{LISTEN}[[route]]\nupstream = \"x\"\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no upstream group named `x` (none is defined)"),
        "{e}"
    );
}

#[test]
fn cache_settings_are_read_checked_and_named() {
    let cfg = example();
    let Action::Proxy { cache: Some(c), .. } = &cfg.routes[RouteId::new(1)].action else {
        panic!(
            "the example's second route has a cache: {:?}",
            cfg.routes[RouteId::new(1)]
        )
    };
    assert_eq!(c.ttl, std::time::Duration::from_secs(60));
    assert_eq!((c.max_bytes, c.max_object), (64 << 20, 1 << 20));
    assert_eq!(c.stale_if_error, std::time::Duration::from_secs(300));
    assert_eq!(c.purge_from.len(), 2);
    assert!(!c.allow_credentials);
    let group = "[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";
    for (routes, want) in [
        (
            "[[route]]\nupstream = \"app\"\ncache = { max_bytes = \"1KiB\", max_object = \"2KiB\" }\n",
            "p.toml:7: key `route[0].cache`: cache: max_object (2048 bytes) is larger than max_bytes (1024 bytes)",
        ),
        (
            "[[route]]\nupstream = \"app\"\ncache = { tll = \"1s\" }\n",
            "unknown field `tll`",
        ),
        (
            "[[route]]\nreturn = { status = 200 }\ncache = {}\n",
            "p.toml:7: key `route[0].cache`: `cache` goes on a route with `upstream`",
        ),
        (
            "[[route]]\nupstream = \"app\"\ncache = { purge_from = [\"10.0.0.0/33\"] }\n",
            "10.0.0.0/33",
        ),
    ] {
        let text = format!("{LISTEN}{group}{routes}");
        let e = from_toml("p.toml", &text).unwrap_err().to_string();
        assert!(e.contains(want), "{routes}: {e}");
    }
}

#[test]
fn health_settings_are_read_checked_and_named() {
    let group = "[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";
    let text = format!("{LISTEN}{group}health = {{ path = \"/ping\", expect = \"2xx\" }}\n");
    let h = from_toml("p.toml", &text).unwrap().groups[GroupId::new(0)]
        .health
        .clone()
        .unwrap();
    assert_eq!(h.path, "/ping");
    assert_eq!(h.expect, health::Expect::Class(2));
    assert_eq!((h.rise, h.fall, h.interval), (2, 3, Duration::from_secs(2)));
    let text = format!("{LISTEN}{group}health = {{}}\n");
    let h = from_toml("p.toml", &text).unwrap().groups[GroupId::new(0)]
        .health
        .clone()
        .unwrap();
    assert_eq!(h, health::HealthCheck::default());
    assert_eq!(h.expect, health::Expect::Success);
    for (line, want) in [
        (
            "health = { interval = \"1s\", timeout = \"2s\" }",
            "p.toml:5: key `upstream.app.health`: health: timeout (2s) is longer than interval (1s)",
        ),
        ("health = { intervall = \"1s\" }", "unknown field `intervall`"),
        ("health = { expect = 700 }", "`700` is not a status"),
        ("health = { expect = \"2x\" }", "`2x` is not a status"),
        ("health = { rise = 0 }", "must be from 1 to 1000"),
        ("health = { fall = -1 }", "must be from 1 to 1000"),
        ("health = { path = \"healthz\" }", "must start with `/`"),
        ("health = { path = \"/a b\" }", "no spaces"),
        ("health = { host = \"a b\" }", "is not a host"),
        ("health = { timeout = \"0s\" }", "greater than zero"),
        ("health = \"/healthz\"", "health"),
    ] {
        let text = format!("{LISTEN}{group}{line}\n");
        let e = from_toml("p.toml", &text).unwrap_err().to_string();
        assert!(e.contains(want), "{line}: {e}");
        assert!(e.starts_with("p.toml:"), "{line}: {e}");
    }
}

#[test]
fn pin_is_auto_on_or_off_and_true_false_stay_accepted() {
    use shared::runtime::PinMode;
    assert_eq!(
        from_toml("p.toml", MINIMAL).unwrap().runtime.pin_mode(),
        PinMode::Auto
    );
    for (value, want) in [
        ("\"auto\"", PinMode::Auto),
        ("\"on\"", PinMode::On),
        ("\"off\"", PinMode::Off),
        ("true", PinMode::On),
        ("false", PinMode::Off),
    ] {
        let cfg = from_toml("p.toml", &format!("{MINIMAL}[runtime]\npin = {value}\n")).unwrap();
        assert_eq!(cfg.runtime.pin_mode(), want, "pin = {value}");
    }
    let err = from_toml("p.toml", &format!("{MINIMAL}[runtime]\npin = \"always\"\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("runtime.pin") && err.contains("`auto`, `on` or `off`"),
        "{err}"
    );
}

#[test]
fn route_timeouts_merge_over_the_global_ones_and_the_flags() {
    let text = format!(
        "{MINIMAL}[timeouts]\nread = \"30s\"\n\n[[route]]\npath = \"/slow/\"\nupstream = \"app\"\n\
         timeouts = {{ read = \"250ms\" }}\n\n[[route]]\nupstream = \"app\"\n"
    );
    let file = schema::parse("t.toml", &text).unwrap();
    let flags = Overrides {
        edits: vec![Edit::Timeout(|t| &mut t.connect, Duration::from_secs(2))],
        ..Overrides::default()
    };
    let cfg = resolve(&file, &flags).unwrap();
    let slow = cfg.routes[RouteId::new(0)].timeouts(&cfg.timeouts);
    assert_eq!(slow.read, Duration::from_millis(250));
    assert_eq!(
        slow.connect,
        Duration::from_secs(2),
        "the flag reaches the route"
    );
    assert_eq!(slow.upstream_send, cfg.timeouts.upstream_send);
    let plain = cfg.routes[RouteId::new(1)].timeouts(&cfg.timeouts);
    assert_eq!(plain.read, Duration::from_secs(30));
    assert!(cfg.routes[RouteId::new(1)].opts.is_none());
}

#[test]
fn a_global_retry_applies_to_routes_without_their_own() {
    let text = format!(
        "{MINIMAL}[retry]\ntries = 2\non = [\"502\"]\n\n[[route]]\npath = \"/own/\"\n\
         upstream = \"app\"\nretry = {{ tries = 4, on = [\"connect\"] }}\n\n[[route]]\nupstream = \"app\"\n"
    );
    let cfg = from_toml("t.toml", &text).unwrap();
    let global = cfg.retry.as_ref();
    let own = cfg.routes[RouteId::new(0)].retry(global);
    assert_eq!(
        (own.tries, own.connect, own.on_status(502)),
        (4, true, false)
    );
    let plain = cfg.routes[RouteId::new(1)].retry(global);
    assert_eq!(
        (plain.tries, plain.connect, plain.on_status(502)),
        (2, false, true)
    );
    let none = from_toml("t.toml", MINIMAL).unwrap();
    assert_eq!(
        none.routes[RouteId::new(0)].retry(none.retry.as_ref()),
        &route_opts::RetryPolicy::BUILT_IN
    );
    let e = from_toml("t.toml", &format!("{MINIMAL}[retry]\ntries = 0\n")).unwrap_err();
    assert!(e.to_string().starts_with("t.toml:6: key `retry"), "{e}");
}

/// An admin address a listener's address covers (the same port, and the same IP or a
/// wildcard of the family) is refused with one line naming both: bound beside the listener's
/// SO_REUSEPORT group it would take part of the public port's connections and serve them the
/// admin endpoints. The admin socket is dual-stack, the listeners' IPv6 sockets are not.
#[test]
fn an_admin_address_a_listener_covers_is_refused_naming_both() {
    let with = |listen: &str, admin: &str| {
        from_toml(
            "p.toml",
            &format!(
                "[[listen]]\naddr = \"{listen}\"\n[admin]\naddr = \"{admin}\"\n\
                 [upstream.app]\nservers = [\"127.0.0.1:9001\"]\n"
            ),
        )
    };
    let overlapping = [
        ("127.0.0.1:8080", "127.0.0.1:8080"),
        ("0.0.0.0:8080", "127.0.0.1:8080"),
        ("127.0.0.1:8080", "0.0.0.0:8080"),
        ("[::]:8080", "[::1]:8080"),
        ("[::1]:8080", "[::]:8080"),
        ("127.0.0.1:8080", "[::]:8080"),
        ("0.0.0.0:8080", "[::ffff:127.0.0.1]:8080"),
    ];
    for (listen, admin) in overlapping {
        let e = match with(listen, admin) {
            Ok(_) => panic!("listen {listen}, admin {admin}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(&format!("admin address {admin}")) && e.contains(listen),
            "listen {listen}, admin {admin}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let apart = [
        ("0.0.0.0:8080", "127.0.0.1:9901"),
        ("127.0.0.1:8080", "127.0.0.2:8080"),
        // The listeners' IPv6 sockets are v6-only: [::] takes no IPv4 connection.
        ("[::]:8080", "127.0.0.1:8080"),
        ("127.0.0.1:0", "127.0.0.1:0"),
    ];
    for (listen, admin) in apart {
        assert!(
            with(listen, admin).is_ok(),
            "listen {listen}, admin {admin}: {:?}",
            with(listen, admin).err().map(|e| e.to_string())
        );
    }
}

#[test]
fn listen_addresses_that_cover_each_other_are_refused_naming_both() {
    // A wildcard listener takes every address of its family on its port: a second listener
    // on one of them passed the check and failed the start ("cannot listen on
    // 127.0.0.1:P: address already in use (is another copy running?)", its own listener).
    // A listener's IPv6 socket is v6-only: [::]:P and 0.0.0.0:P are apart.
    let with = |a: &str, b: &str| {
        from_toml(
            "p.toml",
            &format!(
                "[[listen]]\naddr = \"{a}\"\n[[listen]]\naddr = \"{b}\"\n\
                 [upstream.app]\nservers = [\"127.0.0.1:9001\"]\n"
            ),
        )
    };
    for (a, b) in [
        ("0.0.0.0:8080", "127.0.0.1:8080"),
        ("127.0.0.1:8080", "0.0.0.0:8080"),
        ("[::]:8080", "[::1]:8080"),
    ] {
        let e = match with(a, b) {
            Ok(_) => panic!("listen {a} and {b}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(a) && e.contains(b), "{a}, {b}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    for (a, b) in [
        ("0.0.0.0:8080", "[::]:8080"),
        ("127.0.0.1:8080", "127.0.0.2:8080"),
        ("0.0.0.0:8080", "127.0.0.1:8081"),
    ] {
        assert!(with(a, b).is_ok(), "listen {a} and {b}: refused");
    }
}

#[test]
fn a_group_mixing_plain_and_tls_servers_is_refused() {
    // A server without a scheme is plain, HTTPS only beside a `tls` table: beside an
    // https:// one without the table it became TLS (and port 80 without a port), and its
    // requests got 502 (`InvalidContentType`) where the docs promise a refusal.
    let group = |servers: &str, tls: &str| {
        from_toml(
            "p.toml",
            &format!("{LISTEN}[upstream.app]\nservers = [{servers}]\n{tls}"),
        )
    };
    let tls = "tls = { insecure = true }\n";
    for (servers, tls) in [
        (r#""127.0.0.1:9001", "https://127.0.0.1:9002""#, ""),
        (r#""https://localhost:9002", "127.0.0.1""#, ""),
        (r#""127.0.0.1:9001", "http://127.0.0.1:9002""#, tls),
        (r#""https://127.0.0.1:9001", "http://127.0.0.1:9002""#, ""),
    ] {
        let e = match group(servers, tls) {
            Ok(cfg) => panic!("{servers} {tls}: accepted: {:?}", cfg.groups),
            Err(e) => e.to_string(),
        };
        assert!(
            e.starts_with("p.toml:3: key `upstream.app.servers`: ") && e.contains("mixes plain"),
            "{servers} {tls}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    for (servers, tls, is_tls) in [
        (r#""127.0.0.1:9001", "http://127.0.0.1:9002""#, "", false),
        (r#""127.0.0.1:9001", "https://127.0.0.1:9002""#, tls, true),
        (
            r#""https://127.0.0.1:9001", "https://127.0.0.1:9002""#,
            "",
            true,
        ),
    ] {
        let cfg = group(servers, tls).unwrap_or_else(|e| panic!("{servers} {tls}: {e}"));
        let g = &cfg.groups[GroupId::new(0)];
        assert_eq!(g.tls.is_some(), is_tls, "{servers} {tls}");
    }
}

#[test]
fn values_echoed_in_errors_keep_the_error_one_line() {
    // A content type with CR LF printed its error over two lines (the raw bytes echoed),
    // where a server's bad address (a parse error) had its line break made ": ".
    let route = |r: &str| format!("{MINIMAL}[[route]]\n{r}\n");
    for r in [
        r#"return = { status = 200, content_type = "text/plain\r\nX: y" }"#,
        r#"return = { status = 200, content_type = "text/plain\rX: y" }"#,
        r#"return = { status = 200, content_type = "text/plain\nX: y" }"#,
        r#"return = { status = 302, location = "/{rand\r\n:1-2}" }"#,
        r#"host = "a\r\nb"
upstream = "app""#,
        r#"static = { root = "www", index = "a/\r\nb.html" }"#,
    ] {
        let e = from_toml("p.toml", &route(r)).unwrap_err().to_string();
        assert!(
            !e.contains(|c: char| c.is_control()) && e.starts_with("p.toml"),
            "{r}: {e:?}"
        );
    }
    let e = from_toml(
        "p.toml",
        &route(r#"return = { status = 200, content_type = "text/plain\r\nX: y" }"#),
    )
    .unwrap_err()
    .to_string();
    // Written as the file writes it, so what is wrong can be seen.
    assert!(
        e.contains(r"`text/plain\r\nX: y` is not a media type"),
        "{e:?}"
    );
    // A quoted key is echoed the same way (a flag's value: `cli::tests::config`).
    let text = format!("{LISTEN}[upstream.\"a\\r\\nb\"]\nservers = []\n");
    let e = from_toml("p.toml", &text).unwrap_err().to_string();
    assert!(e.contains(r"key `upstream.a\r\nb.servers`"), "{e:?}");
}

#[test]
fn a_max_body_of_zero_is_refused_pointing_to_unlimited() {
    // nginx's client_max_body_size 0 is "no limit"; here 0 was a limit of 0 bytes, and every
    // request with a body got 413.
    for v in ["0", "\"0\"", "\"0KiB\""] {
        let text = format!("{MINIMAL}[limits]\nmax_body = {v}\n");
        let e = match from_toml("p.toml", &text) {
            Ok(cfg) => panic!("max_body = {v}: accepted as {:?}", cfg.limits.max_body),
            Err(e) => e.to_string(),
        };
        assert!(
            e.starts_with("p.toml:7: key `limits.max_body`: ") && e.contains("\"unlimited\""),
            "{v}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let text = format!("{MINIMAL}[limits]\nmax_body = 1\n");
    assert_eq!(from_toml("p.toml", &text).unwrap().limits.max_body, Some(1));
}

/// Errors in a listener's `tls` table name the line of the part at fault, as other tables'
/// do: the `sni` entry (its `[[listen.tls.sni]]` header, or its line in an `sni = [...]`
/// array), else the `tls` table. They named the `[[listen]]` line and `listen[0].tls`
/// whichever entry it was, so a file of many certificates left the reader to search.
#[test]
fn tls_table_errors_name_the_line_of_the_entry_at_fault() {
    let dir = example_path().parent().unwrap().join("tls");
    let f = |stem: &str| dir.join(stem).display().to_string();
    let (api_crt, api_key) = (f("api.crt"), f("api.key"));
    let (ex_crt, ex_key) = (f("example.crt"), f("example.key"));
    let tables = |default_crt: &str, names: &str, crt: &str| {
        format!(
            "[[listen]]\naddr = \"127.0.0.1:8443\"\n\
             [listen.tls]\ncert = \"{default_crt}\"\nkey = \"{ex_key}\"\n\
             [[listen.tls.sni]]\nnames = [\"api.example.com\"]\ncert = \"{api_crt}\"\nkey = \"{api_key}\"\n\
             [[listen.tls.sni]]\nnames = {names}\ncert = \"{crt}\"\nkey = \"{api_key}\"\n\
             {}",
            &MINIMAL[LISTEN.len()..]
        )
    };
    let array = |names: &str| {
        format!(
            "[[listen]]\naddr = \"127.0.0.1:8443\"\n\
             [listen.tls]\ncert = \"{ex_crt}\"\nkey = \"{ex_key}\"\nsni = [\n\
             \x20 {{ names = [\"api.example.com\"], cert = \"{api_crt}\", key = \"{api_key}\" }},\n\
             \x20 {{ names = {names}, cert = \"{api_crt}\", key = \"{api_key}\" }},\n]\n\
             {}",
            &MINIMAL[LISTEN.len()..]
        )
    };
    let missing = f("missing.crt");
    for (text, want) in [
        (
            tables(&ex_crt, r#"["a..test"]"#, &api_crt),
            "p.toml:10: key `listen[0].tls.sni[1]`: sni name `a..test`",
        ),
        (
            tables(&ex_crt, r#"["x.api.example.com"]"#, &missing),
            "p.toml:10: key `listen[0].tls.sni[1]`: certificate file",
        ),
        (
            tables(&ex_crt, r#"["api.example.com"]"#, &api_crt),
            "p.toml:10: key `listen[0].tls.sni[1]`: sni name `api.example.com` is in sni[0]",
        ),
        (
            tables(&missing, r#"["x.api.example.com"]"#, &api_crt),
            "p.toml:3: key `listen[0].tls`: certificate file",
        ),
        (
            array(r#"["*."]"#),
            "p.toml:8: key `listen[0].tls.sni[1]`: sni name `*.`",
        ),
    ] {
        let e = match from_toml("p.toml", &text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        };
        assert!(e.starts_with(want), "{e}\nwanted: {want}\n{text}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // The same tables, right: accepted.
    let ok = tables(&ex_crt, r#"["*.api.example.com"]"#, &api_crt);
    let cfg = from_toml("p.toml", &ok).unwrap_or_else(|e| panic!("{e}\n{ok}"));
    assert_eq!(cfg.listeners[0].tls.as_ref().unwrap().spec.sni.len(), 2);
}

/// An `sni` entry is chosen by its names: one without any (`names = []`) loaded its
/// certificate for no client, without a word, and an empty name is no host name. Both are
/// refused naming the entry.
#[test]
fn an_sni_entry_without_a_name_or_with_an_empty_one_is_refused() {
    let dir = example_path().parent().unwrap().join("tls");
    let f = |stem: &str| dir.join(stem).display().to_string();
    let text = |names: &str| {
        format!(
            "[[listen]]\naddr = \"127.0.0.1:8443\"\n\
             [listen.tls]\ncert = \"{}\"\nkey = \"{}\"\n\
             [[listen.tls.sni]]\nnames = {names}\ncert = \"{}\"\nkey = \"{}\"\n{}",
            f("example.crt"),
            f("example.key"),
            f("api.crt"),
            f("api.key"),
            &MINIMAL[LISTEN.len()..]
        )
    };
    for (names, want) in [
        ("[]", "no names"),
        (r#"[""]"#, "empty"),
        (r#"["api.example.com", ""]"#, "empty"),
        (r#"["  "]"#, "not a host name"),
    ] {
        let e = match from_toml("p.toml", &text(names)) {
            Ok(_) => panic!("names = {names}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.starts_with("p.toml:6: key `listen[0].tls.sni[0]`: ") && e.contains(want),
            "names = {names}: {e}\nwanted: {want}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // A wildcard stays a name.
    let cfg = from_toml("p.toml", &text(r#"["*.api.example.com"]"#)).unwrap();
    assert_eq!(
        cfg.listeners[0].tls.as_ref().unwrap().spec.sni[0].names,
        ["*.api.example.com"]
    );
}

/// A head holds its request line: with `max_head` under `max_request_line`, a request line
/// the one allows the other refuses (431 for a line that was to get 414 only past
/// `max_request_line`). Refused naming both keys and values, at the line of the one given
/// (`max_head` when both are); a config built in code is refused by `validate`.
#[test]
fn a_max_head_smaller_than_max_request_line_is_refused_naming_both() {
    for (limits, want) in [
        (
            "max_request_line = \"16KiB\"\nmax_head = \"8KiB\"\n",
            "p.toml:8: key `limits.max_head`: max_head (8192 bytes) is smaller than \
             max_request_line (16384 bytes)",
        ),
        (
            "max_head = 4096\n",
            "p.toml:7: key `limits.max_head`: max_head (4096 bytes) is smaller than \
             max_request_line (8192 bytes)",
        ),
        (
            "max_request_line = \"128KiB\"\n",
            "p.toml:7: key `limits.max_request_line`: max_head (65536 bytes) is smaller than \
             max_request_line (131072 bytes)",
        ),
    ] {
        let text = format!("{MINIMAL}[limits]\n{limits}");
        let e = match from_toml("p.toml", &text) {
            Ok(cfg) => panic!("{limits}: accepted as {:?}", cfg.limits.codec),
            Err(e) => e.to_string(),
        };
        assert!(e.starts_with(want), "{limits}: {e}\nwanted: {want}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    for limits in [
        "max_request_line = \"8KiB\"\nmax_head = \"8KiB\"\n",
        "max_request_line = \"128KiB\"\nmax_head = \"128KiB\"\n",
        "max_request_line = 1024\n",
    ] {
        let text = format!("{MINIMAL}[limits]\n{limits}");
        from_toml("p.toml", &text).unwrap_or_else(|e| panic!("{limits}: {e}"));
    }
    let mut cfg = from_toml("p.toml", MINIMAL).unwrap();
    cfg.limits.codec.max_head = 100;
    let e = validate(&cfg).unwrap_err();
    assert!(
        e.contains("max_head (100 bytes)") && e.contains("max_request_line (8192 bytes)"),
        "{e}"
    );
}
