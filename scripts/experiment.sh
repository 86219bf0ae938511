#!/usr/bin/env bash
# The overhead experiment on embedded defaults, from a fresh clone with only the Rust toolchain:
# the built-in origin (32 KB page), the proxy with one worker in front of it, and the loader
# against both, interleaved (direct, proxied, direct, ...), with the proxy's CPU µs per request.
#
#   scripts/experiment.sh                 # defaults below
#   ROUNDS=5 DURATION=5s CONNS=64 BODY=32KiB scripts/experiment.sh
#   JSON=run.json scripts/experiment.sh   # also write the loader's --json (figures and context)
#
# `scripts/experiment.sh ceiling`: the same set-up, but instead of comparing at full speed,
# `loader ceiling` finds the highest rate each side sustains within a latency objective
# (direct and proxied searched A B A B), with the proxy's CPU µs per request at every step
# and the hockey-stick plot:
#
#   scripts/experiment.sh ceiling                          # p99 <= 20ms, 2s steps
#   P99=50ms STEP=5s PLOT=ceiling.svg MAX_TIME=10m scripts/experiment.sh ceiling
#
# JSON and PLOT (default ceiling.svg) are relative to the directory the script was run from,
# as any path given to a command is (the script itself works from the repository's top).
#
# The objective is 20 ms by default because the loader's timer ticks in milliseconds: its send
# lateness p99 is about 1 ms when it sleeps, and a step whose lateness exceeds a tenth of the
# objective is generator-limited. Tighter objectives need `--spin` (a core per loader worker),
# which a 2-core machine cannot spare beside the origin.
#
# Placement on a 2-core machine: the proxy alone on the last core, origin and loader on the
# first (taskset), so the proxy's CPU cost is measured without the others fighting it.
set -euo pipefail
JSON=${JSON:-}
case $JSON in '' | /*) ;; *) JSON=$PWD/$JSON ;; esac # relative to where it was run
PLOT=${PLOT:-ceiling.svg}
case $PLOT in /*) ;; *) PLOT=$PWD/$PLOT ;; esac # the same
cd "$(dirname "$0")/.."

MODE=${1:-compare}
case "$MODE" in
    compare | ceiling) ;;
    *) echo "usage: $0 [compare|ceiling]" >&2; exit 2 ;;
esac

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-2s}
CONNS=${CONNS:-32}
BODY=${BODY:-32KiB}
# ceiling mode
P99=${P99:-20ms}
STEP=${STEP:-2s}
WARMUP=${WARMUP:-500ms}
MAX_TIME=${MAX_TIME:-5m}

cargo build --release -q -p proxy -p loader
bin=${CARGO_TARGET_DIR:-target}/release
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

ncpu=$(nproc)
last=$((ncpu - 1))
if [ "$ncpu" -ge 2 ]; then
    pin_proxy=(taskset -c "$last")
    pin_rest=(taskset -c "0-$((last - 1))")
else
    pin_proxy=()
    pin_rest=()
fi

# Wait for PATTERN (default "listening on ADDR") in a log file and print its last word.
listen_addr() {
    local log=$1 pattern=${2:-'listening on [0-9.:]*'}
    for _ in $(seq 1 100); do
        local a
        a=$(grep -o "$pattern" "$log" 2>/dev/null | head -1 | awk '{print $NF}')
        if [ -n "$a" ]; then echo "$a"; return 0; fi
        sleep 0.05
    done
    echo "timed out waiting for $log:" >&2
    cat "$log" >&2
    return 1
}

"${pin_rest[@]}" "$bin/loader" origin --listen 127.0.0.1:0 --body-size "$BODY" --workers 1 \
    >"$tmp/origin.out" 2>"$tmp/origin.log" &
pids+=($!)
origin=$(listen_addr "$tmp/origin.out" 'http://[0-9.:]*' | sed 's|http://||')

"${pin_proxy[@]}" "$bin/proxy" --listen 127.0.0.1:0 --upstream "$origin" --workers 1 \
    2>"$tmp/proxy.log" &
proxy_pid=$!
pids+=("$proxy_pid")
proxy=$(listen_addr "$tmp/proxy.log")

echo "origin: $origin (built-in, $BODY page)   proxy: $proxy (1 worker, pid $proxy_pid)"
if [ "$MODE" = ceiling ]; then
    echo "ceiling: p99 <= $P99, steps of $STEP after $WARMUP of warm-up, $CONNS connections," \
        "direct (A) and proxied (B) A B A B...; plot: $PLOT"
    echo
    # The exit status (1: no ceiling, or the loader was the limit) is the script's.
    "${pin_rest[@]}" "$bin/loader" ceiling --p99 "$P99" "http://$origin/" "http://$proxy/" \
        -d "$STEP" --warmup "$WARMUP" -c "$CONNS" --threads 1 --watch-pid "$proxy_pid" \
        --max-time "$MAX_TIME" --plot "$PLOT" -q
    exit $?
fi

echo "load: $DURATION per round, $CONNS keep-alive connections, $ROUNDS rounds A B A B..."
echo
"${pin_rest[@]}" "$bin/loader" compare "http://$origin/" "http://$proxy/" \
    --rounds "$ROUNDS" -d "$DURATION" -c "$CONNS" --threads 1 --watch-pid "$proxy_pid" \
    ${JSON:+--json "$JSON"}
