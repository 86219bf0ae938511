#!/usr/bin/env bash
# Does the loader count exactly what nginx's access log records? (issue 14; not a test)
#
# nginx (one worker, access log on) serves /64 itself and proxies /slow to the built-in origin,
# which waits DELAY before answering, so many requests are in flight at a -d deadline. For each
# mode (-d keep-alive, --close, --pipeline, --rate, --urls, -n; fast and slow) it counts the
# access-log lines the run added and compares them with the loader's JSON: Complete plus the
# failures seen after sending (read, parse, timeout, unanswered at end). Prints one line per
# run, "ok" or "MISMATCH", and exits 1 on any mismatch.
#
#   scripts/loader_counts_vs_nginx.sh                  # defaults: DURATION=2s CONNS=10 DELAY=200
#   DURATION=5s CONNS=50 scripts/loader_counts_vs_nginx.sh
#
# Environment: DURATION (2s), CONNS (10), DELAY (ms, 200), LOADER_BIN (target/release/loader,
# built here unless NO_BUILD=1), KEEP_TMP=1. Needs nginx (scripts/install-peers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

DURATION=${DURATION:-2s}
CONNS=${CONNS:-10}
DELAY=${DELAY:-200}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
LOADER_BIN=${LOADER_BIN:-$TARGET_DIR/release/loader}

bench_require nginx python3 ss
if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release -q -p loader
fi
[ -x "$LOADER_BIN" ] || bench_die "no loader binary at $LOADER_BIN"

bench_init
SLOW_PORT=$(bench_free_port)
bench_start 0 "$BENCH_TMP/slow.log" "$LOADER_BIN" origin --listen "127.0.0.1:$SLOW_PORT" \
    --body-size 64 --delay "$DELAY" --threads 1 --no-pin
bench_wait_port "$SLOW_PORT" "$BENCH_LAST_PID" || bench_die "the slow origin did not start"

NGINX_PORT=$(bench_free_port)
mkdir -p "$BENCH_TMP/www"
head -c 64 /dev/zero | tr '\0' 'a' >"$BENCH_TMP/www/64"
chmod -R a+rX "$BENCH_TMP/www"
LOG="$BENCH_TMP/access.log"
cat >"$BENCH_TMP/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $BENCH_TMP/nginx.pid;
error_log $BENCH_TMP/nginx.error.log warn;
events { worker_connections 8192; }
http {
    # One line per request, written as each request ends (no buffer): the count to match.
    log_format counted '\$status \$request_length \$request_time \$request';
    access_log $LOG counted;
    client_body_temp_path $BENCH_TMP/cb;
    proxy_temp_path $BENCH_TMP/px;
    fastcgi_temp_path $BENCH_TMP/fc;
    uwsgi_temp_path $BENCH_TMP/uw;
    scgi_temp_path $BENCH_TMP/sc;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    upstream slow { server 127.0.0.1:$SLOW_PORT; keepalive 64; }
    server {
        listen 127.0.0.1:$NGINX_PORT backlog=4096;
        root $BENCH_TMP/www;
        location /slow {
            proxy_pass http://slow;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
CONF
bench_start 1 "$BENCH_TMP/nginx.log" "$(bench_sbin nginx)" -e "$BENCH_TMP/nginx.error.log" \
    -p "$BENCH_TMP" -c "$BENCH_TMP/nginx.conf"
bench_wait_port "$NGINX_PORT" "$BENCH_LAST_PID" ||
    bench_die "nginx did not start: $(cat "$BENCH_TMP/nginx.error.log" 2>/dev/null)"

BASE="http://127.0.0.1:$NGINX_PORT"
printf '%s\n%s\n%s\n' "$BASE/64" "$BASE/slow/a" "$BASE/64?b" >"$BENCH_TMP/urls.txt"

lines() { if [ -f "$LOG" ]; then wc -l <"$LOG"; else echo 0; fi; }
FAILED=0
# check NAME LOADER_ARGS...: one run; compares the log lines it added with the loader's counts.
check() {
    local name=$1 before after json="$BENCH_TMP/run.json"
    shift
    before=$(lines)
    timeout 120s "$LOADER_BIN" -q --threads 1 --no-pin -l --json "$json" "$@" >/dev/null || true
    # nginx writes a request's line just after its response: wait (up to 2 s) until the log
    # holds as many lines as the loader counted; a surplus shows at once, a shortfall after 2 s.
    local want i
    want=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; f=t["failures"]
print(t["completed"] + f["read"] + f["parse"] + f["timeout"] + f.get("unanswered", 0))' "$json")
    for ((i = 0; i < 40; i++)); do
        [ $(($(lines) - before)) -ge "$want" ] && break
        sleep 0.05
    done
    after=$(lines)
    python3 - "$json" "$((after - before))" "$name" <<'PY' || FAILED=1
import json, sys
d = json.load(open(sys.argv[1])); logged = int(sys.argv[2]); name = sys.argv[3]
t = d["totals"]; f = t["failures"]
after_send = f["read"] + f["parse"] + f["timeout"] + f.get("unanswered", 0)
counted = t["completed"] + after_send
drain = d.get("drain") or {}
verdict = "ok" if counted == logged else "MISMATCH"
print(f"{verdict:8} {name:28} nginx logged {logged:8}  loader: complete {t['completed']:8} "
      f"+ failed after sending {after_send:4}; in flight at the stop {drain.get('in_flight_at_stop', '-')}, "
      f"drained in {drain.get('drain_s', 0) * 1000:.1f} ms, unanswered {drain.get('unanswered', '-')}")
sys.exit(0 if counted == logged else 1)
PY
}

echo "# $(bench_machine); nginx $("$(bench_sbin nginx)" -v 2>&1 | awk -F/ '{print $2}'); origin delay ${DELAY} ms on /slow"
check "-d keep-alive /64" -d "$DURATION" -c "$CONNS" "$BASE/64"
check "-d keep-alive /slow" -d "$DURATION" -c "$CONNS" "$BASE/slow/x"
check "-d --close /64" -d "$DURATION" -c "$CONNS" --close "$BASE/64"
check "-d --close /slow" -d "$DURATION" -c "$CONNS" --close "$BASE/slow/x"
check "-d --pipeline 4 /64" -d "$DURATION" -c "$CONNS" --pipeline 4 "$BASE/64"
check "-d --pipeline 4 /slow" -d "$DURATION" -c "$CONNS" --pipeline 4 "$BASE/slow/x"
check "-d --rate 2000 /64" -d "$DURATION" -c "$CONNS" --rate 2000 "$BASE/64"
check "-d --rate 200 /slow" -d "$DURATION" -c "$((CONNS * 4))" --rate 200 "$BASE/slow/x"
check "-d --urls" -d "$DURATION" -c "$CONNS" --urls "$BENCH_TMP/urls.txt"
check "-n 5000 /64" -n 5000 -c "$CONNS" "$BASE/64"
check "-n 200 --close /slow" -n 200 -c "$CONNS" --close "$BASE/slow/x"
exit "$FAILED"
