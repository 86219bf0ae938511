//! ab's derived figures of a run (requests per second, time per request, transfer rates, the
//! connection-times rows and the percentile list), computed once from a [`RunResult`] for the
//! text report, the JSON document and `compare`.

use crate::stats::{LatencySummary, RunResult};
use hdrhistogram::Histogram;

/// ab's percentiles, extended with 99.9 and 99.99; the longest request follows.
pub const PERCENTILES: &[f64] = &[50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99];

/// Microseconds to milliseconds.
fn ms(us: f64) -> f64 {
    us / 1000.0
}

/// `50%`, `99.9%`, `99.99%`.
pub fn percent_label(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}%")
    } else {
        let s = format!("{p:.4}");
        format!("{}%", s.trim_end_matches('0'))
    }
}

/// A series of times (µs) as the reports read it: its histogram and its exact summary.
/// Min, mean, sd and max are the summary's when it holds the histogram's values (a document
/// from a version that wrote no summary has none: then the histogram's, its sd made a
/// sample's); percentiles are the histogram's.
#[derive(Debug, Clone, Copy)]
pub struct Times<'a> {
    pub hist: &'a Histogram<u64>,
    pub sums: &'a LatencySummary,
}

impl<'a> Times<'a> {
    pub fn new(hist: &'a Histogram<u64>, sums: &'a LatencySummary) -> Times<'a> {
        Times { hist, sums }
    }

    /// How many values.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    fn exact(&self) -> Option<&LatencySummary> {
        (self.sums.count == self.hist.len() && self.sums.count > 0).then_some(self.sums)
    }

    /// The smallest value (0 when empty).
    pub fn min_us(&self) -> u64 {
        match self.exact() {
            Some(s) => s.min(),
            None if self.hist.is_empty() => 0,
            None => self.hist.min(),
        }
    }

    /// The largest value (0 when empty).
    pub fn max_us(&self) -> u64 {
        match self.exact() {
            Some(s) => s.max_us,
            None if self.hist.is_empty() => 0,
            None => self.hist.max(),
        }
    }

    pub fn mean_us(&self) -> f64 {
        match self.exact() {
            Some(s) => s.mean_us(),
            None if self.hist.is_empty() => 0.0,
            None => self.hist.mean(),
        }
    }

    /// The value of rank `rank` (1-based) as the histogram holds it: the top of its bucket
    /// (within 0.1 % above the value), kept within the exact min and max; the first and the
    /// last are the exact min and max.
    pub fn at_rank_us(&self, rank: u64) -> u64 {
        let n = self.hist.len();
        if n == 0 {
            return 0;
        }
        if rank <= 1 {
            return self.min_us();
        }
        if rank >= n {
            return self.max_us();
        }
        let mut seen = 0;
        for v in self.hist.iter_recorded() {
            seen += v.count_at_value();
            if seen >= rank {
                let top = self.hist.highest_equivalent(v.value_iterated_to());
                // Not `clamp`: it panics on a minimum above the maximum.
                return top.max(self.min_us()).min(self.max_us());
            }
        }
        self.max_us()
    }

    /// The `p` % percentile as ab and wrk take it ([`peer_rank`]).
    pub fn percentile_us(&self, p: f64) -> u64 {
        self.at_rank_us(peer_rank(p, self.len()))
    }

    /// ab's median: `stats[n / 2]`, and for an odd count above one the mean of `stats[n / 2]`
    /// and `stats[n / 2 + 1]` (in whole µs, as ab's integer times).
    pub fn ab_median_us(&self) -> u64 {
        let n = self.len();
        let at = self.at_rank_us(n / 2 + 1);
        if n > 1 && n % 2 == 1 {
            ((u128::from(at) + u128::from(self.at_rank_us(n / 2 + 2))) / 2) as u64
        } else {
            at
        }
    }

    /// ab's sd: the sample standard deviation (n - 1).
    pub fn sd_us(&self) -> f64 {
        match self.exact() {
            Some(s) => s.sd_us(),
            None if self.hist.len() < 2 => 0.0,
            None => {
                let n = self.hist.len() as f64;
                self.hist.stdev() * (n / (n - 1.0)).sqrt()
            }
        }
    }
}

/// The rank (1-based, among `n` values in order) that ab's percentile table and wrk's
/// `--latency` take for `p` %: ab's `stats[n * p / 100]` (0-based, integer division) and wrk's
/// `round(p / 100 * n + 0.5)` are the same, floor(n·p/100) + 1, at most n. `p` is read in
/// hundredths of a percent (99.99 included), so the product is exact.
/// The `p` % percentile (µs) of a histogram alone, at the rank ab and wrk take
/// ([`peer_rank`]), so that every table of the loader (compare's, ceiling's, merge's shard
/// rows, the plots' labels) reads the same value as the report's.
pub fn hist_percentile_us(h: &Histogram<u64>, p: f64) -> u64 {
    Times::new(h, &LatencySummary::default()).percentile_us(p)
}

pub fn peer_rank(p: f64, n: u64) -> u64 {
    let hundredths = (p * 100.0).round().max(0.0) as u128;
    let rank = u128::from(n) * hundredths / 10_000 + 1;
    rank.min(u128::from(n.max(1))) as u64
}

