#!/usr/bin/env bash
# The plain-ssh variant, for machines without Kubernetes: copy the release loader to each
# host, start shard k on host k (JOB_COMPLETION_INDEX=k, `--shard auto/N`, one --start-at
# for all, so the rates add up), fetch the --json results and merge them here.
#
#   HOSTS="load1 load2 load3" scripts/k8s/ssh-shards.sh OUT_DIR URL -- -d 60s -c 64 --rate 30000
#
# The hosts need passwordless ssh and synchronised clocks (chrony/NTP): `loader merge` warns
# when the shards started more than a second apart. START_DELAY: seconds from now to
# --start-at (default 10, time for ssh to reach every host). REMOTE_DIR: where the binary and
# the results go on the hosts (default /tmp).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ -n "${HOSTS:-}" ] && [ $# -ge 2 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
OUT=$1 URL=$2
shift 2
[ $# -ge 1 ] && [ "$1" = "--" ] && shift
read -r -a HOST_LIST <<<"$HOSTS"
N=${#HOST_LIST[@]}
LOADER=${LOADER:-$ROOT/target/release/loader}
[ -x "$LOADER" ] || (cd "$ROOT" && cargo build -q --release -p loader)
mkdir -p "$OUT"
REMOTE_DIR=${REMOTE_DIR:-/tmp}
START_AT=$(( $(date +%s) + ${START_DELAY:-10} ))
PIDS=()
for ((k = 0; k < N; k++)); do
  h=${HOST_LIST[$k]}
  REMOTE=$REMOTE_DIR/loader-shard-$k
  (
    scp -q "$LOADER" "$h:$REMOTE"
    # shellcheck disable=SC2029 # the flags are expanded here on purpose
    ssh "$h" "JOB_COMPLETION_INDEX=$k $REMOTE -q $* --shard auto/$N --start-at $START_AT \
      --json $REMOTE.json --hdr-log $REMOTE.hlog '$URL'" >"$OUT/shard-$k.txt"
    scp -q "$h:$REMOTE.json" "$h:$REMOTE.hlog" "$OUT/"
  ) &
  PIDS+=($!)
done
failed=0
for p in "${PIDS[@]}"; do wait "$p" || failed=1; done
[ $failed -eq 0 ] || { echo "a shard failed: see $OUT/shard-*.txt" >&2; exit 1; }
FILES=()
for ((k = 0; k < N; k++)); do FILES+=("$OUT/loader-shard-$k.json"); done
"$LOADER" merge "${FILES[@]}" --json "$OUT/merged.json" | tee "$OUT/merged.txt"
