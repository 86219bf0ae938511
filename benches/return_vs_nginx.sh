#!/usr/bin/env bash
# What a `return 302` to a random URL costs: our proxy's `return` route against nginx with
# `set_random` + `return 302` (the seeds' openresty directive), one worker each, same run.
#
# Two loads, each bounded in count and time, interleaved round by round (the order rotating):
#   keepalive  wrk -t1 -c$CONNS -d$DURATION --latency (the issue's calibration load)
#   ab         ab -n $AB_N -c $AB_C -t $AB_TIME, no -k: the seeds' `ab -n 100000 -c 10`, a
#              connection per request (all 100000 unless the time bound comes first)
# Per run: req/s, p99, errors, and the server's CPU µs per request (utime+stime of the whole
# process tree from /proc/PID/stat before and after the load, ÷ completed requests), with the
# ratio to nginx in the same round; then median [min-max] over the rounds. Before measuring,
# each target must answer 302 with a Location in http://img.example.com/{1..21}.png.
#
#   benches/return_vs_nginx.sh                          # ROUNDS=3 DURATION=5s
#   ROUNDS=5 DURATION=10s benches/return_vs_nginx.sh    # on a quiet machine
#   MODES=ab AB_N=100000 AB_C=10 benches/return_vs_nginx.sh
#
# Environment: ROUNDS (3), DURATION (5s, wrk), CONNS (64, wrk), AB_N (100000), AB_C (10),
# AB_TIME (60s, ab's time bound), MODES ("keepalive ab"), TARGETS ("ours nginx"), LOAD_CORE (0), SERVER_CORE (1),
# PROXY_BIN (default target/release/proxy, built here unless NO_BUILD=1), PROXY_ARGS (extra
# flags for it), OUT (raw TSV path), KEEP_TMP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
AB_N=${AB_N:-100000}
AB_C=${AB_C:-10}
AB_TIME=${AB_TIME:-60s}
MODES=${MODES:-"keepalive ab"}
TARGETS=${TARGETS:-"ours nginx"}
LOAD_CORE=${LOAD_CORE:-0}
SERVER_CORE=${SERVER_CORE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
OUT=${OUT:-target/bench-results/return_vs_nginx-$(date -u +%Y%m%dT%H%M%SZ).tsv}
SET_MISC=/usr/lib/nginx/modules/ngx_http_set_misc_module.so

bench_require wrk ab nginx taskset envsubst ss curl
want() { [[ " $TARGETS " == *" $1 "* ]]; }
if want nginx && [ ! -e "$SET_MISC" ]; then
    bench_die "nginx's set-misc module is missing ($SET_MISC): run scripts/install-peers.sh"
fi
[ "$(nproc)" -ge 2 ] || bench_log "warning: fewer than 2 cores; pinning cannot separate the server from the load"

bench_init
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
export TMP=$BENCH_TMP
NGINX=$(bench_sbin nginx)

declare -A PORT PID DESC
ACTIVE=()

# check_target NAME: 20 requests, each a 302 to one of the 21 avatars.
check_target() {
    local t=$1 i loc n
    for ((i = 0; i < 20; i++)); do
        loc=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' --max-time 5 \
            "http://127.0.0.1:${PORT[$t]}/avatar") || return 1
        n=${loc#302 http://img.example.com/}
        n=${n%.png}
        if [[ ! "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 21 ]; then
            bench_log "$t: expected a 302 to http://img.example.com/{1..21}.png, got: $loc"
            return 1
        fi
    done
}

# start_target NAME LOG CMD...: start, wait for the port, check, or skip with the log.
start_target() {
    local t=$1 log=$2
    shift 2
    bench_start "$SERVER_CORE" "$log" "$@"
    PID[$t]=$BENCH_LAST_PID
    if bench_wait_port "${PORT[$t]}" "${PID[$t]}" && check_target "$t"; then
        ACTIVE+=("$t")
    else
        bench_log "SKIP $t: $(head -c 2000 "$log" 2>/dev/null)"
        bench_stop "${PID[$t]}"
    fi
}

if want ours; then
    if [ -z "${NO_BUILD:-}" ]; then
        bench_log "building our proxy: cargo build --release -p proxy"
        cargo build --release -q -p proxy || bench_die "cargo build --release -p proxy failed"
    fi
    [ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found"
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    PORT[ours]=$PROXY_PORT
    bench_render benches/peers/proxy-return.toml "$BENCH_TMP/proxy-return.toml" PROXY_PORT
    # shellcheck disable=SC2206 # PROXY_ARGS is split into words on purpose
    cmd=("$PROXY_BIN" --config "$BENCH_TMP/proxy-return.toml" --workers 1 --no-pin ${PROXY_ARGS:-})
    DESC[ours]="taskset -c $SERVER_CORE ${cmd[*]} (benches/peers/proxy-return.toml)"
    start_target ours "$BENCH_TMP/ours.log" "${cmd[@]}"
fi

if want nginx; then
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    PORT[nginx]=$PROXY_PORT
    bench_render benches/peers/nginx-return.conf "$BENCH_TMP/nginx-return.conf" TMP PROXY_PORT
    DESC[nginx]="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///') + set-misc, benches/peers/nginx-return.conf"
    start_target nginx "$BENCH_TMP/nginx-return.log" "$NGINX" -e "$BENCH_TMP/nginx-return.error.log" \
        -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-return.conf"
fi

[ "${#ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

# run_one ROUND MODE TARGET: one bounded load; appends a TSV line to $OUT.
run_one() {
    local round=$1 mode=$2 t=$3 url res before after
    url="http://127.0.0.1:${PORT[$t]}/avatar"
    before=$(cpu_us_tree "${PID[$t]}")
    if [ "$mode" = keepalive ]; then
        res=$(load_wrk "$LOAD_CORE" "$CONNS" "$DURATION" "$url") || res=""
    else
        res=$(load_ab "$LOAD_CORE" "$AB_C" "$AB_N" "$AB_TIME" 0 "$url") || res=""
    fi
    after=$(cpu_us_tree "${PID[$t]}")
    if [ -z "$res" ]; then
        bench_log "round $round $mode $t: load failed: $(tail -c 1500 "$LOAD_OUT")"
        return 0
    fi
    local rps p99 n err
    read -r rps p99 n err _ _ <<<"$res"
    if [ "$mode" = ab ]; then
        # ab counts every 302 as "Non-2xx": errors here are failed requests only.
        err=$(awk '/^Failed requests:/ { print $3 }' "$LOAD_OUT")
    fi
    [ "${err:-0}" -gt 0 ] && bench_log "round $round $mode $t: $err errors reported by the load generator"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$round" "$t" "$rps" "$p99" "$n" "${err:-0}" \
        "$((${after% *} - ${before% *}))" "$((${after#* } - ${before#* }))" >>"$OUT"
}

bench_log "machine: $(bench_machine)"
bench_log "targets: ${ACTIVE[*]}; modes: $MODES; $ROUNDS rounds"

# Warm-up (not recorded).
for t in "${ACTIVE[@]}"; do
    load_wrk "$LOAD_CORE" "$CONNS" 1s "http://127.0.0.1:${PORT[$t]}/avatar" >/dev/null ||
        bench_log "warm-up of $t failed"
done

n_active=${#ACTIVE[@]}
for ((round = 1; round <= ROUNDS; round++)); do
    for mode in $MODES; do
        for ((i = 0; i < n_active; i++)); do
            t=${ACTIVE[$(((i + round - 1) % n_active))]}
            bench_log "round $round/$ROUNDS: $mode $t"
            run_one "$round" "$mode" "$t"
        done
    done
done

# --- the report ---------------------------------------------------------------------------------

# per_req TARGET ROUND MODE: "TOTAL USER KERNEL" server µs per request, or "- - -".
per_req() {
    awk -F'\t' -v t="$1" -v r="$2" -v m="$3" '
        $1 == m && $2 == r && $3 == t && $6 > 0 {
            printf "%.2f %.2f %.2f\n", ($8 + $9) / $6, $8 / $6, $9 / $6; found = 1 }
        END { if (!found) print "- - -" }' "$OUT"
}

echo
echo "# return_vs_nginx: $(date -u +%Y-%m-%dT%H:%MZ), $(bench_machine)"
echo "# keepalive = wrk -t1 -c$CONNS -d$DURATION --latency; ab = ab -n $AB_N -c $AB_C -t $(dur_s "$AB_TIME") (no -k)"
echo "# pinning: wrk/ab on core $LOAD_CORE; the server under test on core $SERVER_CORE"
for t in "${ACTIVE[@]}"; do echo "#   $t: ${DESC[$t]}"; done
echo "# server µs/req = its utime+stime (all threads and processes) during the load ÷ completed requests"
echo "# vs_nginx = µs/req ÷ nginx's in the same round (paired); summary = median [min-max] over rounds"

for mode in $MODES; do
    echo
    if [ "$mode" = keepalive ]; then echo "## return 302, keep-alive (wrk)"; else echo "## return 302, connection per request (ab, no -k)"; fi
    printf '%-5s %-6s %10s %9s %7s %11s %7s %7s %9s\n' round target req/s p99_ms errors us/req user kernel vs_nginx
    for ((round = 1; round <= ROUNDS; round++)); do
        ng=$(per_req nginx "$round" "$mode")
        for t in "${ACTIVE[@]}"; do
            awk -F'\t' -v m="$mode" -v r="$round" -v t="$t" '$1 == m && $2 == r && $3 == t' "$OUT" |
                while IFS=$'\t' read -r _ _ _ rps p99 _ err _ _; do
                    read -r tot u k <<<"$(per_req "$t" "$round" "$mode")"
                    printf '%-5s %-6s %10.0f %9s %7s %11s %7s %7s %9s\n' "$round" "$t" "$rps" \
                        "$(div "$p99" 1000 %.2f)" "$err" "$tot" "$u" "$k" "$(div "$tot" "${ng%% *}")"
                done
        done
    done
    echo "summary: median [min-max] over $ROUNDS rounds"
    printf '%-6s %-24s %-20s %-20s %-20s %-20s %-20s\n' target req/s p99_ms us/req user kernel vs_nginx
    for t in "${ACTIVE[@]}"; do
        rps=() p99=() tot=() us=() ks=() ratio=()
        for ((round = 1; round <= ROUNDS; round++)); do
            line=$(awk -F'\t' -v m="$mode" -v r="$round" -v t="$t" \
                '$1 == m && $2 == r && $3 == t { print $4, $5 }' "$OUT")
            [ -z "$line" ] && continue
            rps+=("${line% *}")
            p99+=("$(div "${line#* }" 1000 %.3f)")
            read -r a b c <<<"$(per_req "$t" "$round" "$mode")"
            tot+=("$a") us+=("$b") ks+=("$c")
            ng=$(per_req nginx "$round" "$mode")
            ratio+=("$(div "$a" "${ng%% *}")")
        done
        printf '%-6s %-24s %-20s %-20s %-20s %-20s %-20s\n' "$t" \
            "$(FMT=%.0f fmt_spread "${rps[@]}")" "$(fmt_spread "${p99[@]}")" "$(fmt_spread "${tot[@]}")" \
            "$(fmt_spread "${us[@]}")" "$(fmt_spread "${ks[@]}")" "$(FMT=%.3f fmt_spread "${ratio[@]}")"
    done
done

echo
echo "# raw results (TSV: mode round target req/s p99_us completed errors user_us kernel_us): $OUT"
echo
bench_print_configs nginx-return.conf proxy-return.toml
