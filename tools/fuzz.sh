#!/usr/bin/env bash
# Fuzzes every parser for SECONDS each (default 60), with corpora seeded from the fixture logs
# (every line of every JSONL file, every config.toml, every chat id). A crash stops the run with
# the failing input saved under fuzz/artifacts/<target>/; turn it into a regression test.
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`); the stable toolchain is used with
# RUSTC_BOOTSTRAP=1 for the sanitizer flags. Usage: tools/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(message_line event_line conv_checkpoint_line json config_toml chat_id snippet stored_text secrets)
export RUSTC_BOOTSTRAP=1

seed() { # seed TARGET FILE... : one corpus file per line of the given files
    local dir="fuzz/corpus/$1"; shift
    mkdir -p "$dir"
    python3 - "$dir" "$@" <<'PY'
import hashlib, sys, pathlib
out = pathlib.Path(sys.argv[1])
for name in sys.argv[2:]:
    for line in pathlib.Path(name).read_bytes().split(b"\n"):
        (out / hashlib.sha1(line).hexdigest()).write_bytes(line)
PY
}
fixtures=tests/fixtures/gptme-logs
mapfile -t transcripts < <(find "$fixtures" -name '*.jsonl' ! -name 'events.jsonl' ! -name 'conv-checkpoints.jsonl')
mapfile -t events < <(find "$fixtures" -name 'events.jsonl')
mapfile -t bookmarks < <(find "$fixtures" -name 'conv-checkpoints.jsonl')
seed message_line "${transcripts[@]}"
seed json "${transcripts[@]}" "${events[@]}"
seed event_line "${events[@]}"
seed conv_checkpoint_line "${bookmarks[@]}"
mkdir -p fuzz/corpus/config_toml fuzz/corpus/chat_id
find "$fixtures" -name config.toml -exec sh -c 'cp "$1" "fuzz/corpus/config_toml/$(sha1sum "$1" | cut -c1-40)"' _ {} \;
for d in "$fixtures"/*/; do n="$(basename "$d")"; printf '%s' "$n" > "fuzz/corpus/chat_id/$(printf '%s' "$n" | sha1sum | cut -c1-40)"; done
# snippet: context and matches bytes, a query, NUL, a content whose folding changes lengths.
# secrets: a text with a planted key of several families (random-looking, never a real key)
mkdir -p fuzz/corpus/secrets
printf 'export AWS_ACCESS_KEY_ID=AKIAQ7X2M4K9P1L8R3T6\ntoken ghp_aB3xY7zQ9wE2rT5uI8oP1lK4jH6gF0dS3a5B\npostgres://app:Zq8rT2vLp9@db/x\nSECRET_KEY = "k3J9sLq2Xv8Zt4Wp7Yr1"\n' > fuzz/corpus/secrets/planted
mkdir -p fuzz/corpus/snippet
printf '\001\001k\000\304\260\304\260\342\204\252 k\nline two K' > fuzz/corpus/snippet/folding
printf '\000\002"hello world" OR foo*\000the Hello\nworld of foo\tbar' > fuzz/corpus/snippet/syntax
# stored_text: a plain text, and zstd frames without and with dictionary 7 (the fuzz target's)
# when the zstd command is there.
mkdir -p fuzz/corpus/stored_text
printf '\000You are gptme, ünïcödé 日本語 🚀' > fuzz/corpus/stored_text/plain
if command -v zstd >/dev/null 2>&1; then
    tmp="$(mktemp -d)"
    printf 'Ran command: ```shell\nls\n```\n%.0s' $(seq 20) > "$tmp/text"
    printf 'You are gptme, a general-purpose AI assistant powered by LLMs. Ran command: ```shell\n%.0s' $(seq 8) > "$tmp/dict"
    { printf '\001'; zstd -q -c --check "$tmp/text"; } > fuzz/corpus/stored_text/zstd
    { printf '\002\007\000\000\000'; zstd -q -c --check -D "$tmp/dict" "$tmp/text"; } > fuzz/corpus/stored_text/dictionary
    rm -rf "$tmp"
fi

for target in "${targets[@]}"; do
    echo "== fuzzing $target for ${seconds}s"
    (cd fuzz && cargo fuzz run -O "$target" -- -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 2>&1) \
        | grep -E 'stat::number_of_executed_units|stat::peak_rss|Done|ERROR|panicked|SUMMARY|crash-' || true
    if ls "fuzz/artifacts/$target"/crash-* >/dev/null 2>&1; then
        echo "fuzz: $target found a crash: $(ls fuzz/artifacts/$target/crash-*)" >&2
        exit 1
    fi
done
