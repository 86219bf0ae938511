//! The shipped systemd files: `scripts/systemd/proxy.toml` is a minimal config that starts
//! (one listener, one upstream group, nothing else), `proxy.service` is a Type=notify unit with
//! writable log and runtime directories, a checked SIGHUP reload, and hardening within an
//! exposure of 2.5 (`systemd-analyze security --offline=yes`), and the logrotate snippet
//! reopens with SIGUSR1.

use std::path::PathBuf;
use std::process::Command;

fn shipped(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/systemd")
        .join(name)
}

#[test]
fn the_minimal_config_is_a_listener_and_one_upstream_and_passes_the_check() {
    let path = shipped("proxy.toml");
    let cfg = proxy::config::load(&path).expect("the minimal config loads");
    assert_eq!(cfg.listeners.len(), 1);
    assert_eq!(cfg.groups.len(), 1);
    assert!(cfg.admin.is_none() && cfg.access_log.is_none());
    // Its check, with the listener on a port of its own (8080 may be taken on this host).
    let text = std::fs::read_to_string(&path).unwrap();
    let copy = tests::TempFile::new("systemd-config", "proxy.toml");
    std::fs::write(&copy, text.replace("0.0.0.0:8080", "127.0.0.1:0")).unwrap();
    let out = Command::new(tests::bin("proxy"))
        .arg("--check-config")
        .arg(&copy)
        .output()
        .expect("run proxy");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[test]
fn the_unit_notifies_has_its_directories_and_reloads_with_sighup() {
    let unit = std::fs::read_to_string(shipped("proxy.service")).unwrap();
    let lines: Vec<&str> = unit.lines().map(str::trim).collect();
    for want in [
        "Type=notify",
        "LogsDirectory=proxy",
        "RuntimeDirectory=proxy",
        "ExecStartPre=/usr/local/bin/proxy --check-config /etc/proxy/proxy.toml",
        "ExecReload=/usr/local/bin/proxy --check-config /etc/proxy/proxy.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ] {
        assert!(lines.contains(&want), "{want} missing from proxy.service");
    }
    let rotate = std::fs::read_to_string(shipped("proxy.logrotate")).unwrap();
    assert!(
        rotate.contains("--signal=SIGUSR1 proxy.service"),
        "{rotate}"
    );
    assert!(
        !rotate.lines().any(|l| l.trim() == "copytruncate"),
        "{rotate}"
    );
}

#[test]
fn the_unit_is_hardened_to_an_exposure_of_at_most_2_5() {
    tests::require_tool("systemd-analyze", "systemd");
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(shipped("proxy.service"))
        .output()
        .expect("run systemd-analyze");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no exposure line: {text}"));
    let score: f64 = line
        .split(": ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no score in {line:?}"));
    assert!(score <= 2.5, "exposure {score} above 2.5:\n{text}");
}

/// `DynamicUser=yes` takes a static account of the user's name when one exists; the name is the
/// unit's ("proxy") unless `User=` says otherwise, and Debian's base-passwd ships `proxy` (uid 13,
/// squid's): under systemd the service ran as that shared account, not a dynamic user
/// (scripts/systemd/check.sh saw uid 13).
#[test]
fn the_dynamic_user_is_no_account_a_distribution_ships() {
    let unit = std::fs::read_to_string(shipped("proxy.service")).unwrap();
    let lines: Vec<&str> = unit.lines().map(str::trim).collect();
    assert!(lines.contains(&"DynamicUser=yes"), "{unit}");
    let user = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("User="))
        .unwrap_or("proxy");
    // Debian's base-passwd (passwd.master) and this machine's accounts.
    let mut taken: Vec<String> = [
        "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp",
        "proxy", "www-data", "backup", "list", "irc", "gnats", "nobody", "_apt",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    taken.extend(
        passwd
            .lines()
            .filter_map(|l| l.split(':').next())
            .map(String::from),
    );
    assert!(
        !taken.iter().any(|t| t == user),
        "the unit's dynamic user {user:?} is a static account on Debian or here: set User="
    );
}
