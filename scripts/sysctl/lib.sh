# shellcheck shell=bash
# The one implementation behind dry-run.sh, apply.sh, revert.sh and tune-experiment.sh: profile
# parsing, the plan (what would change), saving, writing and restoring. Sourced, never run.
#
# Environment (every script):
#   SYSCTL_ROOT       the sysctl tree to read and write (default /proc/sys). Tests point it at a
#                     temporary directory laid out like /proc/sys.
#   SYSCTL_STATE_DIR  where apply saves the values it replaces (default /run/proxy-sysctl: a
#                     tmpfs, so a reboot, which resets the sysctls, also forgets the saved ones).
#   SYSCTL_CHECK_UID  for tests only: the uid the root check looks at instead of `id -u`, so a
#                     test running as root can check that a non-root user is refused.

SYSCTL_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SYSCTL_ROOT=${SYSCTL_ROOT:-/proc/sys}
SYSCTL_STATE_DIR=${SYSCTL_STATE_DIR:-/run/proxy-sysctl}
SAVED="$SYSCTL_STATE_DIR/saved"

die() { # die STATUS MESSAGE...: one line on stderr (the words joined by spaces), then exit.
    local status=$1
    shift
    echo "error: $*" >&2
    exit "$status"
}

require_root() { # require_root WHAT
    local uid=${SYSCTL_CHECK_UID:-$(id -u)}
    if [ "$uid" != 0 ]; then
        die 1 "$1 writes kernel settings and needs root (running as uid $uid): run it with sudo"
    fi
}

profile_names() {
    local f names=()
    for f in "$SYSCTL_DIR"/profiles/*.conf; do
        f=${f##*/}
        names+=("${f%.conf}")
    done
    local list
    printf -v list '%s, ' "${names[@]}"
    echo "${list%, }"
}

