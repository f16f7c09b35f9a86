#!/usr/bin/env python3
"""How sessiondb's costs grow with the history: import time and memory, store size and query
times, from 1,000 to 100,000 conversations, beside gptme reading the same logs; draws the curves.

    $GPTME_PYTHON tools/bench/bench_growth.py LOGS_ROOT [--sizes 1000,3000,10000,30000,100000]
        [--bin target/release/sessiondb] [--work DIR] [--runs R] [--plot growth.svg] [--json out.json]

LOGS_ROOT is a logs root of at least the largest size, e.g. one written by
``make_realistic_logs.py OUT --conversations 100000 --messages 8`` (3.6 GB, half an hour).
For each size N, the first N conversations of LOGS_ROOT (sorted by name) are linked into a
root of their own under --work (hard links: no copy, the same page cache), and then:

  import        ``sessiondb --db FRESH import ROOT --json``, the whole process (every index
                built, the WAL folded), its own ``listable_seconds``, and its peak resident
                memory (GNU time); the store's size on disk (database, WAL, ranking index)
  gptme read    tools/bench/bench_gptme_read.py on the same root: gptme's ``Log.read_jsonl``
                of every conversation, in-process (its import not counted)
  queries       median of R runs of whole processes on the imported store:
                ``list --json -n 20``, ``list --json --all``, ``search WORD --json -n 20`` for
                a rare word and for a word in nearly every conversation (``the``), and
                ``show --json`` of the newest conversation

Rounds alternate sessiondb and gptme per size. Prints one JSON object (every figure) and a
table, with per-size ratios (time per conversation, relative to the smallest size: flat means
linear growth); --plot writes an SVG of import time, gptme's read time, store size and peak
memory against conversations (log-log), drawn here without a plotting library.
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


def link_root(src: Path, dirs: list[str], dst: Path) -> int:
    """Hard-links every file of `dirs` (conversation directories of `src`) under `dst`; returns
    the bytes linked."""
    total = 0
    dst.mkdir(parents=True)
    for name in dirs:
        for path in (src / name).rglob("*"):
            rel = path.relative_to(src)
            if path.is_dir():
                (dst / rel).mkdir(parents=True, exist_ok=True)
            elif path.is_file() and not path.is_symlink():
                (dst / rel).parent.mkdir(parents=True, exist_ok=True)
                os.link(path, dst / rel)
                total += path.stat().st_size
    return total


def store_bytes(db: Path) -> int:
    total = 0
    for p in [db, Path(f"{db}-wal"), Path(f"{db}-shm")]:
        if p.exists():
            total += p.stat().st_size
    ranking = Path(f"{db}.ranking")
    if ranking.is_dir():
        total += sum(f.stat().st_size for f in ranking.rglob("*") if f.is_file())
    return total


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB, GNU time) and stdout of a whole process."""
    with tempfile.NamedTemporaryFile("r") as t:
        started = time.perf_counter()
        out = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", t.name, *cmd], check=True, capture_output=True, text=True)
        wall = time.perf_counter() - started
        rss = int(t.read().strip().splitlines()[-1])
    return wall, rss, out.stdout


