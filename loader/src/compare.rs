//! `loader compare URL_A URL_B`: the overhead experiment in one command.
//!
//! A and B run interleaved, A B A B… for `--rounds` rounds (at least 3 recommended), each round
//! a full run with the same options (`-n`/`-d` apply to each round), so drift in the machine
//! (thermal, other tenants, page cache) hits both sides alike. The table gives, per side, the
//! median of each figure with its min-max spread over the rounds, as the seeds' tables did by
//! hand: total time, requests per second, mean time per request, p99, transfer rate, and the
//! performance relative to A, computed per round pair (B's round i over A's round i) so slow
//! drift cancels.
//!
//! `--watch-pid PID` (repeatable) reads the process's CPU time from /proc before and after
//! every round: the watched process's (a proxy's) user and kernel microseconds per completed
//! request, measured by the same run. The loader's own CPU per request is shown beside it.
//! /proc counts in clock ticks (10 ms at 100 Hz), so short rounds give coarse figures: a round
//! should last a few seconds for a precise CPU line.

use crate::figures::Derived;
use crate::json::{self, PercentilesMs, RunDoc, SpectrumPoint};
use crate::procstat::{self, CpuTimes};
use crate::stats::{new_histogram, RunResult};
use crate::sysinfo::SysInfo;
use crate::{plot, LoadError, RunOptions};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;
use shared::shutdown::ShutdownFlag;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

/// The value of the `"schema"` key of a compare document.
pub const SCHEMA: &str = "loader-compare/1";

/// One round of one side.
#[derive(Debug, Clone)]
pub struct Round {
    pub result: RunResult,
    /// CPU time each watched process used during the round (`None`: it could not be read).
    pub watched: Vec<Option<CpuTimes>>,
    /// CPU time this process (the loader) used during the round.
    pub loader_cpu: Option<CpuTimes>,
}

/// A or B: its URL and rounds, in order.
#[derive(Debug, Clone)]
pub struct Side {
    pub url: String,
    pub rounds: Vec<Round>,
}

impl Side {
    /// All rounds' total-latency histograms added: the exact distribution over the rounds.
    pub fn merged_histogram(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for r in &self.rounds {
            let _ = h.add(&r.result.hist.total);
        }
        h
    }

    pub fn completed(&self) -> u64 {
        self.rounds.iter().map(|r| r.result.totals.completed).sum()
    }

    /// Completed responses whose status was not 2xx (ab's "Non-2xx responses").
    pub fn non_2xx(&self) -> u64 {
        self.rounds.iter().map(|r| r.result.totals.non_2xx).sum()
    }
}

/// Everything `compare` measured.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub watch_pids: Vec<u32>,
    /// Rounds asked for (fewer were run if Ctrl-C stopped it).
    pub rounds_planned: usize,
    /// Describes the per-round load, e.g. "-n 100 -c 4, keep-alive".
    pub load: String,
    pub interrupted: bool,
}

/// Median and spread of one figure over the rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for an empty list; NaNs are ignored.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// NaN and infinities as 0, so the document stays valid JSON.
    fn finite(self) -> Spread {
        Spread {
            median: fin(self.median),
            min: fin(self.min),
            max: fin(self.max),
        }
    }
}

