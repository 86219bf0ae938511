//! The table of every step, the `Ceiling:` lines, the exit status and `--json`.

use super::run::{Outcome, Step, Stopped};
use super::search::End;
use crate::json;
use crate::sysinfo::SysInfo;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Write as _;

/// The value of the `"schema"` key of a ceiling document.
pub const SCHEMA: &str = "loader-ceiling/1";

/// A rate as the search offers it ([`super::search::whole`]): whole from 10 up, to the
/// thousandth below, without trailing zeros.
pub fn rate_text(r: f64) -> String {
    if r >= 10.0 {
        return format!("{r:.0}");
    }
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

fn pct(h: &hdrhistogram::Histogram<u64>, q: f64) -> u64 {
    crate::figures::hist_percentile_us(h, q * 100.0)
}

fn side_name(o: &Outcome, side: usize) -> &'static str {
    match (o.ceilings.len(), side) {
        (1, _) => "",
        (_, 0) => "A",
        _ => "B",
    }
}

/// The objective as written on the command line: "p99 <= 10ms".
pub fn objective_text(o: &Outcome) -> String {
    let limit = std::time::Duration::from_micros(o.objective.limit_us);
    format!(
        "{} <= {}",
        o.objective.label(),
        shared::units::format_duration(limit)
    )
}

/// One step as a log line (stderr, while the search runs).
pub fn step_line(o: &Outcome, s: &Step) -> String {
    let f = &s.figures;
    format!(
        "step {}{}: {} req/s offered, {} achieved, {} sent on time, {} {} ms, {} errors{}: {}{}",
        o.steps.len() + 1,
        match side_name(o, s.side) {
            "" => String::new(),
            n => format!(" {n}"),
        },
        rate_text(f.offered),
        rate_text(f.achieved),
        rate_text(f.on_time),
        o.objective.label(),
        ms(f.latency_us),
        f.errors,
        match f.error_status {
            0 => String::new(),
            n => format!(" ({n} non-2xx/3xx)"),
        },
        s.verdict.label(),
        if s.generator_limited {
            " (generator-limited)"
        } else {
            ""
        }
    )
}

