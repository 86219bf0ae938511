//! `loader merge FILE...`: the `--json` results of several runs (the shards of one load, or
//! any runs) combined into one report, exactly.
//!
//! Invariants:
//! - counts are summed, failures of every kind included ("Unanswered at end" too);
//!   histograms are decoded and added (latency corrected and uncorrected, connection times,
//!   send lateness, each URL's), so every percentile of the merged report is the percentile of
//!   all the runs' requests together (percentiles themselves are never averaged);
//! - the time span runs from the earliest start to the latest end of the load periods (a
//!   run's drain is not in its load period), and the request rate is computed over it;
//!   connections (ab's concurrency), workers and target rates are summed;
//! - the drain of timed runs: the requests in flight at the stop are summed (the shards stop
//!   side by side), the drain time is the longest shard's; `--spin` counts as on only when
//!   every run used it (a run that differs is warned about like any option);
//! - the report is [`crate::report::render`] of the merged [`RunResult`]: the same lines as a
//!   single run's, then one row per run and the warnings: shards started more than a second
//!   apart or ran for different times (unsynchronised clocks, no `--start-at`), options that
//!   differ, shards missing (a run given twice is refused: `counted_twice`);
//! - the files are read, checked and added one at a time ([`Merger`]): what is kept of a run
//!   once added is its row and what the warnings need ([`Added`]), so the memory is a few
//!   runs' whatever the number of files;
//! - `--json` writes the merged run as a run document (`loader-run/1`, so merged results can
//!   be merged again) with a `"merged"` object: the files, the per-run rows, the warnings.

use crate::json::{read_run, RunDoc, RunRow, MAX_CONNECTIONS, MAX_COUNT, MAX_RATE, MAX_WORKERS};
use crate::report::render;
use crate::shard::{Shard, ShardRun};
use crate::stats::{sum_within, Counts, Drain, Histograms, LoadMode, RunResult, TlsCounts};
use serde_json::{json, Map, Value};
use shared::runtime::DriverKind;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Starts further apart than this are warned about.
pub const START_SPREAD_WARN: Duration = Duration::from_secs(1);

/// One run read back from its document, its histograms included: [`Merger::add`] adds them
/// into the merged run and keeps only what it needs of the run after ([`Added`]).
#[derive(Debug, Clone)]
pub struct Part {
    /// The file it came from (as given).
    pub name: String,
    pub result: RunResult,
    /// The document's `"options"` and what else must agree between shards.
    pub options: Map<String, Value>,
}

/// A run read back from its `--json` document.
pub fn parse_run(name: &str, v: &Value) -> Result<Part, String> {
    part_of(name, &read_run(v)?)
}

fn part_of(name: &str, doc: &RunDoc) -> Result<Part, String> {
    Ok(Part {
        name: name.to_string(),
        result: doc.to_result()?,
        options: comparable_options(doc),
    })
}

/// What the merge keeps of a run once it is added: its row of the table, and what the
/// warnings and [`counted_twice`] look at. Its histograms (~1.5 MB decoded) are in the
/// merged run only, so that merging a hundred files takes the memory of a few.
#[derive(Debug, Clone)]
pub struct Added {
    /// The file it came from (as given).
    pub name: String,
    pub started: SystemTime,
    pub ended: SystemTime,
    pub elapsed: Duration,
    pub shard: Option<ShardRun>,
    pub driver: DriverKind,
    pub totals: Counts,
    /// As [`Part::options`].
    pub options: Map<String, Value>,
    /// Its row of the per-run table, but for its offset in the merged span (set by
    /// [`shard_rows`] when every run is in).
    row: RunRow,
}

impl Added {
    pub fn of(p: &Part) -> Added {
        let r = &p.result;
        let ms = |h: &hdrhistogram::Histogram<u64>, q: f64| {
            crate::figures::hist_percentile_us(h, q * 100.0) as f64 / 1000.0
        };
        Added {
            name: p.name.clone(),
            started: r.started,
            ended: r.ended,
            elapsed: r.elapsed,
            shard: r.shard,
            driver: r.driver,
            totals: r.totals.clone(),
            options: p.options.clone(),
            row: RunRow {
                file: p.name.clone(),
                shard: r
                    .shard
                    .map(|s| format!("{}/{}", s.shard.index, s.shard.count)),
                start_offset_s: 0.0,
                time_taken_s: r.elapsed.as_secs_f64(),
                complete_requests: r.totals.completed,
                failed_requests: r.totals.failures.ab_failed(),
                requests_per_second: r.rate(),
                p50_ms: ms(&r.hist.total, 0.5),
                p99_ms: ms(&r.hist.total, 0.99),
                unanswered: r.totals.failures.unanswered,
                in_flight_at_stop: r.drain.map(|d| d.in_flight),
                drain_s: r.drain.map(|d| d.took.as_secs_f64()),
                send_lateness_p99_ms: r.target_rate().map(|_| ms(&r.hist.send_lateness, 0.99)),
            },
        }
    }
}

