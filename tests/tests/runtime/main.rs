//! The runtime under the proxy: the io_uring and epoll drivers, multishot receives, TLS streams
//! cut short, and the kernel settings script. One module per concern.

mod driver;
mod multishot;
mod proxy_drivers;
mod scripts_sysctl;
mod tls_truncation;
