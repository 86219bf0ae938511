//! Routing end to end: exact and wildcard hosts, fall-through, and every action kind
//! (proxy, return, static) reached from one listener; static roots relative to the config
//! file, missing at start (a warning) and at request time (404); quick `--static`.

use shared::origin::expected_body;
use tests::raw::{assert_well_formed, Client};
use tests::toml_proxy::{body, get, start, start_args, start_named};

fn say(path: &str, word: &str) -> String {
    format!("[[route]]\npath = \"{path}\"\nreturn = {{ status = 200, body = \"{word}\" }}\n")
}

fn host_say(host: &str, path: &str, word: &str) -> String {
    format!(
        "[[route]]\nhost = \"{host}\"\npath = \"{path}\"\nreturn = {{ status = 200, body = \"{word}\" }}\n"
    )
}

#[test]
fn exact_then_wildcards_most_specific_first_then_any_host() {
    let p = start(&format!(
        "{}{}{}{}{}",
        say("/", "any"),
        host_say("example.com", "/", "exact"),
        host_say("*.example.com", "/", "wild"),
        host_say("*.b.example.com", "/b/", "wild-b"),
        host_say("only.example.com", "/only/", "only"),
    ));
    let mut c = Client::connect(p.addr);
    for (host, path, want) in [
        ("example.com", "/", "exact"),
        ("EXAMPLE.com:8080", "/x", "exact"),
        ("a.example.com", "/", "wild"),
        ("x.y.example.com.", "/", "wild"),
        ("a.b.example.com", "/b/1", "wild-b"),
        // The most specific wildcard has no matching prefix: the next one serves.
        ("a.b.example.com", "/", "wild"),
        ("only.example.com", "/only/x", "only"),
        ("only.example.com", "/else", "wild"),
        ("badexample.com", "/", "any"),
        ("example.org", "/", "any"),
    ] {
        let r = get(&mut c, host, path);
        assert_well_formed(&r, 200);
        assert_eq!(body(&r), want, "{host} {path}");
    }
}

#[test]
fn a_host_without_a_match_and_no_default_is_404() {
    let p = start(&host_say("*.example.com", "/", "wild"));
    let mut c = Client::connect(p.addr);
    assert_eq!(body(&get(&mut c, "a.example.com", "/")), "wild");
    let r = get(&mut c, "example.com", "/");
    assert_eq!(r.status, 404);
}

#[test]
fn proxy_return_and_static_from_one_listener() {
    let dir = tests::temp_dir("mixed");
    std::fs::create_dir_all(dir.join("www/static")).unwrap();
    std::fs::write(dir.join("www/static/a.txt"), "file a\n").unwrap();
    let o = tests::origin();
    let conf = dir.join("proxy.toml");
    let (p, cfg) = start_named(
        conf.to_str().unwrap(),
        &format!(
            "[upstream.app]\nservers = [\"{}\"]\n\
             [[route]]\npath = \"/\"\nupstream = \"app\"\n\
             [[route]]\npath = \"/static/\"\nstatic = {{ root = \"www\" }}\n{}",
            o.addr(),
            say("/hello", "hi"),
        ),
    );
    assert!(proxy::config::warnings(&cfg).is_empty());
    let mut c = Client::connect(p.addr);
    for _ in 0..2 {
        let r = get(&mut c, "x", "/static/a.txt");
        assert_well_formed(&r, 200);
        assert_eq!(body(&r), "file a\n");
        let r = get(&mut c, "x", "/hello");
        assert_eq!(body(&r), "hi");
        let r = get(&mut c, "x", "/other");
        assert_eq!(r.body, expected_body(64));
    }
    assert_eq!(o.requests(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn missing_root_warns_at_start_and_is_404_until_it_exists() {
    let dir = tests::temp_dir("missing");
    let conf = dir.join("p.toml");
    let (p, cfg) = start_named(
        conf.to_str().unwrap(),
        "[[route]]\nstatic = { root = \"later\", index = \"home.html\" }\n",
    );
    let w = proxy::config::warnings(&cfg);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains(&format!(
            "static root {} is not a directory",
            dir.join("later").display()
        )),
        "{w:?}"
    );
    let mut c = Client::connect(p.addr);
    let r = get(&mut c, "x", "/");
    assert_eq!(r.status, 404);
    std::fs::create_dir_all(dir.join("later")).unwrap();
    std::fs::write(dir.join("later/home.html"), "<p>home</p>").unwrap();
    let mut c = Client::connect(p.addr);
    let deadline = std::time::Instant::now() + tests::raw::WAIT;
    // The open-file cache may remember the miss for a moment (nginx's open_file_cache
    // does too): ask until the new file is served, within a generous bound.
    loop {
        let r = get(&mut c, "x", "/");
        if r.status == 200 {
            assert_eq!(body(&r), "<p>home</p>");
            break;
        }
        assert_eq!(r.status, 404);
        assert!(
            std::time::Instant::now() < deadline,
            "the root created after start is never served"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quick_static_mode_serves_a_directory_without_listings() {
    let dir = tests::temp_dir("quick");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("index.html"), "<h1>root</h1>").unwrap();
    std::fs::write(dir.join("sub/x.txt"), "x").unwrap();
    let p = start_args(&["--static", dir.to_str().unwrap()]);
    let mut c = Client::connect(p.addr);
    let r = get(&mut c, "x", "/");
    assert_well_formed(&r, 200);
    assert_eq!(body(&r), "<h1>root</h1>");
    assert_eq!(body(&get(&mut c, "x", "/sub/x.txt")), "x");
    // A directory without an index: no listing.
    assert_eq!(get(&mut c, "x", "/sub/").status, 404);
    let r = get(&mut c, "x", "/sub");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/sub/"));
    std::fs::remove_dir_all(&dir).unwrap();
}
