#!/usr/bin/env python3
"""sessiondb on PostgreSQL beside sessiondb on SQLite, on the same logs, in one run.

    python3 tools/bench/bench_postgres.py [--conversations N] [--messages M] [--runs R]
        [--realistic] [--common WORD] [--rare WORD]
        [--hosts "1 4 16"] [--host-conversations C] [--rounds K] [--bin PATH] [--url URL]
        [--parts "1 2"]

Part 1, one logs root of N conversations x M messages (tools/bench/make_bench_logs.py, seed 1,
cached as target/bench-logs-N-M like the other benchmarks; with --realistic,
tools/bench/make_realistic_logs.py, cached as target/bench-realistic-N-M as bench_import.sh
caches them), into a new SQLite file and a new PostgreSQL database:
  import                      `import LOGS --source bench`, R times per engine, each into a new
                              file or database, the engines alternating
  list / list -n 20           `list --json --all`, `list --json -n 20`
  search common / rare        `search WORD --json -n 20` (--common, --rare; by default
                              "database" (about half of all messages) and "undo" (about
                              0.4%), or with --realistic "the" and "ambiguities"); on a
                              server ranked by this host's ranking index, kept in the run's
                              own cache directory ($XDG_CACHE_HOME)
  ..., the server alone       the same with no cache directory: the server's word sets alone,
                              as before hosts kept a ranking index
  stats                       `stats --json`
  sync, 1% changed            a new message appended to 1% of the conversations (the same
                              lines for both engines), then `sync LOGS`
Each query is run R times per engine, the engines alternating (SQLite first on even runs,
PostgreSQL first on odd ones); the table gives each engine's median wall-clock time of the
whole process and the ratio PostgreSQL / SQLite.

Part 2, N hosts syncing into one database at once, for each N of --hosts: N logs roots of C
conversations each (copies of the first C of the cached root, one per host, each its own
source), imported first; then every host, all at once, runs K rounds of "append a message to
5 of its conversations, `sync ROOT`". Throughput is the messages synced per second of the
whole run (all hosts); latency the wall-clock time of each sync, its median and 99th
percentile. Run against PostgreSQL and, for comparison, against one SQLite file shared by the
N processes (one machine).

The server: --url, or $SESSIONDB_BENCH_POSTGRES_URL, or one started here with
tools/pg/server.sh in a temporary directory (and stopped at the end); the script turns fsync
and synchronous_commit on in it (ALTER SYSTEM), as SQLite's WAL file is synced on its
checkpoints, so neither engine skips its durability. Each database the script makes is
dropped at the end. The binary: --bin, else target/release/sessiondb (build it with
`cargo build --release`). Needs a Python with gptme for the log generator ($GPTME_PYTHON,
else .venv/bin/python).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def log(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if out.returncode != 0:
        raise SystemExit(f"bench_postgres: {' '.join(map(str, cmd))} failed ({out.returncode}):\n{out.stderr.decode(errors='replace')}")
    return out


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    run(cmd, env=env)
    return time.perf_counter() - start


def without_cache_dir() -> dict[str, str]:
    """The environment with no cache directory: a server's store is then searched by the
    server alone, without this host's ranking index (store::ranking_server)."""
    return {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME")}


def cached_logs(n: int, m: int, realistic: bool) -> Path:
    kind, generator = ("realistic", "make_realistic_logs.py") if realistic else ("logs", "make_bench_logs.py")
    logs = ROOT / "target" / f"bench-{kind}-{n}-{m}"
    marker = ROOT / "target" / f"bench-{kind}-{n}-{m}.complete"
    if not marker.exists():
        python = os.environ.get("GPTME_PYTHON") or str(ROOT / ".venv" / "bin" / "python")
        log(f"generating {n} x {m} {kind} logs into {logs}")
        run([python, str(ROOT / "tools/bench" / generator), str(logs), "--conversations", str(n), "--messages", str(m), "--seed", "1", "--force"])
        marker.touch()
    return logs


class Server:
    """The PostgreSQL server: given, or a throwaway one started here."""

    def __init__(self, url: str | None):
        self.dir = None
        if not url:
            self.dir = tempfile.mkdtemp(prefix="sessiondb-bench-pg-")
            url = run(["bash", str(ROOT / "tools/pg/server.sh"), "start", self.dir, "55499"]).stdout.decode().strip()
        self.url = url
        self.made: list[str] = []
        self.psql("ALTER SYSTEM SET fsync = on", "ALTER SYSTEM SET synchronous_commit = on", "ALTER SYSTEM SET full_page_writes = on", "SELECT pg_reload_conf()")

    def psql(self, *statements: str, url: str | None = None) -> str:
        out = ""
        for s in statements:
            out = run(["psql", url or self.url, "-Atqc", s]).stdout.decode()
        return out

    def new_database(self, name: str) -> str:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
        self.made.append(name)
        base, _, query = self.url.partition("?")
        return base[: base.rfind("/")] + "/" + name + (("?" + query) if query else "")

    def close(self) -> None:
        for name in self.made:
            try:
                self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            except SystemExit:
                pass
        if self.dir:
            subprocess.run(["bash", str(ROOT / "tools/pg/server.sh"), "stop", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            shutil.rmtree(self.dir, ignore_errors=True)


def message_line(text: str, when: float) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when))
    return json.dumps({"role": "user", "content": text, "timestamp": stamp}) + "\n"


def append(conversation: Path, text: str) -> None:
    with open(conversation / "conversation.jsonl", "a", encoding="utf-8") as f:
        f.write(message_line(text, time.time()))


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def p99(xs: list[float]) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]


