//! The search, sans-IO: the verdict on one step from its figures, and the next rate to try
//! from the verdicts so far. Plain functions and a small state machine, tested with given
//! figures; the I/O (running the steps) is in [`super::run`].

/// The latency objective: a percentile of the corrected latency and its limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Objective {
    /// 0.5, 0.99 or 0.999.
    pub quantile: f64,
    /// The limit, in µs.
    pub limit_us: u64,
}

impl Objective {
    /// "p99", "p99.9", "p50".
    pub fn label(&self) -> String {
        let p = self.quantile * 100.0;
        if (p - p.round()).abs() < 1e-9 {
            format!("p{}", p.round() as u64)
        } else {
            format!("p{p}")
        }
    }
}

/// What one step measured, as the verdict needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepFigures {
    /// The rate asked for (req/s).
    pub offered: f64,
    /// The target's throughput over the step ([`super::run::achieved_in_step`]), req/s.
    pub achieved: f64,
    /// The load period, s: the step's schedule holds a whole number of requests in it.
    pub load_s: f64,
    /// Sends that went out on schedule, per second of the load period.
    pub on_time: f64,
    /// The objective's percentile of the corrected latency, µs.
    pub latency_us: u64,
    /// Failed requests: attempts without a complete answer, and answers outside 2xx and 3xx.
    pub errors: u64,
    /// Of the errors, the answers outside 2xx and 3xx.
    pub error_status: u64,
    /// Send lateness p99, µs (0 when no send waited).
    pub lateness_p99_us: u64,
}

/// Below this share of the offered rate, the step failed to keep up.
pub const MIN_ACHIEVED: f64 = 0.97;
/// A step whose send lateness p99 exceeds this share of the objective is generator-limited.
pub const LATENESS_SHARE: f64 = 0.1;

/// A step's verdict, the first failure found in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// The percentile exceeded the objective.
    Latency,
    /// More failed requests than `--max-errors`.
    Errors,
    /// The achieved rate, or the rate of the sends that went out on schedule, was below
    /// [`MIN_ACHIEVED`] of the offered one.
    Rate,
}

impl Verdict {
    pub fn passed(self) -> bool {
        self == Verdict::Pass
    }

    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Latency => "FAIL latency",
            Verdict::Errors => "FAIL errors",
            Verdict::Rate => "FAIL rate",
        }
    }
}

/// The verdict on one step.
pub fn judge(f: &StepFigures, obj: &Objective, max_errors: u64) -> Verdict {
    if f.latency_us > obj.limit_us {
        Verdict::Latency
    } else if f.errors > max_errors {
        Verdict::Errors
    } else if short(f.achieved, f.offered, f.load_s) || short(f.on_time, f.offered, f.load_s) {
        Verdict::Rate
    } else {
        Verdict::Pass
    }
}

/// The rate a load period of `secs` offers at `offered` req/s: its schedule holds a whole
/// number of requests, at least floor(offered × secs), one more or not depending on where the
/// period's edges fall (at 2.5 req/s a 1 s step sends 2 or 3, and 2 is on schedule).
pub fn schedulable(offered: f64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return offered;
    }
    // The product of a rate and a length that hold a whole number of requests may come out a
    // hair under it.
    ((offered * secs + 1e-6).floor() / secs).min(offered)
}

/// Whether `actual` req/s over a load period of `secs` is below [`MIN_ACHIEVED`] of the rate
/// the period's schedule offers ([`schedulable`]).
pub fn short(actual: f64, offered: f64, secs: f64) -> bool {
    actual < schedulable(offered, secs) * MIN_ACHIEVED
}

/// Whether the loader itself may have been the limit: its send lateness p99 exceeds a tenth
/// of the objective, so the corrected latency carries a noticeable part of its own delay.
pub fn generator_limited(lateness_p99_us: u64, obj: &Objective) -> bool {
    lateness_p99_us as f64 > obj.limit_us as f64 * LATENESS_SHARE
}

