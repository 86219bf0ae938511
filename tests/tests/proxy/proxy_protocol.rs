//! PROXY protocol listeners (`[[listen]] proxy_protocol = true`, issue 27): the header's
//! address is the client's everywhere (the forwarded fields, `{remote_addr}`, the access log,
//! `purge_from`); a connection without a valid header is closed and never forwarded, and
//! counted; a partial header is closed at the header timeout.

use shared::proxy_protocol::{write_v2, V2_LOCAL, V2_SIGNATURE};
use std::net::SocketAddr;
use std::time::Duration;
use tests::inproc::Proxy;
use tests::raw::{assert_closed, response, Client, WAIT};

/// A proxy with one PROXY protocol listener, a 400 ms header timeout and `rest`.
fn start(rest: &str) -> Proxy {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\nproxy_protocol = true\n\
         [runtime]\nworkers = 1\npin = false\n\
         [timeouts]\nshutdown = \"1s\"\nheader = \"400ms\"\n{rest}"
    );
    Proxy::start(proxy::config::from_toml("pp.toml", &text).expect("valid config"))
}

fn upstream(origin: SocketAddr) -> String {
    format!(
        "[upstream.app]\nservers = [\"{origin}\"]\n[[route]]\npath = \"/\"\nupstream = \"app\"\n"
    )
}

/// The value of field `name` in each request `origin` captured, in order.
fn captured_field(origin: &shared::origin::Origin, name: &str) -> Vec<String> {
    let prefix = format!("{}: ", name.to_ascii_lowercase());
    origin
        .captured()
        .iter()
        .map(|r| {
            let text = String::from_utf8_lossy(r).into_owned();
            let line = text
                .lines()
                .find(|l| l.to_ascii_lowercase().starts_with(&prefix));
            line.map_or_else(String::new, |l| l[prefix.len()..].to_string())
        })
        .collect()
}

fn failures(p: &Proxy) -> [u64; 3] {
    let s = &p.running().stats()[0];
    s.proxy_protocol.each_ref().map(|c| c.get())
}

const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 198.51.100.1\r\n\r\n";

fn v2_header(src: &str, dst: &str) -> Vec<u8> {
    let mut h = Vec::new();
    write_v2(&mut h, src.parse().unwrap(), dst.parse().unwrap());
    h
}

/// A v2 TCP4 header from `src` to 10.0.0.1:80 with a NOOP TLV of `pad` bytes.
fn v2_with_noop(src: &str, pad: usize) -> Vec<u8> {
    let src: std::net::SocketAddrV4 = src.parse().unwrap();
    let len = (12 + 3 + pad) as u16;
    let mut h = V2_SIGNATURE.to_vec();
    h.extend_from_slice(&[0x21, 0x11]);
    h.extend_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&src.ip().octets());
    h.extend_from_slice(&[10, 0, 0, 1]);
    h.extend_from_slice(&src.port().to_be_bytes());
    h.extend_from_slice(&80u16.to_be_bytes());
    h.push(0x04);
    h.extend_from_slice(&(pad as u16).to_be_bytes());
    h.resize(h.len() + pad, 0);
    h
}

