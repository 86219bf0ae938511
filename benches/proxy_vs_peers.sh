#!/usr/bin/env bash
# What a reverse proxy costs, against nginx and HAProxy, in the same run.
#
# For each case (response size 64 B / 32 KB (/ 1 MiB with SIZES="64 32k 1m") × keep-alive clients
# (wrk) / connection-per-request clients (ab without -k)), every round loads, one after the other (interleaved, the order
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
#   BASE_BIN=target/release/proxy BASE_ARGS= PROXY_ARGS="--health-check /64" TARGETS="base ours" \
#     RATIO_TO=base SIZES=64 MODES=keepalive benches/proxy_vs_peers.sh
#                                                  # one build, a flag off vs on (active health checks)
#   SCHEME=https ROUNDS=3 benches/proxy_vs_peers.sh  # TLS terminated by each proxy (below)
#
# HTTPS (SCHEME=https): each proxy terminates TLS in front of the same plain origin, with the
# same ECDSA P-256 certificate (made here with `openssl req -x509`), TLS 1.3 only, AES-128-GCM,
# X25519, resumption on (nginx-proxy-tls.conf, haproxy-tls.cfg; ours: --tls-cert/--tls-key,
# which prefers AES-128-GCM). Cases (MODES): keepalive (wrk over https, SIZES), full (a
# connection per request, every handshake full: our loader --close --no-resume, 64 B) and
# resumed (a connection per request resuming the previous session: our loader --close, whose
# rustls client keeps the tickets; 64 B). N_CLOSE (20000) bounds the handshake cases.
#
# Environment: ROUNDS, DURATION (per load), CONNS (64), AB_N (ab's request bound, 200000),
# SIZES ("64 32k"; 1m, 2k, 8k exist too), MODES ("keepalive close"), TARGETS ("direct ours
# nginx haproxy"), ORIGIN (nginx: files from disk, sendfile on; nginx-writev; builtin, one size:
# see bench_start_origin in benches/lib.sh), LOAD_CORE (0: wrk/ab and the origin), PROXY_CORE
# (1: the proxy under test), PROXY_BIN (our binary; default target/release/proxy, built here
# unless NO_BUILD=1), PROXY_ARGS (extra flags for it, e.g. "--driver epoll"), BASE_BIN
# (another build of our proxy, target "base", started exactly like "ours" but with BASE_ARGS
# instead of PROXY_ARGS when BASE_ARGS is set), target "logged" (ours with --access-log to a
# file in the run's temporary directory; benches/obs_cost.sh compares base, ours and logged),
# RATIO_TO (the target the ratio column divides by; default nginx), OUT (raw TSV path),
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
SCHEME=${SCHEME:-http}
N_CLOSE=${N_CLOSE:-20000}
case $SCHEME in
http) ;;
https)
    MODES=${MODES_TLS:-"keepalive full resumed"}
    TARGETS=${TARGETS_TLS:-${TARGETS/direct /}}
    LOADER_BIN=${LOADER_BIN:-$TARGET_DIR/release/loader}
    ;;
*) bench_die "SCHEME must be http or https, not '$SCHEME'" ;;
esac
BENCH_SCHEME=$SCHEME
RATIO_TO=${RATIO_TO:-nginx}
OUT=${OUT:-target/bench-results/proxy_vs_peers-$(date -u +%Y%m%dT%H%M%SZ).tsv}

bench_require wrk ab taskset envsubst ss
bench_want "$TARGETS" nginx && bench_require nginx
[ "$RATIO_TO" = nginx ] || bench_want "$TARGETS" "$RATIO_TO" || bench_die "RATIO_TO=$RATIO_TO is not in TARGETS"
bench_want "$TARGETS" haproxy && bench_require haproxy
[ "$(nproc)" -ge 2 ] || bench_log "warning: fewer than 2 cores; pinning cannot separate the proxy from the load"

bench_init
bench_open_out "$OUT"
bench_start_origin "$LOAD_CORE"

