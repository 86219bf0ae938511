#!/usr/bin/env bash
# What a load generator costs, against wrk, h2load and ab, in the same run.
#
# One origin (nginx, one worker, pinned to core 0). Each round runs, one after the other
# (interleaved, the order rotating each round), our loader, wrk, h2load --h1 and ab -k against it,
# each pinned alone to core 1 with one thread and 64 keep-alive connections. Per run it prints
# req/s, p99 and the generator's own CPU µs per request (user + kernel: the kernel's rusage of the
# exited process, all threads), with the ratio to wrk in the same round; then the median and
# [min-max] over the rounds.
#
#   benches/loader_vs_peers.sh                     # defaults: ROUNDS=3 N=200000
#   ROUNDS=5 N=500000 benches/loader_vs_peers.sh
#   GENERATORS="wrk h2load ab" benches/loader_vs_peers.sh
#   GENERATORS="loader loader-dist wrk" SIZES=64 benches/loader_vs_peers.sh   # what the shard
#       flags cost: loader-dist is our loader with --hdr-log FILE --shard 1/1
#   GENERATORS="loader loader-oneshot wrk" SIZES=64 benches/loader_vs_peers.sh   # multishot
#       receives on (loader) and off (loader-oneshot: our loader with --no-multishot)
#   BASE_LOADER_BIN=/tmp/loader-before GENERATORS="loader base wrk" benches/loader_vs_peers.sh
#       # A/B: "base" is another build of our loader, run the same way in the same rounds
#
# HTTPS (SCHEME=https): the origin is nginx (OpenSSL) over TLS 1.3 only, AES-128-GCM, X25519, an
# ECDSA P-256 certificate made here with `openssl req -x509` (benches/peers/nginx-origin-tls.conf),
# resumption off on the server. Two cases on /64: "ka" (keep-alive, N requests) and "close" (a
# connection per request, N_CLOSE requests: a full handshake each; our loader with --close
# --no-resume, wrk with -H 'Connection: close' (it reconnects when the server closes; wrk has no
# --close), ab without -k; h2load has no connection-per-request mode and is skipped there). None
# of wrk, h2load and ab verifies the server's certificate, so our loader runs with --insecure by
# default too; TLS_VERIFY=cacert makes it verify (--cacert with the generated certificate).
#
#   SCHEME=https benches/loader_vs_peers.sh
#   SCHEME=https GENERATORS="loader wrk" TLS_VERIFY=cacert ROUNDS=5 benches/loader_vs_peers.sh
#
# Environment: ROUNDS, N (requests per run), CONNS (64), SIZES ("64 32k"),
# GENERATORS ("loader wrk h2load ab"; "base" with BASE_LOADER_BIN), ORIGIN (see benches/lib.sh), ORIGIN_CORE (0), GEN_CORE (1), MAX_TIME (per-run time
# bound, 60s), LOADER_BIN (default target/release/loader, built here unless NO_BUILD=1), OUT (raw
# TSV path), KEEP_TMP=1; SCHEME (http), N_CLOSE (5000), TLS_VERIFY (insecure).
#
# wrk has no request count: it runs for the whole number of seconds that makes about N requests at
# the rate it reached in the warm-up; its CPU is divided by the requests it completed, like the
# others'.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ROUNDS=${ROUNDS:-3}
N=${N:-200000}
CONNS=${CONNS:-64}
SIZES=${SIZES:-"64 32k"}
GENERATORS=${GENERATORS:-"loader wrk h2load ab"}
ORIGIN_CORE=${ORIGIN_CORE:-0}
GEN_CORE=${GEN_CORE:-1}
MAX_TIME=${MAX_TIME:-60s}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
LOADER_BIN=${LOADER_BIN:-$TARGET_DIR/release/loader}
OUT=${OUT:-target/bench-results/loader_vs_peers-$(date -u +%Y%m%dT%H%M%SZ).tsv}
SCHEME=${SCHEME:-http}
N_CLOSE=${N_CLOSE:-5000}
TLS_VERIFY=${TLS_VERIFY:-insecure}
case $SCHEME in
    http) ;;
    https) SIZES=64 ;;
    *) bench_die "SCHEME must be http or https, not '$SCHEME'" ;;
esac

bench_require taskset envsubst ss
[ "$SCHEME" = https ] && bench_require openssl
for g in wrk h2load ab; do
    if bench_want "$GENERATORS" "$g"; then bench_require "$g"; fi
done
[ "$(nproc)" -ge 2 ] || bench_log "warning: fewer than 2 cores; pinning cannot separate the generator from the origin"

