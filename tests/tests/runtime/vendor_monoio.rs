//! The vendored runtime is monoio 0.2.4 as published plus the numbered patches in
//! `vendor/patches/monoio/` (vendor/README.md lists them), nothing else: an edit made in
//! `vendor/monoio` without a patch fails here, with the difference printed as a patch. And
//! what the upstream fix that had to be ported (patch 0011, monoio #318) does.

use shared::runtime::run_on;
use std::future::Future;
use std::io::Read;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::task::{Context, Poll};
use std::time::Duration;
use tests::fast_uring;

#[test]
fn vendored_monoio_is_the_release_plus_its_patches() {
    // The script applies the patches with `git apply`.
    tests::require_tool("git", "git");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg(repo.join("scripts/vendor-monoio.sh"))
        .arg("check")
        .output()
        .expect("run scripts/vendor-monoio.sh check");
    assert!(
        out.status.success(),
        "scripts/vendor-monoio.sh check failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}

/// Polls `F` once (it must be pending), then is ready, handing `F` back unpolled, as soon as
/// `F`'s waker is woken: for an io_uring operation, when the driver reaped its completion.
struct UntilWoken<F> {
    inner: Option<Pin<Box<F>>>,
    polled: bool,
}

impl<F: Future> Future for UntilWoken<F> {
    type Output = Pin<Box<F>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Pin<Box<F>>> {
        if self.polled {
            return Poll::Ready(self.inner.take().expect("ready once"));
        }
        self.polled = true;
        let inner = self.inner.as_mut().expect("polled before ready");
        assert!(
            inner.as_mut().poll(cx).is_pending(),
            "an io_uring accept done at once"
        );
        Poll::Pending
    }
}

/// An accept that completed while nobody polled it, then dropped: the connection it accepted
/// is closed (the client reads its end) instead of left open with nobody to serve it.
#[test]
fn an_accept_dropped_after_it_completed_closes_its_connection() {
    let Some(driver) = fast_uring() else { return };
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = l.local_addr().expect("local addr");
    l.set_nonblocking(true).expect("nonblocking");
    // Connected before the runtime runs: the accept finds it in the backlog when submitted.
    let mut client = std::net::TcpStream::connect(addr).expect("connect");
    run_on(driver, 64, async move {
        let listener = monoio::net::TcpListener::from_std(l).expect("listener on the runtime");
        let accept = UntilWoken {
            inner: Some(Box::pin(listener.accept())),
            polled: false,
        };
        drop(accept.await);
    })
    .expect("io_uring runtime");
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut byte = [0u8; 1];
    let read = loop {
        match client.read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    // A timeout here is the connection left open (WouldBlock), never an end.
    assert!(
        matches!(read, Ok(0)),
        "the accepted connection should be closed, the client read {read:?}"
    );
}
