#!/usr/bin/env bash
# Creates .venv with the pinned gptme (the oracle of the interop tests) and its server extra
# (gptme-server, the oracle of tests/serve.rs) unless they are there already, and prints the
# path of its python. Usage: tools/oracle/setup-gptme.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
GPTME_VERSION="${GPTME_VERSION:-0.35.1}"
venv=.venv
if ! "$venv/bin/python" -c "import gptme, flask, sys; sys.exit(0 if gptme.__version__ == '$GPTME_VERSION' else 1)" 2>/dev/null; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "gptme[server]==$GPTME_VERSION" >&2
fi
echo "$PWD/$venv/bin/python"