# start_tls_origin CORE: nginx-origin-tls.conf with a fresh ECDSA P-256 certificate for
# localhost and 127.0.0.1 (the `openssl req -x509` kind: a self-signed CA certificate).
start_tls_origin() {
    bench_require nginx
    bench_write_bodies
    mkdir -p "$BENCH_TMP/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
        -keyout "$BENCH_TMP/tls/key.pem" -out "$BENCH_TMP/tls/cert.pem" -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>"$BENCH_TMP/openssl.log" ||
        bench_die "openssl req failed: $(cat "$BENCH_TMP/openssl.log")"
    ORIGIN_PORT=$(bench_free_port)
    export ORIGIN_PORT
    bench_render "$BENCH_ROOT/benches/peers/nginx-origin-tls.conf" "$BENCH_TMP/nginx-origin-tls.conf" \
        TMP ORIGIN_PORT
    NGINX=$(bench_sbin nginx)
    bench_start "$1" "$BENCH_TMP/origin.log" "$NGINX" -e "$BENCH_TMP/origin.error.log" \
        -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-origin-tls.conf"
    ORIGIN_PID=$BENCH_LAST_PID
    BENCH_ORIGIN_PID=$ORIGIN_PID
    bench_wait_port "$ORIGIN_PORT" "$ORIGIN_PID" ||
        bench_die "the TLS origin (nginx) did not start: $(cat "$BENCH_TMP/origin.log" "$BENCH_TMP/origin.error.log" 2>/dev/null)"
}

bench_init
bench_open_out "$OUT"
if [ "$SCHEME" = https ]; then
    start_tls_origin "$ORIGIN_CORE"
    BASE="https://localhost:$ORIGIN_PORT"
    if [ "$TLS_VERIFY" = cacert ]; then
        LOADER_TLS=(--cacert "$BENCH_TMP/tls/cert.pem")
    else
        LOADER_TLS=(--insecure)
    fi
else
    bench_start_origin "$ORIGIN_CORE"
    BASE="http://127.0.0.1:$ORIGIN_PORT"
    LOADER_TLS=()
fi
# The generators are the targets: their own CPU (rusage) is what is compared.
BENCH_CPU=load

BENCH_DESC[wrk]="$({ wrk -v 2>&1 || true; } | awk 'NR == 1 { print $1, $2 }'): taskset -c $GEN_CORE wrk -t1 -c$CONNS -d<≈N/rate>s --latency URL"
BENCH_DESC[h2load]="$({ h2load --version 2>&1 || true; } | head -1): taskset -c $GEN_CORE h2load --h1 -t1 -c$CONNS -n$N URL"
BENCH_DESC[ab]="ab $({ ab -V 2>&1 || true; } | awk '/Version/ { print $5 }' | tr -d ,): taskset -c $GEN_CORE ab -k -c $CONNS -n $N URL"

# gen_run GEN URL N [close]: one bounded run; prints "RPS P99_US COMPLETED ERRORS USER_US
# KERNEL_US". With "close": a connection per request (see the header for what each tool does).
WRK_SECONDS=1
LOADER_FLAGS=()
WRK_FLAGS=()
gen_run() {
    local g=$1 url=$2 n=$3 close=${4:-} ka=1
    LOADER_FLAGS=(${LOADER_TLS[@]+"${LOADER_TLS[@]}"})
    WRK_FLAGS=()
    if [ "$close" = close ]; then
        LOADER_FLAGS+=(--close --no-resume)
        WRK_FLAGS=(-H 'Connection: close')
        ka=0
    fi
    case $g in
        loader) load_loader "$LOADER_BIN" "$GEN_CORE" "$CONNS" "$n" "$MAX_TIME" "$url" ;;
        base) load_loader "$BASE_LOADER_BIN" "$GEN_CORE" "$CONNS" "$n" "$MAX_TIME" "$url" ;;
        loader-dist)
            LOADER_FLAGS+=(--hdr-log "$BENCH_TMP/loader.hlog" --shard 1/1)
            load_loader "$LOADER_BIN" "$GEN_CORE" "$CONNS" "$n" "$MAX_TIME" "$url"
            ;;
        loader-oneshot)
            LOADER_FLAGS+=(--no-multishot)
            load_loader "$LOADER_BIN" "$GEN_CORE" "$CONNS" "$n" "$MAX_TIME" "$url"
            ;;
        wrk) load_wrk "$GEN_CORE" "$CONNS" "${WRK_SECONDS}s" "$url" ;;
        h2load)
            if [ "$ka" = 0 ]; then
                echo "h2load has no connection-per-request mode: skipped" >"$LOAD_OUT"
                return 1
            fi
            load_h2load "$GEN_CORE" "$CONNS" "$n" "$MAX_TIME" "$url"
            ;;
        ab) load_ab "$GEN_CORE" "$CONNS" "$n" - "$ka" "$url" ;;
    esac
}

