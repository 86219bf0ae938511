//! What a client says about where its request came from is not passed on (issue 22, item
//! 3b): `X-Forwarded-Host` and `Forwarded` are removed before the request goes upstream,
//! always; the proxy writes the forwarding fields it vouches for itself.

/// Every spelling and count of the two fields; the origin sees none of them, and the rest of
/// the request as before.
#[test]
fn forwarded_host_and_forwarded_never_reach_the_origin() {
    let origin = tests::capturing_origin();
    for flags in [
        &[][..],
        &[
            "--no-x-forwarded-for",
            "--no-x-real-ip",
            "--no-x-forwarded-proto",
        ][..],
    ] {
        let (proxy, addr) = tests::start_proxy(&[origin.addr()], flags);
        let mut c = tests::raw::Client::connect(addr);
        c.send(
            b"GET /p HTTP/1.1\r\nHost: t\r\nX-Forwarded-Host: admin.internal\r\n\
              Forwarded: for=10.0.0.1;host=admin.internal;proto=https\r\nX-Kept: 1\r\n\
              x-forwarded-host: other\r\nFORWARDED: for=10.0.0.2\r\n\r\n",
        )
        .expect("request sent");
        let r = c
            .response(tests::raw::WAIT)
            .map_err(|e| tests::raw::show(&e));
        assert_eq!(r.map(|r| r.status), Ok(200), "{flags:?}");
        proxy.shutdown().expect("the proxy stops cleanly");
    }
    let seen: Vec<String> = origin
        .captured()
        .iter()
        .map(|r| String::from_utf8_lossy(r).to_ascii_lowercase())
        .collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for req in &seen {
        assert!(
            !req.contains("x-forwarded-host") && !req.contains("\r\nforwarded:"),
            "the origin saw {req:?}"
        );
        assert!(req.contains("\r\nx-kept: 1\r\n"), "{req:?}");
    }
}
