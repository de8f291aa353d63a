"""Batch mode at scale (issue 17): a GEMBA-MQM run of 10^5 tasks through the fake server's
OpenAI Batch API, with 2% failed and 1% expired requests (re-sent in round 2).

The engine is a child process (``judge-engine run CONFIG --no-live``, the judge in
``mode: batch``), the fake server another (``FakeServerProcess``: its answers are computed in
its own process, never counted). Printed: the engine's peak RSS and CPU per task (``os.wait4``),
the time from its start to every first-round chunk submitted, and the collection throughput
(results read, judged and recorded per second, from each chunk's "ended" state line to its
"collected" line), with CPU split at the moment everything was submitted; and the checks that
every task ended exactly once and was submitted once per round its results asked for.

    python benchmarks/batch.py [--n 100000] [--processing-s 5] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from benchmarks.harness import CpuSampler, reap_sampled, spawn  # noqa: E402
from benchmarks.scale import write_segments  # noqa: E402
from benchmarks.workload import JobSpec, write_job  # noqa: E402


def _batch_job(folder: Path, items: Path, api_base: str) -> Path:
    config = write_job(folder, items, api_base, JobSpec(concurrency=16, max_tokens=300))
    document = yaml.safe_load(config.read_text())
    document["judges"][0].update(mode="batch", batch={"poll_interval_s": 0.5, "fallback": "batch", "max_rounds": 3})
    config.write_text(yaml.safe_dump(document, allow_unicode=True))
    return config


def _unix(at: str) -> float:
    return datetime.fromisoformat(str(at)).timestamp()


def _phases(run: Path) -> dict[str, Any]:
    lines = [json.loads(line) for line in (run / "batches.jsonl").read_text().splitlines()]
    intents = {line["chunk"]: line for line in lines if line["event"] == "intent"}
    first_round = [c for c, line in intents.items() if line["round"] == 1]
    submitted = {line["chunk"]: _unix(line["at"]) for line in lines if line["event"] == "submitted"}
    ended: dict[str, float] = {}
    collected: dict[str, float] = {}
    for line in lines:
        if line["event"] == "state" and line.get("status") in ("completed", "expired") and line["chunk"] not in ended:
            ended[line["chunk"]] = _unix(line["at"])
        elif line["event"] == "collected":
            collected[line["chunk"]] = _unix(line["at"])
    seconds = sum(collected[c] - ended[c] for c in collected if c in ended)
    requests = sum(intents[c]["requests"] for c in collected if c in ended)
    return {
        "chunks": len(intents), "first_round_chunks": len(first_round),
        "requests_per_first_round_chunk": [intents[c]["requests"] for c in first_round],
        "bytes_per_first_round_chunk": [intents[c]["bytes"] for c in first_round],
        "all_submitted_at": max(submitted[c] for c in first_round),
        "collect_s": seconds, "collected_requests": requests,
        "collect_tasks_per_s": requests / seconds if seconds else None,
    }


def _rounds(task_id: str, knobs: Any, max_rounds: int = 3) -> int:
    """The rounds the fake's draws make a task need (its first request that neither fails nor expires)."""
    from judge_engine.fake.batches import request_draws

    for round_ in range(1, max_rounds + 1):
        fail, expire, _empty = request_draws(f"{task_id.removeprefix('b2:')}-{round_}")
        if not (fail < knobs.failure_rate or expire < knobs.expire_rate):
            return round_
    return max_rounds


