#!/usr/bin/env bash
# Every comparison of the project in one go, and ONE markdown table (issue 23).
#
# Runs each group through its own script (benches/*.sh, which measure the CPU time per request
# of the process under test, paired with its peer in the same round), ROUNDS times, the groups
# interleaved (round 1 of every group, then round 2, ..., the order rotating each round, so a
# noisy minute does not take all the rounds of one group), and writes one table: per case, ours
# µs/req (user + kernel), the peer's, ours ÷ peer median [min-max] over the rounds, and with
# BASE_BIN or BASE_REV a new ÷ old column from the same rounds. The table goes to stdout and to
# REPORT; the raw TSV and every script's own report and log go to the directory beside it.
#
#   benches/all.sh                                 # every group, ROUNDS=5 DURATION=3s (~25 min
#                                                  # on 2 busy cores; a third more with BASE_*)
#   QUICK=1 benches/all.sh                         # smoke run: ROUNDS=1 DURATION=1s (~3 min)
#   ONLY="proxy return" benches/all.sh             # some groups
#   BASE_REV=HEAD~1 benches/all.sh                 # new ÷ old for every row (the old build is made
#                                                  # in a scratch worktree under $TMPDIR)
#   BASE_BIN=/tmp/proxy-before ONLY=proxy benches/all.sh   # an older proxy binary
#
# Groups (ONLY, in this order; the script each runs; the peers):
#   proxy    proxy_vs_peers.sh: 64 B / 32 KiB / 1 MiB × keep-alive (wrk) / a connection per
#            request (ab): nginx, HAProxy
#   tls      proxy_vs_peers.sh SCHEME=https: 64 B and 32 KiB keep-alive (wrk), full and resumed
#            handshakes per connection (our loader): nginx + OpenSSL
#   return   return_vs_nginx.sh: `return 302` keep-alive (wrk), ab -n AB_N -c 10: nginx + set_random
#   static   static_vs_nginx.sh: 64 B / 32 KiB files × keep-alive / per request: nginx (sendfile)
#   cache    cache_vs_peers.sh: hits of 64 B / 32 KiB pages, keep-alive: nginx proxy_cache, Varnish
#   loader   loader_vs_peers.sh: 64 B / 32 KiB responses, keep-alive, the generator's own CPU:
#            wrk, h2load, ab -k
#   workers  workers_vs_nginx.sh: proxied 64 B, keep-alive and per request, 1 and 2 workers on
#            both cores: 2 workers ÷ 1 worker for ours and for nginx, and for ours steered by
#            CPU (--steer cpu)
# Every proxied case has an nginx origin serving files from disk with sendfile (ORIGIN=nginx,
# see bench_start_origin in benches/lib.sh); without nginx, the built-in origin (one size a run).
#
# Environment: ROUNDS (5), DURATION (3s, per load), QUICK=1 (ROUNDS=1 DURATION=1s and smaller
# counts), ONLY (the groups), BASE_BIN (an older proxy binary: target "base" in every group that
# runs our proxy), BASE_LOADER_BIN (an older loader, for the loader group), BASE_REV (a git
# revision: both are built from it, release profile, in $TMPDIR/bench-base-SHA, reused when
# there), SKIP_PEERS (peers left out as if not installed: nginx haproxy varnish h2load set-misc),
# LOADER_N (requests per loader run, 200000), N_CLOSE (TLS handshakes per run, 3000), RETURN_AB_N
# (100000, the seeds'), REPORT (default benches/results/all-DATE.md, relative to the repository
# root; the raw results go to the directory of the same name without .md), SCRIPT_TIMEOUT (1800 s per
# script run), NO_BUILD=1, PROXY_BIN, LOADER_BIN. Passed through to every script: PROXY_ARGS,
# BASE_ARGS, CONNS, ORIGIN, KEEP_TMP, CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
source benches/lib.sh

ALL_GROUPS="proxy tls return static cache loader workers"
QUICK=${QUICK:-}
if [ -n "$QUICK" ]; then
    ROUNDS=${ROUNDS:-1}
    DURATION=${DURATION:-1s}
    LOADER_N=${LOADER_N:-30000}
    N_CLOSE=${N_CLOSE:-1000}
    RETURN_AB_N=${RETURN_AB_N:-20000}
