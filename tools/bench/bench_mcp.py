#!/usr/bin/env python3
"""Round trips of `sessiondb mcp` calls, for tools/bench/bench_mcp.sh.

    python bench_mcp.py QUERIES.json --sdb BIN --db DB --logs LOGS_ROOT --runs R

Starts ONE server (``BIN --db DB mcp LOGS_ROOT``) as an MCP client would, initializes it, and
times round trips on its pipes: from writing a request line to reading its answer line, in
wall milliseconds. Per query of QUERIES.json (``bench_search.py pick``'s output), R calls of
``search_conversations`` with the defaults a model would use (10 conversations, 3 matches
each, the 16,000-character budget). Beside them:

  ping          the transport alone (JSON-RPC in and out, no store);
  list          ``list_conversations`` with limit 1: mostly the catch-up of the whole logs root
                when nothing changed (one walk of every conversation directory);
  after append  a line appended to one conversation's transcript (as gptme appends) before
                each search for the word it holds: the catch-up reads it in, then the search
                finds it (checked).

Prints JSON: for each, every run and the median and 90th percentile.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import statistics
import subprocess
import time
from pathlib import Path


class Server:
    def __init__(self, sdb: str, db: str, logs: str):
        self.p = subprocess.Popen([sdb, "--db", db, "mcp", logs], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.id = 0

    def ask(self, method: str, params: dict) -> tuple[dict, float]:
        self.id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}) + "\n"
        t0 = time.perf_counter()
        self.p.stdin.write(line)
        self.p.stdin.flush()
        answer = self.p.stdout.readline()
        elapsed = time.perf_counter() - t0
        reply = json.loads(answer)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"], elapsed * 1000

    def call(self, tool: str, arguments: dict) -> tuple[dict, float]:
        result, ms = self.ask("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{tool}: {result['content'][0]['text']}")
        return json.loads(result["content"][0]["text"]), ms

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def summary(runs: list[float]) -> dict:
    ordered = sorted(runs)
    return {"runs": runs, "median": statistics.median(runs), "p90": ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("queries", type=Path)
    ap.add_argument("--sdb", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--logs", required=True)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    queries = {k: v for k, v in json.loads(a.queries.read_text()).items() if isinstance(v, dict)}

    server = Server(a.sdb, a.db, a.logs)
    server.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
    out: dict = {}
    # The first call catches the store up with the logs root; timed apart.
    _, out["first_call_ms"] = server.call("list_conversations", {"limit": 1})
    out["ping"] = summary([server.ask("ping", {})[1] for _ in range(a.runs)])
    out["list"] = summary([server.call("list_conversations", {"limit": 1})[1] for _ in range(a.runs)])
    out["search"] = {}
    for cls, q in queries.items():
        runs = []
        for _ in range(a.runs):
            page, ms = server.call("search_conversations", {"query": q["query"]})
            runs.append(ms)
        out["search"][cls] = {"query": q["query"], "found": len(page["results"]), "chars": len(json.dumps(page, ensure_ascii=False, separators=(",", ":"))), **summary(runs)}

    # As gptme appends: one whole line to the transcript of the most recent conversation.
    newest = max((d for d in Path(a.logs).iterdir() if (d / "conversation.jsonl").is_file()), key=lambda d: (d / "conversation.jsonl").stat().st_mtime)
    runs = []
    for i in range(a.runs):
        word = f"benchword{os.getpid()}x{i}"
        with open(newest / "conversation.jsonl", "a") as f:
            f.write(json.dumps({"role": "user", "content": f"just now: {word}", "timestamp": "2026-12-04T00:00:00"}) + "\n")
        page, ms = server.call("search_conversations", {"query": word})
        if [r["id"] for r in page["results"]] != [newest.name]:
            raise RuntimeError(f"{word} not found in {newest.name}: {page}")
        runs.append(ms)
    out["after_append"] = {"conversation": newest.name, **summary(runs)}
    server.close()
    json.dump(out, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
