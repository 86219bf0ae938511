#!/usr/bin/env bash
# Run N loader processes on this machine exactly as the Indexed Job runs its pods
# (JOB_COMPLETION_INDEX=0..N-1, `--shard auto/N`, one --start-at for all), then merge their
# results with `loader merge`. Without a URL the built-in origin is started on 127.0.0.1.
#
#   scripts/k8s/local-shards.sh N OUT_DIR [URL] [-- LOADER_FLAGS...]
#   scripts/k8s/local-shards.sh 4 /tmp/shards -- -n 100000 -c 16
#   scripts/k8s/local-shards.sh 4 /tmp/shards http://127.0.0.1:8080/ -- -d 10s --rate 40000
#
# LOADER: the binary (default target/release/loader, built when missing). START_DELAY: seconds
# from now to --start-at (default 2). Each shard writes OUT_DIR/shard-K.json, .hlog and .txt
# (its report); the merged report is OUT_DIR/merged.txt and OUT_DIR/merged.json, and is printed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -ge 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
N=$1 OUT=$2
shift 2
URL=""
if [ $# -ge 1 ] && [ "$1" != "--" ]; then URL=$1; shift; fi
[ $# -ge 1 ] && [ "$1" = "--" ] && shift
FLAGS=("$@")
[ ${#FLAGS[@]} -gt 0 ] || FLAGS=(-n 10000 -c 8)
case $N in ''|*[!0-9]*|0) echo "N must be a positive integer" >&2; exit 2 ;; esac

LOADER=${LOADER:-$ROOT/target/release/loader}
if [ ! -x "$LOADER" ]; then (cd "$ROOT" && cargo build -q --release -p loader); fi
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

if [ -z "$URL" ]; then
  "$LOADER" origin --listen 127.0.0.1:0 --body-size 1KiB >"$OUT/origin.url" 2>/dev/null &
  PIDS+=($!)
  for _ in $(seq 100); do [ -s "$OUT/origin.url" ] && break; sleep 0.05; done
  URL=$(head -1 "$OUT/origin.url")
  [ -n "$URL" ] || { echo "the origin did not start" >&2; exit 1; }
fi

START_AT=$(( $(date +%s) + ${START_DELAY:-2} ))
SHARDS=()
for ((k = 0; k < N; k++)); do
  JOB_COMPLETION_INDEX=$k timeout 600 "$LOADER" -q "${FLAGS[@]}" --shard "auto/$N" \
    --start-at "$START_AT" --json "$OUT/shard-$k.json" --hdr-log "$OUT/shard-$k.hlog" \
    "$URL" >"$OUT/shard-$k.txt" &
  SHARDS+=($!)
done
failed=0
for p in "${SHARDS[@]}"; do wait "$p" || failed=1; done
[ $failed -eq 0 ] || { echo "a shard failed: see $OUT/shard-*.txt" >&2; exit 1; }
FILES=()
for ((k = 0; k < N; k++)); do FILES+=("$OUT/shard-$k.json"); done
"$LOADER" merge "${FILES[@]}" --json "$OUT/merged.json" | tee "$OUT/merged.txt"
