#!/usr/bin/env bash
# Benchmark one append to a conversation of growing size: sessiondb against gptme's LogManager.
#
#   tools/bench/bench_append.sh [--sizes "10 1000 10000"] [--repeats R] [--process-runs P] [--events] [--gptme-sync] [--keep]
#
# Defaults: sizes 10, 1000 and 10000 messages; R=30 timed appends for gptme and for the
# sessiondb library; P=10 runs of the `sessiondb append` process.
#
# For each size N:
#   1. a conversation of N messages (~500 bytes of content each) written by gptme itself
#      (tools/bench/bench_gptme_append.py --generate: Log(messages).write_jsonl, i.e. one
#      Message.to_dict() JSON line per message); with --events also the events.jsonl gptme
#      would have left (latest checkpoint + the events since), else no event log
#   2. copied (cp -a) for gptme, and for sessiondb, which imports its copy into a fresh
#      database (`sessiondb --db DB import LOGS`)
#   3. gptme: LogManager.load once, then R calls of LogManager.append, each timed in-process
#      (tools/bench/bench_gptme_append.py); with --gptme-sync also, on a third copy, R calls of
#      append + write(sync=True), gptme's durable write (what sessiondb's append gives)
#   4. sessiondb library: Store::open once, then R calls of ops::with_session(..append..), each
#      timed in-process (examples/bench_append.rs): every call is a committed store row plus the
#      lines appended (and fsynced) to conversation.jsonl and events.jsonl
#   5. sessiondb process: P runs of `sessiondb --db DB append CHAT_ID --role user --content ...`,
#      wall clock of each whole process (bash $EPOCHREALTIME around it)
# and then a table of medians and the ratios gptme / sessiondb. Medians leave out the
# checkpoint every 50th event writes (a snapshot of the whole conversation, in both programs);
# the max columns show them. The work directory is removed at the end unless --keep.
#
# gptme's Python: $GPTME_PYTHON if set, else .venv/bin/python in the project root.
set -euo pipefail
export LC_ALL=C TZ=UTC

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SIZES="10 1000 10000"
REPEATS=30
PROCESS_RUNS=10
EVENTS=0
GPTME_SYNC=0
KEEP=0

usage() {
    sed -n '2,4p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes) SIZES="${2:?--sizes needs a value}"; shift 2 ;;
        --sizes=*) SIZES="${1#*=}"; shift ;;
        --repeats) REPEATS="${2:?--repeats needs a value}"; shift 2 ;;
        --repeats=*) REPEATS="${1#*=}"; shift ;;
        --process-runs) PROCESS_RUNS="${2:?--process-runs needs a value}"; shift 2 ;;
        --process-runs=*) PROCESS_RUNS="${1#*=}"; shift ;;
        --events) EVENTS=1; shift ;;
        --gptme-sync) GPTME_SYNC=1; shift ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bench_append.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
for v in $SIZES "$REPEATS" "$PROCESS_RUNS"; do
    [[ "$v" =~ ^[0-9]+$ && "$v" -ge 1 ]] || { echo "bench_append.sh: not a positive number: $v" >&2; exit 2; }
done

# ---------------------------------------------------------------- python with gptme
# $GPTME_PYTHON, else the project's .venv (tools/oracle/setup-gptme.sh creates it when missing).
PY="${GPTME_PYTHON:-$("$ROOT/tools/oracle/setup-gptme.sh")}"
if ! GPTME_VERSION="$("$PY" -c 'import importlib.metadata as m, gptme.logmanager; print(m.version("gptme"))' 2>/dev/null)"; then
    echo "$(basename "$0"): $PY cannot import gptme (set GPTME_PYTHON, or run tools/oracle/setup-gptme.sh)" >&2
    exit 2
fi

# ---------------------------------------------------------------- build
echo "== cargo build --release --bin sessiondb --example bench_append" >&2
(cd "$ROOT" && cargo build --release --bin sessiondb --example bench_append)
BIN="$ROOT/target/release/sessiondb"
LIB_BENCH="$ROOT/target/release/examples/bench_append"
for f in "$BIN" "$LIB_BENCH"; do
    [[ -x "$f" ]] || { echo "bench_append.sh: $f missing after build" >&2; exit 1; }
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sessiondb-bench-append.XXXXXX")"
if [[ "$KEEP" == 1 ]]; then
    trap 'echo "work directory kept: $WORK" >&2' EXIT
else
    trap 'rm -rf "$WORK"' EXIT
fi

