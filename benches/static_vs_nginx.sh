#!/usr/bin/env bash
# Static files: our proxy's static route against nginx with `sendfile on`, in the same run.
#
# For each case (a 64 B and a 32 KB file × keep-alive clients (wrk) / connection-per-request
# clients (ab without -k)), every round loads our proxy (1 worker) and nginx (1 worker,
# benches/peers/nginx-static.conf) one after the other, the order rotating each round. Per run
# it prints req/s, p99 and the server's CPU µs per request (user + kernel, /proc/PID/stat before
# and after the load), with the ratio to nginx in the same round; then median and [min-max].
#
#   benches/static_vs_nginx.sh                       # defaults: ROUNDS=3 DURATION=5s
#   ROUNDS=5 DURATION=10s MODES=keepalive benches/static_vs_nginx.sh
#   PROXY_ARGS="--driver epoll" benches/static_vs_nginx.sh
#   BASE_BIN=/tmp/proxy-before benches/static_vs_nginx.sh   # A/B: "base" runs beside "ours"
#
# Our side: `proxy --static DIR`. Environment: ROUNDS, DURATION, CONNS (64), AB_N (200000), SIZES
# ("64 32k"; 1m, 2k, 8k exist too), MODES ("keepalive close"), TARGETS ("ours nginx", plus "base"
# when BASE_BIN is set: another build of our proxy, started the same way with BASE_ARGS, default
# PROXY_ARGS), LOAD_CORE (0: wrk/ab), SERVER_CORE (1: the server under test), PROXY_BIN (default
# target/release/proxy), PROXY_ARGS (extra flags for ours), NO_BUILD=1, OUT, KEEP_TMP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
AB_N=${AB_N:-200000}
SIZES=${SIZES:-"64 32k"}
MODES=${MODES:-"keepalive close"}
BASE_BIN=${BASE_BIN:-}
if [ -n "$BASE_BIN" ]; then TARGETS=${TARGETS:-"ours base nginx"}; else TARGETS=${TARGETS:-"ours nginx"}; fi
LOAD_CORE=${LOAD_CORE:-0}
SERVER_CORE=${SERVER_CORE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
OUT=${OUT:-target/bench-results/static_vs_nginx-$(date -u +%Y%m%dT%H%M%SZ).tsv}

bench_require wrk ab taskset envsubst ss
bench_want "$TARGETS" nginx && bench_require nginx
bench_init
bench_open_out "$OUT"
bench_write_bodies

# --- the targets: ours and nginx serving the same directory -------------------------------------

declare -A PORT
check_target() { bench_check_bodies "$1" "${PORT[$1]}"; }

# start_ours TARGET BIN ARGS: `BIN --static DIR` with one worker and the extra flags ARGS.
start_ours() {
    local t=$1 bin=$2 args=$3
    PORT[$t]=$(bench_free_port)
    # shellcheck disable=SC2206 # the extra flags are split into words on purpose
    local cmd=("$bin" --static "$BENCH_TMP/www" --listen "127.0.0.1:${PORT[$t]}" --workers 1 --no-pin $args)
    BENCH_DESC[$t]="taskset -c $SERVER_CORE ${cmd[*]}"
    bench_start_target "$t" "${PORT[$t]}" "$SERVER_CORE" "$BENCH_TMP/$t.log" "${cmd[@]}"
}

if bench_want "$TARGETS" ours; then
    bench_build proxy || bench_die "cargo build failed"
    [ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found (cargo build --release -p proxy)"
    start_ours ours "$PROXY_BIN" "${PROXY_ARGS:-}"
fi
if bench_want "$TARGETS" base; then
    [ -x "$BASE_BIN" ] || bench_die "target base needs BASE_BIN (another build of our proxy): '$BASE_BIN'"
    start_ours base "$BASE_BIN" "${BASE_ARGS-${PROXY_ARGS:-}}"
fi

if bench_want "$TARGETS" nginx; then
    STATIC_PORT=$(bench_free_port)
    export STATIC_PORT
    PORT[nginx]=$STATIC_PORT
    bench_render benches/peers/nginx-static.conf "$BENCH_TMP/nginx-static.conf" TMP STATIC_PORT
    NGINX=$(bench_sbin nginx)
    BENCH_DESC[nginx]="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), benches/peers/nginx-static.conf"
    bench_start_target nginx "$STATIC_PORT" "$SERVER_CORE" "$BENCH_TMP/nginx-static.log" \
        "$NGINX" -e "$BENCH_TMP/nginx-static.error.log" -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-static.conf"
fi

[ "${#BENCH_ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

# --- the runs: cases SIZE/MODE ------------------------------------------------------------------

bench_size_mode_cases
load_case() { bench_load_size_mode "$1" "${PORT[$2]}"; }
warm_up() { bench_warm_sizes "$1" "${PORT[$1]}"; }

bench_rounds "$ROUNDS" warm_up bench_measure load_case

# --- the report ---------------------------------------------------------------------------------

case_title() { bench_size_mode_title "$1" "B file"; }

bench_report_head static_vs_nginx
bench_size_mode_load_line
echo "# pinning: wrk/ab on core $LOAD_CORE; the server under test on core $SERVER_CORE"
bench_report_targets
echo "# µs/req = the server's utime+stime (all threads and processes) during the load ÷ completed requests"
echo "# vs_nginx = ours ÷ nginx in the same round (paired); summary = median [min-max] over rounds"
bench_report case_title target us/req nginx
bench_report_tail nginx-static.conf
