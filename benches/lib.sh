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

# ctxsw_tree PID: "VOLUNTARY INVOLUNTARY" context switches so far of every thread of PID and of
# its descendants (/proc/P/task/T/status). Voluntary: the thread slept (it had nothing to do);
# involuntary: it was preempted (another task took its core). Each costs a switch and, after
# a sleep, a wake-up: on a virtual machine the dearest part of a request. A thread that exits
# takes its counts with it (unlike /proc/PID/stat's CPU times): for long-lived servers only.
ctxsw_tree() {
    local p v=0 i=0 a b
    for p in $(bench_descendants "$1"); do
        read -r a b < <(cat /proc/"$p"/task/*/status 2>/dev/null |
            awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { i += $2 }
                 END { print v + 0, i + 0 }')
        v=$((v + a))
        i=$((i + b))
    done
    echo "$v $i"
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

# stats VALUES...: print "MEDIAN MIN MAX" (median of an even count: mean of the middle two), to
# 10 significant digits (6 would round a req/s above 999999).
stats() {
    printf '%s\n' "$@" | { grep -v '^-\?$' || true; } | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "- - -"; exit }
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.10g %.10g %.10g\n", m, v[1], v[NR]
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

# load_wrk CORE CONNS DURATION URL: keep-alive load, bounded by DURATION; WRK_THREADS threads
# (1 unless set: `WRK_THREADS=2` spreads the clients over two cores).
load_wrk() {
    local core=$1 conns=$2 dur=$3 url=$4 r
    # Extra wrk flags (WRK_FLAGS, an array), e.g. (-H 'Connection: close').
    local -a extra=(${WRK_FLAGS[@]+"${WRK_FLAGS[@]}"})
    LOAD_OUT="$BENCH_TMP/load.out"
    r=$(bench_run_timed "$LOAD_OUT" timeout --kill-after=5 "$(($(dur_s "$dur") + 30))" \
        taskset -c "$core" wrk -t"${WRK_THREADS:-1}" -c"$conns" -d"$dur" --latency ${extra[@]+"${extra[@]}"} "$url")
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

# bench_write_bodies: the files every size case asks for, in $BENCH_TMP/www (/64: 64 bytes,
# /32k: 32768, /1m: 1048576; /2k and /8k for thresholds; BODY_LEN[path] is their length),
# readable by nginx's workers.
# shellcheck disable=SC2034 # used by the scripts that source this file
declare -A BODY_LEN=([64]=64 [32k]=32768 [2k]=2048 [8k]=8192 [1m]=1048576)
bench_write_bodies() {
    mkdir -p "$BENCH_TMP/www"
    head -c 64 /dev/zero | tr '\0' 'a' >"$BENCH_TMP/www/64"
    head -c 32768 /dev/zero | tr '\0' 'b' >"$BENCH_TMP/www/32k"
    # In-between sizes, for thresholds (SIZES="2k 8k").
    head -c 2048 /dev/zero | tr '\0' 'c' >"$BENCH_TMP/www/2k"
    head -c 8192 /dev/zero | tr '\0' 'd' >"$BENCH_TMP/www/8k"
    head -c 1048576 /dev/zero | tr '\0' 'e' >"$BENCH_TMP/www/1m"
    # A day old, as a site's files are: a cache computing heuristic freshness from
    # Last-Modified (RFC 9111 4.2.2, 10% of its age) would revalidate files written a second
    # ago on every request.
    touch -d '1 day ago' "$BENCH_TMP"/www/*
    chmod -R a+rX "$BENCH_TMP/www"
    export TMP=$BENCH_TMP
}

# bench_start_origin CORE: write the bodies (bench_write_bodies), start the origin pinned to CORE
# and wait for it. Which origin is ORIGIN's choice:
#   nginx         (the default) nginx, one worker, serving the files from disk with `sendfile
#                 on` (benches/peers/nginx-origin.conf): the head leaves in one write and the
#                 body in the next, so a proxy gets them in separate segments, as from the file
#                 servers users put behind it. Measured only against an origin answering in
#                 one write (the built-in origin), a 44% regression of that path went unseen
#                 (issue 23).
#   nginx-writev  the same with `sendfile off`: head and body in one writev, like an
#                 application answering from memory (what the scripts used before).
#   builtin       `loader origin` (the built-in origin, one worker, head and body in one
#                 write): for a machine without nginx; it answers every path with one body, so
#                 SIZES must be a single size.
# Sets ORIGIN_PORT, ORIGIN_PID, NGINX, BENCH_ORIGIN_DESC and BENCH_ORIGIN_PID (which adds the
# origin's CPU to every measured run).
bench_start_origin() {
    local core=$1 sendfile=on loader words
    NGINX=$(bench_sbin nginx)
    bench_write_bodies
    ORIGIN_PORT=$(bench_free_port)
    export ORIGIN_PORT
    case ${ORIGIN:-nginx} in
    nginx) ;;
    nginx-writev) sendfile=off ;;
    builtin)
        read -r -a words <<<"${SIZES:-64}"
        [ "${#words[@]}" = 1 ] ||
            bench_die "ORIGIN=builtin answers every path with one body: give one size (SIZES=64), not '${SIZES:-}'"
        loader=${LOADER_BIN:-${CARGO_TARGET_DIR:-target}/release/loader}
        bench_build loader || bench_die "cargo build --release -p loader failed (the built-in origin)"
        [ -x "$loader" ] || bench_die "$loader not found (the built-in origin)"
        bench_start "$core" "$BENCH_TMP/origin.log" "$loader" origin --listen "127.0.0.1:$ORIGIN_PORT" \
            --body-size "${BODY_LEN[${words[0]}]}" --workers 1 --no-pin
        ORIGIN_PID=$BENCH_LAST_PID
        BENCH_ORIGIN_PID=$ORIGIN_PID
        BENCH_ORIGIN_DESC="the built-in origin (loader origin --body-size ${BODY_LEN[${words[0]}]} --workers 1) on core $core"
        bench_wait_port "$ORIGIN_PORT" "$ORIGIN_PID" ||
            bench_die "the built-in origin did not start: $(cat "$BENCH_TMP/origin.log" 2>/dev/null)"
        return 0
        ;;
    *) bench_die "ORIGIN must be nginx, nginx-writev or builtin, not '$ORIGIN'" ;;
    esac
    bench_require nginx
    ORIGIN_SENDFILE=$sendfile
    export ORIGIN_SENDFILE
    bench_render "$BENCH_ROOT/benches/peers/nginx-origin.conf" "$BENCH_TMP/nginx-origin.conf" TMP ORIGIN_PORT ORIGIN_SENDFILE
    bench_start "$core" "$BENCH_TMP/origin.log" "$NGINX" -e "$BENCH_TMP/origin.error.log" \
        -p "$BENCH_TMP" -c "$BENCH_TMP/nginx-origin.conf"
    ORIGIN_PID=$BENCH_LAST_PID
    BENCH_ORIGIN_PID=$ORIGIN_PID
    BENCH_ORIGIN_DESC="nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), 1 worker, files from disk, sendfile $sendfile (benches/peers/nginx-origin.conf) on core $core"
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

# --- targets ------------------------------------------------------------------------------------
# A script describes what it compares as targets (servers it starts, or load generators) and
# cases (e.g. "64/keepalive"): BENCH_ACTIVE lists the targets that passed their checks, in
# report order; BENCH_CASES the cases, in run order; BENCH_PID[target] the process whose CPU is
# measured (none: no server CPU, e.g. the origin loaded directly); BENCH_DESC[target] one line
# saying how it runs.
declare -A BENCH_PID=() BENCH_DESC=()
BENCH_ACTIVE=()
BENCH_CASES=()
BENCH_ORIGIN_PID=""
BENCH_ORIGIN_DESC=""
# Whose CPU the cpu columns hold: "server" (BENCH_PID's, from /proc) or "load" (the load
# generator's own rusage: when the generators are what is compared).
BENCH_CPU=server

# bench_want LIST NAME: 0 if NAME is one of the words of LIST.
bench_want() { [[ " $1 " == *" $2 "* ]]; }

# bench_build PACKAGE: cargo build --release -p PACKAGE, unless NO_BUILD is set.
bench_build() {
    [ -n "${NO_BUILD:-}" ] && return 0
    bench_log "building: cargo build --release -p $1"
    cargo build --release -q -p "$1"
}

# bench_start_target NAME PORT CORE LOG CMD...: start CMD pinned to CORE as target NAME, wait
# until it listens on 127.0.0.1:PORT and passes the script's `check_target NAME`, then append it
# to BENCH_ACTIVE. Otherwise stop it and say why, with the start of LOG (and of LOG's
# .error.log sibling, where nginx writes before it has read its config).
bench_start_target() {
    local t=$1 port=$2 core=$3 log=$4 why
    shift 4
    bench_start "$core" "$log" "$@"
    BENCH_PID[$t]=$BENCH_LAST_PID
    if ! bench_wait_port "$port" "${BENCH_PID[$t]}"; then
        why="it did not start listening on $port"
    elif ! check_target "$t"; then
        why="it failed its check"
    else
        BENCH_ACTIVE+=("$t")
        return 0
    fi
    bench_log "SKIP $t: $why: $(cat "$log" "${log%.log}.error.log" 2>/dev/null | head -c 2000)"
    bench_stop "${BENCH_PID[$t]}"
    unset "BENCH_PID[$t]"
}

# bench_check_bodies NAME PORT: 20 GETs of each of $SIZES answer 200 with BODY_LEN bytes.
bench_check_bodies() {
    local t=$1 port=$2 size out
    for size in $SIZES; do
        out=$(timeout 10 ab -n 20 -c 2 "${BENCH_SCHEME:-http}://127.0.0.1:$port/$size" 2>&1) || {
            bench_log "$t: ab failed: $out"
            return 1
        }
        if ! grep -q "^Complete requests: *20$" <<<"$out" || ! grep -q "^Failed requests: *0$" <<<"$out" ||
            grep -q "^Non-2xx responses:" <<<"$out" ||
            ! grep -q "^Document Length: *${BODY_LEN[$size]} bytes" <<<"$out"; then
            bench_log "$t: /$size did not answer 20 × 200 with ${BODY_LEN[$size]} bytes:"
            bench_log "$(grep -E '^(Document Length|Complete|Failed|Non-2xx)' <<<"$out")"
            return 1
        fi
    done
}

# --- the measuring loop -------------------------------------------------------------------------
# The raw results: one TSV row per run, the same columns in every script:
#   case round target req/s p99_us completed errors user_us kernel_us origin_us vcsw icsw
# (vcsw, icsw: the target's voluntary and involuntary context switches during the load, all its
# threads and processes; see ctxsw_tree)
# ("-" where not measured: no server CPU for a target without a process, no origin).
BENCH_TSV_COLUMNS="case round target req/s p99_us completed errors user_us kernel_us origin_us vcsw icsw"

# bench_open_out PATH: start an empty results file (BENCH_OUT).
bench_open_out() {
    BENCH_OUT=$1
    mkdir -p "$(dirname "$BENCH_OUT")"
    : >"$BENCH_OUT"
}

# bench_measure LOAD_FN CASE ROUND TARGET: one bounded load, appended to BENCH_OUT as a row.
# `LOAD_FN CASE TARGET` runs it and prints a load_* line ("REQS_PER_S P99_US COMPLETED ERRORS
# USER_US KERNEL_US") or fails. The target's and the origin's CPU are read just around it.
bench_measure() {
    local load=$1 c=$2 round=$3 t=$4 pid=${BENCH_PID[$4]:-} res before after obefore oafter
    local rps p99 n err lu lk u=- k=- o=- swb swa vs=- is=-
    [ -n "$pid" ] && swb=$(ctxsw_tree "$pid")
    [ -n "$pid" ] && before=$(cpu_us_tree "$pid")
    [ -n "$BENCH_ORIGIN_PID" ] && obefore=$(cpu_us_tree "$BENCH_ORIGIN_PID")
    res=$("$load" "$c" "$t") || res=""
    [ -n "$BENCH_ORIGIN_PID" ] && oafter=$(cpu_us_tree "$BENCH_ORIGIN_PID")
    [ -n "$pid" ] && after=$(cpu_us_tree "$pid")
    [ -n "$pid" ] && swa=$(ctxsw_tree "$pid")
    if [ -z "$res" ]; then
        bench_log "round $round $c $t: load failed: $(tail -c 1500 "$LOAD_OUT")"
        return 0
    fi
    read -r rps p99 n err lu lk <<<"$res"
    if [ -n "$pid" ]; then
        u=$((${after% *} - ${before% *}))
        k=$((${after#* } - ${before#* }))
        vs=$((${swa% *} - ${swb% *}))
        is=$((${swa#* } - ${swb#* }))
    elif [ "$BENCH_CPU" = load ]; then
        u=$lu k=$lk
    fi
    [ -n "$BENCH_ORIGIN_PID" ] &&
        o=$((${oafter% *} + ${oafter#* } - ${obefore% *} - ${obefore#* }))
    [ "$err" -gt 0 ] && bench_log "round $round $c $t: $err errors reported by the load generator"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$round" "$t" "$rps" "$p99" "$n" \
        "$err" "$u" "$k" "$o" "$vs" "$is" >>"$BENCH_OUT"
}

# bench_rounds ROUNDS WARMUP_FN RUN_CMD...: `WARMUP_FN TARGET` for every target (not recorded;
# "" for none), then ROUNDS rounds of `RUN_CMD... CASE ROUND TARGET` for every case and
# target, the targets' order rotating each round (A B C, B C A, ...) so that no target always
# runs first or last (a noisy minute is shared). Logs the machine and the plan; sets BENCH_ROUNDS.
bench_rounds() {
    local rounds=$1 warm=$2 round c i t n=${#BENCH_ACTIVE[@]}
    shift 2
    BENCH_ROUNDS=$rounds
    bench_log "machine: $(bench_machine)"
    bench_log "targets: ${BENCH_ACTIVE[*]}; cases: ${BENCH_CASES[*]}; $rounds rounds"
    if [ -n "$warm" ]; then
        for t in "${BENCH_ACTIVE[@]}"; do "$warm" "$t"; done
    fi
    for ((round = 1; round <= rounds; round++)); do
        for c in "${BENCH_CASES[@]}"; do
            for ((i = 0; i < n; i++)); do
                t=${BENCH_ACTIVE[$(((i + round - 1) % n))]}
                bench_log "round $round/$rounds: $c $t"
                "$@" "$c" "$round" "$t"
            done
        done
    done
}

# --- cases SIZE/MODE: a file of each size, keep-alive clients or a connection per request -------
# For a server in front of BODY_LEN's files: SIZE is one of $SIZES, MODE "keepalive" (wrk -c
# CONNS -d DURATION) or "close" (ab -c CONNS -t DURATION -n AB_N, no -k), the load on LOAD_CORE.

# bench_size_mode_cases: BENCH_CASES = every SIZE/MODE of $SIZES × $MODES, sizes outermost.
bench_size_mode_cases() {
    local size mode
    for size in $SIZES; do
        for mode in $MODES; do BENCH_CASES+=("$size/$mode"); done
    done
}

# bench_load_size_mode SIZE/MODE PORT: one bounded load of 127.0.0.1:PORT/SIZE.
# shellcheck disable=SC2153 # LOAD_CORE, CONNS, DURATION, AB_N are the sourcing script's settings
bench_load_size_mode() {
    local url="http://127.0.0.1:$2/${1%/*}"
    if [ "${1#*/}" = keepalive ]; then
        load_wrk "$LOAD_CORE" "$CONNS" "$DURATION" "$url"
    else
        load_ab "$LOAD_CORE" "$CONNS" "$AB_N" "$DURATION" 0 "$url"
    fi
}

