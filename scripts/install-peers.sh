#!/usr/bin/env bash
# Install the peers the benchmark scripts compare against (nginx, HAProxy, Varnish, wrk, ab,
# h2load), and valgrind for benches/instructions.sh
# from Debian's packages. Idempotent: runs `apt-get update` once and only when something is
# missing. The distro's nginx/haproxy services are stopped and disabled afterwards, because the
# benchmarks start their own instances on free ports and a stray service on :80 would only add
# noise (and would answer on a port a script might pick).
set -euo pipefail

# command -> Debian package
declare -A PKG=(
  [nginx]=nginx
  [haproxy]=haproxy
  [varnishd]=varnish
  [wrk]=wrk
  [ab]=apache2-utils
  [h2load]=nghttp2-client
  [taskset]=util-linux
  [jq]=jq
  [valgrind]=valgrind
)

# module file -> Debian package: nginx's set_random (the seeds' openresty directive) for the
# `return 302` benchmark; ndk is the module set-misc needs.
declare -A MOD_PKG=(
  [/usr/lib/nginx/modules/ndk_http_module.so]=libnginx-mod-http-ndk
  [/usr/lib/nginx/modules/ngx_http_set_misc_module.so]=libnginx-mod-http-set-misc
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-peers: not root and no sudo; install these yourself: ${PKG[*]}" >&2
    exit 1
  fi
fi

missing=()
for cmd in "${!PKG[@]}"; do
  if ! command -v "$cmd" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$cmd" ]; then
    missing+=("${PKG[$cmd]}")
  fi
done

for f in "${!MOD_PKG[@]}"; do
  [ -e "$f" ] || missing+=("${MOD_PKG[$f]}")
done

if [ "${#missing[@]}" -gt 0 ]; then
  # De-duplicate package names.
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "install-peers: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d exit 101 keeps dpkg from starting the services during installation (in
  # containers without systemd the postinst would otherwise try to start nginx on :80).
  policy=/usr/sbin/policy-rc.d
  created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
    created_policy=1
  fi
  cleanup_policy() { if [ "$created_policy" = 1 ]; then $SUDO rm -f "$policy"; fi; }
  trap cleanup_policy EXIT
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-peers: all peers present" >&2
fi

# Make sure the distro services are not left running on their default ports.
for svc in nginx haproxy varnish; do
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $SUDO systemctl stop "$svc" >/dev/null 2>&1 || true
    $SUDO systemctl disable "$svc" >/dev/null 2>&1 || true
  elif command -v service >/dev/null 2>&1; then
    $SUDO service "$svc" stop >/dev/null 2>&1 || true
  fi
done

for cmd in "${!PKG[@]}"; do
  p=$(command -v "$cmd" 2>/dev/null || true)
  [ -z "$p" ] && [ -x "/usr/sbin/$cmd" ] && p="/usr/sbin/$cmd"
  printf 'install-peers: %-8s %s\n' "$cmd" "${p:-MISSING}" >&2
done
for f in "${!MOD_PKG[@]}"; do
  printf 'install-peers: %-8s %s\n' "${MOD_PKG[$f]#libnginx-mod-http-}" "$([ -e "$f" ] && echo "$f" || echo MISSING)" >&2
done