/// Whether a step that failed on the achieved rate may have failed by the loader's delay:
/// its send lateness p99 exceeds the share of the step the rate criterion allows (3%). A
/// loader that much late loses that much of the step by itself, whatever the objective.
pub fn late_for_the_rate(lateness_p99_us: u64, step: std::time::Duration) -> bool {
    lateness_p99_us as f64 > step.as_micros() as f64 * (1.0 - MIN_ACHIEVED)
}

/// Whether the loader sent short of the schedule for a reason of its own: fewer than
/// [`MIN_ACHIEVED`] of the requests of the step's schedule went out over its `secs` (see
/// [`short`]), yet the connections were mostly free (requests in flight on
/// average below half the connections, see [`super::run::in_flight_mean`]), so no busy
/// connection held the sends back. A loader descheduled past the end of a step sends nothing
/// and records no lateness: this catches it.
pub fn sent_short(
    sent_rate: f64,
    offered: f64,
    secs: f64,
    in_flight_mean: f64,
    connections: usize,
) -> bool {
    short(sent_rate, offered, secs) && in_flight_mean < connections as f64 / 2.0
}

/// How the search moves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// The first rate.
    pub from: f64,
    /// The highest rate to try.
    pub upper: Option<f64>,
    /// Bisection stops when the failing rate is within this share above the passing one.
    pub precision: f64,
    /// Geometric growth factor until the first failure (and the shrink factor below `from`
    /// when the first step fails).
    pub growth: f64,
    /// Halvings below `from` tried when nothing passes before giving up.
    pub max_shrinks: u32,
    /// The lowest rate a step may run at: below one request a step, a step says nothing.
    pub lowest: f64,
}

impl Plan {
    pub fn new(from: f64) -> Plan {
        Plan {
            from,
            upper: None,
            precision: 0.02,
            growth: 2.0,
            max_shrinks: 3,
            lowest: 0.0,
        }
    }
}

/// Where a search stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// Growing from `from` until a step fails.
    Growing,
    /// The first step failed: shrinking until one passes.
    Shrinking { shrinks: u32 },
    /// Between the highest pass and the lowest fail.
    Bisecting,
    /// Finished: the ceiling is `passed` (none when nothing passed).
    Done(End),
}

/// Why a search finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The bracket is within the precision.
    Precise,
    /// Every step up to `--upper` passed: the ceiling is at least the upper bound.
    Upper,
    /// Nothing passed down to the lowest rate tried.
    NothingPassed,
    /// No step ran: Ctrl-C or `--max-time` came before the URL's probe ended.
    NotSearched,
}

/// A rate as the search offers it: whole requests per second from 10 up, thousandths below
/// (the unit `--rate` takes), never below [`crate::options::MIN_RATE`] (a rate rounded to 0
/// would fail the step's own validation). The report prints it in full, so the rate in the
/// `Ceiling:` line is the one offered.
pub fn whole(rate: f64) -> f64 {
    if rate >= 10.0 {
        rate.round()
    } else {
        ((rate * 1000.0).round() / 1000.0).max(crate::options::MIN_RATE)
    }
}

/// One URL's search.
#[derive(Debug, Clone)]
pub struct Search {
    plan: Plan,
    phase: Phase,
    next: f64,
    /// Highest passing rate, lowest failing rate.
    passed: Option<f64>,
    failed: Option<f64>,
}

impl Search {
    pub fn new(plan: Plan) -> Search {
        let first = whole(match plan.upper {
            Some(u) => plan.from.min(u),
            None => plan.from,
        });
        Search {
            plan,
            phase: Phase::Growing,
            next: first,
            passed: None,
            failed: None,
        }
    }

    /// A search that never starts (its URL's probe did not end).
    pub fn not_searched() -> Search {
        Search {
            plan: Plan::new(0.0),
            phase: Phase::Done(End::NotSearched),
            next: 0.0,
            passed: None,
            failed: None,
        }
    }

    /// The rate of the next step; `None` when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        match self.phase {
            Phase::Done(_) => None,
            _ => Some(self.next),
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The highest rate that passed (the ceiling, once done).
    pub fn ceiling(&self) -> Option<f64> {
        self.passed
    }

    /// The lowest rate that failed.
    pub fn lowest_failure(&self) -> Option<f64> {
        self.failed
    }

