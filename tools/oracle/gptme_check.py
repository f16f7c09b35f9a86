#!/usr/bin/env python3
"""gptme oracle for sessiondb's interop tests.

Runs gptme's own readers (the installed ``gptme`` package, checked with
0.35.1) over a gptme logs root and prints what gptme makes of it as ONE JSON
document on stdout.  Called by the Rust integration tests as

    $GPTME_PYTHON tools/oracle/gptme_check.py SUBCOMMAND ARGS

Subcommands
-----------
    reads LOGS_ROOT [--strict] [--events-suffix-ok]
        For every conversation directory (``LOGS_ROOT/*/conversation.jsonl``):
        load it with ``LogManager.load(dir, lock=False)``; read
        conversation.jsonl, branches/*.jsonl, views/*.jsonl and lossless.jsonl
        with ``Log.read_jsonl`` and compare ``json.dumps(msg.to_dict())`` with
        the source line byte for byte; run ``recover_messages`` and compare its
        dicts with the main branch; count ``list_conv_checkpoints``.
        Without --strict, deviations are listed under "differences" and do not
        fail the run; with --strict every deviation is a problem (exit 1).
        --events-suffix-ok: a recovered list equal to the main branch minus
        some leading messages is only a note (gptme itself writes no events
        for the initial messages of a new conversation, e.g. the system
        prompt).
    list LOGS_ROOT
        ``get_conversations(detail=True, include_test=True)``: every field of
        ConversationMeta plus created_iso / modified_iso (as
        ``gptme-util chats list --json`` computes them) and total_cost_rounded.
    recover DIR
        ``recover_messages`` on a copy of one conversation directory.

Every subcommand prints an object with "ok" (bool) and "problems" (list of
strings) and exits 0 when ok, 1 otherwise (also for usage errors).  Nothing is
ever written to the checked directory: it is copied into a temporary directory
first (``shutil.copytree(symlinks=True)``) and gptme runs on the copy with
GPTME_LOGS_HOME, HOME and XDG_* pointing into that temporary directory, and
TZ=UTC unless TZ is already set.  Anything gptme prints goes to stderr; gptme's
log warnings are captured and reported.  Paths inside the copy are rewritten
back to LOGS_ROOT in the output.  Output is strict JSON (ASCII, no NaN):
non-finite floats become null and lone surrogates in strings become U+FFFD,
both reported where it happens.

Options: --keep-temp keeps the temporary copy (its path is in the output).
"""

from __future__ import annotations

# Only the standard library may be imported here: the environment for gptme
# is set up in main() before gptme is imported.
import argparse
import dataclasses
import json
import logging
import math
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import traceback
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SNIPPET = 60  # characters of context shown around a byte difference

# --------------------------------------------------------------------------
# output plumbing


class _StdoutGuard:
    """Send fd 1 to stderr while gptme runs; keep the real stdout for the JSON."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self.real_fd = os.dup(1)
        os.dup2(2, 1)

    def emit(self, doc: dict) -> None:
        sys.stdout.flush()
        text = json.dumps(doc, indent=2, ensure_ascii=True, allow_nan=False)
        with os.fdopen(self.real_fd, "w", encoding="ascii") as out:
            out.write(text + "\n")
            out.flush()


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def sanitize(obj: Any, where: str, notes: list[str]) -> Any:
    """Make obj strict-JSON safe: non-finite floats -> None, lone surrogates -> U+FFFD."""
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        notes.append(f"{where}: non-finite float {obj!r} output as null")
        return None
    if isinstance(obj, str):
        if _SURROGATE_RE.search(obj):
            notes.append(f"{where}: lone surrogate(s) output as U+FFFD")
            return _SURROGATE_RE.sub("\ufffd", obj)
        return obj
    if isinstance(obj, dict):
        return {
            sanitize(str(k), f"{where} key", notes): sanitize(v, f"{where}.{k}", notes)
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [sanitize(v, f"{where}[{i}]", notes) for i, v in enumerate(obj)]
    return obj


def show(data: bytes | str, limit: int = SNIPPET) -> str:
    """Short, ASCII-only rendering of some line text for messages."""
    if isinstance(data, bytes):
        text = data.decode("utf-8", "backslashreplace")
    else:
        text = data
    if len(text) > limit:
        text = text[:limit] + "..."
    text = _CONTROL_RE.sub(lambda m: _CONTROL_NAMES.get(m.group(), f"\\x{ord(m.group()):02x}"), text)
    return text.encode("ascii", "backslashreplace").decode("ascii")


_CONTROL_RE = re.compile("[\x00-\x1f\x7f]")
_CONTROL_NAMES = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


# --------------------------------------------------------------------------
# log capture


class _Capture(logging.Handler):
    """Collects WARNING+ records, tagged with the current context."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[dict[str, str]] = []
        self.context = ""
        self.mute = 0  # >0: records are dropped (our own re-parse of lines)
        self.side: list[str] | None = None  # also copy messages here

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001
            msg = str(record.msg)
        if self.side is not None:
            self.side.append(msg)
        if self.mute:
            return
        self.records.append(
            {
                "context": self.context,
                "level": record.levelname,
                "logger": record.name,
                "message": show(msg, 400),
            }
        )


