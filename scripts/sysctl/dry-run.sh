#!/usr/bin/env bash
# Print what applying PROFILE... would change, key by key, and change nothing.
#
#   scripts/sysctl/dry-run.sh high-throughput
#   scripts/sysctl/dry-run.sh high-throughput busy-poll     # later profiles override earlier
#
# Unlike apply.sh and revert.sh it runs as any user: it only reads, so it is what you run
# before reaching for sudo. Environment: see lib.sh (SYSCTL_ROOT, SYSCTL_STATE_DIR).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

load_profiles "$@"
make_plan
echo "dry run: profile $* against $SYSCTL_ROOT (nothing is written)"
print_plan "would change"
if [ -f "$SAVED" ]; then
    echo "note: values saved by an earlier apply are waiting in $SAVED (revert.sh restores them)"
fi