#[test]
fn v1_and_v2_clients_reach_the_origin_under_their_header_address() {
    let origin = tests::capturing_origin();
    let p = start(&upstream(origin.addr()));
    // v1, the header and two keep-alive requests in one write.
    let mut c = Client::connect(p.addr);
    let mut bytes = b"PROXY TCP4 192.0.2.7 10.0.0.1 40000 80\r\n".to_vec();
    bytes.extend_from_slice(GET);
    bytes.extend_from_slice(GET);
    c.send(&bytes).unwrap();
    assert_eq!(response(&mut c, "v1 first").status, 200);
    assert_eq!(response(&mut c, "v1 second").status, 200);
    // v2 over IPv6 with TLVs (AWS's VPC endpoint id, a NOOP), the header alone first.
    let mut h = V2_SIGNATURE.to_vec();
    h.extend_from_slice(&[0x21, 0x21, 0, 36 + 8 + 3]);
    h.extend_from_slice(
        &"2001:db8::7"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    h.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    h.extend_from_slice(&[0x9c, 0x40, 0, 80]);
    h.extend_from_slice(&[0xEA, 0, 5, 1, b'v', b'p', b'c', b'e', 0x04, 0, 0]);
    let mut c6 = Client::connect(p.addr);
    c6.send(&h).unwrap();
    c6.send(GET).unwrap();
    assert_eq!(response(&mut c6, "v2").status, 200);
    // v2 LOCAL (a balancer's own check): the socket's peer is the address.
    let mut local = Client::connect(p.addr);
    local.send(&[&V2_LOCAL[..], GET].concat()).unwrap();
    assert_eq!(response(&mut local, "v2 LOCAL").status, 200);
    // v1 UNKNOWN likewise.
    let mut unknown = Client::connect(p.addr);
    unknown
        .send(&[&b"PROXY UNKNOWN\r\n"[..], GET].concat())
        .unwrap();
    assert_eq!(response(&mut unknown, "v1 UNKNOWN").status, 200);
    assert_eq!(
        captured_field(&origin, "X-Forwarded-For"),
        [
            "198.51.100.1, 192.0.2.7",
            "198.51.100.1, 192.0.2.7",
            "198.51.100.1, 2001:db8::7",
            "198.51.100.1, 127.0.0.1",
            "198.51.100.1, 127.0.0.1",
        ]
    );
    assert_eq!(
        captured_field(&origin, "X-Real-IP"),
        [
            "192.0.2.7",
            "192.0.2.7",
            "2001:db8::7",
            "127.0.0.1",
            "127.0.0.1"
        ]
    );
    assert_eq!(failures(&p), [0, 0, 0]);
    p.stop();
}

/// A header split across segments is waited for (never read past, never spun on: the wait
/// wakes on new bytes only), on every driver: the request after it is parsed whole.
#[test]
fn a_header_in_pieces_is_read_whole() {
    let origin = tests::capturing_origin();
    for d in tests::drivers() {
        let mut cfg = tests::proxy_config(&[origin.addr()], &["--proxy-protocol"]);
        cfg.runtime.driver = tests::driver_choice(d);
        let p = Proxy::start(cfg);
        let header = v2_header("203.0.113.9:1234", "10.0.0.1:80");
        let mut c = Client::connect(p.addr);
        for piece in [&header[..3], &header[3..14], &header[14..20], &header[20..]] {
            c.send(piece).unwrap();
            // Each piece its own segment (no Nagle on the client).
            std::thread::sleep(Duration::from_millis(20));
        }
        c.send(GET).unwrap();
        assert_eq!(response(&mut c, "split header").status, 200, "{d}");
        let mut v1 = Client::connect(p.addr);
        v1.send(b"PROXY TCP6 2001:db8::5 ").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        v1.send(&[&b"::1 1 2\r\n"[..], GET].concat()).unwrap();
        assert_eq!(response(&mut v1, "split v1").status, 200, "{d}");
        // A v2 header with a 600-byte TLV, cut where the first look's buffer ends (254
        // bytes): that look filled it, and the look after growing it saw nothing new and
        // took the header for truncated (a reset, no answer).
        let long = v2_with_noop("192.0.2.7:12345", 600);
        let mut cut = Client::connect(p.addr);
        cut.send(&long[..254]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        cut.send(&[&long[254..], GET].concat()).unwrap();
        assert_eq!(response(&mut cut, "cut at 254").status, 200, "{d}");
        p.stop();
    }
    let want: Vec<&str> = tests::drivers()
        .iter()
        .flat_map(|_| ["203.0.113.9", "2001:db8::5", "192.0.2.7"])
        .collect();
    assert_eq!(captured_field(&origin, "X-Real-IP"), want);
}

#[test]
fn a_connection_without_a_valid_header_is_closed_and_never_forwarded() {
    let origin = tests::capturing_origin();
    let p = start(&upstream(origin.addr()));
    let bad: [&[u8]; 4] = [
        GET,
        b"PROXY TCP4 1.2.3.4 1.2.3.4 1 1\nGET / HTTP/1.1\r\n\r\n",
        b"PROXY TCP4 999.2.3.4 1.2.3.4 1 1\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n",
        // v2 with a length over the limit: refused from its 16 bytes.
        b"\r\n\r\n\0\r\nQUIT\n\x21\x11\xff\xffGET / HTTP/1.1\r\nHost: t\r\n\r\n",
    ];
    for bytes in bad {
        let mut c = Client::connect(p.addr);
        c.send(bytes).unwrap();
        assert_closed(&mut c, &String::from_utf8_lossy(bytes));
    }
    // An oversized v1 line: 107 bytes and no CRLF.
    let mut c = Client::connect(p.addr);
    c.send(format!("PROXY UNKNOWN {}", "x".repeat(120)).as_bytes())
        .unwrap();
    assert_closed(&mut c, "oversized v1");
    assert_eq!(origin.requests(), 0);
    assert_eq!(origin.connections(), 0);
    assert!(
        tests::eventually(WAIT, || failures(&p) == [5, 0, 0]),
        "{:?}",
        failures(&p)
    );
    p.stop();
}

/// A partial header and then silence: closed at the header timeout (400 ms), well within
/// the wait; nothing forwarded; counted as truncated. A connection that sends nothing is
/// closed too, counted apart.
#[test]
fn a_partial_header_is_closed_at_the_header_timeout() {
    let origin = tests::capturing_origin();
    let p = start(&upstream(origin.addr()));
    let mut partial = Client::connect(p.addr);
    partial.send(b"PROXY TCP4 192.0.2.7 10.0.").unwrap();
    let mut silent = Client::connect(p.addr);
    let started = std::time::Instant::now();
    assert_closed(&mut partial, "partial header");
    assert_closed(&mut silent, "nothing sent");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(350), "closed after {took:?}");
    // A partial header then the client's end: closed at once, counted as truncated.
    let mut cut = Client::connect(p.addr);
    cut.send(&v2_header("192.0.2.7:1", "10.0.0.1:80")[..20])
        .unwrap();
    cut.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_closed(&mut cut, "header then FIN");
    assert!(
        tests::eventually(WAIT, || failures(&p) == [0, 2, 1]),
        "{:?}",
        failures(&p)
    );
    assert_eq!(origin.connections(), 0);
    p.stop();
}

/// `{remote_addr}` of a `return`, the access log and `purge_from` see the header's address.
#[test]
fn the_header_address_is_the_client_for_templates_logs_and_purges() {
    let origin = tests::origin();
    let dir = tests::temp_dir("pp-log");
    let log = dir.join("access.log");
    let p = start(&format!(
        "[access_log]\npath = \"{}\"\nformat = \"combined\"\n\
         [upstream.app]\nservers = [\"{}\"]\n\
         [[route]]\npath = \"/ip\"\nreturn = {{ status = 200, body = \"ip={{remote_addr}}\" }}\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\n\
         cache = {{ ttl = \"60s\", purge_from = [\"192.0.2.0/24\"] }}\n",
        log.display(),
        origin.addr()
    ));
    let ask = |header: &[u8], req: &str| {
        let mut c = Client::connect(p.addr);
        c.send(&[header, req.as_bytes()].concat()).unwrap();
        response(&mut c, req)
    };
    let trusted = b"PROXY TCP4 192.0.2.7 10.0.0.1 40000 80\r\n";
    let other = b"PROXY TCP4 203.0.113.5 10.0.0.1 40000 80\r\n";
    let r = ask(trusted, "GET /ip HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ip=192.0.2.7"[..]));
    assert_eq!(ask(other, "GET /c HTTP/1.1\r\nHost: t\r\n\r\n").status, 200);
    // The loopback peer is not in purge_from; the header's address decides.
    assert_eq!(
        ask(other, "PURGE /c HTTP/1.1\r\nHost: t\r\n\r\n").status,
        403
    );
    assert_eq!(
        ask(trusted, "PURGE /c HTTP/1.1\r\nHost: t\r\n\r\n").status,
        200
    );
    p.stop();
    let text = std::fs::read_to_string(&log).expect("access log");
    let clients: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(
        clients,
        ["192.0.2.7", "203.0.113.5", "203.0.113.5", "192.0.2.7"],
        "{text}"
    );
}

