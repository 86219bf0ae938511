#!/usr/bin/env bash
# Cache hits (issue 10): our proxy's response cache against nginx `proxy_cache` and Varnish 7
# (`-s malloc`), in front of the same origin, in the same run.
#
# Each target is warmed (the pages are fetched until they are hits), then for each case (a 64 B
# and a 32 KB page × keep-alive clients (wrk) / the seeds' `ab -kc 10 -n 100`) every round loads
# our proxy (1 worker, `--cache 64MiB`), nginx (1 worker, benches/peers/nginx-cache.conf) and
# Varnish (benches/peers/varnish.vcl, all its threads pinned to the same core) one after the
# other, the order rotating each round. Per run it prints req/s, p99 and the server's CPU µs per
# request (user + kernel of the whole process tree, /proc/PID/stat before and after), with the
# ratios to nginx and to Varnish in the same round; then median and [min-max].
# The `seed` mode (100 requests) is there for req/s as the seeds measured it: its CPU figures
# are below the clock-tick resolution and mean nothing.
#
#   benches/cache_vs_peers.sh                        # defaults: ROUNDS=3 DURATION=5s
#   ROUNDS=5 DURATION=10s MODES=keepalive benches/cache_vs_peers.sh
#   PROXY_ARGS="--driver epoll" benches/cache_vs_peers.sh
#
# Environment: ROUNDS, DURATION, CONNS (64), SEED_N (100), SEED_C (10), SIZES ("64 32k"), MODES
# ("keepalive seed"), TARGETS ("ours nginx varnish"), LOAD_CORE (0: wrk/ab), SERVER_CORE (1: the
# server under test; the origin shares it, but a hit never reaches the origin), PROXY_BIN
# (default target/release/proxy), PROXY_ARGS, NO_BUILD=1, OUT, KEEP_TMP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
AB_N=${AB_N:-200000}
SEED_N=${SEED_N:-100}
SEED_C=${SEED_C:-10}
SIZES=${SIZES:-"64 32k"}
MODES=${MODES:-"keepalive seed"}
TARGETS=${TARGETS:-"ours nginx varnish"}
LOAD_CORE=${LOAD_CORE:-0}
SERVER_CORE=${SERVER_CORE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
OUT=${OUT:-target/bench-results/cache_vs_peers-$(date -u +%Y%m%dT%H%M%SZ).tsv}

bench_require wrk ab curl nginx varnishd taskset envsubst ss
bench_init
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

bench_start_origin "$SERVER_CORE"

declare -A PORT PID DESC
ACTIVE=()

# check_target NAME: 20 GETs of each size answer 200 with the file's length, and the last
# one is a cache hit.
check_target() {
    check_lengths "$1" || return 1
    local size hdr
    for size in $SIZES; do
        hdr=$(curl -s -D - -o /dev/null "http://127.0.0.1:${PORT[$1]}/$size") || return 1
        if ! grep -qi '^x-cache: *hit' <<<"$hdr"; then
            bench_log "$1: /$size is not a hit after 20 requests: $hdr"
            return 1
        fi
    done
}

# check_lengths NAME: 20 GETs of each size answer 200 with the file's length.
check_lengths() {
    local t=$1 size out
    for size in $SIZES; do
        out=$(timeout 10 ab -n 20 -c 2 "http://127.0.0.1:${PORT[$t]}/$size" 2>&1) || {
            bench_log "$t: ab failed: $out"
            return 1
        }
        if ! grep -q "^Complete requests: *20$" <<<"$out" || ! grep -q "^Failed requests: *0$" <<<"$out" ||
            grep -q "^Non-2xx responses:" <<<"$out" ||
            ! grep -q "^Document Length: *${BODY_LEN[$size]} bytes" <<<"$out"; then
            bench_log "$t: /$size did not answer 20 × 200 with ${BODY_LEN[$size]} bytes"
            return 1
        fi
    done
}

# start_target NAME CMD...: start CMD pinned to SERVER_CORE, wait for PORT[NAME], check it.
start_target() {
    local t=$1
    shift
    bench_start "$SERVER_CORE" "$BENCH_TMP/$t.log" "$@"
    PID[$t]=$BENCH_LAST_PID
    if bench_wait_port "${PORT[$t]}" "${PID[$t]}" && check_target "$t"; then
        ACTIVE+=("$t")
    else
        bench_log "SKIP $t: $(head -c 2000 "$BENCH_TMP/$t.log")"
        bench_stop "${PID[$t]}"
    fi
}

if [ -z "${NO_BUILD:-}" ]; then
    bench_log "building: cargo build --release -p proxy"
    cargo build --release -q -p proxy || bench_die "cargo build failed"
fi
for t in $TARGETS; do
    case $t in
    ours)
        PORT[ours]=$(bench_free_port)
        [ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found (cargo build --release -p proxy)"
        # shellcheck disable=SC2206 # PROXY_ARGS is split into words on purpose
        ours=("$PROXY_BIN" --listen "127.0.0.1:${PORT[ours]}" --upstream "127.0.0.1:$ORIGIN_PORT"
            --cache 64MiB --workers 1 --no-pin ${PROXY_ARGS:-})
        DESC[ours]="taskset -c $SERVER_CORE ${ours[*]}"
        start_target ours "${ours[@]}"
        ;;
    nginx)
        CACHE_PORT=$(bench_free_port)
        export CACHE_PORT
        PORT[nginx]=$CACHE_PORT
        bench_render benches/peers/nginx-cache.conf "$BENCH_TMP/nginx-cache.conf" TMP ORIGIN_PORT CACHE_PORT
        DESC[nginx]="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), benches/peers/nginx-cache.conf"
        start_target nginx "$NGINX" -e "$BENCH_TMP/nginx-cache.error.log" -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-cache.conf"
        ;;
    varnish)
        PORT[varnish]=$(bench_free_port)
        bench_render benches/peers/varnish.vcl "$BENCH_TMP/varnish.vcl" ORIGIN_PORT
        VARNISHD=$(bench_sbin varnishd)
        DESC[varnish]="varnishd $("$VARNISHD" -V 2>&1 | sed -n 's/.*(varnish-\([^ ]*\).*/\1/p' | head -1) -s malloc,64m -t 600, benches/peers/varnish.vcl"
        # -F: foreground (the manager and its cache child stay our descendants, for the CPU
        # count); -j none: no privilege drop (the scratch directory is ours); -t 600: the
        # default ttl, as ours and nginx's 10m.
        start_target varnish "$VARNISHD" -F -j none -n "$BENCH_TMP/varnish" -a "127.0.0.1:${PORT[varnish]}" \
            -f "$BENCH_TMP/varnish.vcl" -s malloc,64m -t 600
        ;;
    *) bench_die "unknown target $t" ;;
    esac