fi
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3s}
LOADER_N=${LOADER_N:-200000}
N_CLOSE=${N_CLOSE:-3000}
RETURN_AB_N=${RETURN_AB_N:-100000}
ONLY=${ONLY:-$ALL_GROUPS}
SKIP_PEERS=${SKIP_PEERS:-}
SCRIPT_TIMEOUT=${SCRIPT_TIMEOUT:-1800}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/release/proxy}
LOADER_BIN=${LOADER_BIN:-$TARGET_DIR/release/loader}
BASE_BIN=${BASE_BIN:-}
BASE_LOADER_BIN=${BASE_LOADER_BIN:-}
BASE_REV=${BASE_REV:-}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
REPORT=${REPORT:-benches/results/all-$STAMP.md}
RAW_DIR=${REPORT%.md}
RAW=$RAW_DIR/all.tsv

# What the scripts read that this script decides per group: not inherited from the caller.
unset TARGETS TARGETS_TLS MODES MODES_TLS SIZES SCHEME RATIO_TO GENERATORS WORKERS N AB_N AB_C \
    AB_TIME SEED_N SEED_C OUT RATE MAX_TIME CORES

for g in $ONLY; do
    bench_want "$ALL_GROUPS" "$g" || bench_die "ONLY: unknown group '$g' (groups: $ALL_GROUPS)"
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || bench_die "ROUNDS must be a positive number, not '$ROUNDS'"
bench_require wrk ab curl taskset envsubst ss timeout

# --- peers present ------------------------------------------------------------------------------

# have PEER: 0 when PEER is installed and not in SKIP_PEERS.
have() {
    bench_want "$SKIP_PEERS" "$1" && return 1
    case $1 in
    nginx) command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] ;;
    haproxy) command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] ;;
    varnish) command -v varnishd >/dev/null 2>&1 || [ -x /usr/sbin/varnishd ] ;;
    set-misc) have nginx && [ -e /usr/lib/nginx/modules/ngx_http_set_misc_module.so ] ;;
    h2load | openssl) command -v "$1" >/dev/null 2>&1 ;;
    *) return 1 ;;
    esac
}

# missing_note PEER: why PEER has no figures.
missing_note() {
    if bench_want "$SKIP_PEERS" "$1"; then
        echo "$1 left out (SKIP_PEERS)"
    else
        echo "$1 not installed (scripts/install-peers.sh)"
    fi
}

if [ -n "${ORIGIN:-}" ]; then
    EFFECTIVE_ORIGIN=$ORIGIN
elif have nginx; then
    EFFECTIVE_ORIGIN=nginx
else
    EFFECTIVE_ORIGIN=builtin
fi

# --- builds -------------------------------------------------------------------------------------

CHILD=""
BASE_WT=""
all_cleanup() {
    if [ -n "$CHILD" ]; then
        kill "$CHILD" 2>/dev/null || true
        bench_wait_gone "$CHILD" 300 || kill -9 "$CHILD" 2>/dev/null || true
    fi
    if [ -n "$BASE_WT" ] && [ -d "$BASE_WT" ]; then
        git worktree remove --force "$BASE_WT" >/dev/null 2>&1 || true
    fi
}
trap all_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${NO_BUILD:-}" ]; then
    bench_log "building: cargo build --release -p proxy -p loader"
    cargo build --release -q -p proxy -p loader || bench_die "cargo build --release -p proxy -p loader failed"
fi
[ -x "$PROXY_BIN" ] || bench_die "$PROXY_BIN not found (cargo build --release -p proxy)"
[ -x "$LOADER_BIN" ] || bench_die "$LOADER_BIN not found (cargo build --release -p loader)"