/// What must be the same in every shard of one load: the options (less the machine's own:
/// workers, driver, pinning), the URLs, the warm-up, the shard count and the totals. Kept as
/// JSON values, so that a warning shows each as the document has it.
fn comparable_options(doc: &RunDoc) -> Map<String, Value> {
    let mut m = match crate::json::to_value(&doc.options) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for k in ["workers", "driver", "pinning"] {
        m.remove(k);
    }
    let urls: Vec<&str> = doc.urls.iter().map(|u| u.url.as_str()).collect();
    m.insert("urls".into(), json!(urls));
    m.insert("warmup_s".into(), json!(doc.warmup_s));
    m.insert(
        "spin".into(),
        json!(doc.rate.as_ref().is_some_and(|r| r.spin)),
    );
    if let Some(s) = &doc.shard {
        m.insert("shard count".into(), json!(s.count));
        m.insert("shard requests_total".into(), json!(s.requests_total));
        m.insert("shard rate_total".into(), json!(s.rate_total));
        m.insert("shard duration_s".into(), json!(s.duration_s));
    }
    m
}

/// Read and parse one file; errors name it.
pub fn read_part(file: &Path) -> Result<Part, String> {
    let name = file.display().to_string();
    let text = crate::input::read_capped_text(file, crate::input::MAX_DOCUMENT)
        .map_err(|e| format!("{name}: {e}"))?;
    let doc = crate::json::read_run_text(&text).map_err(|e| format!("{name}: {e}"))?;
    part_of(&name, &doc).map_err(|e| format!("{name}: {e}"))
}

/// Runs added one at a time into one result, each dropped once added (see [`Added`]).
#[derive(Debug, Default)]
pub struct Merger {
    merged: Option<RunResult>,
    added: Vec<Added>,
    /// The target rates summed, and whether any run had one.
    target: f64,
    rated: bool,
    /// Whether every run so far used `--spin`.
    spin: Option<bool>,
}

impl Merger {
    /// Add a run. Refused when it is one given already ([`counted_twice`]), or when a sum
    /// would pass its bound (see [`crate::json::MAX_COUNT`]: an error naming the field and the
    /// files, never a wrap); the merger is not to be used after an error.
    pub fn add(&mut self, p: Part) -> Result<(), String> {
        let added = Added::of(&p);
        if let Some(e) = counted_twice(&self.added, &added) {
            return Err(e);
        }
        let over = |field: String| {
            let files = match self.added.first() {
                None => p.name.clone(),
                Some(first) if self.added.len() == 1 => format!("{} and {}", first.name, p.name),
                Some(first) => {
                    let n = self.added.len() + 1;
                    format!("{} to {} ({n} files)", first.name, p.name)
                }
            };
            format!("'{field}' of {files} adds up beyond its bound")
        };
        let r = p.result;
        let m = self.merged.get_or_insert_with(|| empty_like(&r));
        add_scalars(m, &r).map_err(over)?;
        self.target += r.target_rate().unwrap_or(0.0);
        if self.target > MAX_RATE {
            return Err(over("rate.target".into()));
        }
        self.rated |= r.target_rate().is_some();
        self.spin = Some(self.spin.unwrap_or(true) && r.spin);
        m.hist.add(&r.hist);
        for (j, url) in r.urls.into_iter().enumerate() {
            let Some(x) = m.urls.iter_mut().find(|x| x.url == url.url) else {
                m.urls.push(url);
                continue;
            };
            let field = |f: &str| over(format!("urls[{j}].{f}"));
            x.counts
                .checked_add(&url.counts, MAX_COUNT)
                .map_err(|f| field(&format!("counts.{f}")))?;
            x.latency
                .checked_add(&url.latency, MAX_COUNT)
                .map_err(field)?;
            // Same bounds and precision (see `UrlDoc::to_result`): add cannot fail.
            let _ = x.hist.add(&url.hist);
            x.document_length = x.document_length.or(url.document_length);
            x.server_software = x.server_software.take().or(url.server_software);
        }
        self.added.push(added);
        Ok(())
    }

    /// The merged run and what was kept of each run, in the order added; `None` when none
    /// was.
    pub fn finish(self) -> Option<(RunResult, Vec<Added>)> {
        let mut m = self.merged?;
        m.elapsed = m.ended.duration_since(m.started).unwrap_or_default();
        m.pinning = format!("{} runs merged", self.added.len());
        m.spin = self.spin.unwrap_or(false);
        if self.rated {
            m.mode = LoadMode::Rate {
                target: self.target,
            };
        }
        Some((m, self.added))
    }
}

