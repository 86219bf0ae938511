#!/usr/bin/env bash
# Run by scripts/systemd/check.sh inside a container whose PID 1 is systemd, with its files in
# /check: installs the proxy and the unit as docs/OPERATIONS.md says, then checks the unit.
#   inside-check.sh shipped|notify-reload
set -uo pipefail
variant=$1

ok() { printf '   ok: %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    systemctl status --no-pager proxy >&2 || true
    journalctl -b -u proxy --no-pager -o short-monotonic | tail -40 >&2
    exit 1
}
get() { curl -sS --max-time 2 "http://127.0.0.1:8080$1" 2>&1; }
# Polls (readiness is the answer, not a sleep) until the command's output holds $2. The output
# is taken whole first: `grep -q` on a pipe would end the writer early, and pipefail would then
# call the match a failure.
until_holds() {
    local deadline=$((SECONDS + 10)) out
    while :; do
        out=$(eval "$1" 2>/dev/null) || true
        grep -q -- "$2" <<<"$out" && return 0
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.1
    done
}
journal() { journalctl -b -u proxy --no-pager -o cat; }
in_journal() { until_holds journal "$1"; }

# `podman exec` may come before systemd's bus: wait for it, then for the boot to end.
deadline=$((SECONDS + 30))
until [ -S /run/systemd/private ]; do
    [ $SECONDS -lt $deadline ] || fail "systemd never opened its bus"
    sleep 0.1
done
state=$(systemctl is-system-running --wait 2>&1)
printf '   %s, system %s\n' "$(systemctl --version | head -1)" "$state"
systemctl --failed --no-legend --plain | sed 's/^/   failed unit: /'

install -m 755 /check/proxy /usr/local/bin/proxy
install -D -m 644 /check/proxy.toml /etc/proxy/proxy.toml
install -m 644 /check/proxy.service /etc/systemd/system/proxy.service
install -m 644 /check/proxy.logrotate /etc/logrotate.d/proxy
if [ "$variant" = notify-reload ]; then
    install -D -m 644 /check/notify-reload.conf /etc/systemd/system/proxy.service.d/notify-reload.conf
fi
systemctl daemon-reload
printf '   unit: Type=%s, ExecReload=%s\n' "$(systemctl show -p Type --value proxy)" \
    "$(systemctl show -p ExecReload --value proxy | sed -n 's/.*argv\[\]=\([^;]*\) ;.*/\1/p' | paste -sd'|')"
# Every sd_notify datagram is logged at debug level ("Got notification message").
systemd-analyze set-log-level debug
systemctl daemon-reload
printf '   %s\n' "$(systemd-analyze security --no-pager proxy.service | tail -1)"

systemd-run --quiet --unit origin -p Type=notify -p DynamicUser=yes \
    /usr/local/bin/proxy --config /check/origin.toml || fail "the origin did not start"

# Type=notify: `systemctl start` returns once READY=1 came (else it times out, 90 s).
systemctl start proxy || fail "systemctl start proxy"
[ "$(systemctl show -p ActiveState,SubState --value proxy | paste -sd/)" = active/running ] ||
    fail "not active (running)"
in_journal 'notification message.*READY=1' || fail "no READY=1 in the journal"
ok "systemctl start: active (running) through READY=1 ($(journal | grep -m1 -o 'Got notification message.*READY=1.*'))"
systemctl status --no-pager proxy | sed -n '1,4p' | sed 's/^/   /'
# systemd sets the closest a limit can be: without CAP_SYS_RESOURCE (some container hosts) the
# hard limit it inherited, not LimitNOFILE=1048576.
pid=$(systemctl show -p MainPID --value proxy)
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
# DynamicUser= takes a static user of the same name where one exists (Debian's base-passwd has
# `proxy`, uid 13, squid's): the unit names a user no distribution ships.
[ "$uid" -ge 61184 ] && [ "$uid" -le 65519 ] ||
    fail "the main process runs as uid $uid ($(getent passwd "$uid" | cut -d: -f1)), not a dynamic user"
ok "a dynamic user: $(systemctl show -p User --value proxy) (uid $uid)"
printf '   main process: uid %s, open files %s, locked memory %s\n' "$uid" \
    "$(awk '/^Max open files/ {print $5}' "/proc/$pid/limits")" \
    "$(awk '/^Max locked memory/ {print $5}' "/proc/$pid/limits")"

