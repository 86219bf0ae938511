//! `--check-config`'s second half: after the file resolved (which already read the TLS
//! certificates and keys, the CA files and the static roots), open and close at once what a
//! start opens, so that a config that passes the check starts, and a start failure that a
//! file can cause is a check failure first, with the start's own message:
//! - the I/O driver the file asks for (`[runtime] driver = "io_uring"` where it is refused);
//! - every listener and the admin listener, bindable by this process
//!   (`shared::net::probe_bind`: a foreign program holding the address fails the check, the
//!   same proxy already running, as when `ExecReload=` checks first, does not);
//! - the access log, opened for appending and created if missing, as a start does;
//! - with `--takeover-socket PATH`: a socket bound in PATH's directory under a name of its
//!   own, then removed (a start binds there the same way before renaming over PATH).

use crate::config::Config;
use crate::takeover::{bind_listen, seqpacket, TakeoverError};
use crate::StartError;
use std::path::Path;

/// Everything a start of `cfg` would open, opened and closed; the start's error otherwise.
pub fn check(cfg: &Config, takeover_socket: Option<&Path>) -> Result<(), StartError> {
    shared::runtime::select_driver(&cfg.runtime)?;
    let addrs = cfg.listeners.iter().map(|l| l.addr).chain(cfg.admin);
    for addr in addrs {
        shared::net::probe_bind(addr).map_err(|source| StartError::Bind { addr, source })?;
    }
    if let Some(l) = &cfg.access_log {
        crate::access_log::open_file(l).map_err(|source| StartError::AccessLog {
            path: l.path.clone(),
            source,
        })?;
    }
    if let Some(path) = takeover_socket {
        takeover_dir(path)?;
    }
    Ok(())
}

/// A start binds its takeover socket under a temporary name beside PATH: the same here.
fn takeover_dir(path: &Path) -> Result<(), TakeoverError> {
    let err = |source| TakeoverError::Bind {
        path: path.display().to_string(),
        source,
    };
    let probe = path.with_extension(format!("check{}", std::process::id()));
    let s = seqpacket().map_err(err)?;
    let bound = bind_listen(&s, &probe);
    let _ = std::fs::remove_file(&probe);
    bound.map_err(err)
}