for g in $GENERATORS; do
    if [ "$g" = loader ] || [ "$g" = loader-dist ] || [ "$g" = loader-oneshot ]; then
        bench_build loader || bench_log "SKIP loader: cargo build --release -p loader failed"
        if [ ! -x "$LOADER_BIN" ]; then
            bench_log "SKIP loader: $LOADER_BIN not found"
            continue
        fi
        BENCH_DESC[loader]="taskset -c $GEN_CORE $LOADER_BIN --threads 1 -c $CONNS -n $N -q ${LOADER_TLS[*]} URL"
        BENCH_DESC[loader-dist]="${BENCH_DESC[loader]/-q/-q --hdr-log FILE --shard 1/1}"
        BENCH_DESC[loader-oneshot]="${BENCH_DESC[loader]/-q/-q --no-multishot}"
    fi
    if [ "$g" = base ]; then
        if [ ! -x "${BASE_LOADER_BIN:-}" ]; then
            bench_log "SKIP base: BASE_LOADER_BIN (another build of our loader) is not an executable: '${BASE_LOADER_BIN:-}'"
            continue
        fi
        BENCH_DESC[base]="taskset -c $GEN_CORE $BASE_LOADER_BIN --threads 1 -c $CONNS -n $N -q ${LOADER_TLS[*]} URL"
    fi
    # A short run per size checks the generator works and gives its exact count and no errors.
    ok=1
    for size in $SIZES; do
        res=$(gen_run "$g" "$BASE/$size" 1000) || res=""
        read -r _ _ c err _ _ <<<"${res:-x x 0 1 x x}"
        if [ -z "$res" ] || [ "$err" != 0 ] || { [ "$g" != wrk ] && [ "$c" != 1000 ]; }; then
            bench_log "SKIP $g: a check run of 1000 requests to /$size did not complete cleanly ($res):"
            bench_log "$(tail -c 2000 "$LOAD_OUT")"
            ok=0
            break
        fi
    done
    [ "$ok" = 1 ] && BENCH_ACTIVE+=("$g")
done
[ "${#BENCH_ACTIVE[@]}" -gt 0 ] || bench_die "nothing to measure"


# The cases: one per response size; with https, keep-alive and a connection per request on /64.
if [ "$SCHEME" = https ]; then
    BENCH_CASES=(ka close)
else
    read -r -a BENCH_CASES <<<"$SIZES"
fi
# case_url CASE, case_n CASE, case_mode CASE
case_url() { case $1 in ka | close) echo "$BASE/64" ;; *) echo "$BASE/$1" ;; esac }
case_n() { if [ "$1" = close ]; then echo "$N_CLOSE"; else echo "$N"; fi }
case_mode() { if [ "$1" = close ]; then echo close; fi }

# Warm-up (not recorded), and wrk's duration per case: about the case's requests at its warm-up
# rate.
declare -A WRK_S
for c in "${BENCH_CASES[@]}"; do
    WRK_SECONDS=2
    res=$(gen_run wrk "$(case_url "$c")" 0 "$(case_mode "$c")") ||
        bench_die "wrk warm-up failed: $(tail -c 1500 "$LOAD_OUT")"
    WRK_S[$c]=$(awk -v n="$(case_n "$c")" -v r="${res%% *}" 'BEGIN { s = int(n / r + 0.5); print (s < 1 ? 1 : s) }')
done

# --- the runs -----------------------------------------------------------------------------------

# load_case CASE GEN: the case's requests (wrk: WRK_S[CASE] seconds).
load_case() {
    WRK_SECONDS=${WRK_S[$1]}
    gen_run "$2" "$(case_url "$1")" "$(case_n "$1")" "$(case_mode "$1")"
}

bench_rounds "$ROUNDS" "" bench_measure load_case

# --- the report ---------------------------------------------------------------------------------

case_title() {
    case $1 in
        ka) echo "HTTPS keep-alive, 64 B responses" ;;
        close) echo "HTTPS, a connection per request (a full TLS 1.3 handshake each), 64 B responses" ;;
        *) echo "${BODY_LEN[$1]} B responses" ;;
    esac
}

bench_report_head loader_vs_peers
if [ "$SCHEME" = https ]; then
    echo "# origin: nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///') ($(openssl version | awk '{ print $1, $2 }')), 1 worker, on core $ORIGIN_CORE (benches/peers/nginx-origin-tls.conf): TLS 1.3, AES-128-GCM, X25519, ECDSA P-256, no resumption"
    echo "# each generator alone on core $GEN_CORE, 1 thread, $CONNS connections; ka: $N requests per run, close: $N_CLOSE"
    echo "# close: loader --close --no-resume, wrk -H 'Connection: close', ab without -k; h2load skipped; loader ${LOADER_TLS[*]}"
else
    echo "# each generator alone on core $GEN_CORE, 1 thread, $CONNS keep-alive connections, $N requests per run"
fi
bench_report_targets
echo "#   (wrk: -d per case: $(for c in "${BENCH_CASES[@]}"; do printf '%s %ss ' "$c" "${WRK_S[$c]}"; done))"
echo "# gen µs/req = the generator's user+kernel CPU time (rusage, all threads) ÷ completed requests"
echo "# vs wrk = gen µs/req ÷ wrk's in the same round (paired); summary = median [min-max] over rounds"
bench_report case_title gen gen_us/req wrk
bench_report_tail nginx-origin.conf nginx-origin-tls.conf
