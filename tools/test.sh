#!/usr/bin/env bash
# The test suite, as CI runs it: sets up gptme (pinned) for the interop tests, regenerates the
# fixtures with that real gptme into a temporary logs root, starts a throwaway PostgreSQL server
# (tools/pg/server.sh; unless SESSIONDB_TEST_POSTGRES_URL names one already, or is `none`),
# and runs every test against both the committed and the regenerated fixtures, the store's
# tests on both engines. Usage: tools/test.sh [extra nextest args]
set -euo pipefail
cd "$(dirname "$0")/.."
GPTME_PYTHON="$(tools/oracle/setup-gptme.sh)"
export GPTME_PYTHON
regen="$(mktemp -d)"
pg=""
cleanup() {
    if [ -n "$pg" ]; then
        tools/pg/server.sh stop "$pg" || true
        rm -rf "$pg"
    fi
    rm -rf "$regen"
}
trap cleanup EXIT
if [ -z "${SESSIONDB_TEST_POSTGRES_URL:-}" ]; then
    pg="$(mktemp -d)"
    # A free loopback port: the kernel's pick for a socket bound to port 0.
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    SESSIONDB_TEST_POSTGRES_URL="$(tools/pg/server.sh start "$pg" "$port")"
    export SESSIONDB_TEST_POSTGRES_URL
fi
"$GPTME_PYTHON" tools/oracle/gen_fixtures.py "$regen/logs" >/dev/null
export SESSIONDB_REGENERATED_FIXTURES="$regen/logs"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --no-fail-fast "$@"
else
    cargo test --no-fail-fast "$@"
fi