done

[ "${#ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

# run_one ROUND SIZE MODE TARGET: one bounded load; appends a TSV line to $OUT.
run_one() {
    local round=$1 size=$2 mode=$3 t=$4 url res before after
    url="http://127.0.0.1:${PORT[$t]}/$size"
    before=$(cpu_us_tree "${PID[$t]}")
    if [ "$mode" = keepalive ]; then
        res=$(load_wrk "$LOAD_CORE" "$CONNS" "$DURATION" "$url") || res=""
    else
        res=$(load_ab "$LOAD_CORE" "$SEED_C" "$SEED_N" - 1 "$url") || res=""
    fi
    after=$(cpu_us_tree "${PID[$t]}")
    if [ -z "$res" ]; then
        bench_log "round $round $size $mode $t: load failed: $(tail -c 1500 "$LOAD_OUT")"
        return 0
    fi
    local rps p99 n err
    read -r rps p99 n err _ _ <<<"$res"
    [ "$err" -gt 0 ] && bench_log "round $round $size $mode $t: $err errors reported by the load generator"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$mode" "$round" "$t" "$rps" "$p99" "$n" "$err" \
        "$((${after% *} - ${before% *}))" "$((${after#* } - ${before#* }))" >>"$OUT"
}

bench_log "machine: $(bench_machine)"
bench_log "targets: ${ACTIVE[*]}; sizes: $SIZES; modes: $MODES; $ROUNDS rounds of $DURATION"
for t in "${ACTIVE[@]}"; do
    for size in $SIZES; do
        load_wrk "$LOAD_CORE" "$CONNS" 1s "http://127.0.0.1:${PORT[$t]}/$size" >/dev/null ||
            bench_log "warm-up of $t /$size failed"
    done
done
n_active=${#ACTIVE[@]}
for ((round = 1; round <= ROUNDS; round++)); do
    for size in $SIZES; do
        for mode in $MODES; do
            for ((i = 0; i < n_active; i++)); do
                t=${ACTIVE[$(((i + round - 1) % n_active))]}
                bench_log "round $round/$ROUNDS: $size $mode $t"
                run_one "$round" "$size" "$mode" "$t"
            done
        done
    done
done

# per_req TARGET ROUND SIZE MODE: "TOTAL USER KERNEL" µs per request, or "- - -".
per_req() {
    awk -F'\t' -v t="$1" -v r="$2" -v s="$3" -v m="$4" '
        $1 == s && $2 == m && $3 == r && $4 == t && $7 > 0 {
            printf "%.2f %.2f %.2f\n", ($9 + $10) / $7, $9 / $7, $10 / $7; found = 1 }
        END { if (!found) print "- - -" }' "$OUT"
}

echo
echo "# cache_vs_peers: $(date -u +%Y-%m-%dT%H:%MZ), $(bench_machine)"
echo "# load: keep-alive = wrk -t1 -c$CONNS -d$DURATION --latency; seed = ab -k -c $SEED_C -n $SEED_N (the seeds' run; CPU below tick resolution)"
echo "# every target warmed first: the pages are cache hits in every measured run (X-Cache checked)"
echo "# pinning: wrk/ab on core $LOAD_CORE; the server under test on core $SERVER_CORE"
for t in "${ACTIVE[@]}"; do echo "#   $t: ${DESC[$t]}"; done
echo "# µs/req = the server's utime+stime (all threads and processes) during the load ÷ completed requests"
echo "# vs_nginx, vs_varnish = the target ÷ nginx, ÷ Varnish in the same round (paired); summary = median [min-max] over rounds"
for size in $SIZES; do
    for mode in $MODES; do
        echo
        if [ "$mode" = keepalive ]; then cl="keep-alive (wrk)"; else cl="the seeds' ab -kc $SEED_C -n $SEED_N"; fi
        echo "## cache hit of a ${BODY_LEN[$size]} B page, $cl"
        printf '%-5s %-7s %10s %9s %7s %8s %7s %7s %9s %10s\n' round target req/s p99_ms errors us/req user kernel vs_nginx vs_varnish
        for ((round = 1; round <= ROUNDS; round++)); do
            ng=$(per_req nginx "$round" "$size" "$mode")
            va=$(per_req varnish "$round" "$size" "$mode")
            for t in "${ACTIVE[@]}"; do
                awk -F'\t' -v s="$size" -v m="$mode" -v r="$round" -v t="$t" \
                    '$1 == s && $2 == m && $3 == r && $4 == t' "$OUT" | while IFS=$'\t' read -r _ _ _ _ rps p99 _ err _ _; do
                    read -r tot u k <<<"$(per_req "$t" "$round" "$size" "$mode")"
                    printf '%-5s %-7s %10.0f %9s %7s %8s %7s %7s %9s %10s\n' "$round" "$t" "$rps" \
                        "$(div "$p99" 1000 %.2f)" "$err" "$tot" "$u" "$k" "$(div "$tot" "${ng%% *}")" "$(div "$tot" "${va%% *}")"
                done
            done
        done
        echo "summary: median [min-max] over $ROUNDS rounds"
        printf '%-7s %-24s %-22s %-20s %-20s %-20s\n' target req/s p99_ms us/req vs_nginx vs_varnish
        for t in "${ACTIVE[@]}"; do
            rps=() p99=() tot=() ratio=() vratio=()
            for ((round = 1; round <= ROUNDS; round++)); do
                line=$(awk -F'\t' -v s="$size" -v m="$mode" -v r="$round" -v t="$t" \
                    '$1 == s && $2 == m && $3 == r && $4 == t { print $5, $6 }' "$OUT")
                [ -z "$line" ] && continue
                rps+=("${line% *}")
                p99+=("$(div "${line#* }" 1000 %.3f)")
                read -r a _ _ <<<"$(per_req "$t" "$round" "$size" "$mode")"
                tot+=("$a")
                ng=$(per_req nginx "$round" "$size" "$mode")
                ratio+=("$(div "$a" "${ng%% *}")")
                va=$(per_req varnish "$round" "$size" "$mode")
                vratio+=("$(div "$a" "${va%% *}")")
            done
            printf '%-7s %-24s %-22s %-20s %-20s %-20s\n' "$t" "$(FMT=%.0f fmt_spread "${rps[@]}")" \
                "$(fmt_spread "${p99[@]}")" "$(fmt_spread "${tot[@]}")" "$(FMT=%.3f fmt_spread "${ratio[@]}")" \
                "$(FMT=%.3f fmt_spread "${vratio[@]}")"
        done
    done
done
echo
echo "# raw results (TSV: size mode round target req/s p99_us completed errors user_us kernel_us): $OUT"
echo
bench_print_configs nginx-origin.conf nginx-cache.conf varnish.vcl
