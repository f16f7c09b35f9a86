#!/usr/bin/env python3
"""Write a realistic gptme logs root for search benchmarks (issue 15).

    $GPTME_PYTHON tools/bench/make_realistic_logs.py OUT_DIR --conversations N --messages M [--seed S] [--force]

Unlike make_bench_logs.py (a 16-word salad: every word in every message), the text here
has the vocabulary of real work, so a rare word is rare and a common one common:

- Conversations start with gptme's real system prompt: the messages gptme's own
  ``get_prompt`` returns (called here, at generation time, with gptme's tools loaded,
  for the conversation's model), not a copy of its text; the date it states is the
  conversation's.
- Then turns: a user asks (prose, sometimes a pasted error or file), the assistant
  answers with prose and tool calls in gptme's formats (```shell, ```python, ```save
  PATH blocks), and each call is followed by the system message gptme writes for it:
  ``Ran command`` output made by gptme's own ``_format_shell_output``, ``Executed code
  block`` with ``_format_cell_output``'s blocks, ``Saved to PATH``.
- The text is drawn from real sources on this machine, one *topic* per conversation:
  a Rust crate under ~/.cargo/registry/src (its doc comments as prose, its code as
  code, its file paths as paths), a module of Python's standard library (docstrings,
  code), or a man page (English, and the Chinese, Japanese and Korean translations
  under /usr/share/man, which bring CJK text). Topics are chosen per conversation with
  a Zipfian law (rank r weighs 1/r^1.1 over a seeded shuffle of all topics), so some
  topics come back in many conversations and most in few.
- Lengths are heavy-tailed: messages per conversation are log-normal with mean M
  (at least 4, at most 20 M); message lengths are Pareto-like (most a few hundred
  bytes, some tool outputs tens of kilobytes).
- Assistant messages carry metadata (model, usage tokens, cost); a few user messages
  are short reactions, some with emoji.
- Every line is ``json.dumps(Message(...).to_dict())`` with gptme's own ``Message``
  (as make_bench_logs.py writes them); conversation.jsonl gets the last message's
  time as its mtime; a third of the conversations have a config.toml with a name
  (gptme's ``ChatConfig``).

Deterministic for a given (N, M, seed) and the same source files (two runs give the same
bytes); the sources are whatever is installed here, read in sorted order, so another machine,
or a crate newly unpacked under ~/.cargo/registry, changes the list of topics and with it the
whole corpus. Prints a JSON summary. 1,000 x 100 is about
130 MB and takes a few minutes. Needs a Python with gptme installed (0.35.1).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import gzip
import json
import logging
import math
import os
import random
import re
import shutil
import sys
import sysconfig
import time
from datetime import datetime, timedelta
from pathlib import Path

import tomlkit

# gptme counts tokens with tiktoken, which it would fetch over the network (and wait for) on
# every call here; its own switch makes it use its character-based approximation instead.
os.environ["GPTME_TIKTOKEN_TIMEOUT"] = "0"
logging.disable(logging.WARNING)

from gptme.config.chat import ChatConfig  # noqa: E402
from gptme.message import Message  # noqa: E402
from gptme.prompts import get_prompt  # noqa: E402
from gptme.tools import get_tools, init_tools  # noqa: E402
from gptme.tools.python import _format_cell_output  # noqa: E402
from gptme.tools.shell import _format_shell_output  # noqa: E402

MODELS = [
    ("anthropic/claude-sonnet-4-20250514", 3e-06, 15e-06),
    ("anthropic/claude-3-5-haiku-20241022", 8e-07, 4e-06),
    ("openai/gpt-4o", 2.5e-06, 1e-05),
    ("openai/gpt-4o-mini", 1.5e-07, 6e-07),
    ("openrouter/deepseek/deepseek-chat", 2.7e-07, 1.1e-06),
]
ADJECTIVES = "quiet brave lucky silver rapid gentle hidden bright frozen golden".split()
NOUNS = "otter falcon river canyon lantern harbor meadow comet garden engine".split()
REACTIONS = ["Thanks!", "ok", "continue", "Great, thanks 🎉", "👍", "that worked 😀", "hmm, still failing 😕", "/undo", "/tokens", "looks good ✅", "🦀 nice"]
ASKS = ["Can you explain", "How do I use", "Why does", "What is wrong with", "Please fix", "Write a test for", "Summarize", "Refactor"]


# ---------------------------------------------------------------- sources

class Topic:
    """One source of text: prose paragraphs, code snippets and file paths, loaded on first use."""

    def __init__(self, kind: str, path: Path):
        self.kind, self.path = kind, path
        self.prose: list[str] = []
        self.code: list[str] = []
        self.files: list[str] = []
        self.loaded = False

    def load(self) -> None:
        if self.loaded:
            return
        self.loaded = True
        try:
            {"crate": self._crate, "python": self._python, "man": self._man}[self.kind]()
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            pass
        if not self.prose:
            self.prose = [self.path.name]
        if not self.code:
            self.code = [f"ls {self.path.name}"]
        if not self.files:
            self.files = [self.path.name]

    def _crate(self) -> None:
        files = sorted(self.path.rglob("*.rs"))[:40]
        for f in files:
            text = f.read_text(encoding="utf-8", errors="replace")
            self.files.append(str(f.relative_to(self.path.parent)))
            doc: list[str] = []
            code: list[str] = []
            for line in text.splitlines():
                s = line.strip()
                if s.startswith(("///", "//!")):
                    doc.append(s[3:].strip())
                    continue
                if doc:
                    self.prose.append(" ".join(doc))
                    doc = []
                code.append(line)
                if len(code) >= 12 and not s:
                    self.code.append("\n".join(code).strip("\n"))
                    code = []
            if len(self.code) > 200:
                break

    def _python(self) -> None:
        text = self.path.read_text(encoding="utf-8", errors="replace")
        self.files.append(f"Lib/{self.path.name}")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Module)):
                doc = ast.get_docstring(node)
                if doc:
                    self.prose.extend(p.replace("\n", " ") for p in doc.split("\n\n") if p.strip())
                if not isinstance(node, ast.Module) and node.end_lineno and node.end_lineno - node.lineno < 40:
                    self.code.append(ast.get_source_segment(text, node) or "")
        self.code = [c for c in self.code if c]

    def _man(self) -> None:
        raw = gzip.decompress(self.path.read_bytes()).decode("utf-8", errors="replace")
        self.files.append(self.path.name.removesuffix(".gz"))
        para: list[str] = []
        for line in raw.splitlines():
            if line.startswith((".", "'")):
                if para and line[:3] in (".PP", ".SH", ".TP", ".P", ".LP", ".IP", ".SS"):
                    self.prose.append(" ".join(para))
                    para = []
                if line.startswith((".B ", ".I ", ".BR ", ".IR ")):
                    para.append(line.split(" ", 1)[1].replace('"', ""))
                continue
            line = re.sub(r"\\f[BIRP]|\\f\(..|\\\(..|\\-|\\&|\\e", lambda m: "-" if m.group() == "\\-" else "", line)
            if line.strip():
                para.append(line.strip())
        if para:
            self.prose.append(" ".join(para))
        self.code = [f"{self.path.name.split('.')[0]} --help", f"man {self.path.name.split('.')[0]}"]


def find_topics(max_man: int) -> list[Topic]:
    topics: list[Topic] = []
    for reg in sorted((Path.home() / ".cargo/registry/src").glob("*")):
        topics += [Topic("crate", p) for p in sorted(reg.iterdir()) if p.is_dir()]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    topics += [Topic("python", p) for p in sorted(stdlib.glob("*.py"))]
    man = Path("/usr/share/man")
    pages = sorted(p for p in man.glob("man[18]/*.gz") if not p.is_symlink())
    # The Google Cloud SDK installs some 14,000 pages here; one in 200 of them stands for it.
    gcloud = [p for p in pages if p.name.startswith("gcloud")]
    pages = [p for p in pages if not p.name.startswith("gcloud")] + gcloud[::200]
    step = max(1, len(pages) // max_man)
    topics += [Topic("man", p) for p in pages[::step]]
    for lang in ("zh_CN", "ja", "ko"):
        topics += [Topic("man", p) for p in sorted((man / lang).glob("man1/*.gz")) if not p.is_symlink()]
    return topics


# ---------------------------------------------------------------- text

def heavy(rng: random.Random, lo: int, alpha: float, cap: int) -> int:
    """A Pareto-distributed count: at least lo, mostly near it, at most cap."""
    return min(cap, int(lo / (1.0 - rng.random()) ** (1.0 / alpha)))


def prose(rng: random.Random, t: Topic, n: int) -> str:
    return "\n\n".join(rng.choice(t.prose) for _ in range(n))


def code(rng: random.Random, t: Topic) -> str:
    return rng.choice(t.code)


def user_turn(rng: random.Random, t: Topic) -> str:
    r = rng.random()
    if r < 0.12:
        return rng.choice(REACTIONS)
    ask = f"{rng.choice(ASKS)} `{rng.choice(t.files)}`?"
    parts = [ask, prose(rng, t, heavy(rng, 1, 1.8, 6))]
    if r < 0.35:
        parts.append(f"```\n{code(rng, t)}\n```")
    return "\n\n".join(parts)


def tool_call(rng: random.Random, t: Topic) -> tuple[str, str]:
    """An assistant's tool call (the block) and the system message gptme writes for it."""
    r = rng.random()
    if r < 0.5:
        f = rng.choice(t.files)
        cmd = rng.choice([f"cat {f}", f"grep -n fn {f}", f"rg -n 'pub' {f} | head -20", "cargo test 2>&1 | tail -20", f"wc -l {f}", "git status --short"])
        stdout = "\n".join(code(rng, t) for _ in range(heavy(rng, 1, 1.5, 30)))
        failed = rng.random() < 0.2
        stderr = prose(rng, t, 1) if failed else ""
        out = _format_shell_output(cmd, stdout if not failed else "", stderr, 1 if failed else 0, False, False)
        return f"```shell\n{cmd}\n```", out
    if r < 0.8:
        snippet = code(rng, t)
        block = f"```python\n{snippet}\n```"
        out = "Executed code block.\n\n" + _format_cell_output(prose(rng, t, 1)[:400], "")
        return block, out.rstrip() + "\n"
    f = rng.choice(t.files)
    body = "\n\n".join(code(rng, t) for _ in range(heavy(rng, 1, 1.6, 12)))
    return f"```save {f}\n{body}\n```", f"Saved to `{f}`"