json_field() { # json_field FILE KEY
    "$PY" -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v) if isinstance(v,(list,dict)) else v)' "$1" "$2"
}
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
maximum() { printf '%s\n' "$@" | sort -g | tail -n1; }
ratio() { awk -v g="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.2fx", g / s; else print "n/a" }'; }
fail() { # fail WHAT COMMAND OUT ERR
    echo "bench_append.sh: $1 failed" >&2
    echo "--- command: $2" >&2
    echo "--- stdout:" >&2; head -n 20 "$3" >&2 || true
    echo "--- stderr:" >&2; head -n 50 "$4" >&2 || true
    exit 1
}

declare -A GP_MED GP_MAX GP_CP LIB_MED LIB_MAX LIB_CP PROC_MED PROC_MAX GS_MED GS_MAX CONV_MB EV_MB

for N in $SIZES; do
    CHAT="bench-append-$N"
    D="$WORK/n$N"
    mkdir -p "$D/gen/logs" "$D/gptme" "$D/sdb" "$D/gptme-sync"
    echo "== N=$N: generating with gptme" >&2
    GEN_ARGS=(--generate "$N")
    [[ "$EVENTS" == 1 ]] && GEN_ARGS+=(--events)
    "$PY" "$ROOT/tools/bench/bench_gptme_append.py" "${GEN_ARGS[@]}" "$D/gen/logs" "$CHAT" > "$D/gen.json"
    CONV_MB[$N]=$(awk -v b="$(json_field "$D/gen.json" conversation_bytes)" 'BEGIN { printf "%.2f", b / 1e6 }')
    EV_MB[$N]=$(awk -v b="$(json_field "$D/gen.json" events_bytes)" 'BEGIN { printf "%.2f", b / 1e6 }')
    cp -a "$D/gen/logs" "$D/gptme/logs"
    cp -a "$D/gen/logs" "$D/sdb/logs"
    [[ "$GPTME_SYNC" == 1 ]] && cp -a "$D/gen/logs" "$D/gptme-sync/logs"

    # ---- sessiondb import into a fresh database
    DB="$D/sdb/sessions.db"
    cmd=("$BIN" --db "$DB" import "$D/sdb/logs" --json)
    "${cmd[@]}" > "$D/import.json" 2> "$D/import.err" || fail "sessiondb import (N=$N)" "${cmd[*]}" "$D/import.json" "$D/import.err"
    [[ "$(json_field "$D/import.json" failed)" == 0 && "$(json_field "$D/import.json" messages)" == "$N" ]] \
        || fail "sessiondb import (N=$N): failed conversations or wrong message count" "${cmd[*]}" "$D/import.json" "$D/import.err"

    # ---- gptme
    cmd=("$PY" "$ROOT/tools/bench/bench_gptme_append.py" "$D/gptme/logs" "$CHAT" "$REPEATS")
    "${cmd[@]}" > "$D/gptme.json" 2> "$D/gptme.err" || fail "gptme append (N=$N)" "${cmd[*]}" "$D/gptme.json" "$D/gptme.err"
    GP_MED[$N]=$(json_field "$D/gptme.json" median_ms)
    GP_MAX[$N]=$(json_field "$D/gptme.json" max_ms)
    GP_CP[$N]=$(json_field "$D/gptme.json" checkpoint_samples)
    if [[ "$GPTME_SYNC" == 1 ]]; then
        cmd=("$PY" "$ROOT/tools/bench/bench_gptme_append.py" --sync "$D/gptme-sync/logs" "$CHAT" "$REPEATS")
        "${cmd[@]}" > "$D/gptme-sync.json" 2> "$D/gptme-sync.err" || fail "gptme append+sync (N=$N)" "${cmd[*]}" "$D/gptme-sync.json" "$D/gptme-sync.err"
        GS_MED[$N]=$(json_field "$D/gptme-sync.json" median_ms)
        GS_MAX[$N]=$(json_field "$D/gptme-sync.json" max_ms)
    fi

    # ---- sessiondb library
    cmd=("$LIB_BENCH" "$DB" "$CHAT" "$REPEATS")
    "${cmd[@]}" > "$D/lib.json" 2> "$D/lib.err" || fail "sessiondb library append (N=$N)" "${cmd[*]}" "$D/lib.json" "$D/lib.err"
    LIB_MED[$N]=$(json_field "$D/lib.json" median_ms)
    LIB_MAX[$N]=$(json_field "$D/lib.json" max_ms)
    LIB_CP[$N]=$(json_field "$D/lib.json" checkpoint_samples)

    # ---- sessiondb process
    times=()
    for ((i = 0; i < PROCESS_RUNS; i++)); do
        cmd=("$BIN" --db "$DB" append "$CHAT" --role user --content "benchmark process message $i"
             --timestamp "2026-07-16T11:00:$(printf '%02d' $((i % 60)))" --json)
        t0=$EPOCHREALTIME
        "${cmd[@]}" > "$D/proc$i.json" 2> "$D/proc$i.err" || fail "sessiondb append process (N=$N, run $i)" "${cmd[*]}" "$D/proc$i.json" "$D/proc$i.err"
        t1=$EPOCHREALTIME
        times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) * 1000 }')")
    done
    PROC_MED[$N]=$(median "${times[@]}")
    PROC_MAX[$N]=$(maximum "${times[@]}")
    expected=$((N + REPEATS + PROCESS_RUNS))
    lines=$(wc -l < "$D/sdb/logs/$CHAT/conversation.jsonl")
    [[ "$lines" == "$expected" ]] || { echo "bench_append.sh: N=$N: sessiondb's conversation.jsonl has $lines lines, expected $expected" >&2; exit 1; }
    echo "   gptme median ${GP_MED[$N]} ms, sessiondb lib ${LIB_MED[$N]} ms, process ${PROC_MED[$N]} ms" >&2