if [ "$SCHEME" = https ]; then
    bench_require openssl
    bench_build loader || bench_die "cargo build --release -p loader failed"
    mkdir -p "$BENCH_TMP/tls"
    # ECDSA P-256, for 127.0.0.1 (the clients do not verify: --insecure, wrk, ab).
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
        -keyout "$BENCH_TMP/tls/key.pem" -out "$BENCH_TMP/tls/cert.pem" -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>"$BENCH_TMP/openssl.log" ||
        bench_die "openssl req failed: $(cat "$BENCH_TMP/openssl.log")"
    cat "$BENCH_TMP/tls/cert.pem" "$BENCH_TMP/tls/key.pem" >"$BENCH_TMP/tls/combined.pem"
    TLS_FLAGS=(--tls-cert "$BENCH_TMP/tls/cert.pem" --tls-key "$BENCH_TMP/tls/key.pem")
fi

# --- the targets: the origin directly, and each proxy in front of it ----------------------------

declare -A PORT
check_target() { bench_check_bodies "$1" "${PORT[$1]}"; }

if bench_want "$TARGETS" direct; then
    PORT[direct]=$ORIGIN_PORT
    BENCH_DESC[direct]="wrk/ab → origin"
    BENCH_ACTIVE+=(direct)
fi

# start_ours TARGET BIN ARGS: our proxy (1 worker) in front of the origin, as target TARGET,
# with the extra flags ARGS.
start_ours() {
    local t=$1 bin=$2 args=$3
    if [ ! -x "$bin" ]; then
        bench_log "SKIP $t: $bin not found"
        return 0
    fi
    PORT[$t]=$(bench_free_port)
    # shellcheck disable=SC2206 # the extra flags are split into words on purpose
    # The same upstream keep-alive settings as nginx-proxy.conf (keepalive_requests,
    # keepalive_timeout), so neither side reconnects more often than the other.
    local cmd=("$bin" --listen "127.0.0.1:${PORT[$t]}" --upstream "127.0.0.1:$ORIGIN_PORT" --workers 1 --no-pin
        --keepalive-requests 10000000 --keepalive-timeout 120s ${TLS_FLAGS[@]+"${TLS_FLAGS[@]}"} $args)
    BENCH_DESC[$t]="taskset -c $PROXY_CORE ${cmd[*]}"
    bench_start_target "$t" "${PORT[$t]}" "$PROXY_CORE" "$BENCH_TMP/$t.log" "${cmd[@]}"
}

if bench_want "$TARGETS" ours; then
    bench_build proxy || bench_log "SKIP ours: cargo build --release -p proxy failed"
    start_ours ours "$PROXY_BIN" "${PROXY_ARGS:-}"
fi
if bench_want "$TARGETS" logged; then
    # Ours with the access log on (combined, a file in the run's temporary directory).
    bench_build proxy || bench_log "SKIP logged: cargo build --release -p proxy failed"
    start_ours logged "$PROXY_BIN" "${PROXY_ARGS:-} --access-log $BENCH_TMP/access.log"
fi
if bench_want "$TARGETS" base; then
    [ -n "$BASE_BIN" ] || bench_die "target base needs BASE_BIN (another build of our proxy)"
    start_ours base "$BASE_BIN" "${BASE_ARGS-${PROXY_ARGS:-}}"
fi

if bench_want "$TARGETS" nginx; then
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    PORT[nginx]=$PROXY_PORT
    NGINX_CONF=nginx-proxy.conf
    [ "$SCHEME" = https ] && NGINX_CONF=nginx-proxy-tls.conf
    bench_render "benches/peers/$NGINX_CONF" "$BENCH_TMP/nginx-proxy.conf" TMP ORIGIN_PORT PROXY_PORT
    BENCH_DESC[nginx]="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), benches/peers/$NGINX_CONF"
    bench_start_target nginx "$PROXY_PORT" "$PROXY_CORE" "$BENCH_TMP/nginx-proxy.log" \
        "$NGINX" -e "$BENCH_TMP/nginx-proxy.error.log" -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-proxy.conf"
fi

