#!/usr/bin/env bash
# Runs scripts/systemd/proxy.service under systemd as PID 1 in bookworm containers (systemd 252
# from bookworm, and the newer one of bookworm-backports) and checks what the unit promises:
# start through READY=1, a request answered, `systemctl reload` taking a changed config
# (RELOADING=1 ... READY=1 in the journal) and refusing a broken one, the access log in
# LogsDirectory= and its logrotate reopen, a clean `systemctl stop`. On the newer systemd the
# same checks run with scripts/systemd/notify-reload.conf (Type=notify-reload) as well. docs/OPERATIONS.md,
# "Checking the image and the unit", records the outcome.
#
#   scripts/systemd/check.sh            (as root; usually through scripts/container-check.sh)
#
# The proxy binary comes from the image scripts/container-check.sh built ($PROXY_IMAGE), else
# from target/release/proxy. SLIM names the bookworm base image (a local stand-in where no
# registry answers: scripts/container-check.sh makes it).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${CHECK_WORK:-/var/tmp/proxy-container-check}/systemd
SLIM=${SLIM:-docker.io/library/debian:bookworm-slim}
PROXY_IMAGE=${PROXY_IMAGE:-localhost/proxy:check}
MIRROR=http://deb.debian.org/debian

say() { printf '== %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}
[ "$(id -u)" = 0 ] || fail "run as root"
command -v podman >/dev/null || fail "podman is missing (scripts/container-check.sh installs it)"
rm -rf "$WORK" && mkdir -p "$WORK/files"
# The podman settings scripts/container-check.sh found this host to need, if it needed any.
conf=$(dirname "$WORK")/containers.conf
if [ -z "${CONTAINERS_CONF:-}" ] && [ -f "$conf" ]; then
    export CONTAINERS_CONF=$conf
fi

cp "$ROOT/scripts/systemd/proxy.service" "$ROOT/scripts/systemd/proxy.logrotate" \
    "$ROOT/scripts/systemd/notify-reload.conf" "$WORK/files/"
# The shipped config, with what the checks look at: an access log in LogsDirectory= and the
# admin listener (/healthz, /metrics).
{
    cat "$ROOT/scripts/systemd/proxy.toml"
    printf '\n[admin]\naddr = "127.0.0.1:9901"\n\n[access_log]\npath = "/var/log/proxy/access.log"\n'
} >"$WORK/files/proxy.toml"
cat >"$WORK/files/origin.toml" <<'EOF'
[[listen]]
addr = "127.0.0.1:9001"

[[route]]
path = "/"
return = { status = 200, body = "origin saw {path}\n" }
EOF
cp "$ROOT/scripts/systemd/inside-check.sh" "$WORK/files/"

# bookworm's systemd (252) and bookworm-backports' (254 and later: Type=notify-reload).
make_image() {
    local tag=$1 backports=$2 ctx=$WORK/image-$1
    mkdir -p "$ctx"
    {
        echo "FROM $SLIM"
        if [ "$backports" = 1 ]; then
            echo "RUN echo 'deb $MIRROR bookworm-backports main' >/etc/apt/sources.list.d/backports.list"
            echo 'ENV TARGET="-t bookworm-backports"'
        else
            echo 'ENV TARGET=""'
        fi
        echo 'RUN apt-get update && apt-get install -y --no-install-recommends $TARGET systemd systemd-sysv \'
        echo '      && apt-get install -y --no-install-recommends dbus curl logrotate procps \'
        echo ' && rm -rf /var/lib/apt/lists/* \'
        # Units a container has no use for (and that fail in one).
        echo ' && systemctl mask getty.target console-getty.service systemd-logind.service \'
        echo '      systemd-remount-fs.service systemd-udevd.service systemd-modules-load.service'
        echo 'STOPSIGNAL SIGRTMIN+3'
        echo 'CMD ["/sbin/init"]'
    } >"$ctx/Containerfile"
    say "image localhost/proxy-systemd:$tag"
    nice -n 19 podman build --quiet -t "localhost/proxy-systemd:$tag" "$ctx" >/dev/null
}

# One container per systemd: PID 1 is systemd, the checks run inside (inside-check.sh).
# Privileged, as on a host: the unit's sandboxing (mount namespaces, DynamicUser, seccomp)
# needs what a container otherwise withholds from its systemd.
run_in() {
    local tag=$1 variant=$2 name=pc-systemd-$1
    podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
    podman run -d --name "$name" --systemd=always --privileged \
        -v "$WORK/files:/check:ro" "localhost/proxy-systemd:$tag" >/dev/null
    local rc=0
    podman exec "$name" bash /check/inside-check.sh "$variant" || rc=$?
    if [ "${KEEP:-0}" != 1 ]; then
        podman rm -f -t 5 "$name" >/dev/null
    fi
    [ $rc = 0 ] || fail "systemd $tag, unit $variant (container $name; KEEP=1 keeps it)"
}

make_image 252 0
make_image backports 1
if podman image exists "$PROXY_IMAGE"; then
    c=$(podman create "$PROXY_IMAGE")
    podman cp "$c:/usr/local/bin/proxy" "$WORK/files/proxy"
    podman rm "$c" >/dev/null
    say "the proxy binary from $PROXY_IMAGE"
elif [ -x "$ROOT/target/release/proxy" ]; then
    cp "$ROOT/target/release/proxy" "$WORK/files/proxy"
    say "the proxy binary from target/release/proxy"
else
    fail "no proxy binary: build $PROXY_IMAGE (scripts/container-check.sh image) or target/release/proxy"
fi
chmod -R a+rX "$WORK"
run_in 252 shipped
run_in backports shipped
run_in backports notify-reload
say "systemd checks passed"
