#!/usr/bin/env bash
# What observability costs in CPU per request, one binary three ways: no admin listener (the
# metrics off: nothing counted, requests not timed; target "base"), an admin listener (the
# metrics on: every request timed and counted; "ours"), and an admin listener plus the access
# log ("logged", combined format to a file). One worker each, same origin, interleaved rounds,
# ratios paired to base in each round. A wrapper around benches/proxy_vs_peers.sh.
#
#   benches/obs_cost.sh                              # ROUNDS=9, 64 B, keep-alive and close
#   ROUNDS=5 DURATION=10s MODES=keepalive benches/obs_cost.sh
#   BASE_REV=cdebf54 benches/obs_cost.sh             # base = an older build instead
#
# Environment: BASE_REV (unset: the base is this build without --admin; set: the base is that
# revision's build, unpacked and built in BASE_DIR, default /tmp/proxy-obs-base-REV, reused when
# its binary exists), and everything proxy_vs_peers.sh takes (ROUNDS, DURATION, SIZES, MODES,
# CONNS, AB_N, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
if [ -n "${BASE_REV:-}" ]; then
    BASE_REV=$(git rev-parse --short "$BASE_REV")
    BASE_DIR=${BASE_DIR:-/tmp/proxy-obs-base-$BASE_REV}
    BASE_BIN=$BASE_DIR/target/release/proxy
    if [ ! -x "$BASE_BIN" ]; then
        echo "obs_cost: building the base proxy ($BASE_REV) in $BASE_DIR" >&2
        mkdir -p "$BASE_DIR/src"
        git archive "$BASE_REV" | tar -x -C "$BASE_DIR/src"
        (cd "$BASE_DIR/src" && CARGO_TARGET_DIR="$BASE_DIR/target" cargo build --release -q -p proxy)
    fi
    export BASE_ARGS=${BASE_ARGS-}
else
    if [ "${NO_BUILD:-0}" != 1 ]; then
        cargo build --release -q -p proxy
    fi
    BASE_BIN=$PROXY_BIN
    export BASE_ARGS=""
    export NO_BUILD=1
fi
# Port 0: ours and logged run side by side, each with an admin listener of its own.
export PROXY_ARGS="${PROXY_ARGS:-} --admin 127.0.0.1:0"
export BASE_BIN PROXY_BIN
export TARGETS=${TARGETS:-"base ours logged"}
export RATIO_TO=${RATIO_TO:-base}
export ROUNDS=${ROUNDS:-9}
export SIZES=${SIZES:-64}
export MODES=${MODES:-"keepalive close"}
exec benches/proxy_vs_peers.sh
