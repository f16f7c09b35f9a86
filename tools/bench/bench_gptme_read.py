#!/usr/bin/env python3
"""Time gptme itself reading every conversation in a logs root.

    python tools/bench/bench_gptme_read.py LOGS_DIR

For each ``LOGS_DIR/<chat_id>/conversation.jsonl`` (sorted by name) calls
``gptme.logmanager.Log.read_jsonl`` and counts the messages.  gptme is imported
and the file list is built before the clock starts (time.perf_counter), so the
time is reading and parsing only.  Prints one JSON object:
{"seconds": ..., "conversations": ..., "messages": ...}.

Log.read_jsonl only reads; it does not create workspace/ or other files the way
LogManager.load does.  gptme's warnings (malformed lines) go to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from gptme.logmanager import Log


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root = Path(sys.argv[1])
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2
    paths = sorted(p / "conversation.jsonl" for p in root.iterdir() if (p / "conversation.jsonl").is_file())

    t0 = time.perf_counter()
    messages = 0
    for path in paths:
        messages += len(Log.read_jsonl(path).messages)
    seconds = time.perf_counter() - t0

    print(json.dumps({"seconds": round(seconds, 4), "conversations": len(paths), "messages": messages}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
