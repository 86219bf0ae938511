//! Adding up what the workers measured into the run's [`RunResult`], after their threads
//! joined (histograms merged there, as wrk2 does): never on a worker thread.

use super::WorkerDone;
use crate::plan::Request;
use crate::stats::{
    Counts, Drain, Histograms, LoadMode, RunResult, TlsCounts, UrlResult, UrlStats,
};
use crate::RunOptions;
use shared::runtime::DriverKind;
use std::time::{Instant, SystemTime};

/// What the workers measured, summed.
#[derive(Debug)]
pub(super) struct Summed {
    /// Indexed like the plan.
    pub(super) urls: Vec<UrlStats>,
    pub(super) hist: Histograms,
    pub(super) connections_opened: u64,
    pub(super) tls: TlsCounts,
    /// Which source addresses any worker used.
    pub(super) sources_used: Vec<bool>,
    /// When the last worker ended (not before the measurement started).
    pub(super) ended: Instant,
    /// The workers' drains: in flight summed, the longest time.
    pub(super) drain: Option<Drain>,
    /// ab's `-g`: every worker's kept request times.
    pub(super) requests: Vec<crate::stats::RequestTimes>,
}

/// Add up the workers' figures (histograms merged after the threads joined, as wrk2 does).
pub(super) fn sum_workers(
    done: &[WorkerDone],
    n_urls: usize,
    n_sources: usize,
    measure_start: Instant,
) -> Summed {
    let mut s = Summed {
        urls: vec![UrlStats::default(); n_urls],
        hist: Histograms::default(),
        connections_opened: 0,
        tls: TlsCounts::default(),
        sources_used: vec![false; n_sources],
        ended: measure_start,
        drain: None,
        requests: Vec::new(),
    };
    for d in done {
        for (acc, u) in s.urls.iter_mut().zip(&d.stats.urls) {
            acc.add(u);
        }
        if let Some(dd) = d.drain {
            let acc = s.drain.get_or_insert_with(Drain::default);
            acc.in_flight += dd.in_flight;
            acc.took = acc.took.max(dd.took);
        }
        s.hist.add(&d.stats.hist);
        s.connections_opened += d.stats.connections_opened;
        s.tls.add(&d.stats.tls);
        for (a, &b) in s.sources_used.iter_mut().zip(&d.stats.sources_used) {
            *a |= b;
        }
        s.ended = s.ended.max(d.ended);
        if let Some(r) = &d.stats.requests {
            s.requests.extend_from_slice(r);
        }
    }
    s
}

/// What the result says about the run itself, besides the figures.
pub(super) struct RunFacts {
    pub(super) measure_start: Instant,
    /// Wall-clock start of the measurement (after the warm-up).
    pub(super) started: SystemTime,
    pub(super) driver: DriverKind,
    pub(super) workers: usize,
    pub(super) pinning: String,
    pub(super) interrupted: bool,
}

/// The run's result: the summed figures per URL and in total, with what was asked for.
pub(super) fn merge(
    opts: &RunOptions,
    plan: &[Request],
    summed: Summed,
    facts: RunFacts,
) -> RunResult {
    let Summed {
        urls,
        mut hist,
        connections_opened,
        tls,
        sources_used,
        ended,
        drain,
        requests,
    } = summed;
    if opts.rate.is_none() {
        hist.uncorrected = hist.total.clone();
        hist.sums.uncorrected = hist.sums.total;
    }
    let elapsed = ended.saturating_duration_since(facts.measure_start);
    let mut totals = Counts::default();
    let url_results: Vec<UrlResult> = plan
        .iter()
        .zip(urls)
        .map(|(r, u)| {
            totals.add(&u.counts);
            url_result(r, u)
        })
        .collect();
    RunResult {
        started: facts.started,
        ended: facts.started + elapsed,
        elapsed,
        drain,
        warmup: opts.warmup,
        requests,
        interrupted: facts.interrupted,
        concurrency: opts.connections,
        pipeline: opts.pipeline,
        keep_alive: !opts.close,
        http10: opts.http10,
        method: opts.method.clone(),
        mode: match opts.rate {
            Some(target) => LoadMode::Rate { target },
            None => LoadMode::ClosedLoop,
        },
        workers: facts.workers,
        driver: facts.driver,
        pinning: facts.pinning,
        server_software: url_results.iter().find_map(|u| u.server_software.clone()),
        urls: url_results,
        totals,
        hist,
        connections_opened,
        tls: opts.urls.iter().any(|u| u.tls).then_some(tls),
        tls_protocol: plan.iter().find_map(|r| r.tls_session.get().cloned()),
        source_addresses: sources_used.iter().filter(|&&b| b).count(),
        accept_variable_length: opts.accept_variable_length,
        sends_body: opts.body.is_some(),
        spin: opts.spin,
        shard: opts.shard,
    }
}

/// One URL's line of the result.
fn url_result(r: &Request, u: UrlStats) -> UrlResult {
    let hist = u.histogram();
    let mut counts = u.counts;
    counts.status.sort_unstable();
    UrlResult {
        url: r.target.url.clone(),
        host: r.target.host.clone(),
        port: r.target.port,
        path: r.target.path.clone(),
        document_length: r.document_length.get().copied(),
        server_software: r.server.get().cloned(),
        hist,
        counts,
        latency: u.latency,
    }
}