def measure(n: int, work: Path, processing_s: float) -> dict[str, Any]:
    from judge_engine.fake import FakeConfig, FakeServerProcess
    from judge_engine.fake.config import FakeBatchConfig

    items = write_segments(work / f"items-{n}.jsonl", n)
    knobs = FakeBatchConfig(processing_s=processing_s, failure_rate=0.02, expire_rate=0.01)
    with FakeServerProcess(FakeConfig(batch=knobs)) as server:
        folder = work / f"batch-{n}"
        config = _batch_job(folder, items, server.base_url)
        log = work / f"batch-{n}.log"
        sampler = CpuSampler()
        wall_start = time.time()
        process, started = spawn([sys.executable, "-m", "judge_engine.cli", "run", str(config), "--no-live",
                                  "--allow-unscored"],
                                 cwd=folder, log=log)
        result = reap_sampled(process, started, log, sampler=sampler)
        stats = server.stats()
    runs = [p for p in (folder / "runs").iterdir() if p.is_dir() and not p.is_symlink()]
    run = runs[0]
    outcomes = Counter(json.loads(line)["task_id"] for line in (run / "outcomes.jsonl").read_text().splitlines())
    phases = _phases(run)
    submitted_mono = started + (phases["all_submitted_at"] - wall_start)
    cpu_submitted = sampler.cpu_at(submitted_mono) or 0.0
    session_start = _unix(json.loads((run / "run.json").read_text())["sessions"][0]["started_at"])
    cpu_start = sampler.cpu_at(started + (session_start - wall_start)) or 0.0
    submissions = Counter(stats["batch_submissions"].values())
    expected = {f"b2:{task}": n for task, n in stats["batch_submissions"].items()}
    rounds_off = sum(1 for task in outcomes if expected.get(task) != _rounds(task, knobs))
    return {
        "tasks": n, "exit": result.returncode, "wall_s": result.wall_s, "peak_rss_mb": result.peak_rss_mb,
        "cpu_s": result.cpu_s, "cpu_ms_per_task": result.cpu_s / n * 1000,
        "start_up_cpu_s": cpu_start,
        "cpu_ms_per_task_after_start_up": (result.cpu_s - cpu_start) / n * 1000,
        "submit_cpu_ms_per_task": (cpu_submitted - cpu_start) / n * 1000,
        "after_submit_cpu_ms_per_task": (result.cpu_s - cpu_submitted) / n * 1000,
        "to_all_submitted_s": phases["all_submitted_at"] - wall_start,
        "collect_tasks_per_s": phases["collect_tasks_per_s"], "collect_s": phases["collect_s"],
        "chunks": phases["chunks"], "first_round_chunks": phases["first_round_chunks"],
        "requests_per_first_round_chunk": phases["requests_per_first_round_chunk"],
        "mb_per_first_round_chunk": [round(b / 2**20, 1) for b in phases["bytes_per_first_round_chunk"]],
        "outcomes": len(outcomes), "tasks_with_two_outcomes": sum(1 for v in outcomes.values() if v > 1),
        "submissions_per_task": dict(sorted(submissions.items())),
        "tasks_submitted_other_than_needed": rounds_off,
        "chat_requests": stats["requests_total"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--processing-s", type=float, default=5.0, help="the fake's processing time per batch")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="judge-batch-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    figures = measure(args.n, work, args.processing_s)
    print(json.dumps(figures, indent=1), flush=True)
    ok = (figures["exit"] == 0 and figures["outcomes"] == args.n and figures["tasks_with_two_outcomes"] == 0
          and figures["chat_requests"] == 0 and figures["tasks_submitted_other_than_needed"] == 0)
    print(f"\n{figures['tasks']:,} tasks: peak RSS {figures['peak_rss_mb']:.0f} MB · CPU {figures['cpu_ms_per_task']:.3f} "
          f"ms/task, {figures['cpu_ms_per_task_after_start_up']:.3f} after start-up (submit "
          f"{figures['submit_cpu_ms_per_task']:.3f}, after {figures['after_submit_cpu_ms_per_task']:.3f}) "
          f"· all submitted {figures['to_all_submitted_s']:.1f} s after start · collection "
          f"{figures['collect_tasks_per_s'] or 0:,.0f} tasks/s · wall {figures['wall_s']:.0f} s · "
          f"{'PASS' if ok else 'FAIL'}: every task once, submitted once per round it needed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
