#!/usr/bin/env python3
"""Drive real gptme (its LogManager) on one conversation, one command per line of stdin.

    python tools/oracle/gptme_actor.py LOGDIR

For the trust and soak tests: they play a live gptme session step by step, including the
moments gptme 0.35.1 leaves open (it reads a transcript before it takes `.lock`). Each command
is answered by one line on stdout: `ok` (with details) once gptme has done it — so an `ok` to
`append` means gptme acknowledged the message — or `error <why>`. Each session, from `load` or
`read` to `release`, runs in a forked process of its own, as separate gptme runs do.

    load              LogManager.load(LOGDIR, create=True): read the transcript, take `.lock`
                      (retried for up to 30 s while another process holds it, as a person would)
    read              only read the transcript into memory, as load does before locking
    lock              take `.lock` for what was read (gptme's load, second half)
    release           let go of `.lock`; the in-memory copy stays
    append TEXT       append a user message with content TEXT
    undo N            undo N messages
    edit-drop-last    replace the log with all but its last message (a `message_edit` event)
    branch NAME       create branch NAME from the current log and switch to it
    quit
"""
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    logdir = Path(sys.argv[1]).resolve()
    home = tempfile.mkdtemp()
    os.environ.update({"GPTME_LOGS_HOME": str(logdir.parent), "HOME": home, "XDG_CONFIG_HOME": home, "XDG_DATA_HOME": home})
    from gptme.logmanager import LogManager
    from gptme.logmanager.manager import Log
    from gptme.message import Message

    manager = None
    stale = None

    # gptme prints messages as it appends them: replies get a stdout of their own.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def reply(text: str) -> None:
        replies.write(text + "\n")
        replies.flush()

    def retrying(take):
        # gptme refuses a conversation another process holds (sessiondb writing it, say): as a
        # person would, try again shortly, for up to 30 s.
        deadline = time.monotonic() + 30
        while True:
            try:
                return take()
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def readline():
        # Unbuffered, so that a forked session and its parent never read ahead of each other.
        line = bytearray()
        while True:
            byte = os.read(0, 1)
            if not byte:
                return line.decode() if line else None
            if byte == b"\n":
                return line.decode()
            line += byte

    def session() -> bool:
        # Each session (load .. release) runs in a process of its own, as separate gptme runs
        # do: gptme 0.35.1 takes a `.lock` naming its own PID for a lock it already holds, so
        # one process that locks, lets go and locks again could skip the lock altogether.
        pid = os.fork()
        if pid == 0:
            return True
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == QUIT:
            sys.exit(0)
        return False

    QUIT = 3
    in_session = False
    while (raw := readline()) is not None:
        command, _, arg = raw.partition(" ")
        if command in ("load", "read") and not in_session:
            if not session():
                continue
            in_session = True
        try:
            if command == "load":
                manager = retrying(lambda: LogManager.load(logdir, create=True))
                reply(f"ok {len(manager.log)}")
            elif command == "read":
                # LogManager.load, first half: the transcript is read before `.lock` is taken.
                path = logdir / "conversation.jsonl"
                stale = Log.read_jsonl(path) if path.exists() else Log([])
                reply(f"ok {len(stale.messages)}")
            elif command == "lock":
                # LogManager.load, second half: lock and keep what was read (as load does).
                manager = retrying(lambda: LogManager(list(stale.messages), logdir=logdir, branch="main", lock=True))
                if stale.messages:
                    branch_log = manager._branches["main"]
                    manager._branches["main"] = branch_log.replace(
                        persisted=stale.persisted, persisted_path=stale.persisted_path, persisted_size=stale.persisted_size
                    )
                reply(f"ok {len(manager.log)}")
            elif command == "release":
                manager._release_lock()
                reply("ok")
                if in_session:
                    os._exit(0)
            elif command == "append":
                manager.append(Message("user", arg))
                reply("ok")
            elif command == "undo":
                manager.undo(int(arg), quiet=True)
                reply("ok")
            elif command == "edit-drop-last":
                manager.edit(list(manager.log)[:-1])
                reply("ok")
            elif command == "branch":
                manager.branch(arg)
                reply("ok")
            elif command == "quit":
                if manager is not None:
                    manager._release_lock()
                reply("ok")
                if in_session:
                    os._exit(QUIT)
                break
            else:
                reply(f"error unknown command {command!r}")
        except Exception as e:  # noqa: BLE001 - reported to the test, which decides
            reply(f"error {type(e).__name__}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
