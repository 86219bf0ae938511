#!/usr/bin/env bash
# What observability costs in CPU per request: our proxy without the outcome record and the
# metrics ("base": a build of BASE_REV, the tree before them), with them ("ours", the metrics
# always count; the admin listener only reads them), and with the access log on as well
# ("logged", combined format to a file). One worker each, same origin, interleaved rounds,
# ratios paired to base in each round. A wrapper around benches/proxy_vs_peers.sh.
#
#   benches/obs_cost.sh                              # ROUNDS=5, 64 B, keep-alive and close
#   BASE_REV=abc123 ROUNDS=7 DURATION=10s benches/obs_cost.sh
#
# Environment: BASE_REV (default: the merge base of HEAD and main, i.e. main without this
# branch; once merged, give the commit before the merge), BASE_DIR (where the base tree is
# unpacked and built; default /tmp/proxy-obs-base-REV, reused when its binary exists), and
# everything proxy_vs_peers.sh takes (ROUNDS, DURATION, SIZES, MODES, CONNS, AB_N, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_REV=${BASE_REV:-$(git merge-base HEAD main)}
BASE_REV=$(git rev-parse --short "$BASE_REV")
BASE_DIR=${BASE_DIR:-/tmp/proxy-obs-base-$BASE_REV}
BASE_BIN=$BASE_DIR/target/release/proxy

if [ ! -x "$BASE_BIN" ]; then
    echo "obs_cost: building the base proxy ($BASE_REV) in $BASE_DIR" >&2
    mkdir -p "$BASE_DIR/src"
    git archive "$BASE_REV" | tar -x -C "$BASE_DIR/src"
    (cd "$BASE_DIR/src" && CARGO_TARGET_DIR="$BASE_DIR/target" cargo build --release -q -p proxy)
fi

export BASE_BIN
export TARGETS=${TARGETS:-"base ours logged"}
export RATIO_TO=${RATIO_TO:-base}
export ROUNDS=${ROUNDS:-5}
export SIZES=${SIZES:-64}
export MODES=${MODES:-"keepalive close"}
exec benches/proxy_vs_peers.sh