done

# ---------------------------------------------------------------- table
echo
echo "one append: sessiondb vs gptme $GPTME_VERSION LogManager.append ($(nproc) CPUs, $(df -T "$WORK" | awk 'NR==2 { print $2 }') in $WORK)"
echo "gptme and sessiondb lib: median of $REPEATS appends timed in-process; process: median wall clock of $PROCESS_RUNS 'sessiondb append' runs"
if [[ "$EVENTS" == 1 ]]; then
    echo "conversations start with the events.jsonl gptme would have left (latest checkpoint + events since)"
else
    echo "conversations start with conversation.jsonl only (no events.jsonl: the first append starts it at seq 1)"
fi
echo
printf '%8s | %11s | %11s | %11s | %11s | %11s' "size" "gptme ms" "sdb lib ms" "sdb proc ms" "gptme/lib" "gptme/proc"
[[ "$GPTME_SYNC" == 1 ]] && printf ' | %13s | %14s' "gptme+sync ms" "gptme+sync/lib"
echo
for N in $SIZES; do
    printf '%8s | %11s | %11s | %11s | %11s | %11s' "$N" "${GP_MED[$N]}" "${LIB_MED[$N]}" "${PROC_MED[$N]}" \
        "$(ratio "${GP_MED[$N]}" "${LIB_MED[$N]}")" "$(ratio "${GP_MED[$N]}" "${PROC_MED[$N]}")"
    [[ "$GPTME_SYNC" == 1 ]] && printf ' | %13s | %14s' "${GS_MED[$N]}" "$(ratio "${GS_MED[$N]}" "${LIB_MED[$N]}")"
    echo
done
echo
echo "max (includes checkpoints; sample indexes that wrote one in brackets), conversation.jsonl / events.jsonl MB at start:"
for N in $SIZES; do
    line="$(printf '%8s   gptme %s ms %s   sdb lib %s ms %s   sdb proc %s ms' "$N" "${GP_MAX[$N]}" "${GP_CP[$N]}" "${LIB_MAX[$N]}" "${LIB_CP[$N]}" "${PROC_MAX[$N]}")"
    [[ "$GPTME_SYNC" == 1 ]] && line+="   gptme+sync ${GS_MAX[$N]} ms"
    echo "$line   (${CONV_MB[$N]} / ${EV_MB[$N]} MB)"
done

# ---------------------------------------------------------------- the issue's two checks
first="" last=""
for N in $SIZES; do [[ -z "$first" ]] && first=$N; last=$N; done
beats=""
for N in $SIZES; do
    awk -v l="${LIB_MED[$N]}" -v g="${GP_MED[$N]}" 'BEGIN { exit !(l < g) }' || beats+=" N=$N: ${LIB_MED[$N]} vs ${GP_MED[$N]} ms;"
done
beats="${beats:+no:$beats}"; beats="${beats:-yes}"
echo
echo "sessiondb lib median, largest / smallest size: $(ratio "${LIB_MED[$last]}" "${LIB_MED[$first]}") (flat is ~1x)"
echo "sessiondb process median, largest / smallest size: $(ratio "${PROC_MED[$last]}" "${PROC_MED[$first]}")"
echo "sessiondb lib median below gptme's at every size: $beats"
