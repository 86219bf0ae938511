//! h2c smuggling through the WebSocket upgrade (issue 22, item 16): only `Upgrade:
//! websocket` goes upstream, `HTTP2-Settings` never does, and a 101 that switched to
//! anything but websocket is a 502, never a tunnel (a raw HTTP/2 channel past routing,
//! header rewriting and the cache).

use crate::scripted::Scripted;
use tests::raw::{assert_generated, exchange, WAIT};

const KEY: &str = "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

/// What the proxy sends upstream for a WebSocket upgrade of `/chat` from 127.0.0.1, exactly.
fn upgrade_upstream() -> String {
    format!(
        "GET /chat HTTP/1.1\r\nHost: t\r\n{KEY}X-Forwarded-For: 127.0.0.1\r\n\
         X-Real-IP: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nConnection: upgrade\r\n\
         Upgrade: websocket\r\n\r\n"
    )
}

/// The client offers h2c beside websocket, with its HTTP2-Settings; the origin picks h2c.
#[test]
fn an_h2c_offer_never_reaches_the_origin_and_an_h2c_switch_is_502() {
    let origin = Scripted::start(vec![
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n".to_vec(),
    ]);
    let (proxy, addr) = tests::start_proxy(&[origin.addr()], &[]);
    let req = format!(
        "GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\n\
         Upgrade: h2c, websocket\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n{KEY}\r\n"
    );
    let r = exchange(addr, req.as_bytes(), WAIT);
    let heads: Vec<String> = origin
        .heads()
        .iter()
        .map(|h| String::from_utf8_lossy(h).into_owned())
        .collect();
    assert_eq!(heads, [upgrade_upstream()], "what the origin received");
    assert_generated(&r, 502, true);
    proxy.shutdown().expect("the proxy stops cleanly");
}

/// A plain WebSocket request, and origins that switch to something else (or to more).
#[test]
fn a_101_that_is_not_only_websocket_is_502() {
    for answer in [
        "Upgrade: h2c\r\n",
        "Upgrade: websocket, h2c\r\n",
        "Upgrade: websocket\r\nUpgrade: h2c\r\n",
        "",
    ] {
        let reply =
            format!("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n{answer}\r\n");
        let origin = Scripted::start(vec![reply.into_bytes()]);
        let (proxy, addr) = tests::start_proxy(&[origin.addr()], &[]);
        let req = format!(
            "GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\n\
             Upgrade: websocket\r\n{KEY}\r\n"
        );
        let r = exchange(addr, req.as_bytes(), WAIT);
        assert!(
            r.text().starts_with("HTTP/1.1 502 "),
            "101 with {answer:?}: {}",
            tests::raw::show(&r)
        );
        assert_generated(&r, 502, true);
        let heads = origin.heads();
        assert_eq!(heads.len(), 1, "one attempt");
        assert_eq!(String::from_utf8_lossy(&heads[0]), upgrade_upstream());
        proxy.shutdown().expect("the proxy stops cleanly");
    }
}
