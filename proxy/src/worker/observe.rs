//! What a worker tells about its work: rate-limited error lines, the metrics an admin
//! listener reads, the access log; and whether requests feed them (fixed at start).

use crate::config::Config;
use shared::net::RateLimitedLog;
use std::cell::RefCell;
use std::time::{Duration, Instant};

pub struct Observability {
    errlog: RefCell<RateLimitedLog>,
    /// What requests came to (fed once per request from its record, `client::requests`),
    /// when `counting`.
    pub metrics: RefCell<crate::metrics::Metrics>,
    /// Metrics are kept: an admin listener reads them. Fixed at start (a reload does not add
    /// or remove the admin listener): without one nothing is counted, and no request pays
    /// for it.
    pub counting: bool,
    /// Requests are timed (their record's start, duration and upstream times, from the event
    /// loop's time: `shared::clock::loop_now`): for the metrics or the access log.
    pub timing: bool,
    /// The access log, when configured.
    pub access_log: Option<RefCell<crate::access_log::AccessLog>>,
}

impl Observability {
    pub(super) fn new(cfg: &Config, id: usize) -> Self {
        let counting = cfg.admin.is_some();
        Observability {
            errlog: RefCell::new(RateLimitedLog::new(Duration::from_secs(5))),
            metrics: RefCell::new(crate::metrics::Metrics::new(cfg)),
            counting,
            timing: counting || cfg.access_log.is_some(),
            access_log: cfg
                .access_log
                .as_ref()
                .map(|l| RefCell::new(crate::access_log::AccessLog::open(l, id))),
        }
    }

    /// Log an error line at most once per few seconds per worker (`shared::log!`: a stderr
    /// that cannot be written loses the line, it never panics the worker).
    pub fn log_error(&self, what: std::fmt::Arguments<'_>) {
        self.errlog.borrow_mut().log(|suppressed| {
            if suppressed > 0 {
                shared::log!("proxy: {what} ({suppressed} similar errors suppressed)")
            } else {
                shared::log!("proxy: {what}")
            }
        });
    }

    /// The access log line of a request that ended, when a log is configured.
    pub(super) fn write_log(
        &self,
        cfg: &Config,
        rec: &crate::record::Record,
        line: &crate::access_log::LogRequest,
        now: Instant,
    ) {
        if let Some(log) = &self.access_log {
            let mut log = log.borrow_mut();
            log.write(cfg, rec, line, now);
            if let Some(e) = log.take_error() {
                drop(log);
                self.log_error(format_args!("access log: lines lost: {e}"));
            }
        }
    }

    pub(crate) fn flush_log(&self) {
        if let Some(log) = &self.access_log {
            let mut log = log.borrow_mut();
            log.flush();
            if let Some(e) = log.take_error() {
                drop(log);
                self.log_error(format_args!("access log: lines lost: {e}"));
            }
        }
    }

    pub(crate) fn reopen_log(&self) {
        if let Some(log) = &self.access_log {
            if let Err(e) = log.borrow_mut().reopen() {
                self.log_error(format_args!("access log: {e}"));
            }
        }
    }
}
