#!/usr/bin/env bash
# Benchmark `sessiondb sync`: incremental sync against full re-import, and watch-mode lag.
#
#   tools/bench/bench_sync.sh [--conversations N] [--messages M] [--changed K] [--runs R]
#
# Defaults: 1000 conversations x 100 messages, 10 of them changed by gptme, 5 runs. Builds the
# release binary, reuses (or generates) the synthetic logs root cached as target/bench-logs-N-M
# by tools/bench/bench_import.sh and tools/bench/bench_queries.sh, then runs tools/bench/bench_sync.py on a copy.
# gptme's Python: $GPTME_PYTHON if set, else the project's .venv (tools/oracle/setup-gptme.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CONVS=1000 MSGS=100 CHANGED=10 RUNS=5
while [[ $# -gt 0 ]]; do
    case "$1" in
        --conversations) CONVS="$2"; shift 2 ;;
        --messages) MSGS="$2"; shift 2 ;;
        --changed) CHANGED="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        *) sed -n '2,4p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
PY="${GPTME_PYTHON:-$("$ROOT/tools/oracle/setup-gptme.sh")}"
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
LOGS="$ROOT/target/bench-logs-$CONVS-$MSGS"
if [[ ! -d "$LOGS" || ! -f "$LOGS.complete" ]]; then
    rm -rf "$LOGS"
    TMP="$(mktemp -d "$ROOT/target/bench-logs-tmp.XXXXXX")"
    echo "generating $CONVS x $MSGS (cached as $LOGS)" >&2
    "$PY" "$ROOT/tools/bench/make_bench_logs.py" "$TMP/logs" --conversations "$CONVS" --messages "$MSGS" --seed 1 >&2
    mv "$TMP/logs" "$LOGS"
    rmdir "$TMP"
    touch "$LOGS.complete"
fi
"$PY" "$ROOT/tools/bench/bench_sync.py" "$ROOT/target/release/sessiondb" "$LOGS" --changed "$CHANGED" --runs "$RUNS"
