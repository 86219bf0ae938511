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
#   TARGETS="ours ours-memory" SIZES="2k 8k 32k" MODES=keepalive ROUNDS=5 benches/cache_vs_peers.sh
#                                   # sendfile from the memfd against every body from memory
#   BASE_BIN=/tmp/proxy-before MODES=keepalive benches/cache_vs_peers.sh   # A/B: "base" beside "ours"
#
# Environment: ROUNDS, DURATION, CONNS (64), SEED_N (100), SEED_C (10), SIZES ("64 32k"; 2k and
# 8k exist too), MODES ("keepalive seed"), TARGETS ("ours nginx varnish"; `ours-memory` adds ours
# with --cache-no-sendfile; `base`, added when BASE_BIN is set, is another build of our proxy
# started like ours with BASE_ARGS, default PROXY_ARGS), ORIGIN (see benches/lib.sh), LOAD_CORE (0: wrk/ab), SERVER_CORE (1: the server under test; the
# origin shares it, but a hit never reaches the origin), PROXY_BIN (default
# target/release/proxy), PROXY_ARGS, NO_BUILD=1, OUT, KEEP_TMP=1.
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
BASE_BIN=${BASE_BIN:-}
if [ -n "$BASE_BIN" ]; then TARGETS=${TARGETS:-"ours base nginx varnish"}; else TARGETS=${TARGETS:-"ours nginx varnish"}; fi
LOAD_CORE=${LOAD_CORE:-0}
SERVER_CORE=${SERVER_CORE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
OUT=${OUT:-target/bench-results/cache_vs_peers-$(date -u +%Y%m%dT%H%M%SZ).tsv}

bench_require wrk ab curl taskset envsubst ss
bench_want "$TARGETS" nginx && bench_require nginx
bench_want "$TARGETS" varnish && bench_require varnishd
bench_init
bench_open_out "$OUT"
bench_start_origin "$SERVER_CORE"

# --- the targets: ours, nginx and Varnish in front of the same origin ---------------------------

declare -A PORT
# check_target NAME: 20 GETs of each size answer 200 with the file's length, and the last
# one is a cache hit.
check_target() {
    bench_check_bodies "$1" "${PORT[$1]}" || return 1
    local size hdr
    for size in $SIZES; do
        hdr=$(curl -s -D - -o /dev/null "http://127.0.0.1:${PORT[$1]}/$size") || return 1
        if ! grep -qi '^x-cache: *hit' <<<"$hdr"; then
            bench_log "$1: /$size is not a hit after 20 requests: $hdr"
            return 1
        fi
    done
}

bench_build proxy || bench_die "cargo build failed"
for t in $TARGETS; do
    PORT[$t]=$(bench_free_port)
    case $t in
    ours)
        [ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found (cargo build --release -p proxy)"
        # shellcheck disable=SC2206 # PROXY_ARGS is split into words on purpose
        ours=("$PROXY_BIN" --listen "127.0.0.1:${PORT[ours]}" --upstream "127.0.0.1:$ORIGIN_PORT"
            --cache 64MiB --workers 1 --no-pin ${PROXY_ARGS:-})
        BENCH_DESC[ours]="taskset -c $SERVER_CORE ${ours[*]}"
        bench_start_target ours "${PORT[ours]}" "$SERVER_CORE" "$BENCH_TMP/ours.log" "${ours[@]}"
        ;;
    base)
        [ -x "$BASE_BIN" ] || bench_die "target base needs BASE_BIN (another build of our proxy): '$BASE_BIN'"
        # shellcheck disable=SC2206 # BASE_ARGS is split into words on purpose
        base=("$BASE_BIN" --listen "127.0.0.1:${PORT[base]}" --upstream "127.0.0.1:$ORIGIN_PORT"
            --cache 64MiB --workers 1 --no-pin ${BASE_ARGS-${PROXY_ARGS:-}})
        BENCH_DESC[base]="taskset -c $SERVER_CORE ${base[*]}"
        bench_start_target base "${PORT[base]}" "$SERVER_CORE" "$BENCH_TMP/base.log" "${base[@]}"
        ;;
    ours-memory)
        # The same proxy with every body sent from memory (`writev`), none with sendfile from
        # the worker's memfd: the measurement behind the 4 KiB threshold (cache::memfd).
        [ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found (cargo build --release -p proxy)"
        # shellcheck disable=SC2206 # PROXY_ARGS is split into words on purpose
        memory=("$PROXY_BIN" --listen "127.0.0.1:${PORT[ours-memory]}" --upstream "127.0.0.1:$ORIGIN_PORT"
            --cache 64MiB --cache-no-sendfile --workers 1 --no-pin ${PROXY_ARGS:-})
        BENCH_DESC[ours-memory]="taskset -c $SERVER_CORE ${memory[*]}"
        bench_start_target ours-memory "${PORT[ours-memory]}" "$SERVER_CORE" "$BENCH_TMP/ours-memory.log" "${memory[@]}"
        ;;
    nginx)
        CACHE_PORT=${PORT[nginx]}
        export CACHE_PORT
        bench_render benches/peers/nginx-cache.conf "$BENCH_TMP/nginx-cache.conf" TMP ORIGIN_PORT CACHE_PORT
        BENCH_DESC[nginx]="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), benches/peers/nginx-cache.conf"
        bench_start_target nginx "$CACHE_PORT" "$SERVER_CORE" "$BENCH_TMP/nginx-cache.log" \
            "$NGINX" -e "$BENCH_TMP/nginx-cache.error.log" -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-cache.conf"
        ;;
    varnish)
        bench_render benches/peers/varnish.vcl "$BENCH_TMP/varnish.vcl" ORIGIN_PORT
        VARNISHD=$(bench_sbin varnishd)
        BENCH_DESC[varnish]="varnishd $("$VARNISHD" -V 2>&1 | sed -n 's/.*(varnish-\([^ ]*\).*/\1/p' | head -1) -s malloc,64m -t 600, benches/peers/varnish.vcl"
        # -F: foreground (the manager and its cache child stay our descendants, for the CPU
        # count); -j none: no privilege drop (the scratch directory is ours); -t 600: the
        # default ttl, as ours and nginx's 10m.
        bench_start_target varnish "${PORT[varnish]}" "$SERVER_CORE" "$BENCH_TMP/varnish.log" \
            "$VARNISHD" -F -j none -n "$BENCH_TMP/varnish" -a "127.0.0.1:${PORT[varnish]}" \
            -f "$BENCH_TMP/varnish.vcl" -s malloc,64m -t 600
        ;;
    *) bench_die "unknown target $t" ;;
    esac