def part_one(bin_: str, server: Server, cached: Path, runs: int, common: str, rare: str, work: Path) -> list[tuple[str, float, float]]:
    logs = work / "logs"
    log(f"copying {cached} to {logs}")
    shutil.copytree(cached, logs, symlinks=True)
    engines: dict[str, str] = {}
    rows: list[tuple[str, float, float]] = []
    imported: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    for r in range(runs):
        # Each run into a new file or database; the last ones are queried below.
        order = ["sqlite", "postgres"] if r % 2 == 0 else ["postgres", "sqlite"]
        for name in order:
            if name == "sqlite":
                for f in work.glob("bench.db*"):
                    shutil.rmtree(f) if f.is_dir() else f.unlink()
                engines[name] = str(work / "bench.db")
            else:
                engines[name] = server.new_database("sessiondb_bench_one")
            imported[name].append(timed([bin_, "--db", engines[name], "import", str(logs), "--source", "bench"]))
        log(f"import {r + 1}/{runs}: sqlite {imported['sqlite'][-1]:.2f} s, postgres {imported['postgres'][-1]:.2f} s")
    rows.append(("import", median(imported["sqlite"]), median(imported["postgres"])))
    queries = [
        ("list --all", ["list", "--json", "--all"]),
        ("list -n 20", ["list", "--json", "-n", "20"]),
        (f"search common word ({common})", ["search", common, "--json", "-n", "20"]),
        (f"search rare word ({rare})", ["search", rare, "--json", "-n", "20"]),
        (f"search common word ({common}), the server alone", ["search", common, "--json", "-n", "20"]),
        (f"search rare word ({rare}), the server alone", ["search", rare, "--json", "-n", "20"]),
        ("stats", ["stats", "--json"]),
    ]
    for label, args in queries:
        times: dict[str, list[float]] = {"sqlite": [], "postgres": []}
        # "the server alone": PostgreSQL without this host's ranking index, as before it had one.
        alone = without_cache_dir() if label.endswith("the server alone") else None
        for r in range(runs):
            order = ["sqlite", "postgres"] if r % 2 == 0 else ["postgres", "sqlite"]
            for name in order:
                times[name].append(timed([bin_, "--db", engines[name], *args], env=alone if name == "postgres" else None))
        log(f"{label}: sqlite {median(times['sqlite']):.3f} s, postgres {median(times['postgres']):.3f} s")
        rows.append((label, median(times["sqlite"]), median(times["postgres"])))
    conversations = sorted(p for p in logs.iterdir() if (p / "conversation.jsonl").is_file())
    rng = random.Random(7)
    times = {"sqlite": [], "postgres": []}
    for r in range(runs):
        for c in rng.sample(conversations, max(1, len(conversations) // 100)):
            append(c, f"incremental run {r}: a new message about the database")
        order = ["sqlite", "postgres"] if r % 2 == 0 else ["postgres", "sqlite"]
        for name in order:
            times[name].append(timed([bin_, "--db", engines[name], "sync", str(logs)]))
    log(f"sync, 1% changed: sqlite {median(times['sqlite']):.3f} s, postgres {median(times['postgres']):.3f} s")
    rows.append(("sync, 1% changed", median(times["sqlite"]), median(times["postgres"])))
    return rows


def hosts_at_once(bin_: str, db: str, roots: list[Path], rounds: int) -> tuple[float, float, float, int]:
    """Every host syncing its root at once; returns (messages per second, median, p99, messages)."""
    latencies: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []

    def host(k: int, root: Path) -> None:
        rng = random.Random(k)
        conversations = sorted(p for p in root.iterdir() if (p / "conversation.jsonl").is_file())
        for r in range(rounds):
            for c in rng.sample(conversations, min(5, len(conversations))):
                append(c, f"host {k} round {r}: new work on the database")
            start = time.perf_counter()
            out = subprocess.run([bin_, "--db", db, "sync", str(root), "--source", f"host{k}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            took = time.perf_counter() - start
            with lock:
                if out.returncode != 0:
                    errors.append(out.stderr.decode(errors="replace"))
                latencies.append(took)

    threads = [threading.Thread(target=host, args=(k, root)) for k, root in enumerate(roots)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise SystemExit("bench_postgres: a sync failed:\n" + errors[0])
    messages = len(roots) * rounds * 5
    return messages / wall, median(latencies), p99(latencies), messages


def part_two(bin_: str, server: Server, cached: Path, hosts: list[int], per_host: int, rounds: int, work: Path) -> list[tuple[int, str, float, float, float, int]]:
    source = sorted(p for p in cached.iterdir() if (p / "conversation.jsonl").is_file())[:per_host]
    out = []
    for n in hosts:
        for engine in ["sqlite", "postgres"]:
            base = work / f"hosts-{engine}-{n}"
            roots = []
            for k in range(n):
                root = base / f"host{k}"
                root.mkdir(parents=True)
                for c in source:
                    shutil.copytree(c, root / c.name, symlinks=True)
                roots.append(root)
            db = str(base / "hosts.db") if engine == "sqlite" else server.new_database(f"sessiondb_bench_hosts_{n}")
            for k, root in enumerate(roots):
                run([bin_, "--db", db, "import", str(root), "--source", f"host{k}"])
            log(f"{n} host(s) syncing into {engine}")
            rate, mid, tail, messages = hosts_at_once(bin_, db, roots, rounds)
            log(f"  {rate:.1f} messages/s, sync median {mid:.3f} s, p99 {tail:.3f} s")
            out.append((n, engine, rate, mid, tail, messages))
            shutil.rmtree(base, ignore_errors=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--messages", type=int, default=20)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--realistic", action="store_true", help="logs from make_realistic_logs.py")
    p.add_argument("--common", help="a word in about half of the messages")
    p.add_argument("--rare", help="a word in a few messages")
    p.add_argument("--hosts", default="1 4 16")
    p.add_argument("--host-conversations", type=int, default=100)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--bin", default=str(ROOT / "target" / "release" / "sessiondb"))
    p.add_argument("--url", default=os.environ.get("SESSIONDB_BENCH_POSTGRES_URL"))
    p.add_argument("--parts", default="1 2", help='which parts to run: "1", "2" or "1 2"')
    a = p.parse_args()
    if not Path(a.bin).is_file():
        raise SystemExit(f"bench_postgres: no binary at {a.bin}: run `cargo build --release` first, or give --bin")
    cached = cached_logs(a.conversations, a.messages, a.realistic)
    common = a.common or ("the" if a.realistic else "database")
    rare = a.rare or ("ambiguities" if a.realistic else "undo")
    server = Server(a.url)
    work = Path(tempfile.mkdtemp(prefix="sessiondb-bench-"))
    # A server's ranking indexes are made in the run's own cache directory, removed with it.
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    try:
        parts = a.parts.split()
        one = part_one(a.bin, server, cached, a.runs, common, rare, work) if "1" in parts else []
        two = part_two(a.bin, server, cached, [int(h) for h in a.hosts.split()], a.host_conversations, a.rounds, work) if "2" in parts else []
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    if one:
        kind = "realistic" if a.realistic else "bench"
        print(f"{a.conversations} conversations x {a.messages} messages ({kind} logs); medians of {a.runs} runs, engines alternating")
        print()
        print("| operation | SQLite s | PostgreSQL s | PostgreSQL / SQLite |")
        print("|---|---:|---:|---:|")
        for label, s, pg in one:
            print(f"| {label} | {s:.3f} | {pg:.3f} | {pg / s:.2f}x |")
        print()
    if not two:
        return
    print(f"hosts syncing at once: {a.host_conversations} conversations each, {a.rounds} rounds of 5 appended messages and a sync")
    print()
    print("| hosts | engine | messages/s | sync median s | sync p99 s |")
    print("|---:|---|---:|---:|---:|")
    for n, engine, rate, mid, tail, _ in two:
        print(f"| {n} | {'SQLite (one file)' if engine == 'sqlite' else 'PostgreSQL'} | {rate:.1f} | {mid:.3f} | {tail:.3f} |")


if __name__ == "__main__":
    main()