def metadata(rng: random.Random, model: tuple[str, float, float], context: int) -> dict:
    name, pin, pout = model
    out_tok = heavy(rng, 40, 1.3, 8000)
    cache_read = rng.randint(0, context)
    in_tok = max(1, context - cache_read)
    return {
        "model": name,
        "usage": {"input_tokens": in_tok, "output_tokens": out_tok, "cache_read_tokens": cache_read, "cache_creation_tokens": 0},
        "cost": in_tok * pin + out_tok * pout + cache_read * pin * 0.1,
    }


# ---------------------------------------------------------------- conversations

PROMPTS: dict[str, list[Message]] = {}


def system_prompt(model: str) -> list[Message]:
    if model not in PROMPTS:
        PROMPTS[model] = get_prompt(get_tools(), interactive=True, model=model, workspace=None)
    return PROMPTS[model]


def make_conversation(out: Path, idx: int, mean: int, seed: int, topics: list[Topic], weights: list[float]) -> tuple[int, int, str]:
    rng = random.Random(seed * 1_000_003 + idx)
    topic = rng.choices(topics, cum_weights=weights)[0]
    topic.load()
    start = datetime(2025, 1, 1) + timedelta(seconds=rng.randint(0, 365 * 86400))
    chat_id = f"{start:%Y-%m-%d}-{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}-{idx:05d}"
    d = out / chat_id
    d.mkdir(parents=True)
    model = rng.choice(MODELS)
    sigma = 0.9
    length = int(rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma))
    length = max(4, min(20 * mean, length))

    ts = start.replace(microsecond=rng.randint(0, 999_999))
    # gptme's prompt states the day it was made: the conversation's day, so the output does not
    # depend on the day the generator runs.
    today = datetime.now().strftime("%Y-%m-%d")
    msgs = [dataclasses.replace(m, content=m.content.replace(today, f"{start:%Y-%m-%d}"), timestamp=ts) for m in system_prompt(model[0])]
    context = sum(len(m.content) for m in msgs) // 4
    pending: list[str] = []  # a tool's output, due after the assistant's call
    while len(msgs) < length:
        ts += timedelta(seconds=rng.randint(2, 300), microseconds=rng.randint(0, 999_999))
        last = msgs[-1].role
        if pending:
            msg = Message("system", pending.pop(), timestamp=ts)
        elif last != "user":
            msg = Message("user", user_turn(rng, topic), timestamp=ts)
        else:
            parts = [prose(rng, topic, heavy(rng, 1, 1.6, 8))]
            if rng.random() < 0.6:
                block, output = tool_call(rng, topic)
                parts.append(block)
                pending.append(output)
            msg = Message("assistant", "\n\n".join(parts), timestamp=ts, metadata=metadata(rng, model, context))
        context += len(msg.content) // 4
        msgs.append(msg)

    data = "".join(json.dumps(m.to_dict()) + "\n" for m in msgs).encode("utf-8")
    path = d / "conversation.jsonl"
    path.write_bytes(data)
    size = len(data)
    if idx % 3 == 0:
        cfg = ChatConfig(name=rng.choice(topic.prose)[:60], model=model[0])
        text = tomlkit.dumps(cfg.to_dict())
        (d / "config.toml").write_text(text, encoding="utf-8")
        size += len(text.encode("utf-8"))
    os.utime(path, (ts.timestamp(), ts.timestamp()))
    return len(msgs), size, topic.path.name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--conversations", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=100, help="mean messages per conversation (system prompt included)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-man-pages", type=int, default=3000, help="English man pages taken as topics (evenly over the sorted list)")
    ap.add_argument("--force", action="store_true", help="delete OUT_DIR first if it exists")
    args = ap.parse_args()
    if args.messages < 4 or args.conversations < 0:
        ap.error("--messages must be >= 4 and --conversations >= 0")
    out: Path = args.out_dir
    if out.exists() and any(out.iterdir()):
        if not args.force:
            print(f"{out}: exists and is not empty (use --force)", file=sys.stderr)
            return 2
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    init_tools(None)
    topics = find_topics(args.max_man_pages)
    random.Random(args.seed).shuffle(topics)
    weights, acc = [], 0.0
    for r in range(len(topics)):
        acc += 1.0 / (r + 1) ** 1.1
        weights.append(acc)
    total_msgs = total_bytes = 0
    used: dict[str, int] = {}
    for idx in range(args.conversations):
        n, size, topic = make_conversation(out, idx, args.messages, args.seed, topics, weights)
        total_msgs += n
        total_bytes += size
        used[topic] = used.get(topic, 0) + 1
    top = sorted(used.items(), key=lambda kv: -kv[1])[:5]
    print(json.dumps({
        "out_dir": str(out), "conversations": args.conversations, "messages": total_msgs, "bytes": total_bytes,
        "topics": len(topics), "topics_used": len(used), "top_topics": top, "seconds": round(time.perf_counter() - t0, 3),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