/// The table's rows: header first.
fn rows(o: &Outcome) -> Vec<Vec<String>> {
    let mut head: Vec<String> = [
        "step",
        "url",
        "offered",
        "achieved",
        "on time",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "late p99 ms",
        "errors",
        "non-2xx/3xx",
        "loader CPU",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for pid in &o.watch_pids {
        head.push(format!("pid {pid} us/req"));
    }
    head.push("verdict".into());
    let mut rows = vec![head];
    for (i, s) in o.steps.iter().enumerate() {
        let h = &s.result.hist.total;
        let mut r = vec![
            (i + 1).to_string(),
            match side_name(o, s.side) {
                "" => "-".into(),
                n => n.into(),
            },
            rate_text(s.figures.offered),
            rate_text(s.figures.achieved),
            rate_text(s.figures.on_time),
            ms(pct(h, 0.5)),
            ms(pct(h, 0.99)),
            ms(pct(h, 0.999)),
            ms(s.figures.lateness_p99_us),
            s.figures.errors.to_string(),
            s.figures.error_status.to_string(),
            s.loader_cpu_percent()
                .map_or("n/a".into(), |p| format!("{p:.0}%")),
        ];
        for k in 0..o.watch_pids.len() {
            r.push(
                s.watched_us_per_request(k)
                    .map_or("n/a".into(), |v| format!("{v:.1}")),
            );
        }
        r.push(format!(
            "{}{}",
            s.verdict.label(),
            match (s.generator_limited, s.rerun) {
                (true, true) => " (gen-limited: run again)",
                (true, false) => " (gen-limited)",
                _ => "",
            }
        ));
        rows.push(r);
    }
    rows
}

/// The `Ceiling:` line of one URL, or its "No ceiling" line.
pub fn ceiling_line(o: &Outcome, side: usize) -> String {
    let c = &o.ceilings[side];
    let obj = objective_text(o);
    let cut_short = match o.stopped {
        Some(Stopped::MaxTime) => "--max-time ran out",
        _ => "interrupted",
    };
    if c.end() == Some(End::NotSearched) {
        return format!(
            "Not searched ({}): {cut_short} before its probe ended",
            c.url
        );
    }
    let Some(rate) = c.rate() else {
        let lowest = match c.search.lowest_failure() {
            Some(r) => format!(": every step failed, down to {} req/s", rate_text(r)),
            None if o.steps_of(side).next().is_none() => {
                format!(": {cut_short} before its first step")
            }
            None => String::new(),
        };
        let limited = if o.generator_limited(side) {
            "; GENERATOR-LIMITED: the loader may have been the limit"
        } else {
            ""
        };
        return format!("No ceiling at {obj} ({}){lowest}{limited}", c.url);
    };
    let mut line = format!("Ceiling: {} req/s at {obj} ({})", rate_text(rate), c.url);
    let note = match (c.end(), o.stopped) {
        (Some(End::Upper), _) => Some("at least: every step up to --upper passed".to_string()),
        (Some(_), _) => c
            .search
            .lowest_failure()
            .map(|f| format!("{} req/s failed", rate_text(f))),
        (None, Some(Stopped::MaxTime)) => {
            Some("at least: --max-time stopped the search before the precision".into())
        }
        (None, _) => Some("at least: interrupted before the precision".into()),
    };
    if let Some(n) = note {
        let _ = write!(line, "; {n}");
    }
    if o.generator_limited(side) {
        line.push_str(
            "; GENERATOR-LIMITED: the loader sent late (lateness p99 over a tenth of the \
             objective) or short of the schedule, it may have been the limit",
        );
    }
    line
}

/// The human output: the table, the stop reason, the `Ceiling:` lines, B as % of A.
pub fn render(o: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Ceiling search: {} for {} URL{}, each step {}, precision {:.1}%{}",
        objective_text(o),
        o.ceilings.len(),
        if o.ceilings.len() == 1 {
            ""
        } else {
            "s (A B A B ...)"
        },
        o.load,
        o.precision * 100.0,
        if o.max_errors > 0 {
            format!(", up to {} errors a step", o.max_errors)
        } else {
            String::new()
        }
    );
    for (i, c) in o.ceilings.iter().enumerate() {
        let probe = c.probe_rate.map_or(String::new(), |p| {
            format!(" (closed-loop probe {} req/s / 4)", rate_text(p))
        });
        let start = c.from.map_or("not searched".into(), |f| {
            format!("from {} req/s{probe}", rate_text(f))
        });
        let _ = writeln!(
            s,
            "{}{}: {start}",
            match side_name(o, i) {
                "" => String::new(),
                n => format!("{n} "),
            },
            c.url,
        );
    }
    s.push_str("Latency corrected for coordinated omission; late = the loader's send lateness\n\n");
    let rows = rows(o);
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (v, w))| {
                if c + 1 == r.len() {
                    v.clone()
                } else {
                    format!("{v:>w$}")
                }
            })
            .collect();
        let _ = writeln!(s, "{}", cells.join("  "));
    }
    s.push('\n');
    match o.stopped {
        Some(Stopped::MaxTime) => {
            let _ = writeln!(
                s,
                "Stopped at --max-time after {:.1}s",
                o.elapsed.as_secs_f64()
            );
        }
        Some(Stopped::Interrupted) => s.push_str("Interrupted (Ctrl-C): what was found so far\n"),
        None => {}
    }
    for i in 0..o.ceilings.len() {
        let _ = writeln!(s, "{}", ceiling_line(o, i));
    }
    if let Some(p) = b_of_a(o) {
        let _ = writeln!(s, "B's ceiling is {p:.1}% of A's");
    }
    s
}

/// B's ceiling as % of A's (both found).
pub fn b_of_a(o: &Outcome) -> Option<f64> {
    let a = o.ceilings.first()?.rate()?;
    let b = o.ceilings.get(1)?.rate()?;
    (a > 0.0).then(|| b / a * 100.0)
}

/// 0 when every URL has a ceiling the loader did not limit, else 1.
pub fn exit_code(o: &Outcome) -> i32 {
    let ok = !o.ceilings.is_empty()
        && (0..o.ceilings.len()).all(|i| o.ceilings[i].rate().is_some() && !o.generator_limited(i));
    if ok {
        0
    } else {
        1
    }
}

/// The objective in the `--json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveDoc {
    pub percentile: f64,
    pub limit_ms: f64,
    pub max_errors: u64,
}

/// One URL's search in the `--json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CeilingDoc {
    pub url: String,
    /// The first rate; `null` when the URL was not searched.
    pub from: Option<f64>,
    /// False when Ctrl-C or `--max-time` came before the URL's probe ended.
    pub searched: bool,
    pub probe_rate: Option<f64>,
    pub ceiling: Option<f64>,
    pub lowest_failure: Option<f64>,
    /// How the search ended ("converged", ...), `null` while it had not.
    pub end: Option<String>,
    pub generator_limited: bool,
}

/// CPU µs of the loader during a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuDoc {
    pub user_us: u64,
    pub system_us: u64,
}

/// A watched process's CPU during a step (`null`: it could not be read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchedCpuDoc {
    pub pid: u32,
    pub user_us: Option<u64>,
    pub system_us: Option<u64>,
    pub us_per_request: Option<f64>,
}

