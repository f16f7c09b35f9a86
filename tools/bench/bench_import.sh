#!/usr/bin/env bash
# Benchmark `sessiondb import` against gptme reading the same logs.
#
#   tools/bench/bench_import.sh [--conversations N] [--messages M] [--runs R] [--seed S] [--realistic] [--baseline BIN]
#
# Defaults: 1000 conversations x 100 messages (about 110 MB), 3 runs, seed 1. --realistic
# writes the logs with tools/bench/make_realistic_logs.py (gptme's system prompt, tool calls,
# Zipfian text from this machine's sources; 10000 x 50 is about 790 MB) instead of the
# 16-word salad of make_bench_logs.py. --baseline BIN also times another sessiondb build (an
# older commit's) on the same logs, in the same rounds.
#
# Steps:
#   1. cargo build --release
#   2. a synthetic logs root from tools/bench/make_bench_logs.py (written with gptme's
#      Message class), generated into a temp dir and then cached as
#      target/bench-logs-N-M (-sS for a seed other than 1); an existing cache is reused.
#   3. one warm-up read of every file in it (the OS page cache is not dropped:
#      that needs root), so both sides are timed with warm caches
#   4. R rounds, each: `sessiondb --db FRESH.db import LOGS --json` into a fresh database
#      (wall-clock time of the whole process; the baseline's too, with --baseline), then
#      tools/bench/bench_gptme_read.py (gptme's Log.read_jsonl on every conversation.jsonl;
#      time measured inside the process, after gptme is imported). Alternating keeps a noisy
#      machine's load from favouring one side.
#   5. a table with best and median of each, the ratio gptme / sessiondb, and the database's
#      size. Two times for sessiondb: until every conversation could be listed (the import's
#      `listable_seconds`: its rows are in; the search indexes are built after them) and the
#      whole process (all three search indexes built). A baseline without `listable_seconds`
#      (a build that indexed as it went) counts its whole process for both. Peak memory is
#      GNU time's maximum resident set size, when /usr/bin/time is there.
#
# gptme's Python: $GPTME_PYTHON if set, else .venv/bin/python in the project root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CONVS=1000
MSGS=100
RUNS=3
SEED=1
REALISTIC=0
BASELINE=""

usage() {
    sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --conversations) CONVS="${2:?--conversations needs a value}"; shift 2 ;;
        --conversations=*) CONVS="${1#*=}"; shift ;;
        --messages) MSGS="${2:?--messages needs a value}"; shift 2 ;;
        --messages=*) MSGS="${1#*=}"; shift ;;
        --runs) RUNS="${2:?--runs needs a value}"; shift 2 ;;
        --runs=*) RUNS="${1#*=}"; shift ;;
        --seed) SEED="${2:?--seed needs a value}"; shift 2 ;;
        --seed=*) SEED="${1#*=}"; shift ;;
        --realistic) REALISTIC=1; shift ;;
        --baseline) BASELINE="${2:?--baseline needs a value}"; shift 2 ;;
        --baseline=*) BASELINE="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bench_import.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
for v in "$CONVS" "$MSGS" "$RUNS" "$SEED"; do
    [[ "$v" =~ ^[0-9]+$ ]] || { echo "bench_import.sh: not a number: $v" >&2; exit 2; }
done
[[ "$RUNS" -ge 1 ]] || { echo "bench_import.sh: --runs must be >= 1" >&2; exit 2; }

