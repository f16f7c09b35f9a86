#!/usr/bin/env python3
"""Generate gptme conversation-log fixtures for sessiondb's tests.

What it does
------------
Creates a gptme logs root (OUT_DIR) holding a varied set of conversation
directories.  Most of them are written by gptme itself, through its public
Python API (``LogManager``, ``Message``, ``Log``, ``ChatConfig``, the
conversation-checkpoint functions, ``rename_conversation``, ``execute_cmd``
for slash commands, the model-selection-trace API).  No LLM is called and no
network is used: assistant replies and their metadata are supplied by this
script.  A few conversations are HAND-WRITTEN with plain file writes to
imitate logs from older gptme versions and damaged files; those are clearly
marked below (``hand_written_*`` functions) and are NOT gptme output.

After generating, the script verifies the result on a throw-away copy of
OUT_DIR (gptme's readers write files, e.g. an empty ``workspace/``, so they
must not touch OUT_DIR): every conversation and branch loads with
``LogManager.load``; the hand-written damaged ones load with warnings.

How to run
----------
    /path/to/venv/bin/python tools/oracle/gen_fixtures.py OUT_DIR [--force]
    /path/to/venv/bin/python tools/oracle/gen_fixtures.py OUT_DIR --fix-metadata

The venv needs only ``gptme`` (tested with ``gptme==0.35.1``).  OUT_DIR must
not exist or be empty, unless ``--force`` is given (it is then deleted first).
The committed fixtures are produced at a neutral path, gptme's default logs root for a
user ``you`` (the absolute paths gptme writes then name no one's checkout), and copied:

    mkdir -p /home/you/.local/share/gptme
    .venv/bin/python tools/oracle/gen_fixtures.py /home/you/.local/share/gptme/logs --force
    rm -rf tests/fixtures/gptme-logs
    cp -a /home/you/.local/share/gptme/logs tests/fixtures/gptme-logs

``--fix-metadata`` only re-applies what git cannot store to an existing
OUT_DIR, e.g. after a fresh checkout: the fixed mtimes of every
``conversation.jsonl``, the empty directories (hand-written ones and the empty
``branches/`` gptme creates), the modes of the hand-written files and the
0600 modes gptme gives files it writes through temp files.  File mtimes other
than conversation.jsonl's are not restored.

Determinism: message timestamps, conversation.jsonl mtimes and every
hand-written file are fixed.  Things gptme takes from the clock or the process
are not: event ``ts`` values, conv-checkpoint timestamps, the PID in ``.lock``
files; absolute paths (attachments, ``config.toml`` workspace, workspace
symlinks) embed OUT_DIR.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

# ---------------------------------------------------------------------------
# conversation ids (directory names) and the fixed conversation.jsonl mtimes
# (oldest first; gptme lists newest first)
# ---------------------------------------------------------------------------

C_LEGACY_FLAT = "2024-01-15-legacy-flat-tokens"  # hand-written
C_LEGACY_EVENTS = "2025-03-10-legacy-events"  # hand-written
C_MALFORMED = "2025-11-20-malformed-lines"  # hand-written
C_BASIC = "2026-07-01-basic-chat"
C_UNICODE = "2026-07-02-unicode-stress"
C_SURROGATE = "2026-07-02-unicode-lone-surrogate"
C_FLAGS = "2026-07-03-message-flags"
C_ATTACH = "2026-07-04-attachments"
C_BRANCHES = "2026-07-05-branches"
C_FORK = "2026-07-05-branches-fork"
C_EDIT_UNDO = "2026-07-06-edit-and-undo"
C_LONG = "2026-07-07-long-conversation"
C_BACKTRACK = "2026-07-08-backtrack-checkpoints"
C_NAMED = "2026-07-09-named-chat"
C_VIEWS = "2026-07-10-compacted-view"
C_MANUAL_COMPACT = "2026-07-11-manual-compact"
C_TEST = "test-hidden-chat"
C_TMP = "tmp4f2a9c1e"

MTIME_ORDER = [
    C_LEGACY_FLAT,
    C_LEGACY_EVENTS,
    C_MALFORMED,
    C_BASIC,
    C_UNICODE,
    C_SURROGATE,
    C_FLAGS,
    C_ATTACH,
    C_BRANCHES,
    C_FORK,
    C_EDIT_UNDO,
    C_LONG,
    C_BACKTRACK,
    C_NAMED,
    C_VIEWS,
    C_MANUAL_COMPACT,
    C_TEST,
    C_TMP,
]
# 2026-07-01T00:00:00Z, one hour apart
MTIME_BASE = int(datetime(2026, 7, 1, tzinfo=timezone.utc).timestamp())

# hand-written extras that git cannot represent
EMPTY_DIRS = [
    f"{C_MALFORMED}/attachments",
    f"{C_MALFORMED}/workspace/empty-subdir",
]
HAND_WRITTEN_MODES = {
    f"{C_MALFORMED}/conversation.jsonl": 0o644,
    f"{C_MALFORMED}/future-feature.dat": 0o644,
    f"{C_MALFORMED}/private-notes.txt": 0o600,
    f"{C_MALFORMED}/hook.sh": 0o755,
    f"{C_LEGACY_FLAT}/conversation.jsonl": 0o644,
    f"{C_LEGACY_EVENTS}/conversation.jsonl": 0o600,
    f"{C_LEGACY_EVENTS}/events.jsonl": 0o644,
}


def ts(day: int, hour: int, minute: int = 0, second: int = 0, us: int = 0):
    """Fixed, naive local timestamp in July 2026 (what gptme stores)."""
    return datetime(2026, 7, day, hour, minute, second, us)


# ---------------------------------------------------------------------------
# environment isolation -- must run before gptme is imported
# ---------------------------------------------------------------------------


def isolate_environment(out_dir: Path, tmp: Path) -> None:
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    for key in list(os.environ):
        if key.startswith("GPTME_") or key in (
            "MODEL",
            "PYTEST_CURRENT_TEST",  # gptme skips .lock files under pytest
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENROUTER_API_KEY",
        ):
            del os.environ[key]
    os.environ["HOME"] = str(home)
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
    os.environ["XDG_DATA_HOME"] = str(home / ".local" / "share")
    os.environ["XDG_STATE_HOME"] = str(home / ".local" / "state")
    os.environ["XDG_CACHE_HOME"] = str(home / ".cache")
    os.environ["GPTME_LOGS_HOME"] = str(out_dir)
    os.environ["TZ"] = "UTC"
    if hasattr(time, "tzset"):
        time.tzset()
    os.umask(0o022)


# ---------------------------------------------------------------------------
# helpers (gptme imported lazily in main())
# ---------------------------------------------------------------------------

G = None  # namespace with the gptme API, filled in by load_gptme()


def load_gptme():
    global G
    import types

    from gptme.commands import execute_cmd
    from gptme.config import ChatConfig
    from gptme.logmanager import Log, LogManager, rename_conversation
    from gptme.logmanager import eventlog
    from gptme.logmanager.conv_checkpoints import (
        list_conv_checkpoints,
        save_conv_checkpoint,
    )
    from gptme.logmanager.conversations import get_conversations
    from gptme.message import Message, set_output_format
    from gptme.model_attestation import create_selection_trace, set_selection_trace
    from gptme.util.uri import URI

    set_output_format("quiet")  # no terminal rendering of appended messages
    G = types.SimpleNamespace(
        execute_cmd=execute_cmd,
        ChatConfig=ChatConfig,
        Log=Log,
        LogManager=LogManager,
        rename_conversation=rename_conversation,
        eventlog=eventlog,
        list_conv_checkpoints=list_conv_checkpoints,
        save_conv_checkpoint=save_conv_checkpoint,
        get_conversations=get_conversations,
        Message=Message,
        create_selection_trace=create_selection_trace,
        set_selection_trace=set_selection_trace,
        URI=URI,
    )


def M(role, content, when, **kw):
    return G.Message(role, content, timestamp=when, **kw)


def anthropic_meta(inp, out, cache_read=0, cache_creation=0, cost=None, ttft=None,
                   gen=None, tool_ms_by_name=None, model="anthropic/claude-sonnet-4-6"):
    """Metadata in the key order gptme's Anthropic provider + chat loop build."""
    usage = {"input_tokens": inp, "output_tokens": out}
    if cache_read is not None:
        usage["cache_read_tokens"] = cache_read
    if cache_creation is not None:
        usage["cache_creation_tokens"] = cache_creation
    meta = {"model": model, "usage": usage}
    if cost is not None:
        meta["cost"] = cost
    if ttft is not None:
        timings = {"ttft_ms": ttft, "gen_ms": gen}
        if tool_ms_by_name:
            timings["tool_ms"] = round(sum(tool_ms_by_name.values()), 1)
            timings["tool_ms_by_name"] = tool_ms_by_name
        meta["timings"] = timings
    return meta


