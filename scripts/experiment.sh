#!/usr/bin/env bash
# The overhead experiment on embedded defaults, from a fresh clone with only the Rust toolchain:
# the built-in origin (32 KB page), the proxy with one worker in front of it, and the loader
# against both, interleaved (direct, proxied, direct, ...), with the proxy's CPU µs per request.
#
#   scripts/experiment.sh                 # defaults below
#   ROUNDS=5 DURATION=5s CONNS=64 BODY=32KiB scripts/experiment.sh
#   JSON=run.json scripts/experiment.sh   # also write the loader's --json (figures and context)
#
# Placement on a 2-core machine: the proxy alone on the last core, origin and loader on the
# first (taskset), so the proxy's CPU cost is measured without the others fighting it.
set -euo pipefail
JSON=${JSON:-}
case $JSON in '' | /*) ;; *) JSON=$PWD/$JSON ;; esac # relative to where it was run
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-2s}
CONNS=${CONNS:-32}
BODY=${BODY:-32KiB}

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
echo "load: $DURATION per round, $CONNS keep-alive connections, $ROUNDS rounds A B A B..."
echo
"${pin_rest[@]}" "$bin/loader" compare "http://$origin/" "http://$proxy/" \
    --rounds "$ROUNDS" -d "$DURATION" -c "$CONNS" --threads 1 --watch-pid "$proxy_pid" \
    ${JSON:+--json "$JSON"}
