#!/usr/bin/env python3
"""Keep appending messages to conversations with real gptme, recording each acknowledged one.

    python tools/oracle/gptme_appender.py LOGS_ROOT ACK_FILE COUNT ID [ID ...]

For the sync crash and watch tests and benchmarks: opens each conversation ID (creating it when
missing) with gptme's LogManager, then appends COUNT user messages round-robin, contents
"ack <ID> <i>". After each append returns (gptme has written it), the content is written as a
line to ACK_FILE and flushed, so ACK_FILE holds exactly the messages gptme acknowledged. Each
append reloads the conversation, as separate gptme runs do, and releases its lock between
appends so that other writers get a turn. Exits 0 after COUNT appends (or on SIGTERM).
"""
import os
import signal
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    root = Path(sys.argv[1]).resolve()
    ack_path, count, ids = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    home = tempfile.mkdtemp()
    os.environ.update({"GPTME_LOGS_HOME": str(root), "HOME": home, "XDG_CONFIG_HOME": home, "XDG_DATA_HOME": home})
    from gptme.logmanager import LogManager
    from gptme.message import Message

    stop = False

    def load(logdir: Path) -> LogManager:
        # gptme refuses a conversation another process holds (sessiondb writing it out, say):
        # as a person would, try again shortly. gptme reads the transcript and then stats it by
        # name; once in a long CI run that name was missing in between (nothing in sessiondb
        # unlinks or renames a transcript outside an operation, as strace shows), so a missing
        # transcript is also tried again, never created anew, and said on stderr: a transcript
        # that stays gone fails the run, and one that came back changed fails the test's checks.
        deadline = time.monotonic() + 30
        create = not (logdir / "conversation.jsonl").exists()
        while True:
            try:
                return LogManager.load(logdir, create=create)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
            except FileNotFoundError as e:
                if time.monotonic() > deadline:
                    raise
                print(f"gptme_appender: {e}; trying again", file=sys.stderr, flush=True)
                create = False
                time.sleep(0.01)

    def on_term(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    with ack_path.open("a") as ack:
        for i in range(count):
            if stop:
                break
            chat = ids[i % len(ids)]
            manager = load(root / chat)
            content = f"ack {chat} {i}"
            manager.append(Message("user", content))
            manager._release_lock()
            ack.write(content + "\n")
            ack.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
