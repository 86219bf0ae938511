#!/usr/bin/env bash
# 1 worker against 2: what spreading over the cores costs per request, ours and nginx's, in the
# same run.
#
# Our proxy with --workers 1 and --workers 2 and nginx with `worker_processes 1` and `2`, each in
# front of the same origin, as a user runs them on this machine: the proxy allowed on all the
# cores (taskset -c $CORES) and pinning its workers itself, one per core (ours by default, nginx
# with `worker_cpu_affinity auto`); the load (wrk/ab) and the origin on the same cores, not
# pinned to one. Every round loads each of them once, interleaved (the order rotating). Per run:
# req/s, p99 and the proxy's CPU µs per request (user + kernel of all its threads and processes,
# /proc/PID/stat before and after the load); then, paired per round, N workers ÷ 1 worker for
# ours and for nginx (more than 1.0: the second core costs CPU per request, e.g. cross-core
# wake-ups and fewer requests per wake-up) and ours ÷ nginx at each worker count.
#
#   benches/workers_vs_nginx.sh                      # ROUNDS=3 DURATION=5s, 64 B
#   SIZES="64 32k" MODES=keepalive ROUNDS=5 benches/workers_vs_nginx.sh
#   BASE_BIN=/tmp/proxy-before benches/workers_vs_nginx.sh   # A/B: base-1 and base-2 beside ours
#   TARGETS="ours steer nginx" WRK_THREADS=2 benches/workers_vs_nginx.sh   # + steer-2: --steer cpu
#
# Environment: ROUNDS (3), DURATION (5s), CONNS (64), AB_N (200000), SIZES ("64"), MODES
# ("keepalive close"), WORKERS ("1 2": the first is the reference of the N ÷ 1 ratios), TARGETS
# ("ours nginx", plus "base" when BASE_BIN is set: another build of our proxy, with BASE_ARGS,
# default PROXY_ARGS; "steer": ours with --steer cpu, at each worker count above the first),
# WRK_THREADS (1: wrk's threads, each on whichever core; one thread opens every connection from
# one core, which steering by CPU puts on one worker), CORES (every core: 0-(nproc-1)), LOAD_CORE (CORES: wrk/ab and the
# origin), ORIGIN (see benches/lib.sh), PROXY_BIN (default target/release/proxy, built here
# unless NO_BUILD=1), PROXY_ARGS, OUT (raw TSV path), KEEP_TMP=1.
# The targets in the raw TSV are TARGET-N (ours-1, ours-2, nginx-1, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
AB_N=${AB_N:-200000}
SIZES=${SIZES:-64}
MODES=${MODES:-"keepalive close"}
WORKERS=${WORKERS:-"1 2"}
BASE_BIN=${BASE_BIN:-}
if [ -n "$BASE_BIN" ]; then TARGETS=${TARGETS:-"ours base nginx"}; else TARGETS=${TARGETS:-"ours nginx"}; fi
CORES=${CORES:-0-$(($(nproc) - 1))}
LOAD_CORE=${LOAD_CORE:-$CORES}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
OUT=${OUT:-target/bench-results/workers_vs_nginx-$(date -u +%Y%m%dT%H%M%SZ).tsv}
read -r -a WORKER_COUNTS <<<"$WORKERS"
W1=${WORKER_COUNTS[0]}

bench_require wrk ab taskset envsubst ss
bench_want "$TARGETS" nginx && bench_require nginx
[ "$(nproc)" -ge 2 ] || bench_log "warning: one core: N workers share it"

bench_init
bench_open_out "$OUT"
bench_start_origin "$LOAD_CORE"

declare -A PORT
check_target() { bench_check_bodies "$1" "${PORT[$1]}"; }

# start_ours TARGET BIN WORKERS ARGS: our proxy with WORKERS workers (pinned by itself, one per
# core, as by default) in front of the origin, allowed on CORES.
start_ours() {
    local t=$1 bin=$2 n=$3 args=$4
    PORT[$t]=$(bench_free_port)
    # shellcheck disable=SC2206 # the extra flags are split into words on purpose
    local cmd=("$bin" --listen "127.0.0.1:${PORT[$t]}" --upstream "127.0.0.1:$ORIGIN_PORT" --workers "$n"
        --keepalive-requests 10000000 --keepalive-timeout 120s $args)
    BENCH_DESC[$t]="taskset -c $CORES ${cmd[*]}"
    bench_start_target "$t" "${PORT[$t]}" "$CORES" "$BENCH_TMP/$t.log" "${cmd[@]}"
}