CAPTURE = _Capture()


def _setup_logging() -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(CAPTURE)
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    warnings.simplefilter("default")


def _reset_gptme_logging() -> None:
    """gptme may attach its own handlers on import; route everything to CAPTURE."""
    for name in list(logging.root.manager.loggerDict):
        lg = logging.getLogger(name)
        if name == "gptme" or name.startswith("gptme."):
            for h in list(lg.handlers):
                lg.removeHandler(h)
            lg.propagate = True
    _setup_logging()


# --------------------------------------------------------------------------
# environment, copy, path rewriting


class Sandbox:
    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.tmp = Path(os.path.realpath(tempfile.mkdtemp(prefix="gptme_check.")))
        self.home = self.tmp / "home"
        self.home.mkdir()
        self.logs = self.tmp / "logs"
        self.real_home = os.environ.get("HOME")
        # (prefix in the sandbox, replacement for "workspace"-like resolved
        # paths, replacement for other paths)
        self.rewrites: list[tuple[str, str, str]] = []

    def setup_env(self) -> None:
        env = os.environ
        env["HOME"] = str(self.home)
        for var, sub in (
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_DATA_HOME", "data"),
            ("XDG_STATE_HOME", "state"),
            ("XDG_CACHE_HOME", "cache"),
        ):
            d = self.home / sub
            d.mkdir(exist_ok=True)
            env[var] = str(d)
        env["GPTME_LOGS_HOME"] = str(self.logs)
        env.pop("PYTEST_CURRENT_TEST", None)
        if not env.get("TZ"):
            env["TZ"] = "UTC"
        if hasattr(time, "tzset"):
            time.tzset()

    def copy_in(self, src: Path, dst: Path) -> list[str]:
        """Copy src to dst; return the copy errors (not fatal, but problems)."""
        errors: list[str] = []
        self.copy_notes: list[str] = []

        def copy_fn(s: str, d: str) -> Any:
            try:
                mode = os.lstat(s).st_mode
            except OSError:
                mode = 0
            if stat.S_ISFIFO(mode):
                # gptme never reads these; recreate instead of blocking on read
                os.mkfifo(d, stat.S_IMODE(mode))
                return d
            if mode and not stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
                self.copy_notes.append(f"special file {s} not copied")
                return d
            return shutil.copy2(s, d)

        try:
            shutil.copytree(src, dst, symlinks=True, copy_function=copy_fn)
        except shutil.Error as e:
            for item in e.args[0] if e.args and isinstance(e.args[0], list) else [e]:
                if isinstance(item, tuple) and len(item) == 3:
                    s, _d, why = item
                    errors.append(f"could not copy {s}: {why}")
                else:
                    errors.append(f"copy error: {item}")
        return errors

    def add_rewrite(self, sandbox_path: Path, original: Path) -> None:
        self.rewrites.append(
            (
                str(sandbox_path),
                os.path.realpath(original),
                os.path.abspath(original),
            )
        )

    def finish_rewrites(self) -> None:
        if self.real_home:
            self.rewrites.append(
                (
                    str(self.home),
                    os.path.realpath(self.real_home),
                    os.path.abspath(self.real_home),
                )
            )
        # longest prefix first
        self.rewrites.sort(key=lambda r: -len(r[0]))

    def rewrite(self, value: Any, resolved: bool = False) -> Any:
        if isinstance(value, str):
            for prefix, real, absolute in self.rewrites:
                if value == prefix or value.startswith(prefix + os.sep):
                    return (real if resolved else absolute) + value[len(prefix) :]
            return value
        if isinstance(value, dict):
            return {k: self.rewrite(v, resolved) for k, v in value.items()}
        if isinstance(value, list):
            return [self.rewrite(v, resolved) for v in value]
        return value

    def cleanup(self) -> None:
        if not self.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


def tree_snapshot(root: Path) -> dict[str, tuple]:
    """lstat of every entry under root (symlinks not followed)."""
    snap: dict[str, tuple] = {}

    def one(p: str) -> None:
        try:
            st = os.lstat(p)
        except OSError as e:
            snap[os.path.relpath(p, root)] = ("error", str(e))
            return
        extra: Any = None
        if stat.S_ISLNK(st.st_mode):
            try:
                extra = os.readlink(p)
            except OSError:
                extra = None
        snap[os.path.relpath(p, root)] = (
            st.st_mode,
            st.st_size if not stat.S_ISDIR(st.st_mode) else None,
            st.st_mtime_ns if not stat.S_ISDIR(st.st_mode) else None,
            extra,
        )

    one(str(root))
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for n in dirnames + filenames:
            one(os.path.join(dirpath, n))
    return snap


