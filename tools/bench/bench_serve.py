#!/usr/bin/env python3
"""`sessiondb serve` against the real gptme-server on the same logs, at two sizes, in one run.

    $GPTME_PYTHON tools/bench/bench_serve.py SESSIONDB LOGS_ROOT --sizes 1000,10000 [--runs R] [--word W]

LOGS_ROOT is a logs root of at least the smallest size (tools/bench/make_realistic_logs.py
writes one). For each size N, the first N conversations of LOGS_ROOT (sorted by name) are
copied twice, under a scratch directory (--work, default a temporary one): one copy for each
server, since gptme-server's reads write into the logs (workspace/, config.toml). For a size
larger than LOGS_ROOT, conversations are repeated under new ids (`<id>-copy<k>`), which keeps
the shape of each conversation and multiplies their number.

Both servers run with a token, on 127.0.0.1, started afresh for every cold measurement (best
of --cold-runs starts, default 3: the machine is shared, and one start's first request can
wait on another process). Times are the wall clock of one HTTP request from this process
(urllib, a new connection each), response read whole:

  list cold        GET /api/v2/conversations (the legacy sidebar call, 100 rows) as the first
                   request after start (sessiondb: after its start-up sync of the root, which is
                   timed separately as `start-up`)
  sidebar cold     GET /api/v2/conversations?limit=50&paginated=1&detail=false (what the 0.35.1
                   web UI's sidebar asks), first request after start
  list warm        the same list, best of R after the first
  sidebar warm     the same sidebar page, best of R
  history          GET /api/v2/conversations?limit=100000&detail=true (the History page; both
                   servers cap a listing at 1,000), best of R (the first reported too, as
                   `history cold`: for gptme-server the first detail scan after start)
  one              GET /api/v2/conversations/<id> of the newest conversation, best of R
  search           GET /api/v2/conversations?q=W&limit=10&detail=true (the UI's Ctrl-K), best
                   of R

The OS page cache is warm for both (the copies were just written; dropping it needs root).
Prints a JSON object with every figure and a Markdown table (seconds; ratio = gptme-server /
sessiondb).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str) -> tuple[float, int, int]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        body = r.read()
        status = r.status
    return time.perf_counter() - start, status, len(body)


def wait_up(port: int, proc: subprocess.Popen, what: str) -> None:
    for _ in range(6000):
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            get(port, "/api/v2")
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} did not start")


def make_root(src: str, n: int, dst: str) -> None:
    names = sorted(d for d in os.listdir(src) if os.path.isfile(os.path.join(src, d, "conversation.jsonl")))
    os.makedirs(dst)
    for i in range(n):
        base = names[i % len(names)]
        k = i // len(names)
        shutil.copytree(os.path.join(src, base), os.path.join(dst, base if k == 0 else f"{base}-copy{k}"), symlinks=True)


class Server:
    def __init__(self, kind: str, logs: str, home: str, sessiondb: str, db: str):
        self.kind, self.logs, self.home, self.sessiondb, self.db = kind, logs, home, sessiondb, db

    def start(self) -> float:
        """Starts the server; returns the seconds until it answered."""
        self.port = free_port()
        env = dict(os.environ, HOME=self.home, XDG_CONFIG_HOME=f"{self.home}/.config", XDG_DATA_HOME=f"{self.home}/.local/share",
                   GPTME_LOGS_HOME=self.logs, GPTME_SERVER_TOKEN=TOKEN, SESSIONDB_LOG="warn")
        if self.kind == "gptme":
            cmd = [sys.executable, "-m", "gptme.server", "serve", "--port", str(self.port)]
        else:
            cmd = [self.sessiondb, "--db", self.db, "serve", "--port", str(self.port), self.logs]
        start = time.perf_counter()
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_up(self.port, self.proc, self.kind)
        return time.perf_counter() - start

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def measure(server: Server, runs: int, cold_runs: int, word: str) -> dict:
    out: dict = {}
    list_path = "/api/v2/conversations"
    sidebar = "/api/v2/conversations?limit=50&paginated=1&detail=false"
    # Cold: the first request after a start (the first start of sessiondb imports the root).
    starts, list_cold, sidebar_cold = [], [], []
    for i in range(cold_runs):
        starts.append(server.start())
        list_cold.append(get(server.port, list_path)[0])
        server.stop()
        server.start()
        sidebar_cold.append(get(server.port, sidebar)[0])
        if i < cold_runs - 1:
            server.stop()
    out["start-up"], out["list cold"], out["sidebar cold"] = starts[0], min(list_cold), min(sidebar_cold)
    out["cold runs"] = {"list": list_cold, "sidebar": sidebar_cold, "start-up": starts}
    out["list warm"] = min(get(server.port, list_path)[0] for _ in range(runs))
    newest = json.loads(urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{server.port}{list_path}?limit=1", headers={"Authorization": f"Bearer {TOKEN}"})).read())[0]["id"]
    history = "/api/v2/conversations?limit=100000&detail=true"
    times = [get(server.port, history)[0] for _ in range(runs)]
    out["history cold"], out["history"] = times[0], min(times)
    out["one"] = min(get(server.port, f"/api/v2/conversations/{newest}")[0] for _ in range(runs))
    search = f"/api/v2/conversations?q={word}&limit=10&detail=true"
    out["search"] = min(get(server.port, search)[0] for _ in range(runs))
    out["sidebar warm"] = min(get(server.port, sidebar)[0] for _ in range(runs))
    server.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sessiondb")
    ap.add_argument("logs")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--word", default="deadlock")
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="bench-serve-")
    results: dict = {}
    for n in [int(s) for s in a.sizes.split(",")]:
        print(f"size {n}: copying", file=sys.stderr)
        roots = {}
        for kind in ("gptme", "sessiondb"):
            roots[kind] = os.path.join(work, f"{kind}-{n}")
            shutil.rmtree(roots[kind], ignore_errors=True)
            make_root(a.logs, n, roots[kind])
        results[n] = {}
        for kind in ("sessiondb", "gptme"):
            home = os.path.join(work, f"home-{kind}-{n}")
            os.makedirs(home, exist_ok=True)
            db = os.path.join(work, f"db-{n}")
            for f in (db, db + "-wal", db + "-shm"):
                if os.path.exists(f):
                    os.remove(f)
            print(f"size {n}: {kind}", file=sys.stderr)
            results[n][kind] = measure(Server(kind, roots[kind], home, a.sessiondb, db), a.runs, a.cold_runs, a.word)
        for kind in roots.values():
            shutil.rmtree(kind, ignore_errors=True)
    print(json.dumps(results, indent=1))
    ops = ["list cold", "sidebar cold", "list warm", "sidebar warm", "history cold", "history", "one", "search", "start-up"]
    print("\n| operation | " + " | ".join(f"gptme-server {n} | sessiondb {n} | ratio" for n in results) + " |")
    print("|---|" + "---|---|---|" * len(results))
    for op in ops:
        cells = []
        for n, r in results.items():
            g, s = r["gptme"][op], r["sessiondb"][op]
            cells.append(f"{g:.4f} | {s:.4f} | {g / s:.0f}×" if op != "start-up" else f"{g:.2f} | {s:.2f} | –")
        print(f"| {op} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
