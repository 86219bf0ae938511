//! The loader binary over HTTPS: a certificate that does not verify is one line on stderr
//! (the reason, once) and exit status 1; the handshake figures in `--json`, added exactly by
//! `loader merge` over shards.

use serde_json::Value;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use tests::process::Process;
use tests::tls_server::{pem_file, self_signed, Spec, TlsServer};

fn loader(args: &[&str]) -> Output {
    Process::spawn(
        Command::new(tests::bin("loader"))
            .args(["--threads", "1", "--no-pin", "-q"])
            .args(args)
            .stdout(Stdio::piped()),
    )
    .output(Duration::from_secs(60))
}

fn server() -> (TlsServer, tests::TempFile) {
    let cert = self_signed(Spec {
        names: &["localhost"],
        ca: true,
        expired: false,
    });
    (TlsServer::start(&cert), pem_file("server.pem", &[&cert]))
}

#[test]
fn an_unverified_certificate_is_one_line_and_exit_1() {
    let (server, _) = server();
    let other = self_signed(Spec {
        names: &["Other CA"],
        ca: true,
        expired: false,
    });
    let other_pem = pem_file("other.pem", &[&other]);
    let url = server.url("localhost", "/");
    let ca = other_pem.to_str().unwrap();
    let out = loader(&["-n", "6", "-c", "2", "--cacert", ca, &url]);
    let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("(Connect: 6, Receive: 0, Length: 0, Exceptions: 0)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("TLS handshakes: 0 full, 0 resumed"),
        "{stdout}"
    );
    let why: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("TLS handshake with localhost"))
        .collect();
    assert_eq!(why.len(), 1, "{stderr}");
    assert!(why[0].contains("certificate"), "{stderr}");
    assert_eq!(server.stats.get().1, 0, "a request got through");
}