/// The rank ab's `-e` takes for row `i` (1 to 99): `stats[(int)(0.5 + n * i / 100.0)]`
/// (0-based), that is n·i/100 rounded half up, plus one; at most n (where ab would read past
/// its last value).
pub fn ab_csv_rank(i: u32, n: u64) -> u64 {
    let rank = (u128::from(n) * u128::from(i) + 50) / 100 + 1;
    rank.min(u128::from(n.max(1))) as u64
}

/// One row of ab's "Connection Times (ms)" table: min, mean, sd, median, max in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimeRow {
    pub min: f64,
    pub mean: f64,
    pub sd: f64,
    pub median: f64,
    pub max: f64,
}

impl TimeRow {
    pub fn of(t: Times<'_>) -> TimeRow {
        if t.is_empty() {
            return TimeRow::default();
        }
        TimeRow {
            min: ms(t.min_us() as f64),
            mean: ms(t.mean_us()),
            sd: ms(t.sd_us()),
            median: ms(t.ab_median_us() as f64),
            max: ms(t.max_us() as f64),
        }
    }
}

/// ab's derived figures, computed once for the text and the JSON.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Derived {
    /// Requests in flight at once: connections × pipeline depth (ab's concurrency).
    pub concurrency: usize,
    pub requests_per_second: f64,
    /// ab: concurrency × time taken / complete requests, in ms.
    pub time_per_request_ms: f64,
    /// ab: time taken / complete requests, in ms.
    pub time_per_request_all_ms: f64,
    /// ab: bytes received / 1024 / time taken.
    pub transfer_rate_kbytes: f64,
    /// ab with a request body: bytes sent (request heads and bodies) / 1024 / time taken.
    pub sent_rate_kbytes: f64,
}

impl Derived {
    pub fn of(r: &RunResult) -> Derived {
        let secs = r.elapsed.as_secs_f64();
        let done = r.totals.completed as f64;
        let concurrency = r.concurrency * r.pipeline.max(1);
        let (rps, tpr, tpr_all, kb, sent) = if secs > 0.0 && done > 0.0 {
            (
                done / secs,
                concurrency as f64 * secs * 1000.0 / done,
                secs * 1000.0 / done,
                r.totals.bytes_received as f64 / 1024.0 / secs,
                r.totals.bytes_sent as f64 / 1024.0 / secs,
            )
        } else {
            (0.0, 0.0, 0.0, 0.0, 0.0)
        };
        Derived {
            concurrency,
            requests_per_second: rps,
            time_per_request_ms: tpr,
            time_per_request_all_ms: tpr_all,
            transfer_rate_kbytes: kb,
            sent_rate_kbytes: sent,
        }
    }
}

/// A rate for the report: two decimals from 1 req/s up (and 0), three significant digits
/// below (`--rate` takes 0.001 req/s; a `--stages` mean can be smaller): two decimals showed
/// a target of 0.0005 as 0.00.
pub fn rate_digits(r: f64) -> String {
    if !(r > 0.0 && r < 1.0) {
        return format!("{r:.2}");
    }
    // floor(log10) is -1 for 0.1..1, -4 for 0.0001..0.001; at most f64's digits.
    let decimals = (2.0 - r.log10().floor()).min(17.0) as usize;
    format!("{r:.decimals$}")
}

/// The achieved rate in `--rate` mode: completed responses per second (as `rate_reached` counts).
pub fn achieved_rate(r: &RunResult) -> f64 {
    r.rate()
}

/// With --rate: the send lateness p99 (µs) of `r` when it exceeds a tenth of the corrected
/// p99, that is when the corrected figures carry a noticeable part of the generator's own
/// delay. The report's percentiles (its rank), so the warning quotes the table's p99.
pub fn late_sender(r: &RunResult) -> Option<u64> {
    r.target_rate()?;
    let late = &r.hist.send_lateness;
    if late.is_empty() || r.hist.total.is_empty() {
        return None;
    }
    let p99 = |h, s| Times::new(h, s).percentile_us(99.0);
    let e = &r.hist.sums;
    let late = p99(late, &e.send_lateness);
    (late as f64 > p99(&r.hist.total, &e.total) as f64 / 10.0).then_some(late)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_abs_and_wrks() {
        // ab's stats[n*p/100] + 1; wrk's round(p/100*n + 0.5).
        assert_eq!(peer_rank(50.0, 10), 6);
        assert_eq!(peer_rank(90.0, 10), 10);
        assert_eq!(peer_rank(99.0, 10), 10);
        assert_eq!(peer_rank(99.9, 10_000), 9_991);
        assert_eq!(peer_rank(99.99, 10_000), 10_000);
        assert_eq!(peer_rank(50.0, 1), 1);
        assert_eq!(peer_rank(50.0, 0), 1);
        // ab's -e: (int)(0.5 + n*i/100.0), 0-based.
        assert_eq!(ab_csv_rank(5, 10), 2);
        assert_eq!(ab_csv_rank(4, 10), 1);
        assert_eq!(ab_csv_rank(99, 10), 10);
    }
}
