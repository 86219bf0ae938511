//! Running the search: the probe, the steps (A B A B in lockstep), `--max-time` and Ctrl-C.

use super::search::{self, End, Objective, Plan, Search, StepFigures, Verdict};
use super::{SearchOptions, DEFAULT_STEP, PROBE};
use crate::procstat::{self, CpuTimes};
use crate::{LoadError, RunOptions, RunResult};
use shared::shutdown::ShutdownFlag;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Times in a row a failing generator-limited step is run again before its verdict counts.
pub const RERUNS: u32 = 2;

/// One step of one URL.
#[derive(Debug, Clone)]
pub struct Step {
    /// Index of the URL (0: A, 1: B).
    pub side: usize,
    pub figures: StepFigures,
    pub verdict: Verdict,
    pub generator_limited: bool,
    /// A failing generator-limited step that was run again: its verdict did not count.
    pub rerun: bool,
    pub result: RunResult,
    /// The loader's CPU time over the whole step (warm-up and drain included), and that
    /// step's wall time.
    pub loader_cpu: Option<CpuTimes>,
    pub wall: Duration,
    /// Each watched process's CPU time over the whole step.
    pub watched: Vec<Option<CpuTimes>>,
}

impl Step {
    /// The loader's CPU use over the step, in % of one core.
    pub fn loader_cpu_percent(&self) -> Option<f64> {
        let cpu = self.loader_cpu?;
        let wall = self.wall.as_secs_f64();
        (wall > 0.0).then(|| cpu.total().as_secs_f64() / wall * 100.0)
    }

    /// Requests the target answered during the whole step: the measured ones plus the
    /// warm-up's, estimated at the achieved rate (the warm-up runs at the step's rate).
    fn served_estimate(&self) -> f64 {
        let r = &self.result;
        let warm = r.warmup.unwrap_or_default().as_secs_f64();
        r.totals.completed as f64 + self.figures.achieved * warm
    }

    /// A watched process's CPU µs (user + kernel) per request answered in the step.
    pub fn watched_us_per_request(&self, i: usize) -> Option<f64> {
        let cpu = self.watched.get(i).copied().flatten()?;
        let n = self.served_estimate();
        (n > 0.0).then(|| cpu.total().as_secs_f64() * 1e6 / n)
    }
}

/// Why the search stopped before every URL's search was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    MaxTime,
    Interrupted,
}

/// What the search found for one URL.
#[derive(Debug, Clone)]
pub struct Ceiling {
    pub url: String,
    /// The first rate (`--from` or the probe's / 4); `None`: not searched (Ctrl-C or
    /// `--max-time` came before its probe ended).
    pub from: Option<f64>,
    /// The closed-loop probe's rate, when it ran.
    pub probe_rate: Option<f64>,
    pub search: Search,
}

impl Ceiling {
    /// The highest passing rate.
    pub fn rate(&self) -> Option<f64> {
        self.search.ceiling()
    }

    pub fn end(&self) -> Option<End> {
        match self.search.phase() {
            search::Phase::Done(e) => Some(e),
            _ => None,
        }
    }
}

/// Everything a search measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub objective: Objective,
    pub max_errors: u64,
    pub precision: f64,
    pub upper: Option<f64>,
    pub ceilings: Vec<Ceiling>,
    /// In the order run.
    pub steps: Vec<Step>,
    pub watch_pids: Vec<u32>,
    pub stopped: Option<Stopped>,
    /// "-d 5s after 1s of warm-up, -c 50, keep-alive".
    pub load: String,
    pub elapsed: Duration,
}

impl Outcome {
    /// The steps of URL `side`, in the order run.
    pub fn steps_of(&self, side: usize) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(move |s| s.side == side)
    }

    /// Whether URL `side`'s ceiling rests on a generator-limited step: the failure that bounds
    /// it (after its reruns) was one, so the loader, not the target, may have failed it. A
    /// generator-limited step that passed is no doubt: the target did at least that well.
    pub fn generator_limited(&self, side: usize) -> bool {
        let bound = self.ceilings[side].search.lowest_failure();
        self.steps_of(side).any(|s| {
            !s.rerun
                && s.generator_limited
                && !s.verdict.passed()
                && Some(s.figures.offered) == bound
        })
    }
}

