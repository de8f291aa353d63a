"""judge-engine view at scale: first page, page / filter / sort / search latency and the server's
RSS on synthetic GEMBA-MQM runs of 10^4, 10^5 and 10^6 tasks (``viewer_run.py``: two judges,
two repeats, 3% 429s, 2% 500s, 7% re-asked, 3% unscored; ~1.7 KB of run directory per task).

Per size, the viewer is a child process (``python -m judge_engine.cli view RUN --port P``):

1. **first open**: the run's index exists (the run store wrote it), the viewer's own tables do
   not (they are dropped first): seconds from spawning the command to the first list page
   answered, then until everything derived is there (order indexes, counts, attempt counts,
   search index, consistency);
2. **latency**: every request of :func:`requests` ten times, over HTTP, one at a time; p50, p95
   and max per kind;
3. **reopen**: the command spawned again (the derived tables now cached): to the first page;
4. **RSS**: the child's peak resident memory over all of it (``os.wait4``), and its RSS once
   idle.

    python benchmarks/viewer.py --sizes 10000,100000 [--workdir DIR]
    python benchmarks/viewer.py --sizes 1000000 --workdir /tmp/bench   # ~2 min to write the run
    python benchmarks/viewer.py --run RUN_DIR                           # an existing run directory
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import reap, spawn  # noqa: E402

REPEAT = 10


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=120) as response:
        return json.loads(response.read())


def timed(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
    return time.perf_counter() - started


def drop_viewer_tables(run: Path) -> None:
    """The run as the engine left it: no table or index of the viewer's."""
    db = sqlite3.connect(run / "index.sqlite")
    names = db.execute("SELECT type, name FROM sqlite_master WHERE name LIKE 'viewer%' AND type IN ('table', 'index') "
                       "AND name NOT LIKE 'viewer_items_text_%'").fetchall()
    for kind, name in names:
        db.execute(f"DROP {kind.upper()} IF EXISTS {name}")
    db.commit()
    db.close()


def start(run: Path, logs: Path) -> tuple[Any, float, str, float]:
    """(process, started, base URL, seconds to the first list page)."""
    port = free_port()
    process, started = spawn([sys.executable, "-m", "judge_engine.cli", "view", str(run), "--port", str(port)],
                             cwd=run.parent, log=logs / "view.log")
    base = f"http://127.0.0.1:{port}/"
    while True:
        try:
            get(base + "api/tasks?page=1")
            return process, started, base, time.monotonic() - started
        except OSError:
            if process.poll() is not None:
                raise SystemExit(f"the viewer exited; see {logs / 'view.log'}") from None
            time.sleep(0.01)


def derived(base: str) -> bool:
    overview = get(base + "api/overview")
    return all(r["derived"]["items"] and r["derived"]["attempts"] >= 1 for r in overview["runs"]) and all(
        j["consistency"] is not None for j in overview["judges"])