/// A run with nothing added yet: `r`'s settings, no counts, no histograms (cloned once per
/// merge: the first run's).
fn empty_like(r: &RunResult) -> RunResult {
    let mut m = r.clone();
    m.urls = Vec::new();
    m.totals = Counts::default();
    m.hist = Histograms::default();
    m.shard = None;
    m.drain = None;
    m.tls = None;
    m.concurrency = 0;
    m.workers = 0;
    m.connections_opened = 0;
    m
}

/// The runs added into one result, in order (`parts` not empty): [`Merger`] at once.
pub fn merge(parts: Vec<Part>) -> Result<(RunResult, Vec<Added>), String> {
    let mut merger = Merger::default();
    for p in parts {
        merger.add(p)?;
    }
    merger.finish().ok_or_else(|| "no run to merge".to_string())
}

/// One run's times, flags and sums added into `m`; the field of a sum beyond its bound.
fn add_scalars(m: &mut RunResult, r: &RunResult) -> Result<(), String> {
    m.started = m.started.min(r.started);
    m.ended = m.ended.max(r.ended);
    m.interrupted |= r.interrupted;
    m.sends_body |= r.sends_body;
    m.source_addresses = m.source_addresses.max(r.source_addresses);
    m.server_software = m.server_software.take().or(r.server_software.clone());
    m.tls_protocol = m.tls_protocol.take().or(r.tls_protocol.clone());
    let size = |a: usize, b: usize, max: u64, field: &str| {
        sum_within(a as u64, b as u64, max)
            .map(|s| s as usize)
            .ok_or_else(|| field.to_string())
    };
    m.concurrency = size(
        m.concurrency,
        r.concurrency,
        MAX_CONNECTIONS,
        "options.connections",
    )?;
    m.workers = size(m.workers, r.workers, MAX_WORKERS, "options.workers")?;
    m.connections_opened = sum_within(m.connections_opened, r.connections_opened, MAX_COUNT)
        .ok_or("connections_opened")?;
    if let Some(t) = &r.tls {
        m.tls
            .get_or_insert_with(TlsCounts::default)
            .checked_add(t, MAX_COUNT)?;
    }
    m.totals
        .checked_add(&r.totals, MAX_COUNT)
        .map_err(|f| format!("totals.{f}"))?;
    if let Some(d) = r.drain {
        // The shards drain side by side: in flight summed, the drain as long as the longest.
        let acc = m.drain.get_or_insert_with(Drain::default);
        acc.in_flight =
            sum_within(acc.in_flight, d.in_flight, MAX_COUNT).ok_or("drain.in_flight_at_stop")?;
        acc.took = acc.took.max(d.took);
    }
    Ok(())
}

/// From the earliest start to the latest end.
fn span(parts: &[Added]) -> Duration {
    let start = parts.iter().map(|p| p.started).min();
    let end = parts.iter().map(|p| p.ended).max();
    match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).unwrap_or_default(),
        _ => Duration::ZERO,
    }
}

/// What the runs disagree on: clocks (starts, run times), options, shards.
pub fn warnings(parts: &[Added]) -> Vec<String> {
    let mut w = Vec::new();
    let secs = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let starts: Vec<f64> = parts.iter().map(|p| secs(p.started)).collect();
    let spread = starts.iter().cloned().fold(f64::MIN, f64::max)
        - starts.iter().cloned().fold(f64::MAX, f64::min);
    if spread > START_SPREAD_WARN.as_secs_f64() {
        w.push(format!(
            "the runs started {spread:.3} s apart: their rates did not add up over the whole \
             span (align them with --start-at; are the machines' clocks synchronised?)"
        ));
    }
    let times: Vec<f64> = parts.iter().map(|p| p.elapsed.as_secs_f64()).collect();
    let (lo, hi) = (
        times.iter().cloned().fold(f64::MAX, f64::min),
        times.iter().cloned().fold(f64::MIN, f64::max),
    );
    if hi - lo > 0.1 * hi && hi - lo > 0.1 {
        w.push(format!(
            "the runs lasted from {lo:.3} s to {hi:.3} s: the merged rate is over {:.3} s",
            span(parts).as_secs_f64()
        ));
    }
    let base = &parts[0];
    let mut keys: Vec<&String> = parts.iter().flat_map(|p| p.options.keys()).collect();
    keys.sort();
    keys.dedup();
    // A key one run lacks (a run without --shard) is not compared: that is warned about apart.
    for k in keys {
        let Some(a) = base.options.get(k) else {
            continue;
        };
        if let Some((p, b)) = parts[1..]
            .iter()
            .find_map(|p| Some((p, p.options.get(k)?)).filter(|(_, b)| *b != a))
        {
            w.push(format!(
                "options differ: {k} is {a} in {} but {b} in {}",
                base.name, p.name
            ));
        }
    }
    w.extend(shard_warnings(parts));
    let drivers: Vec<DriverKind> = parts.iter().map(|p| p.driver).collect();
    if drivers.iter().any(|d| *d != drivers[0]) {
        w.push("the runs used different I/O drivers".into());
    }
    w
}