/// The step's options: the load flags with the rate, the duration and the warm-up set.
fn step_options(base: &RunOptions, rate: f64, d: Duration, warmup: Duration) -> RunOptions {
    let mut o = base.clone();
    o.rate = Some(rate);
    o.duration = Some(d);
    o.requests = None;
    o.warmup = (!warmup.is_zero()).then_some(warmup);
    o.quiet = true;
    o.json = None;
    o.plot = None;
    o
}

/// The throughput the target delivered: every response of the step over the time they took
/// to come, the load period plus the part of the drain beyond the step's mean latency (time
/// from send to answer).
///
/// The answers of a target that keeps up come one latency after their sends: the first one
/// latency into the step, the last one latency after its stop, so they span the step's length
/// and the drain (about one latency) is not time the target took. (Dividing by the load period
/// plus the whole drain gave d/(d + latency) of the offered rate: a target answering 20 req/s
/// in 300 ms each failed 5 s steps.) A target that queues what it cannot serve answers its
/// queue during the drain at its own pace: the drain then outlasts the mean latency by half
/// the queue (the queue grew through the step, the mean latency by half as much), and its
/// figure comes out between its pace and the offered rate, failing from about 6% over its
/// pace. (Counting only the answers received before the stop would do without the drain but
/// is too coarse for short steps: one request in flight at the stop is 5% of a 20-request
/// step.)
pub fn achieved_in_step(r: &RunResult) -> f64 {
    let drain = r.drain.map_or(0.0, |d| d.took.as_secs_f64());
    let s = r.elapsed.as_secs_f64() + (drain - mean_latency_s(r)).max(0.0);
    if s <= 0.0 {
        return 0.0;
    }
    r.totals.completed as f64 / s
}

/// The answered requests' mean time from send to answer, s.
fn mean_latency_s(r: &RunResult) -> f64 {
    let h = &r.hist.uncorrected;
    if h.is_empty() {
        0.0
    } else {
        h.mean() / 1e6
    }
}

/// Requests in flight on average over the step, from what was outstanding: each answered one
/// for its latency, each timed-out one for `--timeout` (a target that reads and never answers
/// holds its connection that long, and has no latency to count), over the load period; and at
/// least those still in flight at the stop. (From the answered ones alone, a stalling target's
/// connections looked free, and its failure was put down to the loader.)
pub fn in_flight_mean(r: &RunResult, timeout: Duration) -> f64 {
    let s = r.elapsed.as_secs_f64();
    let at_stop = r.drain.map_or(0, |d| d.in_flight) as f64;
    if s <= 0.0 {
        return at_stop;
    }
    let answered = r.totals.completed as f64 * mean_latency_s(r);
    let timed_out = r.totals.failures.timeout as f64 * timeout.as_secs_f64();
    ((answered + timed_out) / s).max(at_stop)
}

/// Sends that went out on schedule, per second of the load period: those that waited for
/// their due time, which are the ones with a send lateness recorded. A send whose connection
/// was still busy at its due time goes out behind schedule, the wait charged to the target;
/// when the target holds every connection, the loader holds its sends back, and the answers
/// alone do not show it: the requests waiting on the connections at the stop are answered in
/// the drain, which then lasts as long as their latency, and counting them comes out at the
/// offered rate (-c 20 against 200 req/s of capacity, 240 offered: 236 "achieved").
pub fn sent_on_time(r: &RunResult) -> f64 {
    let s = r.elapsed.as_secs_f64();
    if s <= 0.0 {
        return 0.0;
    }
    r.hist.send_lateness.len() as f64 / s
}

/// Answers outside 2xx and 3xx: what wrk reports as "Non-2xx or 3xx responses". A target
/// that sheds load answers 503 at once; counted as successes, such answers passed every step.
pub fn error_status(r: &RunResult) -> u64 {
    r.totals
        .status
        .iter()
        .filter(|(code, _)| !(200..400).contains(code))
        .map(|(_, n)| n)
        .sum()
}

/// The figures the verdict reads.
pub fn figures_of(r: &RunResult, offered: f64, obj: &Objective) -> StepFigures {
    let late = &r.hist.send_lateness;
    let error_status = error_status(r);
    StepFigures {
        offered,
        achieved: achieved_in_step(r),
        load_s: r.elapsed.as_secs_f64(),
        on_time: sent_on_time(r),
        latency_us: crate::figures::hist_percentile_us(&r.hist.total, obj.quantile * 100.0),
        errors: r.totals.failures.total() + error_status,
        error_status,
        lateness_p99_us: crate::figures::hist_percentile_us(late, 99.0),
    }
}