fn fin(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// A figure computed per round.
struct Figure {
    name: &'static str,
    key: &'static str,
    decimals: usize,
    of: fn(&RunResult) -> f64,
}

const FIGURES: &[Figure] = &[
    Figure {
        name: "Time taken for tests (s)",
        key: "time_taken_s",
        decimals: 3,
        of: |r| r.elapsed.as_secs_f64(),
    },
    Figure {
        name: "Requests per second",
        key: "requests_per_second",
        decimals: 2,
        of: |r| Derived::of(r).requests_per_second,
    },
    Figure {
        name: "Time per request (ms, mean)",
        key: "time_per_request_ms",
        decimals: 3,
        of: |r| Derived::of(r).time_per_request_ms,
    },
    Figure {
        name: "p99 (ms)",
        key: "p99_ms",
        decimals: 3,
        of: |r| {
            crate::figures::Times::new(&r.hist.total, &r.hist.sums.total).percentile_us(99.0) as f64
                / 1000.0
        },
    },
    Figure {
        name: "Transfer rate (Kbytes/sec)",
        key: "transfer_rate_kbytes_per_sec",
        decimals: 2,
        of: |r| Derived::of(r).transfer_rate_kbytes,
    },
];

fn per_round(side: &Side, f: fn(&RunResult) -> f64) -> Vec<f64> {
    side.rounds.iter().map(|r| f(&r.result)).collect()
}

/// B's requests per second over A's, in %, per round pair.
pub fn relative_performance(c: &Comparison) -> Vec<f64> {
    c.a.rounds
        .iter()
        .zip(&c.b.rounds)
        .filter_map(|(a, b)| {
            let ra = Derived::of(&a.result).requests_per_second;
            let rb = Derived::of(&b.result).requests_per_second;
            (ra > 0.0).then(|| rb / ra * 100.0)
        })
        .collect()
}

/// CPU µs per completed request in one round; `pick` selects user or system time.
fn cpu_per_request(
    cpu: Option<CpuTimes>,
    completed: u64,
    pick: fn(&CpuTimes) -> std::time::Duration,
) -> f64 {
    match cpu {
        Some(t) if completed > 0 => pick(&t).as_secs_f64() * 1e6 / completed as f64,
        _ => f64::NAN,
    }
}

/// (label, key, per-round values for A, for B) of every CPU line.
fn cpu_lines(c: &Comparison) -> Vec<(String, String, Vec<f64>, Vec<f64>)> {
    let mut lines = Vec::new();
    let user: fn(&CpuTimes) -> std::time::Duration = |t| t.user;
    let system: fn(&CpuTimes) -> std::time::Duration = |t| t.system;
    let values =
        |side: &Side, who: Option<usize>, pick: fn(&CpuTimes) -> std::time::Duration| -> Vec<f64> {
            side.rounds
                .iter()
                .map(|r| {
                    let cpu = match who {
                        Some(i) => r.watched.get(i).copied().flatten(),
                        None => r.loader_cpu,
                    };
                    cpu_per_request(cpu, r.result.totals.completed, pick)
                })
                .collect()
        };
    for (i, pid) in c.watch_pids.iter().enumerate() {
        for (kind, pick) in [("user", user), ("kernel", system)] {
            lines.push((
                format!("CPU pid {pid} {kind} (us/req)"),
                format!("pid_{pid}_{kind}_us_per_request"),
                values(&c.a, Some(i), pick),
                values(&c.b, Some(i), pick),
            ));
        }
    }
    for (kind, pick) in [("user", user), ("kernel", system)] {
        lines.push((
            format!("CPU loader {kind} (us/req)"),
            format!("loader_{kind}_us_per_request"),
            values(&c.a, None, pick),
            values(&c.b, None, pick),
        ));
    }
    lines
}

fn cell(s: Option<Spread>, decimals: usize, suffix: &str) -> String {
    match s {
        Some(s) => format!(
            "{:.d$}{suffix} ({:.d$}-{:.d$})",
            s.median,
            s.min,
            s.max,
            d = decimals
        ),
        None => "n/a".into(),
    }
}

/// The comparison table (a pure function of what was measured).
pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    let done = c.a.rounds.len().max(c.b.rounds.len());
    let _ = writeln!(
        s,
        "Compared over {done} round{} (A B A B ...), {} per round",
        if done == 1 { "" } else { "s" },
        c.load
    );
    if c.interrupted {
        let _ = writeln!(
            s,
            "Interrupted after {done} of {} rounds (Ctrl-C)",
            c.rounds_planned
        );
    }
    let _ = writeln!(s, "A: {}", c.a.url);
    let _ = writeln!(s, "B: {}", c.b.url);
    s.push_str("Each cell: median (min-max) over the rounds\n\n");
    // Rows are collected first so the columns fit their widest cell.
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let row = |rows: &mut Vec<(String, String, String)>, name: &str, a: String, b: String| {
        rows.push((name.to_string(), a, b));
    };
    for f in FIGURES {
        row(
            &mut rows,
            f.name,
            cell(Spread::of(&per_round(&c.a, f.of)), f.decimals, ""),
            cell(Spread::of(&per_round(&c.b, f.of)), f.decimals, ""),
        );
    }
    row(
        &mut rows,
        "Performance (req/s vs A)",
        "100.00%".into(),
        cell(Spread::of(&relative_performance(c)), 2, "%"),
    );
    let sum_failed = |side: &Side| -> u64 {
        side.rounds
            .iter()
            .map(|r| r.result.totals.failures.ab_failed() + r.result.totals.failures.write)
            .sum()
    };
    row(
        &mut rows,
        "Complete requests (sum)",
        c.a.completed().to_string(),
        c.b.completed().to_string(),
    );
    row(
        &mut rows,
        "Failed requests (sum)",
        sum_failed(&c.a).to_string(),
        sum_failed(&c.b).to_string(),
    );
    row(
        &mut rows,
        "Non-2xx responses (sum)",
        c.a.non_2xx().to_string(),
        c.b.non_2xx().to_string(),
    );
    for (label, _, a, b) in cpu_lines(c) {
        row(
            &mut rows,
            &label,
            cell(Spread::of(&a), 1, ""),
            cell(Spread::of(&b), 1, ""),
        );
    }
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0) + 2;
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(1) + 3;
    let _ = writeln!(s, "{:<w0$}{:<w1$}B", "", "A");
    for (name, a, b) in rows {
        let _ = writeln!(s, "{name:<w0$}{a:<w1$}{b}");
    }
    if !c.watch_pids.is_empty() {
        s.push_str(
            "(CPU from /proc in clock ticks: rounds of a few seconds give precise figures)\n",
        );
    }
    // Fast error answers (a proxy's 502s) would otherwise read as the faster side.
    for (name, side) in [("A", &c.a), ("B", &c.b)] {
        if side.non_2xx() > 0 {
            let _ = writeln!(
                s,
                "{name}: {} of {} responses were not 2xx: its figures include them",
                side.non_2xx(),
                side.completed()
            );
        }
    }
    s
}