/// Shards missing, or mixed with unsharded runs (a shard given twice is refused before:
/// [`counted_twice`]).
fn shard_warnings(parts: &[Added]) -> Vec<String> {
    let mut w = Vec::new();
    let shards: Vec<Shard> = parts
        .iter()
        .filter_map(|p| p.shard.map(|s| s.shard))
        .collect();
    if shards.is_empty() {
        return w;
    }
    if shards.len() < parts.len() {
        w.push(format!(
            "{} of the {} runs were not run with --shard",
            parts.len() - shards.len(),
            parts.len()
        ));
    }
    let count = shards.iter().map(|s| s.count).max().unwrap_or(0);
    // Sorted indices, not a table per shard: the work and the words grow with the files
    // given, never with the count a document claims.
    let mut given: Vec<u32> = shards.iter().map(|s| s.index).collect();
    given.sort_unstable();
    given.dedup();
    let mut gaps = Vec::new();
    let mut next = 1;
    for &i in given.iter().chain(std::iter::once(&(count + 1))) {
        if i > next {
            gaps.push((next, i - 1));
        }
        next = next.max(i + 1);
    }
    if !gaps.is_empty() {
        let missing: u32 = gaps.iter().map(|(a, b)| b - a + 1).sum();
        w.push(format!(
            "shards missing: {} ({missing} of {count}: the merged figures are not the whole \
             load)",
            describe_gaps(&gaps, count)
        ));
    }
    w
}

/// The shards missing, as `2/9, 3/9, 5/9 to 9/9`: runs of three or more as ranges, and no more
/// than [`GAPS_SHOWN`] of them.
fn describe_gaps(gaps: &[(u32, u32)], count: u32) -> String {
    let mut items: Vec<String> = Vec::new();
    for &(a, b) in gaps.iter().take(GAPS_SHOWN) {
        if b - a >= 2 {
            items.push(format!("{a}/{count} to {b}/{count}"));
        } else {
            items.extend((a..=b).map(|i| format!("{i}/{count}")));
        }
    }
    if gaps.len() > GAPS_SHOWN {
        items.push(format!("and {} more runs", gaps.len() - GAPS_SHOWN));
    }
    items.join(", ")
}

/// The runs of missing shards a warning names.
const GAPS_SHOWN: usize = 8;

/// One row per run: where it sits in the merged span and its own figures.
pub fn shard_rows(parts: &[Added], merged: &RunResult) -> Vec<RunRow> {
    parts
        .iter()
        .map(|p| {
            let offset = p.started.duration_since(merged.started).unwrap_or_default();
            RunRow {
                start_offset_s: offset.as_secs_f64(),
                ..p.row.clone()
            }
        })
        .collect()
}

/// A finite figure for the table (what a JSON `null` of a NaN read as).
fn fin(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// The per-run table and the warnings, after the merged report.
pub fn render_rows(rows: &[RunRow], warnings: &[String]) -> String {
    let mut s = String::from("Per-shard breakdown:\n");
    let _ = writeln!(
        s,
        "  {:>7} {:>9} {:>9} {:>10} {:>7} {:>10} {:>9} {:>9}  File",
        "Shard", "Start s", "Time s", "Complete", "Failed", "Req/s", "p50 ms", "p99 ms"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "  {:>7} {:>9.3} {:>9.3} {:>10} {:>7} {:>10.2} {:>9.3} {:>9.3}  {}",
            r.shard.as_deref().unwrap_or("-"),
            fin(r.start_offset_s),
            fin(r.time_taken_s),
            r.complete_requests,
            r.failed_requests,
            fin(r.requests_per_second),
            fin(r.p50_ms),
            fin(r.p99_ms),
            r.file
        );
    }
    for w in warnings {
        let _ = writeln!(s, "WARNING: {w}");
    }
    s
}

