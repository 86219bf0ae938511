//! Item 4: a key's variants are capped (`max_variants`), the least recently used out first,
//! so `Vary: User-Agent` with a new value per request cannot grow one key's chain.

use tests::raw::Client;

fn get(addr: std::net::SocketAddr, agent: &str) -> String {
    let mut c = Client::connect(addr);
    let r = crate::ask(
        &mut c,
        &format!(
            "GET /v?header=Vary:User-Agent HTTP/1.1\r\nHost: t\r\nUser-Agent: {agent}\r\n\r\n"
        ),
        false,
    );
    assert_eq!(r.status, 200, "{agent}");
    r.header("x-cache").unwrap_or("(none)").to_string()
}

#[test]
fn a_keys_variants_are_capped_by_max_variants() {
    let origin = shared::origin::Origin::start(Default::default()).expect("origin starts");
    let p = crate::start(&format!(
        "[upstream.o]\nservers = [\"{}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"o\"\ncache = {{ ttl = \"60s\", max_variants = 3 }}\n",
        origin.addr()
    ));
    for a in ["a", "b", "c"] {
        assert_eq!(get(p.addr, a), "MISS", "{a}");
    }
    // Used again: "a" is no longer the least recently used; "b" is.
    assert_eq!(get(p.addr, "a"), "HIT");
    assert_eq!(get(p.addr, "d"), "MISS");
    assert_eq!(get(p.addr, "b"), "MISS", "b was the one to go");
    for a in ["d", "b"] {
        assert_eq!(get(p.addr, a), "HIT", "{a}");
    }
    assert_eq!(origin.requests(), 5);
}

/// An origin that answers every request with the values it received for `names` (`name=value`
/// each, `-` when absent), `Vary: <vary>`, fresh for a minute: the answer an application
/// that localises or geolocates from those fields gives. `.1` counts the requests.
fn field_echo(
    vary: &'static str,
    names: &'static [&'static str],
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let count = std::sync::Arc::new(AtomicU64::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || {
                echo_fields(s, vary, names, || {
                    counted.fetch_add(1, Ordering::SeqCst);
                })
            });
        }
    });
    (addr, count)
}

/// One connection of [`field_echo`]: heads in (no bodies: GETs), answers out, until the peer
/// closes or nothing arrives for `WAIT` (a pooled connection the proxy keeps).
fn echo_fields(s: std::net::TcpStream, vary: &str, names: &[&str], mut counted: impl FnMut()) {
    s.set_read_timeout(Some(tests::raw::WAIT)).unwrap();
    crate::answer_each_head(s, |head| {
        counted();
        let body: Vec<String> = names
            .iter()
            .map(|n| format!("{n}={}", crate::head_field(head, n)))
            .collect();
        crate::Answer {
            fields: format!("Vary: {vary}\r\n"),
            body: body.join(" "),
        }
    })
}

/// A connection to `to` from the loopback address `from` (127.0.0.0/8 is all ours).
fn connect_from(from: &str, to: std::net::SocketAddr) -> Client {
    let ip: std::net::IpAddr = from.parse().unwrap();
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&std::net::SocketAddr::new(ip, 0).into()).unwrap();
    s.connect(&to.into()).unwrap();
    let stream: std::net::TcpStream = s.into();
    stream.set_nodelay(true).unwrap();
    stream.set_write_timeout(Some(tests::raw::WAIT)).unwrap();
    Client::from_stream(stream)
}

fn cached_route(origin: std::net::SocketAddr) -> tests::inproc::Proxy {
    crate::start(&format!(
        "[upstream.o]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"o\"\ncache = {{ ttl = \"60s\" }}\n"
    ))
}

/// (body, X-Cache) of `GET /p` with `fields`, from the loopback address `from`.
fn get_from(addr: std::net::SocketAddr, from: &str, fields: &str) -> (String, String) {
    let mut c = connect_from(from, addr);
    let r = crate::ask(
        &mut c,
        &format!("GET /p HTTP/1.1\r\nHost: t\r\n{fields}\r\n"),
        false,
    );
    assert_eq!(r.status, 200, "{from} {fields:?}");
    let cache = r.header("x-cache").unwrap_or("(none)").to_string();
    (String::from_utf8_lossy(&r.body).into_owned(), cache)
}

/// The proxy writes X-Real-IP and X-Forwarded-For itself, from the client's address: a
/// response that varies on them was fetched for one client only, and another client (whose
/// own request carries neither field, or the first client's address in them) must never get
/// it. Seen failing before the fix: 127.0.0.3 got "x-real-ip=127.0.0.2" as a HIT.
#[test]
fn a_response_varying_on_a_field_the_proxy_writes_is_never_served_to_another_client() {
    let (origin, count) = field_echo("X-Real-IP, X-Forwarded-For", &["x-real-ip"]);
    let p = cached_route(origin);
    let first = get_from(p.addr, "127.0.0.2", "");
    assert_eq!(first.0, "x-real-ip=127.0.0.2");
    let other = get_from(p.addr, "127.0.0.3", "");
    assert_eq!(other.0, "x-real-ip=127.0.0.3", "X-Cache {}", other.1);
    // Naming the first client in the fields the proxy replaces changes nothing.
    let posing = get_from(p.addr, "127.0.0.3", "X-Real-IP: 127.0.0.2\r\n");
    assert_eq!(posing.0, "x-real-ip=127.0.0.3", "X-Cache {}", posing.1);
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
}

/// A field the client's Connection names is hop-by-hop: the proxy does not send it, so the
/// origin answers as for a request without it, and that answer is the variant of a request
/// without it (RFC 9111 4.1 matches the request the origin saw). Seen failing before the
/// fix: the default page was stored as the "fr" variant, and served to French clients.
#[test]
fn a_field_the_connection_names_is_absent_for_the_variant() {
    let (origin, count) = field_echo("Accept-Language", &["accept-language"]);
    let p = cached_route(origin);
    let fr = "Accept-Language: fr\r\n";
    let hidden = "Accept-Language: fr\r\nConnection: Accept-Language\r\n";
    let from = "127.0.0.1";
    assert_eq!(
        get_from(p.addr, from, hidden),
        ("accept-language=-".into(), "MISS".into())
    );
    let french = get_from(p.addr, from, fr);
    assert_eq!(french.0, "accept-language=fr", "X-Cache {}", french.1);
    // Each stored answer serves the requests the origin would see alike.
    assert_eq!(
        get_from(p.addr, from, ""),
        ("accept-language=-".into(), "HIT".into())
    );
    assert_eq!(
        get_from(p.addr, from, hidden),
        ("accept-language=-".into(), "HIT".into())
    );
    assert_eq!(
        get_from(p.addr, from, fr),
        ("accept-language=fr".into(), "HIT".into())
    );
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);
}
