//! Bodies streamed through the proxy in-process: large uploads and downloads in every framing,
//! byte-exact. (The resident-memory bound is checked on a spawned process, in the
//! `proxy_ops` binary's `process` module.)

use shared::origin::{expected_body, Origin, OriginConfig};
use std::io::Write;
use tests::inproc::{config, Proxy};

const BIG: usize = 8 << 20;

#[test]
fn large_download_in_every_framing() {
    let o = tests::origin();
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
    let o = tests::origin();
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
    let o = tests::origin();
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

/// An origin that answers with the request it got (head and body), and a proxy in front.
fn echo_proxy() -> (Origin, Proxy) {
    let o = Origin::start(OriginConfig {
        echo: true,
        ..OriginConfig::default()
    })
    .unwrap();
    let p = Proxy::start(config(&[o.addr()]));
    (o, p)
}

#[test]
fn echoed_upload_comes_back_intact() {
    let (_o, p) = echo_proxy();
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

/// From a connection's second request on the proxy reads it through a multishot receive (on
/// io_uring with the fast flags; one-shot elsewhere): uploads larger than its worker's buffer
/// ring (2 MiB) in both framings, and pipelined requests, on one reused connection, echoed
/// byte-exact while the client is still sending.
#[test]
fn uploads_on_a_reused_connection_come_back_intact() {
    let (_o, p) = echo_proxy();
    let mut c = p.connect();
    assert_eq!(c.get("/first").status, 200);
    let body = expected_body(3 << 20);
    for chunked in [false, true] {
        let head = if chunked {
            "POST /e HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()
        } else {
            format!(
                "POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
        };
        c.send(head.as_bytes());
        // The echo comes back while the body goes out: write from another thread.
        let mut w = c.stream.try_clone().expect("clone");
        let out = body.clone();
        let writer = std::thread::spawn(move || {
            for piece in out.chunks(50_000) {
                if chunked {
                    w.write_all(format!("{:x}\r\n", piece.len()).as_bytes())?;
                    w.write_all(piece)?;
                    w.write_all(b"\r\n")?;
                } else {
                    w.write_all(piece)?;
                }
            }
            if chunked {
                w.write_all(b"0\r\n\r\n")?;
            }
            std::io::Result::Ok(())
        });
        let r = c.response();
        writer.join().expect("writer").expect("upload written");
        assert_eq!(r.status, 200, "chunked {chunked}");
        // The echo is the request as the origin got it: the forwarded head, then the body.
        let at = r.body.windows(4).position(|w| w == b"\r\n\r\n");
        let got = &r.body[at.expect("a forwarded head") + 4..];
        let got = if chunked { dechunk(got) } else { got.to_vec() };
        assert!(
            got == body,
            "chunked {chunked}: body differs ({} bytes)",
            got.len()
        );
    }
    // Two requests in one write: both answered, in order, on the same connection.
    c.send(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response().status, 200);
    assert_eq!(c.response().status, 200);
    assert_eq!(c.get("/last").status, 200);
}

/// A chunked body's payload (no extensions, no trailers); panics on bad framing.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size = std::str::from_utf8(&b[..eol]).expect("utf-8 size");
        let size = usize::from_str_radix(size, 16).expect("hex size");
        b = &b[eol + 2..];
        if size == 0 {
            assert_eq!(b, b"\r\n", "end of the chunked body");
            return out;
        }
        out.extend_from_slice(&b[..size]);
        assert_eq!(&b[size..size + 2], b"\r\n", "chunk end");
        b = &b[size + 2..];
    }
}
