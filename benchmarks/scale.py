"""Run data at scale (issue 15): GEMBA-MQM runs of 10^4, 10^5 and 10^6 tasks against the fake server.

Per size: the run directory's bytes per task (and transcript bytes per attempt, blocks included),
the engine's peak RSS and CPU per request, a resume of the run killed at 90% (time from starting
the resume to its first new request), ``show --item`` on one item, ``export`` (when the data extra
is installed), and ``rescore`` throughput (no HTTP). Items are sentence-length segments (100-200
characters per side, as in WMT), the fake server answers at once with no limits, and the cache
is on as in a real run (it lives outside the run directory and is not counted).

    python benchmarks/scale.py --sizes 10000,100000 [--workdir DIR]
    python benchmarks/scale.py --sizes 1000000          # ~40 min on a 2-core machine
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import ChildResult, reap, spawn  # noqa: E402
from benchmarks.workload import JobSpec, write_job  # noqa: E402

_WORDS = ("the of and a to in is was he for it with as his on be at by had not are but from or have an they which "
          "one you were her all she there would their we him been has when who will more no if out so said what up "
          "its about into than them can only other new some could time these two may then do first any my now such "
          "like our over man me even most made after also did many before must through back years where much your "
          "way well down should because each just those people how too little state good very make world still own "
          "see men work long get here between both life being under never day same another know while last might "
          "us great old year off come since against go came right used take three").split()
_WORT = ("der die das und zu den von mit sich des auf für ist im dem nicht ein eine als auch es an werden aus er hat "
         "dass sie nach wird bei einer um am sind noch wie einem über einen so zum war haben nur oder aber vor zur "
         "bis mehr durch man sein wurde sei prozent hatte kann gegen vom können schon wenn habe seine mark ihre "
         "dann unter wir soll ich eines jahr zwei jahren diese dieser wieder keine seiner worden will zwischen").split()


def sentence(rng: random.Random, vocab: list[str], low: int = 100, high: int = 200) -> str:
    target, words = rng.randint(low, high), []
    while len(" ".join(words)) < target:
        words.append(rng.choice(vocab))
    return " ".join(words).capitalize() + "."


def write_segments(path: Path, count: int, *, seed: int = 11) -> Path:
    """``count`` sentence pairs; row ``i`` is the same for every ``count``."""
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            rng = random.Random(f"{seed}:{index}")
            row = {"id": f"seg-{index:07d}", "src": sentence(rng, _WORDS), "tgt": sentence(rng, _WORT),
                   "src_lang": "en", "tgt_lang": "de"}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def _lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def _bytes(run: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in run.iterdir() if p.is_file()}


def _engine(command: list[str], cwd: Path, log: Path) -> tuple[Any, float]:
    return spawn([sys.executable, "-m", "judge_engine.cli", *command], cwd=cwd, log=log)


def _wait_for_requests(server: Any, beyond: int, process: Any, timeout_s: float = 600) -> float | None:
    """Monotonic time at which the server has seen more than ``beyond`` requests."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if server.stats()["requests_total"] > beyond:
            return time.monotonic()
        time.sleep(0.02)
    return None


