#!/usr/bin/env bash
# The generator's own send lateness at a fixed rate, with and without --spin (issue 14).
#
# In --rate mode latency is measured from each request's intended send time; a generator that
# sleeps between sends wakes late (monoio's 1 ms timer, an idle vCPU's wake-up), and the
# correction charges that lateness to the server. This runs the built-in origin on one core and
# the loader on another at RATE req/s, alternating plain and --spin runs for ROUNDS rounds, and
# prints per run: the achieved rate, the send-lateness p99, and corrected p50 minus uncorrected
# p50 (the part of the median that is the generator's delay). Goal with --spin: that difference
# under 50 µs. Then the median [min-max] per variant.
#
#   benches/loader_lateness.sh                        # defaults: ROUNDS=3 RATE=10000 DURATION=5s
#   ROUNDS=5 RATE=20000 CONNS=32 benches/loader_lateness.sh
#
# Environment: ROUNDS (3), RATE (10000), CONNS (16), DURATION (5s), ORIGIN_CORE (0), GEN_CORE
# (1), LOADER_BIN (target/release/loader, built here unless NO_BUILD=1), KEEP_TMP=1.
# Not a test: it asserts nothing, and its figures depend on the machine (measure on a quiet one).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ROUNDS=${ROUNDS:-3}
RATE=${RATE:-10000}
CONNS=${CONNS:-16}
DURATION=${DURATION:-5s}
ORIGIN_CORE=${ORIGIN_CORE:-0}
GEN_CORE=${GEN_CORE:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
LOADER_BIN=${LOADER_BIN:-$TARGET_DIR/release/loader}

bench_require taskset python3 ss
[ "$(nproc)" -ge 2 ] || bench_log "warning: fewer than 2 cores; the origin and the generator share one"
bench_build loader || bench_die "cargo build --release -p loader failed"
[ -x "$LOADER_BIN" ] || bench_die "no loader binary at $LOADER_BIN"

bench_init
PORT=$(bench_free_port)
bench_start "$ORIGIN_CORE" "$BENCH_TMP/origin.log" "$LOADER_BIN" origin \
    --listen "127.0.0.1:$PORT" --body-size 64 --threads 1 --no-pin
bench_wait_port "$PORT" "$BENCH_LAST_PID" || bench_die "the origin did not start: $(cat "$BENCH_TMP/origin.log")"

# one_run VARIANT: prints "ACHIEVED LATE_P99_MS DIFF_P50_US" from the run's JSON.
one_run() {
    local variant=$1 json="$BENCH_TMP/run.json" extra=()
    [ "$variant" = spin ] && extra=(--spin)
    # A failed run must not leave the previous run's figures to be read again.
    rm -f "$json"
    timeout 120s taskset -c "$GEN_CORE" "$LOADER_BIN" -q --threads 1 --no-pin -c "$CONNS" \
        --rate "$RATE" -d "$DURATION" "${extra[@]}" --json "$json" \
        "http://127.0.0.1:$PORT/" >"$BENCH_TMP/run.out" 2>&1 || return 1
    python3 - "$json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["rate"]
diff_us = (d["percentiles_ms"]["50"] - r["uncorrected_percentiles_ms"]["50"]) * 1000
print(f'{r["achieved"]:.0f} {r["send_lateness_percentiles_ms"]["99"]:.3f} {diff_us:.0f}')
PY
}

echo "# $(bench_machine)"
echo "# loader $("$LOADER_BIN" --version | awk '{print $2}'): taskset -c $GEN_CORE loader --threads 1 -c $CONNS --rate $RATE -d $DURATION [--spin]; built-in origin (64 B) on core $ORIGIN_CORE"
printf '%-6s %-6s %10s %16s %24s\n' round pacing achieved "lateness p99 ms" "corr-uncorr p50 µs"

# one_row CASE ROUND VARIANT: one run, printed as a row and kept for the summary.
declare -A LATE=() DIFF=()
one_row() {
    local res achieved late diff
    res=$(one_run "$3") || res=""
    if [ -z "$res" ]; then
        bench_log "round $2 $3: the loader run failed: $(tail -c 1500 "$BENCH_TMP/run.out")"
        return 0
    fi
    read -r achieved late diff <<<"$res"
    printf '%-6s %-6s %10s %16s %24s\n' "$2" "$3" "$achieved" "$late" "$diff"
    LATE[$3]+="$late "
    DIFF[$3]+="$diff "
}

# The variants are the targets: bench_rounds alternates which goes first, so drift in the
# machine's load is shared.
BENCH_ACTIVE=(timer spin)
BENCH_CASES=("$RATE/s")
bench_rounds "$ROUNDS" "" one_row
[ "${#LATE[@]}" -gt 0 ] || bench_die "no run of the loader succeeded"
echo
for v in timer spin; do
    # shellcheck disable=SC2086 # the lists are split into values on purpose
    echo "$v: lateness p99 $(FMT=%g fmt_spread ${LATE[$v]:-}) ms; corrected-minus-uncorrected p50 $(FMT=%g fmt_spread ${DIFF[$v]:-}) µs (goal with spin: < 50)"
done
