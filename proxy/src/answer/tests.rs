//! `return` answers rendered with given inputs: exact bytes for each kind of action.

use super::*;

const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

fn vars() -> Vars<'static> {
    Vars {
        host: b"Img.Example.com:8080",
        path: b"/avatar/x",
        query: b"u=1",
        remote_addr: b"10.1.2.3",
        randoms: &[],
    }
}

fn keep() -> Framing {
    Framing {
        version: Version::Http11,
        keep_alive: true,
        head_only: false,
    }
}

fn render(a: &ReturnAction, framing: Framing, rng: &Rng) -> String {
    let mut out = BytesMut::new();
    a.render(vars(), framing, rng, DATE, &mut out);
    String::from_utf8(out.to_vec()).unwrap()
}

fn head_and_body(s: &str) -> (&str, &str) {
    s.split_once("\r\n\r\n").unwrap()
}

#[test]
fn redirect_with_a_random_number_and_nginx_like_page() {
    let a = ReturnAction::new(
        302,
        Some("http://img.example.com/{random:1-21}.png?h={host}"),
        None,
        None,
    )
    .unwrap();
    let rng = Rng::new(7);
    let mut seen = [false; 22];
    for _ in 0..2000 {
        let s = render(&a, keep(), &rng);
        let (head, body) = head_and_body(&s);
        let loc = head
            .lines()
            .find_map(|l| l.strip_prefix("Location: "))
            .unwrap();
        let n: usize = loc
            .strip_prefix("http://img.example.com/")
            .and_then(|l| l.strip_suffix(".png?h=img.example.com"))
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=21).contains(&n), "{n}");
        seen[n] = true;
        assert_eq!(
            body,
            "<html>\r\n<head><title>302 Found</title></head>\r\n<body>\r\n\
             <center><h1>302 Found</h1></center>\r\n</body>\r\n</html>\r\n"
        );
        let head = head.replace(loc, "L");
        assert_eq!(
            head,
            format!(
                "HTTP/1.1 302 Found\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
                 Content-Type: text/html\r\nContent-Length: {}\r\nLocation: L",
                body.len()
            )
        );
    }
    assert!(seen[1..].iter().all(|&s| s), "every value 1..=21 drawn");
}

#[test]
fn body_with_every_variable_and_the_same_number_twice() {
    let a = ReturnAction::new(
        200,
        None,
        Some("{host} {path} {query} {remote_addr} {random:3-3} {random:0-9}={random:0-9}\n"),
        None,
    )
    .unwrap();
    let s = render(&a, keep(), &Rng::new(1));
    let (head, body) = head_and_body(&s);
    let (fixed, draws) = body.split_at("img.example.com /avatar/x u=1 10.1.2.3 3 ".len());
    assert_eq!(fixed, "img.example.com /avatar/x u=1 10.1.2.3 3 ");
    let (x, y) = draws.trim_end().split_once('=').unwrap();
    assert_eq!(x, y, "one range, one number per request");
    assert_eq!(
        head,
        format!(
            "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Type: text/plain\r\n\
             Content-Length: {}",
            body.len()
        )
    );
}

#[test]
fn framing_head_close_and_http10() {
    let a = ReturnAction::new(403, None, Some("no"), Some("text/x-custom")).unwrap();
    let rng = Rng::new(1);
    let head_only = render(
        &a,
        Framing {
            head_only: true,
            ..keep()
        },
        &rng,
    );
    assert!(
        head_only.ends_with("Content-Length: 2\r\n\r\n"),
        "{head_only}"
    );
    assert!(head_only.contains("Content-Type: text/x-custom\r\n"));
    let close = render(
        &a,
        Framing {
            keep_alive: false,
            ..keep()
        },
        &rng,
    );
    assert!(close.ends_with("Connection: close\r\n\r\nno"), "{close}");
    let ten = render(
        &a,
        Framing {
            version: Version::Http10,
            ..keep()
        },
        &rng,
    );
    assert!(ten.starts_with("HTTP/1.1 403 Forbidden\r\n"));
    assert!(ten.ends_with("Connection: keep-alive\r\n\r\nno"), "{ten}");
}

