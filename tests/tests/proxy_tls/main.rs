//! HTTPS on both sides of the proxy: TLS listeners and their config, certificate reload, TLS
//! upstreams and their health checks. One module per concern.

mod access_log;
mod config;
mod health_check;
mod proxy_protocol;
mod reload;
mod tls;
mod upstream;