def openai_meta(inp, out, cache_read=None, cost=None, ttft=None, gen=None,
                model="openrouter/deepseek/deepseek-v4-flash",
                resolved_model=None, served_model=None, reasoning_tokens=None):
    """Metadata in the key order gptme's OpenAI-compatible provider builds."""
    meta = {"model": model}
    if resolved_model:
        meta["resolved_model"] = resolved_model
    if served_model:
        meta["served_model"] = served_model
    usage = {"input_tokens": inp, "output_tokens": out}
    if cache_read is not None:
        usage["cache_read_tokens"] = cache_read
    if reasoning_tokens is not None:
        usage["reasoning_tokens"] = reasoning_tokens
    meta["usage"] = usage
    if cost is not None:
        meta["cost"] = cost
    if ttft is not None:
        meta["timings"] = {"ttft_ms": ttft, "gen_ms": gen}
    return meta


@contextlib.contextmanager
def quiet_stdout():
    """Some gptme commands print through rich even in quiet mode."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield buf


def run_cmd(manager, content, when):
    """Type a slash command exactly like the chat loop does: append, execute."""
    msg = M("user", content, when)
    manager.append(msg)
    with quiet_stdout():
        handled = G.execute_cmd(msg, manager)
    assert handled, content


def cli_chat_config(logdir: Path, workspace: Path, model: str, tools: list[str]):
    """What `gptme` (CLI) does before chatting: ChatConfig.load_or_create + save.

    Creates config.toml and replaces the auto-created empty workspace/ with a
    symlink to the workspace (setup_config_from_cli)."""
    logdir.mkdir(parents=True, exist_ok=True)
    cfg = G.ChatConfig.load_or_create(
        logdir=logdir,
        cli_config=G.ChatConfig(
            model=model,
            tool_format="markdown",
            stream=True,
            interactive=True,
            workspace=workspace,
        ),
    )
    cfg.tools = tools
    cfg.save()
    return cfg


SYSTEM_PROMPT = (
    "You are gptme v0.35.1, a general-purpose AI assistant powered by LLMs.\n"
    "You are designed to help users with programming tasks, such as writing code,"
    " debugging, and learning new concepts.\n\n"
    "# Tools\n\n## shell\n\nExecute shell commands in a stateful bash session."
)


# ---------------------------------------------------------------------------
# conversations written by gptme
# ---------------------------------------------------------------------------


def gen_attachments(out: Path):
    """Server-style chat ("@log" workspace = a real workspace/ directory)
    with attachments stored by gptme in files/<sha256[:16]><suffix>."""
    logdir = out / C_ATTACH
    logdir.mkdir()
    cfg = G.ChatConfig.from_dict(
        {
            "_logdir": logdir,
            "chat": {
                "workspace": "@log",
                "model": "openai/gpt-5.2",
                "tools": ["read", "save", "patch", "shell"],
            },
        }
    )
    cfg.save()
    ws = logdir / "workspace"
    (ws / "notes.md").write_text("# Notes\n\n- first draft\n", encoding="utf-8")
    (ws / "data.csv").write_text("id,name,score\n1,ada,0.5\n2,linus,1e-05\n")
    (ws / "Makefile").write_text("all:\n\tcargo build\n")
    # tiny valid 1x1 PNG
    (ws / "pixel.png").write_bytes(
        bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360f8cfc0000003010100c9fe92ef"
            "0000000049454e44ae426082"
        )
    )
    (ws / "space name.txt").write_text("file name with a space\n")
    (ws / "ünïcödé-名前.txt").write_text("non-ASCII file name\n", encoding="utf-8")
    (ws / "archive.tar.gz").write_bytes(b"\x1f\x8b\x08\x00not really gzip\x00\xff")
    (ws / "deleted-later.txt").write_text("this source file is deleted afterwards\n")

    with G.LogManager.load(C_ATTACH, create=True, initial_msgs=[
        M("system", SYSTEM_PROMPT, ts(4, 9), pinned=True),
    ]) as m:
        m.append(M("user", "Summarise these files.", ts(4, 9, 0, 5),
                   files=[ws / "notes.md", ws / "data.csv", ws / "Makefile"]))
        m.append(M("assistant", "notes.md is a draft, data.csv has 2 rows, the "
                   "Makefile runs cargo.", ts(4, 9, 0, 20),
                   metadata=openai_meta(2400, 61, cache_read=0, cost=0.00363,
                                        model="openai/gpt-5.2",
                                        served_model="gpt-5.2-2026-06-01",
                                        ttft=640.2, gen=1210.9)))
        m.append(M("user", "And the image, the odd names and the archive?",
                   ts(4, 9, 1, 0),
                   files=[ws / "pixel.png", ws / "space name.txt",
                          ws / "ünïcödé-名前.txt", ws / "archive.tar.gz",
                          ws / "deleted-later.txt"]))
        m.append(M("assistant", "A 1x1 PNG, two text files, and a broken gzip.",
                   ts(4, 9, 1, 12),
                   metadata=openai_meta(3100, 14, cache_read=2304, cost=0.00122,
                                        model="openai/gpt-5.2")))
        # same path, new content -> second hash; a missing file gets no hash;
        # URIs are kept as-is and never stored
        (ws / "notes.md").write_text("# Notes\n\n- second draft\n- more\n")
        m.append(M("user", "I edited notes.md, look again. Also see the link.",
                   ts(4, 9, 2, 0),
                   files=[ws / "notes.md", ws / "does-not-exist.txt",
                          G.URI("https://example.com/diagram.png")]))
        m.append(M("assistant", "The second draft adds one bullet.", ts(4, 9, 2, 9),
                   metadata=openai_meta(3300, 9, cache_read=3072, cost=0.00061,
                                        model="openai/gpt-5.2")))
        # ends with a user message: gptme would answer straight away on resume
        m.append(M("user", "Thanks! Now write a summary to summary.md",
                   ts(4, 9, 3, 0)))
    (ws / "deleted-later.txt").unlink()


def gen_basic(out: Path):
    """A CLI-style chat: config.toml + workspace symlink (what `gptme` writes
    via setup_config_from_cli), model_selection_trace.json (written by
    LogManager.write when a trace is active), pinned system prompt, several
    exchanges with full metadata (usage incl. cache tokens, cost, timings)."""
    logdir = out / C_BASIC
    cli_chat_config(logdir, out / C_ATTACH / "workspace",
                    "anthropic/claude-sonnet-4-6",
                    ["read", "save", "patch", "shell", "python"])
    trace = G.create_selection_trace(
        requested_model="sonnet",
        resolved_model="anthropic/claude-sonnet-4-6",
        source_kind="cli",
        source_value="sonnet",
        transport_provider="anthropic",
        backend_provider="anthropic",
        alias_target="anthropic/claude-sonnet-4-6",
        resolution_notes=["resolved model alias for metadata lookup"],
    )
    trace.selected_at = datetime(2026, 7, 1, 8, 0, 0, tzinfo=timezone.utc)
    G.set_selection_trace(trace)
    try:
        with G.LogManager.load(logdir, create=True, initial_msgs=[
            M("system", SYSTEM_PROMPT, ts(1, 10), pinned=True),
        ]) as m:
            m.append(M("user", "What is the capital of Sweden?", ts(1, 10, 0, 5)))
            m.append(M("assistant", "The capital of Sweden is Stockholm.",
                       ts(1, 10, 0, 7, 250000),
                       metadata=anthropic_meta(1820, 12, cache_read=0,
                                               cache_creation=1790, cost=0.0068,
                                               ttft=812.4, gen=301.7)))
            m.append(M("user", "List the files here.", ts(1, 10, 1, 0)))
            m.append(M("assistant", "```shell\nls\n```", ts(1, 10, 1, 3, 1),
                       metadata=anthropic_meta(1851, 9, cache_read=1790,
                                               cache_creation=0, cost=0.000684,
                                               ttft=512.0, gen=88.3,
                                               tool_ms_by_name={"shell": 41.7})))
            m.append(M("system", "Ran command: `ls`\n\n```stdout\nMakefile\n"
                       "data.csv\nnotes.md\n```", ts(1, 10, 1, 4),
                       call_id="toolu_01XyZabc"))
            m.append(M("assistant", "There are three files: Makefile, data.csv "
                       "and notes.md.", ts(1, 10, 1, 6),
                       metadata=anthropic_meta(1902, 19, cache_read=1790,
                                               cache_creation=95, cost=0.001277,
                                               ttft=455.5, gen=190.25)))
            m.append(M("user", "Thanks, that's all.", ts(1, 10, 2, 0)))
            m.append(M("assistant", "You're welcome!", ts(1, 10, 2, 1),
                       metadata=anthropic_meta(1930, 5, cache_read=1885,
                                               cache_creation=0, cost=0.000641,
                                               ttft=390.0, gen=35.0)))
    finally:
        G.set_selection_trace(None)


UNICODE_CONTENTS = [
    "CJK: 中文 日本語のテキスト 한국어 — and full-width ＡＢＣ１２３",
    "Emoji (astral plane): 😀 🎉 🦀 👩‍👩‍👧‍👦 🇸🇪 🏳️‍🌈 1️⃣; math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢; rare CJK 𠜎𠜱",
    "RTL: مرحبا بالعالم \u200fשלום עולם\u200e mixed עברית and English",
    "Combining: e\u0301 vs \u00e9, n\u0303, a\u030a, Z\u0351\u0307\u0359a\u0364l\u0300go",
    "Controls: NUL[\x00] SOH[\x01] US[\x1f] DEL[\x7f] TAB[\t] CR[\r] CRLF[\r\n] "
    "VT[\x0b] FF[\x0c] BS[\x08] ESC[\x1b[31mred\x1b[0m] C1[\x85\x9f]",
    "Separators: LS[\u2028] PS[\u2029] BOM[\ufeff] ZWSP[\u200b] NBSP[\u00a0] "
    "replacement[\ufffd] noncharacter[\uffff]",
    'Quotes "double" \'single\' `back` “curly” «guillemets» and a backslash \\ '
    "and a literal backslash-n: \\n (two characters), \\t, \\u0041, \\\\ double",
    'Triple quotes """ inside, and \'\'\' too, and a TOML end: """\nnext line',
    "Code fence:\n```python\ndef f():\n    return \"\\n\"  # '''\n```\n"
    "and a nested ````markdown fence ```` plus </message> <b>html</b> & [[messages]]",
    "",
    "   \n\t  \n ",
    "trailing whitespace   \n\n",
    "\n\nleading newlines",
    "a" * 3000 + " long line end",
    "Slashes / not escaped: https://example.com/a/b?c=d&e=f#g and C:\\Users\\x",
]


