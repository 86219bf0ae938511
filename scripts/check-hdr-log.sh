#!/usr/bin/env bash
# Check `loader --hdr-log` with HdrHistogram's own Python reader (HistogramLogReader from the
# `hdrhistogram` package on PyPI): runs the built-in origin (20 ms a response, so requests are
# in flight at the deadline) and a 2.5 s load on 127.0.0.1 (three intervals: two full, one
# partial), then reads the log with the Python reader and requires the intervals to hold
# exactly the report's "Complete requests": the requests in flight at the deadline are
# drained, counted, and in the last interval.
#
#   scripts/check-hdr-log.sh            # builds the release loader, venv in target/hdr-venv
#   LOADER=target/debug/loader scripts/check-hdr-log.sh
#   scripts/check-hdr-log.sh FILE.hlog  # only read an existing log
#
# The package is installed with pip into a venv (HDR_VENV, default target/hdr-venv), or with
# `pip install --user` when the venv module is missing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${HDR_VENV:-$ROOT/target/hdr-venv}

python_with_hdrh() {
  if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import hdrh' 2>/dev/null; then
    echo "$VENV/bin/python"; return
  fi
  if python3 -m venv "$VENV" >/dev/null 2>&1; then
    "$VENV/bin/pip" install -q hdrhistogram >&2
    echo "$VENV/bin/python"; return
  fi
  python3 -m pip install -q --user hdrhistogram >&2
  echo python3
}
PY=$(python_with_hdrh)

if [ $# -ge 1 ]; then
  exec "$PY" "$ROOT/scripts/check-hdr-log.py" "$@"
fi

if [ -z "${LOADER:-}" ]; then
  (cd "$ROOT" && cargo build -q --release -p loader)
  LOADER=$ROOT/target/release/loader
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hdrlog.XXXXXX")
ORIGIN_PID=""
cleanup() { [ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

"$LOADER" origin --listen 127.0.0.1:0 --workers 1 --body-size 1KiB --delay 20ms >"$TMP/origin.url" 2>/dev/null &
ORIGIN_PID=$!
for _ in $(seq 100); do [ -s "$TMP/origin.url" ] && break; sleep 0.05; done
URL=$(head -1 "$TMP/origin.url")
[ -n "$URL" ] || { echo "the origin did not start" >&2; exit 1; }

timeout 30 "$LOADER" -q -c 64 -d 2500ms --rate 2000 --threads 1 --hdr-log "$TMP/run.hlog" "$URL" >"$TMP/report.txt"
COMPLETE=$(awk '/^Complete requests:/ {print $3}' "$TMP/report.txt")
IN_FLIGHT=$(awk '/^In flight at the stop:/ {print $6}' "$TMP/report.txt")
echo "loader: $COMPLETE complete requests ($IN_FLIGHT in flight at the deadline, drained);" \
  "reading $TMP/run.hlog with HistogramLogReader"
"$PY" "$ROOT/scripts/check-hdr-log.py" "$TMP/run.hlog" --expect-count "$COMPLETE" --expect-intervals 3