# bench_warm_sizes NAME PORT: one second of wrk on every size (not recorded): fills the page
# cache, the servers' open-file caches and upstream pools.
bench_warm_sizes() {
    local size
    for size in $SIZES; do
        load_wrk "$LOAD_CORE" "$CONNS" 1s "${BENCH_SCHEME:-http}://127.0.0.1:$2/$size" >/dev/null ||
            bench_log "warm-up of $1 /$size failed"
    done
}

# bench_size_mode_title SIZE/MODE NOUN: e.g. "64 B file, keep-alive (wrk)" (NOUN "B file").
bench_size_mode_title() {
    if [ "${1#*/}" = keepalive ]; then
        echo "${BODY_LEN[${1%/*}]} $2, keep-alive (wrk)"
    else
        echo "${BODY_LEN[${1%/*}]} $2, connection per request (ab, no -k)"
    fi
}

# bench_size_mode_load_line: the report's line saying what the two loads were.
bench_size_mode_load_line() {
    echo "# load: keep-alive = wrk -t${WRK_THREADS:-1} -c$CONNS -d$DURATION --latency; close = ab -c $CONNS -t $(dur_s "$DURATION") -n $AB_N (no -k)"
}

# --- the report ---------------------------------------------------------------------------------

# bench_figures CASE ROUND TARGET: "REQ/S P99_MS COMPLETED ERRORS CPU_US/REQ USER KERNEL
# ORIGIN_US/REQ" of one run from BENCH_OUT ("-" where not measured), nothing if it left no row.
bench_figures() {
    awk -F'\t' -v c="$1" -v r="$2" -v t="$3" '
        function per(x) { return ($6 > 0 && x != "-") ? sprintf("%.2f", x / $6) : "-" }
        $1 == c && $2 == r && $3 == t {
            cpu = ($8 == "-") ? "-" : $8 + $9
            p99 = ($5 == "-") ? "-" : sprintf("%.2f", $5 / 1000)
            print $4, p99, $6, $7, per(cpu), per($8), per($9), per($10)
            exit
        }' "$BENCH_OUT"
}

