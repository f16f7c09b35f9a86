#!/usr/bin/env bash
# Round trip of an MCP search call to `sessiondb mcp` on realistic logs.
#
#   tools/bench/bench_mcp.sh [--size NxM (default 10000x20)] [--runs R (default 9)] [--seed S] [--work DIR] [--keep]
#
#   1. tools/bench/make_realistic_logs.py writes N conversations of M messages on average;
#   2. `sessiondb import` reads them into a fresh database (timed, once);
#   3. tools/bench/bench_search.py pick chooses one query per class by its frequency;
#   4. tools/bench/bench_mcp.py starts one `sessiondb mcp` server on the logs root, as a client
#      does, and times R round trips per query of `search_conversations` (write the request
#      line, read the answer line; the store caught up with the logs root before each answer),
#      a ping, `list_conversations` (mostly that catch-up), and a search right after a line
#      was appended to a transcript (read in, then found).
# Generated data lives under --work (default /tmp/sessiondb-mcp-bench) and is deleted at the
# end unless --keep. Needs $GPTME_PYTHON (default .venv/bin/python) with gptme 0.35.1.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SIZE="10000x20"
RUNS=9
SEED=1
WORK=/tmp/sessiondb-mcp-bench
KEEP=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --size) SIZE="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --seed) SEED="$2"; shift 2 ;;
        --work) WORK="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "bench_mcp.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
PY="${GPTME_PYTHON:-$ROOT/.venv/bin/python}"
export TZ=UTC

echo "== cargo build --release" >&2
(cd "$ROOT" && cargo build --release)
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/sessiondb"
mkdir -p "$WORK"
[[ $KEEP == 1 ]] || trap 'rm -rf "$WORK"' EXIT

N="${SIZE%x*}"; M="${SIZE#*x}"
LOGS="$WORK/logs-$SIZE"; DB="$WORK/db-$SIZE.sqlite"
if [[ ! -f "$WORK/gen-$SIZE.json" ]]; then
    echo "== $SIZE: generating" >&2
    "$PY" "$ROOT/tools/bench/make_realistic_logs.py" "$LOGS" --conversations "$N" --messages "$M" --seed "$SEED" --force > "$WORK/gen-$SIZE.json"
fi
rm -f "$DB" "$DB-wal" "$DB-shm"
echo "== $SIZE: importing" >&2
t0=$(date +%s.%N)
"$BIN" --db "$DB" import "$LOGS" > /dev/null
IMPORT_S=$(echo "$(date +%s.%N) - $t0" | bc)
echo "== $SIZE: choosing queries" >&2
"$PY" "$ROOT/tools/bench/bench_search.py" pick "$LOGS" > "$WORK/queries-$SIZE.json"
echo "== $SIZE: round trips, $RUNS each" >&2
"$PY" "$ROOT/tools/bench/bench_mcp.py" "$WORK/queries-$SIZE.json" --sdb "$BIN" --db "$DB" --logs "$LOGS" --runs "$RUNS" > "$WORK/mcp-$SIZE.json"
"$PY" - "$WORK" "$SIZE" "$IMPORT_S" "$DB" <<'PYEOF'
import json, os, sys
work, size, import_s, db = sys.argv[1:5]
gen = json.load(open(f"{work}/gen-{size}.json"))
q = json.load(open(f"{work}/queries-{size}.json"))
r = json.load(open(f"{work}/mcp-{size}.json"))
print(f"\n### {size}: {gen['conversations']:,} conversations, {gen['messages']:,} messages, {gen['bytes'] / 1e6:.0f} MB of logs; "
      f"import {float(import_s):.1f} s, database {os.path.getsize(db) / 1e6:.0f} MB\n")
print("| call | query | messages holding it | round trip, median | p90 | conversations found | answer (chars) |")
print("|---|---|---|---|---|---|---|")
print(f"| ping | | | {r['ping']['median']:.2f} ms | {r['ping']['p90']:.2f} ms | | |")
print(f"| list_conversations (limit 1) | | | {r['list']['median']:.1f} ms | {r['list']['p90']:.1f} ms | | |")
for cls, v in r["search"].items():
    print(f"| search_conversations, {cls} | `{v['query']}` | {q[cls]['messages']:,} | {v['median']:.1f} ms | {v['p90']:.1f} ms | {v['found']} | {v['chars']:,} |")
a = r["after_append"]
print(f"| search_conversations right after an append | (the appended word) | 1 | {a['median']:.1f} ms | {a['p90']:.1f} ms | 1 | |")
print(f"\n(first call, catching the fresh store up with the logs root: {r['first_call_ms']:.0f} ms)")
PYEOF
