//! Bodies streamed through the proxy in-process: large uploads and downloads in every framing,
//! byte-exact. (The resident-memory bound is checked on a spawned process in proxy_process.rs.)

mod proxy_common;

use proxy_common::{config, Proxy};
use shared::origin::{expected_body, Origin, OriginConfig};
use std::io::Write;

const BIG: usize = 8 << 20;

#[test]
fn large_download_in_every_framing() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    let want = expected_body(BIG);
    for q in [
        "",
        "&framing=chunked&chunk=65536",
        "&framing=chunked&chunk=1000",
        "&framing=close",
    ] {
        let r = c.get(&format!("/?size={BIG}{q}"));
        assert_eq!(r.status, 200, "{q}");
        assert!(r.body == want, "{q}: body differs ({} bytes)", r.body.len());
    }
}

#[test]
fn large_upload_with_content_length() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(format!("PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: {BIG}\r\n\r\n").as_bytes());
    let block = vec![b'x'; 1 << 16];
    for _ in 0..BIG / block.len() {
        c.stream.write_all(&block).unwrap();
    }
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(o.body_bytes(), BIG as u64);
    // The connection carries on.
    assert_eq!(c.get("/").status, 200);
}

#[test]
fn large_chunked_upload() {
    let o = Origin::start(OriginConfig::default()).unwrap();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    let chunk = vec![b'y'; 10_000];
    let mut sent = 0;
    while sent < BIG {
        c.stream
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .unwrap();
        c.stream.write_all(&chunk).unwrap();
        c.stream.write_all(b"\r\n").unwrap();
        sent += chunk.len();
    }
    c.stream.write_all(b"0\r\n\r\n").unwrap();
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(o.body_bytes(), sent as u64);
}

#[test]
fn echoed_upload_comes_back_intact() {
    let o = Origin::start(OriginConfig {
        echo: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let p = Proxy::start(config(&[o.addr()]));
    let mut c = p.connect();
    let body = expected_body(300_000);
    c.send(
        format!(
            "POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    c.send(&body);
    let r = c.response();
    assert_eq!(r.status, 200);
    assert!(r.body.ends_with(&body));
}
