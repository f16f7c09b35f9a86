#!/usr/bin/env python3
"""Apply an operation script to a gptme logs root with real gptme's LogManager.

    python tools/oracle/gptme_ops.py LOGS_ROOT SCRIPT.json

The oracle side of sessiondb's differential operation tests: the same script is run here and
through the sessiondb binary, and the resulting directories are compared. SCRIPT.json is a
list of operations, each applied with a freshly loaded LogManager (as separate gptme runs are):
    {"op": "new", "id": ID}
    {"op": "append", "id": ID, "role": R, "content": C, "timestamp": ISO, "branch": B,
     "pinned": bool, "hide": bool, "ttl": N, "call_id": S, "metadata": {...}, "files": [paths]}
    {"op": "undo", "id": ID, "n": N, "branch": B}
    {"op": "edit", "id": ID, "branch": B, "messages": [message objects as for append]}
    {"op": "edit_unchanged", "id": ID, "branch": B}   (an edit that changes nothing: nothing
                                                    happens; sessiondb makes no backup of it,
                                                    where LogManager.edit would)
    {"op": "edit_replace", "id": ID, "branch": B, "old": S, "new": S}
                                                    (edit: S replaced in every message's content)
    {"op": "branch", "id": ID, "name": NAME, "from": B}   (gptme writes it on the next write)
    {"op": "view_create", "id": ID, "name": NAME, "messages": [...]}
    {"op": "view_use", "id": ID, "name": NAME}      {"op": "view_off", "id": ID}
    {"op": "mark", "id": ID, "label": LABEL}        (/backtrack mark)
    {"op": "backtrack", "id": ID, "target": T, "summary_timestamp": ISO}
    {"op": "rename", "id": ID, "name": NAME}
    {"op": "fork", "id": ID, "new_id": NEW}         (LogManager.fork)
    {"op": "fork_at_turn", "id": ID, "turn": N, "new_id": NEW}   (gptme-util chats fork)
Prints nothing on success; exits 1 with the traceback otherwise.
"""
import json
import os
import sys
import tempfile
from pathlib import Path


def main() -> int:
    root = Path(sys.argv[1]).resolve()
    script = json.loads(Path(sys.argv[2]).read_text())
    home = tempfile.mkdtemp()
    os.environ.update({"GPTME_LOGS_HOME": str(root), "HOME": home, "XDG_CONFIG_HOME": home, "XDG_DATA_HOME": home})
    os.environ.setdefault("TZ", "UTC")
    from dateutil.parser import isoparse
    from gptme.logmanager import LogManager
    from gptme.message import Message

    def message(spec: dict) -> Message:
        return Message(
            spec["role"],
            spec["content"],
            timestamp=isoparse(spec["timestamp"]),
            pinned=spec.get("pinned", False),
            hide=spec.get("hide", False),
            ephemeral_ttl=spec.get("ttl"),
            call_id=spec.get("call_id"),
            metadata=spec.get("metadata"),
            files=[Path(f) for f in spec.get("files", [])],
        )

    from gptme.logmanager import rename_conversation
    from gptme.logmanager.conv_checkpoints import resolve_conv_checkpoint, save_conv_checkpoint

    pending_branch = {}
    for step in script:
        op, logdir = step["op"], root / step["id"]
        if op == "new":
            LogManager.load(logdir, create=True)._release_lock()
            continue
        if op == "rename":
            rename_conversation(step["id"], step["name"])
            continue
        if op == "fork_at_turn":
            from gptme.cli.cmd_chats import chats_fork

            chats_fork.callback(id=step["id"], at_turn=step["turn"], fork_name=step["new_id"])
            continue
        branch = step.get("branch", "main")
        if op == "branch":
            pending_branch[(step["id"], step["name"])] = step.get("from", "main")
            continue
        source = pending_branch.pop((step["id"], branch), None)
        if source is not None:
            manager = LogManager.load(logdir, branch=source)
            manager.branch(branch)
        else:
            manager = LogManager.load(logdir, branch=branch)
        if op == "append":
            manager.append(message(step))
        elif op == "undo":
            manager.undo(step.get("n", 1), quiet=True)
        elif op == "edit":
            manager.edit([message(m) for m in step["messages"]])
        elif op == "edit_unchanged":
            pass  # sessiondb's deliberate difference: an unchanged edit does nothing
        elif op == "edit_replace":
            manager.edit([m.replace(content=m.content.replace(step["old"], step["new"])) for m in manager.log.messages])
        elif op == "view_create":
            manager.create_view(step["name"], [message(m) for m in step["messages"]])
        elif op == "view_use":
            manager.switch_view(step["name"])
        elif op == "view_off":
            manager.switch_to_master()
        elif op == "mark":
            save_conv_checkpoint(logdir, len(manager.log.messages), step["label"])
        elif op == "backtrack":
            # What /backtrack does: an edit to the checkpoint's index, then the hidden summary.
            record = resolve_conv_checkpoint(logdir, step["target"])
            removed = len(manager.log.messages) - record.index
            manager.edit(list(manager.log.messages[: record.index]))
            label = "" if record.label.startswith("@") else f" (checkpoint: '{record.label}')"
            summary = f"[Backtracked {removed} message(s) to index {record.index}{label}]"
            manager.append(Message("system", summary, hide=True, timestamp=isoparse(step["summary_timestamp"])))
        elif op == "fork":
            manager.fork(step["new_id"])
        else:
            raise SystemExit(f"unknown op {op!r}")
        manager._release_lock()
    return 0


if __name__ == "__main__":
    sys.exit(main())