def compare_snapshots(before: dict, after: dict, label: str) -> list[str]:
    out = []
    for k in sorted(set(before) | set(after)):
        if k not in after:
            out.append(f"{label}: {k} disappeared while checking")
        elif k not in before:
            out.append(f"{label}: {k} was created while checking")
        elif before[k] != after[k]:
            out.append(f"{label}: {k} changed while checking")
    return out


# --------------------------------------------------------------------------
# line-level comparison


def split_gptme_lines(raw: bytes) -> tuple[list[tuple[int, bytes, list[bytes]]], bool]:
    """Split like gptme's text-mode reader (universal newlines).

    Returns ([(line_number, physical_line, sub_lines)], ends_with_newline).
    Physical lines are delimited by b"\\n" (line numbers count those); a
    trailing CR of a physical line is part of a CRLF terminator; any other CR
    splits the physical line into several lines as far as gptme is concerned.
    """
    if not raw:
        return [], True
    ends_nl = raw.endswith(b"\n")
    parts = raw.split(b"\n")
    if ends_nl:
        parts = parts[:-1]
    out = []
    for i, pl in enumerate(parts, 1):
        body = pl[:-1] if pl.endswith(b"\r") else pl
        out.append((i, pl, body.split(b"\r")))
    return out, ends_nl


def _pairs(pairs):
    return pairs


def _pairs_to_dict(pairs: Any) -> Any:
    if isinstance(pairs, list) and all(
        isinstance(p, tuple) and len(p) == 2 for p in pairs
    ):
        return {k: _pairs_to_dict(v) for k, v in pairs}
    if isinstance(pairs, list):
        return [_pairs_to_dict(v) for v in pairs]
    return pairs


def _format_reason(src: bytes, canon: str) -> str:
    reasons = []
    if src.endswith(b"\r"):
        reasons.append("line ends with CRLF")
    if src.rstrip(b"\r") != src.rstrip(b"\r").strip():
        reasons.append("whitespace around the record")
    body = src.strip()
    if any(b >= 0x80 for b in body):
        reasons.append("raw UTF-8 where gptme writes \\uXXXX escapes")
    try:
        obj = json.loads(body.decode("utf-8", "replace"))
        if body == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        ) or body == json.dumps(obj, separators=(",", ":")).encode():
            reasons.append("compact separators")
    except Exception:  # noqa: BLE001
        pass
    if not reasons:
        reasons.append("separators, string escaping or number format")
    return ", ".join(reasons)


def describe_difference(src: bytes, canon: str, parsed_dict: dict) -> str:
    """Human readable description of why src != canon."""
    cb = canon.encode("ascii", "backslashreplace")
    n = 0
    while n < len(src) and n < len(cb) and src[n] == cb[n]:
        n += 1
    lo = max(0, n - 20)
    where = (
        f"first byte difference at column {n + 1}: "
        f"file has '{show(src[lo : n + SNIPPET - 20])}' "
        f"but gptme writes '{show(cb[lo : n + SNIPPET - 20])}'"
    )
    details: list[str] = []
    try:
        pairs = json.loads(src.decode("utf-8", "replace").strip(), object_pairs_hook=_pairs)
    except Exception:  # noqa: BLE001
        pairs = None
    if isinstance(pairs, list):
        keys = [k for k, _ in pairs]
        dups = sorted({k for k in keys if keys.count(k) > 1})
        if dups:
            details.append(f"duplicate key(s) {dups} (gptme keeps the last value)")
        src_obj = _pairs_to_dict(pairs)
        src_keys = list(dict.fromkeys(keys))
        out_keys = list(parsed_dict)
        dropped = [k for k in src_keys if k not in parsed_dict]
        added = [k for k in out_keys if k not in src_obj]
        if dropped:
            details.append(f"gptme drops key(s) {dropped}")
        if added:
            extra = ""
            if "timestamp" in added:
                extra = f" (timestamp {parsed_dict['timestamp']} from the file mtime)"
            details.append(f"gptme adds key(s) {added}{extra}")
        common_src = [k for k in src_keys if k in parsed_dict]
        common_out = [k for k in out_keys if k in src_obj]
        if common_src != common_out:
            details.append(f"key order {common_src} becomes {common_out}")
        for k in common_out:
            a = json.dumps(src_obj[k])
            b = json.dumps(parsed_dict[k])
            if a != b:
                if (
                    k == "metadata"
                    and isinstance(src_obj[k], dict)
                    and isinstance(parsed_dict[k], dict)
                ):
                    sk, ok_ = list(src_obj[k]), list(parsed_dict[k])
                    sub = []
                    if set(sk) != set(ok_):
                        sub.append(
                            f"keys {sk} become {ok_} (flat token counts moved to usage?)"
                        )
                    elif sk != ok_:
                        sub.append(f"key order {sk} becomes {ok_}")
                    else:
                        sub.append("values differ")
                    details.append("metadata: " + "; ".join(sub))
                else:
                    details.append(f"{k}: {show(a, 50)} becomes {show(b, 50)}")
        if not details:
            details.append("same keys and values, formatting only: " + _format_reason(src, canon))
    else:
        details.append("source is not a JSON object with unique structure")
    return where + "; " + "; ".join(details)