done
[ "${#BENCH_ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

# --- the runs: cases SIZE/MODE, MODE keepalive (wrk) or seed (the seeds' ab -k) -----------------

bench_size_mode_cases
load_case() {
    local url="http://127.0.0.1:${PORT[$2]}/${1%/*}"
    if [ "${1#*/}" = keepalive ]; then
        load_wrk "$LOAD_CORE" "$CONNS" "$DURATION" "$url"
    else
        load_ab "$LOAD_CORE" "$SEED_C" "$SEED_N" - 1 "$url"
    fi
}
warm_up() { bench_warm_sizes "$1" "${PORT[$1]}"; }

bench_rounds "$ROUNDS" warm_up bench_measure load_case

# --- the report: ratios to nginx and to Varnish -------------------------------------------------

case_title() {
    if [ "${1#*/}" = keepalive ]; then
        echo "cache hit of a ${BODY_LEN[${1%/*}]} B page, keep-alive (wrk)"
    else
        echo "cache hit of a ${BODY_LEN[${1%/*}]} B page, the seeds' ab -kc $SEED_C -n $SEED_N"
    fi
}

bench_report_head cache_vs_peers
echo "# load: keep-alive = wrk -t1 -c$CONNS -d$DURATION --latency; seed = ab -k -c $SEED_C -n $SEED_N (the seeds' run; CPU below tick resolution)"
echo "# every target warmed first: the pages are cache hits in every measured run (X-Cache checked); origin_us/req ~0 shows it"
echo "# pinning: wrk/ab on core $LOAD_CORE; the server under test (and the origin) on core $SERVER_CORE"
bench_report_targets
echo "# us/req = the server's utime+stime (all threads and processes) during the load ÷ completed requests"
echo "# vs_nginx, vs_varnish = the target ÷ nginx, ÷ Varnish in the same round (paired); summary = median [min-max] over rounds"
[ -s "$BENCH_OUT" ] || bench_die "no load succeeded (the messages above say why)"
w=10
for c in "${BENCH_CASES[@]}"; do
    echo
    echo "## $(case_title "$c")"
    bench_report_rounds "$c" "$w" target us/req nginx
    bench_report_summary "$c" "$w" target us/req nginx
    bench_want "${BENCH_ACTIVE[*]}" varnish && bench_report_summary "$c" "$w" target us/req varnish
    # sendfile from the memfd (ours) ÷ every body from memory (ours-memory), paired per round.
    if bench_want "${BENCH_ACTIVE[*]}" ours-memory && bench_want "${BENCH_ACTIVE[*]}" ours; then
        bench_report_summary "$c" "$w" target us/req ours-memory
    fi
done
bench_report_tail nginx-origin.conf nginx-cache.conf varnish.vcl
