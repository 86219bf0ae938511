// The config loader: TOML text -> `proxy::config::from_toml` (what `--config` and
// `--check-config` run on a file's text) never panics; an error is one line that starts with
// the file's name and says where: `fuzz.toml:LINE:` with a line of the text, or (a check
// across keys, after parsing) the key it is about.
//
// Shared by the libFuzzer target (`fuzz_targets/config.rs`) and the seed replay in
// `cargo test` (`proxy/src/request_path.rs`), both through `include!`: plain `//` comments
// only, no inner attributes.

use shared::config::ConfigError;

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Paths the loader would read from (TLS certificates, static roots) must not name a
    // device that never ends (a read of /dev/zero is the fuzzer's finding, not the proxy's).
    if text.contains("/dev/") || text.contains("/proc/") || text.contains("/sys/") {
        return;
    }
    // A server given by name is looked up (DNS): the network's time, not the loader's code.
    if names_a_host(text) {
        return;
    }
    let Err(e) = proxy::config::from_toml("fuzz.toml", text) else {
        return;
    };
    let msg = e.to_string();
    // One line, every echoed value escaped (`shared::config::escape_controls`).
    assert!(!msg.contains(char::is_control), "not one line: {msg:?}");
    assert!(!msg.trim().is_empty(), "an empty error");
    match e {
        proxy::config::Error::File(ConfigError::Parse { file, line, .. }) => {
            assert_eq!(file, "fuzz.toml");
            let lines = text.matches('\n').count() + 1;
            assert!(
                (1..=lines).contains(&line),
                "line {line} of a text of {lines} lines: {msg}"
            );
            assert!(msg.starts_with(&format!("fuzz.toml:{line}: ")), "{msg}");
        }
        proxy::config::Error::File(ConfigError::Invalid { file, .. }) => {
            assert_eq!(file, "fuzz.toml");
            assert!(msg.starts_with("fuzz.toml: "), "{msg}");
        }
        proxy::config::Error::File(ConfigError::Read { file, .. }) => {
            // A file the config names (a certificate) could not be read: named.
            let file = shared::config::escape_controls(&file);
            assert!(msg.contains(&*file), "{msg}");
        }
        proxy::config::Error::Usage(m) => panic!("a file's text gave a usage error: {m}"),
    }
}

// Whether a server of the file is a name rather than an IP literal.
fn names_a_host(text: &str) -> bool {
    let Ok(file) = proxy::config::schema::parse("fuzz.toml", text) else {
        return false;
    };
    file.upstream.values().any(|g| {
        g.get_ref().servers.iter().any(|s| {
            let addr = s.get_ref().addr.as_str();
            let addr = addr.split_once("://").map_or(addr, |(_, rest)| rest);
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.parse::<std::net::IpAddr>().is_err()
        })
    })
}
