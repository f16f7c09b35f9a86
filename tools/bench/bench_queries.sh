#!/usr/bin/env bash
# Benchmark sessiondb's list / search / stats against gptme itself on the same logs.
#
#   tools/bench/bench_queries.sh [--sizes "1000x100 10000x50"] [--runs R] [--gptme-runs G] [--common WORD] [--rare WORD]
#
# Defaults: sizes "1000x100 10000x50" (conversations x messages), R=5, G=3,
# common word "database", rare word "undo".
#
# For each size NxM:
#   1. a synthetic logs root from tools/bench/make_bench_logs.py (seed 1), cached as
#      target/bench-logs-N-M exactly as tools/bench/bench_import.sh caches it (an existing
#      cache with its target/bench-logs-N-M.complete marker is reused)
#   2. one warm-up read of every file (the OS page cache is not dropped: that needs root)
#   3. `sessiondb --db FRESH.db import LOGS --json`, timed once (wall clock)
#   4. best of R runs, wall clock of the whole process (bash $EPOCHREALTIME, output to a file), of
#        sessiondb list --json --all          every conversation with costs/tokens
#        sessiondb list --json --all -n 20    the newest 20, like `gptme-util chats list`
#        sessiondb search WORD --json -n 20   for the common and the rare word
#        sessiondb stats --json               (if this sessiondb has no `stats`, `list --json --all`
#                                              is timed in its place and the table says so)
#   5. benches/queries.rs (`cargo bench --bench queries`): the same questions asked of the library
#      in-process, best of R, each run opening the database afresh (timed like gptme's calls)
#   6. tools/bench/bench_gptme_queries.py on a copy of the logs root (gptme's listing creates
#      workspace/ dirs in conversations without config.toml): best of G runs, timed in-process
#      after import, of get_conversations(detail=True), get_conversations(detail=False),
#      list_conversations(20), search_chats(WORD, 20) and conversation_stats(as_json=True)
#   7. a table on stdout: operation | gptme s | sessiondb process s | ratio | sessiondb in-process s |
#      ratio (ratios are gptme / sessiondb);
#      progress goes to stderr
# Then one line per sessiondb list command comparing its time at the smallest and largest size.
#
# Words: make_bench_logs.py draws prose from a ~130-word list, so "database" is in about half of
# all messages (every conversation). "undo" is in no word list: it only occurs as the user
# command "/undo" (4% of user messages are a slash command, one of five), about 0.4% of
# messages and a third of the conversations. For both words gptme's case-insensitive substring
# match and sessiondb's FTS5 token match find the same user/assistant messages.
#
# gptme's Python: $GPTME_PYTHON if set, else .venv/bin/python in the project root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SIZES="1000x100 10000x50"
RUNS=5
GP_RUNS=3
COMMON="database"
RARE="undo"
SEED=1
LIMIT=20

usage() {
    sed -n '2,4p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}
die() { echo "bench_queries.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes) SIZES="${2:?--sizes needs a value}"; shift 2 ;;
        --sizes=*) SIZES="${1#*=}"; shift ;;
        --runs) RUNS="${2:?--runs needs a value}"; shift 2 ;;
        --runs=*) RUNS="${1#*=}"; shift ;;
        --gptme-runs) GP_RUNS="${2:?--gptme-runs needs a value}"; shift 2 ;;
        --gptme-runs=*) GP_RUNS="${1#*=}"; shift ;;
        --common) COMMON="${2:?--common needs a value}"; shift 2 ;;
        --common=*) COMMON="${1#*=}"; shift ;;
        --rare) RARE="${2:?--rare needs a value}"; shift 2 ;;
        --rare=*) RARE="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bench_queries.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
for v in "$RUNS" "$GP_RUNS"; do
    [[ "$v" =~ ^[0-9]+$ && "$v" -ge 1 ]] || die "--runs / --gptme-runs must be a number >= 1: $v"
