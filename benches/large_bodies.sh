#!/usr/bin/env bash
# Large bodies through a proxy: CPU per MiB relayed and the proxy's peak resident memory while
# CONNS clients (100) each stream a 100 MiB file (nginx origin from disk, sendfile on), ours
# against nginx with `proxy_buffering on` (its default) and `off`, interleaved, ROUNDS rounds.
#
#   benches/large_bodies.sh                        # ROUNDS=3 DURATION=6s CONNS=100
#   NO_BUILD=1 BASE_BIN=/tmp/proxy-old TARGETS="base ours nginx nginx-nobuf" benches/large_bodies.sh
#
# Per run: MiB/s received by wrk, the proxy's CPU µs per MiB (user + kernel, all threads, from
# /proc/PID/stat around the load; nginx: master and worker), and its peak RSS (VmHWM is not reset
# between runs, so the peak is sampled from VmRSS every 0.1 s during the load). Pinning as in
# proxy_vs_peers.sh: wrk and the origin on LOAD_CORE (0), the proxy on PROXY_CORE (1).
# shellcheck source=benches/lib.sh
. "$(dirname "$0")/lib.sh"
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-6s}
CONNS=${CONNS:-100}
LOAD_CORE=${LOAD_CORE:-0}
PROXY_CORE=${PROXY_CORE:-1}
TARGETS=${TARGETS:-"ours nginx nginx-nobuf"}
PROXY_BIN=${PROXY_BIN:-${CARGO_TARGET_DIR:-target}/release/proxy}
bench_require wrk taskset envsubst
cd "$BENCH_ROOT"
bench_build proxy || bench_die "cargo build --release -p proxy failed"

bench_init
bench_start_origin "$LOAD_CORE"
head -c $((100 << 20)) /dev/zero | tr '\0' 'f' >"$BENCH_TMP/www/100m"
chmod a+r "$BENCH_TMP/www/100m"

declare -A PID PORT
start_target() {
    local t=$1 port
    port=$(bench_free_port)
    PORT[$t]=$port
    case $t in
    ours | base)
        local bin=$PROXY_BIN
        [ "$t" = base ] && bin=${BASE_BIN:?BASE_BIN names the other build}
        bench_start "$PROXY_CORE" "$BENCH_TMP/$t.log" "$bin" --listen "127.0.0.1:$port" \
            --upstream "127.0.0.1:$ORIGIN_PORT" --workers 1 --no-pin
        ;;
    nginx | nginx-nobuf)
        PROXY_PORT=$port
        export PROXY_PORT
        bench_render benches/peers/nginx-proxy.conf "$BENCH_TMP/$t.conf" TMP ORIGIN_PORT PROXY_PORT
        sed -i "s|nginx-proxy.pid|$t.pid|" "$BENCH_TMP/$t.conf"
        if [ "$t" = nginx-nobuf ]; then
            sed -i 's|proxy_max_temp_file_size 0;|proxy_max_temp_file_size 0; proxy_buffering off;|' "$BENCH_TMP/$t.conf"
        fi
        bench_start "$PROXY_CORE" "$BENCH_TMP/$t.log" "$NGINX" -e "$BENCH_TMP/$t.error.log" -p "$BENCH_TMP" -c "$BENCH_TMP/$t.conf"
        ;;
    *) bench_die "unknown target $t" ;;
    esac
    PID[$t]=$BENCH_LAST_PID
    bench_wait_port "$port" "${PID[$t]}" || bench_die "$t did not start: $(head -c 2000 "$BENCH_TMP/$t.log")"
}

# rss_kib_tree PID: resident KiB of PID and its descendants.
rss_kib_tree() {
    local p sum=0 v
    for p in $(bench_descendants "$1"); do
        v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null) || continue
        sum=$((sum + ${v:-0}))
    done
    echo "$sum"
}

# run TARGET ROUND: one load; prints a result row.
run() {
    local t=$1 round=$2 before after peak=0 r sampler n mib out="$BENCH_TMP/wrk.out"
    before=$(cpu_us_tree "${PID[$t]}")
    (
        while :; do
            rss_kib_tree "${PID[$t]}"
            sleep 0.1
        done
    ) >"$BENCH_TMP/rss" &
    sampler=$!
    timeout --kill-after=5 "$(($(dur_s "$DURATION") + 30))" taskset -c "$LOAD_CORE" \
        wrk -t1 -c"$CONNS" -d"$DURATION" --timeout 30s "http://127.0.0.1:${PORT[$t]}/100m" >"$out" 2>&1 || true
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    after=$(cpu_us_tree "${PID[$t]}")
    peak=$(sort -n "$BENCH_TMP/rss" | tail -1)
    r=$(awk '/ requests in /{ n = $1; b = $5; gsub(/,/, "", b)
             v = b + 0; u = b; gsub(/[0-9.]/, "", u)
             m = (u == "GB") ? v * 1024 : (u == "MB") ? v : (u == "KB") ? v / 1024 : v / 1048576
             print n, m }' "$out")
    read -r n mib <<<"$r"
    local cpu=$((${after% *} + ${after#* } - ${before% *} - ${before#* }))
    printf '%s\t%s\t%s\t%s\t%.0f\t%.1f\t%s\n' "$round" "$t" "$n" "$mib" "$(awk -v m="$mib" -v d="$(dur_s "$DURATION")" 'BEGIN{print m/d}')" \
        "$(awk -v c="$cpu" -v m="$mib" 'BEGIN{ if (m > 0) print c/m; else print 0 }')" "$((peak / 1024))"
}

read -r -a LIST <<<"$TARGETS"
for t in "${LIST[@]}"; do start_target "$t"; done
bench_log "machine: $(bench_machine); load: wrk -t1 -c$CONNS -d$DURATION on a 100 MiB file; origin: $BENCH_ORIGIN_DESC"
printf 'round\ttarget\tcompleted\tMiB\tMiB/s\tcpu_us_per_MiB\tpeak_rss_MiB\n'
# The rounds, the targets' order rotating each round (lib.sh's helpers use a global `i`).
rounds() {
    local round j n=${#LIST[@]}
    for ((round = 1; round <= ROUNDS; round++)); do
        for ((j = 0; j < n; j++)); do
            run "${LIST[$(((j + round - 1) % n))]}" "$round"
        done
    done
}
rounds