def requests(base: str, rng: random.Random) -> dict[str, list[str]]:
    """What a person asks for, by kind (pages at every depth, each sort, filters, searches)."""
    total = get(base + "api/tasks")["total"]
    pages = max(1, total // 50)
    depths = sorted({1, max(1, pages // 10), max(1, pages // 2), max(1, pages * 9 // 10), pages})
    first = get(base + "api/tasks?size=200")["rows"]
    items = [r["item_id"] for r in get(base + f"api/tasks?page={rng.randint(1, pages)}")["rows"]]
    tasks = [(r["run"], r["task_id"]) for r in first]
    word = "prozent"
    return {
        "first page": ["api/tasks?page=1"],
        "page": [f"api/tasks?page={p}" for p in depths],
        "sort": [f"api/tasks?sort={s}&page={p}" for s in ("score", "score-desc", "disagreement") for p in depths],
        "filter": ["api/tasks?judge=mqm-a", "api/tasks?status=unscored", "api/tasks?reason=content_filter&page=2",
                   "api/tasks?min=-5&max=-1", f"api/tasks?min=-5&max=-1&page={max(1, pages // 20)}",
                   "api/tasks?temperature=0.7&repeat=1", f"api/tasks?judge=mqm-b&sort=score&page={max(1, pages // 4)}",
                   "api/tasks?status=unscored&sort=disagreement", f"api/tasks?judge=mqm-a&sort=disagreement&page="
                   f"{max(1, pages // 4)}"],
        "search": [f"api/tasks?q={word}", f"api/tasks?q={word}&sort=score", f"api/tasks?q={word}%20jahren&sort=disagreement",
                   "api/tasks?q=seg-00012", "api/tasks?q=proz"],
        "item": [f"api/item?id={i}" for i in items[:10]],
        "transcript": [f"api/transcript?run={run}&task={task}" for run, task in tasks[::20][:10]],
        "overview": ["api/overview"],
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure(run: Path, logs: Path) -> dict[str, Any]:
    rng = random.Random(5)
    drop_viewer_tables(run)
    process, started, base, first_page = start(run, logs)
    while not derived(base):
        time.sleep(0.1)
    figures: dict[str, Any] = {"tasks": get(base + "api/tasks")["total"], "first_page_s": first_page,
                               "derived_s": time.monotonic() - started}
    latency: dict[str, list[float]] = {}
    for kind, paths in requests(base, rng).items():
        latency[kind] = [timed(base + path) for path in paths for _ in range(REPEAT)]
    figures["latency_ms"] = {kind: {"p50": statistics.median(v) * 1000,
                                    "p95": statistics.quantiles(v, n=20)[18] * 1000 if len(v) > 1 else v[0] * 1000,
                                    "max": max(v) * 1000, "n": len(v)} for kind, v in latency.items()}
    figures["idle_rss_mb"] = rss_mb(process.pid)
    process.send_signal(signal.SIGINT)
    first = reap(process, started, logs / "view.log", timeout_s=60)
    process, started, base, figures["reopen_first_page_s"] = start(run, logs)
    process.send_signal(signal.SIGINT)
    second = reap(process, started, logs / "view.log", timeout_s=60)
    figures["peak_rss_mb"] = max(first.peak_rss_mb, second.peak_rss_mb)
    figures["exit_codes"] = [first.returncode, second.returncode]
    figures["index_mb"] = (run / "index.sqlite").stat().st_size / 1e6
    return figures


def report(figures: dict[str, Any]) -> None:
    print(f"\n{figures['tasks']:,} tasks: first page {figures['first_page_s']:.2f} s (first open), "
          f"{figures['reopen_first_page_s']:.2f} s (reopen); everything derived after {figures['derived_s']:.1f} s; "
          f"peak RSS {figures['peak_rss_mb']:.0f} MB, idle {figures['idle_rss_mb']:.0f} MB; "
          f"index {figures['index_mb']:.0f} MB; exits {figures['exit_codes']}")
    print(f"  {'kind':<12} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for kind, row in figures["latency_ms"].items():
        print(f"  {kind:<12} {row['n']:>4} {row['p50']:>8.1f} {row['p95']:>8.1f} {row['max']:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="tasks per run, comma-separated")
    parser.add_argument("--workdir", type=Path, help="keep (and reuse) the runs here")
    parser.add_argument("--run", type=Path, help="measure this run directory instead of writing one")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    from benchmarks.viewer_run import build_run

    work = args.workdir or Path(tempfile.mkdtemp(prefix="viewer-bench-"))
    results = []
    targets = [args.run] if args.run else [work / f"n{int(size)}" for size in args.sizes.split(",")]
    for target in targets:
        if args.run is None:
            size = int(target.name[1:])
            run = target / "runs" / f"viewer-{size}"
            if not (run / "run.json").exists():
                started = time.monotonic()
                build_run(target, size)
                print(f"wrote {run} in {time.monotonic() - started:.0f} s")
        else:
            run = target
        figures = measure(run, run.parent)
        report(figures)
        results.append(figures)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
