//! Per client limits and access rules (issue 27): `[client_limits]` rate, burst and
//! connections, a route's `limit`, `allow` and `deny`, on every route action, with exact
//! counts (a rate of one per minute makes the burst the whole allowance during a test).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tests::inproc::Proxy;
use tests::raw::{assert_closed, assert_well_formed, Client, Response, WAIT};
use tests::scrape::{scrape, value};
use tests::toml_proxy::{ask, get};

/// A proxy from `rest` with `workers` workers and an admin listener.
fn start(workers: usize, rest: &str) -> Proxy {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = {workers}\npin = false\n\
         [timeouts]\nshutdown = \"1s\"\n[admin]\naddr = \"127.0.0.1:0\"\n{rest}"
    );
    let cfg = proxy::config::from_toml("limits.toml", &text).expect("valid config");
    Proxy::start(cfg)
}

fn metrics(p: &Proxy) -> std::collections::HashMap<String, f64> {
    scrape(p.running().admin_addr().expect("an admin listener"))
}

/// A connection to `to` from the loopback address `from` (127.0.0.0/8 is all ours).
fn connect_from(from: &str, to: SocketAddr) -> Client {
    let ip: IpAddr = from.parse().unwrap();
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::new(ip, 0).into()).unwrap();
    s.connect(&to.into()).unwrap();
    let stream: std::net::TcpStream = s.into();
    stream.set_nodelay(true).unwrap();
    stream.set_write_timeout(Some(WAIT)).unwrap();
    Client::from_stream(stream)
}

/// A 429 as the limits answer it: Retry-After in whole seconds, within `secs`.
fn assert_limited(r: &Response, secs: std::ops::RangeInclusive<u64>) {
    assert_well_formed(r, 429);
    let after: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("Retry-After: {r:?}"));
    assert!(
        secs.contains(&after),
        "Retry-After {after}, wanted {secs:?}"
    );
}

const HELLO: &str = "[[route]]\npath = \"/\"\nreturn = { status = 200, body = \"hi\" }\n";

#[test]
fn over_the_rate_is_429_at_once_with_retry_after_and_the_connection_stays() {
    let p = start(
        1,
        &format!("[client_limits]\nrate = \"1/m\"\nburst = 4\n{HELLO}"),
    );
    let mut c = Client::connect(p.addr);
    for i in 0..5 {
        let r = get(&mut c, "x", "/");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"hi"[..]),
            "request {i}"
        );
    }
    for _ in 0..3 {
        let r = get(&mut c, "x", "/");
        assert_limited(&r, 59..=60);
        assert!(r.header("connection").is_none(), "keep-alive: {r:?}");
    }
    // HEAD: the same head, no body; the connection still usable.
    let r = ask(&mut c, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", true);
    assert_eq!(
        (r.status, r.header("retry-after")),
        (429, Some("60")),
        "{r:?}"
    );
    assert!(r.body.is_empty());
    let r = get(&mut c, "x", "/");
    assert_limited(&r, 59..=60);
    let m = metrics(&p);
    assert_eq!(value(&m, "proxy_limited_requests_total{route=\"/\"}"), 5.0);
    assert_eq!(value(&m, "proxy_denied_requests_total{route=\"/\"}"), 0.0);
    assert_eq!(
        value(&m, "proxy_requests_total{route=\"/\",code=\"4xx\"}"),
        5.0
    );
}