/// One round of a side in the `--json` document: the run's document and the CPU times.
#[derive(Serialize)]
struct RoundDoc {
    #[serde(flatten)]
    run: RunDoc,
    watched_cpu: Vec<WatchedCpuDoc>,
    loader_cpu: CpuDoc,
}

#[derive(Serialize)]
struct WatchedCpuDoc {
    pid: u32,
    #[serde(flatten)]
    cpu: CpuDoc,
}

/// CPU µs (`null`: could not be read).
#[derive(Serialize)]
struct CpuDoc {
    user_us: Option<u64>,
    system_us: Option<u64>,
}

impl CpuDoc {
    fn of(t: Option<CpuTimes>) -> CpuDoc {
        CpuDoc {
            user_us: t.map(|t| t.user.as_micros() as u64),
            system_us: t.map(|t| t.system.as_micros() as u64),
        }
    }
}

/// All rounds of a side together.
#[derive(Serialize)]
struct MergedRoundsDoc {
    complete_requests: u64,
    non_2xx_responses: u64,
    percentiles_ms: PercentilesMs,
    percentile_spectrum: Vec<SpectrumPoint>,
    histogram_total: String,
}

#[derive(Serialize)]
struct SideDoc {
    url: String,
    /// The table's figures by key: median and spread over the rounds.
    figures: BTreeMap<String, Spread>,
    rounds: Vec<RoundDoc>,
    merged: MergedRoundsDoc,
}

/// The `--json` document of a comparison.
#[derive(Serialize)]
struct CompareDoc {
    schema: &'static str,
    rounds_planned: usize,
    interrupted: bool,
    load: String,
    watch_pids: Vec<u32>,
    a: SideDoc,
    b: SideDoc,
    context: Value,
}

