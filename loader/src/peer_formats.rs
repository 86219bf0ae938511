//! Output in the formats of the tools whose command lines the loader takes: ab's `-e`
//! percentile CSV and `-g` gnuplot TSV, and wrk's `--latency` block. Text only; the command
//! line writes it.

use crate::figures::{ab_csv_rank, Times};
use crate::stats::RequestTimes;
use std::fmt::Write;

/// ab's `-e`: `Percentage served,Time in ms`, then `P,T` for P from 0 to 100 (`%d,%.3f`):
/// 0 is the fastest request, 100 the slowest, P between the time within which P% were served.
pub fn percentiles_csv(total: Times<'_>) -> String {
    let mut s = String::from("Percentage served,Time in ms\n");
    for p in 0..=100u32 {
        let us = match p {
            _ if total.is_empty() => 0,
            0 => total.min_us(),
            100 => total.max_us(),
            _ => total.at_rank_us(ab_csv_rank(p, total.len())),
        };
        let _ = writeln!(s, "{p},{:.3}", us as f64 / 1000.0);
    }
    s
}

/// ab's `-g`: `starttime seconds ctime dtime ttime wait` (tab-separated), a row per request,
/// sorted by total time as ab sorts them; times in whole milliseconds (ab rounds), the start as
/// ctime(3) prints it (local time, as ab prints it) and in Unix seconds.
pub fn gnuplot_tsv(requests: &[RequestTimes]) -> String {
    let mut rows: Vec<&RequestTimes> = requests.iter().collect();
    rows.sort_by_key(|r| r.total_us);
    let mut s = String::from("starttime\tseconds\tctime\tdtime\tttime\twait\n");
    let ms = |us: u64| (us + 500) / 1000;
    for r in rows {
        let _ = writeln!(
            s,
            "{}\t{}\t{}\t{}\t{}\t{}",
            ctime(r.start_unix_s),
            r.start_unix_s,
            ms(r.connect_us),
            ms(r.total_us.saturating_sub(r.connect_us)),
            ms(r.total_us),
            ms(r.wait_us)
        );
    }
    s
}

/// `Wed Dec 02 02:36:29 2026` (apr_ctime's form), in local time as ab prints it.
fn ctime(unix_s: u64) -> String {
    let local = (unix_s as i64).saturating_add(utc_offset(unix_s)).max(0) as u64;
    utc_ctime(local)
}

/// The local time zone's offset from UTC at `unix_s`, in seconds (0 where it cannot be read).
/// Called once per row after the run, off the workers (localtime_r may read /etc/localtime).
fn utc_offset(unix_s: u64) -> i64 {
    let t = unix_s as libc::time_t;
    // SAFETY: `tm` is plain data; zeroed is a valid value for localtime_r to fill.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads `t` and writes only into `tm`, both live for the call.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return 0;
    }
    tm.tm_gmtoff
}

