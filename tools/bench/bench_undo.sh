#!/usr/bin/env bash
# `undo` side by side with gptme's own (LogManager.undo), on conversations of several lengths:
# does its time stay flat as the conversation grows, and how does it compare with gptme?
#
#   tools/bench/bench_undo.sh [--sizes "N1 N2 ..."] [--rounds R] [--bin PATH]
#
# Defaults: sizes "10000 100000 1000000" messages of about 1 KiB (the largest a 1 GiB
# conversation.jsonl), 3 rounds. For each size: one conversation written as gptme writes it
# (user and assistant turns, an event log whose next events are not checkpoints), copied
# twice: one copy is imported into a fresh sessiondb database and undone with `sessiondb undo`,
# the other is undone by gptme 0.35.1 (`LogManager.load(dir).undo(quiet=True)` in a fresh
# python, as `gptme` does on `/undo`). The two alternate, R rounds, each a whole process; the
# medians are printed with their ratio, then both directories are compared: every file of
# gptme's copy equals sessiondb's byte for byte (the backups included) but for events.jsonl's
# timestamps. Uses the release build (built first) unless --bin names another binary, and the
# pinned gptme of tools/oracle/setup-gptme.sh. Needs about (R + 2) times the largest
# conversation twice over of free disk under $TMPDIR.
set -euo pipefail
export LC_ALL=C TZ=UTC

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SIZES="10000 100000 1000000"
ROUNDS=3
BIN=""

while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes) SIZES="${2:?--sizes needs a value}"; shift 2 ;;
        --rounds) ROUNDS="${2:?--rounds needs a value}"; shift 2 ;;
        --bin) BIN="${2:?--bin needs a value}"; shift 2 ;;
        -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done

if [[ -z "$BIN" ]]; then
    (cd "$ROOT" && cargo build --release --quiet)
    BIN="$ROOT/target/release/sessiondb"
fi
PY="$("$ROOT/tools/oracle/setup-gptme.sh")"
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (GNU time)" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sessiondb-undo.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
CHAT="long-conversation"

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf '%10s %12s %18s %18s %8s\n' messages "file MiB" "sessiondb s (MiB)" "gptme s (MiB)" "ratio"
for n in $SIZES; do
    rm -rf "$WORK/ours" "$WORK/theirs" "$WORK/db"
    mkdir -p "$WORK/ours/$CHAT" "$WORK/db"
    "$PY" "$ROOT/tools/bench/make_long_conversation.py" "$WORK/ours/$CHAT" "$n"
    cp -a "$WORK/ours" "$WORK/theirs"
    size_mib=$(( $(stat -c %s "$WORK/ours/$CHAT/conversation.jsonl") / 1048576 ))
    "$BIN" --db "$WORK/db/s.db" import "$WORK/ours" > /dev/null
    : > "$WORK/ours.txt"; : > "$WORK/theirs.txt"
    for _ in $(seq "$ROUNDS"); do
        /usr/bin/time -f '%e %M' -a -o "$WORK/ours.txt" "$BIN" --db "$WORK/db/s.db" undo "$CHAT" > /dev/null
        /usr/bin/time -f '%e %M' -a -o "$WORK/theirs.txt" "$PY" -c '
import sys
from gptme.logmanager import LogManager
LogManager.load(sys.argv[1], lock=True).undo(quiet=True)' "$WORK/theirs/$CHAT" > /dev/null
    done
    ours=$(cut -d' ' -f1 "$WORK/ours.txt" | median); ours_mib=$(( $(cut -d' ' -f2 "$WORK/ours.txt" | median | cut -d. -f1) / 1024 ))
    theirs=$(cut -d' ' -f1 "$WORK/theirs.txt" | median); theirs_mib=$(( $(cut -d' ' -f2 "$WORK/theirs.txt" | median | cut -d. -f1) / 1024 ))
    printf '%10d %12d %11.2f (%4d) %11.2f (%4d) %7.1fx\n' "$n" "$size_mib" "$ours" "$ours_mib" "$theirs" "$theirs_mib" \
        "$(awk -v a="$theirs" -v b="$ours" 'BEGIN {print (b > 0) ? a / b : 0}')"
    # Same result as gptme's: every transcript and backup equal, byte for byte.
    for f in conversation.jsonl $(cd "$WORK/theirs/$CHAT" && ls branches); do
        case "$f" in conversation.jsonl) rel="$f" ;; *) rel="branches/$f" ;; esac
        cmp -s "$WORK/ours/$CHAT/$rel" "$WORK/theirs/$CHAT/$rel" || { echo "size $n: $rel differs from gptme's" >&2; exit 1; }
    done
done