fn side_doc(c: &Comparison, side: &Side, is_b: bool, cpu: Vec<(String, Vec<f64>)>) -> SideDoc {
    let merged = side.merged_histogram();
    let mut figures = BTreeMap::new();
    for f in FIGURES {
        if let Some(sp) = Spread::of(&per_round(side, f.of)) {
            figures.insert(f.key.to_string(), sp.finite());
        }
    }
    if is_b {
        if let Some(sp) = Spread::of(&relative_performance(c)) {
            figures.insert("performance_vs_a_percent".into(), sp.finite());
        }
    }
    for (key, v) in cpu {
        if let Some(sp) = Spread::of(&v) {
            figures.insert(key, sp.finite());
        }
    }
    let rounds = side
        .rounds
        .iter()
        .map(|r| RoundDoc {
            run: RunDoc::of(&r.result),
            watched_cpu: c
                .watch_pids
                .iter()
                .zip(&r.watched)
                .map(|(&pid, &t)| WatchedCpuDoc {
                    pid,
                    cpu: CpuDoc::of(t),
                })
                .collect(),
            loader_cpu: CpuDoc::of(r.loader_cpu),
        })
        .collect();
    SideDoc {
        url: side.url.clone(),
        figures,
        rounds,
        merged: MergedRoundsDoc {
            complete_requests: side.completed(),
            non_2xx_responses: side.non_2xx(),
            percentiles_ms: json::percentiles_ms(&merged),
            percentile_spectrum: json::spectrum(&merged),
            histogram_total: json::encode_histogram(&merged),
        },
    }
}

/// The `--json` document of a comparison: both sides' rounds (every figure), their merged
/// histograms, the table's figures and the machine's context.
pub fn document(c: &Comparison, sys: &SysInfo) -> Value {
    let (mut cpu_a, mut cpu_b) = (Vec::new(), Vec::new());
    for (_, key, va, vb) in cpu_lines(c) {
        cpu_a.push((key.clone(), va));
        cpu_b.push((key, vb));
    }
    json::to_value(&CompareDoc {
        schema: SCHEMA,
        rounds_planned: c.rounds_planned,
        interrupted: c.interrupted,
        load: c.load.clone(),
        watch_pids: c.watch_pids.clone(),
        a: side_doc(c, &c.a, false, cpu_a),
        b: side_doc(c, &c.b, true, cpu_b),
        context: json::to_value(sys),
    })
}

/// The chart: A's merged rounds and B's merged rounds.
pub fn plot_series(c: &Comparison) -> (Histogram<u64>, Histogram<u64>) {
    (c.a.merged_histogram(), c.b.merged_histogram())
}

fn describe_load(o: &RunOptions) -> String {
    let mut parts = Vec::new();
    if let Some(n) = o.requests {
        parts.push(format!("-n {n}"));
    }
    if let Some(d) = o.deadline() {
        parts.push(format!("-d {}", shared::units::format_duration(d)));
    }
    parts.push(format!("-c {}", o.connections));
    if o.pipeline > 1 {
        parts.push(format!("--pipeline {}", o.pipeline));
    }
    if let Some(r) = o.rate {
        parts.push(format!("--rate {r}"));
    }
    parts.push(if o.close {
        "--close".into()
    } else {
        "keep-alive".into()
    });
    parts.join(" ")
}

