#!/usr/bin/env python3
"""Write a large synthetic gptme logs root for benchmarking sessiondb.

    python tools/bench/make_bench_logs.py OUT_DIR --conversations N --messages M [--seed S] [--force]

Each conversation is ``OUT_DIR/<chat_id>/conversation.jsonl``: a system
message first, then user and assistant messages taking turns (M messages in
all).  Every line is ``json.dumps(Message(...).to_dict())`` built with gptme's
own ``Message`` class, the same thing gptme writes for each line.  Content is
varied, about 1 KB a message on average: prose, bullet lists, code fences,
tracebacks, some non-ASCII text (accents, CJK, Cyrillic, emoji outside the BMP).
Assistant messages carry metadata (model, cost, usage tokens, sometimes
timings).  About a third of the conversations get a ``config.toml`` with a
``[chat] name``, rendered with gptme's ``ChatConfig.to_dict()`` and ``tomlkit``
(``ChatConfig.save()`` is not used: it fsyncs and makes workspace symlinks).
No ``events.jsonl`` is written: gptme's event-log helpers lock and write per
event, which is too slow for a quick generator, and the benchmark is about
conversation.jsonl.

The output is deterministic for a given (N, M, seed): message timestamps are
derived from the seed (naive local times, as gptme writes them), and each
conversation.jsonl gets the last message's time as its mtime.  1,000 x 100
is about 110 MB.  Needs a Python with gptme installed (tested with 0.35.1).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import tomlkit
from gptme.config.chat import ChatConfig
from gptme.message import Message

# ---------------------------------------------------------------- vocabulary
WORDS = (
    "the a an of to and in that is for it with as on be this by are from or at "
    "function value file list error test build run config module parser index "
    "database query table column row schema migration cache buffer stream thread "
    "process request response server client handler session token message branch "
    "commit merge rebase patch diff release version import export reader writer "
    "should could would might maybe probably actually simply instead because "
    "however therefore first then next finally also again still already "
    "check update change add remove rename return call create open close read "
    "write parse format compile deploy measure verify handle retry skip ignore "
    "quickly carefully correctly safely directly locally explicitly lazily "
    "large small empty missing broken stale fresh async blocking atomic durable"
).split()
UNICODE_WORDS = [
    "naïve", "café", "résumé", "Größe", "Übergang", "façade", "smörgåsbord",
    "日本語", "中文文本", "한국어", "данные", "файл", "ελληνικά", "עברית", "العربية",
    "→", "≤", "≥", "…", "“quoted”", "—", "€", "°C", "µs", "✓", "✅", "🚀", "🐍",
    "🦀", "📦", "🔥", "👍🏽", "∑", "λ", "π≈3.14159",
]
MODELS = [
    "anthropic/claude-sonnet-4-20250514",
    "anthropic/claude-3-5-haiku-20241022",
    "openai/gpt-4o",
    "openai/gpt-4o-mini",
    "openrouter/deepseek/deepseek-chat",
    "openrouter/google/gemini-2.5-flash",
]
PRICES = {  # (input, output) USD per token
    MODELS[0]: (3e-06, 15e-06),
    MODELS[1]: (8e-07, 4e-06),
    MODELS[2]: (2.5e-06, 1e-05),
    MODELS[3]: (1.5e-07, 6e-07),
    MODELS[4]: (2.7e-07, 1.1e-06),
    MODELS[5]: (3e-07, 2.5e-06),
}
ADJECTIVES = "quiet brave lucky silver rapid gentle hidden bright frozen golden".split()
NOUNS = "otter falcon river canyon lantern harbor meadow comet garden engine".split()

PY_SNIPPETS = [
    'def load(path: str) -> list[dict]:\n    with open(path, encoding="utf-8") as f:\n'
    "        return [json.loads(line) for line in f if line.strip()]\n",
    "class Cache:\n    def __init__(self, size: int = 128):\n        self.size = size\n"
    "        self._data: dict[str, bytes] = {}\n\n    def get(self, key):\n"
    "        return self._data.get(key)\n",
    "for i, row in enumerate(rows):\n    if row['status'] != 'ok':\n"
    "        print(f\"row {i}: {row['status']!r}\")\n        continue\n    total += row['value']\n",
    "import subprocess\n\nresult = subprocess.run(['git', 'status', '--short'], "
    "capture_output=True, text=True)\nprint(result.stdout)\n",
]
RUST_SNIPPETS = [
    "fn parse_line(line: &str) -> Result<Message, Error> {\n    let v: Value = "
    "serde_json::from_str(line)?;\n    Ok(Message::from_value(v)?)\n}\n",
    "impl Store {\n    pub fn open(path: &Path) -> rusqlite::Result<Self> {\n"
    "        let conn = Connection::open(path)?;\n        conn.pragma_update(None, \"journal_mode\", "
    "\"wal\")?;\n        Ok(Self { conn })\n    }\n}\n",
    "let total: u64 = items\n    .iter()\n    .filter(|x| x.enabled)\n    .map(|x| x.size)\n    .sum();\n",
]
SHELL_SNIPPETS = [
    "ls -la ~/projects/demo\ngit log --oneline | head -5\n",
    "cargo test --release -- --nocapture 2>&1 | tail -20\n",
    "find . -name '*.jsonl' -size +1M -print0 | xargs -0 du -h | sort -h\n",
    "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt\n",
]
OUTPUTS = [
    "Traceback (most recent call last):\n  File \"main.py\", line 42, in <module>\n"
    "    main()\n  File \"main.py\", line 17, in main\n    data = load(args.path)\n"
    "KeyError: 'timestamp'\n",
    "error[E0502]: cannot borrow `self.items` as mutable because it is also borrowed as immutable\n"
    "  --> src/lib.rs:88:9\n   |\n87 |         let first = &self.items[0];\n"
    "   |                      ---------- immutable borrow occurs here\n",
    "running 24 tests\ntest store::tests::roundtrip ... ok\ntest codec::tests::escapes ... ok\n"
    "test result: ok. 24 passed; 0 failed; 0 ignored; finished in 0.41s\n",
]


def sentence(rng: random.Random) -> str:
    n = rng.randint(6, 18)
    words = [rng.choice(WORDS) for _ in range(n)]
    if rng.random() < 0.15:
        words[rng.randrange(n)] = rng.choice(UNICODE_WORDS)
    if rng.random() < 0.2:
        words[rng.randrange(n)] = "`" + rng.choice(WORDS) + "_" + rng.choice(WORDS) + "()`"
    s = " ".join(words)
    return s[0].upper() + s[1:] + rng.choice(".....?!:")


def paragraph(rng: random.Random, lo: int = 2, hi: int = 5) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(lo, hi)))


def code_block(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:
        lang, body = "python", rng.choice(PY_SNIPPETS)
    elif kind < 0.7:
        lang, body = "rust", rng.choice(RUST_SNIPPETS)
    elif kind < 0.9:
        lang, body = "shell", rng.choice(SHELL_SNIPPETS)
    else:
        lang, body = "", rng.choice(OUTPUTS)
    return f"```{lang}\n{body}```"


def bullets(rng: random.Random) -> str:
    return "\n".join(f"- {sentence(rng)}" for _ in range(rng.randint(2, 5)))


def user_content(rng: random.Random) -> str:
    if rng.random() < 0.04:
        return "/" + rng.choice(["undo", "tokens", "log", "tools", "help"])
    parts = [paragraph(rng, 3, 7)]
    r = rng.random()
    if r < 0.35:
        parts.append(code_block(rng))
        parts.append(paragraph(rng, 1, 3))
    elif r < 0.5:
        parts.append("```\n" + rng.choice(OUTPUTS) + "```")
    elif r < 0.7:
        parts.append(paragraph(rng, 2, 4))
    return "\n\n".join(parts)


def assistant_content(rng: random.Random) -> str:
    parts = []
    if rng.random() < 0.15:
        parts.append("<thinking>\n" + paragraph(rng, 1, 3) + "\n</thinking>")
    parts.append(paragraph(rng, 2, 4))
    for _ in range(rng.randint(2, 6)):
        r = rng.random()
        if r < 0.45:
            parts.append(code_block(rng))
        elif r < 0.7:
            parts.append(bullets(rng))
        else:
            parts.append(paragraph(rng))
    if rng.random() < 0.3:
        parts.append(paragraph(rng, 1, 2))
    return "\n\n".join(parts)


def system_content(rng: random.Random, idx: int) -> str:
    tools = ", ".join(rng.sample(["shell", "python", "save", "patch", "read", "browser", "tmux", "chats"], 5))
    return (
        "You are gptme, a general-purpose AI assistant powered by LLMs. "
        "You are designed to help users with programming tasks, such as writing code, "
        "debugging, and learning new concepts.\n\n"
        f"## Tools\n\nEnabled tools: {tools}.\n\n"
        + "\n\n".join(paragraph(rng, 3, 6) for _ in range(3))
        + f"\n\n## Project\n\nWorkspace: /home/user/projects/bench-{idx:05d}\n"
    )


def metadata(rng: random.Random, model: str, context_tokens: int) -> dict:
    out_tok = rng.randint(40, 1800)
    cache_read = rng.randint(0, context_tokens)
    cache_create = rng.randint(0, 400) if rng.random() < 0.5 else 0
    in_tok = max(1, context_tokens - cache_read)
    pin, pout = PRICES[model]
    meta: dict = {
        "model": model,
        "cost": in_tok * pin + out_tok * pout + cache_read * pin * 0.1 + cache_create * pin * 1.25,
        "usage": {
            "input_tokens": in_tok,
            "output_tokens": out_tok,
            "cache_read_tokens": cache_read,
            "cache_creation_tokens": cache_create,
        },
    }
    if rng.random() < 0.3:
        meta["timings"] = {
            "ttft_ms": round(rng.uniform(200, 3000), 1),
            "gen_ms": round(rng.uniform(500, 20000), 1),
        }
    return meta


def make_conversation(out: Path, idx: int, n_messages: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed * 1_000_003 + idx)
    start = datetime(2025, 1, 1) + timedelta(seconds=rng.randint(0, 365 * 86400))
    chat_id = f"{start:%Y-%m-%d}-{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}-{idx:05d}"
    d = out / chat_id
    d.mkdir(parents=True)
    model = rng.choice(MODELS)

    ts = start.replace(microsecond=rng.randint(0, 999_999))
    msgs = [Message("system", system_content(rng, idx), timestamp=ts, hide=True, pinned=True)]
    context = len(msgs[0].content) // 4
    for i in range(1, n_messages):
        ts = ts + timedelta(seconds=rng.randint(2, 300), microseconds=rng.randint(0, 999_999))
        if rng.random() < 0.02:
            ts = ts.replace(microsecond=0)
        if i % 2 == 1:
            msg = Message("user", user_content(rng), timestamp=ts)
        else:
            msg = Message("assistant", assistant_content(rng), timestamp=ts, metadata=metadata(rng, model, context))
        context += len(msg.content) // 4
        msgs.append(msg)

    data = "".join(json.dumps(m.to_dict()) + "\n" for m in msgs).encode("utf-8")
    path = d / "conversation.jsonl"
    path.write_bytes(data)
    size = len(data)

    if idx % 3 == 0:
        name = f"{sentence(rng).rstrip('.?!:')[:60]}"
        cfg = ChatConfig(name=name, model=model, workspace=Path(f"/home/user/projects/bench-{idx:05d}"))
        text = tomlkit.dumps(cfg.to_dict())
        (d / "config.toml").write_text(text, encoding="utf-8")
        size += len(text.encode("utf-8"))

    mtime = ts.timestamp()
    os.utime(path, (mtime, mtime))
    return len(msgs), size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--conversations", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=100, help="messages per conversation, system message included")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--force", action="store_true", help="delete OUT_DIR first if it exists")
    args = ap.parse_args()
    if args.messages < 1 or args.conversations < 0:
        ap.error("--messages must be >= 1 and --conversations >= 0")

    out: Path = args.out_dir
    if out.exists() and any(out.iterdir()):
        if not args.force:
            print(f"{out}: exists and is not empty (use --force)", file=sys.stderr)
            return 2
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    total_msgs = total_bytes = 0
    for idx in range(args.conversations):
        n, size = make_conversation(out, idx, args.messages, args.seed)
        total_msgs += n
        total_bytes += size
    elapsed = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "out_dir": str(out),
                "conversations": args.conversations,
                "messages": total_msgs,
                "bytes": total_bytes,
                "seconds": round(elapsed, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