# start_nginx TARGET WORKERS: benches/peers/nginx-proxy.conf with `worker_processes WORKERS;
# worker_cpu_affinity auto;` (each worker pinned to its own core, as ours).
start_nginx() {
    local t=$1 n=$2 conf
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    PORT[$t]=$PROXY_PORT
    conf=$BENCH_TMP/nginx-proxy-$n.conf
    bench_render benches/peers/nginx-proxy.conf "$conf" TMP ORIGIN_PORT PROXY_PORT
    sed -i "s/^worker_processes 1;/worker_processes $n;\nworker_cpu_affinity auto;/; s|nginx-proxy.pid|nginx-proxy-$n.pid|" "$conf"
    grep -q "^worker_processes $n;" "$conf" || bench_die "worker_processes not found in benches/peers/nginx-proxy.conf"
    BENCH_DESC[$t]="taskset -c $CORES nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), benches/peers/nginx-proxy.conf with worker_processes $n; worker_cpu_affinity auto"
    bench_start_target "$t" "$PROXY_PORT" "$CORES" "$BENCH_TMP/$t.log" \
        "$NGINX" -e "$BENCH_TMP/$t.error.log" -p "$BENCH_TMP" -c "$conf"
}

for n in "${WORKER_COUNTS[@]}"; do
    if bench_want "$TARGETS" ours; then
        bench_build proxy || bench_die "cargo build --release -p proxy failed"
        [ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found"
        start_ours "ours-$n" "$PROXY_BIN" "$n" "${PROXY_ARGS:-}"
    fi
    if bench_want "$TARGETS" base; then
        [ -x "$BASE_BIN" ] || bench_die "target base needs BASE_BIN (another build of our proxy): '$BASE_BIN'"
        start_ours "base-$n" "$BASE_BIN" "$n" "${BASE_ARGS-${PROXY_ARGS:-}}"
    fi
    if bench_want "$TARGETS" steer && [ "$n" != "$W1" ]; then
        start_ours "steer-$n" "$PROXY_BIN" "$n" "${PROXY_ARGS:-} --steer cpu"
    fi
    if bench_want "$TARGETS" nginx; then start_nginx "nginx-$n" "$n"; fi
done
[ "${#BENCH_ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

bench_size_mode_cases
load_case() { bench_load_size_mode "$1" "${PORT[$2]}"; }
warm_up() { bench_warm_sizes "$1" "${PORT[$1]}"; }

bench_rounds "$ROUNDS" warm_up bench_measure load_case

# --- the report ---------------------------------------------------------------------------------

# ratio_line CASE A B: "A ÷ B  median [min-max]" of the CPU µs/req paired per round.
ratio_line() {
    local c=$1 a=$2 b=$3 round fa fb ta tb r=()
    for ((round = 1; round <= BENCH_ROUNDS; round++)); do
        fa=$(bench_figures "$c" "$round" "$a")
        fb=$(bench_figures "$c" "$round" "$b")
        if [ -z "$fa" ] || [ -z "$fb" ]; then continue; fi
        read -r _ _ _ _ ta _ <<<"$fa"
        read -r _ _ _ _ tb _ <<<"$fb"
        r+=("$(div "$ta" "$tb")")
    done
    printf '%-22s %s\n' "$a ÷ $b" "$(FMT=%.3f fmt_spread ${r[@]+"${r[@]}"})"
}

active() { bench_want "${BENCH_ACTIVE[*]}" "$1"; }
case_title() { echo "proxied $(bench_size_mode_title "$1" "B"), workers: ${WORKERS// / and }"; }

bench_report_head workers_vs_nginx
bench_size_mode_load_line
echo "# cores: the proxies, the load and the origin all on $CORES (each worker pinned to its own core by the proxy)"
bench_report_targets
echo "# proxy µs/req = the proxy's utime+stime (all threads and processes) during the load ÷ completed requests"
echo "# ratios paired per round; summary = median [min-max] over rounds"
[ -s "$BENCH_OUT" ] || bench_die "no load succeeded (the messages above say why)"
for c in "${BENCH_CASES[@]}"; do
    echo
    echo "## $(case_title "$c")"
    bench_report_rounds "$c" 9 target proxy_us/req "nginx-$W1"
    bench_report_summary "$c" 9 target proxy_us/req "nginx-$W1"
    echo "paired ratios of CPU µs/req: median [min-max]"
    for n in "${WORKER_COUNTS[@]:1}"; do
        for t in ours base nginx; do
            if active "$t-$n" && active "$t-$W1"; then ratio_line "$c" "$t-$n" "$t-$W1"; fi
        done
        if active "steer-$n" && active "ours-$W1"; then ratio_line "$c" "steer-$n" "ours-$W1"; fi
        if active "steer-$n" && active "ours-$n"; then ratio_line "$c" "steer-$n" "ours-$n"; fi
    done
    for n in "${WORKER_COUNTS[@]}"; do
        if active "ours-$n" && active "nginx-$n"; then ratio_line "$c" "ours-$n" "nginx-$n"; fi
        if active "ours-$n" && active "base-$n"; then ratio_line "$c" "ours-$n" "base-$n"; fi
    done
    # Where a second worker's cost goes: each sleep is a switch and a wake-up, each preemption
    # a switch; a one-worker baseline that is preempted often makes N ÷ 1 look flat.
    echo "context switches per request, voluntary (slept) / involuntary (preempted), medians:"
    for t in "${BENCH_ACTIVE[@]}"; do
        printf '%-22s %s\n' "$t" "$(bench_switches "$c" "$t")"
    done
done
bench_report_tail nginx-origin.conf "nginx-proxy-$W1.conf"
