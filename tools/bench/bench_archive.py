#!/usr/bin/env python3
"""gptme's own listing before and after `sessiondb archive` takes most of a logs root out of it
(issue 36), and what archiving and restoring cost.

    $GPTME_PYTHON tools/bench/bench_archive.py [--conversations 10000] [--messages 20]
        [--share 0.9] [--runs 5] [--work DIR] [--bin target/release/sessiondb] [--keep] [--logs ROOT]

Writes a ``make_realistic_logs.py`` root under --work (kept and reused with --keep), or takes
ROOT as it is (``bench_search.sh --keep`` leaves one: ``WORK/logs-10000-20``), imports it
into a fresh store, then, in one run:

  before    R rounds of whole processes, alternating: gptme's ``gptme-util chats list`` (which
            stats every conversation of the root to list the newest 20) and ``sessiondb list
            --json -n 20``; then gptme's listing in-process (its import not counted): the newest
            20 (``list_conversations(20)``) and all of them as the web UI lists them
            (``detail=False``); medians. A sync then reads in the ``workspace`` directories
            gptme's listing made
  archive   ``sessiondb archive`` of the oldest --share of the conversations (by last
            modification, named by id), the whole process, and the root's bytes before and after
  after     the same R rounds on the root that is left
  restore   ``sessiondb restore --all``, the whole process; the root is then checked to hold
            every file as before (relative path, size, mode and mtime of each)

Prints one JSON object with every figure, then a table with gptme's listing after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and directory below `root` but gptme's `.lock`: (size, mode, mtime_ns)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if name == ".lock":
                continue
            st = path.lstat()
            size = 0 if path.is_dir() and not path.is_symlink() else st.st_size
            out[str(path.relative_to(root))] = (size, st.st_mode, st.st_mtime_ns if not path.is_dir() else 0)
    return out


def root_bytes(root: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(root)], check=True, capture_output=True, text=True).stdout.split()[0])


# gptme's listing in-process (its import not counted), median of RUNS calls each: the newest 20
# as `chats list` asks (`list_conversations(20)`, which globs and stats every conversation to
# order them, then reads 20), and every conversation as the web UI's list reads them
# (`list_conversations(all, detail=False)`: the tail of each file).
IN_PROCESS = """
import json, statistics, sys, time
from gptme.logmanager.conversations import list_conversations
runs = int(sys.argv[1])
def median(f):
    times = []
    for _ in range(runs):
        t = time.perf_counter(); f(); times.append(time.perf_counter() - t)
    return statistics.median(times)
