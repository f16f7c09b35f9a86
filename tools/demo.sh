#!/usr/bin/env bash
# The main job on the bundled sample logs: imports tests/fixtures/gptme-logs into a fresh
# database, prints the import summary, then lists the conversations.
# Usage: tools/demo.sh [LOGS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
logs="${1:-tests/fixtures/gptme-logs}"
db="$(mktemp -d)/sessions.db"
echo "building sessiondb (release; a few minutes the first time)..." >&2
cargo build --release --quiet
target/release/sessiondb --db "$db" import "$logs"
target/release/sessiondb --db "$db" list --all -n 0
cat <<EOF

database: $db
Keep using it: target/release/sessiondb --db $db search QUERY (or read, stats, ...),
or export SESSIONDB_DB=$db. For your own history: cargo install --path . && sessiondb import
EOF
