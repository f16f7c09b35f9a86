#!/usr/bin/env python3
"""Time gptme's own listing, search and stats over a logs root.

    python tools/bench/bench_gptme_queries.py LOGS_ROOT WORD [WORD ...] [--runs R] [--limit N]

Run it on a COPY of the logs root: gptme's listing (ChatConfig.from_logdir)
creates a ``workspace/`` directory in every conversation that has no
config.toml, and LogManager.load may add files too.  tools/bench/bench_queries.sh
makes that copy.

Before gptme is imported, the environment is pointed at the logs root and at a
throw-away home: GPTME_LOGS_HOME=LOGS_ROOT, HOME and XDG_{CONFIG,DATA,CACHE,STATE}_HOME
in a temp dir, TZ=UTC.  Each operation is then timed with time.perf_counter,
after all imports, R times in a row (default 3); the best time is reported:

  list_detail     list(get_conversations(detail=True))   every conversation, with costs/tokens
  list_nodetail   list(get_conversations(detail=False))  every conversation, tail-only scan
  list_default    list_conversations(N)                  what `gptme-util chats list` gathers
  search[WORD]    search_chats(WORD, max_results=N), stdout captured: what
                  `gptme-util chats search WORD -n N` does (list_conversations(10*N),
                  LogManager.load(lock=False) and _get_matching_messages on each, then
                  format the first N results)
  stats           conversation_stats(as_json=True), stdout captured: `gptme-util chats stats --json`

N is --limit (default 20, gptme's default).  Prints one JSON object with the
best seconds, every run's seconds, and a few counts to check the results
against sessiondb's (conversations, messages, summed cost, conversations that
matched each word).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path


def isolate_environment(logs_root: Path, home: Path) -> None:
    """Point gptme at LOGS_ROOT and a temp home; must run before gptme is imported."""
    os.environ["GPTME_LOGS_HOME"] = str(logs_root)
    os.environ["HOME"] = str(home)
    for var, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_STATE_HOME", ".local/state"),
    ):
        path = home / sub
        path.mkdir(parents=True, exist_ok=True)
        os.environ[var] = str(path)
    os.environ["TZ"] = "UTC"
    time.tzset()


def best_of(runs: int, fn):
    """Call fn() `runs` times; return (best seconds, all seconds, last result)."""
    times = []
    result = None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), times, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs_root", type=Path)
    ap.add_argument("words", nargs="+", metavar="WORD")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=int, default=20)
    args = ap.parse_args()
    if args.runs < 1 or args.limit < 1:
        ap.error("--runs and --limit must be >= 1")
    root: Path = args.logs_root.resolve()
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2

    home = Path(tempfile.mkdtemp(prefix="gptme-bench-home."))
    try:
        isolate_environment(root, home)
        return run(args, root)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(args: argparse.Namespace, root: Path) -> int:

    # gptme imports only after the environment is set
    import importlib.metadata

    from gptme.logmanager import get_conversations, list_conversations
    from gptme.tools.chats import conversation_stats, search_chats

    out: dict = {
        "gptme_version": importlib.metadata.version("gptme"),
        "logs_root": str(root),
        "runs": args.runs,
        "limit": args.limit,
        "seconds": {},
        "all_seconds": {},
        "checks": {},
    }

    def record(key: str, best: float, times: list[float]) -> None:
        out["seconds"][key] = round(best, 6)
        out["all_seconds"][key] = [round(t, 6) for t in times]

    # listing, with and without costs
    best, times, convs = best_of(args.runs, lambda: list(get_conversations(detail=True)))
    record("list_detail", best, times)
    out["checks"]["conversations"] = len(convs)
    out["checks"]["messages"] = sum(c.messages for c in convs)
    out["checks"]["total_cost"] = round(sum(c.total_cost for c in convs), 6)
    out["checks"]["total_input_tokens"] = sum(c.total_input_tokens for c in convs)
    out["checks"]["total_output_tokens"] = sum(c.total_output_tokens for c in convs)
    out["checks"]["newest_id"] = convs[0].id if convs else None

    best, times, convs = best_of(args.runs, lambda: list(get_conversations(detail=False)))
    record("list_nodetail", best, times)
    out["checks"]["conversations_nodetail"] = len(convs)

    best, times, convs = best_of(args.runs, lambda: list_conversations(args.limit))
    record("list_default", best, times)
    out["checks"]["list_default_ids"] = [c.id for c in convs]

    # search, as `gptme-util chats search WORD -n LIMIT` (text output)
    out["checks"]["search_conversations_scanned"] = min(10 * args.limit, out["checks"]["conversations"])
    out["checks"]["search_matched"] = {}
    out["checks"]["search_shown"] = {}
    for word in args.words:

        def search(word=word) -> str:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                search_chats(word, max_results=args.limit)
            return buf.getvalue()

        best, times, text = best_of(args.runs, search)
        record(f"search:{word}", best, times)
        m = re.search(r"\((\d+) conversations, showing", text)
        out["checks"]["search_matched"][word] = int(m.group(1)) if m else 0
        # result lines look like "\n3. <name> (N matches):"; names, not ids, are printed
        out["checks"]["search_shown"][word] = len(re.findall(r"^\d+\. .* \(\d+ matches\):$", text, re.M))

    # stats overview, as `gptme-util chats stats --json`
    def stats() -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            conversation_stats(as_json=True)
        return buf.getvalue()

    best, times, text = best_of(args.runs, stats)
    record("stats", best, times)
    try:
        data = json.loads(text)
        out["checks"]["stats_keys"] = sorted(data)[:20]
        for key in ("total_conversations", "conversations", "total_messages", "total_cost"):
            if key in data:
                out["checks"][f"stats_{key}"] = data[key]
    except json.JSONDecodeError:
        out["checks"]["stats_output_head"] = text[:200]

    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