    /// Record the verdict on the step at `rate` (the one [`Search::next_rate`] gave).
    pub fn record(&mut self, rate: f64, passed: bool) {
        if passed {
            self.passed = Some(self.passed.map_or(rate, |p| p.max(rate)));
        } else {
            self.failed = Some(self.failed.map_or(rate, |f| f.min(rate)));
        }
        self.phase = match (self.phase, passed) {
            (Phase::Done(e), _) => Phase::Done(e),
            (Phase::Growing, true) => match self.plan.upper {
                Some(u) if rate >= u => Phase::Done(End::Upper),
                upper => {
                    self.next = whole(rate * self.plan.growth).min(upper.unwrap_or(f64::INFINITY));
                    Phase::Growing
                }
            },
            (Phase::Growing, false) if self.passed.is_none() => self.shrink(rate, 0),
            (Phase::Shrinking { shrinks }, false) => self.shrink(rate, shrinks),
            _ => self.bisect(),
        };
    }

    fn shrink(&mut self, rate: f64, shrinks: u32) -> Phase {
        let next = whole(rate / self.plan.growth);
        if shrinks >= self.plan.max_shrinks || next < self.plan.lowest {
            return Phase::Done(End::NothingPassed);
        }
        self.next = next;
        Phase::Shrinking {
            shrinks: shrinks + 1,
        }
    }