/// Run the rounds. `log` receives one line per round (for stderr).
pub fn run_rounds(
    opts_a: &RunOptions,
    opts_b: &RunOptions,
    rounds: usize,
    watch_pids: &[u32],
    stop: Arc<ShutdownFlag>,
    mut log: impl FnMut(&str),
) -> Result<Comparison, LoadError> {
    let mut c = Comparison {
        a: Side {
            url: opts_a
                .urls
                .first()
                .map(|t| t.url.clone())
                .unwrap_or_default(),
            rounds: Vec::new(),
        },
        b: Side {
            url: opts_b
                .urls
                .first()
                .map(|t| t.url.clone())
                .unwrap_or_default(),
            rounds: Vec::new(),
        },
        watch_pids: watch_pids.to_vec(),
        rounds_planned: rounds,
        load: describe_load(opts_a),
        interrupted: false,
    };
    'rounds: for i in 0..rounds {
        for (name, opts) in [("A", opts_a), ("B", opts_b)] {
            if stop.is_set() {
                c.interrupted = true;
                break 'rounds;
            }
            let before: Vec<_> = watch_pids
                .iter()
                .map(|&p| procstat::cpu_times(p).ok())
                .collect();
            let self_before = procstat::self_cpu_times().ok();
            let result = crate::run(opts, stop.clone())?;
            let self_after = procstat::self_cpu_times().ok();
            let watched = watch_pids
                .iter()
                .zip(before)
                .map(|(&p, b)| Some(procstat::cpu_times(p).ok()?.since(&b?)))
                .collect();
            let loader_cpu = self_before.zip(self_after).map(|(b, a)| a.since(&b));
            log(&format!(
                "round {}/{} {name}: {}",
                i + 1,
                rounds,
                crate::report::summary_line(&result)
            ));
            if result.interrupted {
                c.interrupted = true;
            }
            let side = if name == "A" { &mut c.a } else { &mut c.b };
            side.rounds.push(Round {
                result,
                watched,
                loader_cpu,
            });
        }
    }
    Ok(c)
}

/// A comparison to run: A's and B's options (the same flags, one URL each; `--json`,
/// `--plot` and `-q` are A's), the rounds and the watched processes.
#[derive(Debug, Clone)]
pub struct ComparePlan {
    pub a: RunOptions,
    pub b: RunOptions,
    pub rounds: usize,
    pub watch_pids: Vec<u32>,
}

/// `loader compare`: run, print the table on stdout, write `--json`/`--plot`.
/// Returns the exit status: 0, 1 when a side completed no request, 2 for usage errors.
pub fn run_compare(plan: &ComparePlan, stop: Arc<ShutdownFlag>) -> i32 {
    let usage = |e: &dyn std::fmt::Display| {
        eprintln!("loader: {e}");
        2
    };
    let quiet = plan.a.quiet;
    let c = match run_rounds(
        &plan.a,
        &plan.b,
        plan.rounds,
        &plan.watch_pids,
        stop,
        |line| {
            if !quiet {
                eprintln!("{line}");
            }
        },
    ) {
        Ok(c) => c,
        // A runtime that would not start is not a usage error.
        Err(e @ LoadError::Runtime(_)) => {
            eprintln!("loader: {e}");
            return 1;
        }
        Err(e) => return usage(&e),
    };
    print!("{}", render(&c));
    let mut code = if c.a.completed() == 0 || c.b.completed() == 0 {
        1
    } else {
        0
    };
    let driver = c.a.rounds.first().map(|r| r.result.driver.to_string());
    if let Some(path) = &plan.a.json {
        let doc = document(&c, &SysInfo::collect(driver));
        if let Err(e) = json::write(path, &doc) {
            eprintln!("loader: --json {}: {e}", path.display());
            code = code.max(1);
        }
    }
    if let Some(path) = &plan.a.plot {
        let (ha, hb) = plot_series(&c);
        let title = format!(
            "Latency by percentile: A vs B, {} rounds each",
            c.a.rounds.len()
        );
        let series = [
            plot::Series {
                label: format!("A {}", c.a.url),
                hist: &ha,
            },
            plot::Series {
                label: format!("B {}", c.b.url),
                hist: &hb,
            },
        ];
        if let Err(e) = plot::write(path, &title, &series) {
            eprintln!("loader: --plot {}: {e}", path.display());
            code = code.max(1);
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_median_and_bounds() {
        assert_eq!(Spread::of(&[]), None);
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(Spread::of(&[f64::NAN, 5.0]).unwrap().median, 5.0);
    }

    #[test]
    fn cells() {
        let s = Spread::of(&[1.0, 2.0, 4.0]);
        assert_eq!(cell(s, 2, "%"), "2.00% (1.00-4.00)");
        assert_eq!(cell(None, 2, ""), "n/a");
    }
}
