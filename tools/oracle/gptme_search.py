#!/usr/bin/env python3
"""gptme's substring match, as the oracle of sessiondb's literal search.

    $GPTME_PYTHON tools/oracle/gptme_search.py LOGS_ROOT QUERY...

For every conversation directory (``LOGS_ROOT/*/conversation.jsonl``), loads it with gptme's
``LogManager.load(dir, lock=False)`` and, for each query, counts the messages of every branch
and view whose content holds it by gptme's own test (``query.lower() in msg.content.lower()``,
from ``gptme.tools.chats._get_matching_messages``), each distinct content once (sessiondb keeps
a line several files hold once). Prints one JSON document: {query: {chat_id: count}}, and under
"unreadable" the conversations gptme cannot load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gptme.logmanager import LogManager


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    queries = sys.argv[2:]
    found: dict[str, dict[str, int]] = {q: {} for q in queries}
    unreadable: list[str] = []
    for transcript in sorted(root.glob("*/conversation.jsonl")):
        chat = transcript.parent
        try:
            manager = LogManager.load(chat, lock=False)
        except Exception:  # noqa: BLE001 - a conversation gptme cannot load is reported
            unreadable.append(chat.name)
            continue
        logs = list(manager._branches.values()) + list(manager._views.values())
        lines = {json.dumps(m.to_dict()): m for log in logs for m in log.messages if isinstance(m.content, str)}
        for q in queries:
            n = sum(1 for m in lines.values() if q.lower() in m.content.lower())
            if n:
                found[q][chat.name] = n
    print(json.dumps({"found": found, "unreadable": unreadable}))


if __name__ == "__main__":
    main()