/// One step in the `--json` document: its figures, verdict and the whole run's document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepDoc {
    pub url: String,
    /// "A" or "B" with two URLs, "" with one.
    pub side: String,
    pub offered: f64,
    pub achieved: f64,
    /// Sends that went out on schedule, per second of the step.
    pub sent_on_time: f64,
    pub objective_latency_ms: f64,
    /// Failed requests, answers outside 2xx and 3xx included.
    pub errors: u64,
    /// Of the errors, the answers outside 2xx and 3xx.
    pub non_2xx_3xx: u64,
    pub send_lateness_p99_ms: f64,
    pub verdict: String,
    pub generator_limited: bool,
    pub rerun: bool,
    pub loader_cpu_percent: Option<f64>,
    pub loader_cpu: Option<CpuDoc>,
    pub wall_s: f64,
    pub watched_cpu: Vec<WatchedCpuDoc>,
    /// Every figure of the step's run, its histograms included.
    pub run: json::RunDoc,
}

/// The `--json` document of a search (`"schema": "loader-ceiling/1"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchDoc {
    pub schema: String,
    pub objective: ObjectiveDoc,
    pub precision: f64,
    pub upper: Option<f64>,
    pub load: String,
    pub elapsed_s: f64,
    /// "max-time" or "interrupted"; `null` when the search ran to its end.
    pub stopped: Option<String>,
    pub watch_pids: Vec<u32>,
    pub urls: Vec<CeilingDoc>,
    pub b_percent_of_a: Option<f64>,
    pub steps: Vec<StepDoc>,
    pub exit_code: i32,
    /// The machine's context ([`SysInfo`]); not read back.
    pub context: Value,
}

fn step_doc(o: &Outcome, s: &Step) -> StepDoc {
    let f = &s.figures;
    StepDoc {
        url: o.ceilings[s.side].url.clone(),
        side: side_name(o, s.side).into(),
        offered: f.offered,
        achieved: f.achieved,
        sent_on_time: f.on_time,
        objective_latency_ms: f.latency_us as f64 / 1000.0,
        errors: f.errors,
        non_2xx_3xx: f.error_status,
        send_lateness_p99_ms: f.lateness_p99_us as f64 / 1000.0,
        verdict: format!("{:?}", s.verdict).to_lowercase(),
        generator_limited: s.generator_limited,
        rerun: s.rerun,
        loader_cpu_percent: s.loader_cpu_percent(),
        loader_cpu: s.loader_cpu.map(|t| CpuDoc {
            user_us: t.user.as_micros() as u64,
            system_us: t.system.as_micros() as u64,
        }),
        wall_s: s.wall.as_secs_f64(),
        watched_cpu: o
            .watch_pids
            .iter()
            .enumerate()
            .map(|(i, &pid)| {
                let t = s.watched.get(i).copied().flatten();
                WatchedCpuDoc {
                    pid,
                    user_us: t.map(|t| t.user.as_micros() as u64),
                    system_us: t.map(|t| t.system.as_micros() as u64),
                    us_per_request: s.watched_us_per_request(i),
                }
            })
            .collect(),
        run: json::RunDoc::of(&s.result),
    }
}

/// The `--json` document: the objective, every step with its histograms, each URL's ceiling.
pub fn search_doc(o: &Outcome, sys: &SysInfo) -> SearchDoc {
    SearchDoc {
        schema: SCHEMA.into(),
        objective: ObjectiveDoc {
            percentile: o.objective.quantile * 100.0,
            limit_ms: o.objective.limit_us as f64 / 1000.0,
            max_errors: o.max_errors,
        },
        precision: o.precision,
        upper: o.upper,
        load: o.load.clone(),
        elapsed_s: o.elapsed.as_secs_f64(),
        stopped: o.stopped.map(|s| {
            match s {
                Stopped::MaxTime => "max-time",
                Stopped::Interrupted => "interrupted",
            }
            .into()
        }),
        watch_pids: o.watch_pids.clone(),
        urls: o
            .ceilings
            .iter()
            .enumerate()
            .map(|(i, c)| CeilingDoc {
                url: c.url.clone(),
                from: c.from,
                searched: c.end() != Some(End::NotSearched),
                probe_rate: c.probe_rate,
                ceiling: c.rate(),
                lowest_failure: c.search.lowest_failure(),
                end: c.end().map(|e| format!("{e:?}").to_lowercase()),
                generator_limited: o.generator_limited(i),
            })
            .collect(),
        b_percent_of_a: b_of_a(o),
        steps: o.steps.iter().map(|s| step_doc(o, s)).collect(),
        exit_code: exit_code(o),
        context: json::to_value(sys),
    }
}

#[cfg(test)]
mod tests {
    /// A step's percentiles are the report's (ab's and wrk's rank): of 100 requests taking 1
    /// to 100 ms, the 99% one is the 100th. HdrHistogram's own rank (ceil(n·p/100)) gave the
    /// 99th, so a step's p99 in the ceiling's table was one request below the same run's
    /// report.
    #[test]
    fn a_steps_percentile_is_the_reports() {
        let mut h = crate::stats::new_url_histogram();
        for ms in 1..=100u64 {
            h.record(ms * 1000).unwrap();
        }
        assert_eq!(super::pct(&h, 0.99), h.highest_equivalent(100_000));
        assert_eq!(super::pct(&h, 0.5), h.highest_equivalent(51_000));
    }
}
