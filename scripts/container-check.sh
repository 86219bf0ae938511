#!/usr/bin/env bash
# Builds the repository's Dockerfile for real and proves the images serve, then runs the proxy
# under systemd as PID 1 (scripts/systemd/check.sh). docs/OPERATIONS.md, "Checking the image
# and the unit", records what it found.
#
#   scripts/container-check.sh [all|image|systemd]     (as root; default all)
#
# Needs podman (installed from Debian's packages when missing). The base images the Dockerfile
# names (rust:1-bookworm, debian:bookworm-slim) are pulled when a registry answers; where none
# does, local stand-ins are made under the same names: a bookworm minbase from Debian's archive
# (mmdebstrap, the official slim image's dpkg excludes) and, on it, what the official rust
# image has (gcc, make, libc headers, git, curl) with rustup's stable toolchain (or, when
# rustup's server cannot be reached, the host's own toolchain). Certificates in
# /usr/local/share/ca-certificates (a TLS-inspecting egress's CA) are copied into the stand-ins.
#
# The image check: `podman build` of the Dockerfile unchanged (targets proxy and loader, under
# nice -n 19), the sizes, then in one network namespace an origin (the proxy image answering
# with a `return` route on 127.0.0.1:9001) and
#   1. the proxy image as shipped (its CMD, scripts/systemd/proxy.toml): uid 65532, a request on
#      8080 answered by the origin;
#   2. the proxy with scripts/k8s/proxy.yaml's ConfigMap (upstream moved to the origin) and the
#      Deployment's securityContext and limits (read-only root, no capabilities, no new
#      privileges, 2 CPUs, 512 MiB): the probes' /healthz on 9901, /metrics, a SIGHUP reload
#      taken (proxy_config_generation), a clean stop on SIGTERM (exit 0);
#   3. the loader image against the proxy;
#   4. io_uring: the runtime's default seccomp profile (which refuses it: the proxy runs on epoll)
#      plus io_uring_setup/enter/register, and the start line says io_uring.
# Environment: KEEP=1 keeps the containers; REBUILD_BASES=1 remakes the local stand-ins;
# SKIP_BUILD=1 checks the images already built (the build compiles the workspace, ~25 min on 2
# busy cores; the loader target reuses the proxy target's builder stage only if no file of the
# context changed in between);
# CHECK_WORK (default /var/tmp/proxy-container-check) holds the rootfs and contexts.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${CHECK_WORK:-/var/tmp/proxy-container-check}
SLIM=docker.io/library/debian:bookworm-slim
RUST=docker.io/library/rust:1-bookworm
PROXY_IMAGE=localhost/proxy:check
LOADER_IMAGE=localhost/loader:check
MIRROR=http://deb.debian.org/debian
what=${1:-all}

say() { printf '== %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || fail "run as root (podman rootful, mmdebstrap)"
mkdir -p "$WORK"

install_tools() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
    command -v runc >/dev/null || missing+=(runc)
    command -v curl >/dev/null || missing+=(curl)
    command -v python3 >/dev/null || missing+=(python3)
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# Podman's defaults need what some hosts lack: crun refuses a hybrid cgroup layout whose v2
# hierarchy holds a controller ("cgroups in hybrid mode not supported"), and the default
# RLIMIT_NOFILE/NPROC of a rootful container (1048576/4194304) cannot be set without
# CAP_SYS_RESOURCE ("setrlimit RLIMIT_NOFILE: Operation not permitted"). When the defaults fail,
# a containers.conf of our own takes runc and the host's limits.
podman_setup() {
    local err conf=$WORK/containers.conf nofile nproc runtime
    rm -f "$conf"
    unset CONTAINERS_CONF
    if err=$(podman run --rm "$SLIM" true 2>&1); then
        return
    fi
    say "podman's defaults fail here: ${err##*Error: }"
    nofile=$(ulimit -Hn)
    for runtime in crun runc; do
        for nproc in "$(ulimit -Hu)" 32768 4096; do
            printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n[engine]\nruntime = "%s"\n' \
                "$nofile" "$nofile" "$nproc" "$nproc" "$runtime" >"$conf"
            export CONTAINERS_CONF=$conf
            if err=$(podman run --rm "$SLIM" true 2>&1); then
                say "using $conf ($runtime, nofile $nofile, nproc $nproc)"
                return
            fi
            case "$err" in *[Rr][Ll][Ii][Mm][Ii][Tt]*) ;; *) break ;; esac
        done
        say "with the host's limits, $runtime: ${err##*Error: }"
    done
    fail "podman cannot run a container here (above)"
}

