#!/usr/bin/env bash
# Apply PROFILE... (later ones override earlier ones key by key): save the current value of
# every sysctl about to change, then write the new values. revert.sh restores the saved ones.
#
#   sudo scripts/sysctl/apply.sh high-throughput
#   sudo scripts/sysctl/apply.sh baseline && sudo scripts/sysctl/apply.sh high-throughput
#
# Applying again (another profile) adds to the saved values only keys not saved yet, so one
# revert always returns to the state before the first apply. A sysctl this kernel does not
# have is skipped with a note. Exit status: 0 when every write took, 1 when one failed (the
# others are written; revert.sh undoes them all), 2 for a bad profile.
# Environment: see lib.sh (SYSCTL_ROOT, SYSCTL_STATE_DIR, SYSCTL_CHECK_UID).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

load_profiles "$@"
require_root "apply.sh"
make_plan
read_saved
save_current "$*"
echo "apply: profile $* to $SYSCTL_ROOT (previous values saved in $SAVED)"
print_plan "changed"
failed=0
for key in "${KEYS[@]}"; do
    if [ "${ACTION[$key]}" = set ]; then
        write_value "$key" "${TARGET[$key]}" || failed=$((failed + 1))
    fi
done
if [ "$failed" -gt 0 ]; then
    die 1 "$failed sysctl(s) could not be written; the others were:" \
        "scripts/sysctl/revert.sh restores all"
fi
