//! The runtime under the proxy: the io_uring and epoll drivers, multishot receives, TLS streams
//! cut short, the vendored monoio (the release plus its patches), and the kernel settings
//! script. One module per concern.

mod driver;
mod multishot;
mod proxy_drivers;
mod scripts_sysctl;
mod tls_truncation;
mod vendor_monoio;
