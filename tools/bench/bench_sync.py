#!/usr/bin/env python3
"""Benchmark `sessiondb sync`: incremental passes against full re-imports, and watch-mode lag.

    python tools/bench/bench_sync.py SESSIONDB LOGS_CACHE [--changed 10] [--runs 5] [--lag-samples 20]

Run by tools/bench/bench_sync.sh, which builds the release binary and provides the cached synthetic
logs root (tools/bench/make_bench_logs.py, 1,000 x 100 by default). The cache is copied first, since
gptme writes into the copy. Steps, all on the same copy:

  1. `sessiondb sync` into a fresh database (the first sync is a full import).
  2. Real gptme (LogManager.load + append, as a gptme run does) appends one message to each of
     CHANGED conversations, then `sessiondb sync` is timed. The first such round is gptme's first
     write to those conversations (it creates events.jsonl, a new file, so each is read again
     whole); the RUNS rounds after it are the steady state (only the new bytes are read).
  3. For comparison, on the same data: `sessiondb import` on the same database (it re-reads the
     changed conversations whole) and a full re-import into a fresh database.
  4. Watch lag: `sessiondb sync --watch` runs while gptme appends LAG_SAMPLES messages, one at a
     time; for each, the time from gptme's append returning to `sessiondb search` finding the
     message (polling every 5 ms; the search process itself takes part of that time).
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(cmd, **kw):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    return time.perf_counter() - t0, out.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sessiondb")
    ap.add_argument("logs_cache")
    ap.add_argument("--changed", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--lag-samples", type=int, default=20)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sessiondb-bench-sync-"))
    try:
        return bench(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench(args, work: Path) -> int:
    logs = work / "logs"
    shutil.copytree(args.logs_cache, logs, symlinks=True)
    home = work / "home"
    home.mkdir()
    os.environ.update({"GPTME_LOGS_HOME": str(logs), "HOME": str(home), "XDG_CONFIG_HOME": str(home), "XDG_DATA_HOME": str(home)})
    from gptme.logmanager import LogManager
    from gptme.message import Message

    sdb = args.sessiondb
    db = work / "sessions.db"
    chats = sorted(p.name for p in logs.iterdir() if (p / "conversation.jsonl").exists())
    step = max(1, len(chats) // args.changed)
    changed = chats[::step][: args.changed]
    counter = [0]

    def gptme_append(chat: str, content: str | None = None) -> str:
        counter[0] += 1
        content = content or f"benchmark append {counter[0]}"
        with contextlib.redirect_stdout(io.StringIO()):  # gptme prints each message it appends
            manager = LogManager.load(logs / chat)
            manager.append(Message("user", content))
            manager._release_lock()
        return content

    def sync(database=db) -> tuple[float, dict]:
        t, out = run([sdb, "--db", str(database), "sync", str(logs), "--json"])
        return t, json.loads(out)

    first, report = sync()
    print(f"logs root: {len(chats)} conversations, {sum(f.stat().st_size for f in logs.rglob('*') if f.is_file()) / 1e6:.0f} MB")
    print(f"first sync (fresh database, full import): {first:.2f} s, {report['ingest']['messages']} messages")

    for chat in changed:
        gptme_append(chat)
    t_first_touch, report = sync()
    assert report["ingest"]["conversations"] == len(changed), report
    steady = []
    for _ in range(args.runs):
        for chat in changed:
            gptme_append(chat)
        t, report = sync()
        assert report["ingest"]["messages"] == len(changed), report
        steady.append(t)
    t_nothing, report = sync()
    assert report["ingest"]["conversations"] == 0, report

    for chat in changed:
        gptme_append(chat)
    t_import_same, _ = run([sdb, "--db", str(db), "import", str(logs), "--json"])
    fresh = work / "fresh.db"
    t_full, _ = run([sdb, "--db", str(fresh), "import", str(logs), "--json"])
    fresh.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(fresh) + suffix).unlink(missing_ok=True)

    incremental = statistics.median(steady)
    print()
    print(f"{len(changed)} conversations gained one message each (gptme's LogManager.append):")
    print(f"  sessiondb sync, incremental (median of {args.runs}):  {incremental * 1000:8.1f} ms")
    print(f"  sessiondb sync, gptme's first write to them:     {t_first_touch * 1000:8.1f} ms  (events.jsonl is new: read whole)")
    print(f"  sessiondb sync, nothing changed:                 {t_nothing * 1000:8.1f} ms")
    print(f"  sessiondb import (same db, changed ones whole):  {t_import_same * 1000:8.1f} ms")
    print(f"  full re-import into a fresh database:            {t_full * 1000:8.1f} ms")
    print(f"  ratio full re-import / incremental sync:         {t_full / incremental:8.1f}x")

    watch = subprocess.Popen([sdb, "--db", str(db), "sync", str(logs), "--watch", "--json"], stdout=subprocess.PIPE, text=True)
    try:
        watch.stdout.readline()  # the first full pass
        lags = []
        for i in range(args.lag_samples):
            word = f"lagprobe{i}x{os.getpid()}"
            gptme_append(changed[i % len(changed)], f"watch lag probe {word}")
            t0 = time.perf_counter()
            while True:
                out = subprocess.run([sdb, "--db", str(db), "search", word, "--json"], capture_output=True, text=True, check=True)
                if json.loads(out.stdout)["results"]:
                    lags.append(time.perf_counter() - t0)
                    break
                if time.perf_counter() - t0 > 30:
                    raise SystemExit(f"{word} not searchable after 30 s")
                time.sleep(0.005)
    finally:
        watch.send_signal(2)
        watch.wait(timeout=30)
    lags.sort()
    print()
    print(f"watch mode, gptme append -> found by `sessiondb search` ({len(lags)} samples):")
    print(f"  median {statistics.median(lags) * 1000:.1f} ms, p90 {lags[int(len(lags) * 0.9) - 1] * 1000:.1f} ms, max {lags[-1] * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