body=$(get /x)
[ "$body" = "origin saw /x" ] || fail "GET /x: $body"
ok "GET /x answered by the origin through the proxy"
curl -sS --max-time 2 http://127.0.0.1:9901/healthz | grep -qi ok ||
    [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:9901/healthz)" = 200 ] || fail "/healthz"
ok "/healthz 200 on the admin listener"

# A changed config: `systemctl reload` (the check, then SIGHUP or systemd's own signal).
cat >>/etc/proxy/proxy.toml <<'EOF'

[[route]]
path = "/reloaded"
return = { status = 200, body = "reloaded\n" }

[[route]]
path = "/"
upstream = "app"
EOF
systemctl reload proxy || fail "systemctl reload proxy (a good config)"
body=$(get /reloaded)
if [ "$body" = reloaded ]; then
    ok "systemctl reload: the new route answers as soon as systemctl returns"
else
    until_holds 'get /reloaded' '^reloaded$' || fail "the reloaded config never answered (/reloaded: $body)"
    ok "systemctl reload: the new route answers (after systemctl returned: the reload is asynchronous)"
fi
in_journal 'notification message.*RELOADING=1' || fail "no RELOADING=1 in the journal"
ok "journal: $(journal | grep -m1 -o 'Got notification message.*RELOADING=1.*')"
until_holds "journal | grep -c 'notification message.*READY=1'" '^[2-9]' || fail "no READY=1 after the reload"
ok "journal: READY=1 again after the reload"
# The order says whether `systemctl reload` waited for the proxy: under Type=notify-reload
# "Reloaded" follows READY=1; under Type=notify it follows the kill, before or after the proxy.
journal | grep -E 'Reloading proxy|Reloaded proxy|notification message.*(RELOADING|READY)=1' |
    sed -n '2,5p' | sed -e 's/^/   order: /' -e 's/MONOTONIC_USEC=[0-9]*/MONOTONIC_USEC=.../'
curl -sS http://127.0.0.1:9901/metrics | grep -E '^proxy_config_(generation|last_reload_successful) ' | sed 's/^/   /'

# A broken config: the reload fails visibly, the running config stays.
cp /etc/proxy/proxy.toml /tmp/good.toml
printf '[[listen]]\naddr = 5\n' >/etc/proxy/proxy.toml
if systemctl reload proxy 2>/dev/null; then
    fail "systemctl reload succeeded on a broken config"
fi
[ "$(systemctl is-active proxy)" = active ] || fail "the broken reload stopped the proxy"
[ "$(get /reloaded)" = reloaded ] || fail "the running config was lost on a broken reload"
ok "a broken config: systemctl reload fails, the proxy keeps serving its config"
journal | grep -m1 'addr' | sed 's/^/   journal: /'
cp /tmp/good.toml /etc/proxy/proxy.toml

# The access log in LogsDirectory= (/var/log/proxy -> /var/log/private/proxy under DynamicUser).
until_holds 'cat /var/log/proxy/access.log' '"GET /x HTTP/1.1" 200' || fail "no GET /x in /var/log/proxy/access.log"
ok "access log: $(ls -l /var/log/proxy/access.log | awk '{print $1, $3, $NF}')"
# logrotate renames, then SIGUSR1 reopens the path: the next line goes to a new file.
logrotate -f /etc/logrotate.d/proxy || fail "logrotate"
[ -e /var/log/proxy/access.log.1 ] || fail "logrotate did not rotate"
get /after-rotate >/dev/null
until_holds 'cat /var/log/proxy/access.log' 'GET /after-rotate' || fail "no line in the reopened access log"
grep -q 'GET /after-rotate' /var/log/proxy/access.log.1 && fail "a line after the rotation went to the old file"
ok "logrotate + SIGUSR1: the next line is in a new access.log ($(ls /var/log/proxy | paste -sd' '))"

systemctl stop proxy || fail "systemctl stop proxy"
result=$(systemctl show -p Result --value proxy)
status=$(systemctl show -p ExecMainStatus --value proxy)
[ "$result" = success ] && [ "$status" = 0 ] || fail "stop: Result=$result ExecMainStatus=$status"
in_journal 'notification message.*STOPPING=1' || fail "no STOPPING=1 in the journal"
ok "systemctl stop: STOPPING=1, exit 0, Result=success"
