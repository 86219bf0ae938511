//! The runners behind the command line: each validates its arguments into plain options
//! (usage errors exit 2), runs, and writes what the flags ask for.

use super::{
    CeilingArgs, Cli, Command, CompareArgs, CompatArgs, CompatOutput, LoadArgs, OriginArgs,
};
use crate::compare::ComparePlan;
use crate::stats::RunResult;
use crate::{LoadError, RunOptions};
use shared::net::reuseport_group;
use shared::origin::{serve, OriginConfig, OriginStats};
use shared::runtime::{select_driver, spawn_workers, RuntimeConfig};
use shared::shutdown::{install_signal_handler, ShutdownFlag};
use std::sync::Arc;

/// Dispatch a parsed command line; returns the exit status (0 done, 1 nothing succeeded,
/// 2 usage errors). Logs go to stderr, stdout carries only the report.
pub fn run_command(cli: Cli) -> i32 {
    let stop = ShutdownFlag::new();
    let flag = stop.clone();
    // A second Ctrl-C means "stop now", without the report.
    if let Err(e) = install_signal_handler(flag, |n| {
        if n >= 2 {
            std::process::exit(130);
        }
    }) {
        eprintln!("loader: warning: cannot install the signal handler: {e}");
    }
    match cli.command {
        Some(Command::Origin(args)) => run_origin(&args, stop),
        Some(Command::Compare(args)) => run_compare(&args, stop),
        Some(Command::Merge(args)) => crate::merge::run_merge(&args.files, args.json.as_deref()),
        Some(Command::Ceiling(args)) => run_ceiling(&args, stop),
        None => run_load(&cli.urls, &cli.load, &cli.compat, stop),
    }
}

/// ab's `-g`: the rows kept per worker at most (the first ones completed).
const GNUPLOT_ROWS: u64 = 1_000_000;

/// ab's `-g`: the note when rows were left out (`kept` written of `completed`).
pub(super) fn gnuplot_note(kept: usize, completed: u64) -> Option<String> {
    ((kept as u64) < completed).then(|| {
        format!("{kept} of the {completed} requests written (the first {GNUPLOT_ROWS} per worker)")
    })
}

/// The flags (wrk's, wrk2's and ab's turned into ours) as the run's options and what the
/// output must hold besides the report.
pub(super) fn load_options(
    urls: &[String],
    args: &LoadArgs,
    compat: &CompatArgs,
) -> Result<(RunOptions, CompatOutput), crate::LoadError> {
    let mut args = args.clone();
    let mut extra = compat.apply(&mut args)?;
    let mut opts = args.to_options(urls)?;
    let asked = args
        .connections
        .map_or(crate::options::DEFAULT_CONNECTIONS, |c| c as usize);
    if opts.connections < asked {
        extra.notes.push(format!(
            "-c {asked} is more than the {} requests to make: {} connections",
            opts.connections, opts.connections
        ));
    }
    if extra.gnuplot.is_some() {
        // As many as the run makes, up to a bound on the memory they take (32 B each; pages
        // are only touched as rows are written).
        let n = opts.requests.unwrap_or(GNUPLOT_ROWS);
        opts.record_requests = Some(n.min(GNUPLOT_ROWS) as usize);
    }
    Ok((opts, extra))
}

fn run_load(urls: &[String], args: &LoadArgs, compat: &CompatArgs, stop: Arc<ShutdownFlag>) -> i32 {
    let (opts, extra) = match load_options(urls, args, compat) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("loader: {e}");
            return e.exit_code();
        }
    };
    let files = [
        ("--json", &opts.json),
        ("--plot", &opts.plot),
        ("-e", &extra.csv),
        ("-g", &extra.gnuplot),
    ];
    if let Err(e) = check_outputs(&files) {
        eprintln!("loader: {e}");
        return 2;
    }
    if let Some(code) = crate::shard::wait_for_start(opts.start_at, opts.quiet, &stop) {
        return code;
    }
    let mut progress = crate::progress::Progress::new(crate::progress::enabled(opts.quiet));
    let result =
        crate::run::run_with_progress(&opts, stop, |elapsed, live| progress.tick(elapsed, live));
    progress.finish();
    let result = match result {
        // After the run: a usage error found on its way (an --hdr-log path) stays one line.
        Ok(r) => {
            extra.notes.iter().for_each(|n| eprintln!("loader: {n}"));
            r
        }
        Err(e) => {
            eprintln!("loader: {e}");
            return match e {
                LoadError::Runtime(_) => 1,
                _ => e.exit_code(),
            };
        }
    };
    if let Err(e) = output(&result, &opts).and_then(|()| peer_output(&result, &extra)) {
        eprintln!("loader: {e}");
        return 1;
    }
    if result.nothing_succeeded() {
        1
    } else {
        0
    }
}

