# shellcheck shell=bash
# Shared functions for the peer-comparison scripts (benches/*.sh). Source it; it sets nothing
# global except BENCH_* variables and an EXIT trap that stops every process started with
# bench_start and removes the scratch directory.
#
# Measuring rules these helpers implement (see benches/README.md):
# - CPU cost is the process's own utime+stime (all threads), read from /proc/PID/stat for a
#   long-running server (proxy, nginx, haproxy) before and after a load, and from the kernel's
#   rusage of a waited child for a load generator (it has exited by the time we could read /proc).
# - Everything is pinned with taskset; every load is bounded in count and in time (`timeout`).

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_CLK_TCK=$(getconf CLK_TCK)
BENCH_PIDS=()
BENCH_PORTS=()
BENCH_TMP=""

bench_log() { printf '%s\n' "$*" >&2; }
bench_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# --- scratch directory and cleanup ------------------------------------------------------------

bench_init() {
    BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/bench.XXXXXX")
    LOAD_OUT="$BENCH_TMP/load.out"
    # nginx workers drop to an unprivileged user when started as root: they must be able to
    # read the document root and create their temp paths below this directory.
    chmod 755 "$BENCH_TMP"
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

bench_cleanup() {
    local pid
    for pid in "${BENCH_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        bench_wait_gone "$pid" 50 || kill -9 "$pid" 2>/dev/null || true
    done
    if [ -n "$BENCH_TMP" ] && [ -z "${KEEP_TMP:-}" ]; then
        rm -rf "$BENCH_TMP"
    elif [ -n "$BENCH_TMP" ]; then
        bench_log "kept scratch directory $BENCH_TMP"
    fi
}

# bench_wait_gone PID TRIES: wait up to TRIES*0.1 s for PID to exit; 1 if it is still there.
bench_wait_gone() {
    local pid=$1 tries=${2:-50} i
    for ((i = 0; i < tries; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}

# --- ports --------------------------------------------------------------------------------------

# bench_port_in_use PORT: 0 if something listens on 127.0.0.1:PORT (or any address).
bench_port_in_use() {
    [ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]
}

# bench_free_port: print a port that nothing listens on, below the ephemeral range (so outgoing
# connections never take it) and not handed out before in this run.
bench_free_port() {
    local lo hi p tries used
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
    hi=$((lo - 1))
    lo=$((hi > 20000 ? 10000 : 2000))
    for ((tries = 0; tries < 200; tries++)); do
        p=$((lo + RANDOM % (hi - lo)))
        used=0
        for u in "${BENCH_PORTS[@]}"; do [ "$u" = "$p" ] && used=1; done
        [ "$used" = 1 ] && continue
        bench_port_in_use "$p" && continue
        BENCH_PORTS+=("$p")
        echo "$p"
        return 0
    done
    bench_die "no free port found"
}

# bench_wait_port PORT PID [SECONDS]: wait until 127.0.0.1:PORT accepts connections, failing
# early if PID exits. No fixed sleep: polls every 50 ms up to SECONDS (default 10).
bench_wait_port() {
    local port=$1 pid=$2 secs=${3:-10} i
    for ((i = 0; i < secs * 20; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# --- processes ----------------------------------------------------------------------------------

# bench_start CORE LOGFILE CMD...: start CMD pinned to CORE in the background, register it for
# cleanup, and set BENCH_LAST_PID. Use as `bench_start 1 "$log" cmd args; pid=$BENCH_LAST_PID`
# (not in a command substitution: the process must be a child of this shell).
bench_start() {
    local core=$1 log=$2
    shift 2
    taskset -c "$core" "$@" >"$log" 2>&1 </dev/null &
    BENCH_LAST_PID=$!
    BENCH_PIDS+=("$BENCH_LAST_PID")
}

# bench_stop PID: TERM, wait up to 5 s, then KILL.
bench_stop() {
    local pid=$1
    kill "$pid" 2>/dev/null || return 0
    bench_wait_gone "$pid" 50 || kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# bench_descendants PID: PID and all its descendants (nginx: master and worker).
bench_descendants() {
    local pid=$1 child
    echo "$pid"
    # shellcheck disable=SC2013 # the file holds space-separated pids
    for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
        bench_descendants "$child"
    done
}

# --- CPU time -----------------------------------------------------------------------------------

# cpu_ticks PID: print "UTIME STIME" in clock ticks for PID, all its threads (the process-wide
# fields 14 and 15 of /proc/PID/stat, which the kernel sums over the thread group). The command
# name (field 2) may contain spaces and parentheses, so fields are counted after the last ')'.
cpu_ticks() {
    local stat rest
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    rest=${stat##*) }
    # rest starts at field 3 (state): utime is field 14 → index 11 of rest, stime index 12.
    # shellcheck disable=SC2086
    set -- $rest
    echo "${12} ${13}"
}

# cpu_ticks_tree PID: "UTIME STIME" summed over PID and its descendants.
cpu_ticks_tree() {
    local u=0 s=0 p t
    for p in $(bench_descendants "$1"); do
        t=$(cpu_ticks "$p") || continue
        u=$((u + ${t% *}))
        s=$((s + ${t#* }))
    done
    echo "$u $s"
}

# ticks_to_us TICKS: clock ticks → microseconds.
ticks_to_us() { echo $(($1 * 1000000 / BENCH_CLK_TCK)); }

# cpu_us_tree PID: "USER_US KERNEL_US" of PID and its descendants.
cpu_us_tree() {
    local t
    t=$(cpu_ticks_tree "$1") || return 1
    echo "$(ticks_to_us "${t% *}") $(ticks_to_us "${t#* }")"
}

# bench_run_timed OUT CMD...: run CMD (stdout+stderr to OUT), wait for it, and print
# "EXIT USER_US KERNEL_US": the child's CPU time from the kernel's rusage of waited children
# (bash `times`, millisecond resolution), which covers all its threads.
bench_run_timed() {
    local out=$1
    shift
    (
        rc=0
        "$@" >"$out" 2>&1 </dev/null || rc=$?
        # Second line of `times`: children's user and system time, e.g. "0m1.234s 0m0.567s".
        # `times` must run in this process (not in a pipeline or $(...), which fork a process
        # whose children's times are zero), so it writes to a file.
        times >"$out.times"
        sed -n 2p "$out.times" | awk -v rc="$rc" '
            function us(x,   m, s) { m = x; sub(/m.*/, "", m); s = x; sub(/^[0-9]+m/, "", s); sub(/s$/, "", s);
                                     return int((m * 60 + s) * 1000000 + 0.5) }
            { print rc, us($1), us($2) }'
    )
}

# --- statistics ---------------------------------------------------------------------------------

# stats VALUES...: print "MEDIAN MIN MAX" (median of an even count: mean of the middle two).
stats() {
    printf '%s\n' "$@" | { grep -v '^-\?$' || true; } | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "- - -"; exit }
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.6g %.6g %.6g\n", m, v[1], v[NR]
        }'
}

# fmt_spread VALUES...: "MEDIAN [MIN-MAX]" with FMT (default %.2f) applied to each number.
fmt_spread() {
    local fmt=${FMT:-%.2f}
    stats "$@" | awk -v f="$fmt" '
        $1 == "-" { print "-"; exit }
        { printf(f " [" f "-" f "]\n", $1, $2, $3) }'
}

# div A B [FMT]: A/B with awk (empty or "-" when B is 0 or missing).
div() {
    awk -v a="$1" -v b="$2" -v f="${3:-%.3f}" 'BEGIN {
        if (a == "" || a == "-" || b == "" || b == "-" || b + 0 == 0) print "-"; else printf(f "\n", a / b) }'
}

# --- load generators ----------------------------------------------------------------------------
# Each prints one line "REQS_PER_S P99_US COMPLETED ERRORS USER_US KERNEL_US" on success (the
# last two: the generator's own CPU time), or returns non-zero and leaves the output in $LOAD_OUT.
# ERRORS counts failed, non-2xx and socket errors as the tool reports them.

# to_us VALUE UNIT: wrk/h2load latency ("812.00us", "1.23ms", "2.00s") → µs.
to_us() {
    awk -v x="$1" 'BEGIN {
        if (x ~ /us$/) { sub(/us$/, "", x); print x + 0 }
        else if (x ~ /ms$/) { sub(/ms$/, "", x); print x * 1000 }
        else if (x ~ /m$/) { sub(/m$/, "", x); print x * 60000000 }
        else if (x ~ /s$/) { sub(/s$/, "", x); print x * 1000000 }
        else print "-" }'
}

# load_wrk CORE CONNS DURATION URL: keep-alive load, one thread, bounded by DURATION.
load_wrk() {
    local core=$1 conns=$2 dur=$3 url=$4 r
    LOAD_OUT="$BENCH_TMP/load.out"
    r=$(bench_run_timed "$LOAD_OUT" timeout --kill-after=5 "$(($(dur_s "$dur") + 30))" \
        taskset -c "$core" wrk -t1 -c"$conns" -d"$dur" --latency "$url")
    [ "${r%% *}" = 0 ] || return 1
    awk -v cpu="${r#* }" '
        /Requests\/sec:/ { rps = $2 }
        / 99%/ && !p99 { p99 = $2 }
        / requests in / { n = $1 }
        /Socket errors:/ { gsub(/,/, ""); err += $4 + $6 + $8 + $10 }
        /Non-2xx or 3xx responses:/ { err += $5 }
        END {
            if (n == "" || rps == "") exit 1
            printf "%s %s %s %d %s\n", rps, p99, n, err, cpu
        }' "$LOAD_OUT" | { read -r rps p99 n err u k || return 1; echo "$rps $(to_us "$p99") $n $err $u $k"; }
}

# load_ab CORE CONNS N DURATION KEEPALIVE(0|1) URL: ab with at most N requests and at most
# DURATION (ab's -t, given before -n so that -n still applies). DURATION "-": no -t (ab -t caps
# the count), bounded by `timeout` at MAX_TIME (default 120s) only.
load_ab() {
    local core=$1 conns=$2 n=$3 dur=$4 ka=$5 url=$6 r kflag=() tflag=() bound
    [ "$ka" = 1 ] && kflag=(-k)
    if [ "$dur" = - ]; then
        bound=$(dur_s "${MAX_TIME:-120s}")
    else
        tflag=(-t "$(dur_s "$dur")")
        bound=$(($(dur_s "$dur") + 30))
    fi
    LOAD_OUT="$BENCH_TMP/load.out"
    r=$(bench_run_timed "$LOAD_OUT" timeout --kill-after=5 "$bound" \
        taskset -c "$core" ab -q -r "${kflag[@]}" -c "$conns" "${tflag[@]}" -n "$n" "$url")
    [ "${r%% *}" = 0 ] || return 1
    awk -v cpu="${r#* }" '
        /^Complete requests:/ { n = $3 }
        /^Failed requests:/ { err += $3 }
        /^Non-2xx responses:/ { err += $3 }
        /^Requests per second:/ { rps = $4 }
        /^ *99%/ { p99 = $2 * 1000 }
        END {
            if (n == "" || rps == "") exit 1
            printf "%s %s %s %d %s\n", rps, (p99 == "" ? "-" : p99), n, err, cpu
        }' "$LOAD_OUT"
}

# load_h2load CORE CONNS N DURATION URL: h2load over HTTP/1.1 (--h1), one thread, N requests.
load_h2load() {
    local core=$1 conns=$2 n=$3 dur=$4 url=$5 r
    LOAD_OUT="$BENCH_TMP/load.out"
    r=$(bench_run_timed "$LOAD_OUT" timeout --kill-after=5 "$(($(dur_s "$dur") + 30))" \
        taskset -c "$core" h2load --h1 -t1 -c"$conns" -n"$n" "$url")
    [ "${r%% *}" = 0 ] || return 1
    # "finished in 2.01s, 99502.49 req/s, ..."; "requests: 200000 total, 200000 started,
    # 200000 done, 200000 succeeded, 0 failed, 0 errored, 0 timeout"; "status codes: 200000 2xx,
    # ..."; h2load prints no percentiles, so p99 is "-".
    awk -v cpu="${r#* }" '
        /^finished in/ { gsub(/,/, ""); rps = $4 }
        /^requests:/ { gsub(/,/, ""); n = $8; err += $10 + $12 + $14 }
        /^status codes:/ { gsub(/,/, ""); err += $5 + $7 + $9 }
        END {
            if (n == "" || rps == "") exit 1
            printf "%s - %s %d %s\n", rps, n, err, cpu
        }' "$LOAD_OUT"
}

# load_loader BIN CORE CONNS N DURATION URL: our loader, one thread, N requests, quiet report
# (plus the flags in the array LOADER_FLAGS, when set).
load_loader() {
    local bin=$1 core=$2 conns=$3 n=$4 dur=$5 url=$6 r
    # Extra loader flags (LOADER_FLAGS, an array), e.g. (--hdr-log FILE --shard 1/1).
    local -a extra=(${LOADER_FLAGS[@]+"${LOADER_FLAGS[@]}"})
    LOAD_OUT="$BENCH_TMP/load.out"
    r=$(bench_run_timed "$LOAD_OUT" timeout --kill-after=5 "$(($(dur_s "$dur") + 30))" \
        taskset -c "$core" "$bin" --threads 1 -c "$conns" -n "$n" -q ${extra[@]+"${extra[@]}"} "$url")
    [ "${r%% *}" = 0 ] || return 1
    # The report uses ab's field names.
    awk -v cpu="${r#* }" '
        /^Complete requests:/ { n = $3 }
        /^Failed requests:/ { err += $3 }
        /^Non-2xx responses:/ { err += $3 }
        /^Requests per second:/ { rps = $4 }
        /^ *99%/ && p99 == "" { p99 = $2 * 1000 }
        END {
            if (n == "" || rps == "") exit 1
            printf "%s %s %s %d %s\n", rps, (p99 == "" ? "-" : p99), n, err, cpu
        }' "$LOAD_OUT"
}

# dur_s DURATION: "5s" / "500ms" / "2m" / "7" → whole seconds, at least 1 (for ab -t, timeout).
dur_s() {
    awk -v d="$1" 'BEGIN {
        if (d ~ /ms$/) { sub(/ms$/, "", d); s = d / 1000 }
        else if (d ~ /m$/) { sub(/m$/, "", d); s = d * 60 }
        else if (d ~ /h$/) { sub(/h$/, "", d); s = d * 3600 }
        else { sub(/s$/, "", d); s = d + 0 }
        s = int(s + 0.999); if (s < 1) s = 1; print s }'
}

# --- peers --------------------------------------------------------------------------------------

# bench_render TEMPLATE OUT VAR...: copy TEMPLATE to OUT replacing ${VAR} for the listed
# variables only (nginx's own $variables stay untouched).
bench_render() {
    local tpl=$1 out=$2 vars="" v
    shift 2
    for v in "$@"; do vars+="\${$v} "; done
    # shellcheck disable=SC2086
    envsubst "$vars" <"$tpl" >"$out"
}

# bench_machine: one line describing the machine (cores, CPU model, kernel).
bench_machine() {
    local model
    model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
    echo "$(nproc) cores ($model), kernel $(uname -r), CLK_TCK $BENCH_CLK_TCK"
}

# bench_require CMD...: die with the install hint when a peer is missing.
bench_require() {
    local c missing=()
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || missing+=("$c")
    done
    [ "${#missing[@]}" -eq 0 ] ||
        bench_die "missing ${missing[*]}: run scripts/install-peers.sh"
}

# bench_sbin CMD: path of CMD, looking in /usr/sbin too (not on PATH for non-root users).
bench_sbin() {
    command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"
}

# bench_start_origin CORE: write the two bodies (/64: 64 bytes, /32k: 32768 bytes), start the
# nginx origin (benches/peers/nginx-origin.conf, one worker) pinned to CORE and wait for it.
# Sets ORIGIN_PORT, ORIGIN_PID, NGINX and BODY_LEN[path].
# shellcheck disable=SC2034 # used by the scripts that source this file
declare -A BODY_LEN=([64]=64 [32k]=32768)
bench_start_origin() {
    local core=$1
    mkdir -p "$BENCH_TMP/www"
    head -c 64 /dev/zero | tr '\0' 'a' >"$BENCH_TMP/www/64"
    head -c 32768 /dev/zero | tr '\0' 'b' >"$BENCH_TMP/www/32k"
    chmod -R a+rX "$BENCH_TMP/www"
    export TMP=$BENCH_TMP
    ORIGIN_PORT=$(bench_free_port)
    export ORIGIN_PORT
    bench_render "$BENCH_ROOT/benches/peers/nginx-origin.conf" "$BENCH_TMP/nginx-origin.conf" TMP ORIGIN_PORT
    NGINX=$(bench_sbin nginx)
    bench_start "$core" "$BENCH_TMP/origin.log" "$NGINX" -e "$BENCH_TMP/origin.error.log" \
        -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-origin.conf"
    ORIGIN_PID=$BENCH_LAST_PID
    bench_wait_port "$ORIGIN_PORT" "$ORIGIN_PID" ||
        bench_die "the origin (nginx) did not start: $(cat "$BENCH_TMP/origin.log" "$BENCH_TMP/origin.error.log" 2>/dev/null)"
}

# bench_print_configs FILE...: the peer configurations as run, comments and blank lines dropped.
bench_print_configs() {
    local f
    echo "# peer configurations (as run; templates in benches/peers/)"
    for f in "$@"; do
        [ -f "$BENCH_TMP/$f" ] || continue
        echo "## $f"
        grep -v '^\s*#' "$BENCH_TMP/$f" | grep -v '^\s*$' | sed 's/^/    /'
    done
}