# ---------------------------------------------------------------- python with gptme
# $GPTME_PYTHON, else the project's .venv (tools/oracle/setup-gptme.sh creates it when missing).
PY="${GPTME_PYTHON:-$("$ROOT/tools/oracle/setup-gptme.sh")}"
if ! GPTME_VERSION="$("$PY" -c 'import importlib.metadata as m, gptme.logmanager; print(m.version("gptme"))' 2>/dev/null)"; then
    echo "$(basename "$0"): $PY cannot import gptme (set GPTME_PYTHON, or run tools/oracle/setup-gptme.sh)" >&2
    exit 2
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b - a }'; }
# best and median of the numbers given as arguments
best() { printf '%s\n' "$@" | sort -g | head -n1; }
median() {
    local sorted n
    mapfile -t sorted < <(printf '%s\n' "$@" | sort -g)
    n=${#sorted[@]}
    if (( n % 2 )); then
        echo "${sorted[n/2]}"
    else
        awk -v a="${sorted[n/2-1]}" -v b="${sorted[n/2]}" 'BEGIN { printf "%.4f", (a + b) / 2 }'
    fi
}
json_field() { # json_field FILE KEY
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# ---------------------------------------------------------------- build
echo "== cargo build --release" >&2
(cd "$ROOT" && cargo build --release)
BIN="$ROOT/target/release/sessiondb"
[[ -x "$BIN" ]] || { echo "bench_import.sh: $BIN missing after build" >&2; exit 1; }

# ---------------------------------------------------------------- logs root
SUFFIX=""
[[ "$SEED" == 1 ]] || SUFFIX="-s$SEED"
KIND="logs"
GENERATOR="make_bench_logs.py"
if [[ "$REALISTIC" == 1 ]]; then
    KIND="realistic"
    GENERATOR="make_realistic_logs.py"
fi
LOGS="$ROOT/target/bench-$KIND-$CONVS-$MSGS$SUFFIX"
GEN_NOTE="reused cached $LOGS"
# the completion marker sits beside the logs root, not in it, so it does not show up as a stray entry
MARKER="$LOGS.complete"
if [[ -d "$LOGS" && -f "$MARKER" ]]; then
    echo "== reusing $LOGS" >&2
else
    rm -rf "$LOGS" "$MARKER"
    GEN_TMP="$(mktemp -d "$ROOT/target/bench-logs-tmp.XXXXXX")"
    echo "== generating $CONVS x $MSGS into $GEN_TMP" >&2
    t0=$(now)
    "$PY" "$ROOT/tools/bench/$GENERATOR" "$GEN_TMP/logs" --conversations "$CONVS" --messages "$MSGS" --seed "$SEED" >&2
    t1=$(now)
    mv "$GEN_TMP/logs" "$LOGS"
    rmdir "$GEN_TMP"
    touch "$MARKER"
    GEN_NOTE="generated in $(elapsed "$t0" "$t1") s"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sessiondb-bench.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

APPARENT_BYTES=$(du -sb "$LOGS" | cut -f1)
DISK_KB=$(du -sk "$LOGS" | cut -f1)
FILES=$(find "$LOGS" -type f | wc -l)

echo "== warm-up: reading every file once (page cache is not dropped)" >&2
find "$LOGS" -type f -exec cat {} + > /dev/null

# ---------------------------------------------------------------- rounds
# import_once NAME BIN RUN: one import into a fresh database; appends to NAME's times.
declare -A TIMES
declare -A LISTABLE
declare -A PEAK_MB
DB_MB=""
DB_BYTES=0
BASE_DB_MB=""
SDB_MSGS=""
import_once() {
    local name="$1" bin="$2" i="$3" db="$WORK/$1-$3.db" t0 t1 rc failed
    rm -rf "$db" "$db-wal" "$db-shm" "$db-journal" "$db.ranking"
    local timer=()
    [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -f %M -o "$WORK/$name$i.rss")
    t0=$(now)
    set +e
    "${timer[@]}" "$bin" --db "$db" import "$LOGS" --json > "$WORK/$name$i.json" 2> "$WORK/$name$i.err"
    rc=$?
    set -e
    t1=$(now)
    failed=$(json_field "$WORK/$name$i.json" failed 2>/dev/null || echo "?")
    if [[ $rc -ne 0 || "$failed" != 0 ]]; then
        echo "bench_import.sh: $name import failed (exit $rc, failed=$failed) on run $i" >&2
        echo "--- command: $bin --db $db import $LOGS --json" >&2
        echo "--- stdout:" >&2; cat "$WORK/$name$i.json" >&2
        echo "--- stderr (first 50 lines):" >&2; head -n 50 "$WORK/$name$i.err" >&2
        exit 1
    fi
    TIMES[$name]+="$(elapsed "$t0" "$t1") "
    local listable
    listable=$(json_field "$WORK/$name$i.json" listable_seconds 2>/dev/null || elapsed "$t0" "$t1")
    LISTABLE[$name]+="$listable "
    [[ -s "$WORK/$name$i.rss" ]] && PEAK_MB[$name]+="$(( $(tail -n1 "$WORK/$name$i.rss") / 1024 )) "
    local bytes
    bytes=$(du -cb "$db" "$db-wal" "$db.ranking" 2>/dev/null | tail -n1 | cut -f1)
    [[ "$name" == sessiondb ]] && { SDB_MSGS=$(json_field "$WORK/$name$i.json" messages); DB_MB=$((bytes / 1000000)); DB_BYTES=$bytes; }
    [[ "$name" == baseline ]] && BASE_DB_MB=$((bytes / 1000000))
    echo "   $name run $i: $(elapsed "$t0" "$t1") s (listable after $listable s), $(json_field "$WORK/$name$i.json" messages) messages, database and indexes $((bytes / 1000000)) MB" >&2
    rm -rf "$db" "$db-wal" "$db-shm" "$db-journal" "$db.ranking"
}

GP_TIMES=()
GP_MSGS=""
for ((i = 1; i <= RUNS; i++)); do
    import_once sessiondb "$BIN" "$i"
    [[ -n "$BASELINE" ]] && import_once baseline "$BASELINE" "$i"
    "$PY" "$ROOT/tools/bench/bench_gptme_read.py" "$LOGS" > "$WORK/gp$i.json"
    GP_TIMES+=("$(json_field "$WORK/gp$i.json" seconds)")
    GP_MSGS=$(json_field "$WORK/gp$i.json" messages)
    echo "   gptme read run $i: ${GP_TIMES[-1]} s, $GP_MSGS messages" >&2
done
read -r -a SDB_TIMES <<< "${TIMES[sessiondb]}"
read -r -a SDB_LISTABLE <<< "${LISTABLE[sessiondb]}"

# ---------------------------------------------------------------- table
SDB_BEST=$(best "${SDB_TIMES[@]}"); SDB_MED=$(median "${SDB_TIMES[@]}")
GP_BEST=$(best "${GP_TIMES[@]}");   GP_MED=$(median "${GP_TIMES[@]}")
ratio() { awk -v g="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.2fx", g / s; else print "n/a" }'; }

echo
echo "sessiondb import vs gptme read ($CONVS conversations x $MSGS messages, seed $SEED, gptme $GPTME_VERSION, $(nproc) CPUs)"
echo "logs root: $LOGS ($GEN_NOTE)"
echo "warm cache: every file was read once before timing; the OS page cache was not dropped"
echo "sessiondb: wall-clock of the whole process, fresh database each run (in $WORK), alternating with gptme"
echo "gptme:     Log.read_jsonl on each conversation.jsonl, timed in-process after import"
echo
printf '%-30s %14s %14s\n' "" "best" "median (of $RUNS)"
printf '%-30s %14s\n' "logs root size (MB, du -sb)" "$(awk -v b="$APPARENT_BYTES" 'BEGIN { printf "%.1f", b / 1e6 }')"
printf '%-30s %14s\n' "  on disk (MB, du -sk)" "$(awk -v k="$DISK_KB" 'BEGIN { printf "%.1f", k * 1024 / 1e6 }')"
printf '%-30s %14s\n' "files" "$FILES"
printf '%-30s %14s\n' "messages (sessiondb)" "$SDB_MSGS"
printf '%-30s %14s\n' "messages (gptme)" "$GP_MSGS"
SDB_LBEST=$(best "${SDB_LISTABLE[@]}"); SDB_LMED=$(median "${SDB_LISTABLE[@]}")
printf '%-30s %14s %14s\n' "sessiondb listable s" "$SDB_LBEST" "$SDB_LMED"
printf '%-30s %14s %14s\n' "sessiondb import s" "$SDB_BEST" "$SDB_MED"
printf '%-30s %14s %14s\n' "gptme read s" "$GP_BEST" "$GP_MED"
printf '%-30s %14s %14s\n' "ratio (gptme / listable)" "$(ratio "$GP_BEST" "$SDB_LBEST")" "$(ratio "$GP_MED" "$SDB_LMED")"
printf '%-30s %14s %14s\n' "ratio (gptme / import)" "$(ratio "$GP_BEST" "$SDB_BEST")" "$(ratio "$GP_MED" "$SDB_MED")"
printf '%-30s %14s\n' "database + indexes (MB)" "$DB_MB"
printf '%-30s %14s\n' "ratio (store / logs)" "$(awk -v d="$DB_BYTES" -v l="$APPARENT_BYTES" 'BEGIN { printf "%.2f", d / l }')"
[[ -n "${PEAK_MB[sessiondb]:-}" ]] && printf '%-30s %14s\n' "peak memory (MB), each run" "${PEAK_MB[sessiondb]}"
if [[ -n "$BASELINE" ]]; then
    read -r -a BASE_TIMES <<< "${TIMES[baseline]}"
    BASE_BEST=$(best "${BASE_TIMES[@]}"); BASE_MED=$(median "${BASE_TIMES[@]}")
    read -r -a BASE_LISTABLE <<< "${LISTABLE[baseline]}"
    printf '%-30s %14s %14s\n' "baseline listable s" "$(best "${BASE_LISTABLE[@]}")" "$(median "${BASE_LISTABLE[@]}")"
    printf '%-30s %14s %14s\n' "baseline import s" "$BASE_BEST" "$BASE_MED"
    [[ -n "${PEAK_MB[baseline]:-}" ]] && printf '%-30s %14s\n' "baseline peak memory (MB)" "${PEAK_MB[baseline]}"
    printf '%-30s %14s\n' "baseline database + indexes (MB)" "$BASE_DB_MB"
    printf '%-30s %14s %14s\n' "ratio (baseline / sessiondb)" "$(ratio "$BASE_BEST" "$SDB_BEST")" "$(ratio "$BASE_MED" "$SDB_MED")"
fi
if [[ "$SDB_MSGS" != "$GP_MSGS" ]]; then
    echo "WARNING: message counts differ (sessiondb $SDB_MSGS, gptme $GP_MSGS)"
fi