def gen_unicode(out: Path):
    """Content that stresses JSON escaping (ensure_ascii, surrogate pairs,
    control chars, DEL, U+2028) and TOML export (\\n, \"\"\")."""
    with G.LogManager.load(C_UNICODE, create=True) as m:
        for i, content in enumerate(UNICODE_CONTENTS):
            role = "user" if i % 2 == 0 else "assistant"
            meta = None
            if role == "assistant":
                meta = {"model": "anthropic/claude-haiku-4-5",
                        "note": "métadonnées ünïcode ✓ 🚀", "key with \"quotes\"": "\\"}
            m.append(M(role, content, ts(2, 11, i, 0, i * 1111), metadata=meta))


def gen_surrogate(out: Path):
    """gptme writes lone surrogates (e.g. from a broken paste) as \\udXXX
    escapes; strict JSON/UTF-8 parsers reject them."""
    with G.LogManager.load(C_SURROGATE, create=True) as m:
        m.append(M("user", "lone high surrogate: [\ud83d] and low: [\ude00]",
                   ts(2, 15)))
        m.append(M("assistant", "A valid pair for contrast: [\U0001f600]",
                   ts(2, 15, 0, 3)))


def gen_flags(out: Path):
    """Message flags (pinned, hide, ui_only, ephemeral_ttl, call_id),
    number formatting and rich nested metadata."""
    with G.LogManager.load(C_FLAGS, create=True, initial_msgs=[
        M("system", SYSTEM_PROMPT, ts(3, 8), pinned=True),
        M("system", "# Workspace context\nREADME.md: sessiondb", ts(3, 8, 0, 0, 1),
          pinned=True, hide=True),
    ]) as m:
        m.append(M("user", "Run the tests and show me the artifacts.", ts(3, 8, 1)))
        m.append(M("assistant", "<thinking>They want test output.</thinking>\n"
                   "```shell\ncargo test\n```", ts(3, 8, 1, 2),
                   metadata={
                       "model": "anthropic/claude-opus-4-6",
                       "usage": {"input_tokens": 12000, "output_tokens": 42,
                                 "cache_read_tokens": 11000,
                                 "cache_creation_tokens": 0},
                       "cost": 1e-05,
                       "reasoning_effort": "high",
                       "timings": {"ttft_ms": 0.1, "gen_ms": 1e+16,
                                   "tool_ms": 0.0123456789,
                                   "tool_ms_by_name": {"shell": 0.0123456789}},
                       "thought_signatures": {"toolu_01": "c2lnbmF0dXJl"},
                   }))
        m.append(M("system", "Ran command: `cargo test`\n\n```stdout\n"
                   "test result: ok. 12 passed\n```", ts(3, 8, 1, 9),
                   call_id="toolu_01Ab\"q'\\x", ephemeral_ttl=2,
                   metadata={"tool": "shell",
                             "artifacts": [
                                 {"source_type": "workspace", "path": "target/report.html",
                                  "kind": "html", "title": "Test report",
                                  "mime_type": "text/html", "tool": "shell"},
                                 {"source_type": "external",
                                  "url": "https://ci.example.com/run/42"},
                             ]}))
        m.append(M("system", "⏳ Compacting conversation…", ts(3, 8, 1, 10),
                   ui_only=True, hide=True))
        m.append(M("assistant", "All 12 tests pass; the report is at "
                   "target/report.html.", ts(3, 8, 1, 15),
                   metadata={
                       "model": "anthropic/claude-opus-4-6",
                       "usage": {"input_tokens": 12100, "output_tokens": 17},
                       "cost": 0.1,
                       "panel_hints": [{"id": "report", "kind": "iframe",
                                        "title": "Report", "src": "target/report.html",
                                        "status": "running", "status_message": None,
                                        "sandbox": ["allow-scripts"], "resize": "auto"}],
                       "max_steps_stop": False,
                       "compaction_checkpoint_needs_continuation": True,
                       "input_log_messages": 7,
                       "input_log_digest": "sha256:0f1e2d3c",
                       "numbers": {"int": 42, "negative": -7, "zero_float": 0.0,
                                   "neg_zero": -0.0, "one": 1.0, "big_int": 2 ** 70,
                                   "tiny": 5e-324, "huge": 1.7976931348623157e308,
                                   "third": 1 / 3, "exp": 1.5e-07, "null": None,
                                   "list": [1, 2.5, "three", None, True, [], {}]},
                   }))
        m.append(M("user", "<system-reminder>ephemeral note</system-reminder>",
                   ts(3, 8, 2), ephemeral_ttl=0, hide=True))
        m.append(M("user", "Voice: call me back.", ts(3, 8, 3),
                   metadata={"voice_call": {"call_sid": "CA123", "source": "twilio",
                                            "duration_s": 12.5}}))
        m.append(M("assistant", "Interrupted by user", ts(3, 8, 3, 1)))
        m.append(M("system", "# Replacement prompt (model switch)", ts(3, 8, 4),
                   pinned=True,
                   metadata={"prompt_generation": "gen-0002",
                             "resume_key": "agent_profile"}))