/// The failures are in /metrics by reason.
#[test]
fn failures_are_in_the_metrics() {
    let p = start(
        "[admin]\naddr = \"127.0.0.1:0\"\n[[route]]\npath = \"/\"\nreturn = { status = 204 }\n",
    );
    let mut c = Client::connect(p.addr);
    c.send(GET).unwrap();
    assert_closed(&mut c, "no header");
    let mut ok = Client::connect(p.addr);
    ok.send(&[&b"PROXY UNKNOWN\r\n"[..], GET].concat()).unwrap();
    assert_eq!(response(&mut ok, "after a valid header").status, 204);
    let m = tests::scrape::scrape(p.running().admin_addr().expect("admin"));
    let v = |reason: &str| {
        tests::scrape::value(
            &m,
            &format!("proxy_proxy_protocol_errors_total{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!((v("invalid"), v("truncated"), v("empty")), (1.0, 0.0, 0.0));
    p.stop();
}

/// Quick mode: `--proxy-protocol` makes every listener read the header.
#[test]
fn quick_mode_flag() {
    let origin = tests::capturing_origin();
    let p = Proxy::start(tests::proxy_config(&[origin.addr()], &["--proxy-protocol"]));
    let mut c = Client::connect(p.addr);
    c.send(&[&v2_header("192.0.2.8:5", "10.0.0.1:80")[..], GET].concat())
        .unwrap();
    assert_eq!(response(&mut c, "quick mode").status, 200);
    assert_eq!(captured_field(&origin, "X-Real-IP"), ["192.0.2.8"]);
    let mut plain = Client::connect(p.addr);
    plain.send(GET).unwrap();
    assert_closed(&mut plain, "no header in quick mode");
    p.stop();
}
