#!/usr/bin/env python3
"""Read a `loader --hdr-log` file with the Python HdrHistogram package's HistogramLogReader
(HdrHistogram's own reader, not ours) and print what it found, one line per interval, then
the total over all intervals. With --expect-count N, exit 1 unless the intervals hold exactly
N values (the run's "Complete requests"). Run it through scripts/check-hdr-log.sh, which
installs the package into a venv."""
import argparse
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("log")
    ap.add_argument("--expect-count", type=int)
    ap.add_argument("--expect-intervals", type=int)
    args = ap.parse_args()

    # The loader's histograms: 1 us .. 1 h, 3 significant digits.
    reference = HdrHistogram(1, 3_600_000_000, 3)
    reader = HistogramLogReader(args.log, reference)
    total = HdrHistogram(1, 3_600_000_000, 3)
    intervals = 0
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        intervals += 1
        total.add(h)
        print(
            f"interval {intervals}: start {h.get_start_time_stamp() / 1000:.3f} s, "
            f"{h.get_total_count()} values, p50 {h.get_value_at_percentile(50)} us, "
            f"p99 {h.get_value_at_percentile(99)} us, max {h.get_max_value()} us"
        )
    print(
        f"total: {intervals} intervals, {total.get_total_count()} values, "
        f"p50 {total.get_value_at_percentile(50)} us, p99 {total.get_value_at_percentile(99)} us, "
        f"start time {reader.start_time_sec}"
    )
    ok = True
    if args.expect_count is not None and total.get_total_count() != args.expect_count:
        print(f"FAIL: expected {args.expect_count} values", file=sys.stderr)
        ok = False
    if args.expect_intervals is not None and intervals != args.expect_intervals:
        print(f"FAIL: expected {args.expect_intervals} intervals", file=sys.stderr)
        ok = False
    if intervals == 0:
        print("FAIL: no interval histogram read", file=sys.stderr)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