# --------------------------------------------------------------------------
# the subcommands


class Report:
    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.problems: list[str] = []
        self.differences: list[str] = []
        self.notes: list[str] = []

    def deviation(self, text: str) -> None:
        (self.problems if self.strict else self.differences).append(text)


def _gptme():
    """Import gptme lazily (after the environment is set)."""
    from gptme.logmanager import Log, LogManager, get_conversations  # noqa: F401
    from gptme.logmanager import conversations as conv_mod
    from gptme.logmanager import eventlog
    from gptme.logmanager import manager as manager_mod
    from gptme.logmanager.conv_checkpoints import list_conv_checkpoints

    _reset_gptme_logging()
    return {
        "Log": Log,
        "LogManager": LogManager,
        "get_conversations": get_conversations,
        "get_conversation_meta_direct": conv_mod.get_conversation_meta_direct,
        "ConversationMeta": conv_mod.ConversationMeta,
        "conversation_files": conv_mod._conversation_files,
        "message_from_json_line": manager_mod._message_from_json_line,
        "read_events": eventlog.read_events,
        "recover_messages": eventlog.recover_messages,
        "list_conv_checkpoints": list_conv_checkpoints,
    }


def check_file(g, conv: str, cdir: Path, path: Path, rep: Report) -> tuple[dict, list | None]:
    """Read one jsonl file with gptme and compare it with its source lines.

    Returns (summary, list of canonical json strings of the messages gptme
    reads, or None if reading failed).
    """
    rel = path.relative_to(cdir).as_posix()
    label = f"{conv}: {rel}"
    summary: dict[str, Any] = {"file": rel}
    CAPTURE.context = label
    before = len(CAPTURE.records)
    try:
        log = g["Log"].read_jsonl(path)
        msgs = list(log.messages)
        dumps = [json.dumps(m.to_dict()) for m in msgs]
    except Exception as e:  # noqa: BLE001
        rep.problems.append(f"{label}: gptme Log.read_jsonl raised {type(e).__name__}: {e}")
        summary["error"] = f"{type(e).__name__}: {e}"
        return summary, None
    summary["messages"] = len(msgs)

    try:
        raw = path.read_bytes()
    except OSError as e:
        rep.problems.append(f"{label}: cannot read file: {e}")
        summary["error"] = str(e)
        return summary, dumps
    mtime = datetime.fromtimestamp(path.resolve().stat().st_mtime, tz=timezone.utc)
    lines, ends_nl = split_gptme_lines(raw)
    summary["lines"] = len(lines)
    summary["trailing_newline"] = ends_nl
    blank: list[int] = []
    skipped: list[int] = []
    differing: list[int] = []
    parsed: list[tuple[int, bytes, int, str, dict]] = []  # (lineno, phys, nsub, canon, dict)
    nonblank = 0
    for lineno, phys, subs in lines:
        if len(subs) > 1:
            rep.deviation(
                f"{label}:{lineno}: line contains a bare CR; gptme's reader splits it "
                f"into {len(subs)} lines"
            )
        for sub in subs:
            text = sub.decode("utf-8", "replace")
            stripped = text.strip()
            if not stripped:
                blank.append(lineno)
                continue
            nonblank += 1
            why: list[str] = []
            CAPTURE.mute += 1
            CAPTURE.side = why
            try:
                try:
                    msg = g["message_from_json_line"](stripped, path.resolve(), mtime)
                except json.JSONDecodeError as e:
                    skipped.append(lineno)
                    rep.deviation(f"{label}:{lineno}: malformed JSON, gptme skips the line ({e})")
                    continue
                except (ValueError, TypeError, AttributeError, KeyError) as e:
                    skipped.append(lineno)
                    rep.deviation(
                        f"{label}:{lineno}: invalid message, gptme skips the line "
                        f"({type(e).__name__}: {e})"
                    )
                    continue
                d = msg.to_dict()
                canon = json.dumps(d)
            except Exception as e:  # noqa: BLE001
                skipped.append(lineno)
                rep.problems.append(
                    f"{label}:{lineno}: gptme raised {type(e).__name__}: {e} "
                    "(its reader would crash on this line)"
                )
                continue
            finally:
                CAPTURE.mute -= 1
                CAPTURE.side = None
            for w in why:
                rep.notes.append(f"{label}:{lineno}: gptme warns: {show(w, 200)}")
            parsed.append((lineno, phys, len(subs), canon, d))
    summary["nonblank_lines"] = nonblank
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        rep.deviation(
            f"{label}: file is not valid UTF-8; gptme reads it with errors='replace' (U+FFFD)"
        )
    if blank:
        rep.deviation(f"{label}: blank line(s) {blank} (gptme skips them, never writes them)")
    if not ends_nl:
        rep.deviation(
            f"{label}:{len(lines)}: last line has no terminating newline "
            "(gptme always ends lines with \\n; its next append rewrites the file)"
        )
    if len(msgs) != nonblank:
        rep.deviation(
            f"{label}: gptme loads {len(msgs)} message(s) from {nonblank} non-blank line(s)"
            + (f"; skipped line(s) {skipped}" if skipped else "")
        )
    # our line-by-line parse must agree with gptme's own reader
    mine = [p[3] for p in parsed]
    if mine != dumps:
        rep.problems.append(
            f"{label}: oracle error: line-by-line parse gives {len(mine)} message(s), "
            f"Log.read_jsonl gives {len(dumps)} (or different content)"
        )
    for lineno, phys, nsub, canon, d in parsed:
        if nsub == 1 and phys == canon.encode("ascii"):
            continue
        differing.append(lineno)
        rep.deviation(
            f"{label}:{lineno}: not gptme's canonical line: "
            + describe_difference(phys, canon, d)
        )
    summary["blank_lines"] = blank
    summary["skipped_lines"] = skipped
    summary["differing_lines"] = differing
    summary["canonical"] = not (blank or skipped or differing) and ends_nl
    summary["gptme_warnings"] = len(CAPTURE.records) - before
    return summary, dumps


