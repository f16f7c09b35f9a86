#!/usr/bin/env bash
# Search benchmark on realistic logs: sessiondb against gptme's `chats search`, per query class.
#
#   tools/bench/bench_search.sh [--sizes "1000x100 10000x50 50000x20"] [--runs R (default 3)] [--seed S] [--work DIR] [--keep] [--reuse]
#
# For each size NxM (default 1000x100, about 5 minutes here; 10000x50 and 50000x20 take
# correspondingly longer and about 0.9 and 1.8 GB under --work):
#   1. tools/bench/make_realistic_logs.py writes N conversations of M messages on average
#      (gptme's system prompt, tool calls and outputs, text from this machine's sources);
#   2. `sessiondb import` reads them into a fresh database (timed, once);
#   3. tools/bench/bench_search.py pick chooses one query per class by its frequency in the
#      corpus (rare / mid-frequency / very common word, phrase, prefix, literal code fragment,
#      CJK, emoji) and the table prints each with the number of messages holding it;
#   4. bench_search.py time runs, R times alternating, the whole processes
#      `sessiondb --db DB search -n 20 QUERY` (the text), the same with `--json` (what tools
#      and agents read) and gptme's `gptme-util chats search QUERY -n 20`
#      (gptme's CLI, a fresh interpreter each time, on a hard-linked copy of the logs, since
#      gptme may add files to them), output to /dev/null; medians and their ratio;
#   5. benches/search.rs times the same queries in-process (open the store, search, snippets;
#      median of R).
# gptme's search reads only its 200 most recent conversations (10 x -n); sessiondb searches all.
# Generated data lives under --work (default /tmp/sessiondb-search-bench) and is deleted at
# the end unless --keep. With --reuse, a size whose logs and database are already under --work
# (from a run with --keep, same seed, same build) is neither generated nor imported again (its
# import time then reads "reused"). Needs $GPTME_PYTHON (default .venv/bin/python) with gptme 0.35.1.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SIZES="1000x100"
RUNS=3
SEED=1
WORK=/tmp/sessiondb-search-bench
KEEP=0
REUSE=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes) SIZES="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --seed) SEED="$2"; shift 2 ;;
        --work) WORK="$2"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --reuse) REUSE=1; KEEP=1; shift ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "bench_search.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
PY="${GPTME_PYTHON:-$ROOT/.venv/bin/python}"
export TZ=UTC

echo "== cargo build --release" >&2
(cd "$ROOT" && cargo build --release && cargo bench --bench search --no-run)
BIN="$ROOT/target/release/sessiondb"
mkdir -p "$WORK"
[[ $KEEP == 1 ]] || trap 'rm -rf "$WORK"' EXIT

TABLES=""
for size in $SIZES; do
    N="${size%x*}"; M="${size#*x}"
    LOGS="$WORK/logs-$N-$M"; DB="$WORK/db-$N-$M.sqlite"; COPY="$WORK/gptme-logs-$N-$M"
    if [[ $REUSE == 1 && -f "$DB" && -f "$WORK/gen-$size.json" ]]; then
        echo "== $size: reusing $LOGS and $DB" >&2
        IMPORT_S=reused
    else
        echo "== $size: generating" >&2
        "$PY" "$ROOT/tools/bench/make_realistic_logs.py" "$LOGS" --conversations "$N" --messages "$M" --seed "$SEED" --force > "$WORK/gen-$size.json"
        rm -rf "$DB" "$DB-wal" "$DB-shm" "$DB.ranking"
        echo "== $size: importing" >&2
        t0=$(date +%s.%N)
        "$BIN" --db "$DB" import "$LOGS" > /dev/null
        IMPORT_S=$(echo "$(date +%s.%N) - $t0" | bc)
    fi
    rm -rf "$COPY"; cp -al "$LOGS" "$COPY"
    echo "== $size: choosing queries" >&2
    "$PY" "$ROOT/tools/bench/bench_search.py" pick "$LOGS" > "$WORK/queries-$size.json"
    echo "== $size: whole processes, $RUNS rounds each, alternating" >&2
    "$PY" "$ROOT/tools/bench/bench_search.py" time "$WORK/queries-$size.json" --sdb "$BIN" --db "$DB" --gptme-logs "$COPY" --runs "$RUNS" > "$WORK/process-$size.json"
    echo "== $size: in-process" >&2
    # In-process at the default page (20); a class with a page of its own is measured as a whole process only.
    mapfile -t QUERIES < <("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); [print(v["query"]) for v in d.values() if isinstance(v, dict) and "limit" not in v]' "$WORK/queries-$size.json")
    (cd "$ROOT" && cargo bench --quiet --bench search -- "$DB" "${QUERIES[@]}" --runs "$RUNS") > "$WORK/inprocess-$size.json"
    TABLES+=$("$PY" - "$WORK" "$size" "$IMPORT_S" "$DB" <<'EOF'
import json, os, sys
work, size, import_s, db = sys.argv[1:5]
gen = json.load(open(f"{work}/gen-{size}.json"))
q = json.load(open(f"{work}/queries-{size}.json"))
p = json.load(open(f"{work}/process-{size}.json"))
i = json.load(open(f"{work}/inprocess-{size}.json"))
print(f"\n### {size}: {gen['conversations']} conversations, {gen['messages']} messages, {gen['bytes'] / 1e6:.0f} MB of logs; "
      f"import {import_s if import_s == 'reused' else f'{float(import_s):.1f} s'}, database {os.path.getsize(db) / 1e6:.0f} MB, "
      f"ranking index {sum(e.stat().st_size for e in os.scandir(db + '.ranking')) / 1e6:.0f} MB\n")
print("| class | query | messages holding it | sessiondb process (CPU) | `--json` process (CPU) | gptme process (CPU) | ratio wall (CPU) | ratio `--json` wall | sessiondb in-process | found |")
print("|---|---|---|---|---|---|---|---|---|---|")
for cls, v in p.items():
    inp = i.get(v["query"]) if "limit" not in q[cls] else None
    how = ("literal" if inp["literal"] else "words") if inp else f"words, `-n {v['limit']}`"
    in_process, found = (f"{inp['median'] * 1000:.2f} ms", inp["found"]) if inp else ("—", "—")
    print(f"| {cls} | `{v['query']}` ({how}) | {q[cls]['messages']:,} of {q['messages']:,} "
          f"| {v['sessiondb_median'] * 1000:.1f} ms ({v['sessiondb_cpu'] * 1000:.0f} ms) | {v['sessiondb_json_median'] * 1000:.1f} ms ({v['sessiondb_json_cpu'] * 1000:.0f} ms) "
          f"| {v['gptme_median']:.2f} s ({v['gptme_cpu']:.2f} s) "
          f"| {v['gptme_median'] / v['sessiondb_median']:.0f}x ({v['gptme_cpu'] / max(v['sessiondb_cpu'], 1e-3):.0f}x) | {v['gptme_median'] / v['sessiondb_json_median']:.0f}x "
          f"| {in_process} | {found} |")
EOF
)
done
echo "$TABLES"
echo
echo "(medians of $RUNS: wall time, and in brackets CPU time user+system; whole processes alternate sessiondb and gptme; 'found' is conversations shown, at most 20)"
