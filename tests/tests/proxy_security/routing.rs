//! Routing on the normalised path (issue 22, item 5): a `return 403` on `/admin/` must hold
//! for every spelling of `/admin/` an origin would normalise to it, while the target goes
//! upstream exactly as the client sent it. And the static directory redirect (item 11).

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

/// The route is chosen on the normalised path; the target goes upstream as the client sent
/// it, byte for byte (the proxy never rewrites what the origin decodes).
#[test]
fn targets_reach_the_origin_as_sent() {
    let origin = tests::capturing_origin();
    let p = admin_fenced(origin.addr());
    let targets = [
        "/",
        "/public/a%20b?q=%2e%2e/admin/",
        "/public/./x//y/../z",
        "/%7Euser/%2fadmin%2F",
        "/administrator",
        "/x?/admin/",
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
