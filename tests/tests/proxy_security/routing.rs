//! Routing on the decoded path (issue 22, item 5): a fence on `/admin/` (`return 403`, `deny`)
//! must hold for every spelling of `/admin/` an origin would read as it; the target goes
//! upstream as the client sent it, its dot segments resolved, so the origin reads the path the
//! route was chosen on. And the static directory redirect (item 11).

use tests::inproc::Proxy;
use tests::raw::{assert_generated, exchange, Client, Response, WAIT};

/// `/admin/` answered 403 by the proxy, everything else proxied to `origin`.
fn admin_fenced(origin: std::net::SocketAddr) -> Proxy {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 1\npin = false\n\
         [upstream.app]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/admin/\"\nreturn = {{ status = 403, body = \"fenced\\n\" }}\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\n"
    );
    Proxy::start(proxy::config::from_toml("routing.toml", &text).expect("valid config"))
}

/// One request on a fresh connection, its response.
fn ask(addr: std::net::SocketAddr, target: &str) -> Response {
    let mut c = Client::connect(addr);
    c.send(&tests::raw::get(target)).expect("request sent");
    c.response(WAIT)
        .unwrap_or_else(|r| panic!("{target}: no response: {}", tests::raw::show(&r)))
}

#[test]
fn every_spelling_of_a_fenced_path_is_fenced() {
    let origin = tests::capturing_origin();
    let p = admin_fenced(origin.addr());
    let bypasses = [
        "/admin/",
        "/%61dmin/",
        "/%61%64%6D%69%6e/users",
        "//admin/",
        "///admin//x",
        "/./admin/",
        "/x/../admin/",
        "/x/%2e%2e/admin/",
        "/x/.%2E/admin/",
        "/%2e/admin/",
        "/admin/./",
        "/admin/x/..",
        "/admin/?q=/../public",
        "/%41dmin/../admin/",
        "http://t//admin/",
        "http://t/%61dmin/x?y",
    ];
    let passed: Vec<(&str, u16)> = bypasses
        .iter()
        .map(|&target| (target, ask(p.addr, target)))
        .filter(|(_, r)| (r.status, &r.body[..]) != (403, &b"fenced\n"[..]))
        .map(|(target, r)| (target, r.status))
        .collect();
    assert!(passed.is_empty(), "not fenced (target, status): {passed:?}");
    assert!(
        origin.captured().is_empty(),
        "the origin saw {:?}",
        origin.captured()
    );
}

#[test]
fn paths_that_cannot_be_normalised_are_400() {
    let origin = tests::capturing_origin();
    let p = admin_fenced(origin.addr());
    let targets = [
        "/../admin/",
        "/x/../../admin/",
        "/%2e%2e/admin/",
        "/admin/%00",
        "/%zzadmin/",
        "/admin/%4",
        "/admin/%",
        "/admin/%0a",
        "/admin%7F",
        // Dot segments and encoded slashes together: an origin that decodes before it
        // resolves and one that resolves first read two paths.
        "/x%2F..%2Fadmin/",
        "/x/..%2Fadmin/",
        "/admin/x%2F/../",
    ];
    let answered: Vec<(&str, String)> = targets
        .iter()
        .map(|&t| (t, exchange(p.addr, &tests::raw::get(t), WAIT)))
        .filter(|(_, r)| !r.text().starts_with("HTTP/1.1 400 "))
        .map(|(t, r)| (t, r.text().lines().next().unwrap_or("").to_string()))
        .collect();
    assert!(
        answered.is_empty(),
        "not refused (target, answer): {answered:?}"
    );
    for target in targets {
        let r = exchange(p.addr, &tests::raw::get(target), WAIT);
        assert_generated(&r, 400, true);
    }
    assert!(
        origin.captured().is_empty(),
        "the origin saw {:?}",
        origin.captured()
    );
}

