#!/usr/bin/env bash
# What a `return 302` to a random URL costs: our proxy's `return` route against nginx with
# `set_random` + `return 302` (the seeds' openresty directive), one worker each, same run.
#
# Three loads, each bounded in count and time, interleaved round by round (the order rotating):
#   keepalive  wrk -t1 -c$CONNS -d$DURATION --latency (the issue's calibration load; closed
#              loop: wrk's one thread is the bottleneck, so a faster server idles more often)
#   ab         ab -n $AB_N -c $AB_C -t $AB_TIME, no -k: the seeds' `ab -n 100000 -c 10`, a
#              connection per request (all 100000 unless the time bound comes first)
#   rate       our loader, open loop at $RATE req/s over $CONNS keep-alive connections for
#              $DURATION (RATE x DURATION requests): the same offered load for every server
#              (not in the default MODES)
# Per run: req/s, p99, errors, and the server's CPU µs per request (utime+stime of the whole
# process tree from /proc/PID/stat before and after the load, ÷ completed requests), with the
# ratio to nginx in the same round; then median [min-max] over the rounds. Before measuring,
# each target must answer 302 with a Location in http://img.example.com/{1..21}.png.
#
#   benches/return_vs_nginx.sh                          # ROUNDS=3 DURATION=5s
#   ROUNDS=5 DURATION=10s benches/return_vs_nginx.sh    # on a quiet machine
#   MODES=ab AB_N=100000 AB_C=10 benches/return_vs_nginx.sh
#   BASE_BIN=/path/to/old/proxy benches/return_vs_nginx.sh   # A/B: "base" runs beside "ours"
#   BASE_BIN=target/release/proxy BASE_ARGS="--driver epoll" benches/return_vs_nginx.sh
#   TARGETS="ours floor nginx" benches/return_vs_nginx.sh  # with the floor: a server on our
#                                               # runtime that reads and answers, nothing else
#
# Environment: ROUNDS (3), DURATION (5s, wrk and rate), CONNS (64, wrk and rate), RATE (100000,
# req/s), LOADER_BIN (default target/release/loader, built here unless NO_BUILD=1), AB_N (100000), AB_C (10),
# AB_TIME (60s, ab's time bound), MODES ("keepalive ab"), TARGETS ("ours nginx", plus "base"
# when BASE_BIN is set: a second proxy binary, e.g. the previous commit's, measured the same
# way in the same rounds; BASE_ARGS: its flags, default PROXY_ARGS; "floor": benches/src/bin/
# floor.rs, FLOOR_BIN, FLOOR_ARGS e.g. --no-multishot), LOAD_CORE (0), SERVER_CORE (1),
# PROXY_BIN (default target/release/proxy, built here unless NO_BUILD=1), PROXY_ARGS (extra
# flags for it), OUT (raw TSV path), KEEP_TMP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
RATE=${RATE:-100000}
AB_N=${AB_N:-100000}
AB_C=${AB_C:-10}
AB_TIME=${AB_TIME:-60s}
MODES=${MODES:-"keepalive ab"}
BASE_BIN=${BASE_BIN:-}
if [ -n "$BASE_BIN" ]; then TARGETS=${TARGETS:-"ours base nginx"}; else TARGETS=${TARGETS:-"ours nginx"}; fi
LOAD_CORE=${LOAD_CORE:-0}
SERVER_CORE=${SERVER_CORE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
LOADER_BIN=${LOADER_BIN:-$TARGET_DIR/release/loader}
FLOOR_BIN=${FLOOR_BIN:-$TARGET_DIR/release/floor}
OUT=${OUT:-target/bench-results/return_vs_nginx-$(date -u +%Y%m%dT%H%M%SZ).tsv}
SET_MISC=/usr/lib/nginx/modules/ngx_http_set_misc_module.so

bench_require wrk ab taskset envsubst ss curl
bench_want "$TARGETS" nginx && bench_require nginx
if bench_want "$TARGETS" nginx && [ ! -e "$SET_MISC" ]; then
    bench_die "nginx's set-misc module is missing ($SET_MISC): run scripts/install-peers.sh"
fi
[ "$(nproc)" -ge 2 ] || bench_log "warning: fewer than 2 cores; pinning cannot separate the server from the load"

bench_init
bench_open_out "$OUT"
export TMP=$BENCH_TMP
NGINX=$(bench_sbin nginx)

# --- the targets: ours and nginx, each answering by itself --------------------------------------

declare -A PORT

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

if bench_want "$TARGETS" ours; then
    bench_build proxy || bench_die "cargo build --release -p proxy failed"
    [ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found"
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    PORT[ours]=$PROXY_PORT
    bench_render benches/peers/proxy-return.toml "$BENCH_TMP/proxy-return.toml" PROXY_PORT
    # shellcheck disable=SC2206 # PROXY_ARGS is split into words on purpose
    cmd=("$PROXY_BIN" --config "$BENCH_TMP/proxy-return.toml" --workers 1 --no-pin ${PROXY_ARGS:-})
    BENCH_DESC[ours]="taskset -c $SERVER_CORE ${cmd[*]} (benches/peers/proxy-return.toml)"
    bench_start_target ours "$PROXY_PORT" "$SERVER_CORE" "$BENCH_TMP/ours.log" "${cmd[@]}"
fi

if bench_want "$TARGETS" base; then
    [ -x "$BASE_BIN" ] || bench_die "BASE_BIN ($BASE_BIN) is not an executable"
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    PORT[base]=$PROXY_PORT
    bench_render benches/peers/proxy-return.toml "$BENCH_TMP/proxy-return-base.toml" PROXY_PORT
    # shellcheck disable=SC2206 # PROXY_ARGS is split into words on purpose
    cmd=("$BASE_BIN" --config "$BENCH_TMP/proxy-return-base.toml" --workers 1 --no-pin ${BASE_ARGS:-${PROXY_ARGS:-}})
    BENCH_DESC[base]="taskset -c $SERVER_CORE ${cmd[*]} (benches/peers/proxy-return.toml)"
    bench_start_target base "$PROXY_PORT" "$SERVER_CORE" "$BENCH_TMP/base.log" "${cmd[@]}"
fi

if bench_want "$TARGETS" floor; then
    # The do-nothing server (benches/src/bin/floor.rs): what the kernel and our runtime cost.
    [ -n "${NO_BUILD:-}" ] || cargo build --release -q -p benches --bin floor ||
        bench_die "cargo build --release -p benches --bin floor failed"
    [ -x "$FLOOR_BIN" ] || bench_die "$FLOOR_BIN not found"
    PORT[floor]=$(bench_free_port)
    # shellcheck disable=SC2206 # FLOOR_ARGS is split into words on purpose
    cmd=("$FLOOR_BIN" "127.0.0.1:${PORT[floor]}" ${FLOOR_ARGS:-})
    BENCH_DESC[floor]="taskset -c $SERVER_CORE ${cmd[*]} (benches/src/bin/floor.rs: reads and answers, nothing else)"
    bench_start_target floor "${PORT[floor]}" "$SERVER_CORE" "$BENCH_TMP/floor.log" "${cmd[@]}"
fi

if bench_want "$TARGETS" nginx; then
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    PORT[nginx]=$PROXY_PORT
    bench_render benches/peers/nginx-return.conf "$BENCH_TMP/nginx-return.conf" TMP PROXY_PORT
    BENCH_DESC[nginx]="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///') + set-misc, benches/peers/nginx-return.conf"
    bench_start_target nginx "$PROXY_PORT" "$SERVER_CORE" "$BENCH_TMP/nginx-return.log" \
        "$NGINX" -e "$BENCH_TMP/nginx-return.error.log" -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-return.conf"
fi

if bench_want "$MODES" rate; then
    bench_build loader || bench_die "cargo build --release -p loader failed"
    [ -x "$LOADER_BIN" ] || bench_die "$LOADER_BIN not found"
fi

[ "${#BENCH_ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

# --- the runs: one case per mode ----------------------------------------------------------------

read -r -a BENCH_CASES <<<"$MODES"

# load_case MODE TARGET: wrk (keep-alive, DURATION), ab (no -k, AB_N requests, AB_TIME) or
# our loader at RATE (keep-alive, RATE x DURATION requests).
load_case() {
    local url="http://127.0.0.1:${PORT[$2]}/avatar" res rps p99 n u k
    if [ "$1" = keepalive ]; then
        load_wrk "$LOAD_CORE" "$CONNS" "$DURATION" "$url"
        return
    fi
    if [ "$1" = rate ]; then
        LOADER_FLAGS=(--rate "$RATE")
        res=$(load_loader "$LOADER_BIN" "$LOAD_CORE" "$CONNS" "$((RATE * $(dur_s "$DURATION")))" \
            "$DURATION" "$url") || return 1
    else
        res=$(load_ab "$LOAD_CORE" "$AB_C" "$AB_N" "$AB_TIME" 0 "$url") || return 1
    fi
    read -r rps p99 n _ u k <<<"$res"
    # ab and the loader count every 302 as "Non-2xx": errors here are failed requests only.
    local n_failed
    n_failed=$(awk '/^Failed requests:/ { print $3 }' "$LOAD_OUT")
    echo "$rps $p99 $n ${n_failed:-0} $u $k"
}

# warm_up TARGET: not recorded.
warm_up() {
    load_wrk "$LOAD_CORE" "$CONNS" 1s "http://127.0.0.1:${PORT[$1]}/avatar" >/dev/null ||
        bench_log "warm-up of $1 failed"
}

bench_rounds "$ROUNDS" warm_up bench_measure load_case

# --- the report ---------------------------------------------------------------------------------

case_title() {
    if [ "$1" = keepalive ]; then
        echo "return 302, keep-alive (wrk)"
    elif [ "$1" = rate ]; then
        echo "return 302, keep-alive at $RATE req/s (our loader, open loop)"
    else
        echo "return 302, connection per request (ab, no -k)"
    fi
}

bench_report_head return_vs_nginx
echo "# keepalive = wrk -t1 -c$CONNS -d$DURATION --latency; ab = ab -n $AB_N -c $AB_C -t $(dur_s "$AB_TIME") (no -k)"
echo "# rate = loader --threads 1 -c $CONNS --rate $RATE -n $((RATE * $(dur_s "$DURATION"))) (open loop, keep-alive)"
echo "# pinning: wrk/ab on core $LOAD_CORE; the server under test on core $SERVER_CORE"
bench_report_targets
echo "# server µs/req = its utime+stime (all threads and processes) during the load ÷ completed requests"
echo "# vs_nginx = µs/req ÷ nginx's in the same round (paired); summary = median [min-max] over rounds"
bench_report case_title target us/req nginx
bench_report_tail nginx-return.conf proxy-return.toml
