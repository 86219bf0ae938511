//! `[headers] real_ip_from` / `real_ip_header` (issue 27): a trusted peer's X-Forwarded-For
//! names the client (the rightmost untrusted address) for X-Real-IP, `{remote_addr}`, the
//! access log and `purge_from`, per request; X-Forwarded-For appends the peer. Behind a PROXY
//! protocol listener the header's source is the peer that must be trusted.

use tests::inproc::Proxy;
use tests::raw::{response, Client};

fn start(listen_extra: &str, headers: &str, rest: &str) -> Proxy {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n{listen_extra}\
         [runtime]\nworkers = 1\npin = false\n\
         [timeouts]\nshutdown = \"1s\"\n[headers]\n{headers}\n{rest}"
    );
    Proxy::start(proxy::config::from_toml("real_ip.toml", &text).expect("valid config"))
}

fn field(raw: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(raw).into_owned();
    let prefix = format!("{}: ", name.to_ascii_lowercase());
    let line = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with(&prefix));
    line.map_or_else(String::new, |l| l[prefix.len()..].to_string())
}

#[test]
fn a_trusted_peer_names_the_client_everywhere() {
    let origin = tests::capturing_origin();
    let dir = tests::temp_dir("real-ip");
    let log = dir.join("access.log");
    let p = start(
        "",
        "real_ip_from = [\"127.0.0.0/8\", \"10.0.0.0/8\"]",
        &format!(
            "[access_log]\npath = \"{}\"\n\
             [upstream.app]\nservers = [\"{}\"]\n\
             [[route]]\npath = \"/ip\"\nreturn = {{ status = 200, body = \"{{remote_addr}}\" }}\n\
             [[route]]\npath = \"/\"\nupstream = \"app\"\n\
             cache = {{ ttl = \"60s\", purge_from = [\"198.51.100.0/24\"] }}\n",
            log.display(),
            origin.addr()
        ),
    );
    let mut c = Client::connect(p.addr);
    let mut ask = |req: String| {
        c.send(req.as_bytes()).unwrap();
        response(&mut c, &req)
    };
    let xff = "X-Forwarded-For: 1.1.1.1, 198.51.100.1, 10.0.0.2\r\n";
    // One keep-alive connection: the address is decided per request.
    let r = ask(format!("GET /ip HTTP/1.1\r\nHost: t\r\n{xff}\r\n"));
    assert_eq!(r.body, b"198.51.100.1");
    let r = ask("GET /ip HTTP/1.1\r\nHost: t\r\n\r\n".into());
    assert_eq!(r.body, b"127.0.0.1");
    assert_eq!(
        ask(format!("GET /c HTTP/1.1\r\nHost: t\r\n{xff}\r\n")).status,
        200
    );
    // A 403 closes the connection: each purge on one of its own.
    let purge = |fields: &str| {
        let mut c = Client::connect(p.addr);
        let req = format!("PURGE /c HTTP/1.1\r\nHost: t\r\n{fields}\r\n");
        c.send(req.as_bytes()).unwrap();
        response(&mut c, &req).status
    };
    assert_eq!(purge(""), 403);
    assert_eq!(purge(xff), 200);
    let captured = origin.captured();
    assert_eq!(captured.len(), 1);
    assert_eq!(field(&captured[0], "X-Real-IP"), "198.51.100.1");
    assert_eq!(
        field(&captured[0], "X-Forwarded-For"),
        "1.1.1.1, 198.51.100.1, 10.0.0.2, 127.0.0.1"
    );
    drop(c);
    p.stop();
    let text = std::fs::read_to_string(&log).expect("access log");
    let clients: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(
        clients,
        [
            "198.51.100.1",
            "127.0.0.1",
            "198.51.100.1",
            "127.0.0.1",
            "198.51.100.1"
        ],
        "{text}"
    );
}

/// An untrusted peer's field is not read; another field can be named; behind a PROXY
/// listener the header's address is the peer that must be trusted.
#[test]
fn untrusted_peers_other_fields_and_proxy_protocol() {
    let ret = "[[route]]\npath = \"/\"\nreturn = { status = 200, body = \"{remote_addr}\" }\n";
    let ask = |p: &Proxy, prefix: &[u8], fields: &str| {
        let mut c = Client::connect(p.addr);
        let req = format!("GET / HTTP/1.1\r\nHost: t\r\n{fields}\r\n");
        c.send(&[prefix, req.as_bytes()].concat()).unwrap();
        String::from_utf8(response(&mut c, &req).body).unwrap()
    };
    let p = start("", "real_ip_from = \"10.0.0.0/8\"", ret);
    assert_eq!(
        ask(&p, b"", "X-Forwarded-For: 198.51.100.1\r\n"),
        "127.0.0.1"
    );
    p.stop();
    let p = start(
        "",
        "real_ip_from = [\"127.0.0.1\"]\nreal_ip_header = \"X-Real-IP\"",
        ret,
    );
    let both = "X-Forwarded-For: 198.51.100.1\r\nX-Real-IP: 198.51.100.2\r\n";
    assert_eq!(ask(&p, b"", both), "198.51.100.2");
    p.stop();
    let p = start(
        "proxy_protocol = true\n",
        "real_ip_from = [\"10.0.0.0/8\"]",
        ret,
    );
    let fwd = "X-Forwarded-For: 203.0.113.3\r\n";
    let lb = b"PROXY TCP4 10.0.0.5 10.0.0.1 40000 80\r\n";
    assert_eq!(ask(&p, lb, fwd), "203.0.113.3");
    let direct = b"PROXY TCP4 192.0.2.9 10.0.0.1 40000 80\r\n";
    assert_eq!(ask(&p, direct, fwd), "192.0.2.9");
    p.stop();
}