/// The route is chosen on the decoded path; a target without dot segments goes upstream as
/// the client sent it, byte for byte (the proxy never rewrites what the origin decodes: an
/// API with `%2F` inside a segment, as GitLab's, still gets `%2F`). `/public/./x//y/../z` used
/// to be here, forwarded as sent: an origin routing on the raw path then read another path
/// than the router did (`dot_segments_are_resolved_before_the_origin_sees_them`).
#[test]
fn targets_reach_the_origin_as_sent() {
    let origin = tests::capturing_origin();
    let p = admin_fenced(origin.addr());
    let targets = [
        "/",
        "/public/a%20b?q=%2e%2e/admin/",
        "/%7Euser/%2fadmin%2F",
        "/administrator",
        "/x?/admin/",
        "/x//y/",
        "/a/%2F/b",
        "/api/v4/projects/group%2Fproject/files/dir%2Fa.txt?ref=main",
        "/q?a=\\b&c=../../admin/",
    ];
    for target in targets {
        let r = ask(p.addr, target);
        assert_eq!(r.status, 200, "{target}");
    }
    let lines: Vec<String> = crate::request_lines(&origin);
    let want: Vec<String> = targets
        .iter()
        .map(|t| format!("GET {t} HTTP/1.1"))
        .collect();
    assert_eq!(lines, want);
}

