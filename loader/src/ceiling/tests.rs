//! The search's figures, verdicts and report from given runs (no I/O): a step's run is built
//! with [`Load`], as a run of that shape would have measured it.

use super::report;
use super::run::{figures_of, loader_limited, Ceiling, Outcome, Step};
use super::search::{self, Objective, Plan, Search, Verdict};
use crate::stats::{record, Counts, Drain, Histograms, LoadMode, RunResult};
use std::time::{Duration, UNIX_EPOCH};

const P99_1S: Objective = Objective {
    quantile: 0.99,
    limit_us: 1_000_000,
};

/// What a step's run measured, in the terms that matter to the search.
#[derive(Debug, Clone)]
struct Load {
    rate: f64,
    /// The load period.
    elapsed: Duration,
    /// Attempts started in it.
    attempts: u64,
    /// Answered ones, each `latency` after its send; `status` their status.
    completed: u64,
    latency: Duration,
    status: u16,
    /// In flight at the stop, and how long their drain took.
    drain: Option<(u64, Duration)>,
    /// Each answered request's own latency, when they differ (else `latency` for all).
    latencies: Vec<Duration>,
    /// Of the attempts not answered, those that timed out (the rest were unanswered at the
    /// end of the drain).
    timeouts: u64,
    /// Sends that went out behind their schedule, their connection busy past their due time
    /// (the others waited for it: their send lateness is recorded, 0 here).
    behind: u64,
}

impl Load {
    /// A target that keeps up: every request of `-d` at `rate` answered after `latency`.
    fn kept_up(rate: f64, d: Duration, latency: Duration) -> Load {
        let n = (rate * d.as_secs_f64()).round() as u64;
        let in_flight = (rate * latency.as_secs_f64()).ceil() as u64;
        Load {
            rate,
            elapsed: d,
            attempts: n,
            completed: n,
            latency,
            status: 200,
            drain: Some((in_flight, latency)),
            latencies: Vec::new(),
            timeouts: 0,
            behind: 0,
        }
    }

    /// A target answering at most `capacity` req/s, in order, each answer at least `base`
    /// after its send, offered `rate` on schedule for `d` (free connections: the excess waits
    /// in the target's queue); every request answered, the queue's in the drain.
    fn queued(rate: f64, d: Duration, capacity: f64, base: Duration) -> Load {
        let n = (rate * d.as_secs_f64()).round() as u64;
        let mut free = 0.0f64;
        let mut latencies = Vec::new();
        let (mut in_flight, mut last) = (0, 0.0f64);
        for i in 0..n {
            let sent = i as f64 / rate;
            let answered = (sent + base.as_secs_f64()).max(free);
            free = answered + 1.0 / capacity;
            latencies.push(Duration::from_secs_f64(answered - sent));
            in_flight += u64::from(answered > d.as_secs_f64());
            last = last.max(answered);
        }
        let drain = Duration::from_secs_f64((last - d.as_secs_f64()).max(0.0));
        Load {
            rate,
            elapsed: d,
            attempts: n,
            completed: n,
            latency: base,
            status: 200,
            drain: Some((in_flight, drain)),
            latencies,
            timeouts: 0,
            behind: 0,
        }
    }

    fn result(&self) -> RunResult {
        let mut totals = Counts {
            attempts: self.attempts,
            completed: self.completed,
            ..Counts::default()
        };
        for _ in 0..self.completed {
            totals.count_status(self.status);
        }
        if !(200..300).contains(&self.status) {
            totals.non_2xx = self.completed;
        }
        totals.failures.timeout = self.timeouts;
        totals.failures.unanswered = self.attempts - self.completed - self.timeouts;
        let mut hist = Histograms::default();
        for _ in self.behind..self.attempts {
            record(&mut hist.send_lateness, 0);
        }
        for i in 0..self.completed as usize {
            let us = self.latencies.get(i).unwrap_or(&self.latency).as_micros() as u64;
            record(&mut hist.total, us);
            record(&mut hist.uncorrected, us);
        }
        RunResult {
            started: UNIX_EPOCH,
            ended: UNIX_EPOCH + self.elapsed,
            elapsed: self.elapsed,
            drain: self
                .drain
                .map(|(in_flight, took)| Drain { in_flight, took }),
            warmup: None,
            requests: Vec::new(),
            interrupted: false,
            concurrency: 50,
            pipeline: 1,
            keep_alive: true,
            http10: false,
            method: "GET".into(),
            mode: LoadMode::Rate { target: self.rate },
            workers: 1,
            driver: shared::runtime::DriverKind::Epoll,
            pinning: String::new(),
            urls: Vec::new(),
            totals,
            hist,
            connections_opened: 50,
            tls: None,
            tls_protocol: None,
            source_addresses: 0,
            server_software: None,
            accept_variable_length: false,
            sends_body: false,
            spin: false,
            shard: None,
        }
    }
}