# The file of a profile: a name from profiles/, or a path (anything with a slash).
profile_file() {
    local p=$1
    if [[ $p == */* ]]; then
        [ -f "$p" ] || die 2 "profile file $p does not exist"
        echo "$p"
        return
    fi
    if [[ ! $p =~ ^[A-Za-z0-9_-]+$ ]] || [ ! -f "$SYSCTL_DIR/profiles/$p.conf" ]; then
        die 2 "no profile '$p' (profiles: $(profile_names); or give a file path)"
    fi
    echo "$SYSCTL_DIR/profiles/$p.conf"
}

# Parse profiles, later ones overriding earlier ones key by key, into KEYS (in first-seen
# order), OP[key] ("=" or ">=") and WANT[key], and ON_PURPOSE[key]: the reason of an entry
# marked `key = value ! reason`, which is set as it is even where that lowers the value.
declare -a KEYS=()
declare -A OP=() WANT=() ON_PURPOSE=()
load_profiles() {
    [ $# -gt 0 ] || die 2 "no profile given (profiles: $(profile_names))"
    local p file line n key op value reason
    # KEY = VALUE or KEY >= VALUE, spaces allowed around each part.
    local syntax='^[[:space:]]*([A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+)[[:space:]]*(>?=)[[:space:]]*(.*[^[:space:]])[[:space:]]*$'
    for p in "$@"; do
        file=$(profile_file "$p") || exit 2
        n=0
        while IFS= read -r line || [ -n "$line" ]; do
            n=$((n + 1))
            line=${line%%#*}
            [[ $line =~ ^[[:space:]]*$ ]] && continue
            if [[ ! $line =~ $syntax ]]; then
                die 2 "$file:$n: expected 'key = value' or 'key >= number', got: $line"
            fi
            key=${BASH_REMATCH[1]} op=${BASH_REMATCH[3]} value=${BASH_REMATCH[4]}
            unset "ON_PURPOSE[$key]"
            if [[ $value == *'!'* ]]; then
                reason=$(norm "${value#*!}")
                value=$(norm "${value%%!*}")
                if [ "$op" != "=" ] || [ -z "$reason" ] || [ -z "$value" ]; then
                    die 2 "$file:$n: a value set on purpose is 'key = value ! reason', got: $line"
                fi
                ON_PURPOSE[$key]=$reason
            fi
            if [[ $op == ">=" || $key == rlimit.* ]] && [[ ! $value =~ ^[0-9]{1,18}$ ]]; then
                die 2 "$file:$n: $key needs a whole number, got: $value"
            fi
            if [[ $key == rlimit.* && $key != rlimit.nofile ]]; then
                die 2 "$file:$n: unknown limit $key (only rlimit.nofile)"
            fi
            [ -n "${OP[$key]:-}" ] || KEYS+=("$key")
            OP[$key]=$op
            WANT[$key]=$value
        done <"$file"
    done
}

sysctl_path() { echo "$SYSCTL_ROOT/${1//.//}"; }

# Whitespace collapsed to single spaces: how values compare ("32768<TAB>60999" = "32768 60999").
norm() {
    local -a words
    read -ra words <<<"$1"
    echo "${words[*]}"
}

# The raw content of a sysctl file without its final newline; fails if it cannot be read.
read_raw() {
    local v
    v=$(cat -- "$1" 2>/dev/null) || return 1
    printf '%s' "$v"
}

# num_ge A B: A >= B for whole numbers of any length (fs.file-max can be 2^63-1, past what
# shell arithmetic compares safely); false when A is not a whole number.
num_ge() {
    local a=$1 b=$2
    [[ $a =~ ^[0-9]+$ && $b =~ ^[0-9]+$ ]] || return 1
    a=${a#"${a%%[!0]*}"} b=${b#"${b%%[!0]*}"}
    if [ ${#a} -ne ${#b} ]; then
        [ ${#a} -gt ${#b} ]
    else
        [[ ! $a < $b ]]
    fi
}

# raised CUR WANT: WANT's numbers where they are above CUR's, field by field (a tuning
# profile raises what it tunes, it never lowers a value already above: a host tuned past the
# profile keeps its tuning); fails when the two are not whole numbers field for field.
raised() {
    local -a cur want out=()
    read -ra cur <<<"$1"
    read -ra want <<<"$2"
    [ ${#cur[@]} -eq ${#want[@]} ] || return 1
    local i
    for i in "${!want[@]}"; do
        [[ ${cur[$i]} =~ ^[0-9]+$ && ${want[$i]} =~ ^[0-9]+$ ]] || return 1
        if num_ge "${cur[$i]}" "${want[$i]}"; then out+=("${cur[$i]}"); else out+=("${want[$i]}"); fi
    done
    echo "${out[*]}"
}

# Decide, for every key, ACTION[key] (set, same, atleast, above, skip, rlimit), CUR[key] and
# TARGET[key] (what `set` writes: WANT, or WANT raised past CUR field by field).
declare -A ACTION=() CUR=() TARGET=()
make_plan() {
    local key path cur
    for key in "${KEYS[@]}"; do
        if [[ $key == rlimit.* ]]; then
            ACTION[$key]="rlimit"
            continue
        fi
        path=$(sysctl_path "$key")
        if [ ! -f "$path" ] || ! cur=$(read_raw "$path"); then
            ACTION[$key]="skip"
            continue
        fi
        CUR[$key]=$cur
        TARGET[$key]=${WANT[$key]}
        local up
        if [ "${OP[$key]}" = ">=" ] && num_ge "$(norm "$cur")" "${WANT[$key]}"; then
            ACTION[$key]="atleast"
        elif [ "${OP[$key]}" = "=" ] && [ "$(norm "$cur")" = "$(norm "${WANT[$key]}")" ]; then
            ACTION[$key]="same"
        elif [ "${OP[$key]}" = "=" ] && [ -z "${ON_PURPOSE[$key]+x}" ] &&
            up=$(raised "$(norm "$cur")" "$(norm "${WANT[$key]}")"); then
            if [ "$up" = "$(norm "$cur")" ]; then
                ACTION[$key]="above"
            else
                ACTION[$key]="set"
                TARGET[$key]=$up
            fi
        else
            ACTION[$key]="set"
        fi
    done
}

# One line per key; VERB is "would change" (dry run) or "set" (apply).
print_plan() {
    local verb=$1 key line changed=0 same=0 skipped=0
    for key in "${KEYS[@]}"; do
        case ${ACTION[$key]} in
        set)
            line="$(norm "${CUR[$key]}") -> $(norm "${TARGET[$key]}")"
            if [ -n "${ON_PURPOSE[$key]+x}" ]; then
                line+=" (set on purpose: ${ON_PURPOSE[$key]})"
            elif [ "$(norm "${TARGET[$key]}")" != "$(norm "${WANT[$key]}")" ]; then
                line+=" (fields already above ${WANT[$key]} kept)"
            fi
            changed=$((changed + 1))
            ;;
        above)
            line="$(norm "${CUR[$key]}") (unchanged: already above $(norm "${WANT[$key]}"))"
            same=$((same + 1))
            ;;
        same)
            line="$(norm "${CUR[$key]}") (unchanged)"
            same=$((same + 1))
            ;;
        atleast)
            line="$(norm "${CUR[$key]}") (unchanged: already >= ${WANT[$key]})"
            same=$((same + 1))
            ;;
        skip)
            line="skipped: not on this kernel ($(sysctl_path "$key") cannot be read)"
            skipped=$((skipped + 1))
            ;;
        rlimit)
            line="${WANT[$key]} (per process, not a sysctl: tune-experiment.sh runs under it;"
            line+=" a service sets LimitNOFILE)"
            ;;
        esac
        printf '  %-36s %s\n' "$key" "$line"
    done
    echo "$changed $verb, $same unchanged, $skipped skipped"
}

# The saved values, KEY<TAB>RAW VALUE per line, into SAVED_VALUE[key] (in file order: SAVED_KEYS).
declare -a SAVED_KEYS=()
declare -A SAVED_VALUE=()
read_saved() {
    [ -f "$SAVED" ] || return 0
    local line key
    while IFS= read -r line; do
        [[ $line == \#* || -z $line ]] && continue
        key=${line%%$'\t'*}
        SAVED_KEYS+=("$key")
        SAVED_VALUE[$key]=${line#*$'\t'}
    done <"$SAVED"
}

# Add the current value of every key about to change and not saved yet, so that layered
# applies (baseline, then high-throughput) still revert to what was there before the first.
save_current() {
    local what=$1 key tmp
    mkdir -p -- "$SYSCTL_STATE_DIR" || die 1 "cannot create $SYSCTL_STATE_DIR"
    tmp="$SAVED.tmp"
    {
        if [ -f "$SAVED" ]; then cat -- "$SAVED"; else echo "# saved by apply.sh before: $what"; fi
        for key in "${KEYS[@]}"; do
            if [ "${ACTION[$key]}" = set ] && [ -z "${SAVED_VALUE[$key]+x}" ]; then
                printf '%s\t%s\n' "$key" "${CUR[$key]}"
            fi
        done
    } >"$tmp" || die 1 "cannot write $tmp"
    mv -- "$tmp" "$SAVED" || die 1 "cannot write $SAVED"
}

# write_value KEY VALUE: write and read back; prints a one-line problem and fails on error.
write_value() {
    local key=$1 value=$2 path err now
    path=$(sysctl_path "$key")
    if ! err=$( { printf '%s\n' "$value" >"$path"; } 2>&1); then
        echo "error: $key: cannot write '$(norm "$value")': ${err##*: }" >&2
        return 1
    fi
    now=$(read_raw "$path") || now=""
    if [ "$(norm "$now")" != "$(norm "$value")" ]; then
        echo "warning: $key: wrote '$(norm "$value")', the kernel reads back '$(norm "$now")'" >&2
    fi
}
