//! A status changed while the origin runs, for the requests to one path: a health endpoint a
//! test switches between 200 and 500 while every other path keeps answering as configured.
//! The status lives in an atomic the test holds a clone of; the origin reads it once per
//! request to that path (tests only, never on a benchmark's path).

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct StatusSwitch {
    path: Arc<str>,
    status: Arc<AtomicU16>,
}

impl StatusSwitch {
    /// Requests whose path (the target before any `?`) is exactly `path` get `status`.
    pub fn new(path: &str, status: u16) -> StatusSwitch {
        StatusSwitch {
            path: path.into(),
            status: Arc::new(AtomicU16::new(status)),
        }
    }

    /// From the next request on, answer `status`.
    pub fn set(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub fn status(&self) -> u16 {
        self.status.load(Ordering::SeqCst)
    }

    /// The status for a request to `target`, if it is this switch's path.
    pub fn for_target(&self, target: &str) -> Option<u16> {
        let path = target.split_once('?').map_or(target, |(p, _)| p);
        (path == &*self.path).then(|| self.status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_path_only() {
        let s = StatusSwitch::new("/healthz", 200);
        let other = s.clone();
        assert_eq!(s.for_target("/healthz"), Some(200));
        other.set(503);
        assert_eq!(s.for_target("/healthz?x=1"), Some(503));
        assert_eq!(s.for_target("/healthz/x"), None);
        assert_eq!(s.for_target("/"), None);
    }
}
