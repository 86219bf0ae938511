#!/usr/bin/env bash
# Restore every sysctl that apply.sh changed to the value it had before the first apply,
# byte for byte, then forget the saved values.
#
#   sudo scripts/sysctl/revert.sh
#
# Exit status: 0 when everything was restored, 1 when there is nothing to revert or a value
# could not be written back (the saved values are then kept, so it can be run again).
# Environment: see lib.sh (SYSCTL_ROOT, SYSCTL_STATE_DIR, SYSCTL_CHECK_UID).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -eq 0 ] || die 2 "revert.sh takes no arguments (it restores what apply.sh saved)"
require_root "revert.sh"
[ -f "$SAVED" ] || die 1 "nothing to revert: no values saved in $SAVED (apply.sh saves them)"
read_saved
echo "revert: restoring ${#SAVED_KEYS[@]} sysctl(s) in $SYSCTL_ROOT from $SAVED"
failed=0
for key in "${SAVED_KEYS[@]}"; do
    path=$(sysctl_path "$key")
    if [ ! -f "$path" ]; then
        echo "  $key: skipped, $path no longer exists" >&2
        continue
    fi
    now=$(read_raw "$path") || now=""
    if write_value "$key" "${SAVED_VALUE[$key]}"; then
        printf '  %-36s %s -> %s\n' "$key" "$(norm "$now")" "$(norm "${SAVED_VALUE[$key]}")"
    else
        failed=$((failed + 1))
    fi
done
[ "$failed" -eq 0 ] || die 1 "$failed sysctl(s) could not be restored; values kept in $SAVED"
rm -f -- "$SAVED"
rmdir -- "$SYSCTL_STATE_DIR" 2>/dev/null || true
