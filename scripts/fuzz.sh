#!/usr/bin/env bash
# fuzz.sh: run every fuzz target of fuzz/ (libFuzzer through cargo-fuzz) for a bounded time
# each, on its corpus (fuzz/corpus/<target>, kept out of git) and its committed seeds
# (fuzz/seeds/<target>), and report per target: runs, and whether it found a crash.
#
#   scripts/fuzz.sh                          # every target, 60 s each
#   FUZZ_SECONDS=30 scripts/fuzz.sh          # a smoke run
#   scripts/fuzz.sh config route_template    # only these
#
# Needs cargo-fuzz (installed with `cargo install cargo-fuzz` when missing) and a nightly
# compiler for the sanitizer flags: `cargo +nightly` when rustup has one, otherwise stable
# told to accept them (RUSTC_BOOTSTRAP=1, which works for these targets). A crash is saved
# under fuzz/artifacts/<target>/ and makes the script exit 1; replay it with
# `cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>` and add it to
# fuzz/seeds/<target>/ with the fix (fuzz/README.md).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${FUZZ_SECONDS:-60}
cd "$ROOT/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    FUZZ=(cargo +nightly fuzz)
else
    export RUSTC_BOOTSTRAP=1
    FUZZ=(cargo fuzz)
fi

if [ "$#" -gt 0 ]; then
    TARGETS=("$@")
else
    mapfile -t TARGETS < <("${FUZZ[@]}" list)
fi

for t in "${TARGETS[@]}"; do "${FUZZ[@]}" build "$t"; done
failed=()
for t in "${TARGETS[@]}"; do
    mkdir -p "corpus/$t"
    log=$(mktemp "/tmp/fuzz-$t.XXXXXX")
    echo "== $t: ${SECS}s" >&2
    # -rss_limit_mb and -timeout: a leak or a hang is a finding too, not a stuck run.
    if "${FUZZ[@]}" run "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        >"$log" 2>&1; then
        runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
        echo "$t: ok, ${runs:-?} runs in ${SECS}s" >&2
    else
        echo "$t: FAILED (log: $log)" >&2
        grep -E 'panicked|ERROR|SUMMARY|artifact' "$log" | head -5 >&2 || true
        failed+=("$t")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz.sh: ${failed[*]} found a crash" >&2
    exit 1
fi
echo "fuzz.sh: every target ran ${SECS}s without a crash" >&2
