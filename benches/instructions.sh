#!/usr/bin/env bash
# User-space instructions per proxied request, counted by valgrind's callgrind: the repeatable
# check for a change too small for CPU time on a shared machine (there a 5% difference needs
# more rounds than a session has; these counts repeat within about 3%). Kernel work is not
# counted: it is what CPU time (benches/all.sh) measures.
#
#   benches/instructions.sh                                  # ours, SIZES="64 32k", ROUNDS=2, N1=500 N2=2500
#   NO_BUILD=1 BASE_BIN=/tmp/proxy-old benches/instructions.sh   # new and old in the same rounds
#   LOAD_ARGS=--close benches/instructions.sh                # a connection per request
#
# Per target, size and round: the proxy (one worker, under callgrind) relays N1 then, started
# again, N2 requests from our loader (CONNS keep-alive connections; a connection per request
# with LOAD_ARGS=--close) to an nginx origin serving files from disk; the difference of the
# two totals over N2 - N1 is the count per request (start-up and exit cancel out). Prints one
# line per run and the median per target and size, with new ÷ old when BASE_BIN is given.
# shellcheck source=benches/lib.sh
. "$(dirname "$0")/lib.sh"
set -euo pipefail

ROUNDS=${ROUNDS:-2}
SIZES=${SIZES:-"64 32k"}
CONNS=${CONNS:-8}
N1=${N1:-500}
N2=${N2:-2500}
PROXY_BIN=${PROXY_BIN:-${CARGO_TARGET_DIR:-target}/release/proxy}
LOADER_BIN=${LOADER_BIN:-${CARGO_TARGET_DIR:-target}/release/loader}
TARGETS=${TARGETS:-"ours${BASE_BIN:+ base}"}
((N2 > N1)) || bench_die "N2 ($N2) must be above N1 ($N1)"
bench_require valgrind taskset envsubst
cd "$BENCH_ROOT"
bench_build proxy || bench_die "cargo build --release -p proxy failed"
bench_build loader || bench_die "cargo build --release -p loader failed"

bench_init
bench_start_origin 0

# total BIN SIZE N: the instructions callgrind counted over the proxy's life while it relayed
# N requests of SIZE.
total() {
    local bin=$1 size=$2 n=$3 port out pid
    port=$(bench_free_port)
    out="$BENCH_TMP/callgrind.$size.$n.out"
    bench_start 1 "$BENCH_TMP/callgrind.log" valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" --listen "127.0.0.1:$port" --upstream "127.0.0.1:$ORIGIN_PORT" --workers 1 --no-pin
    pid=$BENCH_LAST_PID
    bench_wait_port "$port" "$pid" 60 || bench_die "$bin did not start under valgrind (see $BENCH_TMP/callgrind.log)"
    # shellcheck disable=SC2086 # the extra flags are split into words on purpose
    taskset -c 0 "$LOADER_BIN" -c "$CONNS" -n "$n" -q --workers 1 --no-pin ${LOAD_ARGS:-} \
        "http://127.0.0.1:$port/$size" >"$BENCH_TMP/load.txt" 2>&1 ||
        bench_die "the load failed: $(tail -3 "$BENCH_TMP/load.txt")"
    # The counts are written at exit, which takes valgrind a while: wait for it (a guard ends
    # a proxy that does not stop within a minute).
    kill "$pid"
    (exec >/dev/null 2>&1; sleep 60 && kill -9 "$pid") &
    local guard=$!
    wait "$pid" || true
    pkill -P "$guard" 2>/dev/null || true
    kill "$guard" 2>/dev/null || true
    awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

declare -A per m
for ((r = 1; r <= ROUNDS; r++)); do
    for size in $SIZES; do
        for t in $TARGETS; do
            case $t in
            ours) bin=$PROXY_BIN ;;
            base) bin=${BASE_BIN:?base needs BASE_BIN} ;;
            *) bench_die "unknown target '$t' (ours, base)" ;;
            esac
            a=$(total "$bin" "$size" "$N1")
            b=$(total "$bin" "$size" "$N2")
            if [ -z "$a" ] || [ -z "$b" ]; then bench_die "no callgrind total for $t $size"; fi
            n=$(((b - a) / (N2 - N1)))
            per[$t.$size]+="$n "
            printf 'round %d  %-5s %5s  %d instructions per request\n' "$r" "$t" "$size" "$n"
        done
    done
done

echo "median [min-max] over $ROUNDS rounds (user-space instructions per request, $CONNS connections${LOAD_ARGS:+, loader $LOAD_ARGS}):"
for size in $SIZES; do
    line="  $size:"
    # shellcheck disable=SC2086 # the counts, one word each
    for t in $TARGETS; do
        read -r m[$t] _ _ < <(stats ${per[$t.$size]})
        line+=" $t $(FMT=%.0f fmt_spread ${per[$t.$size]})"
    done
    if [ -n "${BASE_BIN:-}" ]; then
        line+="  new ÷ old $(div "${m[ours]}" "${m[base]}")"
    fi
    echo "$line"
done
