//! Operating the proxy: health (passive and active checks), reload, takeover, metrics, the
//! access log and the process itself (signals, exit codes, limits). One module per concern;
//! `health_origin` holds the health checks' origins.

mod access_log;
mod accounting;
mod check_start;
mod client_abort;
mod crowds;
mod dns;
mod exhaustion;
mod health;
mod health_check;
mod health_check_log;
mod health_origin;
mod health_reload;
mod k8s;
mod metrics;
mod notify;
mod panics;
mod pinning;
mod process;
mod reload;
mod reload_max_conns;
mod reload_metrics;
mod request_records;
mod stalled_stderr;
mod systemd_unit;
mod takeover;
mod takeover_limits;

/// Tests that crowd the machine (a thousand clients, hundreds of handshakes) or measure the
/// proxy's memory take turns: run side by side, one's load delays another's origin past its
/// sub-second timeouts, or shows in another's resident memory. The guard, held for the test.
fn one_crowd_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static CROWD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CROWD.lock().unwrap_or_else(|p| p.into_inner())
}