/// Every file the command will write after its load, checked with [`check_writable`]; the
/// error names the flag and the path.
fn check_outputs(files: &[(&str, &Option<std::path::PathBuf>)]) -> Result<(), String> {
    for (flag, path) in files {
        if let Some(path) = path {
            check_writable(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// A file the run will write after the load: open it for writing now (without truncating
/// it; a file the check created is removed again), so a path that cannot be written fails
/// before the load instead of after it.
fn check_writable(path: &std::path::Path) -> std::io::Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// wrk's `--latency` block on stdout after the report; ab's `-e` and `-g` files.
fn peer_output(r: &RunResult, extra: &CompatOutput) -> Result<(), String> {
    use crate::peer_formats::{gnuplot_tsv, percentiles_csv, wrk_latency};
    let total = crate::figures::Times::new(&r.hist.total, &r.hist.sums.total);
    if extra.latency {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        out.write_all(wrk_latency(total).as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| format!("writing the report: {e}"))?;
    }
    if let Some(path) = &extra.csv {
        std::fs::write(path, percentiles_csv(total))
            .map_err(|e| format!("-e {}: {e}", path.display()))?;
    }
    if let Some(path) = &extra.gnuplot {
        std::fs::write(path, gnuplot_tsv(&r.requests))
            .map_err(|e| format!("-g {}: {e}", path.display()))?;
        if let Some(note) = gnuplot_note(r.requests.len(), r.totals.completed) {
            eprintln!("loader: -g {}: {note}", path.display());
        }
    }
    Ok(())
}

/// What the load command does with a finished run: the report on stdout, then `--json` and `--plot`.
/// (The one function here that does I/O.) Errors name the flag and the file.
fn output(r: &RunResult, opts: &RunOptions) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(crate::report::render(r).as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| format!("writing the report: {e}"))?;
    if let Some(path) = &opts.json {
        let sys = crate::sysinfo::SysInfo::collect(Some(r.driver.to_string()));
        crate::json::write(path, &crate::json::document(r, &sys))
            .map_err(|e| format!("--json {}: {e}", path.display()))?;
    }
    if let Some(path) = &opts.plot {
        let title = match r.urls.as_slice() {
            [one] => format!("Latency by percentile: {}", one.url),
            many => format!("Latency by percentile: {} URLs", many.len()),
        };
        let mut series = vec![crate::plot::Series {
            label: format!(
                "-c {}{}",
                r.concurrency,
                if r.keep_alive { "" } else { ", --close" }
            ),
            hist: &r.hist.total,
        }];
        if crate::report::is_rate_mode(r) {
            series[0].label = format!(
                "{}, corrected (from the intended send time)",
                series[0].label
            );
            series.push(crate::plot::Series {
                label: "uncorrected (from actual send time)".into(),
                hist: &r.hist.uncorrected,
            });
        }
        crate::plot::write(path, &title, &series)
            .map_err(|e| format!("--plot {}: {e}", path.display()))?;
    }
    Ok(())
}

/// `loader compare`: the flags checked and turned into A's and B's options, then the rounds.
fn run_compare(args: &CompareArgs, stop: Arc<ShutdownFlag>) -> i32 {
    let usage = |e: &dyn std::fmt::Display| {
        eprintln!("loader: {e}");
        2
    };
    if let Err(e) = args.validate() {
        return usage(&e);
    }
    let a = match args.load.to_options(std::slice::from_ref(&args.url_a)) {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    let b = match args.load.to_options(std::slice::from_ref(&args.url_b)) {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    if let Err(e) = check_watched(&args.watch_pid) {
        return usage(&e);
    }
    // The comparison writes A's --json and --plot (B's are the same flags).
    if let Err(e) = check_outputs(&[("--json", &a.json), ("--plot", &a.plot)]) {
        return usage(&e);
    }
    let plan = ComparePlan {
        a,
        b,
        rounds: args.rounds as usize,
        watch_pids: args.watch_pid.clone(),
    };
    crate::compare::run_compare(&plan, stop)
}

/// `--watch-pid`: every process must be readable before anything runs.
fn check_watched(pids: &[u32]) -> Result<(), String> {
    for &pid in pids {
        if let Err(e) = crate::procstat::cpu_times(pid) {
            return Err(format!(
                "--watch-pid {pid}: cannot read /proc/{pid}/stat: {e}"
            ));
        }
    }
    Ok(())
}

/// `loader ceiling`: the flags checked and turned into the search and one `RunOptions` per
/// URL, then the search.
fn run_ceiling(args: &CeilingArgs, stop: Arc<ShutdownFlag>) -> i32 {
    let usage = |e: &dyn std::fmt::Display| {
        eprintln!("loader: {e}");
        2
    };
    let search = match args.search_options() {
        Ok(s) => s,
        Err(e) => return usage(&e),
    };
    if let Err(e) = check_watched(&args.watch_pid) {
        return usage(&e);
    }
    // --spin paces the steps' sends: the search sets their rates, so the flags are validated
    // without it and it is put back.
    let mut load = args.load.clone();
    load.spin = false;
    let mut sides = Vec::new();
    for url in std::iter::once(&args.url_a).chain(&args.url_b) {
        match load.to_options(std::slice::from_ref(url)) {
            Ok(mut o) => {
                o.spin = args.load.spin;
                sides.push(o);
            }
            Err(e) => return usage(&e),
        }
    }
    // The search writes A's --json and --plot (B's are the same flags).
    let a = &sides[0];
    if let Err(e) = check_outputs(&[("--json", &a.json), ("--plot", &a.plot)]) {
        return usage(&e);
    }
    crate::ceiling::run_ceiling(&search, &sides, stop)
}

/// `loader origin`: the built-in origin on the thread-per-core runtime until Ctrl-C.
fn run_origin(args: &OriginArgs, stop: Arc<ShutdownFlag>) -> i32 {
    let nofile = shared::net::raise_nofile_limit();
    let rt = RuntimeConfig::from_args(&args.runtime);
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("loader: {e}");
        1
    };
    let driver = match select_driver(&rt) {
        Ok(d) => d,
        Err(e) => return fail(&e),
    };
    let listeners = match reuseport_group(args.listen, rt.workers, 4096) {
        Ok(l) => l,
        Err(e) => return fail(&format_args!("cannot listen on {}: {e}", args.listen)),
    };
    let addr = listeners[0].local_addr().unwrap_or(args.listen);
    let Ok(body_size) = usize::try_from(args.body_size) else {
        return fail(&"--body-size is too large");
    };
    let tls = match args.tls_cert.clone().zip(args.tls_key.clone()) {
        None => None,
        Some((cert, key)) => {
            let spec = shared::tls::server::ServerTlsSpec {
                default: shared::tls::server::CertFiles { cert, key },
                sni: Vec::new(),
            };
            match shared::tls::server::server_config(&spec) {
                Ok(t) => {
                    t.warnings
                        .iter()
                        .for_each(|w| eprintln!("loader: warning: {w}"));
                    Some(t.config)
                }
                Err(e) => return fail(&e),
            }
        }
    };
    let cfg = Arc::new(OriginConfig {
        body_size,
        delay: args.delay.unwrap_or_default(),
        max_rate: args.max_rate,
        tls,
        ..OriginConfig::default()
    });
    let items: Vec<_> = listeners
        .into_iter()
        .map(|l| (l, OriginStats::new()))
        .collect();
    let workers = spawn_workers(&rt, driver, stop, "origin", items, move |ctx, (l, st)| {
        let cfg = cfg.clone();
        async move {
            match monoio::net::TcpListener::from_std(l) {
                Ok(l) => serve(l, cfg, st, ctx.shutdown).await,
                Err(e) => shared::log!("origin: worker {}: cannot use the listener: {e}", ctx.id),
            }
        }
    });
    let workers = match workers {
        Ok(w) => w,
        Err(e) => return fail(&e),
    };
    eprintln!(
        "origin: {}, driver {}, open files {nofile}; {} byte bodies{}",
        workers.describe_pinning(),
        workers.driver,
        body_size,
        args.delay
            .map(|d| format!(", {} delay", shared::units::format_duration(d)))
            .unwrap_or_default()
            + &args
                .max_rate
                .map(|r| format!(", at most {r} req/s per worker (the rest queue)"))
                .unwrap_or_default()
    );
    let scheme = if args.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    println!("{scheme}://{addr}/");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    match workers.join() {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}