/// Whether the loader, not the target, may have been the step's limit: it sent late, or
/// short of the schedule while its connections were free, or late enough to lose the rate.
pub fn loader_limited(
    r: &RunResult,
    f: &StepFigures,
    verdict: Verdict,
    obj: &Objective,
    opts: &RunOptions,
) -> bool {
    let s = r.elapsed.as_secs_f64();
    let sent = if s > 0.0 {
        r.totals.attempts as f64 / s
    } else {
        0.0
    };
    let in_flight = in_flight_mean(r, opts.timeout);
    let conns = opts.connections * opts.pipeline;
    let step_length = opts.duration.unwrap_or_default();
    search::generator_limited(f.lateness_p99_us, obj)
        || search::sent_short(sent, f.offered, s, in_flight, conns)
        || (verdict == Verdict::Rate && search::late_for_the_rate(f.lateness_p99_us, step_length))
}

/// Run one step and judge it. `None`: Ctrl-C cut it short (no verdict).
fn run_step(
    opts: &RunOptions,
    side: usize,
    rate: f64,
    args: &SearchOptions,
    obj: &Objective,
    stop: &Arc<ShutdownFlag>,
) -> Result<Option<Step>, LoadError> {
    let before: Vec<_> = args
        .watch_pids
        .iter()
        .map(|&p| procstat::cpu_times(p).ok())
        .collect();
    let self_before = procstat::self_cpu_times().ok();
    let t0 = Instant::now();
    let result = crate::run(opts, stop.clone())?;
    let wall = t0.elapsed();
    let self_after = procstat::self_cpu_times().ok();
    if result.interrupted {
        return Ok(None);
    }
    let watched = args
        .watch_pids
        .iter()
        .zip(before)
        .map(|(&p, b)| Some(procstat::cpu_times(p).ok()?.since(&b?)))
        .collect();
    let figures = figures_of(&result, rate, obj);
    let verdict = search::judge(&figures, obj, args.max_errors);
    Ok(Some(Step {
        side,
        verdict,
        generator_limited: loader_limited(&result, &figures, verdict, obj, opts),
        rerun: false,
        figures,
        result,
        loader_cpu: self_before.zip(self_after).map(|(b, a)| a.since(&b)),
        wall,
        watched,
    }))
}

/// The closed-loop probe: its rate, `None` when Ctrl-C cut it short, or an error when nothing
/// came back.
fn probe(
    base: &RunOptions,
    d: Duration,
    stop: &Arc<ShutdownFlag>,
) -> Result<Option<f64>, LoadError> {
    let mut o = step_options(base, 1.0, d, Duration::ZERO);
    o.rate = None;
    o.spin = false;
    let r = crate::run(&o, stop.clone())?;
    let rate = r.rate();
    if r.interrupted {
        Ok(None)
    } else if rate > 0.0 {
        Ok(Some(rate))
    } else {
        Err(LoadError::Invalid(format!(
            "the closed-loop probe of {} got no response ({} failed): give --from to search anyway",
            base.urls[0].url,
            r.totals.failures.total()
        )))
    }
}

/// "-d 5s after 1s of warm-up, -c 50, keep-alive".
fn describe(o: &RunOptions, d: Duration, warmup: Duration) -> String {
    let f = shared::units::format_duration;
    format!(
        "-d {} after {} of warm-up, -c {}, {}{}",
        f(d),
        f(warmup),
        o.connections,
        if o.close { "--close" } else { "keep-alive" },
        if o.spin { ", --spin" } else { "" }
    )
}

