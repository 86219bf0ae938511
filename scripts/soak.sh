#!/usr/bin/env bash
# soak.sh (not in CI): 10 minutes of mixed load through the proxy (keep-alive, a connection
# per request, pipelined, 64 KiB uploads, TLS, WebSocket) with the origin killed and
# restarted every few seconds and a reload (SIGHUP) every minute; the proxy's descriptors,
# resident memory and CPU per request sampled each minute. PASS when the last sample's
# anonymous resident memory (RssAnon: VmRSS without the binary's own pages, which are faulted
# in as code paths first run) is within 5% of the first's (after a warm-up reload before the
# load), the descriptors at rest after the
# load equal those before it (under load a sample is a snapshot of the connections open),
# every request is accounted for (sent = answered + counted failures, per kind) and the proxy
# is still running.
#
#   scripts/soak.sh                                  # 10 min, release build
#   DURATION=120 RATE=10 PROFILE=debug scripts/soak.sh   # a short run
#
# Environment: DURATION (s, 600), RATE (requests/s per loader, 50), FAULT_EVERY (s, 5),
# SAMPLE_EVERY (s, 60), RELOAD_EVERY (s, 60), PROFILE (release), NO_BUILD=1. Needs python3 and openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${PROFILE:-release}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
if [ -z "${NO_BUILD:-}" ]; then
    if [ "$PROFILE" = release ]; then
        cargo build -q --release -p proxy -p loader
    else
        cargo build -q -p proxy -p loader
    fi
fi
exec python3 scripts/soak.py "$TARGET_DIR/$PROFILE/proxy" "$TARGET_DIR/$PROFILE/loader"
