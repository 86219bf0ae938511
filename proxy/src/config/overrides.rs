//! What the command line changes in a config: values that win over the file, kept so a
//! reload applies them again.

use super::{Config, HeaderOptions, Timeouts};
use shared::runtime::DriverChoice;
use shared::tls::server::CertFiles;
use std::net::SocketAddr;
use std::time::Duration;

/// Values given on the command line that win over the file: kept as a value so a reload can
/// apply them again.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen`: replaces every `[[listen]]` when not empty.
    pub listen: Vec<SocketAddr>,
    /// `--tls-cert` and `--tls-key`: every listener serves HTTPS with them.
    pub tls: Option<CertFiles>,
    /// Every other flag given, applied in order to the resolved config.
    pub edits: Vec<Edit>,
    /// `--access-log`: replaces the file's `access_log`.
    pub access_log: Option<crate::config::AccessLogConfig>,
}

/// Where a timeout lives in [`Timeouts`].
pub type TimeoutSlot = fn(&mut Timeouts) -> &mut Duration;
/// Where a header switch lives in [`HeaderOptions`].
pub type HeaderSlot = fn(&mut HeaderOptions) -> &mut bool;

/// One flag's effect on the config.
#[derive(Debug, Clone, Copy)]
pub enum Edit {
    /// `--backlog`, for every listener.
    Backlog(u32),
    Workers(usize),
    Driver(DriverChoice),
    NoPin,
    /// `--pin auto|on|off`.
    Pin(shared::runtime::PinMode),
    /// `--no-multishot`.
    NoMultishot,
    /// `--no-splice`.
    NoSplice,
    /// `--steer`.
    Steer(crate::config::Steer),
    Timeout(TimeoutSlot, Duration),
    /// `--body-min-rate`, in bytes per second.
    BodyMinRate(u64),
    MaxBody(Option<u64>),
    MaxConnections(usize),
    /// `--no-x-*`, `--no-preserve-host`.
    HeaderOff(HeaderSlot),
    /// `--admin`.
    Admin(SocketAddr),
    /// `--proxy-protocol`: every listener reads a PROXY protocol header first.
    ProxyProtocol,
}

impl Edit {
    pub(super) fn apply(self, cfg: &mut Config) {
        match self {
            Edit::Backlog(n) => cfg.listeners.iter_mut().for_each(|l| l.backlog = n),
            Edit::Workers(n) => cfg.runtime.workers = n,
            Edit::Driver(d) => cfg.runtime.driver = d,
            Edit::NoPin => cfg.runtime.pin = false,
            Edit::Pin(mode) => cfg.runtime.set_pin_mode(mode),
            Edit::NoMultishot => cfg.runtime.multishot = false,
            Edit::NoSplice => cfg.splice = false,
            Edit::Steer(s) => cfg.steer = s,
            Edit::Timeout(slot, d) => *slot(&mut cfg.timeouts) = d,
            Edit::BodyMinRate(r) => cfg.timeouts.body_min_rate = r,
            Edit::MaxBody(limit) => cfg.limits.max_body = limit,
            Edit::MaxConnections(n) => cfg.limits.max_connections = n,
            Edit::HeaderOff(slot) => *slot(&mut cfg.headers) = false,
            Edit::Admin(addr) => cfg.admin = Some(addr),
            Edit::ProxyProtocol => cfg
                .listeners
                .iter_mut()
                .for_each(|l| l.proxy_protocol = true),
        }
    }
}