#[test]
fn statuses_without_bodies() {
    let rng = Rng::new(1);
    let ok = render(
        &ReturnAction::new(200, None, None, None).unwrap(),
        keep(),
        &rng,
    );
    assert_eq!(
        ok,
        "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\n\r\n"
    );
    let nc = render(
        &ReturnAction::new(204, None, None, None).unwrap(),
        keep(),
        &rng,
    );
    assert_eq!(
        nc,
        "HTTP/1.1 204 No Content\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
    );
    // A 205 has no content; Content-Length: 0 says so (RFC 9110 15.3.6 allows it).
    let reset = render(
        &ReturnAction::new(205, None, None, None).unwrap(),
        keep(),
        &rng,
    );
    assert_eq!(
        reset,
        "HTTP/1.1 205 Reset Content\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\n\r\n"
    );
    let gone = render(
        &ReturnAction::new(410, None, None, None).unwrap(),
        keep(),
        &rng,
    );
    assert!(gone.contains("Content-Type: text/html\r\n"));
    assert!(gone.ends_with("<center><h1>410 Gone</h1></center>\r\n</body>\r\n</html>\r\n"));
    // An unknown reason: the page names the code alone.
    let odd = render(
        &ReturnAction::new(599, None, None, None).unwrap(),
        keep(),
        &rng,
    );
    assert!(odd.starts_with("HTTP/1.1 599 \r\n"), "{odd}");
    assert!(odd.contains("<title>599</title>"), "{odd}");
}

#[test]
fn bad_actions_are_refused() {
    for (status, loc, body, ct, want) in [
        // A 1xx is no final answer (RFC 9110 15.2): never one of `return`'s.
        (100, None, None, None, "200 to 599"),
        (101, None, None, None, "200 to 599"),
        (103, None, Some("x"), None, "200 to 599"),
        (199, None, None, None, "200 to 599"),
        (600, None, None, None, "200 to 599"),
        (204, None, Some("x"), None, "no body"),
        // RFC 9110 15.3.6: a server MUST NOT generate content in a 205.
        (205, None, Some("x"), None, "no body"),
        (304, None, Some("x"), None, "no body"),
        (302, Some("/{nope}"), None, None, "location: unknown variable"),
        (200, None, Some("{random:2-1}"), None, "body:"),
        (200, None, Some("x"), Some("text/plain\r\nX: y"), "not a media type"),
        (
            200,
            None,
            Some("{random:1-1}{random:1-2}{random:1-3}{random:1-4}{random:1-5}{random:1-6}{random:1-7}{random:1-8}{random:1-9}"),
            None,
            "at most 8",
        ),
    ] {
        let e = ReturnAction::new(status, loc, body, ct).unwrap_err();
        assert!(e.contains(want), "{status} {loc:?} {body:?}: {e}");
    }
}

#[test]
fn request_bodies_that_can_be_skipped() {
    assert_eq!(body_skippable(BodyKind::Empty, 0), Some(0));
    assert_eq!(body_skippable(BodyKind::Empty, 30), Some(0));
    assert_eq!(body_skippable(BodyKind::Length(5), 5), Some(5));
    assert_eq!(body_skippable(BodyKind::Length(5), 9), Some(5));
    assert_eq!(body_skippable(BodyKind::Length(5), 4), None);
    assert_eq!(body_skippable(BodyKind::Chunked, 100), None);
}

/// Text that is not ASCII, around variables and `{` that start none: read as it is (found by
/// the `route_template` fuzz target: the parser sliced the text inside a character, so such
/// a `return` panicked the loader, `--check-config` included).
#[test]
fn templates_with_text_beyond_ascii() {
    let a = ReturnAction::new(
        302,
        Some("/caf\u{e9}/{path}?\u{2713}"),
        Some("h\u{e9}llo {host} {\u{7a2}\": 1} \u{1f600}{"),
        None,
    )
    .unwrap();
    let s = render(&a, keep(), &Rng::new(1));
    let (head, body) = head_and_body(&s);
    assert_eq!(body, "h\u{e9}llo img.example.com {\u{7a2}\": 1} \u{1f600}{");
    assert!(
        head.lines()
            .any(|l| l == "Location: /caf\u{e9}//avatar/x?\u{2713}"),
        "{head}"
    );
}