# build_rev REV: the proxy and the loader of REV, release profile, in a scratch worktree under
# $TMPDIR with a target directory of their own; kept and reused (keyed by the full commit).
build_rev() {
    local sha dir
    sha=$(git rev-parse --verify "$1^{commit}") || bench_die "BASE_REV: no such revision '$1'"
    dir=${TMPDIR:-/tmp}/bench-base-$sha
    if [ ! -x "$dir/target/release/proxy" ] || [ ! -x "$dir/target/release/loader" ]; then
        BASE_WT=$dir/src
        rm -rf "$BASE_WT"
        git worktree prune
        git worktree add --detach -q "$BASE_WT" "$sha" || bench_die "git worktree add $BASE_WT $sha failed"
        bench_log "building BASE_REV $1 ($sha) in $BASE_WT, CARGO_TARGET_DIR=$dir/target"
        (cd "$BASE_WT" && CARGO_TARGET_DIR="$dir/target" cargo build --release -q -p proxy -p loader) ||
            bench_die "building BASE_REV $1 failed"
        git worktree remove --force "$BASE_WT"
        BASE_WT=""
    fi
    BASE_BIN=${BASE_BIN:-$dir/target/release/proxy}
    BASE_LOADER_BIN=${BASE_LOADER_BIN:-$dir/target/release/loader}
    BASE_DESC="BASE_REV=$1 ($(git rev-parse --short "$sha"), built in $dir)"
}

BASE_DESC=""
if [ -n "$BASE_REV" ]; then
    build_rev "$BASE_REV"
elif [ -n "$BASE_BIN" ]; then
    BASE_DESC="BASE_BIN=$BASE_BIN${BASE_LOADER_BIN:+, BASE_LOADER_BIN=$BASE_LOADER_BIN}"
fi
[ -z "$BASE_BIN" ] || [ -x "$BASE_BIN" ] || bench_die "BASE_BIN is not an executable: $BASE_BIN"
[ -z "$BASE_LOADER_BIN" ] || [ -x "$BASE_LOADER_BIN" ] || bench_die "BASE_LOADER_BIN is not an executable: $BASE_LOADER_BIN"

# --- the groups ---------------------------------------------------------------------------------
# group_targets GROUP: the TARGETS (GENERATORS) the group's script gets.
group_targets() {
    local t="ours"
    [ -n "$BASE_BIN" ] && t+=" base"
    case $1 in
    proxy)
        have nginx && t+=" nginx"
        have haproxy && t+=" haproxy"
        ;;
    tls) have nginx && have openssl && t+=" nginx" ;;
    return) have set-misc && t+=" nginx" ;;
    static) have nginx && t+=" nginx" ;;
    cache)
        have nginx && t+=" nginx"
        have varnish && t+=" varnish"
        ;;
    loader)
        t="loader"
        [ -n "$BASE_LOADER_BIN" ] && t+=" base"
        t+=" wrk"
        have h2load && t+=" h2load"
        t+=" ab"
        ;;
    workers)
        t+=" steer"
        have nginx && t+=" nginx"
        ;;
    esac
    echo "$t"
}

# group_sizes GROUP: the sizes the group runs.
group_sizes() {
    case $1 in
    proxy) echo "64 32k 1m" ;;
    workers) echo "64" ;;
    return) echo "-" ;;
    *) echo "64 32k" ;;
    esac
}

# uses_origin GROUP: 0 when the group's script starts an origin.
uses_origin() { [ "$1" != return ] && [ "$1" != static ]; }

