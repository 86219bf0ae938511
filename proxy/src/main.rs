//! `proxy`: parse the command line, load and check the configuration, start the workers,
//! reload on SIGHUP, stop on SIGINT/SIGTERM/SIGQUIT. Everything else lives in the library.

use proxy::cli::{self, Cli, CliError};
use shared::config::{exit_cli_error, usage_error};
use std::process::exit;

fn main() {
    // Release builds unwind so that a connection's panic ends that connection alone
    // (docs/ARCHITECTURE.md, "Panics"); any other panic still ends the process at once.
    shared::contain::abort_outside_contained();
    pin_mmap_threshold();
    let cli = Cli::parse_from(std::env::args_os()).unwrap_or_else(|e| exit_cli_error("proxy", e));
    if let Some(shell) = cli.args.completions {
        use clap::CommandFactory;
        shared::config::print_completions(shell, cli::Args::command());
        return;
    }
    let cfg = cli.config();
    if let Some(code) = cli::check_config_report(&cli, &cfg) {
        exit(code);
    }
    let cfg = match cfg {
        Ok(cfg) => cfg,
        Err(CliError::Usage(m)) => usage_error("proxy", m),
        Err(e) => {
            shared::log!("proxy: {e}");
            exit(2)
        }
    };
    cli::print_warnings(&cfg);
    // systemd's Type=notify (READY=1, RELOADING=1, STOPPING=1); nothing without $NOTIFY_SOCKET.
    let notifier = proxy::notify::Notifier::from_env().unwrap_or_else(|e| {
        shared::log!("proxy: {e}");
        exit(1)
    });
    let notifier = std::sync::Arc::new(notifier);
    // SIGHUP's default action kills: blocked from here on (the signal thread takes it).
    if let Ok(mask) = shared::shutdown::SignalMask::block_stop_and_reload_signals() {
        mask.keep();
    }
    let socket = cli.args.takeover_socket.as_deref();
    let running = proxy::start_for(cfg, socket, cli.args.takeover).unwrap_or_else(|e| {
        shared::log!("proxy: {e}");
        exit(1)
    });
    // A second signal means "stop now", without waiting for requests in flight.
    let stopping = notifier.clone();
    let flush_logs = running.log_flusher();
    let on_signal = move |n: usize| {
        if n > 1 {
            stop_now(&flush_logs)
        }
        tell(stopping.send("STOPPING=1"));
    };
    let mut reloader = running.reloader(cli.reload_source());
    let reloading = notifier.clone();
    let on_reload = Box::new(move || {
        tell(reloading.reloading());
        shared::log!("{}", reloader.reload());
        // A rejected file leaves the running config: ready again either way.
        tell(reloading.send("READY=1"));
    });
    // SIGUSR1 reopens the access log on every worker (logrotate).
    let actions = shared::shutdown::Actions {
        on_reload: Some(on_reload),
        on_reopen: Box::new(running.log_reopener()),
        on_usr2: Box::new(usr2_line(socket.is_some())),
    };
    let flag = running.shutdown_flag();
    let installed = shared::shutdown::install_signal_handlers(flag, on_signal, actions);
    if let Err(e) = installed {
        shared::log!("proxy: cannot install the signal handler: {e}");
        running.trigger_shutdown();
    }
    // Every line through `shared::log!`: a stderr pipe whose reader is gone must not kill
    // the proxy (`eprintln!` panics on a failed write).
    shared::log!("{}", running.summary());
    tell(notifier.send("READY=1"));
    let joined = running.join();
    // The workers' last lines, queued for the log writer (bounded: a stderr nobody reads
    // must not keep the process from exiting).
    shared::log::flush(std::time::Duration::from_secs(1));
    if let Err(e) = joined {
        shared::log!("proxy: {e}");
        exit(1)
    }
}

/// How long the stop-now path waits for the workers to write their access logs out, and
/// then for the log writer: a worker stuck on a stalled file system must not hold the exit.
const STOP_NOW_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The second stop signal: the access logs' buffered lines written out (bounded by
/// `STOP_NOW_WAIT`: a worker that does not answer by then loses its buffered lines), one line,
/// exit 1 at once, cutting the requests in flight.
fn stop_now(flush_logs: &dyn Fn(std::time::Duration) -> Result<(), shared::inbox::AskError>) -> ! {
    let logs = match flush_logs(STOP_NOW_WAIT) {
        Ok(()) => "access logs written out".to_string(),
        Err(e) => format!("access log lines buffered may be lost ({e})"),
    };
    shared::log!(
        "proxy: second stop signal: exiting now (exit 1), requests in flight are cut; {logs}"
    );
    shared::log::flush(STOP_NOW_WAIT);
    exit(1)
}

/// SIGUSR2 is nginx's binary upgrade (the running process starts the new binary itself): an
/// upgrade here is a new process started with --takeover, which the operator (or the service
/// manager, which must know the new pid) starts. One line per signal, and the proxy goes on.
fn usr2_line(takeover_socket: bool) -> impl Fn() + Send + 'static {
    let how = match takeover_socket {
        true => "start the new binary with the same --takeover-socket and --takeover",
        false => {
            "this process has no --takeover-socket, so a restart replaces it; started with \
             one, a new binary given --takeover takes its listening sockets over"
        }
    };
    move || shared::log!("proxy: SIGUSR2 ignored: to upgrade the binary, {how}")
}

/// A notification systemd could not be sent: logged, the proxy goes on (systemd's own timeout
/// then says the unit never got ready).
fn tell(sent: std::io::Result<()>) {
    if let Err(e) = sent {
        shared::log!(
            "proxy: cannot notify systemd (${}): {e}",
            proxy::notify::NOTIFY_SOCKET
        );
    }
}

/// Keep glibc's threshold for serving an allocation with its own mapping at 128 KiB. Left
/// dynamic, it rises to the size of the largest mapped block freed (up to 32 MiB): a reload
/// frees its fresh 1.6 MB TLS session cache, and from then on every buffer below that size
/// (256 KiB writes, 64 KiB bodies) came from the workers' arenas, where freeing it left holes
/// that stay resident. The soak's anonymous memory grew 8-13% in 10 minutes that way; with the
/// threshold pinned, 3.5% in 5 minutes and 5.3% in 10 (`scripts/soak.sh`). Blocks of 128 KiB and
/// more are rare on the request path and each costs an mmap and munmap, as before the rise.
fn pin_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt(3) only sets an allocator parameter; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}