def gen_branches(out: Path):
    """Branches created with LogManager.branch(); appends on each; back to
    main.  Branch events go to branches/<name>/events.jsonl."""
    with G.LogManager.load(C_BRANCHES, create=True) as m:
        m.append(M("user", "Give me a name for a SQLite import tool.", ts(5, 14)))
        m.append(M("assistant", "How about `sessiondb`?", ts(5, 14, 0, 4),
                   metadata=anthropic_meta(200, 8, cost=0.00072)))
        m.branch("alt-approach")
        m.append(M("user", "Something more playful?", ts(5, 14, 1)))
        m.append(M("assistant", "`logjam`!", ts(5, 14, 1, 2),
                   metadata=anthropic_meta(230, 5, cost=0.00076)))
        m.branch("experiment.v2")  # forks from alt-approach's current log
        m.append(M("user", "Shorter still.", ts(5, 14, 2)))
        m.append(M("assistant", "`sdb`", ts(5, 14, 2, 1)))
        m.branch("empty-copy")  # created, nothing appended
        m.branch("main")
        m.append(M("user", "I'll go with sessiondb. Thanks!", ts(5, 14, 3)))
        m.append(M("assistant", "Great choice.", ts(5, 14, 3, 1),
                   metadata=anthropic_meta(260, 4, cost=0.0008)))