# group_env GROUP SIZES: VARS = the environment of one run of GROUP's script (VAR=value words).
group_env() {
    local g=$1 sizes=$2
    VARS=("ROUNDS=1" "DURATION=$DURATION" "NO_BUILD=1" "PROXY_BIN=$PROXY_BIN" "LOADER_BIN=$LOADER_BIN"
        "BASE_BIN=$BASE_BIN" "ORIGIN=$EFFECTIVE_ORIGIN")
    [ "$sizes" = - ] || VARS+=("SIZES=$sizes")
    case $g in
    proxy) VARS+=("MODES=keepalive close" "TARGETS=$(group_targets proxy)") ;;
    tls)
        VARS+=("SCHEME=https" "TARGETS_TLS=$(group_targets tls)" "N_CLOSE=$N_CLOSE")
        # The handshake cases run on the first size only (proxy_vs_peers.sh); with the built-in
        # origin (one size a run) only the 64 B run has them.
        if [ "$EFFECTIVE_ORIGIN" = builtin ] && [ "$sizes" != 64 ]; then
            VARS+=("MODES_TLS=keepalive")
        else
            VARS+=("MODES_TLS=keepalive full resumed")
        fi
        ;;
    return) VARS+=("MODES=keepalive ab" "TARGETS=$(group_targets return)" "AB_N=$RETURN_AB_N" "AB_C=10" "AB_TIME=30s") ;;
    static) VARS+=("MODES=keepalive close" "TARGETS=$(group_targets static)") ;;
    cache) VARS+=("MODES=keepalive" "TARGETS=$(group_targets cache)") ;;
    loader) VARS+=("GENERATORS=$(group_targets loader)" "N=$LOADER_N" "BASE_LOADER_BIN=$BASE_LOADER_BIN" "MAX_TIME=60s") ;;
    workers) VARS+=("MODES=keepalive close" "TARGETS=$(group_targets workers)" "WORKERS=1 2") ;;
    esac
}

group_script() {
    case $1 in
    proxy | tls) echo benches/proxy_vs_peers.sh ;;
    return) echo benches/return_vs_nginx.sh ;;
    static) echo benches/static_vs_nginx.sh ;;
    cache) echo benches/cache_vs_peers.sh ;;
    loader) echo benches/loader_vs_peers.sh ;;
    workers) echo benches/workers_vs_nginx.sh ;;
    esac
}

declare -A SECONDS_OF=()