    fn bisect(&mut self) -> Phase {
        let (Some(lo), Some(hi)) = (self.passed, self.failed) else {
            return Phase::Done(End::NothingPassed);
        };
        let mid = whole((lo + hi) / 2.0);
        if hi <= lo * (1.0 + self.plan.precision) || mid <= lo || mid >= hi {
            return Phase::Done(End::Precise);
        }
        self.next = mid;
        Phase::Bisecting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P99_10MS: Objective = Objective {
        quantile: 0.99,
        limit_us: 10_000,
    };

    fn figures(offered: f64, achieved: f64, latency_us: u64, errors: u64) -> StepFigures {
        StepFigures {
            offered,
            achieved,
            latency_us,
            load_s: 5.0,
            on_time: offered,
            errors,
            error_status: 0,
            lateness_p99_us: 0,
        }
    }

    #[test]
    fn verdicts() {
        let ok = figures(1000.0, 995.0, 9_000, 0);
        assert_eq!(judge(&ok, &P99_10MS, 0), Verdict::Pass);
        assert_eq!(
            judge(&figures(1000.0, 995.0, 10_001, 0), &P99_10MS, 0),
            Verdict::Latency
        );
        assert_eq!(
            judge(&figures(1000.0, 995.0, 10_000, 1), &P99_10MS, 0),
            Verdict::Errors
        );
        assert_eq!(
            judge(&figures(1000.0, 995.0, 10_000, 1), &P99_10MS, 1),
            Verdict::Pass
        );
        assert_eq!(
            judge(&figures(1000.0, 969.0, 100, 0), &P99_10MS, 0),
            Verdict::Rate
        );
        assert_eq!(
            judge(&figures(1000.0, 970.0, 100, 0), &P99_10MS, 0),
            Verdict::Pass
        );
    }

    #[test]
    fn generator_limited_above_a_tenth_of_the_objective() {
        assert!(!generator_limited(0, &P99_10MS));
        assert!(!generator_limited(999, &P99_10MS));
        assert!(!generator_limited(1_000, &P99_10MS));
        assert!(generator_limited(1_001, &P99_10MS));
        assert!(generator_limited(25_000, &P99_10MS));
        let p50 = Objective {
            quantile: 0.5,
            limit_us: 200,
        };
        assert!(generator_limited(21, &p50));
        assert_eq!(p50.label(), "p50");
        assert_eq!(P99_10MS.label(), "p99");
        assert_eq!(
            Objective {
                quantile: 0.999,
                limit_us: 1
            }
            .label(),
            "p99.9"
        );
    }

    #[test]
    fn late_for_the_rate_above_three_percent_of_the_step() {
        let step = std::time::Duration::from_millis(500);
        assert!(!late_for_the_rate(15_000, step));
        assert!(late_for_the_rate(15_001, step));
    }

    #[test]
    fn sent_short_only_when_the_connections_were_free() {
        // A stalled loader: 0 sent of 50/s, nothing in flight.
        assert!(sent_short(0.0, 50.0, 1.0, 0.0, 4));
        // On schedule.
        assert!(!sent_short(49.0, 50.0, 1.0, 0.1, 4));
        // Short, but every connection was busy with a slow target: the target's doing.
        assert!(!sent_short(180.0, 400.0, 1.0, 19.0, 20));
        // Short with free connections.
        assert!(sent_short(180.0, 400.0, 1.0, 2.0, 20));
        // One request short of 2.5 in a second: the schedule's edges, not a shortfall.
        assert!(!sent_short(2.0, 2.5, 1.0, 0.0, 2));
        assert!(sent_short(2.0, 4.0, 1.0, 0.0, 2));
    }

    #[test]
    fn a_period_offers_the_whole_requests_its_schedule_holds() {
        assert_eq!(schedulable(2.5, 1.0), 2.0);
        assert_eq!(schedulable(113.0, 0.5), 112.0);
        assert_eq!(schedulable(40.0, 0.5), 40.0);
        assert_eq!(schedulable(0.1 * 3.0, 10.0), 0.3);
        assert_eq!(schedulable(7.0, 0.0), 7.0);
        // No slack beyond the schedule's: 108 of 113 over half a second is short.
        assert!(short(108.0, 113.0, 0.5));
        assert!(!short(109.0, 113.0, 0.5));
    }

    /// Run a search against a target whose true ceiling is `truth`; the rates tried.
    fn run(plan: Plan, truth: f64) -> (Search, Vec<f64>) {
        let mut s = Search::new(plan);
        let mut tried = Vec::new();
        while let Some(r) = s.next_rate() {
            tried.push(r);
            s.record(r, r <= truth);
            assert!(tried.len() < 100, "the search does not end: {tried:?}");
        }
        (s, tried)
    }

    #[test]
    fn grows_then_bisects_to_the_precision() {
        let (s, tried) = run(Plan::new(1000.0), 2950.0);
        assert_eq!(&tried[..3], &[1000.0, 2000.0, 4000.0]);
        assert_eq!(s.phase(), Phase::Done(End::Precise));
        let (lo, hi) = (s.ceiling().unwrap(), s.lowest_failure().unwrap());
        assert!(lo <= 2950.0 && hi > 2950.0, "{lo} {hi}");
        assert!(hi <= lo * 1.02, "{lo} {hi}");
        assert!(lo >= 2950.0 / 1.02, "{lo}");
    }

    #[test]
    fn stops_at_the_upper_bound() {
        let mut plan = Plan::new(1000.0);
        plan.upper = Some(3000.0);
        let (s, tried) = run(plan, 1e9);
        assert_eq!(tried, [1000.0, 2000.0, 3000.0]);
        assert_eq!(s.phase(), Phase::Done(End::Upper));
        assert_eq!(s.ceiling(), Some(3000.0));
        // --from above --upper starts at --upper.
        let mut plan = Plan::new(5000.0);
        plan.upper = Some(3000.0);
        assert_eq!(Search::new(plan).next_rate(), Some(3000.0));
    }

    #[test]
    fn a_first_failure_shrinks_then_bisects() {
        let (s, tried) = run(Plan::new(1000.0), 300.0);
        assert_eq!(&tried[..3], &[1000.0, 500.0, 250.0]);
        assert_eq!(s.phase(), Phase::Done(End::Precise));
        assert!(s.ceiling().unwrap() <= 300.0 && s.ceiling().unwrap() > 290.0);
    }

    #[test]
    fn nothing_passes() {
        let (s, tried) = run(Plan::new(800.0), 1.0);
        assert_eq!(tried, [800.0, 400.0, 200.0, 100.0]);
        assert_eq!(s.phase(), Phase::Done(End::NothingPassed));
        assert_eq!(s.ceiling(), None);
        assert_eq!(s.lowest_failure(), Some(100.0));
    }
}