def gen_fork(out: Path):
    """LogManager.fork(): copies the whole directory (incl. .lock, branches,
    events) to a new chat id, then writes."""
    with G.LogManager.load(C_BRANCHES) as m:
        m.fork(C_FORK)
        m.append(M("user", "(in the fork) And a logo?", ts(5, 16)))


def gen_edit_undo(out: Path):
    """LogManager.edit() -> main-edit-<n> backups; LogManager.undo() ->
    main-undo-<n> backups; `/undo` on top; a command on top (no backup);
    the real `/undo` slash command; undo and edit on a branch."""
    with G.LogManager.load(C_EDIT_UNDO, create=True) as m:
        for i in range(4):
            m.append(M("user", f"question {i}", ts(6, 9, i)))
            m.append(M("assistant", f"answer {i}", ts(6, 9, i, 30),
                       metadata=anthropic_meta(100 + i, 10, cost=0.0001)))
        # edit: fix a typo in the first answer -> branches/main-edit-0.jsonl
        msgs = list(m.log.messages)
        msgs[1] = msgs[1].replace(content="answer 0 (edited)")
        m.edit(msgs)
        # second edit: drop the last exchange -> main-edit-1
        m.edit(list(m.log.messages)[:-2])
        # plain undo of 1 -> main-undo-0, event {"n": 1}
        m.undo(1, quiet=True)
        # a "/undo" message on top: it is removed first, backup main-undo-1,
        # then 2 more are popped; the event still says {"n": 2}
        m.append(M("user", "/undo", ts(6, 9, 10)))
        m.undo(2, quiet=True)
        # a command on top: no backup branch is written
        m.append(M("user", "question 5", ts(6, 9, 11)))
        m.append(M("user", "/tokens", ts(6, 9, 11, 1)))
        m.undo(1, quiet=True)
        m.append(M("assistant", "answer 5", ts(6, 9, 11, 2)))
        # the real slash command, as typed in the chat loop: auto-undo removes
        # "/undo" plus one message (backup), then cmd_undo removes one more
        # (another backup) -- 3 messages gone, two {"n": 1} events
        m.append(M("user", "question 6", ts(6, 9, 12)))
        m.append(M("assistant", "answer 6", ts(6, 9, 12, 5)))
        run_cmd(m, "/undo", ts(6, 9, 13))
        # undo and edit on a branch -> side-undo-0, side-edit-0
        m.branch("side")
        m.append(M("user", "side question", ts(6, 9, 14)))
        m.append(M("assistant", "side answer", ts(6, 9, 14, 1)))
        m.undo(1, quiet=True)
        side = list(m.log.messages)
        side[-1] = side[-1].replace(content="side question (edited)")
        m.edit(side)
        m.branch("main")
        m.append(M("assistant", "final answer on main", ts(6, 9, 15)))