# run_group GROUP ROUND: one round of GROUP (one run of its script; with the built-in origin,
# one run per size), its rows appended to RAW with the group and the round.
run_group() {
    local g=$1 round=$2 size sizes runs=() out log rc start
    sizes=$(group_sizes "$g")
    if [ "$EFFECTIVE_ORIGIN" = builtin ] && uses_origin "$g"; then
        read -r -a runs <<<"$sizes"
    else
        runs=("$sizes")
    fi
    for size in "${runs[@]}"; do
        out=$RAW_DIR/$g-r$round${size:+-${size// /_}}.tsv
        [ "${#runs[@]}" = 1 ] && out=$RAW_DIR/$g-r$round.tsv
        log=${out%.tsv}.log
        group_env "$g" "$size"
        VARS+=("OUT=$out")
        bench_log "round $round/$ROUNDS: $g$([ "$size" = - ] || echo " (sizes $size)"): $(group_script "$g") > $log"
        start=$(date +%s)
        rc=0
        timeout --kill-after=30 "$SCRIPT_TIMEOUT" env "${VARS[@]}" "$(group_script "$g")" >"$log" 2>&1 </dev/null &
        CHILD=$!
        wait "$CHILD" || rc=$?
        CHILD=""
        SECONDS_OF[$g]=$((${SECONDS_OF[$g]:-0} + $(date +%s) - start))
        if [ "$rc" != 0 ]; then
            bench_log "  $g exited with $rc: $(grep -E '^(error|SKIP)' "$log" | head -5 | tr '\n' ' ')"
        fi
        grep -h '^SKIP' "$log" | sed 's/^/  /' | cut -c1-300 >&2 || true
        if [ -s "$out" ]; then
            awk -F'\t' -v OFS='\t' -v g="$g" -v r="$round" '{ $2 = r; print g, $0 }' "$out" >>"$RAW"
        fi
    done
}

mkdir -p "$RAW_DIR"
: >"$RAW"
read -r -a GROUP_LIST <<<"$ONLY"
T0=$(date +%s)
bench_log "all.sh: groups ${GROUP_LIST[*]}; $ROUNDS rounds of $DURATION loads; origin $EFFECTIVE_ORIGIN; raw results in $RAW_DIR"
for ((round = 1; round <= ROUNDS; round++)); do
    n=${#GROUP_LIST[@]}
    for ((i = 0; i < n; i++)); do
        run_group "${GROUP_LIST[$(((i + round - 1) % n))]}" "$round"
    done
done
ELAPSED=$(($(date +%s) - T0))

# --- the table ----------------------------------------------------------------------------------
# Per group|case|round|target: CPU µs per request (total, user, kernel) and req/s.

declare -A TOT=() USR=() KRN=() RPS=()
while IFS=$'\t' read -r key tot usr krn rps; do
    # shellcheck disable=SC2034 # USR, KRN and RPS are read through a name reference (vals)
    TOT[$key]=$tot USR[$key]=$usr KRN[$key]=$krn RPS[$key]=$rps
done < <(awk -F'\t' -v OFS='\t' '
    $9 != "-" && $7 > 0 {
        printf "%s|%s|%s|%s\t%.4f\t%.4f\t%.4f\t%s\n", $1, $2, $3, $4, ($9 + $10) / $7, $9 / $7, $10 / $7, $5
    }' "$RAW")

# vals WHAT GROUP CASE TARGET: the per-round values of WHAT (TOT, USR, KRN, RPS), one per round
# that has them.
vals() {
    local -n arr=$1
    local r key
    for ((r = 1; r <= ROUNDS; r++)); do
        key="$2|$3|$r|$4"
        [ -n "${arr[$key]+x}" ] && echo "${arr[$key]}"
    done
    return 0
}

# ratios GROUP CASE A B [GROUP_B CASE_B]: A ÷ B per round where both have figures.
ratios() {
    local r a b ka kb
    for ((r = 1; r <= ROUNDS; r++)); do
        ka="$1|$2|$r|$3"
        kb="${5:-$1}|${6:-$2}|$r|$4"
        if [ -z "${TOT[$ka]+x}" ] || [ -z "${TOT[$kb]+x}" ]; then continue; fi
        a=${TOT[$ka]} b=${TOT[$kb]}
        div "$a" "$b" %.4f
    done
    return 0
}

# median VALUES...: the median, "-" for none.
median() { stats "$@" | awk '{ print $1 }'; }

# cpu_cell GROUP CASE TARGET: "TOTAL (USER + KERNEL)" medians, or "—".
cpu_cell() {
    local t u k
    mapfile -t t < <(vals TOT "$1" "$2" "$3")
    [ "${#t[@]}" -gt 0 ] || { echo "—"; return 0; }
    mapfile -t u < <(vals USR "$1" "$2" "$3")
    mapfile -t k < <(vals KRN "$1" "$2" "$3")
    awk -v t="$(median "${t[@]}")" -v u="$(median "${u[@]}")" -v k="$(median "${k[@]}")" '
        BEGIN { f = (t >= 100) ? "%.0f" : "%.2f"; printf f " (" f " + " f ")\n", t, u, k }'
}

# rps_cell GROUP CASE TARGET: median req/s, e.g. "73.8k", or "—".
rps_cell() {
    local v
    mapfile -t v < <(vals RPS "$1" "$2" "$3")
    [ "${#v[@]}" -gt 0 ] || { echo "—"; return 0; }
    awk -v x="$(median "${v[@]}")" 'BEGIN { if (x >= 1000) printf "%.1fk\n", x / 1000; else printf "%.0f\n", x }'
}

# spread_cell VALUES...: "MEDIAN [MIN-MAX]" to 3 decimals, "—" for none.
spread_cell() {
    [ "$#" -gt 0 ] || { echo "—"; return 0; }
    FMT=%.3f fmt_spread "$@"
}

# has GROUP CASE TARGET: 0 when TARGET has a figure in some round.
has() { [ -n "$(vals TOT "$1" "$2" "$3")" ]; }

# group_log GROUP: where that group's script reports and logs are.
group_log() { echo "$RAW_DIR/$1-r*.log"; }

ROWS=()
# row GROUP CASE LABEL OURS PEER PEER_LABEL [PEER_ID]: one table row (PEER_ID: the name in
# SKIP_PEERS / install-peers of the peer, for the note when it is missing).
row() {
    local g=$1 c=$2 label=$3 ours=$4 peer=$5 plabel=$6 pid=${7:-$5} note=() r b cells
    mapfile -t r < <(ratios "$g" "$c" "$ours" "$peer")
    if ! has "$g" "$c" "$ours"; then
        note+=("ours: no result, see $(group_log "$g")")
    fi
    if ! has "$g" "$c" "$peer"; then
        if ! have "$pid" && [ "$pid" != wrk ] && [ "$pid" != ab ]; then
            note+=("$(missing_note "$pid")")
        else
            note+=("$plabel: no result, see $(group_log "$g")")
        fi
    fi
    cells="| $label | $(cpu_cell "$g" "$c" "$ours") | $plabel | $(cpu_cell "$g" "$c" "$peer") | $(spread_cell ${r[@]+"${r[@]}"})"
    if [ -n "$BASE_DESC" ]; then
        # The old build's target: base (base-1, base-2 beside ours-1, ours-2).
        local base=base${ours#ours}
        [ "$ours" = loader ] && base=base
        mapfile -t b < <(ratios "$g" "$c" "$ours" "$base")
        if [ "${#b[@]}" = 0 ]; then
            if [ "$g" = loader ] && [ -z "$BASE_LOADER_BIN" ]; then
                note+=("no old loader (BASE_LOADER_BIN or BASE_REV)")
            elif ! has "$g" "$c" base; then
                note+=("old build: no result, see $(group_log "$g")")
            fi
        fi
        cells+=" | $(spread_cell ${b[@]+"${b[@]}"})"
    fi
    cells+=" | $(rps_cell "$g" "$c" "$ours") / $(rps_cell "$g" "$c" "$peer")"
    local IFS=';'
    cells+=" | ${note[*]:-} |"
    ROWS+=("${cells//;/; }")
}

# switches_note CASE TWO: context switches per request (voluntary, i.e. slept / involuntary,
# i.e. preempted; medians over the rounds) of ours with 1 and 2 workers and of nginx: where a
# second worker's cost goes, and a one-worker baseline that is preempted often.
switches_note() {
    local t v="" label
    for t in ours-1 "$2" nginx-1 nginx-2; do
        label=${t/ours-/ours }
        label=${label/steer-/ours steered }
        label=${label/nginx-/nginx }
        v+="${v:+, }$label $(bench_switches "$1" "$t" "$RAW" workers)"
    done
    echo "switches per request slept/preempted: $v"
}

# workers_ratio_row CASE LABEL [TWO]: the 2 ÷ 1 workers row: the cells are ratios of CPU µs/req
# paired per round (ours, nginx), and ours' ratio ÷ nginx's in the same round. TWO: our
# 2-worker target (ours-2, or steer-2: --steer cpu), over ours-1 either way.
workers_ratio_row() {
    local c=$1 label=$2 two=${3:-ours-2} r o n rr=() note=() cells i
    mapfile -t o < <(ratios workers "$c" "$two" ours-1)
    mapfile -t n < <(ratios workers "$c" nginx-2 nginx-1)
    # Ratio of ratios, round by round (only the rounds where both exist).
    for ((r = 1; r <= ROUNDS; r++)); do
        local a b
        a=$(div "${TOT[workers|$c|$r|$two]:-}" "${TOT[workers|$c|$r|ours-1]:-}" %.4f)
        b=$(div "${TOT[workers|$c|$r|nginx-2]:-}" "${TOT[workers|$c|$r|nginx-1]:-}" %.4f)
        if [ "$a" != - ] && [ "$b" != - ]; then rr+=("$(div "$a" "$b" %.4f)"); fi
    done
    [ "${#o[@]}" = 0 ] && note+=("ours: no result, see $(group_log workers)")
    if [ "${#n[@]}" = 0 ]; then
        if have nginx; then note+=("nginx: no result, see $(group_log workers)"); else note+=("$(missing_note nginx)"); fi
    fi
    note+=("cells are CPU per request of 2 workers ÷ 1 worker, not µs")
    note+=("$(switches_note "$c" "$two")")
    cells="| $label | 2 ÷ 1: $(spread_cell ${o[@]+"${o[@]}"}) | nginx | 2 ÷ 1: $(spread_cell ${n[@]+"${n[@]}"}) | $(spread_cell ${rr[@]+"${rr[@]}"})"
    if [ -n "$BASE_DESC" ] && [ "$two" = ours-2 ]; then
        local bo=()
        for ((i = 1; i <= ROUNDS; i++)); do
            local x y
            x=$(div "${TOT[workers|$c|$i|ours-2]:-}" "${TOT[workers|$c|$i|ours-1]:-}" %.4f)
            y=$(div "${TOT[workers|$c|$i|base-2]:-}" "${TOT[workers|$c|$i|base-1]:-}" %.4f)
            if [ "$x" != - ] && [ "$y" != - ]; then bo+=("$(div "$x" "$y" %.4f)"); fi
        done
        cells+=" | $(spread_cell ${bo[@]+"${bo[@]}"})"
    fi
    [ -n "$BASE_DESC" ] && [ "$two" != ours-2 ] && cells+=" | —"
    cells+=" | $(rps_cell workers "$c" "$two") / $(rps_cell workers "$c" nginx-2)"
    local IFS=';'
    cells+=" | ${note[*]} |"
    ROWS+=("${cells//;/; }")
}

size_label() { case $1 in 64) echo "64 B" ;; 32k) echo "32 KiB" ;; 1m) echo "1 MiB" ;; *) echo "$1" ;; esac; }
mode_label() { case $1 in keepalive) echo "keep-alive (wrk -c64)" ;; close) echo "connection per request (ab -c64)" ;; esac; }

