#!/usr/bin/env bash
# Many keep-alive clients (issue 23): CONNS clients (2,000) through one proxy worker, 64 B
# answers from an nginx origin serving files from disk; ours (and BASE_BIN) against nginx
# (`keepalive 64`, benches/peers/nginx-proxy.conf), interleaved, ROUNDS rounds.
#
#   benches/many_clients.sh                        # CONNS=2000 RATE=16000 DURATION=5s ROUNDS=3
#   LOAD=wrk benches/many_clients.sh               # closed loop: wrk -t1 -cCONNS (no RATE)
#   NO_BUILD=1 BASE_BIN=/tmp/proxy-old CONNS=10000 LOAD=wrk DURATION=8s benches/many_clients.sh
#   PROXY_ARGS="--max-conns 1024" CONNS=10000 LOAD=wrk benches/many_clients.sh   # bounded upstream
#
# LOAD=rate (default): our loader sends RATE requests/s over CONNS connections, so every target
# gets the same work and the latencies compare at equal load (a target that cannot keep up
# answers fewer within DURATION: the `completed` column). LOAD=wrk: as many as each target
# serves. Per run: requests completed, the proxy's CPU µs per request (user + kernel, all
# threads; nginx: its worker), user µs, requests/s, p50 / p99 / max latency (ms), failures.
# Pinning: the load and the origin on LOAD_CORE (0), the proxy on PROXY_CORE (1). Descriptors:
# the proxy holds CONNS clients plus its upstream connections in flight, all under one
# process's open-files limit (this script raises the soft limit to the hard one).
# shellcheck source=benches/lib.sh
. "$(dirname "$0")/lib.sh"
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-2000}
RATE=${RATE:-16000}
LOAD=${LOAD:-rate}
# Extra flags for ours and base, e.g. PROXY_ARGS="--max-conns 1024".
PROXY_ARGS=${PROXY_ARGS:-}
LOAD_CORE=${LOAD_CORE:-0}
PROXY_CORE=${PROXY_CORE:-1}
PROXY_BIN=${PROXY_BIN:-${CARGO_TARGET_DIR:-target}/release/proxy}
LOADER_BIN=${LOADER_BIN:-${CARGO_TARGET_DIR:-target}/release/loader}
TARGETS=${TARGETS:-"${BASE_BIN:+base }ours nginx"}
case $LOAD in rate | wrk) ;; *) bench_die "LOAD must be rate or wrk, not '$LOAD'" ;; esac
bench_require taskset envsubst python3
[ "$LOAD" = wrk ] && bench_require wrk
cd "$BENCH_ROOT"
bench_build proxy || bench_die "cargo build --release -p proxy failed"
bench_build loader || bench_die "cargo build --release -p loader failed"
ulimit -n "$(ulimit -Hn)"

bench_init
bench_start_origin "$LOAD_CORE"

# measure NAME PID PORT ROUND: warm up, then one load; prints one TSV row.
measure() {
    local name=$1 pid=$2 port=$3 round=$4 url="http://127.0.0.1:$3/64" out="$BENCH_TMP/$1-$4"
    taskset -c "$LOAD_CORE" "$LOADER_BIN" -c "$CONNS" -d 2s -q --workers 1 --no-pin "$url" >/dev/null 2>&1 || true
    local before after
    before=$(awk '{print $14, $15}' "/proc/$pid/stat")
    if [ "$LOAD" = wrk ]; then
        taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d"$DURATION" --timeout 5s --latency "$url" >"$out.txt" 2>&1
    else
        taskset -c "$LOAD_CORE" "$LOADER_BIN" -c "$CONNS" -R "$RATE" -d "$DURATION" --timeout 5s \
            --workers 1 --no-pin --json "$out.json" "$url" >"$out.txt" 2>&1
    fi
    after=$(awk '{print $14, $15}' "/proc/$pid/stat")
    python3 - "$LOAD" "$out" "$before $after" "$round" "$name" "$(getconf CLK_TCK)" <<'PY'
import json, re, sys
load, out, ticks, rnd, name, hz = sys.argv[1:]
t = list(map(int, ticks.split()))
user, kern = t[2] - t[0], t[3] - t[1]
if load == "wrk":
    txt = open(out + ".txt").read()
    n = int(re.search(r"(\d+) requests in", txt).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", txt).group(1))
    def ms(pattern):
        m = re.search(pattern + r"([\d.]+)(us|ms|s)\b", txt)
        return "-" if not m else "%.1f" % (float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)])
    # "Latency  avg  stdev  max  +/- stdev", then the --latency distribution.
    p50, p99, mx = ms(r" 50%\s+"), ms(r" 99%\s+"), ms(r"Latency\s+\S+\s+\S+\s+")
    errs = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", txt))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", txt)
    errs += int(m.group(1)) if m else 0
else:
    j = json.load(open(out + ".json"))
    n, rps, p = j["totals"]["completed"], j["requests_per_second"], j["percentiles_ms"]
    p50, p99, mx = p["50"], p["99"], p["100"]
    errs = j["totals"]["failed"] + j["totals"]["non_2xx"]
us = lambda ticks: ticks * 1e6 / int(hz) / max(n, 1)
print(f"{name}\t{rnd}\t{n}\t{us(user + kern):.1f}\t{us(user):.1f}\t{rps:.0f}\t{p50}\t{p99}\t{mx}\t{errs}", flush=True)
PY
}

start_ours() { # BIN -> PID, PORT
    PORT=$(bench_free_port)
    bench_start "$PROXY_CORE" "$BENCH_TMP/proxy.log" "$1" --listen "127.0.0.1:$PORT" \
        --upstream "127.0.0.1:$ORIGIN_PORT" --workers 1 --keepalive-requests 10000000 \
        --keepalive-timeout 120s --max-connections $((CONNS + 1000)) $PROXY_ARGS
    PID=$BENCH_LAST_PID
    bench_wait_port "$PORT" "$PID" || bench_die "the proxy did not start: $(cat "$BENCH_TMP/proxy.log")"
}

printf 'target\tround\tcompleted\tcpu_us\tuser_us\treq_s\tp50_ms\tp99_ms\tmax_ms\tfailed\n'
for round in $(seq 1 "$ROUNDS"); do
    for target in $TARGETS; do
        case $target in
        ours | base)
            bin=$PROXY_BIN
            [ "$target" = base ] && bin=${BASE_BIN:?BASE_BIN is needed for the base target}
            start_ours "$bin"
            measure "$target" "$PID" "$PORT" "$round"
            bench_stop "$PID"
            ;;
        nginx)
            export PROXY_PORT TMP=$BENCH_TMP ORIGIN_PORT
            PROXY_PORT=$(bench_free_port)
            bench_render "$BENCH_ROOT/benches/peers/nginx-proxy.conf" "$BENCH_TMP/nginx-proxy.conf" TMP ORIGIN_PORT PROXY_PORT
            bench_start "$PROXY_CORE" "$BENCH_TMP/nginx.log" "$(bench_sbin nginx)" -c "$BENCH_TMP/nginx-proxy.conf"
            master=$BENCH_LAST_PID
            bench_wait_port "$PROXY_PORT" "$master" || bench_die "nginx did not start: $(cat "$BENCH_TMP/nginx.log")"
            worker=$(pgrep -P "$(cat "$BENCH_TMP/nginx-proxy.pid")" | head -1)
            measure nginx "$worker" "$PROXY_PORT" "$round"
            bench_stop "$master"
            ;;
        *) bench_die "unknown target '$target' (ours, base, nginx)" ;;
        esac
    done
done