#[test]
fn insecure_is_warned_about() {
    let (server, _) = server();
    let url = server.url("localhost", "/");
    let out = loader(&["-n", "2", "-c", "1", "--insecure", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
    assert!(
        tests::text(&out.stderr)
            .contains("warning: --insecure: server certificates are not verified"),
        "{}",
        tests::text(&out.stderr)
    );
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn handshake_figures_in_json_and_merged_over_shards() {
    let (server, pem) = server();
    let url = server.url("localhost", "/");
    let dir = pem.parent().unwrap().to_owned();
    let mut files = Vec::new();
    for shard in ["1/2", "2/2"] {
        let f = dir.join(format!("shard{}.json", &shard[..1]));
        let out = loader(&[
            "-n",
            "10",
            "-c",
            "1",
            "--close",
            "--shard",
            shard,
            "--cacert",
            pem.to_str().unwrap(),
            "--json",
            f.to_str().unwrap(),
            &url,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
        let v = json(&f);
        // Each shard: 5 connections, one full handshake and four resumed.
        assert_eq!(v["tls"]["full_handshakes"], 1, "{}", v["tls"]);
        assert_eq!(v["tls"]["resumed_handshakes"], 4, "{}", v["tls"]);
        assert!(v["tls"]["msecs_handshake"]["mean"].as_f64().unwrap() > 0.0);
        assert!(v["msecs_connect"]["mean"].is_number());
        files.push(f);
    }
    let merged = dir.join("merged.json");
    let mut args = vec!["merge", "--json", merged.to_str().unwrap()];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let out = Command::new(tests::bin("loader"))
        .args(&args)
        .output()
        .unwrap();
    let stdout = tests::text(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        tests::text(&out.stderr)
    );
    assert!(
        stdout.contains("TLS handshakes: 2 full, 8 resumed"),
        "{stdout}"
    );
    assert!(stdout.contains("msecs/tls-handshake: "), "{stdout}");
    let m = json(&merged);
    assert_eq!(m["tls"]["full_handshakes"], 2);
    assert!(
        m["tls"]["protocol"]
            .as_str()
            .unwrap()
            .starts_with("TLSv1.3, "),
        "{}",
        m["tls"]
    );
    assert_eq!(m["tls"]["resumed_handshakes"], 8);
    assert_eq!(m["connections_opened"], 10);
    // The handshake histogram is merged exactly: ten entries, one per connection.
    let shard_max = files
        .iter()
        .map(|f| json(f)["tls"]["msecs_handshake"]["max"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(
        m["tls"]["msecs_handshake"]["max"].as_f64().unwrap(),
        shard_max
    );
    assert_eq!(server.stats.get(), (10, 10, 2, 8));
}

/// A certificate that does not verify is said in a sentence naming the way out (--cacert,
/// --insecure), not rustls's Debug text (`invalid peer certificate:
/// Other(OtherError(CaUsedAsEndEntity))` for a self-signed one against the system store).
#[test]
fn an_unverified_certificate_is_a_plain_sentence_naming_cacert_and_insecure() {
    let (server, _) = server();
    let other = self_signed(Spec {
        names: &["Other CA"],
        ca: true,
        expired: false,
    });
    let other_pem = pem_file("other-ca.pem", &[&other]);
    let url = server.url("localhost", "/");
    for trust in [&[][..], &["--cacert", other_pem.to_str().unwrap()][..]] {
        let out = loader(&[trust, &["-n", "1", "-c", "1", &url]].concat());
        let stderr = tests::text(&out.stderr);
        if trust.is_empty() && stderr.contains("system trust store") {
            continue; // a machine without one: the run does not start
        }
        let why = stderr
            .lines()
            .find(|l| l.contains("TLS handshake with localhost"))
            .unwrap_or_else(|| panic!("{trust:?}: {stderr}"));
        assert!(
            why.contains("--cacert") && why.contains("--insecure"),
            "{trust:?}: {why}"
        );
        assert!(!why.contains("Other(") && !why.contains("Error("), "{why}");
    }
}

/// `--pipeline` keeps one connection per slot for every URL, so the URLs must share it: the
/// same address and, for https, the same TLS name (the certificate is checked for one name).
/// Two names of one server (localhost, 127.0.0.1) were let through: each switch of name closed
/// the connection with a request in flight and wrote it again on the next one, so `-n 8` put
/// 15 requests on the wire (reported Complete 8, no retries), half of them on a connection
/// whose certificate was checked for the other name. Now refused at start, one line, exit 2;
/// one name pipelined sends exactly `-n`.
#[test]
fn pipelined_urls_must_share_the_tls_name() {
    let cert = self_signed(Spec {
        names: &["localhost", "127.0.0.1"],
        ca: true,
        expired: false,
    });
    let (server, pem) = (TlsServer::start(&cert), pem_file("both.pem", &[&cert]));
    let ca = pem.to_str().unwrap();
    let port = server.addr.port();
    let (a, b) = (server.url("localhost", "/a"), server.url("127.0.0.1", "/b"));
    let plain = format!("http://localhost:{port}/c");
    for urls in [[&a, &b], [&a, &plain]] {
        let args = [
            &["-n", "8", "-c", "1", "--pipeline", "2", "--cacert", ca],
            &urls.map(|u| u.as_str())[..],
        ]
        .concat();
        let out = loader(&args);
        let stderr = tests::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{urls:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{urls:?}: {stderr}");
        assert!(lines[0].contains("--pipeline"), "{urls:?}: {stderr}");
        assert!(lines[0].contains(urls[1].as_str()), "{urls:?}: {stderr}");
    }
    assert_eq!(server.stats.get().1, 0, "a request was sent");
    let c = server.url("localhost", "/c");
    let out = loader(&[
        "-n",
        "8",
        "-c",
        "1",
        "--pipeline",
        "2",
        "--cacert",
        ca,
        &a,
        &c,
    ]);
    let stdout = tests::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", tests::text(&out.stderr));
    assert!(stdout.contains("Complete requests:      8\n"), "{stdout}");
    assert_eq!(server.stats.get().1, 8, "requests on the wire for -n 8");
}

/// A server that requires a client certificate (the loader sends none) fails every
/// connection's handshake. Under TLS 1.2 the client learns it inside its handshake: Connect
/// failures, the alert printed. Under TLS 1.3 the client's side of the handshake is over before
/// the server checks the certificate, and the server's alert arrives at the first read: it was
/// counted as a full handshake and a Receive failure, with no reason printed. Now both are
/// connect failures with the alert said once, and no handshake counted.
#[test]
fn a_required_client_certificate_is_a_connect_failure_with_its_alert() {
    let (ca, leaf) = tests::tls_server::ca_and_leaf();
    let client_ca = self_signed(Spec {
        names: &["Client CA"],
        ca: true,
        expired: false,
    });
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let server = TlsServer::requiring_client_cert(&leaf, &client_ca, version);
        let url = server.url("localhost", "/");
        let out = loader(&["-n", "4", "-c", "1", "--cacert", ca.to_str().unwrap(), &url]);
        let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
        let v = version.version;
        assert_eq!(out.status.code(), Some(1), "{v:?}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("(Connect: 4, Receive: 0, Length: 0, Exceptions: 0)"),
            "{v:?}: {stdout}"
        );
        assert!(
            stdout.contains("TLS handshakes: 0 full, 0 resumed"),
            "{v:?}: {stdout}"
        );
        let why: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("TLS handshake with localhost"))
            .collect();
        assert_eq!(why.len(), 1, "{v:?}: {stderr}");
        assert!(why[0].contains("alert"), "{v:?}: {stderr}");
        assert!(why[0].contains("client certificate"), "{v:?}: {stderr}");
        assert!(
            stdout.contains("Connections opened:     0\n"),
            "{v:?}: {stdout}"
        );
        assert_eq!(server.stats.get().1, 0, "{v:?}: a request was answered");
    }
}

/// A close-delimited response (no Content-Length, not chunked) ends where the connection does.
/// Over TLS a close_notify before the TCP close says the server ended it: the response is
/// complete. A TCP FIN alone is what an attacker or a broken path cutting the body also makes
/// (RFC 8446 6.1): the response may be truncated, so it is a Receive failure (as
/// `runtime::tls_truncation` counts), and now the reason is said once on stderr: it was a
/// Receive failure with no word of why.
#[test]
fn a_close_delimited_body_without_close_notify_is_a_receive_failure_said_once() {
    let cert = self_signed(Spec {
        names: &["localhost"],
        ca: true,
        expired: false,
    });
    let pem = pem_file("server.pem", &[&cert]);
    let ca = pem.to_str().unwrap();
    let notified = TlsServer::close_delimited(&cert, true);
    let url = notified.url("localhost", "/");
    let out = loader(&["-n", "3", "-c", "1", "--cacert", ca, &url]);
    let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("Complete requests:      3\n"), "{stdout}");
    assert!(!stderr.contains("close_notify"), "{stderr}");

    let cut = TlsServer::close_delimited(&cert, false);
    let url = cut.url("localhost", "/");
    let out = loader(&["-n", "3", "-c", "1", "--cacert", ca, &url]);
    let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("Complete requests:      0\n"), "{stdout}");
    assert!(
        stdout.contains("(Connect: 0, Receive: 3, Length: 0, Exceptions: 0)"),
        "{stdout}"
    );
    let why: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("without close_notify"))
        .collect();
    assert_eq!(why.len(), 1, "{stderr}");
    assert!(why[0].contains("may be truncated"), "{stderr}");
    assert!(why[0].contains("localhost"), "{stderr}");
    assert_eq!(cut.stats.get().1, 3, "requests the server answered");
}

/// An `https://` URL pointed at a plain-HTTP port: the server reads the ClientHello as a bad
/// request and answers in plain HTTP, which rustls reads as a corrupt record ("received corrupt
/// message of type InvalidContentType"). The line says what a curl or wrk user wants to know:
/// the server speaks plain HTTP, and http:// is the way.
#[test]
fn https_to_a_plain_http_port_hints_at_http() {
    let origin = tests::origin();
    let url = format!("https://127.0.0.1:{}/", origin.addr().port());
    let out = loader(&["-n", "2", "-c", "1", "--timeout", "5s", "--insecure", &url]);
    let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("(Connect: 2, Receive: 0, Length: 0, Exceptions: 0)"),
        "{stdout}"
    );
    let why: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("TLS handshake with 127.0.0.1"))
        .collect();
    assert_eq!(why.len(), 1, "{stderr}");
    assert!(
        why[0].contains("(is the server speaking plain HTTP? try http://)"),
        "{stderr}"
    );
}

/// `https://` at a plain server that does not answer the ClientHello: one that waits for the
/// rest of what it takes for a request head (its header timeout is longer than the loader's
/// `--timeout`), one that closes at once. Neither sends a byte rustls could call corrupt;
/// both failures say what happened and hint at http://, once. The wait was counted as a
/// connect failure with no line at all; the close said only rustls's words.
#[test]
fn https_to_a_plain_server_that_waits_or_closes_hints_at_http() {
    use std::io::Read;
    for closes in [false, true] {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("https://127.0.0.1:{}/", l.local_addr().unwrap().port());
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            let mut hello = [0u8; 512];
            let n = s.read(&mut hello).expect("the ClientHello");
            assert!(n > 0 && hello[0] == 0x16, "a TLS handshake record");
            if !closes {
                // Held until the loader is done with it.
                let _ = stop_rx.recv();
            }
        });
        let out = loader(&[
            "-n",
            "1",
            "-c",
            "1",
            "--timeout",
            "300ms",
            "--insecure",
            &url,
        ]);
        drop(stop_tx);
        server.join().expect("the server");
        let (stdout, stderr) = (tests::text(&out.stdout), tests::text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("(Connect: 1, Receive: 0, Length: 0, Exceptions: 0)"),
            "closes {closes}: {stdout}"
        );
        let why: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("TLS handshake with 127.0.0.1"))
            .collect();
        assert_eq!(why.len(), 1, "closes {closes}: {stderr}");
        let said = if closes { "closed" } else { "timed out" };
        assert!(why[0].contains(said), "closes {closes}: {stderr}");
        assert!(
            why[0].contains("(is the server speaking plain HTTP? try http://)"),
            "closes {closes}: {stderr}"
        );
    }
}