# bench_switches CASE TARGET [FILE GROUP]: "VOLUNTARY/INVOLUNTARY" context switches per request
# of TARGET in CASE, medians over the rounds, from BENCH_OUT (or FILE, whose rows start with a
# group column: all.sh's raw TSV, rows of GROUP); "—" without figures.
bench_switches() {
    awk -F'\t' -v c="$1" -v t="$2" -v g="${4:-}" '
        function median(a, n,   i, j, x) {
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
            return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        {
            o = (g == "") ? 0 : 1
            if (o && $1 != g) next
        }
        $(1 + o) == c && $(3 + o) == t && $(6 + o) > 0 && $(11 + o) != "" && $(11 + o) != "-" {
            n++; v[n] = $(11 + o) / $(6 + o); i[n] = $(12 + o) / $(6 + o)
        }
        END { if (n) printf "%.2f/%.2f\n", median(v, n), median(i, n); else print "—" }' "${3:-$BENCH_OUT}"
}

# bench_report TITLE_FN TARGET_WORD CPU_LABEL REF: for every case, "## `TITLE_FN CASE`", a
# row per round and target, then the summary (median [min-max] over the rounds) per target.
# TARGET_WORD and CPU_LABEL name the target and CPU µs/req columns; vs_REF is the CPU µs/req
# ÷ REF's in the same round (paired). origin_us/req is shown when there is an origin.
bench_report() {
    local title=$1 word=$2 cpu=$3 ref=$4 c t w=6
    [ -s "$BENCH_OUT" ] || bench_die "no load succeeded (the messages above say why)"
    for t in "${BENCH_ACTIVE[@]}"; do ((${#t} + 1 > w)) && w=$((${#t} + 1)); done
    for c in "${BENCH_CASES[@]}"; do
        echo
        echo "## $("$title" "$c")"
        bench_report_rounds "$c" "$w" "$word" "$cpu" "$ref"
        bench_report_summary "$c" "$w" "$word" "$cpu" "$ref"
    done
}

# bench_report_rounds CASE WIDTH TARGET_WORD CPU_LABEL REF: the per-round table of one case.
bench_report_rounds() {
    local c=$1 w=$2 cw=$((${#4} + 1)) ref=$5 round t f r rps p99 n err tot u k o fmt
    ((cw < 8)) && cw=8
    fmt="%-5s %-${w}s %10s %9s %9s %7s %${cw}s %8s %8s %9s"
    if [ -n "$BENCH_ORIGIN_PID" ]; then
        # shellcheck disable=SC2059 # the format is built above
        printf "$fmt %13s\n" round "$3" req/s p99_ms completed errors "$4" user kernel "vs_$ref" origin_us/req
    else
        # shellcheck disable=SC2059
        printf "$fmt\n" round "$3" req/s p99_ms completed errors "$4" user kernel "vs_$ref"
    fi
    for ((round = 1; round <= BENCH_ROUNDS; round++)); do
        r=$(bench_figures "$c" "$round" "$ref")
        read -r _ _ _ _ r _ <<<"${r:-- - - - -}"
        for t in "${BENCH_ACTIVE[@]}"; do
            f=$(bench_figures "$c" "$round" "$t")
            [ -z "$f" ] && continue
            read -r rps p99 n err tot u k o <<<"$f"
            rps=$(printf '%.0f' "$rps")
            # shellcheck disable=SC2059
            printf "$fmt" "$round" "$t" "$rps" "$p99" "$n" "$err" "$tot" "$u" "$k" "$(div "$tot" "$r")"
            if [ -n "$BENCH_ORIGIN_PID" ]; then printf ' %13s\n' "$o"; else echo; fi
        done
    done
}

# bench_report_summary CASE WIDTH TARGET_WORD CPU_LABEL REF: median [min-max] per target.
bench_report_summary() {
    local c=$1 w=$2 ref=$5 round t f r v rps p99 tot us ks ratio fmt
    fmt="%-${w}s %-24s %-22s %-22s %-20s %-20s %-20s\n"
    echo "summary: median [min-max] over $BENCH_ROUNDS rounds"
    # shellcheck disable=SC2059 # the format is built above
    printf "$fmt" "$3" req/s p99_ms "$4" user kernel "vs_$ref"
    for t in "${BENCH_ACTIVE[@]}"; do
        rps=() p99=() tot=() us=() ks=() ratio=()
        for ((round = 1; round <= BENCH_ROUNDS; round++)); do
            f=$(bench_figures "$c" "$round" "$t")
            [ -z "$f" ] && continue
            read -r -a v <<<"$f"
            rps+=("${v[0]}") p99+=("${v[1]}") tot+=("${v[4]}") us+=("${v[5]}") ks+=("${v[6]}")
            r=$(bench_figures "$c" "$round" "$ref")
            read -r _ _ _ _ r _ <<<"${r:-- - - - -}"
            ratio+=("$(div "${v[4]}" "$r")")
        done
        # shellcheck disable=SC2059
        printf "$fmt" "$t" "$(FMT=%.0f fmt_spread "${rps[@]}")" "$(fmt_spread "${p99[@]}")" \
            "$(fmt_spread "${tot[@]}")" "$(fmt_spread "${us[@]}")" "$(fmt_spread "${ks[@]}")" \
            "$(FMT=%.3f fmt_spread "${ratio[@]}")"
    done
}

# bench_report_head NAME: the report's first line (after a blank one): name, time, machine.
bench_report_head() {
    echo
    echo "# $1: $(date -u +%Y-%m-%dT%H:%MZ), $(bench_machine)"
}

# bench_report_targets: "#   TARGET: how it ran" for every measured target.
bench_report_targets() {
    local t
    [ -n "${BENCH_ORIGIN_DESC:-}" ] && echo "#   origin: $BENCH_ORIGIN_DESC"
    for t in "${BENCH_ACTIVE[@]}"; do echo "#   $t: ${BENCH_DESC[$t]}"; done
}

# bench_report_tail CONFIG...: where the raw rows are, and the peer configurations as run.
bench_report_tail() {
    echo
    echo "# raw results (TSV: $BENCH_TSV_COLUMNS): $BENCH_OUT"
    echo
    bench_print_configs "$@"
}
