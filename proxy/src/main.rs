//! `proxy`: parse the command line, load and check the configuration, start the workers,
//! stop on SIGINT/SIGTERM. Everything else lives in the library.

use proxy::cli::{self, Cli, CliError};
use shared::config::{exit_cli_error, usage_error};
use std::io::Write;
use std::process::exit;

fn main() {
    let cli = Cli::parse_from(std::env::args_os()).unwrap_or_else(|e| exit_cli_error(e));
    let cfg = cli.config();
    if let Some(code) = cli::check_config_report(&cli, &cfg) {
        exit(code);
    }
    let cfg = match cfg {
        Ok(cfg) => cfg,
        Err(CliError::Usage(m)) => usage_error(m),
        Err(e) => {
            eprintln!("proxy: {e}");
            exit(2)
        }
    };
    cli::print_warnings(&cfg);
    let running = proxy::start(cfg).unwrap_or_else(|e| {
        eprintln!("proxy: {e}");
        exit(1)
    });
    // A second signal means "stop now", without waiting for requests in flight.
    let on_signal = |n: usize| {
        if n > 1 {
            exit(1)
        }
    };
    // SIGUSR1 reopens the access log on every worker (logrotate).
    let reopen = running.log_reopener();
    let installed =
        shared::shutdown::install_signal_handlers(running.shutdown_flag(), on_signal, reopen);
    if let Err(e) = installed {
        eprintln!("proxy: cannot install the signal handler: {e}");
        running.trigger_shutdown();
    }
    // Not `eprintln!`: a stderr pipe whose reader is gone must not kill a running proxy.
    let _ = writeln!(std::io::stderr(), "{}", running.summary());
    if let Err(e) = running.join() {
        eprintln!("proxy: {e}");
        exit(1)
    }
}
