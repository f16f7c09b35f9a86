#!/usr/bin/env bash
# The scale of one conversation (issue 13, items 10 and 11): peak memory and time of every
# per-conversation command on one large conversation holding a file over SQLite's value limit.
#
#   tools/bench/bench_big_conversation.sh [--messages N] [--file-bytes B] [--bin PATH] [--keep]
#
# Defaults: 1,000,000 messages of about 1 KiB (a conversation.jsonl of about 1 GiB) and an
# attachment of 1,073,741,824 bytes in files/ (over SQLite's limit of 1,000,000,000 bytes for
# one value: before blobs were chunked, it made the conversation unimportable). Uses the
# release build (built first) unless --bin names another binary.
#
# Steps: generate the conversation (user and assistant messages in turn, as gptme writes them,
# with an event log whose next event is not a checkpoint); `import` it into a fresh database;
# run `read -n 10`, `show`, `stats CHAT`, `doctor`, `export --format html` and `--format
# markdown` (output to /dev/null), `undo`, and `export --to DIR`; check the exported
# attachment and transcript byte for byte against the originals (cmp). For each command it
# prints the peak resident memory (ru_maxrss, from /usr/bin/time) and the wall-clock time.
# Needs about 10 GB of free disk under $TMPDIR; the work directory is removed unless --keep.
set -euo pipefail
export LC_ALL=C TZ=UTC

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MESSAGES=1000000
FILE_BYTES=1073741824
BIN=""
KEEP=0

while [[ $# -gt 0 ]]; do
    case "$1" in
        --messages) MESSAGES="${2:?--messages needs a value}"; shift 2 ;;
        --file-bytes) FILE_BYTES="${2:?--file-bytes needs a value}"; shift 2 ;;
        --bin) BIN="${2:?--bin needs a value}"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done

if [[ -z "$BIN" ]]; then
    (cd "$ROOT" && cargo build --release --quiet)
    BIN="$ROOT/target/release/sessiondb"
fi
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (GNU time)" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sessiondb-big.XXXXXX")"
if [[ $KEEP -eq 0 ]]; then trap 'rm -rf "$WORK"' EXIT; else echo "work directory: $WORK"; fi
LOGS="$WORK/logs"
CHAT="big-conversation"
DB="$WORK/sessions.db"
mkdir -p "$LOGS/$CHAT/files"

python3 "$ROOT/tools/bench/make_long_conversation.py" "$LOGS/$CHAT" "$MESSAGES"
head -c "$FILE_BYTES" /dev/urandom > "$LOGS/$CHAT/files/large-attachment.bin"
cp "$LOGS/$CHAT/conversation.jsonl" "$WORK/conversation-before-undo.jsonl"
printf 'conversation: %s messages, %s bytes; attachment: %s bytes\n' "$MESSAGES" \
    "$(stat -c %s "$LOGS/$CHAT/conversation.jsonl")" "$(stat -c %s "$LOGS/$CHAT/files/large-attachment.bin")"

printf '%-34s %14s %10s\n' command "peak RSS MiB" seconds
measure() {
    local label="$1"; shift
    /usr/bin/time -f '%M %e' -o "$WORK/time.txt" "$BIN" --db "$DB" "$@" > /dev/null 2> "$WORK/stderr.txt" || {
        echo "$label failed:" >&2; cat "$WORK/stderr.txt" >&2; exit 1
    }
    read -r kib seconds < "$WORK/time.txt"
    printf '%-34s %14d %10.2f\n' "$label" $((kib / 1024)) "$seconds"
}

measure "import" import "$LOGS"
measure "read -n 10" read "$CHAT" -n 10
measure "show" show "$CHAT"
measure "stats CHAT" stats "$CHAT"
measure "doctor" doctor
measure "export --format html" export --format html "$CHAT"
measure "export --format markdown" export --format markdown "$CHAT"
measure "undo" undo "$CHAT"
measure "export --to DIR" export --to "$WORK/out" "$CHAT"

cmp "$LOGS/$CHAT/files/large-attachment.bin" "$WORK/out/$CHAT/files/large-attachment.bin"
cmp "$WORK/conversation-before-undo.jsonl" "$WORK/out/$CHAT/branches/main-undo-0.jsonl"
cmp "$LOGS/$CHAT/conversation.jsonl" "$WORK/out/$CHAT/conversation.jsonl"
echo "round trip: the attachment, the undo's backup and the transcript are byte for byte the same"
