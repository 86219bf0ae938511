//! The reverse proxy (work in progress: see the proxy issue).