#[test]
fn a_refused_body_is_skipped_when_whole_and_the_connection_closes_when_not() {
    let p = start(
        1,
        &format!(
            "{HELLO}[[route]]\npath = \"/up\"\nreturn = {{ status = 201 }}\n\
             limit = {{ rate = \"1/m\", burst = 0 }}\n"
        ),
    );
    let mut c = Client::connect(p.addr);
    let post = "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    assert_well_formed(&ask(&mut c, post, false), 201);
    // Over the route's limit: the whole body is skipped, and the next request is read as one.
    assert_limited(&ask(&mut c, post, false), 59..=60);
    let r = get(&mut c, "x", "/");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hi"[..]));
    // Pipelined behind the refused one: answered in order.
    let both = format!("{post}GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_limited(&ask(&mut c, &both, false), 59..=60);
    let r = c.response(WAIT).expect("the pipelined request's answer");
    assert_eq!(r.status, 200);
    // A body still on its way is never read: the 429 says close, and the connection ends.
    let mut c = Client::connect(p.addr);
    let partial = "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly part";
    let r = ask(&mut c, partial, false);
    assert_limited(&r, 59..=60);
    assert_eq!(r.header("connection"), Some("close"));
    assert_closed(&mut c, "after a 429 with its body unread");
    drop(c);
    // Counted when the request ends: after its lingering close, which the drop ends.
    let counted = tests::eventually(WAIT, || {
        value(&metrics(&p), "proxy_limited_requests_total{route=\"/up\"}") == 3.0
    });
    assert!(counted, "{:?}", metrics(&p));
    let m = metrics(&p);
    assert_eq!(value(&m, "proxy_limited_requests_total{route=\"/\"}"), 0.0);
}

/// A static root with `a.txt` in it.
fn www() -> tests::TempDir {
    let dir = tests::temp_dir("limits-www");
    std::fs::write(dir.join("a.txt"), "file").unwrap();
    dir
}

#[test]
fn limits_hold_on_static_and_proxied_routes_and_the_origin_sees_none_refused() {
    let o = tests::origin();
    let root = www();
    let p = start(
        1,
        &format!(
            "[upstream.app]\nservers = [\"{}\"]\n\
             [[route]]\npath = \"/\"\nupstream = \"app\"\nlimit = {{ rate = \"1/m\", burst = 1 }}\n\
             [[route]]\npath = \"/a.txt\"\nstatic = {{ root = \"{}\" }}\n\
             limit = {{ rate = \"1/m\", burst = 0 }}\n",
            o.addr(),
            root.display()
        ),
    );
    let mut c = Client::connect(p.addr);
    for _ in 0..2 {
        assert_eq!(get(&mut c, "x", "/x").status, 200);
    }
    assert_limited(&get(&mut c, "x", "/x"), 59..=60);
    let r = get(&mut c, "x", "/a.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"file"[..]));
    assert_limited(&get(&mut c, "x", "/a.txt"), 59..=60);
    assert_eq!(
        o.complete_requests(),
        2,
        "the refused request never reached the origin"
    );
    let m = metrics(&p);
    assert_eq!(value(&m, "proxy_limited_requests_total{route=\"/\"}"), 1.0);
    assert_eq!(
        value(&m, "proxy_limited_requests_total{route=\"/a.txt\"}"),
        1.0
    );
}

#[test]
fn allow_and_deny_answer_403_on_every_action_and_skip_the_body() {
    let o = tests::origin();
    let root = www();
    let routes = |path: &str, rules: &str| {
        let action = match path {
            "/p/" => "upstream = \"app\"".to_string(),
            "/c/" => "upstream = \"app\"\ncache = { ttl = \"1m\" }".to_string(),
            "/a.txt" => format!("static = {{ root = \"{}\" }}", root.display()),
            _ => "return = { status = 200, body = \"ok\" }".to_string(),
        };
        format!("[[route]]\npath = \"{path}\"\n{action}\n{rules}\n")
    };
    let mut text = format!("[upstream.app]\nservers = [\"{}\"]\n", o.addr());
    // 127.0.0.1 is refused by each rule set, 127.0.0.2 passes each.
    let rules = [
        "allow = [\"10.0.0.0/8\", \"127.0.0.2\"]",
        "deny = [\"127.0.0.1\"]",
        "allow = [\"127.0.0.0/8\"]\ndeny = [\"127.0.0.1/32\", \"::1\"]",
    ];
    for (i, r) in rules.iter().enumerate() {
        for path in ["/p/", "/c/", "/a.txt", "/r/"] {
            let host = format!("h{i}.test");
            text.push_str(&routes(path, &format!("{r}\nhost = \"{host}\"")));
        }
    }
    let p = start(1, &text);
    let mut denied = Client::connect(p.addr);
    let mut allowed = connect_from("127.0.0.2", p.addr);
    for i in 0..rules.len() {
        let host = format!("h{i}.test");
        for path in ["/p/x", "/c/x", "/a.txt", "/r/"] {
            let post =
                format!("POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 3\r\n\r\nabc");
            let get_req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n");
            let r = ask(&mut denied, &post, false);
            assert_well_formed(&r, 403);
            assert!(r.header("connection").is_none(), "{host}{path}: {r:?}");
            let x_cache = (path == "/c/x").then_some("BYPASS");
            assert_eq!(r.header("x-cache"), x_cache, "{host}{path}: {r:?}");
            assert_well_formed(&ask(&mut denied, &get_req, false), 403);
            let r = ask(&mut allowed, &get_req, false);
            assert_eq!(r.status, 200, "{host}{path} from 127.0.0.2: {r:?}");
        }
    }
    // The origin saw the allowed client's proxied and cached requests only.
    assert_eq!(o.complete_requests(), 2 * rules.len() as u64);
    let m = metrics(&p);
    let denied: f64 = (0..rules.len())
        .flat_map(|i| ["/p/", "/c/", "/a.txt", "/r/"].map(move |path| format!("h{i}.test{path}")))
        .map(|route| {
            value(
                &m,
                &format!("proxy_denied_requests_total{{route=\"{route}\"}}"),
            )
        })
        .sum();
    assert_eq!(denied, 2.0 * 4.0 * rules.len() as f64);
}

/// Requests from `from`, each on a new connection, as fast as they go: how many got 429
/// (every other one must be a 200).
fn limited_of(p: &Proxy, from: &str, n: usize) -> usize {
    let mut limited = 0;
    for i in 0..n {
        let mut c = connect_from(from, p.addr);
        let r = ask(
            &mut c,
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            false,
        );
        match r.status {
            200 => {}
            429 => limited += 1,
            s => panic!("request {i} from {from}: {s}"),
        }
    }
    limited
}

#[test]
fn two_workers_count_one_client_exactly_and_another_client_apart() {
    // Rate 1/m with burst 10: each address may send 11 in a test's time, wherever its
    // connections land. Without steering by address, 30 new connections spread over both
    // workers, and each would allow its own 11 (or 6 each with the limit divided: 12).
    let p = start(
        2,
        &format!("[client_limits]\nrate = \"1/m\"\nburst = 10\n{HELLO}"),
    );
    assert_eq!(limited_of(&p, "127.0.0.1", 30), 19);
    assert_eq!(
        limited_of(&p, "127.0.0.2", 30),
        19,
        "a second address has its own bucket"
    );
    assert_eq!(limited_of(&p, "127.0.0.1", 3), 3);
    let m = metrics(&p);
    assert_eq!(value(&m, "proxy_limited_requests_total{route=\"/\"}"), 41.0);
    assert!(p.running().summary().contains("client limits: exact"));
}

#[test]
fn two_workers_hold_a_rate_within_ten_percent() {
    // 3x the rate from one address on new connections for about 1.5 s. The 429s expected
    // follow from when each request was sent (measured here, not assumed): a token bucket
    // of 40/s with no burst, run over those times.
    let p = start(
        2,
        &format!("[client_limits]\nrate = \"40/s\"\nburst = 0\n{HELLO}"),
    );
    let interval = Duration::from_secs(1) / 40;
    let (mut sent, mut limited) = (Vec::new(), 0usize);
    let start = std::time::Instant::now();
    for i in 0..180u32 {
        // Paced at 3x the rate (a pause under 9 ms; none when behind).
        let due = start + interval * i / 3;
        std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        sent.push(std::time::Instant::now());
        limited += limited_of(&p, "127.0.0.1", 1);
    }
    let mut tat = start;
    let mut expected = 0usize;
    for t in sent {
        if tat > t {
            expected += 1;
        } else {
            tat = t + interval;
        }
    }
    let off = limited.abs_diff(expected);
    assert!(
        off as f64 <= (0.1 * expected as f64).max(2.0),
        "{limited} refused, {expected} expected (180 sent in {:?})",
        start.elapsed()
    );
    assert!(
        expected >= 60,
        "sent at 3x the rate: {expected} expected refusals"
    );
}

#[test]
fn connections_over_the_limit_are_closed_at_accept_and_counted() {
    let p = start(1, &format!("[client_limits]\nconnections = 2\n{HELLO}"));
    let mut open: Vec<Client> = (0..2).map(|_| Client::connect(p.addr)).collect();
    for c in &mut open {
        assert_eq!(get(c, "x", "/").status, 200);
    }
    // The third: closed without a byte (its request is never read).
    let mut third = Client::connect(p.addr);
    let _ = third.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_closed(&mut third, "a third connection of one client");
    // Another address is not limited by this one's.
    let mut other = connect_from("127.0.0.2", p.addr);
    assert_eq!(get(&mut other, "x", "/").status, 200);
    assert_eq!(value(&metrics(&p), "proxy_limited_connections_total"), 1.0);
    // One closes: a new one is served (once the proxy saw the close).
    drop(open.pop());
    let served = tests::eventually(Duration::from_secs(5), || {
        let mut c = Client::connect(p.addr);
        let _ = c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        c.response(WAIT).is_ok_and(|r| r.status == 200)
    });
    assert!(served, "a connection is accepted again once one closed");
    assert_eq!(
        get(&mut open[0], "x", "/").status,
        200,
        "the first stays served"
    );
}

/// Behind a balancer (a PROXY protocol listener) the connection limit counts the client its
/// header names, not the balancer's address: two clients through one balancer each have
/// their own count, and a client over its count is closed without a byte.
#[test]
fn a_proxy_protocol_listeners_connection_limit_counts_the_headers_client() {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\nproxy_protocol = true\n[runtime]\nworkers = 1\n\
         pin = false\n[timeouts]\nshutdown = \"1s\"\n[admin]\naddr = \"127.0.0.1:0\"\n\
         [client_limits]\nconnections = 1\n{HELLO}"
    );
    let p = Proxy::start(proxy::config::from_toml("limits.toml", &text).expect("valid config"));
    let header = |src: &str| format!("PROXY TCP4 {src} 127.0.0.1 40000 80\r\n");
    let mut a = Client::connect(p.addr);
    a.send(header("198.51.100.1").as_bytes()).unwrap();
    assert_eq!(get(&mut a, "x", "/").status, 200);
    // Another client through the same balancer address: its own count.
    let mut b = Client::connect(p.addr);
    b.send(header("198.51.100.2").as_bytes()).unwrap();
    assert_eq!(get(&mut b, "x", "/").status, 200);
    // The first client's second connection: over its limit.
    let mut again = Client::connect(p.addr);
    let req = format!(
        "{}GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        header("198.51.100.1")
    );
    let _ = again.send(req.as_bytes());
    assert_closed(&mut again, "the header's client's second connection");
    assert_eq!(value(&metrics(&p), "proxy_limited_connections_total"), 1.0);
    // The first connections are still served.
    assert_eq!(get(&mut a, "x", "/").status, 200);
    assert_eq!(get(&mut b, "x", "/").status, 200);
}

/// Behind a balancer (`real_ip_from`, or a PROXY protocol listener) the client's address is
/// not the TCP peer, so connections cannot be steered to a worker by it (a balancer's would
/// all land on one): each worker holds 1/workers of each limit, and the start-up line says
/// so and why. One keep-alive connection reaches one worker: its client gets that share,
/// burst 5 over 2 workers allowing 3 at once.
#[test]
fn behind_a_balancer_each_worker_holds_a_share_and_the_start_up_line_says_so() {
    let rate = format!("[client_limits]\nrate = \"1/m\"\nburst = 5\n{HELLO}");
    let p = start(
        2,
        &format!("[headers]\nreal_ip_from = [\"127.0.0.1\"]\n{rate}"),
    );
    let summary = p.running().summary();
    for want in [
        "client limits: approximate, each of 2 workers allows 1/2 of each rate",
        "real_ip_from",
    ] {
        assert!(summary.contains(want), "{want:?} not in:\n{summary}");
    }
    let mut c = Client::connect(p.addr);
    let served = (0..20)
        .filter(|_| {
            let req = "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n";
            ask(&mut c, req, false).status == 200
        })
        .count();
    assert_eq!(served, 3, "burst 5 over 2 workers, on one worker");

    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\nproxy_protocol = true\n[runtime]\nworkers = 2\n\
         pin = false\n{rate}"
    );
    let p = Proxy::start(proxy::config::from_toml("limits.toml", &text).expect("valid config"));
    let summary = p.running().summary();
    for want in ["client limits: approximate", "PROXY protocol"] {
        assert!(summary.contains(want), "{want:?} not in:\n{summary}");
    }
    let p = start(
        1,
        &format!("[headers]\nreal_ip_from = [\"127.0.0.1\"]\n{rate}"),
    );
    let summary = p.running().summary();
    assert!(
        summary.contains("client limits: exact (one worker)"),
        "{summary}"
    );
}