/// Each URL's search, from `--from` or its closed-loop probe. When Ctrl-C or `--max-time`
/// (`over_time(the probe's longest)`) stops the probes, the URLs left are reported as not
/// searched rather than left out.
fn start_searches(
    args: &SearchOptions,
    sides: &[RunOptions],
    stop: &Arc<ShutdownFlag>,
    over_time: impl Fn(Duration) -> bool,
    log: &mut impl FnMut(&str),
) -> Result<(Vec<Ceiling>, Option<Stopped>), LoadError> {
    let d = args.step.unwrap_or(DEFAULT_STEP);
    // Below one request a step, a step sends nothing and says nothing about the target (the
    // command line refuses such a --from; the probe's rate and the shrinks stop there).
    let lowest = (1000.0 / d.as_secs_f64()).ceil() / 1000.0;
    let mut ceilings = Vec::new();
    let mut stopped = None;
    for o in sides {
        let url = o.urls[0].url.clone();
        let (from, probe_rate) = match (args.from, stopped) {
            (_, Some(_)) => (None, None),
            (Some(f), None) => (Some(f), None),
            (None, None) if over_time(super::probe_bound(d, o.timeout)) => {
                stopped = Some(Stopped::MaxTime);
                (None, None)
            }
            (None, None) => match probe(o, PROBE.min(d), stop)? {
                None => {
                    stopped = Some(Stopped::Interrupted);
                    (None, None)
                }
                Some(r) => {
                    log(&format!(
                        "probe {url}: {} req/s closed loop",
                        super::report::rate_text(r)
                    ));
                    (Some(search::whole(r / 4.0).max(lowest)), Some(r))
                }
            },
        };
        let search = match from {
            None => Search::not_searched(),
            Some(from) => {
                let mut plan = Plan::new(from);
                plan.upper = args.upper;
                plan.precision = args.precision;
                plan.lowest = lowest.min(from);
                Search::new(plan)
            }
        };
        ceilings.push(Ceiling {
            url,
            from,
            probe_rate,
            search,
        });
    }
    Ok((ceilings, stopped))
}

/// Run the search for every side (one `RunOptions` per URL). `log` gets one line per step.
pub fn run_search(
    args: &SearchOptions,
    sides: &[RunOptions],
    stop: Arc<ShutdownFlag>,
    mut log: impl FnMut(&str),
) -> Result<Outcome, LoadError> {
    let start = Instant::now();
    let obj = args.objective;
    let d = args.step.unwrap_or(DEFAULT_STEP);
    let warmup = super::warmup_of(d, args.warmup);
    let mut out = Outcome {
        objective: obj,
        max_errors: args.max_errors,
        precision: args.precision,
        upper: args.upper,
        ceilings: Vec::new(),
        steps: Vec::new(),
        watch_pids: args.watch_pids.clone(),
        stopped: None,
        load: describe(&sides[0], d, warmup),
        elapsed: Duration::ZERO,
    };
    let over_time = |needed: Duration| start.elapsed() + needed > args.max_time;
    let (ceilings, stopped) = start_searches(args, sides, &stop, over_time, &mut log)?;
    out.ceilings = ceilings;
    if stopped.is_some() {
        out.stopped = stopped;
        out.elapsed = start.elapsed();
        return Ok(out);
    }
    let step_bound = super::step_bound(d, warmup, sides[0].timeout);
    let mut reruns = vec![0u32; sides.len()];
    'search: loop {
        let mut ran = false;
        for (side, o) in sides.iter().enumerate() {
            let Some(rate) = out.ceilings[side].search.next_rate() else {
                continue;
            };
            if stop.is_set() {
                out.stopped = Some(Stopped::Interrupted);
                break 'search;
            }
            if over_time(step_bound) {
                out.stopped = Some(Stopped::MaxTime);
                break 'search;
            }
            let opts = step_options(o, rate, d, warmup);
            let Some(mut step) = run_step(&opts, side, rate, args, &obj, &stop)? else {
                out.stopped = Some(Stopped::Interrupted);
                break 'search;
            };
            log(&super::report::step_line(&out, &step));
            // A failure the loader may have caused says nothing about the target: the same
            // rate runs again (it comes back next round), up to RERUNS times in a row.
            let failed_by_loader = step.generator_limited && !step.verdict.passed();
            if failed_by_loader && reruns[side] < RERUNS {
                reruns[side] += 1;
                step.rerun = true;
            } else {
                reruns[side] = 0;
                out.ceilings[side]
                    .search
                    .record(rate, step.verdict.passed());
            }
            out.steps.push(step);
            ran = true;
        }
        if !ran {
            break;
        }
    }
    out.elapsed = start.elapsed();
    Ok(out)
}
