//! `static_site ROOT [proxy flags...]`: the proxy answering every request from the directory
//! ROOT (the whole-site static mode, `proxy::start_static`), for benches/static_vs_nginx.sh
//! where the binary has no `--static` flag yet. The flags are the proxy's (`--listen`,
//! `--workers`, `--driver`...); the upstream it needs to validate is never contacted.

use proxy::static_files::StaticSite;
use std::process::exit;

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    if args.len() < 2 || args[1].starts_with('-') {
        eprintln!("usage: static_site ROOT [proxy flags...]");
        exit(2);
    }
    let root = std::path::absolute(args.remove(1)).unwrap_or_else(|e| {
        eprintln!("static_site: root: {e}");
        exit(2)
    });
    args.extend(["--upstream".into(), "127.0.0.1:9".into()]);
    let cfg = proxy::cli::config_from_args(&args).unwrap_or_else(|e| {
        eprintln!("static_site: {e}");
        exit(2)
    });
    let site = StaticSite {
        root,
        index: "index.html".into(),
    };
    let running = proxy::start_static(cfg, site).unwrap_or_else(|e| {
        eprintln!("static_site: {e}");
        exit(1)
    });
    if let Err(e) = shared::shutdown::install_signal_handler(running.shutdown_flag(), |_| {}) {
        eprintln!("static_site: signal handler: {e}");
        exit(1)
    }
    eprintln!("{}", running.summary());
    if let Err(e) = running.join() {
        eprintln!("static_site: {e}");
        exit(1)
    }
}
