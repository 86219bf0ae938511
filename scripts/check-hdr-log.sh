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
# The package is installed where the system allows it, never with `pip install --user`, which
# Debian 12 and other PEP 668 ("externally managed") systems refuse: into a venv (HDR_VENV,
# default target/hdr-venv) with its own pip; else (Debian without python3-venv: no ensurepip)
# into a venv made without pip, by the system's pip (`pip --python`, pip 22.3 or later); else
# with `pip install --target` into HDR_SITE (default target/hdr-site), put on PYTHONPATH.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${HDR_VENV:-$ROOT/target/hdr-venv}
SITE=${HDR_SITE:-$ROOT/target/hdr-site}
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"

python_with_hdrh() {
  local py=$VENV/bin/python
  if [ -x "$py" ] && "$py" -c 'import hdrh' 2>/dev/null; then
    echo "$py"; return
  fi
  if python3 -c 'import hdrh' 2>/dev/null; then
    echo python3; return
  fi
  if python3 -m venv "$VENV" >/dev/null 2>&1 && "$VENV/bin/pip" install -q hdrhistogram >&2; then
    echo "$py"; return
  fi
  if python3 -m venv --without-pip "$VENV" >/dev/null 2>&1 &&
    python3 -m pip --python "$py" install -q hdrhistogram >&2; then
    echo "$py"; return
  fi
  if python3 -m pip install -q --target "$SITE" hdrhistogram >&2; then
    echo python3; return
  fi
  echo "check-hdr-log: cannot install hdrhistogram: python3 needs venv (Debian: apt-get" \
    "install python3-venv) or pip (python3-pip)" >&2
  exit 1
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