/// A peer in `real_ip_from` is a balancer: its connections carry many clients' requests and
/// are not a client's, so `connections` never counts nor closes them (a client it names has
/// no connection of its own to count). A direct client is still counted by its address.
#[test]
fn a_trusted_balancers_connections_are_not_counted_as_a_clients() {
    let p = start(
        1,
        &format!(
            "[headers]\nreal_ip_from = [\"127.0.0.1\"]\n[client_limits]\nconnections = 1\n{HELLO}"
        ),
    );
    let summary = p.running().summary();
    assert!(
        summary.contains("connections counts the clients that connect themselves"),
        "{summary}"
    );
    let req = "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 9.9.9.9\r\n\r\n";
    let mut open: Vec<Client> = (0..3).map(|_| Client::connect(p.addr)).collect();
    for (i, c) in open.iter_mut().enumerate() {
        assert_eq!(ask(c, req, false).status, 200, "balancer connection {i}");
    }
    // A client of its own (not trusted): its second connection is over the limit.
    let mut direct = connect_from("127.0.0.2", p.addr);
    assert_eq!(get(&mut direct, "x", "/").status, 200);
    let mut again = connect_from("127.0.0.2", p.addr);
    let _ = again.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_closed(&mut again, "a direct client's second connection");
    assert_eq!(value(&metrics(&p), "proxy_limited_connections_total"), 1.0);
    for c in &mut open {
        assert_eq!(
            ask(c, req, false).status,
            200,
            "the balancer's connections stay"
        );
    }
}
