#!/usr/bin/env bash
# The test suite, as CI runs it: sets up gptme (pinned) for the interop tests, regenerates the
# fixtures with that real gptme into a temporary logs root, and runs every test against both
# the committed and the regenerated fixtures. Usage: tools/test.sh [extra nextest args]
set -euo pipefail
cd "$(dirname "$0")/.."
GPTME_PYTHON="$(tools/oracle/setup-gptme.sh)"
export GPTME_PYTHON
regen="$(mktemp -d)"
trap 'rm -rf "$regen"' EXIT
"$GPTME_PYTHON" tools/oracle/gen_fixtures.py "$regen/logs" >/dev/null
export SESSIONDB_REGENERATED_FIXTURES="$regen/logs"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --no-fail-fast "$@"
else
    cargo test --no-fail-fast "$@"
fi