local_cas() { find /usr/local/share/ca-certificates -name '*.crt' 2>/dev/null | sort; }

# The official slim image is a debuerreotype minbase with these dpkg excludes and apt settings
# (its /etc/apt/apt.conf.d/docker-*): no package caches left in a layer (without them an
# `apt-get install` in a Dockerfile leaves 74 MB of /var/cache/apt/*.bin behind), compressed
# indexes, no translations, suggested packages not kept.
make_slim() {
    say "making $SLIM from $MIRROR (mmdebstrap minbase)"
    local cas hooks=()
    mapfile -t cas < <(local_cas)
    if [ ${#cas[@]} -gt 0 ]; then
        hooks+=(--customize-hook='mkdir -p "$1/usr/local/share/ca-certificates"')
        hooks+=(--customize-hook="copy-in ${cas[*]} /usr/local/share/ca-certificates")
    fi
    # merged-usr: /usr merged by the hook (usr-is-merged), not by the usrmerge package, which
    # would bring perl (50 MB) into the image.
    nice -n 19 mmdebstrap --variant=minbase --mode=root --format=tar --quiet \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --aptopt='Acquire::Languages "none"' \
        --aptopt='Acquire::GzipIndexes "true"' \
        --aptopt='Apt::AutoRemove::SuggestsImportant "false"' \
        --aptopt='Dir::Cache::pkgcache ""' --aptopt='Dir::Cache::srcpkgcache ""' \
        --aptopt='DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; }' \
        "${hooks[@]}" \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        bookworm "$WORK/slim.tar" \
        "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
        "deb ${MIRROR}-security bookworm-security main" >"$WORK/mmdebstrap.log" 2>&1 ||
        { tail -20 "$WORK/mmdebstrap.log"; fail "mmdebstrap (log: $WORK/mmdebstrap.log)"; }
    podman import --quiet --change 'CMD ["bash"]' "$WORK/slim.tar" "$SLIM" >/dev/null
    rm -f "$WORK/slim.tar"
}

# What the official rust image adds to buildpack-deps:bookworm, less what no build here needs.
make_rust() {
    say "making $RUST on $SLIM"
    local ctx=$WORK/rust-base rustup=https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init
    rm -rf "$ctx" && mkdir -p "$ctx"
    {
        echo "FROM $SLIM"
        echo 'ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        echo 'RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl git \'
        echo '      gcc g++ libc6-dev make pkg-config libssl-dev zlib1g-dev xz-utils file patch procps netbase \'
        echo ' && rm -rf /var/lib/apt/lists/*'
        if curl -sfI --max-time 20 "$rustup" >/dev/null; then
            echo "RUN curl -sSfo /tmp/rustup-init $rustup && chmod +x /tmp/rustup-init \\"
            echo ' && RUSTUP_USE_CURL=1 /tmp/rustup-init -y --no-modify-path --profile minimal --default-toolchain stable \'
            echo ' && rm /tmp/rustup-init && chmod -R a+w "$RUSTUP_HOME" "$CARGO_HOME" && rustc --version'
        else
            say "rustup's server cannot be reached: the host's toolchain goes in"
            cp -a "$(rustc --print sysroot)" "$ctx/toolchain"
            echo 'COPY toolchain /usr/local/cargo'
            echo 'RUN rustc --version && cargo --version'
        fi
    } >"$ctx/Containerfile"
    nice -n 19 podman build --quiet -t "$RUST" "$ctx" >/dev/null
}

# A pulled image wins; a stand-in is made only when the registry cannot be reached.
base_image() {
    local name=$1 make=$2
    if [ "${REBUILD_BASES:-0}" != 1 ] && podman image exists "$name"; then
        return
    fi
    if [ "${REBUILD_BASES:-0}" != 1 ] && timeout 60 podman pull --quiet "$name" >/dev/null 2>&1; then
        say "pulled $name"
        return
    fi
    "$make"
}

build_images() {
    local commit
    commit=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
    say "podman build --target proxy (the Dockerfile as it is; the workspace compiles under nice -n 19)"
    local t0=$SECONDS
    nice -n 19 podman build --target proxy -t "$PROXY_IMAGE" --build-arg PROXY_COMMIT="$commit" \
        -f "$ROOT/Dockerfile" "$ROOT" >"$WORK/build-proxy.log" 2>&1 ||
        { tail -30 "$WORK/build-proxy.log"; fail "podman build --target proxy (log: $WORK/build-proxy.log)"; }
    say "built in $((SECONDS - t0)) s"
    nice -n 19 podman build --target loader -t "$LOADER_IMAGE" --build-arg PROXY_COMMIT="$commit" \
        -f "$ROOT/Dockerfile" "$ROOT" >"$WORK/build-loader.log" 2>&1 ||
        { tail -30 "$WORK/build-loader.log"; fail "podman build --target loader (log: $WORK/build-loader.log)"; }
}

sizes() {
    local img
    for img in "$PROXY_IMAGE" "$LOADER_IMAGE" "$SLIM" "$RUST"; do
        podman image exists "$img" || continue
        printf '   %-40s %4s MB\n' "$img" "$(($(podman image inspect --format '{{.Size}}' "$img") / 1000000))"
    done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Polls until the URL answers (readiness is the answer, not a sleep); prints the body.
wait_http() {
    local url=$1 deadline=$((SECONDS + 30)) body
    until body=$(curl -sS --max-time 2 "$url" 2>/dev/null); do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.1
    done
    printf '%s' "$body"
}

until_log() {
    local deadline=$((SECONDS + 30))
    until podman logs "$1" 2>&1 | grep -q -- "$2"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.1
    done
}

expect() {
    local what=$1 got=$2 want=$3
    case "$got" in
    *"$want"*) printf '   ok: %s\n' "$what" ;;
    *) fail "$what: wanted \"$want\", got \"$got\"" ;;
    esac
}

cleanup_containers() {
    [ "${KEEP:-0}" = 1 ] && return
    # One at a time, those in the origin's network namespace first: a name that does not
    # exist (any more) would leave the rest of one `podman rm` undone.
    local c
    for c in pc-loader pc-uring pc-k8s pc-proxy pc-origin; do
        podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
    done
}

run_checks() {
    local port aport dir=$WORK/run
    port=$(free_port)
    aport=$(free_port)
    rm -rf "$dir" && mkdir -p "$dir/origin" "$dir/k8s" "$dir/uring"
    chmod 755 "$dir" "$dir/origin" "$dir/k8s" "$dir/uring"
    cleanup_containers
    trap cleanup_containers EXIT

    cat >"$dir/origin/proxy.toml" <<'EOF'
[[listen]]
addr = "127.0.0.1:9001"

[[route]]
path = "/"
return = { status = 200, body = "origin saw {path}\n" }
EOF
    say "origin (the proxy image with a return route) on 127.0.0.1:9001; ports $port->8080, $aport->9901"
    podman run -d --name pc-origin -p "127.0.0.1:$port:8080" -p "127.0.0.1:$aport:9901" \
        -v "$dir/origin:/etc/proxy:ro" "$PROXY_IMAGE" >/dev/null

    say "1. the image as shipped: CMD --config /etc/proxy/proxy.toml (scripts/systemd/proxy.toml)"
    podman run -d --name pc-proxy --network container:pc-origin "$PROXY_IMAGE" >/dev/null
    local body pid uid
    body=$(wait_http "http://127.0.0.1:$port/shipped") || {
        podman logs pc-proxy
        fail "the shipped image never answered on 8080"
    }
    expect "GET /shipped through the proxy reaches the origin" "$body" "origin saw /shipped"
    pid=$(podman inspect --format '{{.State.Pid}}' pc-proxy)
    uid=$(awk '/^Uid:/ {print $2 "/" $3}' "/proc/$pid/status")
    expect "the proxy runs as uid 65532 (real/effective)" "$uid" "65532/65532"
    podman logs pc-proxy 2>&1 | sed 's/^/   log: /'
    podman rm -f -t 10 pc-proxy >/dev/null

    say "2. scripts/k8s/proxy.yaml's config with the Deployment's securityContext and limits"
    # The ConfigMap's `proxy.toml: |` block (indented 4), with the Service name made the origin.
    awk '/^  proxy\.toml: \|/ {on = 1; next} on && /^    / {print substr($0, 5); next}
         on && /^$/ {print; next} on {exit}' "$ROOT/scripts/k8s/proxy.yaml" |
        sed 's/"app\.default\.svc\.cluster\.local:80"/"127.0.0.1:9001"/' >"$dir/k8s/proxy.toml"
    grep -q '"127.0.0.1:9001"' "$dir/k8s/proxy.toml" ||
        fail "scripts/k8s/proxy.yaml: no ConfigMap proxy.toml with the app Service upstream (update this script)"
    podman run -d --name pc-k8s --network container:pc-origin --read-only --cap-drop ALL \
        --security-opt no-new-privileges --cpus 2 --memory 512m \
        -v "$dir/k8s:/etc/proxy:ro" "$PROXY_IMAGE" --config /etc/proxy/proxy.toml >/dev/null
    body=$(wait_http "http://127.0.0.1:$aport/healthz") || {
        podman logs pc-k8s
        fail "/healthz never answered on the admin port"
    }
    expect "readiness/liveness probe: GET /healthz on 9901" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$aport/healthz")" 200
    body=$(wait_http "http://127.0.0.1:$port/k8s")
    expect "GET /k8s through the proxy reaches the origin" "$body" "origin saw /k8s"
    local metrics
    metrics=$(curl -sS "http://127.0.0.1:$aport/metrics")
    expect "/metrics: proxy_build_info" "$metrics" "proxy_build_info{"
    expect "/metrics: process_resident_memory_bytes" "$metrics" "process_resident_memory_bytes "
    expect "/metrics: generation 1" "$metrics" "proxy_config_generation 1"
    podman logs pc-k8s 2>&1 | sed 's/^/   log: /'
    # A reload (the ConfigMap changed): SIGHUP, taken when the generation moves.
    podman kill --signal HUP pc-k8s >/dev/null
    local deadline=$((SECONDS + 10))
    until curl -sS "http://127.0.0.1:$aport/metrics" | grep -q '^proxy_config_generation 2'; do
        [ $SECONDS -lt $deadline ] || fail "SIGHUP: proxy_config_generation never reached 2"
        sleep 0.1
    done
    printf '   ok: SIGHUP reload taken (proxy_config_generation 2)\n'

    say "3. the loader image against the proxy"
    local out
    out=$(podman run --rm --name pc-loader --network container:pc-origin "$LOADER_IMAGE" \
        -c 4 -n 200 http://127.0.0.1:8080/loader 2>&1) || {
        echo "$out"
        fail "the loader failed"
    }
    printf '%s\n' "$out" | sed -n '1p;/^Complete requests/p;/^Failed requests/p;/^Non-2xx/p' | sed 's/^/   loader: /'
    expect "the loader: 200 requests complete" "$out" "Complete requests:      200"
    expect "the loader: none failed" "$out" "Failed requests:        0"

    say "4. io_uring: the runtime's default seccomp profile plus io_uring_setup/enter/register"
    python3 - /usr/share/containers/seccomp.json "$dir/seccomp-io-uring.json" <<'EOF'
import json, sys
profile = json.load(open(sys.argv[1]))
profile["syscalls"].append({"names": ["io_uring_setup", "io_uring_enter", "io_uring_register"],
                            "action": "SCMP_ACT_ALLOW"})
json.dump(profile, open(sys.argv[2], "w"), indent=1)
EOF
    sed 's/9001/9002/' "$dir/origin/proxy.toml" >"$dir/uring/proxy.toml"
    podman run -d --name pc-uring --network container:pc-origin --read-only --cap-drop ALL \
        --security-opt seccomp="$dir/seccomp-io-uring.json" -v "$dir/uring:/etc/proxy:ro" \
        "$PROXY_IMAGE" >/dev/null
    until_log pc-uring 'listening on' || fail "the io_uring proxy did not start"
    expect "start line with io_uring allowed" "$(podman logs pc-uring 2>&1 | sed -n 1p)" "driver io_uring"
    podman logs pc-uring 2>&1 | sed -n 1p | sed 's/^/   log: /'
    podman rm -f -t 5 pc-uring >/dev/null

    say "SIGTERM (podman stop): a graceful stop exits 0"
    podman stop -t 30 pc-k8s >/dev/null
    expect "exit code after SIGTERM" "$(podman inspect --format '{{.State.ExitCode}}' pc-k8s)" 0
}

case "$what" in
all | image | systemd) ;;
*) fail "usage: $0 [all|image|systemd]" ;;
esac
install_tools
base_image "$SLIM" make_slim
podman_setup
if [ "$what" != systemd ]; then
    if [ "${SKIP_BUILD:-0}" = 1 ]; then
        podman image exists "$PROXY_IMAGE" && podman image exists "$LOADER_IMAGE" ||
            fail "SKIP_BUILD=1 without $PROXY_IMAGE and $LOADER_IMAGE"
    else
        base_image "$RUST" make_rust
        build_images
    fi
    say "image sizes"
    sizes
    run_checks
fi
if [ "$what" != image ]; then
    CHECK_WORK=$WORK PROXY_IMAGE=$PROXY_IMAGE SLIM=$SLIM "$ROOT/scripts/systemd/check.sh"
fi
say "all checks passed"