done
read -r -a SIZE_LIST <<< "$SIZES"
[[ ${#SIZE_LIST[@]} -ge 1 ]] || die "--sizes is empty"
for s in "${SIZE_LIST[@]}"; do
    [[ "$s" =~ ^[0-9]+x[0-9]+$ ]] || die "size must look like 1000x100: $s"
done
[[ -n "${COMMON// }" && -n "${RARE// }" ]] || die "search words must not be empty"

# ---------------------------------------------------------------- python with gptme
# $GPTME_PYTHON, else the project's .venv (tools/oracle/setup-gptme.sh creates it when missing).
PY="${GPTME_PYTHON:-$("$ROOT/tools/oracle/setup-gptme.sh")}"
if ! GPTME_VERSION="$("$PY" -c 'import importlib.metadata as m, gptme.logmanager; print(m.version("gptme"))' 2>/dev/null)"; then
    echo "$(basename "$0"): $PY cannot import gptme (set GPTME_PYTHON, or run tools/oracle/setup-gptme.sh)" >&2
    exit 2
fi

# ---------------------------------------------------------------- helpers
# $EPOCHREALTIME is a bash builtin (no fork), so it adds nothing to millisecond timings
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }
best() { printf '%s\n' "$@" | sort -g | head -n1; }
ratio() { # gptme / sessiondb
    awk -v g="$1" -v s="$2" 'BEGIN {
        if (g !~ /^[0-9.]+$/ || s !~ /^[0-9.]+$/ || s <= 0) { print "n/a"; exit }
        r = g / s
        if (r >= 100) printf "%.0fx", r; else if (r >= 10) printf "%.1fx", r; else printf "%.2fx", r
    }'
}
fmt_s() { # seconds with 4 significant-ish digits
    awk -v x="$1" 'BEGIN { if (x !~ /^[0-9.]+$/) { print x; exit }
        if (x >= 10) printf "%.2f", x; else if (x >= 1) printf "%.3f", x; else printf "%.4f", x }'
}
pyq() { # pyq FILE EXPR   (EXPR sees the parsed JSON as `d`)
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1], encoding="utf-8")); print(eval(sys.argv[2]))' "$1" "$2"
}

export TZ=UTC

# ---------------------------------------------------------------- build
echo "== cargo build --release" >&2
(cd "$ROOT" && cargo build --release && cargo bench --bench queries --no-run)
BIN="$ROOT/target/release/sessiondb"
[[ -x "$BIN" ]] || { echo "bench_queries.sh: $BIN missing after build" >&2; exit 1; }

if "$BIN" stats --help > /dev/null 2>&1; then
    STATS_ARGS=(stats --json)
    STATS_NOTE=""
else
    STATS_ARGS=(list --json --all)
    STATS_NOTE="this sessiondb has no \`stats\` subcommand: its stats row times \`list --json --all\` in its place"
    echo "== $STATS_NOTE" >&2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sessiondb-bench-queries.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
FAILURES=()

# time_sdb KEY ARGS...: best of RUNS of `sessiondb --db $DB ARGS`; sets SDB[KEY] (seconds or FAILED)
# and leaves the last run's stdout in $WORK/KEY.out
declare -A SDB
time_sdb() {
    local key="$1"; shift
    local times=() i t0 t1 rc
    for ((i = 1; i <= RUNS; i++)); do
        t0=$(now)
        set +e
        "$BIN" --db "$DB" "$@" > "$WORK/$key.out" 2> "$WORK/$key.err"
        rc=$?
        set -e
        t1=$(now)
        if [[ $rc -ne 0 ]]; then
            {
                echo "bench_queries.sh: sessiondb failed (exit $rc)"
                echo "--- command: $BIN --db $DB $*"
                echo "--- stderr (first 30 lines):"; head -n 30 "$WORK/$key.err"
            } >&2
            FAILURES+=("$SIZE: exit $rc from: $BIN --db $DB $* :: $(head -n 3 "$WORK/$key.err" | tr '\n' ' ')")
            SDB[$key]="FAILED"
            return 0
        fi
        times+=("$(elapsed "$t0" "$t1")")
    done
    SDB[$key]="$(best "${times[@]}")"
    echo "   sessiondb $*: best $(fmt_s "${SDB[$key]}") s (runs: ${times[*]})" >&2
}

