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
want() { [[ " $GENERATORS " == *" $1 "* ]]; }
want wrk && bench_require wrk
want h2load && bench_require h2load
want ab && bench_require ab
[ "$(nproc)" -ge 2 ] || bench_log "warning: fewer than 2 cores; pinning cannot separate the generator from the origin"

bench_init
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

bench_start_origin "$ORIGIN_CORE"

declare -A DESC
DESC[wrk]="$({ wrk -v 2>&1 || true; } | awk 'NR == 1 { print $1, $2 }'): taskset -c $GEN_CORE wrk -t1 -c$CONNS -d<≈N/rate>s --latency URL"
DESC[h2load]="$({ h2load --version 2>&1 || true; } | head -1): taskset -c $GEN_CORE h2load --h1 -t1 -c$CONNS -n$N URL"
DESC[ab]="ab $({ ab -V 2>&1 || true; } | awk '/Version/ { print $5 }' | tr -d ,): taskset -c $GEN_CORE ab -k -c $CONNS -n $N URL"

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

ACTIVE=()
for g in $GENERATORS; do
    if [ "$g" = loader ] || [ "$g" = loader-dist ]; then
        if [ -z "${NO_BUILD:-}" ] && [ -z "${BUILT:-}" ]; then
            BUILT=1
            bench_log "building our loader: cargo build --release -p loader"
            cargo build --release -q -p loader || bench_log "SKIP loader: cargo build --release -p loader failed"
        fi
        if [ ! -x "$LOADER_BIN" ]; then
            bench_log "SKIP loader: $LOADER_BIN not found"
            continue
        fi
        DESC[loader]="taskset -c $GEN_CORE $LOADER_BIN --threads 1 -c $CONNS -n $N -q URL"
        DESC[loader-dist]="${DESC[loader]/-q/-q --hdr-log FILE --shard 1/1}"
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
    [ "$ok" = 1 ] && ACTIVE+=("$g")
