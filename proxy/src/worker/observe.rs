//! What a worker tells about its work: rate-limited error lines, the metrics an admin
//! listener reads (whether requests feed them is fixed at start), the access logs (each
//! generation's is in `Generation::access_log`; here, the logs of generations a reload
//! replaced, until their last request ends).

use crate::access_log::AccessLog;
use crate::config::Config;
use crate::generation::Generation;
use shared::net::{Admit, BurstLog, RateLimitedLog};
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

/// Lines a worker writes about failed upstream attempts in a second at most; the rest are
/// counted and told in one line before the next second's first.
const UPSTREAM_LINES: u32 = 5;

/// One generation's access log (`Generation::access_log`).
pub type SharedLog = Rc<RefCell<AccessLog>>;

pub struct Observability {
    errlog: RefCell<RateLimitedLog>,
    /// Failed upstream attempts' lines: a few a second (`upstream_error`).
    uperrlog: RefCell<BurstLog>,
    /// What requests came to (fed once per request from its record, `client::requests`),
    /// when `counting`.
    pub metrics: RefCell<crate::metrics::Metrics>,
    /// Metrics are kept: an admin listener reads them. Fixed at start (a reload does not add
    /// or remove the admin listener): without one nothing is counted, and no request pays
    /// for it.
    pub counting: bool,
    /// Lines lost by this worker's access logs, every generation's: a reload that changes
    /// the log must not take `proxy_access_log_dropped_total` back.
    pub log_dropped: Rc<Cell<u64>>,
    /// The logs of earlier generations that requests in flight still write to: flushed on
    /// the tick until their generation goes, which closes them.
    retired: RefCell<Vec<Weak<RefCell<AccessLog>>>>,
    /// A flush tick runs (`lifecycle::flush_log_tick`): one at most, and none while there
    /// is no log.
    pub(crate) log_tick: Cell<bool>,
}

impl Observability {
    pub(super) fn new(cfg: &Config) -> Self {
        Observability {
            errlog: RefCell::new(RateLimitedLog::new(Duration::from_secs(5))),
            uperrlog: RefCell::new(BurstLog::new(Duration::from_secs(1), UPSTREAM_LINES)),
            metrics: RefCell::new(crate::metrics::Metrics::new(cfg)),
            counting: cfg.admin.is_some(),
            log_dropped: Rc::default(),
            retired: RefCell::default(),
            log_tick: Cell::new(false),
        }
    }

    /// The first generation's log on `file`, opened for this worker by the thread that
    /// started the workers (a path that cannot be opened stopped the start); without one
    /// (a worker made by a unit test), opened here.
    pub(super) fn open_log(&self, cfg: &Config, file: Option<std::fs::File>) -> Option<SharedLog> {
        let l = cfg.access_log.as_ref()?;
        let log = match file {
            Some(f) => AccessLog::with_file(l, f, self.log_dropped.clone()),
            None => AccessLog::open(l, self.log_dropped.clone()),
        };
        Some(Rc::new(RefCell::new(log)))
    }

    /// The log of a reload's generation `cfg`, following `prev`: kept when `access_log` did
    /// not change, else on `file`, which the reloader opened for this worker (a worker never
    /// opens a file on a reload). `prev`'s log, when it is not kept, is flushed now and
    /// closed when the last request of `prev` ends.
    pub(crate) fn log_for(
        &self,
        prev: &Generation,
        cfg: &Config,
        file: Option<std::fs::File>,
    ) -> Option<SharedLog> {
        let next = match (&cfg.access_log, file) {
            (Some(l), Some(f)) => Some(Rc::new(RefCell::new(AccessLog::with_file(
                l,
                f,
                self.log_dropped.clone(),
            )))),
            (Some(l), None) => {
                let same = prev.access_log.as_ref();
                let same = same.filter(|p| p.borrow().config() == l).cloned();
                if same.is_none() {
                    // Not reached: the reloader opens a file for every change of the log.
                    self.log_error(format_args!(
                        "access log {}: no file was opened for it on reload; not logging",
                        l.path.display()
                    ));
                }
                same
            }
            (None, _) => None,
        };
        if let Some(old) = &prev.access_log {
            if !next.as_ref().is_some_and(|n| Rc::ptr_eq(n, old)) {
                self.flush(old);
                self.retired.borrow_mut().push(Rc::downgrade(old));
            }
        }
        next
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

    /// One line about a failed upstream attempt (nginx's error log line naming the
    /// upstream): `upstream SERVER (group GROUP): KIND: WHAT`, KIND as the access log's
    /// `fault` and the metrics name it. At most `UPSTREAM_LINES` a second per worker (a dead
    /// upstream under load must not flood stderr); like every worker line, queued for the
    /// log writer thread, never written from the worker (`shared::log`).
    pub fn upstream_error(
        &self,
        (group, server): (&str, &str),
        e: crate::error::ProxyError,
        what: std::fmt::Arguments<'_>,
    ) {
        let admit = self.uperrlog.borrow_mut().admit(shared::clock::loop_now());
        let Admit::Write { suppressed } = admit else {
            return;
        };
        if suppressed > 0 {
            shared::log!("proxy: {suppressed} more upstream errors suppressed");
        }
        let kind = crate::metrics::FAULT_KINDS[crate::metrics::fault_index(e)];
        shared::log!("proxy: upstream {server} (group {group}): {kind}: {what}");
    }

    /// The access log line of a request that ended, in its generation's log.
    pub(super) fn write_log(
        &self,
        log: &SharedLog,
        cfg: &Config,
        rec: &crate::record::Record,
        line: &crate::access_log::LogRequest,
        now: Instant,
    ) {
        let mut l = log.borrow_mut();
        l.write(cfg, rec, line, now);
        if let Some(e) = l.take_error() {
            drop(l);
            self.log_error(format_args!("access log: lines lost: {e}"));
        }
    }

    fn flush(&self, log: &SharedLog) {
        let mut l = log.borrow_mut();
        l.flush();
        if let Some(e) = l.take_error() {
            drop(l);
            self.log_error(format_args!("access log: lines lost: {e}"));
        }
    }

    /// Flush the current generation's log and the retired ones still held; false when
    /// there is no log left to flush.
    pub(crate) fn flush_logs(&self, current: Option<&SharedLog>) -> bool {
        if let Some(log) = current {
            self.flush(log);
        }
        let mut retired = self.retired.borrow_mut();
        retired.retain(|w| match w.upgrade() {
            Some(log) => {
                self.flush(&log);
                true
            }
            None => false,
        });
        current.is_some() || !retired.is_empty()
    }

    /// SIGUSR1: the current generation's log goes on in its path opened again (`r`, opened
    /// by the signal thread for the generation current then, which is this one: the
    /// reloader posts its generations under the same lock). A retired log is left on its
    /// file: its path is no longer configured, and it closes soon.
    pub(crate) fn reopen_log(&self, current: Option<&SharedLog>, r: crate::access_log::Reopened) {
        if let Some(log) = current.filter(|log| log.borrow().config() == &r.cfg) {
            log.borrow_mut().reopen_with(r.file);
        }
    }
}