if bench_want "$TARGETS" haproxy; then
    PROXY_PORT=$(bench_free_port)
    export PROXY_PORT
    PORT[haproxy]=$PROXY_PORT
    HAPROXY_CONF=haproxy.cfg
    [ "$SCHEME" = https ] && HAPROXY_CONF=haproxy-tls.cfg
    bench_render "benches/peers/$HAPROXY_CONF" "$BENCH_TMP/haproxy.cfg" TMP ORIGIN_PORT PROXY_PORT
    HAPROXY=$(bench_sbin haproxy)
    BENCH_DESC[haproxy]="HAProxy $("$HAPROXY" -v | awk 'NR == 1 { print $3 }'), benches/peers/$HAPROXY_CONF"
    bench_start_target haproxy "$PROXY_PORT" "$PROXY_CORE" "$BENCH_TMP/haproxy.log" "$HAPROXY" -db -f "$BENCH_TMP/haproxy.cfg"
fi

[ "${#BENCH_ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"

# --- the runs: cases SIZE/MODE ------------------------------------------------------------------

if [ "$SCHEME" = https ]; then
    # keep-alive for every size; the handshake cases with the first size only.
    for mode in $MODES; do
        if [ "$mode" = keepalive ]; then
            for size in $SIZES; do BENCH_CASES+=("$size/keepalive"); done
        else
            BENCH_CASES+=("${SIZES%% *}/$mode")
        fi
    done
else
    bench_size_mode_cases
fi
# tls_load SIZE/MODE PORT: one bounded HTTPS load.
tls_load() {
    local url="https://127.0.0.1:$2/${1%/*}"
    case ${1#*/} in
    keepalive) load_wrk "$LOAD_CORE" "$CONNS" "$DURATION" "$url" ;;
    full) LOADER_FLAGS=(--close --no-resume --insecure); load_loader "$LOADER_BIN" "$LOAD_CORE" "$CONNS" "$N_CLOSE" "$DURATION" "$url" ;;
    resumed) LOADER_FLAGS=(--close --insecure); load_loader "$LOADER_BIN" "$LOAD_CORE" "$CONNS" "$N_CLOSE" "$DURATION" "$url" ;;
    esac
}
if [ "$SCHEME" = https ]; then
    load_case() { tls_load "$1" "${PORT[$2]}"; }
else
    load_case() { bench_load_size_mode "$1" "${PORT[$2]}"; }
fi
warm_up() { bench_warm_sizes "$1" "${PORT[$1]}"; }

bench_rounds "$ROUNDS" warm_up bench_measure load_case

# --- the report ---------------------------------------------------------------------------------

case_title() {
    case ${1#*/} in
    full) echo "${BODY_LEN[${1%/*}]} B, HTTPS, connection per request, full handshakes (loader --close --no-resume)" ;;
    resumed) echo "${BODY_LEN[${1%/*}]} B, HTTPS, connection per request, resumed handshakes (loader --close)" ;;
    *) if [ "$SCHEME" = https ]; then echo "HTTPS $(bench_size_mode_title "$1" "B")"; else bench_size_mode_title "$1" "B"; fi ;;
    esac
}

bench_report_head proxy_vs_peers
if [ "$SCHEME" = https ]; then
    echo "# load: keep-alive = wrk -t1 -c$CONNS -d$DURATION --latency https://; handshakes = loader --threads 1 -c $CONNS -n $N_CLOSE --close [--no-resume] --insecure"
    echo "# TLS: TLS 1.3, AES-128-GCM, X25519, ECDSA P-256 (openssl req -x509), resumption on at every proxy"
else
    bench_size_mode_load_line
fi
echo "# pinning: wrk/ab and the origin on core $LOAD_CORE; the proxy under test on core $PROXY_CORE"
bench_report_targets
echo "# proxy µs/req = the proxy's utime+stime (all threads, /proc/PID/stat) during the load ÷ completed requests"
echo "# vs $RATIO_TO = proxy µs/req ÷ $RATIO_TO's in the same round (paired); summary = median [min-max] over rounds"
bench_report case_title target proxy_us/req "$RATIO_TO"
bench_report_tail nginx-origin.conf "${NGINX_CONF:-nginx-proxy.conf}" "${HAPROXY_CONF:-haproxy.cfg}"