/// Whether `p` is a run given already: a shard given twice (the same file, or two runs of
/// one shard), or the same run without `--shard` (the same file, or a copy: the same start
/// to the nanosecond, the same end and the same counts, which two runs never have). Merged,
/// it would be counted twice. The message names the files.
pub fn counted_twice(before: &[Added], p: &Added) -> Option<String> {
    let shard = p.shard.map(|s| s.shard);
    for a in before {
        if let Some(s) = shard.filter(|s| a.shard.is_some_and(|a| a.shard == *s)) {
            return Some(format!(
                "shard {}/{} is given twice ({} and {}): it would be counted twice",
                s.index, s.count, a.name, p.name
            ));
        }
        let same = shard.is_none()
            && a.shard.is_none()
            && a.started == p.started
            && a.ended == p.ended
            && a.totals == p.totals;
        if same {
            return Some(format!(
                "the same run is given twice ({} and {}: the same start to the nanosecond, \
                 the same end and counts): it would be counted twice",
                a.name, p.name
            ));
        }
    }
    None
}

/// `loader merge`: 0 done, 1 no request succeeded in any run, 2 unreadable input or a run
/// given twice.
pub fn run_merge(files: &[PathBuf], json: Option<&Path>) -> i32 {
    // One file at a time: read, checked, added, dropped.
    let mut merger = Merger::default();
    for f in files {
        if let Err(e) = read_part(f).and_then(|p| merger.add(p)) {
            eprintln!("loader: {e}");
            return 2;
        }
    }
    let Some((merged, parts)) = merger.finish() else {
        eprintln!("loader: merge: no file given");
        return 2;
    };
    let warns = warnings(&parts);
    let rows = shard_rows(&parts, &merged);
    for w in &warns {
        eprintln!("loader merge: warning: {w}");
    }
    let text = render(&merged) + "\n" + &render_rows(&rows, &warns);
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_all(text.as_bytes()) {
        eprintln!("loader: writing the report: {e}");
        return 1;
    }
    if let Some(path) = json {
        let mut doc = RunDoc::of(&merged);
        doc.schema = Some(crate::json::SCHEMA.into());
        doc.merged = Some(crate::json::MergedDoc {
            files: parts.iter().map(|p| p.name.clone()).collect(),
            runs: rows,
            warnings: warns,
        });
        if let Err(e) = crate::json::write(path, &doc) {
            eprintln!("loader: --json {}: {e}", path.display());
            return 1;
        }
    }
    if merged.nothing_succeeded() {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::ShardRun;
    use crate::stats::{new_url_histogram, record, LatencySummary, UrlResult};

    /// A run of `n` requests of `latency_us` each, `c` connections, started at `start_s`.
    fn run(
        shard: Option<(u32, u32)>,
        c: usize,
        start_s: u64,
        secs: u64,
        n: u64,
        latency_us: u64,
    ) -> Value {
        doc(&result(shard, c, start_s, secs, n, latency_us))
    }

    fn doc(r: &RunResult) -> Value {
        let mut v = crate::json::run_value(r);
        v["schema"] = json!(crate::json::SCHEMA);
        v
    }

    fn result(
        shard: Option<(u32, u32)>,
        c: usize,
        start_s: u64,
        secs: u64,
        n: u64,
        latency_us: u64,
    ) -> RunResult {
        let mut totals = Counts {
            attempts: n,
            completed: n,
            ..Counts::default()
        };
        totals.count_status(200);
        totals.status[0].1 = n;
        let mut hist = Histograms::default();
        for _ in 0..n {
            record(&mut hist.total, latency_us);
        }
        let started = UNIX_EPOCH + Duration::from_secs(start_s);
        RunResult {
            started,
            ended: started + Duration::from_secs(secs),
            elapsed: Duration::from_secs(secs),
            drain: None,
            warmup: None,
            requests: Vec::new(),
            interrupted: false,
            concurrency: c,
            pipeline: 1,
            keep_alive: true,
            http10: false,
            method: "GET".into(),
            mode: LoadMode::ClosedLoop,
            workers: 1,
            driver: DriverKind::Epoll,
            pinning: String::new(),
            urls: Vec::new(),
            totals,
            hist,
            connections_opened: c as u64,
            tls: None,
            tls_protocol: None,
            source_addresses: 0,
            server_software: None,
            accept_variable_length: false,
            sends_body: false,
            spin: false,
            shard: shard.map(|(index, count)| ShardRun {
                shard: Shard { index, count },
                requests_total: None,
                rate_total: None,
                duration: Some(Duration::from_secs(secs)),
            }),
        }
    }

    fn part(name: &str, v: &Value) -> Part {
        parse_run(name, v).unwrap()
    }

    fn merged(parts: &[Part]) -> RunResult {
        merge(parts.to_vec()).unwrap().0
    }

    fn added(parts: &[Part]) -> Vec<Added> {
        parts.iter().map(Added::of).collect()
    }

    #[test]
    fn documents_read_back_and_add_up_exactly() {
        let a = part("a", &run(Some((1, 2)), 4, 1000, 2, 300, 100));
        let b = part("b", &run(Some((2, 2)), 4, 1000, 2, 100, 900));
        assert_eq!(a.result.totals.completed, 300);
        assert_eq!(a.result.shard.unwrap().shard, Shard { index: 1, count: 2 });
        let m = merged(&[a.clone(), b.clone()]);
        assert_eq!(m.totals.completed, 400);
        assert_eq!(m.totals.status, vec![(200, 400)]);
        assert_eq!(m.concurrency, 8);
        assert_eq!(m.elapsed, Duration::from_secs(2));
        // p75 of all 400 is 100 us; p80 is 900 us: no average of the parts' percentiles.
        assert_eq!(m.hist.total.value_at_percentile(75.0), 100);
        assert_eq!(m.hist.total.value_at_percentile(80.0), 900);
        assert_eq!(warnings(&added(&[a, b])), Vec::<String>::new());
    }

    #[test]
    fn clocks_options_and_shards_that_disagree_are_warned_about() {
        let a = part("a.json", &run(Some((1, 3)), 4, 1000, 2, 10, 100));
        let b = part("b.json", &run(Some((3, 3)), 8, 1003, 2, 10, 100));
        let m = merged(&[a.clone(), b.clone()]);
        assert_eq!(
            m.elapsed,
            Duration::from_secs(5),
            "earliest start to latest end"
        );
        let w = warnings(&added(&[a, b]));
        let has = |s: &str| w.iter().any(|x| x.contains(s));
        assert!(has("the runs started 3.000 s apart"), "{w:?}");
        assert!(
            has("options differ: connections is 4 in a.json but 8 in b.json"),
            "{w:?}"
        );
        assert!(has("shards missing: 2/3 (1 of 3"), "{w:?}");
        let c = part("c", &run(None, 4, 1000, 8, 10, 100));
        let d = part("d", &run(Some((2, 2)), 4, 1000, 2, 10, 100));
        let w = warnings(&added(&[c, d]));
        assert!(
            w.iter()
                .any(|x| x.contains("lasted from 2.000 s to 8.000 s")),
            "{w:?}"
        );
        assert!(
            w.iter()
                .any(|x| x.contains("1 of the 2 runs were not run with --shard")),
            "{w:?}"
        );
        assert!(parse_run("x", &json!({"schema": "other"})).is_err());
    }

    /// A `--rate -d` run with one URL: `n` requests of `latency_us`, sends `late_us` late,
    /// `in_flight` at the stop drained in `drain_ms`, `unanswered` of them unanswered.
    fn timed(n: u64, latency_us: u64, late_us: u64, drain: (u64, u64, u64), spin: bool) -> Value {
        let (in_flight, drain_ms, unanswered) = drain;
        let mut r = result(None, 4, 1000, 2, n, latency_us);
        r.mode = LoadMode::Rate { target: 100.0 };
        r.spin = spin;
        r.drain = Some(Drain {
            in_flight,
            took: Duration::from_millis(drain_ms),
        });
        r.totals.attempts += unanswered;
        r.totals.failures.unanswered = unanswered;
        let mut hist = new_url_histogram();
        let mut latency = LatencySummary::default();
        for _ in 0..n {
            record(&mut r.hist.send_lateness, late_us);
            record(&mut hist, latency_us);
            latency.record(latency_us);
        }
        r.urls.push(UrlResult {
            url: "http://127.0.0.1:1/a".into(),
            host: "127.0.0.1".into(),
            port: 1,
            path: "/a".into(),
            document_length: Some(64),
            server_software: None,
            counts: r.totals.clone(),
            latency,
            hist,
        });
        doc(&r)
    }

    #[test]
    fn drains_lateness_and_url_histograms_merge_exactly() {
        let a = part("a", &timed(300, 1_000, 50, (3, 40, 1), true));
        let b = part("b", &timed(100, 9_000, 700, (5, 90, 0), false));
        assert_eq!(
            a.result.drain,
            Some(Drain {
                in_flight: 3,
                took: Duration::from_millis(40)
            })
        );
        let m = merged(&[a.clone(), b.clone()]);
        // In flight summed, the longest drain, the unanswered summed with the other failures.
        assert_eq!(
            m.drain,
            Some(Drain {
                in_flight: 8,
                took: Duration::from_millis(90)
            })
        );
        assert_eq!(m.totals.failures.unanswered, 1);
        assert_eq!(m.totals.failures.ab_failed(), 1);
        assert_eq!(m.totals.attempts, 401);
        // Lateness and the URL's histogram: all 400 values, p75 from the first run, p80 from
        // the second (an average of the parts' percentiles would be neither).
        let late = &m.hist.send_lateness;
        assert_eq!(late.len(), 400);
        assert_eq!(late.value_at_percentile(75.0), late.highest_equivalent(50));
        assert_eq!(late.value_at_percentile(80.0), late.highest_equivalent(700));
        assert_eq!(m.urls.len(), 1);
        let u = &m.urls[0].hist;
        assert_eq!(u.len(), 400);
        assert_eq!(u.value_at_percentile(75.0), u.highest_equivalent(1_000));
        assert_eq!(u.value_at_percentile(80.0), u.highest_equivalent(9_000));
        assert_eq!(m.urls[0].latency.count, 400);
        // --spin on one run only: not the merged pacing, and warned about.
        assert!(!m.spin);
        let w = warnings(&added(&[a, b]));
        assert!(
            w.iter()
                .any(|x| x == "options differ: spin is true in a but false in b"),
            "{w:?}"
        );
        // A URL without its histogram is refused, naming the URL.
        let mut v = timed(1, 1, 1, (0, 0, 0), false);
        v["urls"][0].as_object_mut().unwrap().remove("histogram");
        let e = parse_run("x", &v).unwrap_err();
        assert!(
            e.contains("URL http://127.0.0.1:1/a: no 'histogram'"),
            "{e}"
        );
    }

    #[test]
    fn a_shard_out_of_its_bounds_is_refused_naming_the_field() {
        for (index, count, field) in [
            (1, u32::MAX, "shard.count"),
            (1, 100_000_000, "shard.count"),
            (7, 3, "shard.index"),
            (0, 3, "shard.index"),
            (1, 0, "shard.count"),
        ] {
            let mut v = run(Some((1, 2)), 4, 1000, 2, 10, 100);
            v["shard"]["index"] = json!(index);
            v["shard"]["count"] = json!(count);
            let e = parse_run("x", &v).unwrap_err();
            assert!(e.contains(field), "{index}/{count}: {e}");
        }
        let mut v = run(Some((1, 2)), 4, 1000, 2, 10, 100);
        v["shard"]["count"] = json!(crate::shard::MAX_SHARDS);
        assert!(parse_run("x", &v).is_ok(), "the CLI's largest count reads");
    }

    #[test]
    fn a_time_beyond_the_clock_is_refused_naming_the_field() {
        for key in ["started_unix", "ended_unix"] {
            for t in [1e19, 9.2e18, 1e12, -1.0] {
                let mut v = run(None, 4, 1000, 2, 10, 100);
                v[key] = json!(t);
                let e = parse_run("x", &v).unwrap_err();
                assert!(e.contains(key), "{key} {t}: {e}");
            }
        }
    }

    /// `docs` written to files of their own (named after `tag`), and merged: the exit code.
    fn merge_files(tag: &str, docs: &[Value]) -> i32 {
        let dir = std::env::temp_dir().join(format!("loader-merge-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files: Vec<PathBuf> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let p = dir.join(format!("{i}.json"));
                std::fs::write(&p, d.to_string()).unwrap();
                p
            })
            .collect();
        let code = run_merge(&files, None);
        let _ = std::fs::remove_dir_all(&dir);
        code
    }

    #[test]
    fn figures_beyond_their_bounds_are_refused_naming_the_field() {
        let rated = || timed(10, 1_000, 50, (3, 40, 1), false);
        let cases: Vec<(&str, Value)> = vec![
            ("totals.completed", json!(u64::MAX)),
            ("totals.failures.connect", json!(u64::MAX)),
            ("totals.status", json!(u64::MAX)),
            ("options.connections", json!(u64::MAX)),
            ("options.workers", json!(u64::MAX)),
            ("options.pipeline", json!(u64::MAX)),
            ("connections_opened", json!(u64::MAX)),
            ("rate.target", json!(-100.0)),
            ("rate.target", json!(1e308)),
            ("drain.drain_s", json!(1e19)),
            ("drain.drain_s", json!(-1.0)),
            ("drain.in_flight_at_stop", json!(u64::MAX)),
            ("warmup_s", json!(1e300)),
            ("warmup_s", json!(-1.0)),
            ("shard.rate_total", json!(-5.0)),
            ("shard.duration_s", json!(-5.0)),
            ("shard.requests_total", json!(u64::MAX)),
            ("urls[0].counts.completed", json!(u64::MAX)),
            ("urls[0].latency_us.sum", json!(u64::MAX)),
        ];
        for (field, value) in cases {
            let mut v = rated();
            v["shard"] = json!({"index": 1, "count": 1});
            let mut at = &mut v;
            let path: Vec<&str> = field.split('.').collect();
            for (i, k) in path.iter().enumerate() {
                let k = k.trim_end_matches("[0]");
                at = &mut at[k];
                if path[i].ends_with("[0]") {
                    at = &mut at[0];
                }
            }
            if field == "totals.status" {
                *at = json!({"200": value});
            } else {
                *at = value.clone();
            }
            let e = parse_run("x", &v).unwrap_err();
            assert!(e.contains(&format!("'{field}'")), "{field} = {value}: {e}");
        }
    }

    #[test]
    fn sums_beyond_their_bounds_are_refused() {
        // Each within the bound; together beyond it. Before, sums wrapped: u64::MAX complete
        // requests and 333 more printed "Complete requests: 332".
        let big = |key: &str, n: Value| {
            let mut v = run(None, 4, 1000, 2, 10, 100);
            let (a, b) = key.split_once('.').unwrap();
            v[a][b] = n;
            v
        };
        let half = json!(crate::json::MAX_COUNT / 2 + 1);
        assert_eq!(
            merge_files(
                "sum-count",
                &[
                    big("totals.completed", half.clone()),
                    big("totals.completed", half)
                ]
            ),
            2
        );
        let conns = json!(crate::json::MAX_CONNECTIONS / 2 + 1);
        assert_eq!(
            merge_files(
                "sum-conn",
                &[
                    big("options.connections", conns.clone()),
                    big("options.connections", conns)
                ]
            ),
            2
        );
        let e = merge(vec![
            part(
                "a.json",
                &big("totals.completed", json!(crate::json::MAX_COUNT)),
            ),
            part("b.json", &run(None, 4, 1000, 2, 333, 100)),
        ])
        .unwrap_err();
        assert!(
            e.contains("a.json") && e.contains("b.json") && e.contains("totals.completed"),
            "{e}"
        );
    }

    #[test]
    fn the_same_run_given_twice_is_refused() {
        let u = run(None, 4, 1000, 2, 300, 100);
        let twice = |a: &str, va: &Value, b: &str, vb: &Value| {
            counted_twice(&added(&[part(a, va)]), &Added::of(&part(b, vb)))
        };
        let e = twice("u1.json", &u, "u1-copy.json", &u).unwrap();
        assert!(e.contains("u1.json") && e.contains("u1-copy.json"), "{e}");
        assert!(e.contains("counted twice"), "{e}");
        // Two runs of one load, started together: not the same run.
        let mut other = u.clone();
        other["totals"]["completed"] = json!(299);
        assert_eq!(twice("a", &u, "b", &other), None);
        let mut later = u.clone();
        later["started_unix"] = json!(1_000.000_001);
        assert_eq!(twice("a", &u, "b", &later), None);
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named() {
        for (object, key, value, path) in [
            ("totals", "completed", json!(1.5), "'totals.completed'"),
            (
                "options",
                "connections",
                json!("many"),
                "'options.connections'",
            ),
            (
                "totals",
                "failures",
                json!({"connect": -1}),
                "'totals.failures.connect'",
            ),
        ] {
            let mut v = run(None, 4, 1000, 2, 10, 100);
            v[object][key] = value;
            let e = parse_run("x", &v).unwrap_err();
            assert!(e.contains(path), "{e}");
        }
    }

    #[test]
    fn missing_shards_are_summarised_not_listed() {
        let count = crate::shard::MAX_SHARDS;
        let parts = [
            part("a", &run(Some((1, count)), 4, 1000, 2, 10, 100)),
            part("b", &run(Some((5, count)), 4, 1000, 2, 10, 100)),
        ];
        let w = warnings(&added(&parts));
        let missing = w.iter().find(|x| x.contains("shards missing")).unwrap();
        assert!(missing.len() < 200, "{missing}");
        assert!(
            missing.contains("shards missing: 2/100000 to 4/100000, 6/100000 to 100000/100000"),
            "{missing}"
        );
        assert!(missing.contains("99998 of 100000"), "{missing}");
        // Every other shard of 100: the first runs named, the rest counted.
        let parts: Vec<Part> = (1..=100)
            .step_by(2)
            .map(|i| part("p", &run(Some((i, 100)), 4, 1000, 2, 10, 100)))
            .collect();
        let w = warnings(&added(&parts));
        let missing = w.iter().find(|x| x.contains("shards missing")).unwrap();
        assert!(
            missing.contains("2/100, 4/100, 6/100, 8/100, 10/100, 12/100, 14/100, 16/100, and 42 more runs (50 of 100"),
            "{missing}"
        );
    }

    #[test]
    fn a_document_reads_back_as_it_was_written() {
        for v in [
            run(Some((2, 3)), 4, 1000, 2, 300, 100),
            timed(300, 1_000, 50, (3, 40, 1), true),
        ] {
            let back = crate::json::read_run(&v).unwrap();
            assert_eq!(crate::json::to_value(&back), v);
            let again = crate::json::run_value(&back.to_result().unwrap());
            let mut again_v = again.clone();
            again_v["schema"] = json!(crate::json::SCHEMA);
            assert_eq!(
                again_v, v,
                "written, read and written again: the same document"
            );
        }
    }
}
