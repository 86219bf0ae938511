use shared::http::*;
fn req(w: &[u8]) -> String {
    let mut h = [httparse::EMPTY_HEADER; 64];
    match parse_request(w, &mut h, &Limits::default()) {
        Ok(Status::Complete(r)) => format!(
            "OK body={:?} ka={} auth={:?} up={:?} exp={} m={} t={}",
            r.body,
            r.keep_alive,
            r.authority.map(|a| String::from_utf8_lossy(a).into_owned()),
            r.upgrade.map(|a| String::from_utf8_lossy(a).into_owned()),
            r.expect_continue,
            r.method,
            r.target
        ),
        Ok(Status::Partial) => "PARTIAL".into(),
        Err(e) => format!("ERR {e:?}"),
    }
}
fn res(w: &[u8], m: RequestMethod) -> String {
    let mut h = [httparse::EMPTY_HEADER; 64];
    match parse_response(w, &mut h, m, &Limits::default()) {
        Ok(Status::Complete(r)) => format!("OK {} body={:?} ka={}", r.status, r.body, r.keep_alive),
        Ok(Status::Partial) => "PARTIAL".into(),
        Err(e) => format!("ERR {e:?}"),
    }
}
fn body(w: &[u8]) -> String {
    let mut d = BodyDecoder::new(BodyKind::Chunked, &Limits::default());
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        match d.decode(&w[pos..]) {
            Err(e) => return format!("ERR {e:?} data={:?}", String::from_utf8_lossy(&out)),
            Ok(x) => {
                out.extend_from_slice(x.data);
                pos += x.consumed;
                if x.done {
                    return format!(
                        "DONE data={:?} rest={:?}",
                        String::from_utf8_lossy(&out),
                        String::from_utf8_lossy(&w[pos..])
                    );
                }
                if x.consumed == 0 {
                    return format!("MORE data={:?}", String::from_utf8_lossy(&out));
                }
            }
        }
    }
}
#[test]
fn probe() {
    let te = |v: &str| format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {v}\r\n\r\n");
    for v in [
        "chunked, identity",
        " chunked",
        "chunked;q=1",
        "chunked ;q=1",
        "xchunked",
        "chunked\t",
        ", chunked",
        "chunked,",
        "gzip, chunked",
        "Chunked",
        "\"chunked\"",
        "chunked\u{80}",
        "identity, chunked",
        "chunked;",
        "chunk\u{e9}d",
    ] {
        println!("TE {v:?}: {}", req(te(v).as_bytes()));
    }
    let cl = |v: &str| format!("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: {v}\r\n\r\n");
    for v in [
        "0005",
        "+5",
        " 5 ",
        "5,,5",
        ",5",
        "5, 5",
        "5 , 5",
        "99999999999999999999",
        "00000000000000000000000000005",
        "5\t",
    ] {
        println!("CL {v:?}: {}", req(cl(v).as_bytes()));
    }
    for w in [
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent_Length: 5\r\n\r\n",
        "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /a\\..\\b HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /\u{e9} HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET http://:80/ HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET http://a:b/ HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET http://a%/ HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a:b:c\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a,b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a]\r\n\r\n",
        "GET a.example:443 HTTP/1.1\r\nHost: a\r\n\r\n",
        "CONNECT a.example: HTTP/1.1\r\nHost: a\r\n\r\n",
        "CONNECT :443 HTTP/1.1\r\nHost: a\r\n\r\n",
        "head / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / http/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.10\r\nHost: a\r\n\r\n",
        "GET / HTTP/01.1\r\nHost: a\r\n\r\n",
        "GET /\tHTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue, foo\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: close, upgrade\r\nUpgrade: websocket\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX\u{80}: v\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: v\x0b\r\n\r\n",
    ] {
        println!("REQ {w:?}: {}", req(w.as_bytes()));
    }
    use RequestMethod::*;
    for (m, w) in [
        (
            Other,
            "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
        ),
        (
            Other,
            "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        ),
        (Other, "HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n"),
        (Other, "HTTP/1.1 999 X\r\nContent-Length: 0\r\n\r\n"),
        (Other, "http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;q=1\r\n\r\n",
        ),
        (
            Other,
            "HTTP/1.1 200 OK\r\nTransfer_Encoding: chunked\r\n\r\n",
        ),
        (Other, "\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        (Other, "HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n"),
        (
            Other,
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ),
    ] {
        println!("RES {w:?}: {}", res(w.as_bytes(), m));
    }
    for w in [
        "5 \r\nhello\r\n0\r\n\r\n",
        "5\t;a\r\nhello\r\n0\r\n\r\n",
        " 5\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x\r\ny\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x\"\r\nhello\r\n0\r\n\r\n",
        "5;a=\"x\r\nhello\r\n0\r\n\r\n",
        "5;;\r\nhello\r\n0\r\n\r\n",
        "5; a = b\r\nhello\r\n0\r\n\r\n",
        "5;a b\r\nhello\r\n0\r\n\r\n",
        "5;\u{e9}\r\nhello\r\n0\r\n\r\n",
        "000000000000000000005\r\nhello\r\n0\r\n\r\n",
        "5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n",
        "5\r\nhello\r\n0\r\nX: a\rb\r\n\r\n",
        "5\r\nhello\r\r\n0\r\n\r\n",
        "5;a=\"\\\r\"\r\nhello\r\n0\r\n\r\n",
        "5;a=b \r\nhello\r\n0\r\n\r\n",
    ] {
        println!("CHUNK {w:?}: {}", body(w.as_bytes()));
    }
}
