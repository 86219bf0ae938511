//! Placeholder for the static-file module (written on branch `w2-static`): the config type
//! the routes name and an entry point that answers 404 until the real one is merged.

use crate::client::{respond_error, ClientConn};
use crate::error::ProxyError;
use crate::exchange::Next;
use crate::forward::RequestInfo;
use std::path::PathBuf;

/// A route's `static = { root, index }`, resolved: `root` is absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticSite {
    pub root: PathBuf,
    pub index: String,
}

/// Serve `req` from `site`. Placeholder: 404.
pub async fn serve(c: &mut ClientConn, _req: &RequestInfo, _site: &StaticSite) -> Next {
    respond_error(c, ProxyError::NoRoute).await;
    Next::Close
}
