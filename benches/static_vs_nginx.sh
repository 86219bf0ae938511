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
#
# Our side: `proxy --static DIR`. Environment: ROUNDS, DURATION, CONNS (64), AB_N (200000), SIZES
# ("64 32k"), MODES ("keepalive close"), LOAD_CORE (0: wrk/ab), SERVER_CORE (1: the server under
# test), PROXY_BIN (default target/release/proxy), PROXY_ARGS (extra flags for ours), NO_BUILD=1, OUT, KEEP_TMP=1.
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
LOAD_CORE=${LOAD_CORE:-0}
SERVER_CORE=${SERVER_CORE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
OUT=${OUT:-target/bench-results/static_vs_nginx-$(date -u +%Y%m%dT%H%M%SZ).tsv}

bench_require wrk ab nginx taskset envsubst ss
bench_init
bench_open_out "$OUT"
bench_write_bodies

# --- the targets: ours and nginx serving the same directory -------------------------------------

declare -A PORT
check_target() { bench_check_bodies "$1" "${PORT[$1]}"; }

bench_build proxy || bench_die "cargo build failed"
[ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found (cargo build --release -p proxy)"
PORT[ours]=$(bench_free_port)
# shellcheck disable=SC2206 # PROXY_ARGS is split into words on purpose
ours=("$PROXY_BIN" --static "$BENCH_TMP/www" --listen "127.0.0.1:${PORT[ours]}" --workers 1 --no-pin ${PROXY_ARGS:-})
BENCH_DESC[ours]="taskset -c $SERVER_CORE ${ours[*]}"
bench_start_target ours "${PORT[ours]}" "$SERVER_CORE" "$BENCH_TMP/ours.log" "${ours[@]}"

STATIC_PORT=$(bench_free_port)
export STATIC_PORT
PORT[nginx]=$STATIC_PORT
bench_render benches/peers/nginx-static.conf "$BENCH_TMP/nginx-static.conf" TMP STATIC_PORT
NGINX=$(bench_sbin nginx)
BENCH_DESC[nginx]="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), benches/peers/nginx-static.conf"
bench_start_target nginx "$STATIC_PORT" "$SERVER_CORE" "$BENCH_TMP/nginx-static.log" \
    "$NGINX" -e "$BENCH_TMP/nginx-static.error.log" -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-static.conf"

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