def gen_long(out: Path):
    """130+ appends: event-log checkpoints at seq 51, 101 and compaction
    (events.jsonl then starts at the latest checkpoint, rewritten via mkstemp
    -> mode 0600), plus an undo and an edit after the last checkpoint."""
    with G.LogManager.load(C_LONG, create=True, initial_msgs=[
        M("system", "You are a counting assistant.", ts(7, 6), pinned=True),
    ]) as m:
        for i in range(66):
            m.append(M("user", f"Count to {i + 1}.", ts(7, 6 + i // 30, (i * 2) % 60)))
            m.append(M("assistant", " ".join(str(k) for k in range(1, i + 2))
                       if i < 20 else f"1 ... {i + 1}",
                       ts(7, 6 + i // 30, (i * 2) % 60, 30),
                       metadata=openai_meta(50 + 4 * i, 3 + i, cost=round(1e-06 * (i + 1), 9),
                                            model="openrouter/deepseek/deepseek-v4-flash",
                                            resolved_model="openrouter/deepseek/deepseek-v4-flash@together"
                                            if i % 10 == 0 else None)))
        m.undo(1, quiet=True)
        msgs = list(m.log.messages)
        msgs[-1] = msgs[-1].replace(content="Count to 66, please.")
        m.edit(msgs)
        m.append(M("assistant", "1 ... 66", ts(7, 9, 0)))


def gen_backtrack(out: Path):
    """Conversation checkpoints (conv-checkpoints.jsonl) through the real
    /backtrack command and through save_conv_checkpoint(); the rewind uses
    LogManager.edit (main-edit-0) and appends a hidden summary."""
    with G.LogManager.load(C_BACKTRACK, create=True) as m:
        m.append(M("user", "Let's refactor parser.rs.", ts(8, 13)))
        m.append(M("assistant", "Plan: split lexing from parsing.", ts(8, 13, 0, 5)))
        run_cmd(m, "/backtrack mark before-refactor", ts(8, 13, 1))
        m.append(M("user", "Do it.", ts(8, 13, 2)))
        m.append(M("assistant", "```patch parser.rs\n<<<<<<< ORIGINAL\nfn parse()\n"
                   "=======\nfn lex()\n>>>>>>> UPDATED\n```", ts(8, 13, 2, 10)))
        run_cmd(m, "/backtrack mark", ts(8, 13, 3))  # auto label "cp2"
        m.append(M("user", "That broke everything.", ts(8, 13, 4)))
        G.save_conv_checkpoint(m.logdir, len(m.log.messages), "broken état ✗")
        run_cmd(m, "/backtrack before-refactor --reason the patch broke the build",
                ts(8, 13, 5))
        m.append(M("user", "Try a smaller change this time.", ts(8, 13, 6)))
        m.append(M("assistant", "Okay, only extracting one function.", ts(8, 13, 6, 4)))


def gen_named(out: Path):
    """A display name set the way `/rename NAME` does (ChatConfig.from_logdir,
    .name = ..., .save()) on a CLI-style chat with a config.toml."""
    logdir = out / C_NAMED
    cli_chat_config(logdir, out / C_ATTACH / "workspace",
                    "openrouter/deepseek/deepseek-v4-flash", ["shell", "read"])
    with G.LogManager.load(logdir, create=True) as m:
        m.append(M("user", "Help me plan the sessiondb export.", ts(9, 17)))
        m.append(M("assistant", "Sure: read rows, rebuild lines, compare bytes.",
                   ts(9, 17, 0, 8),
                   metadata=openai_meta(900, 12, cache_read=0, cost=0.000102,
                                        ttft=1200.5, gen=400.0)))
        cfg = G.ChatConfig.from_logdir(m.logdir)
        cfg.name = 'Export plan 🚀 «sessiondb» "v1" \\ tabs\tand ümlauts'
        cfg.save()
        m.append(M("user", "Great.", ts(9, 17, 1)))


def gen_views(out: Path):
    """A compacted view (views/compacted-001.jsonl) made the way autocompact
    does (create_view + switch_view -> views/.current marker); appends while
    it is active go to both conversation.jsonl and the view."""
    with G.LogManager.load(C_VIEWS, create=True, initial_msgs=[
        M("system", SYSTEM_PROMPT, ts(10, 7), pinned=True),
    ]) as m:
        for i in range(6):
            m.append(M("user", f"Step {i}: what next?", ts(10, 7, i)))
            m.append(M("assistant", f"Do task {i}. " + "details " * 20,
                       ts(10, 7, i, 20),
                       metadata=anthropic_meta(1000 * (i + 1), 40, cost=0.003)))
        full = list(m.log.messages)
        summary = M("system", "## Compacted summary\nSteps 0-4 done: tasks 0-4.",
                    ts(10, 7, 30), metadata={"compaction_artifact": "summary"})
        compacted = [full[0], summary] + full[-2:]
        name = m.get_next_view_name()
        m.create_view(name, compacted)
        m.switch_view(name)
        m.append(M("user", "Step 6: continue from the summary.", ts(10, 7, 31)))
        m.append(M("assistant", "Continuing with task 6.", ts(10, 7, 31, 9),
                   metadata=anthropic_meta(600, 12, cost=0.0011)))
        # view stays active: views/.current names it


def gen_manual_compact(out: Path):
    """What a manual `/compact resume` does: preserve_lossless_log()
    (lossless.jsonl), a pre-compact-001 backup view, the active transcript
    replaced by assigning manager.log + write() -- no event is logged."""
    with G.LogManager.load(C_MANUAL_COMPACT, create=True, initial_msgs=[
        M("system", SYSTEM_PROMPT, ts(11, 12), pinned=True),
    ]) as m:
        for i in range(4):
            m.append(M("user", f"Long question {i}? " + "context " * 15, ts(11, 12, i)))
            m.append(M("assistant", f"Long answer {i}. " + "reasoning " * 15,
                       ts(11, 12, i, 30),
                       metadata=anthropic_meta(3000 * (i + 1), 80, cost=0.01)))
        head = m.log.messages[0]
        tail = m.log.messages[-2:]
        resume = M("system", "# Conversation resume\nQuestions 0-2 were about X.",
                   ts(11, 12, 10), metadata={"compaction_artifact": "resume"})
        m.preserve_lossless_log()
        m.create_view("pre-compact-001", m.log)
        m.log = G.Log([head, resume] + list(tail))
        m.write()
        m.append(M("user", "Go on.", ts(11, 12, 11)))
        m.append(M("assistant", "Continuing after compaction.", ts(11, 12, 11, 5)))


def gen_test_ids(out: Path):
    """Ids that gptme treats as test conversations (hidden by default)."""
    with G.LogManager.load(C_TEST, create=True) as m:
        m.append(M("user", "test prompt", ts(12, 1)))
        m.append(M("assistant", "test reply", ts(12, 1, 0, 1),
                   metadata={"model": "local/test", "cost": 0.0}))
    with G.LogManager.load(C_TMP, create=True) as m:
        m.append(M("user", "scratch", ts(12, 2)))


# ---------------------------------------------------------------------------
# HAND-WRITTEN conversations (plain file writes, NOT gptme output)
# ---------------------------------------------------------------------------


def _gptme_line(d: dict) -> str:
    """A line formatted the way gptme formats them (json.dumps defaults)."""
    return json.dumps(d) + "\n"


def hand_written_legacy_flat(out: Path):
    """HAND-WRITTEN: a log as older gptme versions left it -- flat token
    metadata (no "usage"), lines without timestamp, an aware timestamp, keys
    out of gptme's order, non-escaped UTF-8 (ensure_ascii=False), a compact-
    separator line, no events.jsonl, a relative workspace symlink, and a last
    line without trailing newline.  Renamed afterwards with gptme's own
    rename_conversation (what `gptme-util chats rename` does)."""
    d = out / C_LEGACY_FLAT
    d.mkdir()
    lines = [
        json.dumps({"role": "system", "content": "You are gptme, an AI assistant.",
                    "pinned": True}) + "\n",
        json.dumps({"role": "user", "content": "Hi, old gptme!"}) + "\n",
        json.dumps({"role": "assistant", "content": "Hello! (flat tokens)",
                    "timestamp": "2024-01-15T10:00:05.123456",
                    "metadata": {"model": "openai/gpt-4", "input_tokens": 1200,
                                 "output_tokens": 85, "cost": 0.0411}}) + "\n",
        json.dumps({"role": "user", "content": "Cache tokens too?",
                    "timestamp": "2024-01-15T10:01:00+00:00"}) + "\n",
        json.dumps({"role": "assistant", "content": "Yes, flat cache counters.",
                    "timestamp": "2024-01-15T10:01:04",
                    "metadata": {"model": "anthropic/claude-3-opus-20240229",
                                 "input_tokens": 40, "output_tokens": 7,
                                 "cache_read_tokens": 1800,
                                 "cache_creation_tokens": 12, "cost": 0.0029}}) + "\n",
        # non-escaped UTF-8
        json.dumps({"role": "user", "content": "Café ☕, naïve, 日本, 😀",
                    "timestamp": "2024-01-15T10:02:00"}, ensure_ascii=False) + "\n",
        # keys out of gptme's order
        json.dumps({"metadata": {"cost": 0.001, "model": "openai/gpt-4"},
                    "timestamp": "2024-01-15T10:02:03", "content": "Keys reordered.",
                    "role": "assistant"}) + "\n",
        # compact separators
        json.dumps({"role": "user", "content": "compact, separators",
                    "timestamp": "2024-01-15T10:03:00"}, separators=(",", ":")) + "\n",
        # last line: no trailing newline
        json.dumps({"role": "assistant", "content": "Last line, no newline.",
                    "timestamp": "2024-01-15T10:03:02",
                    "metadata": {"model": "openai/gpt-4", "output_tokens": 5}}),
    ]
    (d / "conversation.jsonl").write_text("".join(lines), encoding="utf-8")
    # relative symlink to another conversation's real workspace directory
    os.symlink(f"../{C_ATTACH}/workspace", d / "workspace")
    # gptme-util chats rename (gptme API): creates config.toml with [chat] name
    assert G.rename_conversation(C_LEGACY_FLAT, "Legacy chat (renamed)")


def hand_written_legacy_events(out: Path):
    """HAND-WRITTEN: an events.jsonl from a gptme version before compaction:
    every event from seq 1, a checkpoint at seq 51 (all 50 messages), later
    appends, a damaged JSON line, a line with invalid UTF-8, and a torn tail
    (a crash while writing the last event: that message is in
    conversation.jsonl but its event is cut off).  A stale .lock names a PID
    that cannot exist."""
    d = out / C_LEGACY_EVENTS
    d.mkdir()
    msgs = []
    for i in range(58):
        role = "user" if i % 2 == 0 else "assistant"
        msg = {"role": role, "content": f"{role} message {i}",
               "timestamp": f"2025-03-10T09:{i:02d}:00"}
        if role == "assistant":
            msg["metadata"] = {"model": "anthropic/claude-3-5-sonnet-20241022",
                               "usage": {"input_tokens": 100 + i, "output_tokens": 10},
                               "cost": 0.00045}
        msgs.append(msg)
    (d / "conversation.jsonl").write_text("".join(_gptme_line(m) for m in msgs))

    def ev(seq, typ, payload, sec):
        return json.dumps({"seq": seq, "ts": f"2025-03-10T08:{seq % 60:02d}:{sec:02d}.000123+00:00",
                           "type": typ, "payload": payload}, default=str) + "\n"

    out_lines = []
    for i in range(50):
        out_lines.append(ev(i + 1, "message_append", {"message": msgs[i]}, 1))
    out_lines.append(ev(51, "checkpoint", {"messages": msgs[:50]}, 2))
    seq = 52
    for i in range(50, 57):
        out_lines.append(ev(seq, "message_append", {"message": msgs[i]}, 3))
        seq += 1
        if i == 52:
            # damaged line (bad JSON) in the middle
            out_lines.append('{"seq": 999, "ts": "2025-03-10T08:00:00+00:00", "type": "mess\n')
        if i == 54:
            # invalid UTF-8 bytes
            out_lines.append(None)
    data = b""
    for line in out_lines:
        data += b'{"seq": 998, "type": "\xff\xfe broken"}\n' if line is None else line.encode()
    # torn tail without newline (message 57's event, cut mid-record)
    data += ev(seq, "message_append", {"message": msgs[57]}, 4).encode()[:70]
    (d / "events.jsonl").write_bytes(data)
    (d / ".lock").write_text("4194999")  # stale: > pid_max, never a live process


def hand_written_malformed(out: Path):
    """HAND-WRITTEN: a damaged conversation.jsonl that gptme still loads
    (with warnings): blank and whitespace-only lines, a malformed JSON line
    in the middle, non-object JSON, a non-string role, unknown top-level
    fields, NaN/Infinity in metadata, a duplicated key, a CRLF line, trailing
    spaces after a record.  Plus extra files/dirs gptme doesn't know: a binary
    unknown file, an empty directory, files with modes 0644/0600/0755 and a
    real workspace/ directory holding a file (and an empty subdirectory)."""
    d = out / C_MALFORMED
    d.mkdir()
    parts = [
        _gptme_line({"role": "user", "content": "first, valid",
                     "timestamp": "2025-11-20T08:00:00"}),
        "\n",
        "   \n",
        '{"role": "assistant", "content": "unterminated string, timestamp": \n',
        _gptme_line({"role": "assistant", "content": "valid after the damage",
                     "timestamp": "2025-11-20T08:00:05"}),
        '["not", "a", "message"]\n',
        '{"role": 1, "content": "role is not a string"}\n',
        '{"role": "user"}\n',
        _gptme_line({"role": "user", "content": "from a newer gptme",
                     "timestamp": "2025-11-20T08:01:00",
                     "newfield": {"nested": [1, 2, {"x": None}]},
                     "reasoning": "unknown top-level field"}),
        _gptme_line({"role": "assistant", "content": "NaN and Infinity in metadata",
                     "timestamp": "2025-11-20T08:01:04",
                     "metadata": {"model": "local/llama", "cost": float("nan"),
                                  "usage": {"input_tokens": 10, "output_tokens": 2},
                                  "score": float("inf"), "floor": float("-inf")}}),
        '{"role": "user", "content": "duplicate key, first", "content": "duplicate key, second", '
        '"timestamp": "2025-11-20T08:02:00"}\n',
        '{"role": "assistant", "content": "CRLF line ending", '
        '"timestamp": "2025-11-20T08:02:03"}\r\n',
        '{"role": "user", "content": "trailing spaces after the record", '
        '"timestamp": "2025-11-20T08:03:00"}   \n',
        "\n",
    ]
    (d / "conversation.jsonl").write_text("".join(parts), encoding="utf-8", newline="")
    (d / "future-feature.dat").write_bytes(bytes(range(256)) + b"\x00\xff not utf-8")
    (d / "private-notes.txt").write_text("mode 0600\n")
    (d / "hook.sh").write_text("#!/bin/sh\necho executable\n")
    ws = d / "workspace"
    ws.mkdir()
    (ws / "main.py").write_text("print('hello from a real workspace dir')\n")
    (d / "config.toml").write_text(
        '# hand-written, comments and unknown keys preserved\n'
        '[chat]\nname = "Malformed lines"\nmodel = "local/llama"\n'
        'workspace = "@log"\n\n[env]\nFOO = "bar"\n',
        encoding="utf-8",
    )


# ---------------------------------------------------------------------------
# metadata git cannot store; verification
# ---------------------------------------------------------------------------


HAND_WRITTEN = {C_LEGACY_FLAT, C_LEGACY_EVENTS, C_MALFORMED}


def _gptme_layout_fixes(out: Path):
    """What gptme 0.35.1 itself left that git loses, as rules: an empty
    branches/ in every conversation it wrote, and mode 0600 on the files it
    writes through temp files (NamedTemporaryFile / mkstemp)."""
    dirs, modes = [], {}
    for chat_id in MTIME_ORDER:
        if chat_id in HAND_WRITTEN:
            continue
        d = out / chat_id
        dirs.append(d / "branches")
        for pattern in ("conversation.jsonl", "lossless.jsonl", "config.toml",
                        "model_selection_trace.json", "branches/*.jsonl",
                        "views/*.jsonl"):
            for p in d.glob(pattern):
                modes[p] = 0o600
        # the only event log that went through compaction (mkstemp)
        if chat_id == C_LONG:
            modes[d / "events.jsonl"] = 0o600
    return dirs, modes


def apply_fixed_metadata(out: Path, check: bool = False) -> list[str]:
    """Re-apply mtimes, empty dirs and modes.  With check=True (right after
    generation) report gptme-layout rules that did not match what gptme
    actually wrote, so the rules for --fix-metadata stay honest."""
    mismatches = []
    dirs, modes = _gptme_layout_fixes(out)
    for d in dirs:
        if check and not d.is_dir():
            mismatches.append(f"expected gptme to create {d}")
        d.mkdir(parents=True, exist_ok=True)
    for p, mode in modes.items():
        if not p.exists():
            continue
        if check and (p.lstat().st_mode & 0o777) != mode:
            mismatches.append(f"{p}: gptme wrote {p.lstat().st_mode & 0o777:o}, rule says {mode:o}")
        os.chmod(p, mode)
    for rel in EMPTY_DIRS:
        (out / rel).mkdir(parents=True, exist_ok=True)
    for rel, mode in HAND_WRITTEN_MODES.items():
        p = out / rel
        if p.exists():
            os.chmod(p, mode)
    for i, chat_id in enumerate(MTIME_ORDER):
        p = out / chat_id / "conversation.jsonl"
        if p.exists():
            t = MTIME_BASE + i * 3600
            os.utime(p, (t, t), follow_symlinks=False)
    return mismatches


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record):
        self.records.append(record.getMessage())


def _tree(root: Path) -> dict[str, tuple]:
    res = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            data = p.read_bytes() if p.is_file() and not p.is_symlink() else None
            res[str(p.relative_to(root))] = (st.st_mode, data,
                                             os.readlink(p) if p.is_symlink() else None)
    return res


def verify(out: Path, tmp: Path) -> bool:
    """Load everything with gptme on a copy of OUT_DIR and print a summary."""
    copy = tmp / "verify-logs"
    shutil.copytree(out, copy, symlinks=True)
    os.environ["GPTME_LOGS_HOME"] = str(copy)
    before = _tree(copy)
    handler = _Collect()
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.WARNING)
    ok = True
    expect_warnings = {C_LEGACY_FLAT, C_MALFORMED, C_LEGACY_EVENTS}
    print(f"{'conversation':36} {'msgs':>4} {'branches':>8} {'views':>5} "
          f"{'events':>6} {'recovers':>8}  warnings")
    for chat in sorted(p for p in copy.iterdir() if p.is_dir()):
        handler.records.clear()
        try:
            with G.LogManager.load(chat, lock=False) as m:
                n = len(m.log.messages)
                branches = sorted(b for b in m._branches if b != "main")
                views = sorted(m._views)
                for b in branches:
                    with G.LogManager.load(chat, branch=b, lock=False) as mb:
                        assert mb.log.messages is not None
            events = G.eventlog.read_events(chat)
            recovered = G.eventlog.recover_messages(chat)
            main = [json.loads(json.dumps(x.to_dict())) for x in
                    G.Log.read_jsonl(chat / "conversation.jsonl").messages]
            if recovered is None:
                rec = "-"
            else:
                same = [(r["role"], r["content"]) for r in recovered] == \
                       [(x["role"], x["content"]) for x in main]
                rec = "same" if same else f"DIFF({len(recovered)})"
            warns = len(handler.records)
            print(f"{chat.name:36} {n:>4} {len(branches):>8} {len(views):>5} "
                  f"{len(events):>6} {rec:>8}  {warns}")
            if warns and chat.name not in expect_warnings:
                ok = False
                for w in handler.records:
                    print("   unexpected warning:", w)
        except Exception as e:  # noqa: BLE001
            ok = False
            print(f"{chat.name:36} FAILED: {type(e).__name__}: {e}")
    handler.records.clear()
    convs = list(G.get_conversations(include_test=True))
    visible = [c.id for c in G.get_conversations(include_test=False)]
    print(f"\nget_conversations: {len(convs)} total, {len(visible)} visible by default"
          f" (hidden: {sorted(set(c.id for c in convs) - set(visible))})")
    for c in convs:
        if c.name != c.id:
            print(f"  display name: {c.id} -> {c.name!r}")
    after = _tree(copy)
    created = sorted(set(after) - set(before))
    changed = sorted(k for k in set(after) & set(before) if after[k] != before[k])
    if created or changed:
        print("reading with gptme (on the copy) created:", created or "nothing",
              "changed:", changed or "nothing")
    logging.getLogger().removeHandler(handler)
    os.environ["GPTME_LOGS_HOME"] = str(out)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path, help="logs root to create")
    ap.add_argument("--force", action="store_true",
                    help="delete OUT_DIR first if it exists")
    ap.add_argument("--fix-metadata", action="store_true",
                    help="only re-apply mtimes/modes/empty dirs to an existing OUT_DIR")
    args = ap.parse_args(argv)
    out: Path = args.out_dir.absolute()

    if args.fix_metadata:
        if not out.is_dir():
            ap.error(f"{out} does not exist")
        apply_fixed_metadata(out)
        print(f"re-applied fixed metadata to {out}")
        return 0

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not args.force:
            ap.error(f"{out} exists and is not empty (use --force to replace it)")
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        else:
            out.unlink()
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()

    tmp = Path(tempfile.mkdtemp(prefix="gptme-fixtures-"))
    try:
        isolate_environment(out, tmp)
        load_gptme()
        gen_attachments(out)  # first: its workspace/ is the others' workspace
        gen_basic(out)
        gen_unicode(out)
        gen_surrogate(out)
        gen_flags(out)
        gen_branches(out)
        gen_fork(out)
        gen_edit_undo(out)
        gen_long(out)
        gen_backtrack(out)
        gen_named(out)
        gen_views(out)
        gen_manual_compact(out)
        gen_test_ids(out)
        hand_written_legacy_flat(out)
        hand_written_legacy_events(out)
        hand_written_malformed(out)
        for problem in apply_fixed_metadata(out, check=True):
            print("note: --fix-metadata rule mismatch:", problem)

        total = sum(p.lstat().st_size for p in out.rglob("*"))
        print(f"wrote {len(list(out.iterdir()))} conversations to {out} "
              f"({total / 1024:.0f} KiB)\n")
        ok = verify(out, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not ok:
        print("VERIFICATION FAILED", file=sys.stderr)
        return 1
    print("\nall conversations load with gptme's LogManager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