for g in "${GROUP_LIST[@]}"; do
    case $g in
    proxy)
        for s in 64 32k 1m; do
            for m in keepalive close; do
                row proxy "$s/$m" "proxy, $(size_label "$s"), $(mode_label "$m")" ours nginx nginx
                row proxy "$s/$m" "proxy, $(size_label "$s"), $(mode_label "$m")" ours haproxy HAProxy haproxy
            done
        done
        ;;
    tls)
        row tls 64/keepalive "TLS proxy, 64 B, keep-alive (wrk -c64)" ours nginx "nginx + OpenSSL" nginx
        row tls 32k/keepalive "TLS proxy, 32 KiB, keep-alive (wrk -c64)" ours nginx "nginx + OpenSSL" nginx
        row tls 64/full "TLS proxy, full handshake per connection (loader)" ours nginx "nginx + OpenSSL" nginx
        row tls 64/resumed "TLS proxy, resumed handshake per connection (loader)" ours nginx "nginx + OpenSSL" nginx
        ;;
    return)
        row return keepalive "\`return 302\`, keep-alive (wrk -c64)" ours nginx "nginx + set_random" set-misc
        row return ab "\`return 302\`, connection per request (ab -c10)" ours nginx "nginx + set_random" set-misc
        ;;
    static)
        for s in 64 32k; do
            for m in keepalive close; do
                row static "$s/$m" "static file, $(size_label "$s"), $(mode_label "$m")" ours nginx "nginx (sendfile)" nginx
            done
        done
        ;;
    cache)
        for s in 64 32k; do
            row cache "$s/keepalive" "cache hit, $(size_label "$s"), keep-alive (wrk -c64)" ours nginx "nginx proxy_cache" nginx
            row cache "$s/keepalive" "cache hit, $(size_label "$s"), keep-alive (wrk -c64)" ours varnish Varnish varnish
        done
        ;;
    loader)
        for s in 64 32k; do
            row loader "$s" "loader, $(size_label "$s") responses, keep-alive (-c64)" loader wrk wrk
            row loader "$s" "loader, $(size_label "$s") responses, keep-alive (-c64)" loader h2load h2load
            row loader "$s" "loader, $(size_label "$s") responses, keep-alive (-c64)" loader ab "ab -k" ab
        done
        ;;
    workers)
        for m in keepalive close; do
            row workers "64/$m" "proxy, 64 B, $(mode_label "$m"), 1 worker" ours-1 nginx-1 "nginx, 1 worker" nginx
            row workers "64/$m" "proxy, 64 B, $(mode_label "$m"), 2 workers" ours-2 nginx-2 "nginx, 2 workers" nginx
            workers_ratio_row "64/$m" "proxy, 64 B, $(mode_label "$m"), 2 workers ÷ 1 worker"
            workers_ratio_row "64/$m" "proxy, 64 B, $(mode_label "$m"), 2 workers steered by CPU (--steer cpu) ÷ 1 worker" steer-2
        done
        ;;
    esac
