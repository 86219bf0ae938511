#!/usr/bin/env bash
# What a load generator costs, against wrk, h2load and ab, in the same run.
#
# One origin (nginx, one worker, pinned to core 0). Each round runs, one after the other
# (interleaved, the order rotating each round), our loader, wrk, h2load --h1 and ab -k against it,
# each pinned alone to core 1 with one thread and 64 keep-alive connections. Per run it prints
# req/s, p99 and the generator's own CPU µs per request (user + kernel: the kernel's rusage of the
# exited process, all threads), with the ratio to wrk in the same round; then the median and
# [min-max] over the rounds.
#
#   benches/loader_vs_peers.sh                     # defaults: ROUNDS=3 N=200000
#   ROUNDS=5 N=500000 benches/loader_vs_peers.sh
#   GENERATORS="wrk h2load ab" benches/loader_vs_peers.sh
#   GENERATORS="loader loader-dist wrk" SIZES=64 benches/loader_vs_peers.sh   # what the shard
#       flags cost: loader-dist is our loader with --hdr-log FILE --shard 1/1
#
# Environment: ROUNDS, N (requests per run), CONNS (64), SIZES ("64 32k"),
# GENERATORS ("loader wrk h2load ab"), ORIGIN_CORE (0), GEN_CORE (1), MAX_TIME (per-run time
# bound, 60s), LOADER_BIN (default target/release/loader, built here unless NO_BUILD=1), OUT (raw
# TSV path), KEEP_TMP=1.
#
# wrk has no request count: it runs for the whole number of seconds that makes about N requests at
# the rate it reached in the warm-up; its CPU is divided by the requests it completed, like the
# others'.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ROUNDS=${ROUNDS:-3}
N=${N:-200000}
CONNS=${CONNS:-64}
SIZES=${SIZES:-"64 32k"}
GENERATORS=${GENERATORS:-"loader wrk h2load ab"}
ORIGIN_CORE=${ORIGIN_CORE:-0}
GEN_CORE=${GEN_CORE:-1}
MAX_TIME=${MAX_TIME:-60s}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
LOADER_BIN=${LOADER_BIN:-$TARGET_DIR/release/loader}
OUT=${OUT:-target/bench-results/loader_vs_peers-$(date -u +%Y%m%dT%H%M%SZ).tsv}

bench_require nginx taskset envsubst ss
for g in wrk h2load ab; do
    if bench_want "$GENERATORS" "$g"; then bench_require "$g"; fi
done
[ "$(nproc)" -ge 2 ] || bench_log "warning: fewer than 2 cores; pinning cannot separate the generator from the origin"

bench_init
bench_open_out "$OUT"
bench_start_origin "$ORIGIN_CORE"
# The generators are the targets: their own CPU (rusage) is what is compared.
BENCH_CPU=load

BENCH_DESC[wrk]="$({ wrk -v 2>&1 || true; } | awk 'NR == 1 { print $1, $2 }'): taskset -c $GEN_CORE wrk -t1 -c$CONNS -d<≈N/rate>s --latency URL"
BENCH_DESC[h2load]="$({ h2load --version 2>&1 || true; } | head -1): taskset -c $GEN_CORE h2load --h1 -t1 -c$CONNS -n$N URL"
BENCH_DESC[ab]="ab $({ ab -V 2>&1 || true; } | awk '/Version/ { print $5 }' | tr -d ,): taskset -c $GEN_CORE ab -k -c $CONNS -n $N URL"