/// [`ctime`]'s form for a time already shifted to the zone wanted.
fn utc_ctime(unix_s: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = (unix_s / 86_400) as i64;
    let (y, m, d) = shared::civil::civil_from_days(days);
    let secs = unix_s % 86_400;
    format!(
        "{} {} {d:02} {:02}:{:02}:{:02} {y}",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// wrk's `--latency` block: `  Latency Distribution`, then 50, 75, 90 and 99% as wrk prints
/// them (`%7.0f%%` and the value in us, ms or s with two decimals, right-aligned).
pub fn wrk_latency(total: Times<'_>) -> String {
    let mut s = String::from("  Latency Distribution\n");
    for p in [50.0, 75.0, 90.0, 99.0] {
        let us = if total.is_empty() {
            0
        } else {
            total.percentile_us(p)
        };
        let _ = writeln!(s, "{p:7.0}%{}", wrk_units(us as f64));
    }
    s
}

/// wrk's `print_units(n, format_time_us, 10)`: the value with two decimals in the largest
/// unit below it, right-aligned in 10 columns minus the spaces a one-letter unit leaves.
fn wrk_units(us: f64) -> String {
    let (v, unit) = if us < 1000.0 {
        (us, "us")
    } else if us < 1_000_000.0 {
        (us / 1000.0, "ms")
    } else {
        (us / 1_000_000.0, "s")
    };
    let text = format!("{v:.2}{unit}");
    let pad = 2 - unit.len();
    format!("{text:>width$}{}", " ".repeat(pad), width = 10 - pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values_us: &[u64]) -> hdrhistogram::Histogram<u64> {
        let mut h = crate::stats::new_histogram();
        for &v in values_us {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn ab_csv_has_101_rows_from_fastest_to_slowest() {
        let h = hist(&[164, 200, 257, 1000, 8751]);
        let csv = percentiles_csv(Times::new(&h, &Default::default()));
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 102);
        assert_eq!(lines[0], "Percentage served,Time in ms");
        assert_eq!(lines[1], "0,0.164");
        assert_eq!(lines[101], "100,8.751");
        // ab: stats[(int)(0.5 + 5 * 50 / 100.0)] = stats[3].
        assert_eq!(lines[51], "50,1.000");
    }

    /// Ten requests of 100, 200 .. 1000 µs (exact in the histogram: below 2048 µs a bucket
    /// is 1 µs): ab's -e takes stats[(int)(0.5 + n·i/100)] (0-based), up to the last.
    #[test]
    fn ab_csv_takes_abs_rank() {
        let values: Vec<u64> = (1..=10).map(|k| k * 100).collect();
        let h = hist(&values);
        let csv = percentiles_csv(Times::new(&h, &Default::default()));
        let row = |p: u32| csv.lines().nth(p as usize + 1).unwrap().to_string();
        for (p, ms) in [
            (1, "0.100"),
            (4, "0.100"),
            (5, "0.200"),
            (14, "0.200"),
            (15, "0.300"),
            (44, "0.500"),
            (45, "0.600"),
            (50, "0.600"),
            (84, "0.900"),
            (85, "1.000"),
            (99, "1.000"),
        ] {
            assert_eq!(row(p), format!("{p},{ms}"), "{csv}");
        }
    }

    /// wrk's rank for p: round(p/100·n + 0.5), 1-based: the 6th of 10 for 50 %, the 8th for
    /// 75 %, the 10th for 90 and 99 %.
    #[test]
    fn wrk_latency_takes_wrks_rank() {
        let values: Vec<u64> = (1..=10).map(|k| k * 100).collect();
        let h = hist(&values);
        let block = wrk_latency(Times::new(&h, &Default::default()));
        let lines: Vec<&str> = block.lines().collect();
        assert_eq!(
            lines[1..],
            [
                "     50%  600.00us",
                "     75%  800.00us",
                "     90%    1.00ms",
                "     99%    1.00ms"
            ],
            "{block}"
        );
    }

    #[test]
    fn ab_tsv_rows_sorted_by_total_time() {
        let r = |total_us, connect_us| RequestTimes {
            start_unix_s: 1_796_178_989,
            connect_us,
            total_us,
            wait_us: 400,
        };
        let tsv = gnuplot_tsv(&[r(9_200, 0), r(7_400, 7_000), r(300, 0)]);
        // The start in the machine's local time, as ab writes it.
        let at = ctime(1_796_178_989);
        assert_eq!(
            tsv,
            format!(
                "starttime\tseconds\tctime\tdtime\tttime\twait\n\
                 {at}\t1796178989\t0\t0\t0\t0\n\
                 {at}\t1796178989\t7\t0\t7\t0\n\
                 {at}\t1796178989\t0\t9\t9\t0\n"
            )
        );
        assert_eq!(utc_ctime(1_796_178_989), "Wed Dec 02 02:36:29 2026");
        assert_eq!(utc_ctime(0), "Thu Jan 01 00:00:00 1970");
    }

    #[test]
    fn wrk_latency_block_as_wrk_prints_it() {
        let h = hist(&[635, 712, 800, 1_000, 2_500_000]);
        let block = wrk_latency(Times::new(&h, &Default::default()));
        let lines: Vec<&str> = block.lines().collect();
        assert_eq!(lines[0], "  Latency Distribution");
        assert_eq!(lines[1], "     50%  800.00us");
        assert_eq!(lines[3], "     90%    2.50s ");
        assert_eq!(wrk_units(1_500.0), "    1.50ms");
    }
}