fn step(load: &Load, obj: &Objective) -> Step {
    let result = load.result();
    let figures = figures_of(&result, load.rate, obj);
    Step {
        side: 0,
        verdict: search::judge(&figures, obj, 0),
        figures,
        generator_limited: false,
        rerun: false,
        result,
        loader_cpu: None,
        wall: load.elapsed,
        watched: Vec::new(),
    }
}

/// A one-URL search of one step at `load.rate`, done.
fn outcome(load: &Load, obj: &Objective) -> Outcome {
    let s = step(load, obj);
    let mut plan = Plan::new(load.rate);
    plan.upper = Some(load.rate);
    let mut search = Search::new(plan);
    search.record(load.rate, s.verdict.passed());
    Outcome {
        objective: *obj,
        max_errors: 0,
        precision: 0.02,
        upper: Some(load.rate),
        ceilings: vec![Ceiling {
            url: "http://127.0.0.1:1/".into(),
            from: Some(load.rate),
            probe_rate: None,
            search,
        }],
        steps: vec![s],
        watch_pids: Vec::new(),
        stopped: None,
        load: "-d 2s".into(),
        elapsed: load.elapsed,
    }
}

/// A rate below 10 req/s is offered to the thousandth and must be printed so: `{:.0}` printed
/// 3.4 as 3 in the table, the log line and the `Ceiling:` line (the JSON said 3.4).
#[test]
fn rates_below_ten_are_printed_as_offered() {
    let load = Load::kept_up(3.4, Duration::from_secs(5), Duration::from_millis(1));
    let o = outcome(&load, &P99_1S);
    assert_eq!(
        o.steps[0].verdict,
        Verdict::Pass,
        "{:?}",
        o.steps[0].figures
    );
    let text = report::render(&o);
    assert!(text.contains("from 3.4 req/s"), "{text}");
    assert!(text.contains("Ceiling: 3.4 req/s at p99 <= 1s"), "{text}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[2], "3.4", "{row}");
    let line = report::step_line(&o, &o.steps[0]);
    assert!(line.contains("3.4 req/s offered"), "{line}");
    let svg = super::chart::render(&o);
    assert!(svg.contains("ceiling 3.4 req/s"), "{svg}");
}

/// The search's rates are rounded for display and offered as printed, yet never below the
/// lowest rate a run takes: `--from 0.004` (the parser takes 0.001 up) was rounded to 0, and
/// the step failed with "--rate must be at least 0.001", a flag nobody gave.
#[test]
fn rounding_keeps_every_rate_a_run_takes() {
    assert_eq!(search::whole(0.004), 0.004);
    assert_eq!(search::whole(3.4), 3.4);
    assert_eq!(search::whole(3.456), 3.456);
    assert_eq!(search::whole(12.4), 12.0);
    for r in [0.001, 0.0014, 0.0016, 0.004, 0.5, 9.9994] {
        assert!(search::whole(r) >= crate::options::MIN_RATE, "{r}");
    }
    // A search from the floor shrinks no lower than it.
    let mut s = Search::new(Plan::new(0.004));
    while let Some(r) = s.next_rate() {
        assert!(r >= crate::options::MIN_RATE, "{r}");
        s.record(r, false);
    }
    assert_eq!(report::rate_text(0.004), "0.004");
    assert_eq!(report::rate_text(3.4), "3.4");
    assert_eq!(report::rate_text(5.0), "5");
    assert_eq!(report::rate_text(1234.0), "1234");
}

/// Every answer a 503 (an overloaded target's answer): each is an error, as wrk's "Non-2xx or
/// 3xx responses" line counts it, and the step fails on errors; the table and the JSON show
/// how many of the errors were such answers. (They counted as successes: every step passed.)
#[test]
fn answers_outside_2xx_and_3xx_are_errors() {
    let mut load = Load::kept_up(100.0, Duration::from_millis(500), Duration::from_millis(1));
    load.status = 503;
    let o = outcome(&load, &P99_1S);
    let s = &o.steps[0];
    assert_eq!(s.figures.errors, 50, "{:?}", s.figures);
    assert_eq!(s.figures.error_status, 50, "{:?}", s.figures);
    assert_eq!(s.verdict, Verdict::Errors);
    let text = report::render(&o);
    let head = text.lines().find(|l| l.starts_with("step ")).unwrap();
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap();
    let column = |name: &str| {
        let i = head
            .split("  ")
            .filter(|c| !c.is_empty())
            .position(|c| c.trim() == name);
        row.split_whitespace()
            .nth(i.unwrap_or_else(|| panic!("no {name}: {head}")))
    };
    assert_eq!(column("errors"), Some("50"), "{text}");
    assert_eq!(column("non-2xx/3xx"), Some("50"), "{text}");
    assert!(text.contains("No ceiling"), "{text}");
    let doc = report::search_doc(&o, &crate::sysinfo::SysInfo::collect(None));
    assert_eq!(doc.steps[0].errors, 50);
    assert_eq!(doc.steps[0].non_2xx_3xx, 50);
    // A redirect is an answer: 3xx counts as a success, as in wrk.
    load.status = 302;
    let o = outcome(&load, &P99_1S);
    assert_eq!(o.steps[0].figures.errors, 0);
    assert_eq!(o.steps[0].verdict, Verdict::Pass);
}

/// A slow target that keeps up: every request answered within the objective, at the offered
/// rate. The achieved rate was taken over the step and its drain, which lasts one latency, so
/// it came out at d/(d + latency) of the offered one: 100 answers at 20 req/s with 300 ms of
/// latency gave 19.04 req/s over 5.25 s, and the step failed on the rate.
#[test]
fn a_slow_target_that_keeps_up_passes_on_the_rate() {
    for (rate, d, latency) in [(20.0, 5000, 300), (40.0, 500, 100), (200.0, 500, 100)] {
        let d = Duration::from_millis(d);
        let load = Load::kept_up(rate, d, Duration::from_millis(latency));
        let s = step(&load, &P99_1S);
        assert_eq!(s.verdict, Verdict::Pass, "{rate} req/s: {:?}", s.figures);
        assert!(s.figures.achieved >= rate * 0.99, "{rate}: {:?}", s.figures);
        // Seen through its queue model too (a capacity far above the rate).
        let load = Load::queued(rate, d, rate * 100.0, Duration::from_millis(latency));
        assert_eq!(step(&load, &P99_1S).verdict, Verdict::Pass, "{rate} queued");
    }
}

/// A target that queues what it cannot serve still fails on the rate when the objective is
/// too generous for its queue to show in the latency: 230 req/s offered to 200 of capacity for
/// half a second keeps its latency under 80 ms, yet its throughput is the capacity.
#[test]
fn a_target_that_queues_fails_on_the_rate() {
    let d = Duration::from_millis(500);
    for rate in [230.0, 300.0, 400.0] {
        let load = Load::queued(rate, d, 200.0, Duration::from_micros(100));
        let s = step(&load, &P99_1S);
        assert_eq!(s.verdict, Verdict::Rate, "{rate}: {:?}", s.figures);
    }
    // With -c 20 the loader's connections fill up (20 waiting in the target's queue, 100 ms
    // at 200 req/s) and its sends wait for them: 118 of 120 requests go out, behind their
    // schedule but within the step, and the last 20 are answered in the drain, which lasts as
    // long as the mean latency: 236 req/s "achieved" from the answers alone.
    let d = Duration::from_millis(500);
    let held_back = Load {
        rate: 240.0,
        elapsed: d,
        attempts: 118,
        completed: 118,
        latency: Duration::from_millis(100),
        status: 200,
        drain: Some((20, Duration::from_millis(100))),
        latencies: Vec::new(),
        timeouts: 0,
        behind: 100,
    };
    let s = step(&held_back, &P99_1S);
    assert_eq!(s.verdict, Verdict::Rate, "{:?}", s.figures);
    assert!(s.figures.on_time < 240.0 * 0.97, "{:?}", s.figures);
    // At the capacity and a little under, it keeps up.
    for rate in [190.0, 200.0] {
        let load = Load::queued(rate, d, 200.0, Duration::from_micros(100));
        let s = step(&load, &P99_1S);
        assert_eq!(s.verdict, Verdict::Pass, "{rate}: {:?}", s.figures);
    }
}

/// The step's options as `loader ceiling` gives them: `-c`, `--timeout` and `-d`.
fn options(connections: usize, timeout: Duration, d: Duration) -> crate::RunOptions {
    let mut o = crate::RunOptions::for_urls(&["http://127.0.0.1:1/"]).unwrap();
    o.connections = connections;
    o.timeout = timeout;
    o.duration = Some(d);
    o
}

fn limited(load: &Load, o: &crate::RunOptions) -> bool {
    let s = step(load, &P99_50MS);
    loader_limited(&s.result, &s.figures, s.verdict, &P99_50MS, o)
}

const P99_50MS: Objective = Objective {
    quantile: 0.99,
    limit_us: 50_000,
};

/// A target that reads and never answers holds every connection until `--timeout`: the loader
/// sends short of the schedule because its connections are busy, the target's doing. The
/// estimate of the connections in use counted only answered requests, so it said "free" and
/// blamed the loader (GENERATOR-LIMITED, every step run three times).
#[test]
fn a_target_that_holds_its_connections_is_not_the_loaders_limit() {
    // 10 req/s on 2 connections for 1 s, 300 ms timeouts: each connection sends, waits the
    // timeout, sends again at once (behind its schedule): 3 timeouts each, 1 in flight at
    // the stop and unanswered after the drain.
    let d = Duration::from_secs(1);
    let o = options(2, Duration::from_millis(300), d);
    let stall = Load {
        rate: 10.0,
        elapsed: d,
        attempts: 8,
        completed: 0,
        latency: Duration::ZERO,
        status: 200,
        drain: Some((2, Duration::from_millis(300))),
        latencies: Vec::new(),
        timeouts: 6,
        behind: 6,
    };
    assert_eq!(step(&stall, &P99_50MS).verdict, Verdict::Errors);
    assert!(
        !limited(&stall, &o),
        "a stalling target blamed on the loader"
    );
    // A loader that sent nothing for most of the step, its connections idle: its doing.
    let idle = Load {
        attempts: 3,
        completed: 3,
        latency: Duration::from_millis(1),
        drain: Some((0, Duration::ZERO)),
        timeouts: 0,
        ..stall
    };
    assert!(limited(&idle, &o));
}

/// A step holds a whole number of requests: at 2.5 req/s, a 1 s step sends 2 or 3 depending
/// on where its edges fall in the schedule. Two is not "short of the schedule" (the loader
/// was blamed, and the step failed on the rate): the rate is judged against the requests the
/// step's schedule holds.
#[test]
fn a_step_of_few_requests_is_judged_to_the_request() {
    let d = Duration::from_secs(1);
    let o = options(2, Duration::from_secs(5), d);
    let mut load = Load::kept_up(2.5, d, Duration::from_millis(1));
    load.attempts = 2;
    load.completed = 2;
    let s = step(&load, &P99_50MS);
    assert_eq!(s.verdict, Verdict::Pass, "{:?}", s.figures);
    assert!(!limited(&load, &o), "{:?}", s.figures);
    // Two requests short is short (and the connections were free: the loader's doing).
    load.rate = 4.0;
    load.drain = Some((0, Duration::ZERO));
    let s = step(&load, &P99_50MS);
    assert_eq!(s.verdict, Verdict::Rate, "{:?}", s.figures);
    assert!(limited(&load, &o), "{:?}", s.figures);
}

/// A step that cannot hold one request at its rate (below 1/-d req/s) says nothing: the search
/// shrinks no lower than that, and gives up there.
#[test]
fn the_search_shrinks_no_lower_than_a_request_a_step() {
    let mut plan = Plan::new(10.0);
    plan.lowest = 2.0;
    let mut s = Search::new(plan);
    let mut tried = Vec::new();
    while let Some(r) = s.next_rate() {
        tried.push(r);
        s.record(r, false);
    }
    assert_eq!(tried, [10.0, 5.0, 2.5]);
    assert_eq!(s.phase(), search::Phase::Done(search::End::NothingPassed));
}

/// `--max-time` runs out before the probes (no `--from`): every URL is still in the outcome and
/// the report, as not searched. B used to be left out ("for 1 URL"), A too when its own probe
/// did not fit.
#[test]
fn urls_left_unprobed_by_max_time_are_reported() {
    let args = super::SearchOptions {
        objective: P99_1S,
        from: None,
        upper: None,
        precision: 0.02,
        max_errors: 0,
        max_time: Duration::from_nanos(1),
        watch_pids: Vec::new(),
        step: Some(Duration::from_millis(300)),
        warmup: None,
    };
    let urls = ["http://127.0.0.1:1/a", "http://127.0.0.1:1/b"];
    let sides: Vec<_> = urls
        .iter()
        .map(|u| crate::RunOptions::for_urls(&[u]).unwrap())
        .collect();
    let stop = shared::shutdown::ShutdownFlag::new();
    let out = super::run_search(&args, &sides, stop, |_| {}).unwrap();
    assert_eq!(out.ceilings.len(), 2, "{out:?}");
    assert!(out.steps.is_empty());
    let text = report::render(&out);
    assert!(text.contains("for 2 URLs"), "{text}");
    for u in urls {
        assert!(
            text.contains(&format!(
                "Not searched ({u}): --max-time ran out before its probe"
            )),
            "{text}"
        );
    }
    assert_eq!(report::exit_code(&out), 1);
}