done

# --- the report ---------------------------------------------------------------------------------

version_of() {
    case $1 in
    nginx) "$(bench_sbin nginx)" -v 2>&1 | sed 's/.*nginx\///' ;;
    haproxy) "$(bench_sbin haproxy)" -v 2>/dev/null | awk 'NR == 1 { print $3 }' ;;
    varnish) "$(bench_sbin varnishd)" -V 2>&1 | sed -n 's/.*(varnish-\([^ ]*\).*/\1/p' | head -1 ;;
    wrk) { wrk -v 2>&1 || true; } | awk 'NR == 1 { print $2 }' ;;
    h2load) { h2load --version 2>&1 || true; } | awk 'NR == 1 { print $NF }' ;;
    ab) { ab -V 2>&1 || true; } | awk '/Version/ { print $5 }' | tr -d , ;;
    openssl) openssl version | awk '{ print $2 }' ;;
    esac
}

commit() {
    local c
    c=$(git rev-parse --short HEAD 2>/dev/null) || { echo "unknown (not a git checkout)"; return 0; }
    [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && c+="-dirty"
    echo "$c"
}

peers_line() {
    local p out=()
    for p in nginx haproxy varnish wrk h2load ab openssl; do
        if { [ "$p" = wrk ] || [ "$p" = ab ] || have "$p"; }; then out+=("$p $(version_of "$p")"); fi
    done
    join_comma "${out[@]}"
}

times_line() {
    local g out=()
    for g in "${GROUP_LIST[@]}"; do out+=("$g $((${SECONDS_OF[$g]:-0} / ROUNDS)) s"); done
    join_comma "${out[@]}"
}

# join_comma WORDS...: the words joined with ", ".
join_comma() {
    local s="" w
    for w in "$@"; do s+="${s:+, }$w"; done
    echo "$s"
}

{
    echo "# Benchmarks: every comparison, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), \`uname -r\` $(uname -r)"
    echo "- kernel: $(uname -srv)"
    echo "- commit: $(commit)${BASE_DESC:+; old build (new ÷ old): $BASE_DESC}"
    echo "- ROUNDS=$ROUNDS, DURATION=$DURATION per load${QUICK:+ (QUICK=1: a smoke run, the figures mean nothing)}; groups: ${GROUP_LIST[*]}; origin of the proxied cases: $EFFECTIVE_ORIGIN"
    echo "- peers: $(peers_line)"
    echo "- took $((ELAPSED / 60)) min $((ELAPSED % 60)) s; per round: $(times_line); raw results: $RAW"
    echo
    echo "µs/req: CPU time (user + kernel) of the process under test (for the loader rows: the load generator's own) per completed request, median over the rounds. Ratios are taken inside each round (the contenders run one after the other in it) and summarised as median [min-max] over the rounds: a spread that includes the difference you are looking for means it was not measured."
    echo
    if [ -n "$BASE_DESC" ]; then
        echo "| case | ours µs/req | peer | peer µs/req | ours ÷ peer | new ÷ old | req/s ours / peer | note |"
        echo "|---|---|---|---|---|---|---|---|"
    else
        echo "| case | ours µs/req | peer | peer µs/req | ours ÷ peer | req/s ours / peer | note |"
        echo "|---|---|---|---|---|---|---|"
    fi
    printf '%s\n' "${ROWS[@]}"
} >"$REPORT"

cat "$REPORT"
bench_log ""
bench_log "table: $REPORT; raw TSV (group case round target req/s p99_us completed errors user_us kernel_us origin_us vcsw icsw): $RAW"
bench_log "each script's own report and log: $RAW_DIR/GROUP-rROUND.log"
