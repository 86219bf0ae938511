//! Item 17: `If-Match` and `If-Unmodified-Since` (RFC 9110 13.1.1, 13.1.4) are evaluated on
//! static files and cache hits: 412 when they fail, as nginx answers, in the order of
//! RFC 9110 13.2.2 (before If-None-Match and If-Modified-Since).

use tests::raw::{Client, Response};

const LM: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
const BEFORE: &str = "Tue, 14 Nov 2023 22:13:19 GMT";
const AFTER: &str = "Wed, 15 Nov 2023 00:00:00 GMT";

fn get(addr: std::net::SocketAddr, path: &str, fields: &str) -> Response {
    let mut c = Client::connect(addr);
    crate::ask(
        &mut c,
        &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n"),
        false,
    )
}

/// (request fields, status) for a representation with ETag `etag` and Last-Modified `LM`.
fn cases(etag: &str) -> Vec<(String, u16)> {
    let weak = format!("W/{etag}");
    [
        (String::new(), 200),
        (format!("If-Match: {etag}"), 200),
        ("If-Match: *".into(), 200),
        (format!("If-Match: \"nope\", {etag}"), 200),
        ("If-Match: \"nope\"".into(), 412),
        // If-Match compares strongly: a weak tag never matches.
        (format!("If-Match: {weak}"), 412),
        (format!("If-Unmodified-Since: {BEFORE}"), 412),
        (format!("If-Unmodified-Since: {LM}"), 200),
        (format!("If-Unmodified-Since: {AFTER}"), 200),
        ("If-Unmodified-Since: yesterday".into(), 200),
        // If-Match decides alone: If-Unmodified-Since is ignored beside it.
        (
            format!("If-Match: {etag}\r\nIf-Unmodified-Since: {BEFORE}"),
            200,
        ),
        // Both before If-None-Match: a failed precondition is 412, not 304.
        (format!("If-Match: \"nope\"\r\nIf-None-Match: {etag}"), 412),
        (format!("If-Match: {etag}\r\nIf-None-Match: {etag}"), 304),
    ]
    .into_iter()
    .map(|(f, s)| (if f.is_empty() { f } else { f + "\r\n" }, s))
    .collect()
}

#[test]
fn static_files_answer_412_when_a_precondition_fails() {
    let dir = tests::temp_dir("preconditions");
    let file = dir.join("f.txt");
    std::fs::write(&file, "file body\n").unwrap();
    // Last-Modified: LM exactly.
    let lm = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(lm)
        .unwrap();
    let p = crate::start(&format!(
        "[[route]]\npath = \"/\"\nstatic = {{ root = \"{}\" }}\n",
        dir.display()
    ));
    let first = get(p.addr, "/f.txt", "");
    assert_eq!(first.header("last-modified"), Some(LM));
    let etag = first.header("etag").expect("an ETag").to_string();
    for (fields, status) in cases(&etag) {
        let r = get(p.addr, "/f.txt", &fields);
        assert_eq!(r.status, status, "{fields:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cache_hits_answer_412_when_a_precondition_fails() {
    let origin = shared::origin::Origin::start(Default::default()).expect("origin starts");
    let p = crate::start(&format!(
        "[upstream.o]\nservers = [\"{}\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"o\"\ncache = {{ ttl = \"60s\" }}\n",
        origin.addr()
    ));
    let path = "/r?size=100&header=ETag:%22v1%22&header=Last-Modified:Tue,%2014%20Nov%202023%2022:13:20%20GMT";
    assert_eq!(get(p.addr, path, "").header("x-cache"), Some("MISS"));
    for (fields, status) in cases("\"v1\"") {
        let r = get(p.addr, path, &fields);
        assert_eq!(
            (r.status, r.header("x-cache")),
            (status, Some("HIT")),
            "{fields:?}"
        );
    }
    assert_eq!(origin.requests(), 1, "every answer came from the cache");
}