def _relation(rec: list[str], main: list[str]) -> str:
    """How the recovered list relates to the branch file."""
    if rec == main:
        return "equal"
    if len(rec) < len(main) and main[len(main) - len(rec) :] == rec:
        return "suffix"  # main = messages without events (e.g. initial prompt) + recovered
    if len(rec) < len(main) and main[: len(rec)] == rec:
        return "prefix"
    if len(rec) > len(main) and rec[: len(main)] == main:
        return "longer"
    return "different"


def _first_mismatch(a: list[str], b: list[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at message {i}: recovered {show(x, 80)} vs {show(y, 80)}"
    return f"lengths differ ({len(a)} vs {len(b)}), common prefix equal"


def recover_info(g, conv: str, edir: Path, rep: Report, label: str) -> tuple[dict, list | None]:
    info: dict[str, Any] = {"events_file": (edir / "events.jsonl").exists()}
    CAPTURE.context = label
    rec = None
    if info["events_file"]:
        try:
            events = g["read_events"](edir)
            info["events"] = len(events)
            cps = [
                e.get("seq")
                for e in events
                if isinstance(e, dict) and e.get("type") == "checkpoint"
            ]
            info["latest_checkpoint_seq"] = cps[-1] if cps else None
            rec = g["recover_messages"](edir)
        except Exception as e:  # noqa: BLE001
            rep.problems.append(
                f"{label}: gptme recover_messages raised {type(e).__name__}: {e}"
            )
            info["error"] = f"{type(e).__name__}: {e}"
            info["event_log"] = False
            return info, None
    info["event_log"] = rec is not None
    dumps = None
    if rec is not None:
        try:
            dumps = [json.dumps(d) for d in rec]
        except Exception as e:  # noqa: BLE001
            rep.problems.append(f"{label}: recovered messages are not serialisable: {e}")
            dumps = None
    info["recovered"] = len(rec) if rec is not None else 0
    return info, dumps


def cmd_reads(g, sb: Sandbox, root: Path, strict: bool, events_suffix_ok: bool) -> dict:
    rep = Report(strict)
    convs_out = []
    conv_dirs = sorted(
        p.parent for p in sb.logs.glob("*/conversation.jsonl")
    )
    conv_names = {p.name for p in conv_dirs}
    skipped = sorted(
        p.name for p in sb.logs.iterdir() if p.name not in conv_names
    )
    for cdir in conv_dirs:
        conv = cdir.name
        c: dict[str, Any] = {"id": conv}
        convs_out.append(c)
        CAPTURE.context = conv
        w_before = len(CAPTURE.records)
        try:
            # 1. LogManager.load
            try:
                mgr = g["LogManager"].load(cdir, lock=False)
                c["load"] = "ok"
                c["current_view"] = getattr(mgr, "current_view", None)
                branches = getattr(mgr, "_branches", {}) or {}
                views = getattr(mgr, "_views", {}) or {}
                c["loaded_branches"] = sorted(branches)
                c["loaded_views"] = sorted(views)
                loaded = {("branch", k): v for k, v in branches.items()}
                loaded.update({("view", k): v for k, v in views.items()})
                lossless = getattr(mgr, "_lossless_log", None)
                if lossless is not None:
                    loaded[("lossless", "lossless")] = lossless
            except Exception as e:  # noqa: BLE001
                rep.problems.append(
                    f"{conv}: gptme LogManager.load raised {type(e).__name__}: {e}"
                )
                c["load"] = f"{type(e).__name__}: {e}"
                mgr, loaded = None, {}

            # 2. every transcript file
            files: list[tuple[str, str, Path]] = [("branch", "main", cdir / "conversation.jsonl")]
            files += [("branch", p.stem, p) for p in sorted(cdir.glob("branches/*.jsonl"))]
            files += [("view", p.stem, p) for p in sorted(cdir.glob("views/*.jsonl"))]
            if (cdir / "lossless.jsonl").exists():
                files.append(("lossless", "lossless", cdir / "lossless.jsonl"))
            c["files"] = []
            main_dumps: list[str] | None = None
            for kind, name, path in files:
                if not path.is_file():
                    rep.problems.append(f"{conv}: {path.relative_to(cdir)} is not a regular file")
                    continue
                summary, dumps = check_file(g, conv, cdir, path, rep)
                c["files"].append(summary)
                if kind == "branch" and name == "main":
                    main_dumps = dumps
                # what LogManager.load keeps in memory (it snapshots attachments)
                lg = loaded.get((kind, name))
                if lg is not None and dumps is not None:
                    mem = [json.dumps(m.to_dict()) for m in lg.messages]
                    if mem != dumps:
                        rep.notes.append(
                            f"{conv}: {summary['file']}: LogManager.load holds different "
                            f"messages than Log.read_jsonl (attachment snapshot?): "
                            + _first_mismatch(mem, dumps)
                        )
            CAPTURE.context = conv

            # 3. event log of the main branch
            info, rdumps = recover_info(g, conv, cdir, rep, f"{conv}: events.jsonl")
            info["main"] = len(main_dumps) if main_dumps is not None else None
            if rdumps is not None and main_dumps is not None:
                info["equal"] = rdumps == main_dumps
                info["relation"] = _relation(rdumps, main_dumps)
                if info["relation"] == "suffix":
                    info["missing_prefix"] = len(main_dumps) - len(rdumps)
                if info["equal"]:
                    pass
                elif info["relation"] == "suffix" and events_suffix_ok:
                    rep.notes.append(
                        f"{conv}: events.jsonl: recover_messages gives the last "
                        f"{len(rdumps)} of {len(main_dumps)} message(s) "
                        "(the first ones were written without events)"
                    )
                else:
                    rep.deviation(
                        f"{conv}: events.jsonl: recover_messages gives {len(rdumps)} "
                        f"message(s), conversation.jsonl has {len(main_dumps)}; "
                        + _first_mismatch(rdumps, main_dumps)
                    )
            else:
                info["equal"] = None
                if info.get("events_file") and rdumps is None and "error" not in info and main_dumps:
                    rep.deviation(
                        f"{conv}: events.jsonl exists but holds no valid event "
                        "(recover_messages returns None: nothing to recover)"
                    )
            c["recovery"] = info

            # 3b. event logs of other branches (informational only: a branch's
            # log starts when the branch is created, so it rarely replays to
            # the whole branch)
            bev = {}
            for ev in sorted(cdir.glob("branches/*/events.jsonl")):
                bname = ev.parent.name
                sub = Report(strict=False)
                binfo, bd = recover_info(g, conv, ev.parent, sub, f"{conv}: branches/{bname}/events.jsonl")
                rep.problems.extend(sub.problems)
                bfile = cdir / "branches" / f"{bname}.jsonl"
                bmsgs = None
                if bfile.is_file():
                    try:
                        CAPTURE.mute += 1
                        bmsgs = [json.dumps(m.to_dict()) for m in g["Log"].read_jsonl(bfile).messages]
                    except Exception:  # noqa: BLE001
                        bmsgs = None
                    finally:
                        CAPTURE.mute -= 1
                binfo["branch_messages"] = len(bmsgs) if bmsgs is not None else None
                binfo["equal"] = (bd == bmsgs) if (bd is not None and bmsgs is not None) else None
                if bd is not None and bmsgs is not None:
                    binfo["relation"] = _relation(bd, bmsgs)
                bev[bname] = binfo
            if bev:
                c["branch_event_logs"] = bev

            # 4. conversation checkpoints
            CAPTURE.context = f"{conv}: conv-checkpoints.jsonl"
            try:
                c["conv_checkpoints"] = len(g["list_conv_checkpoints"](cdir))
            except Exception as e:  # noqa: BLE001
                rep.problems.append(
                    f"{conv}: conv-checkpoints.jsonl: gptme list_conv_checkpoints raised "
                    f"{type(e).__name__}: {e}"
                )
                c["conv_checkpoints"] = None
            del mgr
        except Exception as e:  # noqa: BLE001
            rep.problems.append(f"{conv}: unexpected {type(e).__name__}: {e}")
            c["error"] = traceback.format_exc(limit=5)
        c["gptme_warnings"] = len(CAPTURE.records) - w_before
        c["canonical"] = all(f.get("canonical") for f in c.get("files", [])) and bool(c.get("files"))
    return {
        "command": "reads",
        "strict": strict,
        "events_suffix_ok": events_suffix_ok,
        # top-level entries gptme does not treat as conversations (no
        # conversation.jsonl, or a dangling symlink to one)
        "not_conversations": skipped,
        "conversations": convs_out,
        "problems": rep.problems,
        "differences": rep.differences,
        "notes": rep.notes,
    }


def cmd_list(g, sb: Sandbox, root: Path) -> dict:
    problems: list[str] = []
    notes: list[str] = []
    CAPTURE.context = "get_conversations"
    metas: list[tuple[str, Any]] = []  # (id, meta or error string)
    try:
        metas = [(m.id, m) for m in g["get_conversations"](detail=True, include_test=True)]
    except Exception as e:  # noqa: BLE001
        problems.append(
            f"gptme get_conversations raised {type(e).__name__}: {e} "
            "(gptme-util chats list would crash); listing one by one instead"
        )
        metas = []
        try:
            conv_files = g["conversation_files"]()
        except Exception as e2:  # noqa: BLE001
            problems.append(f"cannot enumerate conversations: {e2}")
            conv_files = []
        for fn in conv_files:
            cid = fn.parent.name
            CAPTURE.context = cid
            try:
                m = g["get_conversation_meta_direct"](cid, detail=True, logs_dir=sb.logs)
                metas.append((cid, m))
            except Exception as e3:  # noqa: BLE001
                problems.append(f"{cid}: gptme raised {type(e3).__name__}: {e3} while listing it")
                metas.append((cid, f"{type(e3).__name__}: {e3}"))
    out = []
    for cid, m in metas:
        if isinstance(m, str) or m is None:
            out.append({"id": cid, "error": _rewrite_text(sb, m or "not found")})
            continue
        d = dataclasses.asdict(m)
        for k in list(d):
            d[k] = sb.rewrite(d[k], resolved=(k == "workspace"))
        d["created_iso"] = datetime.fromtimestamp(m.created, tz=timezone.utc).isoformat()
        d["modified_iso"] = datetime.fromtimestamp(m.modified, tz=timezone.utc).isoformat()
        d["total_cost_rounded"] = round(m.total_cost, 4)
        # exact mtime of conversation.jsonl (float seconds lose nanoseconds)
        try:
            d["modified_ns"] = (sb.logs / cid / "conversation.jsonl").stat().st_mtime_ns
        except OSError:
            d["modified_ns"] = None
        local_notes: list[str] = []
        d = sanitize(d, cid, local_notes)
        if local_notes:
            d["sanitized"] = local_notes
        out.append(d)
    return {
        "command": "list",
        "conversations": out,
        "problems": problems,
        "notes": notes,
    }


def cmd_recover(g, sb: Sandbox, cdir: Path) -> dict:
    rep = Report(strict=False)
    info, dumps = recover_info(g, cdir.name, cdir, rep, f"{cdir.name}: events.jsonl")
    rec = None
    if dumps is not None:
        rec = [json.loads(s) for s in dumps]
    notes: list[str] = []
    messages = sanitize(rec or [], "messages", notes)
    return {
        "command": "recover",
        "event_log": info.get("event_log", False),
        "events_file": info.get("events_file", False),
        "events": info.get("events", 0),
        "latest_checkpoint_seq": info.get("latest_checkpoint_seq"),
        "messages": messages,
        # exact gptme serialisation of each recovered dict (json.dumps)
        "lines": dumps or [],
        "sanitized": notes,
        "problems": rep.problems,
    }


# --------------------------------------------------------------------------


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # type: ignore[override]
        raise _ArgError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gptme_check.py", description="gptme oracle for sessiondb tests")
    p.add_argument("--keep-temp", action="store_true", help="keep the temporary copy")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reads", help="read every transcript with gptme and compare")
    r.add_argument("logs_root")
    r.add_argument("--strict", action="store_true")
    r.add_argument(
        "--events-suffix-ok",
        action="store_true",
        help="do not count it as a deviation when recover_messages gives the main "
        "branch minus some leading messages (gptme writes no events for the "
        "initial messages of a new conversation)",
    )
    r.add_argument("--keep-temp", action="store_true", dest="keep_temp_sub")
    li = sub.add_parser("list", help="gptme's conversation listing")
    li.add_argument("logs_root")
    li.add_argument("--keep-temp", action="store_true", dest="keep_temp_sub")
    rc = sub.add_parser("recover", help="recover_messages on one conversation dir")
    rc.add_argument("dir")
    rc.add_argument("--keep-temp", action="store_true", dest="keep_temp_sub")
    return p


def main(argv: list[str]) -> int:
    guard = _StdoutGuard()
    _setup_logging()
    doc: dict[str, Any]
    sb: Sandbox | None = None
    try:
        try:
            args = build_parser().parse_args(argv)
        except _ArgError as e:
            guard.emit({"ok": False, "problems": [f"usage error: {e}"], "usage": __doc__})
            return 1
        except SystemExit as e:  # --help
            guard.emit({"ok": e.code in (0, None), "problems": [], "usage": __doc__})
            return 0 if e.code in (0, None) else 1
        keep = bool(args.keep_temp or getattr(args, "keep_temp_sub", False))
        target = Path(args.logs_root if args.cmd in ("reads", "list") else args.dir)
        if not target.is_dir():
            guard.emit(
                {"ok": False, "command": args.cmd, "problems": [f"{target}: not a directory"]}
            )
            return 1
        if args.cmd == "recover" and not (target / "conversation.jsonl").exists() and not (
            target / "events.jsonl"
        ).exists():
            pass  # still fine: recover_messages just returns None
        sb = Sandbox(keep)
        sb.setup_env()
        before = tree_snapshot(target)
        if args.cmd == "recover":
            name = target.resolve().name or "conversation"
            copy = sb.logs / name
            sb.logs.mkdir()
            copy_errors = sb.copy_in(target, copy)
            sb.add_rewrite(copy, target)
        else:
            copy = sb.logs
            copy_errors = sb.copy_in(target, copy)
            sb.add_rewrite(copy, target)
        sb.finish_rewrites()
        g = _gptme()
        if args.cmd == "reads":
            doc = cmd_reads(g, sb, target, args.strict, args.events_suffix_ok)
        elif args.cmd == "list":
            doc = cmd_list(g, sb, target)
        else:
            doc = cmd_recover(g, sb, copy)
        doc["problems"] = [f"copy: {e}" for e in copy_errors] + doc["problems"]
        doc.setdefault("notes", [])
        doc["notes"] = [f"copy: {n}" for n in sb.copy_notes] + doc["notes"]
        after = tree_snapshot(target)
        doc["problems"] += compare_snapshots(before, after, str(target))
        doc["ok"] = not doc["problems"]
        doc["logs_root" if args.cmd != "recover" else "dir"] = os.path.abspath(target)
        doc["tz"] = os.environ.get("TZ")
        doc["gptme_warnings"] = len(CAPTURE.records)
        doc["gptme_warning_messages"] = [
            {**r, "message": _rewrite_text(sb, r["message"])} for r in CAPTURE.records
        ]
        if keep:
            doc["temp_dir"] = str(sb.tmp)
        try:
            import importlib.metadata as md

            doc["gptme_version"] = md.version("gptme")
        except Exception:  # noqa: BLE001
            doc["gptme_version"] = None
        # problem/difference texts may mention sandbox paths
        for key in ("problems", "differences", "notes"):
            if key in doc:
                doc[key] = [_rewrite_text(sb, s) for s in doc[key]]
        final_notes: list[str] = []
        doc = sanitize(doc, "output", final_notes)
        # ok must be first for readability
        doc = {"ok": doc.pop("ok"), **doc}
    except Exception as e:  # noqa: BLE001
        doc = {
            "ok": False,
            "problems": [f"gptme_check internal error: {type(e).__name__}: {e}"],
            "traceback": traceback.format_exc(),
        }
    finally:
        if sb is not None:
            sb.cleanup()
    try:
        guard.emit(doc)
    except Exception as e:  # noqa: BLE001  (should never happen: doc is sanitised)
        guard.emit({"ok": False, "problems": [f"cannot serialise output: {e}"]})
        return 1
    return 0 if doc.get("ok") else 1


def _rewrite_text(sb: Sandbox, s: str) -> str:
    for prefix, _real, absolute in sb.rewrites:
        s = s.replace(prefix, absolute)
    return s


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