# gen_run GEN URL N: one bounded run; prints "RPS P99_US COMPLETED ERRORS USER_US KERNEL_US".
WRK_SECONDS=1
LOADER_FLAGS=()
gen_run() {
    local g=$1 url=$2 n=$3
    case $g in
        loader) load_loader "$LOADER_BIN" "$GEN_CORE" "$CONNS" "$n" "$MAX_TIME" "$url" ;;
        loader-dist)
            LOADER_FLAGS=(--hdr-log "$BENCH_TMP/loader.hlog" --shard 1/1)
            load_loader "$LOADER_BIN" "$GEN_CORE" "$CONNS" "$n" "$MAX_TIME" "$url"
            LOADER_FLAGS=()
            ;;
        wrk) load_wrk "$GEN_CORE" "$CONNS" "${WRK_SECONDS}s" "$url" ;;
        h2load) load_h2load "$GEN_CORE" "$CONNS" "$n" "$MAX_TIME" "$url" ;;
        ab) load_ab "$GEN_CORE" "$CONNS" "$n" - 1 "$url" ;;
    esac
}

for g in $GENERATORS; do
    if [ "$g" = loader ] || [ "$g" = loader-dist ]; then
        bench_build loader || bench_log "SKIP loader: cargo build --release -p loader failed"
        if [ ! -x "$LOADER_BIN" ]; then
            bench_log "SKIP loader: $LOADER_BIN not found"
            continue
        fi
        BENCH_DESC[loader]="taskset -c $GEN_CORE $LOADER_BIN --threads 1 -c $CONNS -n $N -q URL"
        BENCH_DESC[loader-dist]="${BENCH_DESC[loader]/-q/-q --hdr-log FILE --shard 1/1}"
    fi
    # A short run per size checks the generator works and gives its exact count and no errors.
    ok=1
    for size in $SIZES; do
        res=$(gen_run "$g" "http://127.0.0.1:$ORIGIN_PORT/$size" 1000) || res=""
        read -r _ _ c err _ _ <<<"${res:-x x 0 1 x x}"
        if [ -z "$res" ] || [ "$err" != 0 ] || { [ "$g" != wrk ] && [ "$c" != 1000 ]; }; then
            bench_log "SKIP $g: a check run of 1000 requests to /$size did not complete cleanly ($res):"
            bench_log "$(tail -c 2000 "$LOAD_OUT")"
            ok=0
            break
        fi
    done
    [ "$ok" = 1 ] && BENCH_ACTIVE+=("$g")
done
[ "${#BENCH_ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"


# Warm-up (not recorded), and wrk's duration per size: about N requests at its warm-up rate.
declare -A WRK_S
for size in $SIZES; do
    url="http://127.0.0.1:$ORIGIN_PORT/$size"
    WRK_SECONDS=2
    res=$(gen_run wrk "$url" 0) || bench_die "wrk warm-up failed: $(tail -c 1500 "$LOAD_OUT")"
    WRK_S[$size]=$(awk -v n="$N" -v r="${res%% *}" 'BEGIN { s = int(n / r + 0.5); print (s < 1 ? 1 : s) }')
done

# --- the runs: one case per response size -------------------------------------------------------

read -r -a BENCH_CASES <<<"$SIZES"

# load_case SIZE GEN: N requests (wrk: WRK_S[SIZE] seconds) to /SIZE.
load_case() {
    WRK_SECONDS=${WRK_S[$1]}
    gen_run "$2" "http://127.0.0.1:$ORIGIN_PORT/$1" "$N"
}

bench_rounds "$ROUNDS" "" bench_measure load_case

# --- the report ---------------------------------------------------------------------------------

case_title() { echo "${BODY_LEN[$1]} B responses"; }

bench_report_head loader_vs_peers
echo "# origin: nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), 1 worker, on core $ORIGIN_CORE (benches/peers/nginx-origin.conf)"
echo "# each generator alone on core $GEN_CORE, 1 thread, $CONNS keep-alive connections, $N requests per run"
bench_report_targets
echo "#   (wrk: -d per size: $(for s in $SIZES; do printf '/%s %ss ' "$s" "${WRK_S[$s]}"; done))"
echo "# gen µs/req = the generator's user+kernel CPU time (rusage, all threads) ÷ completed requests"
echo "# vs wrk = gen µs/req ÷ wrk's in the same round (paired); summary = median [min-max] over rounds"
bench_report case_title gen gen_us/req wrk
bench_report_tail nginx-origin.conf
