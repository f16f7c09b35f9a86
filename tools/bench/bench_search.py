#!/usr/bin/env python3
"""The two halves of tools/bench/bench_search.sh: choosing queries, timing processes.

    python bench_search.py pick LOGS_ROOT                 -> JSON {class: {query, messages}}
    python bench_search.py time QUERIES.json --sdb BIN --db DB --gptme-logs COPY --runs R [--limit N]

``pick`` reads every message of LOGS_ROOT (every conversation.jsonl) and chooses one query per
class by its frequency in the corpus (the number of messages holding it, printed beside it):

  rare       a word of 8+ letters in the fewest messages, at least 2
  mid        a word of 5+ letters in the number of messages closest to 2% of them
  common     the word in the most messages
  phrase     two words in a row ("w1 w2"), both of 4+ letters, closest to 0.5% of the messages
  phrase_page  the two words in a row in the most messages, asked for a page of 1,000
             conversations (`-n 1000`, both tools)
  prefix     the first 4 letters of the mid word, then *
  code       a literal code fragment (an identifier followed by `(`, or `a::b`), closest to 0.2%
             (below one a conversation: not the tool names every system prompt lists)
  cjk        the two CJK characters in a row in the most messages
  emoji      the emoji in the most messages

Words are runs of ASCII letters, lowercased; counts of literal queries are case-insensitive
substring counts, as both tools match them.

``time`` runs, for each query, R rounds of the two whole processes one after the other
(alternating, output to /dev/null): ``sessiondb --db DB search -n N QUERY`` and gptme's
``gptme-util chats search QUERY -n N`` (its CLI entry point, a fresh interpreter each time,
pointed at COPY by GPTME_LOGS_HOME, with a throw-away HOME and TZ=UTC). Prints JSON with
every run (wall seconds, CPU seconds of the process) and the medians of both: on a shared
machine the CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Words as the word index splits text (runs of letters and digits); a query word is one of
# them made of ASCII letters only, so that the word searched is a whole word of the text.
TOKEN = re.compile(r"[^\W_]+")
WORD = re.compile(r"[a-z]+")
CODE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z_][A-Za-z0-9_]{3,}\(")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{2}")
EMOJI = re.compile(r"[\U0001F300-\U0001FAFF\u2600-\u27BF]")


def contents(root: Path):
    for path in sorted(root.glob("*/conversation.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line).get("content") or ""


def pick(root: Path) -> dict:
    words: collections.Counter = collections.Counter()
    pairs: collections.Counter = collections.Counter()
    # Pairs of any words, for a phrase of common words.
    common_pairs: collections.Counter = collections.Counter()
    code: collections.Counter = collections.Counter()
    cjk: collections.Counter = collections.Counter()
    emoji: collections.Counter = collections.Counter()
    total = 0
    for text in contents(root):
        total += 1
        lowered = text.lower()
        ts = TOKEN.findall(lowered)
        words.update({t for t in ts if WORD.fullmatch(t)})
        pairs.update({f"{a} {b}" for a, b in zip(ts, ts[1:]) if len(a) >= 4 and len(b) >= 4 and WORD.fullmatch(a) and WORD.fullmatch(b)})
        common_pairs.update({f"{a} {b}" for a, b in zip(ts, ts[1:]) if WORD.fullmatch(a) and WORD.fullmatch(b)})
        code.update(set(CODE.findall(text)))
        cjk.update(set(CJK.findall(text)))
        emoji.update(set(EMOJI.findall(text)))

    def closest(counter: collections.Counter, target: float, ok=lambda k: True) -> tuple[str, int]:
        return min(((k, n) for k, n in counter.items() if ok(k)), key=lambda kn: (abs(kn[1] - target), kn[0]))

    rare = min(((w, n) for w, n in words.items() if len(w) >= 8 and n >= 2), key=lambda wn: (wn[1], wn[0]))
    mid = closest(words, 0.02 * total, lambda w: len(w) >= 5)
    common = max(words.items(), key=lambda wn: (wn[1], wn[0]))
    phrase = closest(pairs, 0.005 * total)
    common_phrase = max(common_pairs.items(), key=lambda kn: (kn[1], kn[0]))
    prefix = mid[0][:4]
    prefix_n = None  # counted below
    # A code fragment's count: messages holding it, ignoring case.
    frag = closest(code, 0.002 * total)
    out = {
        "messages": total,
        "rare": {"query": rare[0], "messages": rare[1]},
        "mid": {"query": mid[0], "messages": mid[1]},
        "common": {"query": common[0], "messages": common[1]},
        "phrase": {"query": f'"{phrase[0]}"', "messages": phrase[1]},
        # A phrase of the commonest words with a large page (its own `limit`).
        "phrase_page": {"query": f'"{common_phrase[0]}"', "messages": common_phrase[1], "limit": 1000},
        "prefix": {"query": f"{prefix}*", "messages": prefix_n},
        "code": {"query": frag[0], "messages": None},
    }
    if cjk:
        c = max(cjk.items(), key=lambda kn: (kn[1], kn[0]))
        out["cjk"] = {"query": c[0], "messages": c[1]}
    if emoji:
        e = max(emoji.items(), key=lambda kn: (kn[1], kn[0]))
        out["emoji"] = {"query": e[0], "messages": e[1]}
    # Exact counts of the prefix (words beginning with it) and the code fragment (substring).
    frag_l = frag[0].lower()
    pn = fn = 0
    for text in contents(root):
        lowered = text.lower()
        pn += any(w.startswith(prefix) for w in TOKEN.findall(lowered))
        fn += frag_l in lowered
    out["prefix"]["messages"] = pn
    out["code"]["messages"] = fn
    return out


def run_once(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def time_all(args: argparse.Namespace) -> dict:
    queries = json.loads(Path(args.queries).read_text())
    with tempfile.TemporaryDirectory(prefix="gptme-home-") as tmp:
        return time_with_home(args, queries, Path(tmp))


def time_with_home(args: argparse.Namespace, queries: dict, home: Path) -> dict:
    env = dict(os.environ, GPTME_LOGS_HOME=str(Path(args.gptme_logs).resolve()), HOME=str(home), TZ="UTC")
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state")):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / sub)
    env["GPTME_TIKTOKEN_TIMEOUT"] = "0"
    gptme_util = str(Path(sys.executable).parent / "gptme-util")
    out = {}
    for cls, q in queries.items():
        if not isinstance(q, dict):
            continue
        text = q["query"]
        limit = str(q.get("limit", args.limit))
        # The text a person reads, the JSON a tool or agent reads, and gptme's CLI, alternating.
        sdb, sdb_json, gp = [], [], []
        for _ in range(args.runs):
            sdb.append(run_once([args.sdb, "--db", args.db, "search", "-n", limit, "--", text]))
            sdb_json.append(run_once([args.sdb, "--db", args.db, "search", "--json", "-n", limit, "--", text]))
            gp.append(run_once([gptme_util, "chats", "search", text, "-n", limit], env))
        med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
        out[cls] = {
            "query": text, "limit": int(limit), "sessiondb": sdb, "sessiondb_json": sdb_json, "gptme": gp,
            "sessiondb_median": med(sdb, 0), "gptme_median": med(gp, 0), "sessiondb_cpu": med(sdb, 1), "gptme_cpu": med(gp, 1),
            "sessiondb_json_median": med(sdb_json, 0), "sessiondb_json_cpu": med(sdb_json, 1),
        }
        print(f"   {cls}: sessiondb {out[cls]['sessiondb_median'] * 1000:.1f} ms, --json {out[cls]['sessiondb_json_median'] * 1000:.1f} ms, "
              f"gptme {out[cls]['gptme_median']:.3f} s", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pick")
    p.add_argument("logs_root", type=Path)
    t = sub.add_parser("time")
    t.add_argument("queries")
    t.add_argument("--sdb", required=True)
    t.add_argument("--db", required=True)
    t.add_argument("--gptme-logs", required=True)
    t.add_argument("--runs", type=int, default=5)
    t.add_argument("--limit", type=int, default=20)
    args = ap.parse_args()
    result = pick(args.logs_root) if args.cmd == "pick" else time_all(args)
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
