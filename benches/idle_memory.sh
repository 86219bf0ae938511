#!/usr/bin/env bash
# What an idle client connection costs the proxy in resident memory, measured as a user would:
# N clients connect (source addresses spread over 127.0.0.0/8, as the loader's --close does)
# and then stay idle; the proxy's VmRSS delta once it holds them all, divided by N. For each
# state (benches/idle_clients.py does the clients and the reading):
#   fresh          connected, nothing sent (a browser's pre-connect)
#   keepalive      one keep-alive GET proxied to an origin and answered, then nothing
#   tls            HTTPS, handshake done, nothing sent
#   tls-keepalive  HTTPS, one keep-alive GET answered, then nothing
# Also printed: a new client's request while the crowd is held (answered, and its time), and
# the RSS once the crowd closed (the pools keep what the docs say: docs/OPERATIONS.md).
#
#   benches/idle_memory.sh                     # N=5000, every state, 2 workers
#   N=10000 STATES="fresh keepalive" benches/idle_memory.sh
#   PROXY_BIN=/tmp/old-proxy NO_BUILD=1 benches/idle_memory.sh   # another build, A/B
#
# Environment: N (5000), STATES ("fresh keepalive tls tls-keepalive"), WORKERS (2), PROXY_BIN
# (default target/release/proxy, built here unless NO_BUILD=1), PROXY_ARGS (extra flags).
#
# Descriptors: the clients (this script's python) and the proxy each hold N of them; both
# raise their soft open-files limit to the hard one. For 100,000 connections raise the hard
# limit first (as root: `ulimit -Hn 300000; ulimit -n 300000`, or LimitNOFILE= in a systemd
# unit, or /etc/security/limits.conf), and the proxy's per-worker connection limit
# (`--max-connections`, 10000 by default: PROXY_ARGS="--max-connections 60000" with 2
# workers; connections over it wait in the backlog, so also `sysctl net.core.somaxconn`), and
# `sysctl net.ipv4.ip_local_port_range` is per source address here (250 clients per address).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

N=${N:-5000}
STATES=${STATES:-fresh keepalive tls tls-keepalive}
WORKERS=${WORKERS:-2}
PROXY_BIN=${PROXY_BIN:-${CARGO_TARGET_DIR:-target}/release/proxy}

bench_init
bench_build proxy || bench_die "cargo build --release -p proxy failed"
[ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found"
bench_require python3
bench_require openssl

# The origin: the proxy itself serving a 64-byte file (nothing else to install).
mkdir -p "$BENCH_TMP/www"
head -c 64 /dev/zero | tr '\0' 'x' >"$BENCH_TMP/www/64"
ORIGIN_PORT=$(bench_free_port)
bench_start 0 "$BENCH_TMP/origin.log" "$PROXY_BIN" --listen "127.0.0.1:$ORIGIN_PORT" \
    --static "$BENCH_TMP/www" --workers 1 --no-pin
bench_wait_port "$ORIGIN_PORT" "$BENCH_LAST_PID" || bench_die "origin: $(cat "$BENCH_TMP/origin.log")"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -keyout "$BENCH_TMP/key.pem" -out "$BENCH_TMP/cert.pem" 2>/dev/null

# measure STATE: a proxy of its own per state (one state's pools do not flatter the next).
measure() {
    local state=$1 port tls=() pid
    port=$(bench_free_port)
    case $state in tls*) tls=(--tls-cert "$BENCH_TMP/cert.pem" --tls-key "$BENCH_TMP/key.pem") ;; esac
    # Timeouts long enough for the crowd to stay while it is measured (a fresh connection
    # gets the header timeout, 10 s by default, to send its first head).
    # shellcheck disable=SC2086
    bench_start "1" "$BENCH_TMP/proxy-$state.log" "$PROXY_BIN" --listen "127.0.0.1:$port" \
        --upstream "127.0.0.1:$ORIGIN_PORT" --workers "$WORKERS" --no-pin \
        --header-timeout 300s --idle-timeout 300s "${tls[@]}" ${PROXY_ARGS:-}
    pid=$BENCH_LAST_PID
    bench_wait_port "$port" "$pid" || bench_die "proxy: $(cat "$BENCH_TMP/proxy-$state.log")"
    python3 benches/idle_clients.py --pid "$pid" --addr "127.0.0.1:$port" --n "$N" --mode "$state"
    bench_stop "$pid"
}

echo "# idle connections: $N per state, proxy $PROXY_BIN, $WORKERS workers, $(uname -r)"
head -n1 "$BENCH_TMP/proxy-"*.log 2>/dev/null || true
for state in $STATES; do
    measure "$state"
done