print(json.dumps({
    "newest_20": median(lambda: list_conversations(20)),
    "all_tails": median(lambda: list_conversations(10**9, detail=False)),
}))
"""


def listings(bin_: str, db: Path, util: Path, env: dict[str, str], runs: int) -> dict[str, float]:
    gptme, ours = [], []
    for _ in range(runs):
        gptme.append(timed([str(util), "chats", "list"], env))
        ours.append(timed([bin_, "--db", str(db), "list", "--json", "-n", "20"], env))
    out = subprocess.run([sys.executable, "-c", IN_PROCESS, str(runs)], env=env, check=True, capture_output=True, text=True).stdout
    inside = json.loads(out)
    return {
        "gptme_chats_list": statistics.median(gptme),
        "sessiondb_list_json": statistics.median(ours),
        "gptme_in_process_newest_20": inside["newest_20"],
        "gptme_in_process_all": inside["all_tails"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=10000)
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--share", type=float, default=0.9, help="the oldest share of the conversations archived")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--bin", default=str(ROOT / "target/release/sessiondb"))
    ap.add_argument("--keep", action="store_true", help="keep --work (the logs are reused by the next run)")
    ap.add_argument("--logs", type=Path, help="an existing logs root to use (archived from and restored to as it was) instead of writing one")
    args = ap.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="sessiondb-archive-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    logs = args.logs.resolve() if args.logs else work / f"logs-{args.conversations}x{args.messages}"
    if not args.logs and not (logs / ".complete").exists():
        subprocess.run(
            [sys.executable, str(HERE / "make_realistic_logs.py"), str(logs), "--conversations", str(args.conversations), "--messages", str(args.messages), "--force"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (logs / ".complete").touch()
    util = Path(sys.executable).parent / "gptme-util"
    home = work / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, GPTME_LOGS_HOME=str(logs), HOME=str(home))
    db = work / "store.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(f"{db}.ranking", ignore_errors=True)
    subprocess.run([args.bin, "--db", str(db), "import", str(logs)], env=env, check=True, stdout=subprocess.DEVNULL)
    result: dict = {"logs": str(logs), "share": args.share, "runs": args.runs}
    result["root_bytes_before"] = root_bytes(logs)
    result["before"] = listings(args.bin, db, util, env, args.runs)
    # gptme's listing makes a `workspace` directory in the conversations it reads that have
    # none: read in, and the root as it is then is what the restore must give back.
    subprocess.run([args.bin, "--db", str(db), "sync", str(logs)], env=env, check=True, stdout=subprocess.DEVNULL)
    before_tree = tree(logs)

    rows = json.loads(subprocess.run([args.bin, "--db", str(db), "list", "--json", "--all"], env=env, check=True, capture_output=True).stdout)
    rows.sort(key=lambda c: c["modified"])
    result["conversations"] = len(rows)
    chosen = [c["id"] for c in rows[: int(len(rows) * args.share)]]
    started = time.perf_counter()
    out = subprocess.run([args.bin, "--db", str(db), "archive", "--json", *chosen], env=env, check=True, capture_output=True)
    result["archive_seconds"] = time.perf_counter() - started
    report = json.loads(out.stdout)
    result["archived"] = report["archived"]
    result["archive_failed"] = report["failed"]
    result["root_bytes_after"] = root_bytes(logs)
    result["after"] = listings(args.bin, db, util, env, args.runs)

    started = time.perf_counter()
    subprocess.run([args.bin, "--db", str(db), "restore", "--all"], env=env, check=True, stdout=subprocess.DEVNULL)
    result["restore_seconds"] = time.perf_counter() - started
    result["restored_as_before"] = tree(logs) == before_tree

    if not args.keep and args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))
    b, a = result["before"], result["after"]
    print(f"\n{result['conversations']:,} conversations, the oldest {args.share:.0%} archived ({result['archived']:,}; {result['archive_failed']} failed)")
    print(f"| | before | after | after / before |")
    print(f"|---|---|---|---|")
    print(f"| gptme-util chats list (whole process) | {b['gptme_chats_list']:.2f} s | {a['gptme_chats_list']:.2f} s | {a['gptme_chats_list'] / b['gptme_chats_list']:.2f} |")
    for key, what in (("gptme_in_process_newest_20", "gptme's list_conversations(20), in-process"), ("gptme_in_process_all", "gptme's list of all, tails (the web UI's), in-process")):
        print(f"| {what} | {b[key] * 1000:.0f} ms | {a[key] * 1000:.0f} ms | {a[key] / b[key]:.2f} |")
    print(f"| sessiondb list --json -n 20 | {b['sessiondb_list_json'] * 1000:.1f} ms | {a['sessiondb_list_json'] * 1000:.1f} ms | {a['sessiondb_list_json'] / b['sessiondb_list_json']:.2f} |")
    print(f"| logs root (du -sb) | {result['root_bytes_before'] / 1e6:.1f} MB | {result['root_bytes_after'] / 1e6:.1f} MB | {result['root_bytes_after'] / result['root_bytes_before']:.2f} |")
    print(f"archive: {result['archive_seconds']:.1f} s; restore --all: {result['restore_seconds']:.1f} s; root as before after restore: {result['restored_as_before']}")
    return 0 if result["restored_as_before"] and result["archive_failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
