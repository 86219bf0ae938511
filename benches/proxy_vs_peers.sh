#!/usr/bin/env bash
# What a reverse proxy costs, against nginx and HAProxy, in the same run.
#
# For each case (response size 64 B / 32 KB × keep-alive clients (wrk) / connection-per-request
# clients (ab without -k)), every round loads, one after the other (interleaved, the order
# rotating each round): the origin directly, our proxy with 1 worker, nginx and HAProxy in front
# of the same origin. Per run it prints req/s, p99, and the proxy's CPU µs per request (user +
# kernel, from /proc/PID/stat before and after the load), with the ratio to nginx in the same
# round; then the median and [min-max] over the rounds.
#
#   benches/proxy_vs_peers.sh                      # defaults: ROUNDS=3 DURATION=5s
#   ROUNDS=5 DURATION=10s benches/proxy_vs_peers.sh
#   TARGETS="direct nginx haproxy" SIZES=64 MODES=keepalive benches/proxy_vs_peers.sh
#   BASE_BIN=/tmp/proxy-old TARGETS="base ours" RATIO_TO=base ROUNDS=5 benches/proxy_vs_peers.sh
#                                                  # a change to our proxy: old build vs new build
#
# Environment: ROUNDS, DURATION (per load), CONNS (64), AB_N (ab's request bound, 200000),
# SIZES ("64 32k"), MODES ("keepalive close"), TARGETS ("direct ours nginx haproxy"),
# LOAD_CORE (0: wrk/ab and the origin), PROXY_CORE (1: the proxy under test), PROXY_BIN (our
# binary; default target/release/proxy, built here unless NO_BUILD=1), PROXY_ARGS (extra flags
# for it, e.g. "--driver epoll"), BASE_BIN (another build of our proxy, target "base", started
# exactly like "ours"), RATIO_TO (the target the ratio column divides by; default nginx), OUT (raw TSV path),
# KEEP_TMP=1 (keep configs and logs).
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
TARGETS=${TARGETS:-"direct ours nginx haproxy"}
LOAD_CORE=${LOAD_CORE:-0}
PROXY_CORE=${PROXY_CORE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
BASE_BIN=${BASE_BIN:-}
RATIO_TO=${RATIO_TO:-nginx}
OUT=${OUT:-target/bench-results/proxy_vs_peers-$(date -u +%Y%m%dT%H%M%SZ).tsv}

bench_require wrk ab nginx taskset envsubst ss
[ "$RATIO_TO" = nginx ] || [[ " $TARGETS " == *" $RATIO_TO "* ]] || bench_die "RATIO_TO=$RATIO_TO is not in TARGETS"
want() { [[ " $TARGETS " == *" $1 "* ]]; }
want haproxy && bench_require haproxy
[ "$(nproc)" -ge 2 ] || bench_log "warning: fewer than 2 cores; pinning cannot separate the proxy from the load"

bench_init
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

# --- the origin ---------------------------------------------------------------------------------

bench_start_origin "$LOAD_CORE"

# --- the proxies --------------------------------------------------------------------------------

declare -A PORT PID DESC
PORT[direct]=$ORIGIN_PORT
PID[direct]=""
DESC[direct]="wrk/ab → origin"

# check_target NAME: a few requests for each size must succeed with the right body length.
check_target() {
    local t=$1 size out
    for size in $SIZES; do
        out=$(timeout 10 ab -n 20 -c 2 "http://127.0.0.1:${PORT[$t]}/$size" 2>&1) || {
            bench_log "$t: ab failed: $out"
            return 1
        }
        if ! grep -q "^Complete requests: *20$" <<<"$out" || ! grep -q "^Failed requests: *0$" <<<"$out" ||
            grep -q "^Non-2xx responses:" <<<"$out" ||
            ! grep -q "^Document Length: *${BODY_LEN[$size]} bytes" <<<"$out"; then
            bench_log "$t: /$size did not answer 20 × 200 with ${BODY_LEN[$size]} bytes:"
            bench_log "$(grep -E '^(Document Length|Complete|Failed|Non-2xx)' <<<"$out")"
            return 1
        fi
    done
}

ACTIVE=()
want direct && ACTIVE+=(direct)

# start_ours TARGET BIN: our proxy (1 worker) in front of the origin, as target TARGET.
start_ours() {
    local t=$1 bin=$2
    if [ ! -x "$bin" ]; then
        bench_log "SKIP $t: $bin not found"
        return 0
    fi
    PORT[$t]=$(bench_free_port)
    # shellcheck disable=SC2206 # PROXY_ARGS is split into words on purpose
    # The same upstream keep-alive settings as nginx-proxy.conf (keepalive_requests,
    # keepalive_timeout), so neither side reconnects more often than the other.
    local cmd=("$bin" --listen "127.0.0.1:${PORT[$t]}" --upstream "127.0.0.1:$ORIGIN_PORT" --workers 1 --no-pin
        --keepalive-requests 10000000 --keepalive-timeout 120s ${PROXY_ARGS:-})
    bench_start "$PROXY_CORE" "$BENCH_TMP/$t.log" "${cmd[@]}"
    PID[$t]=$BENCH_LAST_PID
    DESC[$t]="taskset -c $PROXY_CORE ${cmd[*]}"
    if ! bench_wait_port "${PORT[$t]}" "${PID[$t]}"; then
        bench_log "SKIP $t: $bin did not start listening: $(head -c 2000 "$BENCH_TMP/$t.log")"
        bench_stop "${PID[$t]}"
    elif ! check_target "$t"; then
        bench_log "SKIP $t: it does not proxy correctly"
        bench_stop "${PID[$t]}"
    else
        ACTIVE+=("$t")
    fi
}

if want ours; then
    if [ -z "${NO_BUILD:-}" ]; then
        bench_log "building our proxy: cargo build --release -p proxy"
        cargo build --release -q -p proxy || bench_log "SKIP ours: cargo build --release -p proxy failed"
    fi
    start_ours ours "$PROXY_BIN"
fi
if want base; then
    [ -n "$BASE_BIN" ] || bench_die "target base needs BASE_BIN (another build of our proxy)"
    start_ours base "$BASE_BIN"
fi

if want nginx; then
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    bench_render benches/peers/nginx-proxy.conf "$BENCH_TMP/nginx-proxy.conf" TMP ORIGIN_PORT PROXY_PORT
    PORT[nginx]=$PROXY_PORT
    bench_start "$PROXY_CORE" "$BENCH_TMP/nginx-proxy.log" "$NGINX" -e "$BENCH_TMP/nginx-proxy.error.log" \
        -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-proxy.conf"
    PID[nginx]=$BENCH_LAST_PID
    DESC[nginx]="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), benches/peers/nginx-proxy.conf"
    if bench_wait_port "$PROXY_PORT" "${PID[nginx]}" && check_target nginx; then
        ACTIVE+=(nginx)
    else
        bench_log "SKIP nginx: $(cat "$BENCH_TMP/nginx-proxy.log" "$BENCH_TMP/nginx-proxy.error.log" 2>/dev/null)"
    fi
fi

if want haproxy; then
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    bench_render benches/peers/haproxy.cfg "$BENCH_TMP/haproxy.cfg" TMP ORIGIN_PORT PROXY_PORT
    PORT[haproxy]=$PROXY_PORT
    HAPROXY=$(bench_sbin haproxy)
    bench_start "$PROXY_CORE" "$BENCH_TMP/haproxy.log" "$HAPROXY" -db -f "$BENCH_TMP/haproxy.cfg"
    PID[haproxy]=$BENCH_LAST_PID
    DESC[haproxy]="HAProxy $("$HAPROXY" -v | awk 'NR == 1 { print $3 }'), benches/peers/haproxy.cfg"
    if bench_wait_port "$PROXY_PORT" "${PID[haproxy]}" && check_target haproxy; then
        ACTIVE+=(haproxy)
    else
        bench_log "SKIP haproxy: $(cat "$BENCH_TMP/haproxy.log" 2>/dev/null)"
    fi
fi

[ "${#ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

# --- the runs -----------------------------------------------------------------------------------

# run_one ROUND SIZE MODE TARGET: one bounded load; appends a TSV line to $OUT.
run_one() {
    local round=$1 size=$2 mode=$3 t=$4 url res before after obefore oafter pu=- pk=-
    url="http://127.0.0.1:${PORT[$t]}/$size"
    [ -n "${PID[$t]}" ] && before=$(cpu_us_tree "${PID[$t]}")
    obefore=$(cpu_us_tree "$ORIGIN_PID")
    if [ "$mode" = keepalive ]; then
        res=$(load_wrk "$LOAD_CORE" "$CONNS" "$DURATION" "$url") || res=""
    else
        res=$(load_ab "$LOAD_CORE" "$CONNS" "$AB_N" "$DURATION" 0 "$url") || res=""
    fi
    oafter=$(cpu_us_tree "$ORIGIN_PID")
    [ -n "${PID[$t]}" ] && after=$(cpu_us_tree "${PID[$t]}")
    if [ -z "$res" ]; then
        bench_log "round $round $size $mode $t: load failed: $(tail -c 1500 "$LOAD_OUT")"
        return 0
    fi
    if [ -n "${PID[$t]}" ]; then
        pu=$((${after% *} - ${before% *}))
        pk=$((${after#* } - ${before#* }))
    fi
    local rps p99 n err
    read -r rps p99 n err _ _ <<<"$res"
    [ "$err" -gt 0 ] && bench_log "round $round $size $mode $t: $err errors reported by the load generator"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$mode" "$round" "$t" "$rps" "$p99" "$n" "$err" \
        "$pu" "$pk" "$(($((${oafter% *} + ${oafter#* })) - $((${obefore% *} + ${obefore#* }))))" >>"$OUT"
}

bench_log "machine: $(bench_machine)"
bench_log "targets: ${ACTIVE[*]}; sizes: $SIZES; modes: $MODES; $ROUNDS rounds of $DURATION"

# Warm-up (not recorded): fills the upstream pools and the page cache.
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

# --- the report ---------------------------------------------------------------------------------

# field VALUE...: column N of the TSV rows matching size, mode, target (all rounds).
rows() { awk -F'\t' -v s="$1" -v m="$2" -v t="$3" '$1 == s && $2 == m && $4 == t' "$OUT"; }

# per_req TARGET ROUND SIZE MODE: "TOTAL USER KERNEL" proxy µs per request, or "- - -".
per_req() {
    awk -F'\t' -v t="$1" -v r="$2" -v s="$3" -v m="$4" '
        $1 == s && $2 == m && $3 == r && $4 == t && $9 != "-" && $7 > 0 {
            printf "%.2f %.2f %.2f\n", ($9 + $10) / $7, $9 / $7, $10 / $7; found = 1 }
        END { if (!found) print "- - -" }' "$OUT"
}

echo
echo "# proxy_vs_peers: $(date -u +%Y-%m-%dT%H:%MZ), $(bench_machine)"
echo "# load: keep-alive = wrk -t1 -c$CONNS -d$DURATION --latency; close = ab -c $CONNS -t $(dur_s "$DURATION") -n $AB_N (no -k)"
echo "# pinning: wrk/ab and the origin (nginx, 1 worker) on core $LOAD_CORE; the proxy under test on core $PROXY_CORE"
for t in "${ACTIVE[@]}"; do echo "#   $t: ${DESC[$t]}"; done
echo "# proxy µs/req = the proxy's utime+stime (all threads, /proc/PID/stat) during the load ÷ completed requests"
echo "# vs $RATIO_TO = proxy µs/req ÷ $RATIO_TO's in the same round (paired); summary = median [min-max] over rounds"

for size in $SIZES; do
    for mode in $MODES; do
        echo
        if [ "$mode" = keepalive ]; then cl="keep-alive (wrk)"; else cl="connection per request (ab, no -k)"; fi
        echo "## ${BODY_LEN[$size]} B, $cl"
        printf '%-5s %-8s %10s %9s %8s %12s %8s %8s %9s %9s\n' \
            round target req/s p99_ms errors proxy_us/req user kernel "vs_$RATIO_TO" origin_us/req
        for ((round = 1; round <= ROUNDS; round++)); do
            ng=$(per_req "$RATIO_TO" "$round" "$size" "$mode")
            for t in "${ACTIVE[@]}"; do
                awk -F'\t' -v s="$size" -v m="$mode" -v r="$round" -v t="$t" \
                    '$1 == s && $2 == m && $3 == r && $4 == t' "$OUT" | while IFS=$'\t' read -r _ _ _ _ rps p99 n err _ _ ou; do
                    read -r tot u k <<<"$(per_req "$t" "$round" "$size" "$mode")"
                    ratio=$(div "$tot" "${ng%% *}")
                    [ "$t" = direct ] && ratio=-
                    printf '%-5s %-8s %10.0f %9s %8s %12s %8s %8s %9s %9s\n' "$round" "$t" "$rps" \
                        "$(div "$p99" 1000 %.2f)" "$err" "$tot" "$u" "$k" "$ratio" "$(div "$ou" "$n" %.2f)"
                done
            done
        done
        echo "summary: median [min-max] over $ROUNDS rounds"
        printf '%-8s %-24s %-22s %-22s %-20s %-20s %-20s\n' target req/s p99_ms proxy_us/req user kernel "vs_$RATIO_TO"
        for t in "${ACTIVE[@]}"; do
            rps=() p99=() tot=() us=() ks=() ratio=()
            for ((round = 1; round <= ROUNDS; round++)); do
                line=$(awk -F'\t' -v s="$size" -v m="$mode" -v r="$round" -v t="$t" \
                    '$1 == s && $2 == m && $3 == r && $4 == t { print $5, $6 }' "$OUT")
                [ -z "$line" ] && continue
                rps+=("${line% *}")
                p99+=("$(div "${line#* }" 1000 %.3f)")
                read -r a b c <<<"$(per_req "$t" "$round" "$size" "$mode")"
                tot+=("$a") us+=("$b") ks+=("$c")
                ng=$(per_req "$RATIO_TO" "$round" "$size" "$mode")
                [ "$t" != direct ] && ratio+=("$(div "$a" "${ng%% *}")")
            done
            printf '%-8s %-24s %-22s %-22s %-20s %-20s %-20s\n' "$t" \
                "$(FMT=%.0f fmt_spread "${rps[@]}")" "$(fmt_spread "${p99[@]}")" "$(fmt_spread "${tot[@]}")" \
                "$(fmt_spread "${us[@]}")" "$(fmt_spread "${ks[@]}")" "$(FMT=%.3f fmt_spread "${ratio[@]}")"
        done
    done
done

echo
echo "# raw results (TSV: size mode round target req/s p99_us completed errors proxy_user_us proxy_kernel_us origin_us): $OUT"
echo
bench_print_configs nginx-origin.conf nginx-proxy.conf haproxy.cfg
