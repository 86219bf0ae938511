//! systemd's readiness protocol (sd_notify(3)), written by hand: one datagram to the Unix
//! socket named by `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace), no
//! libsystemd. Under `Type=notify` the unit is started once the workers listen (`READY=1`), a
//! reload is in progress between `RELOADING=1` and the next `READY=1`, and `STOPPING=1` marks
//! the graceful stop. Without `$NOTIFY_SOCKET` (not under systemd) nothing is sent.
//!
//! Sent from `main` and the signal thread only, never from a worker.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable systemd sets for `Type=notify` services.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Where notifications go: `$NOTIFY_SOCKET`, read once at start.
#[derive(Debug)]
pub struct Notifier {
    addr: Option<SocketAddr>,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET`; a value that is no socket address is an error (a unit that
    /// expects READY=1 would otherwise time out without a word).
    pub fn from_env() -> io::Result<Notifier> {
        match std::env::var_os(NOTIFY_SOCKET) {
            None => Ok(Notifier { addr: None }),
            Some(v) => Ok(Notifier {
                addr: Some(address(&v.to_string_lossy())?),
            }),
        }
    }

    /// Whether a notification socket was given.
    pub fn active(&self) -> bool {
        self.addr.is_some()
    }

    /// Send `state` (newline-separated `KEY=VALUE` lines), if there is a socket.
    pub fn send(&self, state: &str) -> io::Result<()> {
        let Some(addr) = &self.addr else {
            return Ok(());
        };
        let s = UnixDatagram::unbound()?;
        s.send_to_addr(state.as_bytes(), addr).map(|_| ())
    }

    /// `RELOADING=1` with the monotonic time systemd (253+) wants beside it.
    pub fn reloading(&self) -> io::Result<()> {
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()))
    }
}

/// A path, or `@name` for the abstract namespace.
fn address(v: &str) -> io::Result<SocketAddr> {
    if let Some(name) = v.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        return SocketAddr::from_abstract_name(name.as_bytes());
    }
    if !v.starts_with('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("${NOTIFY_SOCKET} is {v:?}: neither an absolute path nor @abstract"),
        ));
    }
    SocketAddr::from_pathname(v)
}

/// CLOCK_MONOTONIC in microseconds.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(s: &UnixDatagram) -> String {
        let mut buf = [0u8; 256];
        let n = s.recv(&mut buf).expect("a datagram");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn datagrams_reach_a_path_and_an_abstract_socket() {
        let path = std::env::temp_dir().join(format!("notify-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sink = UnixDatagram::bind(&path).expect("bind");
        let n = Notifier {
            addr: Some(address(path.to_str().unwrap()).unwrap()),
        };
        n.send("READY=1").unwrap();
        assert_eq!(received(&sink), "READY=1");
        n.reloading().unwrap();
        let r = received(&sink);
        assert!(r.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{r}");
        let _ = std::fs::remove_file(&path);

        let name = format!("@notify-test-{}", std::process::id());
        let a = address(&name).unwrap();
        let sink = UnixDatagram::bind_addr(&a).expect("bind abstract");
        Notifier { addr: Some(a) }.send("STOPPING=1").unwrap();
        assert_eq!(received(&sink), "STOPPING=1");
    }

    #[test]
    fn no_socket_sends_nothing_and_a_relative_one_is_refused() {
        assert!(Notifier { addr: None }.send("READY=1").is_ok());
        assert!(address("relative.sock").is_err());
    }
}