def measure(size: int, work: Path, server: Any) -> dict[str, Any]:
    folder = work / f"n{size}"
    items = write_segments(work / f"items-{size}.jsonl", size)
    config = write_job(folder, items, server.base_url, JobSpec(concurrency=64, max_tokens=300))
    log = folder.parent / f"n{size}.log"
    figures: dict[str, Any] = {"tasks": size}

    # 1. The run, killed at 90% of its outcomes.
    before = server.stats()["requests_total"]
    process, started = _engine(["run", str(config), "--no-live"], folder, log)
    outcomes = None
    while process.poll() is None:
        runs = [p for p in (folder / "runs").glob("*") if p.is_dir() and not p.is_symlink()] if (folder / "runs").exists() else []
        if runs and (runs[0] / "outcomes.jsonl").exists():
            outcomes = runs[0] / "outcomes.jsonl"
            if _lines(outcomes) >= 0.9 * size:
                process.send_signal(signal.SIGKILL)
                break
        time.sleep(0.5 if size >= 100_000 else 0.05)
    first = reap(process, started, log)
    assert outcomes is not None, "the run wrote no outcome"
    run = outcomes.parent
    done = _lines(outcomes)

    # 2. Resume: time to its first new request, then to the end.
    seen = server.stats()["requests_total"]
    process, started = _engine(["resume", str(run), "--no-live"], folder, log)
    first_request = _wait_for_requests(server, seen, process)
    second = reap(process, started, log)
    requests = server.stats()["requests_total"] - before
    figures.update(
        killed_at=done, resume_first_request_s=None if first_request is None else first_request - started,
        run_wall_s=first.wall_s + second.wall_s, peak_rss_mb=max(first.peak_rss_mb, second.peak_rss_mb),
        cpu_ms_per_request=(first.cpu_s + second.cpu_s) / max(1, requests) * 1000, requests=requests,
        resume_exit=second.returncode,
    )
    files = _bytes(run)
    attempts = _lines(run / "transcripts.jsonl")
    figures.update(
        bytes=files, bytes_per_task=sum(files.values()) / size,
        transcript_bytes_per_attempt=(files.get("transcripts.jsonl", 0) + files.get("blocks.jsonl", 0)) / max(1, attempts),
    )

    # 3. Reading it back.
    middle = f"seg-{size // 2:07d}"
    for name, command in (("show_item_s", ["show", str(run), "--item", middle]),
                          ("show_worst_10_s", ["show", str(run), "--sort", "score", "--limit", "10", "--brief"])):
        process, started = _engine(command, folder, log)
        result: ChildResult = reap(process, started, log)
        figures[name] = result.wall_s if result.returncode == 0 else f"exit {result.returncode}"
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        figures["export_parquet_s"] = "data extra not installed"
    else:
        process, started = _engine(["export", str(run), "--format", "parquet", "--output",
                                    str(folder / "outcomes.parquet")], folder, log)
        result = reap(process, started, log)
        figures["export_parquet_s"] = result.wall_s if result.returncode == 0 else f"exit {result.returncode}"
        figures["export_peak_rss_mb"] = result.peak_rss_mb

    # 4. Rescore: every recorded answer through the parser again, no HTTP.
    seen = server.stats()["requests_total"]
    process, started = _engine(["rescore", str(run), "--output", str(folder / "rescored")], folder, log)
    result = reap(process, started, log)
    figures.update(rescore_s=result.wall_s, rescore_tasks_per_s=size / result.wall_s,
                   rescore_peak_rss_mb=result.peak_rss_mb, rescore_exit=result.returncode,
                   rescore_requests=server.stats()["requests_total"] - seen)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from judge_engine.fake import FakeConfig, FakeServerProcess

    work = args.workdir or Path(tempfile.mkdtemp(prefix="judge-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    rows = []
    with FakeServerProcess(FakeConfig()) as server:
        for size in (int(s) for s in args.sizes.split(",")):
            print(f"[{size:,} tasks] ...", flush=True)
            figures = measure(size, work, server)
            rows.append(figures)
            print(json.dumps(figures, indent=1, default=str), flush=True)
    print("\ntasks      bytes/task  transcript B/attempt  peak RSS MB  CPU ms/req  resume 1st req s  "
          "show --item s  export s  rescore tasks/s")
    for r in rows:
        first = r["resume_first_request_s"]
        print(f"{r['tasks']:>9,}  {r['bytes_per_task']:>10,.0f}  {r['transcript_bytes_per_attempt']:>20,.0f}  "
              f"{r['peak_rss_mb']:>11,.0f}  {r['cpu_ms_per_request']:>10.3f}  "
              f"{'-' if first is None else f'{first:.2f}':>16}  {r['show_item_s']!s:>13.5}  "
              f"{r['export_parquet_s']!s:>8.5}  {r['rescore_tasks_per_s']:>15,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
