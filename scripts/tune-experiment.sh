#!/usr/bin/env bash
# A kernel tuning experiment: the overhead experiment (scripts/experiment.sh) under sysctl
# profile A, then under profile B, then the machine's own values back, and one table of both
# runs with every sysctl the loader recorded in its --json (marked * where A and B differ).
#
#   sudo scripts/tune-experiment.sh                  # PROFILE_A=baseline PROFILE_B=high-throughput
#   sudo PROFILE_B="high-throughput busy-poll" ROUNDS=5 DURATION=5s scripts/tune-experiment.sh
#   scripts/tune-experiment.sh --table A.json B.json [NAME_A NAME_B] # the table of two saved runs
#
# Steps: apply A (scripts/sysctl/apply.sh saves the values it replaces), run the experiment
# with the open-file limit of A (rlimit.nofile, as `ulimit -n`), apply B, run again with B's,
# revert (also on failure or Ctrl-C). ROUNDS, DURATION, CONNS and BODY pass to experiment.sh;
# both runs' JSON documents are kept in OUT (default target/tune-experiment/<UTC time>/).
# Needs root (it writes sysctls) and jq (the table; scripts/install-peers.sh installs it). Environment: see scripts/sysctl/lib.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
# shellcheck source=sysctl/lib.sh
. "$here/sysctl/lib.sh"

need_jq() {
    command -v jq >/dev/null || die 1 "jq is needed for the table (apt-get install jq)"
}

# The table of two compare documents: A's and B's figures, then the machine's context.
table() {
    local a=$1 b=$2 name_a=$3 name_b=$4
    need_jq
    local f
    for f in "$a" "$b"; do
        jq -e '.schema == "loader-compare/1"' "$f" >/dev/null 2>&1 ||
            die 1 "$f is not a 'loader compare --json' document"
    done
    {
        printf '\t%s\t%s\n' "under $name_a" "under $name_b"
        jq -r -n --slurpfile a "$a" --slurpfile b "$b" -f "$here/sysctl/table.jq"
    } | awk -F'\t' '
        {
            for (i = 1; i <= 3; i++) cell[NR, i] = $i
            # A heading (nothing in A and B) is printed alone and does not widen the columns.
            if ($2 != "" || $3 != "")
                for (i = 1; i <= 3; i++) if (length($i) > w[i]) w[i] = length($i)
        }
        END {
            for (r = 1; r <= NR; r++) {
                if (cell[r, 2] == "" && cell[r, 3] == "") print cell[r, 1]
                else printf "%-*s  %-*s  %s\n", w[1], cell[r, 1], w[2], cell[r, 2], cell[r, 3]
            }
        }'
}

if [ "${1:-}" = --table ]; then
    [ $# -eq 3 ] || [ $# -eq 5 ] ||
        die 2 "usage: tune-experiment.sh --table A.json B.json [NAME_A NAME_B]"
    table "$2" "$3" "${4:-A}" "${5:-B}"
    exit 0
fi
[ $# -eq 0 ] || die 2 "tune-experiment.sh takes no arguments" \
    "(PROFILE_A, PROFILE_B, ROUNDS... are environment variables; or --table)"

read -ra prof_a <<<"${PROFILE_A:-baseline}"
read -ra prof_b <<<"${PROFILE_B:-high-throughput}"
# The open-file limit a profile asks for (empty: leave it), after checking the profile parses.
nofile_of() { (load_profiles "$@" && echo "${WANT[rlimit.nofile]:-}"); }
nofile_a=$(nofile_of "${prof_a[@]}") || exit 2
nofile_b=$(nofile_of "${prof_b[@]}") || exit 2
require_root "tune-experiment.sh"
if [ -f "$SAVED" ]; then
    die 1 "an earlier apply is not reverted ($SAVED): run scripts/sysctl/revert.sh first," \
        "so the experiment ends on the machine's own values"
fi
need_jq
OUT=${OUT:-$here/../target/tune-experiment/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p -- "$OUT"
OUT=$(cd "$OUT" && pwd)

applied=0
finish() {
    if [ "$applied" = 1 ]; then
        applied=0
        if "$here/sysctl/revert.sh" >"$OUT/revert.log" 2>&1; then
            echo "reverted: the machine's own sysctl values are back ($OUT/revert.log)" >&2
        else
            cat "$OUT/revert.log" >&2
            echo "error: the revert failed: run scripts/sysctl/revert.sh by hand" >&2
            return 1
        fi
    fi
}
trap 'finish' EXIT
trap 'exit 130' INT TERM

# run NAME NOFILE PROFILE...: apply the profiles, run the experiment under them into NAME.json.
run() {
    local name=$1 nofile=$2
    shift 2
    applied=1
    "$here/sysctl/apply.sh" "$@" | tee "$OUT/apply-$name.log" >&2
    echo "== experiment under $* ${nofile:+(ulimit -n $nofile)}" >&2
    (
        # Raising the hard limit needs CAP_SYS_RESOURCE, which root in a container may lack:
        # then run under the hard limit and say so (the table shows the limit each run had).
        if [ -n "$nofile" ] && ! ulimit -n "$nofile" 2>/dev/null; then
            echo "warning: cannot set the open-file limit to $nofile (raising it needs" \
                "CAP_SYS_RESOURCE and fs.nr_open >= $nofile); running under $(ulimit -Hn)" >&2
            ulimit -Sn "$(ulimit -Hn)"
        fi
        JSON="$OUT/$name.json" "$here/experiment.sh"
    ) | tee "$OUT/experiment-$name.log" >&2
}
run A "$nofile_a" "${prof_a[@]}"
run B "$nofile_b" "${prof_b[@]}"
finish
echo
echo "Overhead experiment (scripts/experiment.sh) under A = ${prof_a[*]}, B = ${prof_b[*]}"
echo "Each figure: median (min-max) over the rounds;" \
    "direct = the origin, proxied = through the proxy"
echo
table "$OUT/A.json" "$OUT/B.json" "${prof_a[*]}" "${prof_b[*]}"
echo
echo "JSON documents and logs: $OUT"
if [ "$SYSCTL_ROOT" != /proc/sys ]; then
    echo "note: the profiles went to SYSCTL_ROOT=$SYSCTL_ROOT; the loader records /proc/sys"
fi
