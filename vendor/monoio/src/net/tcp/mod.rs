#![allow(unreachable_pub)]
//! TCP related.

mod listener;
mod split;
mod stream;
mod tfo;

pub use listener::TcpListener;
pub use split::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
pub use stream::{TcpConnectOpts, TcpStream};
// Vendored change: what the thread's multishot receives went through.
#[cfg(all(target_os = "linux", feature = "iouring"))]
pub use crate::driver::{
    multishot_registry, multishot_shrink, multishot_stats, MultishotRegistry, MultishotStats,
};

#[cfg(feature = "poll-io")]
pub mod stream_poll;
