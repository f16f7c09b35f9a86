#!/usr/bin/env python3
"""Time gptme's own LogManager.append, one message at a time (the gptme side of bench_append.sh).

    python tools/bench/bench_gptme_append.py [--sync] LOGS_ROOT CHAT_ID REPEATS
    python tools/bench/bench_gptme_append.py --generate N [--events] [--seed S] LOGS_ROOT CHAT_ID

Timing mode: ``LogManager.load(LOGS_ROOT/CHAT_ID, lock=True)`` once (not timed), then REPEATS
calls of ``manager.append(Message("user", "benchmark message I", quiet=True))``, each timed on
its own with time.perf_counter.  quiet=True makes gptme skip printing the message, so terminal
output is not part of the time.  What one append does in gptme 0.35.1: the line is appended to
conversation.jsonl (no fsync: LogManager.append calls write() with sync=False), then one
message_append event is appended to events.jsonl under its lock, and every 50th event a
checkpoint with the whole message list is written and the event log compacted (fsynced).
With --sync each timed call is ``append`` followed by ``manager.write(sync=True)``, which is how
gptme's chat loop, server and TUI make a turn durable (fsync of the transcript and the event log,
then of their directories): the durability sessiondb's append gives, for comparison.
Prints one JSON object: median/min/p90/max/mean ms, the first append's ms, the samples, the
number of messages before the first append, and which samples wrote a checkpoint.

Generate mode: writes LOGS_ROOT/CHAT_ID/conversation.jsonl with N messages (a system message,
then user and assistant taking turns; about 500 bytes of content on average, deterministic for
a seed) through gptme's own ``Log(messages).write_jsonl``, i.e. a ``Message.to_dict()`` JSON
line per message.  With --events it also writes the events.jsonl gptme would have left after
appending those N messages one by one: the latest checkpoint (every 50th event, holding every
message up to it) followed by the message_append events since, written with gptme's eventlog
helpers (append_event, build_message_append_event, write_checkpoint).  Without --events there is
no event log, and gptme starts one at seq 1 on the first append.

The environment is pinned before gptme is imported: TZ=UTC, and HOME / XDG_CONFIG_HOME /
XDG_DATA_HOME pointing into a temporary directory (so no user config is read), GPTME_LOGS_HOME
set to LOGS_ROOT.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

WORDS = (
    "the a an of to and in that is for it with as on be this by are from or at "
    "function value file list error test build run config module parser index "
    "database query table column row schema migration cache buffer stream thread "
    "process request response server client handler session token message branch "
    "commit merge rebase patch diff release version import export reader writer "
    "check update change add remove rename return call create open close read "
    "naïve café Größe данные 日本語 → ✓ 🚀"
).split()


def pin_environment(logs_root: Path) -> None:
    home = tempfile.mkdtemp(prefix="bench-gptme-home.")
    os.environ.update(
        {
            "GPTME_LOGS_HOME": str(logs_root),
            "HOME": home,
            "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
            "TZ": "UTC",
        }
    )
    if hasattr(time, "tzset"):
        time.tzset()


def content(rng: random.Random) -> str:
    """About 500 characters on average (100 to 900), words and the odd line break."""
    target = rng.randint(100, 900)
    out: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
        if rng.random() < 0.03:
            out.append("\n\n")
    return " ".join(out)[:target]


def generate(logs_root: Path, chat_id: str, n: int, events: bool, seed: int) -> dict:
    from datetime import datetime, timedelta

    from gptme.logmanager import Log
    from gptme.logmanager import eventlog
    from gptme.message import Message

    rng = random.Random(seed * 1_000_003 + n)
    logdir = logs_root / chat_id
    logdir.mkdir(parents=True, exist_ok=True)
    start = datetime(2026, 7, 1, 9, 0, 0)
    messages = []
    for i in range(n):
        role = "system" if i == 0 else ("user" if i % 2 else "assistant")
        messages.append(Message(role, content(rng), timestamp=start + timedelta(seconds=7 * i)))
    Log(messages).write_jsonl(logdir / "conversation.jsonl")

    last_seq = 0
    if events:
        # gptme's sequence after n appends from an empty log: one seq per append, and one more
        # for the checkpoint that follows every append whose seq is a multiple of 50.
        seq, checkpoint = 0, None  # checkpoint: (its seq, messages it holds)
        for count in range(1, n + 1):
            seq += 1
            if eventlog.should_checkpoint(seq):
                seq += 1
                checkpoint = (seq, count)
        first_after = 1
        if checkpoint is not None:
            cp_seq, cp_count = checkpoint
            # The append event just before it (dropped again by the compaction), so that
            # write_checkpoint, which takes the next seq, writes it with gptme's own seq.
            eventlog.append_event(logdir, eventlog.build_message_append_event(cp_seq - 1, messages[cp_count - 1]))
            written = eventlog.write_checkpoint(logdir, [m.to_dict() for m in messages[:cp_count]])
            assert written["seq"] == cp_seq, (written["seq"], cp_seq)
            first_after = cp_count
        for offset, message in enumerate(messages[first_after if checkpoint else 0 :]):
            s = (checkpoint[0] + 1 + offset) if checkpoint else (1 + offset)
            eventlog.append_event(logdir, eventlog.build_message_append_event(s, message))
        last_seq = seq
        assert eventlog.sequence_number(logdir) == seq + 1, (eventlog.sequence_number(logdir), seq + 1)
    path = logdir / "conversation.jsonl"
    size = path.stat().st_size
    events_size = (logdir / "events.jsonl").stat().st_size if events else 0
    return {"messages": n, "conversation_bytes": size, "events_bytes": events_size, "last_seq": last_seq}


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    k = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[k - 1]


def summarize(samples_ms: list[float], checkpoints: list[int], messages_before: int) -> dict:
    s = sorted(samples_ms)
    return {
        "repeats": len(samples_ms),
        "messages_before": messages_before,
        "median_ms": round(statistics.median(s), 4),
        "min_ms": round(s[0], 4),
        "p90_ms": round(percentile(s, 90), 4),
        "max_ms": round(s[-1], 4),
        "mean_ms": round(statistics.fmean(s), 4),
        "first_ms": round(samples_ms[0], 4),
        "checkpoint_samples": checkpoints,
        "checkpoint_ms": [round(samples_ms[i], 4) for i in checkpoints],
        "samples_ms": [round(x, 4) for x in samples_ms],
    }


def bench(logs_root: Path, chat_id: str, repeats: int, sync: bool) -> dict:
    from datetime import datetime, timedelta

    from gptme.logmanager import LogManager
    from gptme.logmanager import eventlog
    from gptme.message import Message

    logdir = logs_root / chat_id
    manager = LogManager.load(logdir, lock=True)
    before = len(manager.log.messages)
    seq = eventlog.sequence_number(logdir)  # the seq the first append's event will get
    start = datetime(2026, 7, 16, 10, 0, 0)
    msgs = [
        Message("user", f"benchmark message {i}", timestamp=start + timedelta(seconds=i), quiet=True)
        for i in range(repeats)
    ]
    samples: list[float] = []
    checkpoints: list[int] = []
    perf = time.perf_counter
    for i, msg in enumerate(msgs):
        t0 = perf()
        manager.append(msg)
        if sync:
            manager.write(sync=True)
        samples.append((perf() - t0) * 1000.0)
        if eventlog.should_checkpoint(seq):
            checkpoints.append(i)
            seq += 1
        seq += 1
    assert len(manager.log.messages) == before + repeats
    manager._release_lock()
    out = summarize(samples, checkpoints, before)
    import importlib.metadata

    out["gptme"] = importlib.metadata.version("gptme")
    out["sync"] = sync
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs_root", type=Path)
    ap.add_argument("chat_id")
    ap.add_argument("repeats", type=int, nargs="?")
    ap.add_argument("--generate", type=int, metavar="N", help="write a conversation of N messages instead")
    ap.add_argument("--events", action="store_true", help="with --generate: also write gptme's events.jsonl")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sync", action="store_true", help="time append + write(sync=True)")
    args = ap.parse_args()
    logs_root = args.logs_root.resolve()
    pin_environment(logs_root)
    if args.generate is not None:
        if args.repeats is not None:
            ap.error("--generate takes no REPEATS")
        if args.generate < 1:
            ap.error("--generate needs N >= 1")
        print(json.dumps(generate(logs_root, args.chat_id, args.generate, args.events, args.seed)))
        return 0
    if args.repeats is None or args.repeats < 1:
        ap.error("REPEATS (>= 1) is required")
    if not (logs_root / args.chat_id / "conversation.jsonl").is_file():
        print(f"{logs_root / args.chat_id}/conversation.jsonl: not found", file=sys.stderr)
        return 2
    print(json.dumps(bench(logs_root, args.chat_id, args.repeats, args.sync)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
