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
