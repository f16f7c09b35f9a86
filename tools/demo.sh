#!/usr/bin/env bash
# The main job on the bundled sample logs: imports tests/fixtures/gptme-logs into a fresh
# database, prints the import summary, then lists the conversations. The binary is where cargo
# puts it (CARGO_TARGET_DIR and the like are cargo's to read: it is asked, never assumed).
# Usage: tools/demo.sh [--debug] [LOGS_DIR]   (--debug: a debug build, quicker to make)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=(--release)
if [ "${1:-}" = "--debug" ]; then
    profile=()
    shift
fi
logs="${1:-tests/fixtures/gptme-logs}"
db="$(mktemp -d)/sessions.db"
echo "building sessiondb (${profile[0]:---debug}; a few minutes the first time)..." >&2
# The executable cargo built, from its own report of the build.
bin="$(cargo build "${profile[@]}" --quiet --bin sessiondb --message-format=json |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])')"
if [ ! -x "$bin" ]; then
    echo "tools/demo.sh: cargo built no sessiondb executable" >&2
    exit 1
fi
"$bin" --db "$db" import "$logs"
"$bin" --db "$db" list --all -n 0
cat <<EOT

database: $db
Keep using it: $bin --db $db search QUERY (or read, stats, ...),
or export SESSIONDB_DB=$db. For your own history: cargo install --locked --path . && sessiondb import
EOT
