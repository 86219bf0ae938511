#!/usr/bin/env bash
# check-metrics.sh: run the proxy (2 workers, admin listener on) over the built-in origin, put
# a bounded load on every kind of route (proxied, cached, `return`, an upstream that refuses,
# a bad request), scrape /metrics and run `promtool check metrics` on it. Fails on any error
# promtool reports (lint problems included), on an empty scrape, or if /healthz is not 200.
#
#   scripts/check-metrics.sh            # builds release binaries first
#   PROFILE=debug scripts/check-metrics.sh
#
# Installs Debian's `prometheus` package (for promtool) when promtool is missing; its service
# is stopped and disabled afterwards, as install-peers.sh does for the peers.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${PROFILE:-release}
TMP=$(mktemp -d /tmp/check-metrics.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
die() { echo "check-metrics: $*" >&2; exit 1; }

if ! command -v promtool >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
    echo "check-metrics: installing Debian's prometheus package for promtool" >&2
    policy=/usr/sbin/policy-rc.d
    created=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
        $SUDO chmod +x "$policy"
        created=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends prometheus
    if [ "$created" = 1 ]; then $SUDO rm -f "$policy"; fi
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
fi

# A free port (below the ephemeral range, nothing listening on it).
free_port() {
    local lo p
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
    for _ in $(seq 200); do
        p=$((2000 + RANDOM % (lo - 2001)))
        if [ -z "$(ss -Htln "sport = :$p" 2>/dev/null)" ] && [[ " ${USED:-} " != *" $p "* ]]; then
            USED="${USED:-} $p"
            echo "$p"
            return
        fi
    done
    die "no free port"
}

# wait_port PORT PID: until 127.0.0.1:PORT accepts, or PID is gone (then fail).
wait_port() {
    for _ in $(seq 200); do
        kill -0 "$2" 2>/dev/null || return 1
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    return 1
}

cd "$ROOT"
if [ "$PROFILE" = release ]; then
    cargo build --release -q -p proxy -p loader
else
    cargo build -q -p proxy -p loader
fi
BIN="$ROOT/target/$PROFILE"

ORIGIN=$(free_port)
PROXY=$(free_port)
ADMIN=$(free_port)
DEAD=$(free_port) # nothing listens there: connections are refused

"$BIN/loader" origin --listen "127.0.0.1:$ORIGIN" --body-size 1KiB --workers 1 --no-pin \
    >"$TMP/origin.log" 2>&1 &
PIDS+=($!)
wait_port "$ORIGIN" "${PIDS[-1]}" || die "the origin did not start: $(cat "$TMP/origin.log")"

cat >"$TMP/proxy.toml" <<EOF
[[listen]]
addr = "127.0.0.1:$PROXY"

[admin]
addr = "127.0.0.1:$ADMIN"

[runtime]
workers = 2
pin = false

[upstream.app]
servers = ["127.0.0.1:$ORIGIN"]

[upstream.dead]
servers = ["127.0.0.1:$DEAD"]

[[route]]
path = "/cached/"
upstream = "app"
cache = { max_bytes = "1MiB" }

[[route]]
path = "/ret"
return = { status = 404, body = "no" }

[[route]]
path = "/dead"
upstream = "dead"

[[route]]
path = "/"
upstream = "app"
EOF
"$BIN/proxy" --config "$TMP/proxy.toml" >"$TMP/proxy.log" 2>&1 &
PIDS+=($!)
wait_port "$PROXY" "${PIDS[-1]}" || die "the proxy did not start: $(cat "$TMP/proxy.log")"
wait_port "$ADMIN" "${PIDS[-1]}" || die "the admin listener did not start"

U="http://127.0.0.1:$PROXY"
"$BIN/loader" -c 8 -n 2000 --workers 1 --no-pin "$U/a" "$U/cached/x" "$U/ret" >"$TMP/load.txt" 2>&1 ||
    die "the load failed: $(cat "$TMP/load.txt")"
"$BIN/loader" -c 2 -n 20 --workers 1 --no-pin "$U/dead" >/dev/null 2>&1 || true
printf 'NOT HTTP\r\n\r\n' | (exec 3<>"/dev/tcp/127.0.0.1/$PROXY" && cat >&3 && cat <&3 >/dev/null) || true

code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN/healthz")
[ "$code" = 200 ] || die "/healthz answered $code"
curl -sf "http://127.0.0.1:$ADMIN/metrics" >"$TMP/metrics.txt" || die "/metrics failed"
grep -q '^proxy_requests_total{route="/",code="2xx"} [1-9]' "$TMP/metrics.txt" ||
    die "no proxied requests counted: $(head -20 "$TMP/metrics.txt")"
curl -sf "http://127.0.0.1:$ADMIN/status" | python3 -m json.tool >/dev/null || die "/status is not JSON"

echo "check-metrics: $(grep -vc '^#' "$TMP/metrics.txt") samples; promtool check metrics:" >&2
if ! promtool check metrics <"$TMP/metrics.txt"; then
    die "promtool found problems (above)"
fi
echo "check-metrics: OK" >&2