done
[ "${#ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

bench_log "machine: $(bench_machine)"
bench_log "generators: ${ACTIVE[*]}; sizes: $SIZES; $ROUNDS rounds of $N requests"

# Warm-up (not recorded), and wrk's duration per size: about N requests at its warm-up rate.
declare -A WRK_S
for size in $SIZES; do
    url="http://127.0.0.1:$ORIGIN_PORT/$size"
    WRK_SECONDS=2
    res=$(gen_run wrk "$url" 0) || bench_die "wrk warm-up failed: $(tail -c 1500 "$LOAD_OUT")"
    WRK_S[$size]=$(awk -v n="$N" -v r="${res%% *}" 'BEGIN { s = int(n / r + 0.5); print (s < 1 ? 1 : s) }')
done

# run_one ROUND SIZE GEN: appends "size round gen rps p99_us completed errors user_us kernel_us
# origin_us" to $OUT.
run_one() {
    local round=$1 size=$2 g=$3 res obefore oafter
    WRK_SECONDS=${WRK_S[$size]}
    obefore=$(cpu_us_tree "$ORIGIN_PID")
    res=$(gen_run "$g" "http://127.0.0.1:$ORIGIN_PORT/$size" "$N") || res=""
    oafter=$(cpu_us_tree "$ORIGIN_PID")
    if [ -z "$res" ]; then
        bench_log "round $round $size $g: run failed: $(tail -c 1500 "$LOAD_OUT")"
        return 0
    fi
    local rps p99 n err u k
    read -r rps p99 n err u k <<<"$res"
    [ "$err" -gt 0 ] && bench_log "round $round $size $g: $err errors reported"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$round" "$g" "$rps" "$p99" "$n" "$err" "$u" "$k" \
        "$(($((${oafter% *} + ${oafter#* })) - $((${obefore% *} + ${obefore#* }))))" >>"$OUT"
}

n_active=${#ACTIVE[@]}
for ((round = 1; round <= ROUNDS; round++)); do
    for size in $SIZES; do
        for ((i = 0; i < n_active; i++)); do
            g=${ACTIVE[$(((i + round - 1) % n_active))]}
            bench_log "round $round/$ROUNDS: /$size $g"
            run_one "$round" "$size" "$g"
        done
    done
done

# --- the report ---------------------------------------------------------------------------------

# per_req GEN ROUND SIZE: "TOTAL USER KERNEL" generator µs per request, or "- - -".
per_req() {
    awk -F'\t' -v g="$1" -v r="$2" -v s="$3" '
        $1 == s && $2 == r && $3 == g && $6 > 0 {
            printf "%.2f %.2f %.2f\n", ($8 + $9) / $6, $8 / $6, $9 / $6; found = 1 }
        END { if (!found) print "- - -" }' "$OUT"
}

echo
echo "# loader_vs_peers: $(date -u +%Y-%m-%dT%H:%MZ), $(bench_machine)"
echo "# origin: nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), 1 worker, on core $ORIGIN_CORE (benches/peers/nginx-origin.conf)"
echo "# each generator alone on core $GEN_CORE, 1 thread, $CONNS keep-alive connections, $N requests per run"
for g in "${ACTIVE[@]}"; do echo "#   $g: ${DESC[$g]}"; done
echo "#   (wrk: -d per size: $(for s in $SIZES; do printf '/%s %ss ' "$s" "${WRK_S[$s]}"; done))"
echo "# gen µs/req = the generator's user+kernel CPU time (rusage, all threads) ÷ completed requests"
echo "# vs wrk = gen µs/req ÷ wrk's in the same round (paired); summary = median [min-max] over rounds"

for size in $SIZES; do
    echo
    echo "## ${BODY_LEN[$size]} B responses"
    printf '%-5s %-11s %10s %9s %9s %7s %10s %8s %8s %8s %9s\n' \
        round gen req/s p99_ms completed errors gen_us/req user kernel vs_wrk origin_us/req
    for ((round = 1; round <= ROUNDS; round++)); do
        w=$(per_req wrk "$round" "$size")
        for g in "${ACTIVE[@]}"; do
            awk -F'\t' -v s="$size" -v r="$round" -v g="$g" '$1 == s && $2 == r && $3 == g' "$OUT" |
                while IFS=$'\t' read -r _ _ _ rps p99 n err _ _ ou; do
                    read -r tot u k <<<"$(per_req "$g" "$round" "$size")"
                    printf '%-5s %-11s %10.0f %9s %9s %7s %10s %8s %8s %8s %9s\n' "$round" "$g" "$rps" \
                        "$(div "$p99" 1000 %.2f)" "$n" "$err" "$tot" "$u" "$k" "$(div "$tot" "${w%% *}")" \
                        "$(div "$ou" "$n" %.2f)"
                done
        done
    done
    echo "summary: median [min-max] over $ROUNDS rounds"
    printf '%-11s %-24s %-22s %-22s %-20s %-20s %-20s\n' gen req/s p99_ms gen_us/req user kernel vs_wrk
    for g in "${ACTIVE[@]}"; do
        rps=() p99=() tot=() us=() ks=() ratio=()
        for ((round = 1; round <= ROUNDS; round++)); do
            line=$(awk -F'\t' -v s="$size" -v r="$round" -v g="$g" \
                '$1 == s && $2 == r && $3 == g { print $4, $5 }' "$OUT")
            [ -z "$line" ] && continue
            rps+=("${line% *}")
            p99+=("$(div "${line#* }" 1000 %.3f)")
            read -r a b c <<<"$(per_req "$g" "$round" "$size")"
            tot+=("$a") us+=("$b") ks+=("$c")
            w=$(per_req wrk "$round" "$size")
            ratio+=("$(div "$a" "${w%% *}")")
        done
        printf '%-11s %-24s %-22s %-22s %-20s %-20s %-20s\n' "$g" \
            "$(FMT=%.0f fmt_spread "${rps[@]}")" "$(fmt_spread "${p99[@]}")" "$(fmt_spread "${tot[@]}")" \
            "$(fmt_spread "${us[@]}")" "$(fmt_spread "${ks[@]}")" "$(FMT=%.3f fmt_spread "${ratio[@]}")"
    done
done

echo
echo "# raw results (TSV: size round gen req/s p99_us completed errors user_us kernel_us origin_us): $OUT"
echo
bench_print_configs nginx-origin.conf