/// `/` proxied to `origin`; `/admin/` and `/@internal/` proxied to it too, but refused to
/// every address: what gets to the origin is what the fences let through.
fn denied_prefixes(origin: std::net::SocketAddr) -> Proxy {
    let text = format!(
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 1\npin = false\n\
         [upstream.app]\nservers = [\"{origin}\"]\n\
         [[route]]\npath = \"/admin/\"\nupstream = \"app\"\ndeny = [\"0.0.0.0/0\", \"::/0\"]\n\
         [[route]]\npath = \"/@internal/\"\nupstream = \"app\"\ndeny = [\"0.0.0.0/0\", \"::/0\"]\n\
         [[route]]\npath = \"/\"\nupstream = \"app\"\n"
    );
    Proxy::start(proxy::config::from_toml("routing.toml", &text).expect("valid config"))
}

/// The targets of `targets` the proxy let through to the origin (anything but 400 or 403),
/// with their status.
fn let_through(p: &Proxy, targets: &[&'static str]) -> Vec<(&'static str, u16)> {
    targets
        .iter()
        .map(|&t| (t, ask(p.addr, t).status))
        .filter(|&(_, status)| status != 400 && status != 403)
        .collect()
}

/// Every one of `targets` refused (400) or fenced (403), and none reached the origin.
fn assert_fenced(p: &Proxy, origin: &shared::origin::Origin, targets: &[&'static str]) {
    let passed = let_through(p, targets);
    assert!(passed.is_empty(), "not fenced (target, status): {passed:?}");
    assert!(
        origin.captured().is_empty(),
        "the origin saw {:?}",
        crate::request_lines(origin)
    );
}

/// A raw `\` is no path character (RFC 3986), but the WHATWG URL parser (browsers, Node's
/// `new URL(req.url, base)`) reads it as `/`: `/admin\secret` matched the `/` route, went
/// upstream raw, and such an origin served `/admin/secret`. A `\` in the path, raw or
/// `%5C`, is a 400; in the query it is data, forwarded.
#[test]
fn backslashes_in_the_path_are_refused() {
    let origin = tests::capturing_origin();
    let p = denied_prefixes(origin.addr());
    let targets = [
        "/admin\\secret",
        "/\\admin/secret",
        "/x\\..\\admin/secret",
        "http://test/admin\\secret",
        "/admin%5Csecret",
        "/admin%5csecret?x",
    ];
    for t in targets {
        let r = exchange(p.addr, &tests::raw::get(t), WAIT);
        assert!(r.text().starts_with("HTTP/1.1 400 "), "{t}: {}", r.text());
    }
    assert!(
        origin.captured().is_empty(),
        "the origin saw {:?}",
        crate::request_lines(&origin)
    );
    assert_eq!(ask(p.addr, "/q?a=\\b").status, 200);
}

/// An origin that decodes the path (Python's http.server, most file servers) reads
/// `/admin%2Fsecret.txt` as `/admin/secret.txt`; the router kept reserved escapes encoded, so
/// the path matched `/` and the origin served the fenced file. Every escape is decoded for
/// the match (`%2F` is a separator there, `%40` is `@`), never for the origin.
#[test]
fn reserved_escapes_meet_their_route() {
    let origin = tests::capturing_origin();
    let p = denied_prefixes(origin.addr());
    let targets = [
        "/admin%2Fsecret.txt",
        "/admin%2fsecret.txt",
        "/%2Fadmin/secret",
        "/admin%2F",
        "/%40internal/secret.txt",
        "/%40internal%2Fsecret.txt",
        "http://test/admin%2fsecret",
    ];
    assert_fenced(&p, &origin, &targets);
}

/// A Servlet origin (Tomcat, Jetty) strips path parameters from each segment before it reads
/// the path: `/admin;x/secret` is `/admin/secret` to it, and Tomcat resolves `/x/..;/admin`
/// to `/admin`. Routing matches without them, and a dot segment with parameters is 400.
#[test]
fn path_parameters_meet_their_route() {
    let origin = tests::capturing_origin();
    let p = denied_prefixes(origin.addr());
    let targets = [
        "/admin;/secret",
        "/admin;jsessionid=AB12/secret",
        "/%61dmin;/secret",
        "/%40internal;a=b/x",
        "/;x/admin/secret",
        "/x/..;/admin/secret",
        "/x/.;a/admin/secret",
    ];
    assert_fenced(&p, &origin, &targets);
    assert_eq!(ask(p.addr, "/x/..;/admin/secret").status, 400);
    // Elsewhere they go as sent.
    assert_eq!(ask(p.addr, "/x;y=1/z;v").status, 200);
    assert_eq!(crate::request_lines(&origin), ["GET /x;y=1/z;v HTTP/1.1"]);
}

/// An origin that routes on the raw path (Express's `app.use('/admin')` matches the undecoded,
/// unresolved path) ran the admin handler for `/admin/%2e%2e/x`, which the router had read as
/// `/x`. A target with dot segments goes upstream with them resolved on its raw segments,
/// everything else as sent, so the origin sees the path the route was chosen on.
#[test]
fn dot_segments_are_resolved_before_the_origin_sees_them() {
    let origin = tests::capturing_origin();
    let p = denied_prefixes(origin.addr());
    let cases = [
        ("/admin/%2e%2e/x", "/x"),
        ("/admin/../x", "/x"),
        ("/admin/.%2E/x?q=/../a", "/x?q=/../a"),
        ("/admin/..", "/"),
        ("/public/./x//y/../z", "/public/x/z"),
        ("/a//../b", "/b"),
        ("/a/%2e/b%20c/.", "/a/b%20c/"),
        ("/a/%7e/../%41%20B", "/a/%41%20B"),
        ("http://test/admin/../x", "/x"),
        // A leading `//` is an authority to a WHATWG parser (Node's `new URL(path, base)`
        // reads host `x`, path `/admin/secret`): routed as `/x/admin/secret`, it goes so.
        ("//x/admin/secret", "/x/admin/secret"),
        ("///x", "/x"),
    ];
    for (target, _) in cases {
        let r = ask(p.addr, target);
        assert_eq!(r.status, 200, "{target}");
    }
    let lines: Vec<String> = crate::request_lines(&origin);
    let want: Vec<String> = cases
        .iter()
        .map(|(_, sent)| format!("GET {sent} HTTP/1.1"))
        .collect();
    assert_eq!(lines, want);
}

/// A directory under the temp dir, removed on drop.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Issue 22, item 11: the static directory redirect built `Location` from the raw path, so
/// `GET //images` answered `Location: //images/`, a protocol-relative URL (another host, to
/// a browser). It is built from the normalised path: always exactly one leading `/`.
#[test]
fn directory_redirects_never_name_another_host() {
    let dir = TempDir(
        std::env::temp_dir().join(format!("proxy-security-{}-redirect", std::process::id())),
    );
    let _ = std::fs::remove_dir_all(&dir.0);
    for d in ["images", "my dir", "evil.com"] {
        std::fs::create_dir_all(dir.0.join(d)).expect("a directory in the root");
    }
    let root = dir.0.to_str().expect("a UTF-8 temporary path");
    let (proxy, addr) = tests::start_proxy(&[], &["--static", root]);
    let cases = [
        ("//images", "/images/"),
        ("///images?x=1", "/images/?x=1"),
        ("/images", "/images/"),
        ("/./images", "/images/"),
        ("//./images/.", "/images/"),
        ("/%69mages", "/images/"),
        ("//evil.com", "/evil.com/"),
        ("/my%20dir", "/my%20dir/"),
    ];
    let mut wrong = Vec::new();
    for (target, want) in cases {
        let r = ask(addr, target);
        let location = r.header("location").map(str::to_string);
        if (r.status, location.as_deref()) != (301, Some(want)) {
            wrong.push((target, r.status, location));
        }
    }
    assert!(wrong.is_empty(), "(target, status, Location): {wrong:?}");
    proxy.shutdown().expect("the proxy stops cleanly");
}