declare -A LIST_ALL_AT LIST_20_AT GP_LIST_AT LIB_20_AT

for SIZE in "${SIZE_LIST[@]}"; do
    CONVS="${SIZE%x*}"
    MSGS="${SIZE#*x}"
    echo "== size $CONVS x $MSGS" >&2

    # ------------------------------------------------------------ logs root (bench_import.sh's cache)
    LOGS="$ROOT/target/bench-logs-$CONVS-$MSGS"
    MARKER="$LOGS.complete"
    if [[ -d "$LOGS" && -f "$MARKER" ]]; then
        GEN_NOTE="reused cached $LOGS"
        echo "   reusing $LOGS" >&2
    else
        rm -rf "$LOGS" "$MARKER"
        mkdir -p "$ROOT/target"
        GEN_TMP="$(mktemp -d "$ROOT/target/bench-logs-tmp.XXXXXX")"
        echo "   generating $CONVS x $MSGS into $GEN_TMP (cached afterwards as $LOGS)" >&2
        t0=$(now)
        "$PY" "$ROOT/tools/bench/make_bench_logs.py" "$GEN_TMP/logs" --conversations "$CONVS" --messages "$MSGS" --seed "$SEED" >&2
        t1=$(now)
        mv "$GEN_TMP/logs" "$LOGS"
        rmdir "$GEN_TMP"
        touch "$MARKER"
        GEN_NOTE="generated in $(fmt_s "$(elapsed "$t0" "$t1")") s, cached as $LOGS"
    fi
    LOGS_MB=$(du -sb "$LOGS" | awk '{ printf "%.0f", $1 / 1e6 }')

    echo "   warm-up: reading every file once (page cache is not dropped)" >&2
    find "$LOGS" -type f -exec cat {} + > /dev/null

    # ------------------------------------------------------------ sessiondb import
    DB="$WORK/bench-$CONVS-$MSGS.db"
    rm -f "$DB" "$DB-wal" "$DB-shm" "$DB-journal"
    IMPORT_CMD="$BIN --db $DB import $LOGS --json"
    t0=$(now)
    set +e
    "$BIN" --db "$DB" import "$LOGS" --json > "$WORK/import.json" 2> "$WORK/import.err"
    rc=$?
    set -e
    t1=$(now)
    failed=$(pyq "$WORK/import.json" 'd["failed"]' 2>/dev/null || echo "?")
    if [[ $rc -ne 0 || "$failed" != 0 ]]; then
        {
            echo "bench_queries.sh: sessiondb import failed (exit $rc, failed=$failed)"
            echo "--- command: $IMPORT_CMD"
            echo "--- stdout:"; cat "$WORK/import.json"
            echo "--- stderr (first 50 lines):"; head -n 50 "$WORK/import.err"
        } >&2
        exit 1
    fi
    IMPORT_S=$(elapsed "$t0" "$t1")
    IMPORT_INTERNAL=$(pyq "$WORK/import.json" 'd["seconds"]')
    SDB_MESSAGES=$(pyq "$WORK/import.json" 'd["messages"]')
    DB_MB=$(du -cb "$DB"* | tail -n1 | awk '{ printf "%.0f", $1 / 1e6 }')
    echo "   sessiondb import: $(fmt_s "$IMPORT_S") s, $SDB_MESSAGES messages, db $DB_MB MB" >&2

    # ------------------------------------------------------------ sessiondb queries
    SDB=()
    time_sdb list_all list --json --all
    time_sdb list_20 list --json --all -n "$LIMIT"
    time_sdb search_common search "$COMMON" --json -n "$LIMIT"
    time_sdb search_rare search "$RARE" --json -n "$LIMIT"
    time_sdb stats "${STATS_ARGS[@]}"

    # ------------------------------------------------------------ sessiondb in-process
    INJ="$WORK/inprocess-$CONVS-$MSGS.json"
    if ! (cd "$ROOT" && cargo bench --quiet --bench queries -- "$DB" "$COMMON" "$RARE" --runs "$RUNS" --limit "$LIMIT") > "$INJ" 2> "$WORK/inprocess.err"; then
        echo "bench_queries.sh: benches/queries.rs failed:" >&2
        tail -n 30 "$WORK/inprocess.err" >&2
        exit 1
    fi
    inproc() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"][sys.argv[2]])' "$INJ" "$1"; }
    IN_LIST=$(inproc list_detail)
    IN_LIST_20=$(inproc list_default)
    IN_SEARCH_COMMON=$(inproc "search:$COMMON")
    IN_SEARCH_RARE=$(inproc "search:$RARE")
    IN_STATS=$(inproc stats)
    echo "   sessiondb in-process: list $IN_LIST s, newest $LIMIT $IN_LIST_20 s, search $IN_SEARCH_COMMON / $IN_SEARCH_RARE s, stats $IN_STATS s" >&2

    # ------------------------------------------------------------ gptme, on a copy
    COPY="$WORK/gptme-logs-$CONVS-$MSGS"
    echo "   copying the logs root for gptme to $COPY" >&2
    cp -a "$LOGS" "$COPY"
    echo "   gptme: best of $GP_RUNS (this takes a while at 10,000 conversations)" >&2
    GPJ="$WORK/gptme-$CONVS-$MSGS.json"
    if ! "$PY" "$ROOT/tools/bench/bench_gptme_queries.py" "$COPY" "$COMMON" "$RARE" --runs "$GP_RUNS" --limit "$LIMIT" > "$GPJ" 2> "$WORK/gptme.err"; then
        echo "bench_queries.sh: tools/bench/bench_gptme_queries.py failed:" >&2
        tail -n 30 "$WORK/gptme.err" >&2
        exit 1
    fi
    rm -rf "$COPY"
    GP_LIST_DETAIL=$(pyq "$GPJ" 'd["seconds"]["list_detail"]')
    GP_LIST_NODETAIL=$(pyq "$GPJ" 'd["seconds"]["list_nodetail"]')
    GP_LIST_DEFAULT=$(pyq "$GPJ" 'd["seconds"]["list_default"]')
    GP_SEARCH_COMMON=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"]["search:" + sys.argv[2]])' "$GPJ" "$COMMON")
    GP_SEARCH_RARE=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"]["search:" + sys.argv[2]])' "$GPJ" "$RARE")
    GP_STATS=$(pyq "$GPJ" 'd["seconds"]["stats"]')

    LIST_ALL_AT[$SIZE]="${SDB[list_all]}"
    LIST_20_AT[$SIZE]="${SDB[list_20]}"
    GP_LIST_AT[$SIZE]="$GP_LIST_DETAIL"
    LIB_20_AT[$SIZE]="$IN_LIST_20"

    # ------------------------------------------------------------ result checks
    GP_CONVS=$(pyq "$GPJ" 'd["checks"]["conversations"]')
    GP_MESSAGES=$(pyq "$GPJ" 'd["checks"]["messages"]')
    GP_COST=$(pyq "$GPJ" '"%.2f" % d["checks"]["total_cost"]')
    GP_SCANNED=$(pyq "$GPJ" 'd["checks"]["search_conversations_scanned"]')
    gp_matched() { "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))["checks"]; print("%d matched, %d shown" % (c["search_matched"][sys.argv[2]], c["search_shown"][sys.argv[2]]))' "$GPJ" "$1"; }
    GP_MATCH_COMMON=$(gp_matched "$COMMON")
    GP_MATCH_RARE=$(gp_matched "$RARE")
    if [[ "${SDB[list_all]}" != FAILED ]]; then
        SDB_CONVS=$(pyq "$WORK/list_all.out" 'len(d)')
        SDB_COST=$(pyq "$WORK/list_all.out" '"%.2f" % sum(c.get("total_cost") or 0 for c in d)')
    else
        SDB_CONVS="FAILED"; SDB_COST="FAILED"
    fi
    if [[ "${SDB[list_20]}" != FAILED ]]; then
        SAME20=$("$PY" -c 'import json,sys
s=[c["id"] for c in json.load(open(sys.argv[1]))]
g=json.load(open(sys.argv[2]))["checks"]["list_default_ids"]
print("same ids, same order" if s == g else ("same ids, other order" if sorted(s) == sorted(g) else "DIFFERENT ids"))' "$WORK/list_20.out" "$GPJ")
    else
        SAME20="FAILED"
    fi
    GP_STATS_SUM=$(pyq "$GPJ" '"%s conversations, %s messages, $%s" % (d["checks"].get("stats_total_conversations"), d["checks"].get("stats_total_messages"), d["checks"].get("stats_total_cost"))')
    if [[ -n "$STATS_NOTE" ]]; then
        SDB_STATS_SUM="n/a (no stats subcommand)"
    elif [[ "${SDB[stats]}" == FAILED ]]; then
        SDB_STATS_SUM="FAILED"
    else
        SDB_STATS_SUM=$(pyq "$WORK/stats.out" '"%s conversations, %s messages, $%s" % (d.get("total_conversations"), d.get("total_messages"), d.get("total_cost"))' 2>/dev/null || echo "unparsed output")
    fi
    sdb_found() { [[ "${SDB[$1]}" == FAILED ]] && { echo FAILED; return; }; pyq "$WORK/$1.out" 'len(d["results"]) if isinstance(d, dict) else len(d)'; }
    SDB_FOUND_COMMON=$(sdb_found search_common)
    SDB_FOUND_RARE=$(sdb_found search_rare)

    # ------------------------------------------------------------ table
    {
        echo
        echo "== $CONVS conversations x $MSGS messages ($SDB_MESSAGES messages, $LOGS_MB MB of logs; $GEN_NOTE)"
        echo "sessiondb import: $(fmt_s "$IMPORT_S") s wall clock (its own count: $IMPORT_INTERNAL s), database $DB_MB MB"
        echo "gptme $GPTME_VERSION: best of $GP_RUNS, in-process after import; sessiondb: best of $RUNS, as a whole process (the CLI," \
             "JSON written out) and in-process (benches/queries.rs, the library, database opened afresh each run)"
        printf '%-46s | %10s | %10s | %8s | %10s | %8s | %s\n' "operation" "gptme s" "sdb proc s" "ratio" "sdb lib s" "ratio" "gptme call / sessiondb command"
        printf '%s\n' "-----------------------------------------------+------------+------------+----------+------------+----------+-------------------------------"
        row() { printf '%-46s | %10s | %10s | %8s | %10s | %8s | %s\n' "$1" "$(fmt_s "$2")" "$(fmt_s "$3")" "$(ratio "$2" "$3")" "$(fmt_s "$4")" "$(ratio "$2" "$4")" "$5"; }
        row "list all, with costs" "$GP_LIST_DETAIL" "${SDB[list_all]}" "$IN_LIST" "get_conversations(detail=True) / list --json --all"
        row "list all, without costs" "$GP_LIST_NODETAIL" "${SDB[list_all]}" "$IN_LIST" "get_conversations(detail=False) / list --json --all (same run)"
        row "list newest $LIMIT (chats list default)" "$GP_LIST_DEFAULT" "${SDB[list_20]}" "$IN_LIST_20" "list_conversations($LIMIT) / list --json --all -n $LIMIT"
        row "search '$COMMON' -n $LIMIT (common)" "$GP_SEARCH_COMMON" "${SDB[search_common]}" "$IN_SEARCH_COMMON" "search_chats('$COMMON', $LIMIT) / search $COMMON --json -n $LIMIT"
        row "search '$RARE' -n $LIMIT (rare)" "$GP_SEARCH_RARE" "${SDB[search_rare]}" "$IN_SEARCH_RARE" "search_chats('$RARE', $LIMIT) / search $RARE --json -n $LIMIT"
        if [[ -n "$STATS_NOTE" ]]; then
            row "stats overview [sessiondb: list, see note]" "$GP_STATS" "${SDB[stats]}" "$IN_STATS" "conversation_stats(as_json=True) / ${STATS_ARGS[*]}"
        else
            row "stats overview" "$GP_STATS" "${SDB[stats]}" "$IN_STATS" "conversation_stats(as_json=True) / ${STATS_ARGS[*]}"
        fi
        [[ -z "$STATS_NOTE" ]] || echo "note: $STATS_NOTE"
        echo "checks: conversations gptme $GP_CONVS / sessiondb $SDB_CONVS; messages gptme $GP_MESSAGES / sessiondb $SDB_MESSAGES;" \
             "summed cost gptme \$$GP_COST / sessiondb \$$SDB_COST; newest $LIMIT: $SAME20"
        echo "stats totals: gptme $GP_STATS_SUM / sessiondb $SDB_STATS_SUM"
        echo "search: gptme scans only the $GP_SCANNED newest conversations (10 x -n), substring match: '$COMMON' $GP_MATCH_COMMON, '$RARE' $GP_MATCH_RARE;"
        echo "        sessiondb searches all $SDB_CONVS: '$COMMON' $SDB_FOUND_COMMON returned, '$RARE' $SDB_FOUND_RARE returned (at most $LIMIT)"
        if [[ "$CONVS" == 1000 ]]; then
            verdict() { awk -v g="$1" -v s="$2" 'BEGIN { if (s !~ /^[0-9.]+$/ || s <= 0) print "n/a"; else if (g / s >= 100) print "met"; else print "NOT met" }'; }
            for how in process library; do
                if [[ $how == process ]]; then L="${SDB[list_all]}"; C="${SDB[search_common]}"; R="${SDB[search_rare]}"
                else L="$IN_LIST"; C="$IN_SEARCH_COMMON"; R="$IN_SEARCH_RARE"; fi
                echo "target >= 100x at 1,000 conversations ($how): list with costs $(verdict "$GP_LIST_DETAIL" "$L")," \
                     "list without $(verdict "$GP_LIST_NODETAIL" "$L")," \
                     "search common $(verdict "$GP_SEARCH_COMMON" "$C"), search rare $(verdict "$GP_SEARCH_RARE" "$R")"
            done
        fi
    }
    rm -f "$DB" "$DB-wal" "$DB-shm" "$DB-journal"
done

# ---------------------------------------------------------------- scaling line
{
    if [[ ${#SIZE_LIST[@]} -ge 2 ]]; then
        A="${SIZE_LIST[0]}"; B="${SIZE_LIST[-1]}"
        scale() { awk -v a="$1" -v b="$2" 'BEGIN { if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || a <= 0) print "n/a"; else printf "%.2fx", b / a }'; }
        echo
        echo "scaling $A -> $B: sessiondb list --json --all $(fmt_s "${LIST_ALL_AT[$A]}") s -> $(fmt_s "${LIST_ALL_AT[$B]}") s ($(scale "${LIST_ALL_AT[$A]}" "${LIST_ALL_AT[$B]}"))," \
             "list --json --all -n $LIMIT $(fmt_s "${LIST_20_AT[$A]}") s -> $(fmt_s "${LIST_20_AT[$B]}") s ($(scale "${LIST_20_AT[$A]}" "${LIST_20_AT[$B]}"));" \
             "library newest $LIMIT $(fmt_s "${LIB_20_AT[$A]}") s -> $(fmt_s "${LIB_20_AT[$B]}") s ($(scale "${LIB_20_AT[$A]}" "${LIB_20_AT[$B]}"));" \
             "gptme get_conversations(detail=True) $(fmt_s "${GP_LIST_AT[$A]}") s -> $(fmt_s "${GP_LIST_AT[$B]}") s ($(scale "${GP_LIST_AT[$A]}" "${GP_LIST_AT[$B]}"))"
    fi
    if [[ ${#FAILURES[@]} -gt 0 ]]; then
        echo
        echo "sessiondb failures:"
        printf '  %s\n' "${FAILURES[@]}"
    fi
}
[[ ${#FAILURES[@]} -eq 0 ]]
