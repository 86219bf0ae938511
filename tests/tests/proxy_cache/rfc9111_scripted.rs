//! Issue 26, the behaviours that need answers the query-driven origin cannot give: against
//! `scripted::Scripted`, with exact origin counts.

use crate::cache_proxy::{proxy, request, x_cache};
use crate::scripted::{answer, Scripted};
use tests::raw::{self, Client};

fn get(c: &mut Client, path: &str, extra: &str) -> tests::raw::Response {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n{extra}\r\n").as_bytes())
        .expect("send");
    raw::response(c, path)
}

#[test]
fn stale_while_revalidate_runs_apart_from_the_connection_that_started_it() {
    // RFC 5861 3: the client whose request started the revalidation has its next request on
    // the same connection answered (STALE) while the origin still holds the revalidation.
    // (replacing answer, its body, what the entry serves after)
    let cases = [
        (
            answer(
                "200 OK",
                &["Cache-Control: max-age=3600", "ETag: \"v2\""],
                b"fresh",
            ),
            &b"fresh"[..],
            "\"v2\"",
        ),
        (
            answer(
                "304 Not Modified",
                &["Cache-Control: max-age=3600", "ETag: \"v1\""],
                b"",
            ),
            &b"stale"[..],
            "\"v1\"",
        ),
    ];
    for (second, body, etag) in cases {
        let (second, release) = second.held();
        let o = Scripted::start(vec![
            answer(
                "200 OK",
                &[
                    "Cache-Control: max-age=0, stale-while-revalidate=60",
                    "ETag: \"v1\"",
                ],
                b"stale",
            ),
            second,
        ]);
        let (p, addr) = proxy(&[o.addr()], &[], |_| {});
        let r = request(addr, "GET", "/swr", "");
        assert_eq!((r.status, x_cache(&r), o.requests()), (200, "MISS", 1));
        let mut c = Client::connect(addr);
        let r = get(&mut c, "/swr", "");
        assert_eq!(
            (r.status, x_cache(&r), &r.body[..]),
            (200, "STALE", &b"stale"[..])
        );
        assert!(tests::eventually(raw::WAIT, || o.requests() == 2));
        assert!(o.head(1).contains("if-none-match: \"v1\""), "{}", o.head(1));
        // The origin holds the revalidation: this connection's next request is answered.
        for i in 0..2 {
            let r = get(&mut c, "/swr", "");
            assert_eq!(
                (r.status, x_cache(&r), o.requests()),
                (200, "STALE", 2),
                "{etag}: while revalidating, {i}"
            );
        }
        release.send(()).unwrap();
        let fresh = tests::eventually(raw::WAIT, || {
            let r = get(&mut c, "/swr", "");
            x_cache(&r) == "HIT" && r.body == body && r.header("etag") == Some(etag)
        });
        assert!(fresh, "{etag}: the revalidation's answer is stored");
        assert_eq!(o.requests(), 2, "{etag}");
        p.shutdown().unwrap();
    }
}