def svg_plot(sizes: list[int], series: dict[str, tuple[list[float], str, str]], path: Path) -> None:
    """A log-log plot: each series (values per size, unit, colour) normalised to its own first
    value, so that every curve shows its growth factor; a line of slope one is linear growth."""
    import math

    w, h, m = 720, 440, 60
    xs = [math.log10(s) for s in sizes]
    ys_all = [v / vals[0] for vals, _, _ in series.values() for v in vals if vals[0] > 0 and v > 0]
    y_lo, y_hi = math.log10(min(ys_all + [1.0])), math.log10(max(ys_all + [sizes[-1] / sizes[0]]))
    x_lo, x_hi = xs[0], xs[-1]

    def px(x: float) -> float:
        return m + (x - x_lo) / (x_hi - x_lo or 1) * (w - 2 * m)

    def py(y: float) -> float:
        return h - m - (y - y_lo) / (y_hi - y_lo or 1) * (h - 2 * m)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">sessiondb: growth with the number of conversations (each cost / its value at {sizes[0]:,})</text>']
    # Axes, ticks at each size, and powers of ten on y.
    out.append(f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>')
    out.append(f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>')
    for s, x in zip(sizes, xs):
        out.append(f'<line x1="{px(x)}" y1="{h - m}" x2="{px(x)}" y2="{h - m + 5}" stroke="black"/>')
        out.append(f'<text x="{px(x)}" y="{h - m + 18}" text-anchor="middle">{s:,}</text>')
    for k in range(math.floor(y_lo), math.ceil(y_hi) + 1):
        if y_lo <= k <= y_hi:
            out.append(f'<line x1="{m - 5}" y1="{py(k)}" x2="{w - m}" y2="{py(k)}" stroke="#ddd"/>')
            out.append(f'<text x="{m - 8}" y="{py(k) + 4}" text-anchor="end">{10 ** k:g}×</text>')
    out.append(f'<text x="{w / 2}" y="{h - 15}" text-anchor="middle">conversations (log scale)</text>')
    # Linear growth, for reference.
    out.append(f'<line x1="{px(xs[0])}" y1="{py(0)}" x2="{px(xs[-1])}" y2="{py(xs[-1] - xs[0])}" stroke="#999" stroke-dasharray="4 4"/>')
    legend_y = m + 5
    out.append(f'<text x="{m + 10}" y="{legend_y}" fill="#999">- - linear</text>')
    for i, (name, (vals, unit, colour)) in enumerate(series.items()):
        if not vals or vals[0] <= 0:
            continue
        pts = " ".join(f"{px(x):.1f},{py(math.log10(v / vals[0])):.1f}" for x, v in zip(xs, vals) if v > 0)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{m + 10}" y="{legend_y + 16 * (i + 1)}" fill="{colour}">{name}: {vals[0]:.3g} → {vals[-1]:.3g} {unit}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", type=Path)
    ap.add_argument("--sizes", default="1000,3000,10000,30000,100000")
    ap.add_argument("--bin", type=Path, default=HERE.parent.parent / "target" / "release" / "sessiondb")
    ap.add_argument("--work", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rare", default="refactoring")
    ap.add_argument("--common", default="the")
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    names = sorted(p.name for p in args.logs.iterdir() if (p / "conversation.jsonl").is_file())
    if len(names) < sizes[-1]:
        print(f"bench_growth: {args.logs} holds {len(names)} conversations, fewer than {sizes[-1]}", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="sessiondb-growth-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for n in sizes:
            root = work / f"logs-{n}"
            shutil.rmtree(root, ignore_errors=True)
            logs_bytes = link_root(args.logs, names[:n], root)
            db = work / f"db-{n}.sqlite"
            for p in [db, Path(f"{db}-wal"), Path(f"{db}-shm")]:
                p.unlink(missing_ok=True)
            shutil.rmtree(f"{db}.ranking", ignore_errors=True)
            print(f"== {n:,} conversations ({logs_bytes / 1e6:,.0f} MB of logs)", file=sys.stderr)
            # gptme first, then sessiondb: both on a page cache the linking just warmed.
            gp = json.loads(subprocess.run([sys.executable, str(HERE / "bench_gptme_read.py"), str(root)], check=True, capture_output=True, text=True).stdout)
            wall, rss, out = timed([str(args.bin), "--db", str(db), "import", str(root), "--json"])
            report = json.loads(out)
            size = store_bytes(db)
            queries = {
                "list -n 20": ["list", "--json", "-n", "20"],
                "list --all": ["list", "--json", "--all"],
                "search rare": ["search", args.rare, "--json", "-n", "20"],
                "search common": ["search", args.common, "--json", "-n", "20"],
                "show newest": ["show", "--json", names[n - 1]],
            }
            q_times: dict[str, float] = {}
            for label, q in queries.items():
                times = [timed([str(args.bin), "--db", str(db), *q])[0] for _ in range(args.runs)]
                q_times[label] = statistics.median(times)
            row = {
                "conversations": n,
                "messages": report["messages"],
                "logs_bytes": logs_bytes,
                "import_seconds": wall,
                "listable_seconds": report["listable_seconds"],
                "import_peak_rss_kib": rss,
                "store_bytes": size,
                "gptme_read_seconds": gp["seconds"],
                "queries_seconds": q_times,
            }
            rows.append(row)
            print(f"   import {wall:.1f} s (listable {report['listable_seconds']:.1f} s), gptme read {gp['seconds']:.1f} s, "
                  f"peak {rss / 1024:.0f} MiB, store {size / 1e6:,.0f} MB ({size / logs_bytes:.2f} of the logs); "
                  + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in q_times.items()), file=sys.stderr)
            # Keep the work directory small: only the largest store is kept to look at.
            if n != sizes[-1]:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    first = rows[0]
    print(json.dumps({"rows": rows}, indent=2))
    print()
    print("| conversations | messages | logs MB | store MB (÷ logs) | import s (listable) | gptme read s | import ÷ gptme | import s per 1k conv. | peak MiB | list -n 20 ms | list --all ms | search rare ms | search common ms | show ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        q = r["queries_seconds"]
        print(f"| {r['conversations']:,} | {r['messages']:,} | {r['logs_bytes'] / 1e6:,.0f} | {r['store_bytes'] / 1e6:,.0f} ({r['store_bytes'] / r['logs_bytes']:.2f}) "
              f"| {r['import_seconds']:.1f} ({r['listable_seconds']:.1f}) | {r['gptme_read_seconds']:.1f} | {r['import_seconds'] / r['gptme_read_seconds']:.1f}× "
              f"| {r['import_seconds'] / r['conversations'] * 1000:.2f} | {r['import_peak_rss_kib'] / 1024:.0f} "
              f"| {q['list -n 20'] * 1000:.0f} | {q['list --all'] * 1000:.0f} | {q['search rare'] * 1000:.0f} | {q['search common'] * 1000:.0f} | {q['show newest'] * 1000:.0f} |")
    last = rows[-1]
    scale = last["conversations"] / first["conversations"]
    print(f"\n{first['conversations']:,} -> {last['conversations']:,} conversations ({scale:.0f}x): import time {last['import_seconds'] / first['import_seconds']:.1f}x, "
          f"store {last['store_bytes'] / first['store_bytes']:.1f}x, peak memory {last['import_peak_rss_kib'] / first['import_peak_rss_kib']:.1f}x, "
          f"gptme read {last['gptme_read_seconds'] / first['gptme_read_seconds']:.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    if args.plot:
        sizes_done = [r["conversations"] for r in rows]
        svg_plot(
            sizes_done,
            {
                "import, whole process": ([r["import_seconds"] for r in rows], "s", "#1f77b4"),
                "gptme reading the logs": ([r["gptme_read_seconds"] for r in rows], "s", "#ff7f0e"),
                "store on disk": ([r["store_bytes"] / 1e6 for r in rows], "MB", "#2ca02c"),
                "import peak memory": ([r["import_peak_rss_kib"] / 1024 for r in rows], "MiB", "#d62728"),
                "search, common word": ([r["queries_seconds"]["search common"] * 1000 for r in rows], "ms", "#9467bd"),
                "list --json -n 20": ([r["queries_seconds"]["list -n 20"] * 1000 for r in rows], "ms", "#8c564b"),
            },
            args.plot,
        )
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
