#!/usr/bin/env bash
# differential.sh: ~200 malformed and borderline requests (request lines, versions, line
# endings, Host, fields, body framing, smuggling shapes, pipelining, garbage) sent through
# nginx and through our proxy, each in front of the same capturing origin (scripts/
# differential.py). Prints, for each request where they differ, the statuses the client got
# and what the origin received from each (the request line, the fields but the ones each
# proxy writes itself, the body), then "N requests, M differ". Not a test: each difference
# is judged by RFC 9110/9112 and pinned by a test (tests/tests/proxy/differential.rs).
#
#   scripts/differential.sh                  # builds the proxy (debug) first
#   PROXY_BIN=target/release/proxy NO_BUILD=1 scripts/differential.sh
#
# Needs nginx (scripts/install-peers.sh installs it) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
PROXY_BIN=${PROXY_BIN:-target/debug/proxy}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$NGINX" ] || { echo "differential.sh: nginx is not installed (scripts/install-peers.sh)" >&2; exit 2; }
if [ -z "${NO_BUILD:-}" ]; then
    cargo build -q -p proxy
fi
exec python3 scripts/differential.py "$PROXY_BIN" "$NGINX"
