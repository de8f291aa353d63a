"""Batch mode killed while collecting (issue 23): a GEMBA-MQM run of 3,000 tasks whose batches
fail 2% and expire 1% of their requests, SIGKILLed five times while it collects results (at a
random moment up to 2 s after a batch has ended uncollected, or an online carry has no outcome),
resumed each time, then finished.

The engine is a child process, the fake server another (``FakeServerProcess``: it counts every
batch submission and every online request per task). The answer cache is off, so a request sent
again reaches the server instead of being answered from the cache. Printed, for
``fallback: online`` and ``fallback: batch``: outcome lines per task, transcript lines per batch
result, batch submissions per task against the rounds its results asked for, and online
requests per task, split into those sent again with cause (in flight at a kill: sent, its task
without an outcome when the process died) and without (its task had its outcome before the
session that sent it began, or the session sent it twice).

    python benchmarks/batch_kills.py [--n 3000] [--kills 5] [--fallback online,batch] [--seed 23]
                                     [--engine-path DIR] [--workdir DIR]

``--engine-path`` runs the engine from another checkout (e.g. an earlier commit's, exported with
``git archive``), against this checkout's fake server: the figures before and after a change.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from benchmarks.batch import _rounds  # noqa: E402
from benchmarks.harness import child_env  # noqa: E402
from benchmarks.scale import write_segments  # noqa: E402
from benchmarks.workload import JobSpec, write_job  # noqa: E402


def _job(folder: Path, items: Path, api_base: str, fallback: str) -> Path:
    config = write_job(folder, items, api_base, JobSpec(concurrency=16, max_tokens=300), cache=False)
    document = yaml.safe_load(config.read_text())
    document["judges"][0].update(mode="batch", batch={"poll_interval_s": 0.2, "fallback": fallback, "max_rounds": 3,
                                                      "max_requests_per_file": 250})
    config.write_text(yaml.safe_dump(document, allow_unicode=True))
    return config


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1] if line]


def _collecting(run: Path) -> bool:
    """A batch has ended and is not collected yet, or an online carry has no outcome yet."""
    lines = _lines(run / "batches.jsonl")
    ended = {line["chunk"] for line in lines if line["event"] == "state"
             and line.get("status") in ("completed", "expired", "cancelled", "ended")}
    collected = {line["chunk"] for line in lines if line["event"] == "collected"}
    online = {line["task_id"] for line in lines if line["event"] == "carry" and line["to"] == "online"}
    return bool(ended - collected) or bool(online - _finished(run))


def _finished(run: Path) -> set[str]:
    return {line["task_id"] for line in _lines(run / "outcomes.jsonl")}


def soak(n: int, kills: int, fallback: str, work: Path, seed: int, engine_path: Path | None) -> dict[str, Any]:
    from judge_engine.fake import FakeConfig, FakeServerProcess
    from judge_engine.fake.config import FakeBatchConfig

    rng = random.Random(seed)
    items = write_segments(work / f"items-{n}.jsonl", n)
    knobs = FakeBatchConfig(processing_s=2.0, failure_rate=0.02, expire_rate=0.01)
    env = child_env()
    if engine_path is not None:
        env["PYTHONPATH"] = str(engine_path)
    with FakeServerProcess(FakeConfig(batch=knobs, latency_s=0.2)) as server:
        folder = work / f"kills-{fallback}"
        config = _job(folder, items, server.base_url, fallback)
        log = (work / f"kills-{fallback}.log").open("ab")
        sent: list[Counter[str]] = [Counter()]
        finished: list[set[str]] = [set()]
        run: Path | None = None
        landed = 0
        for session in range(kills + 1):
            argv = ["resume", str(run)] if run is not None else ["run", str(config)]
            process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", *argv, "--no-live", "--allow-unscored"],
                                       cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
            if session < kills:
                deadline = time.monotonic() + 300
                while process.poll() is None and time.monotonic() < deadline:
                    runs = [p for p in (folder / "runs").glob("*") if p.is_dir() and not p.is_symlink()]
                    if runs and _collecting(runs[0]):
                        time.sleep(rng.uniform(0.0, 2.0))
                        if process.poll() is None:
                            process.send_signal(signal.SIGKILL)
                            landed += 1
                        break
                    time.sleep(0.01)
            code = process.wait(timeout=1800)
            run = next(p for p in (folder / "runs").glob("*") if p.is_dir() and not p.is_symlink())
            sent.append(Counter(server.stats()["by_prompt"]))
            finished.append(_finished(run))
            if code == 0 and session < kills:
                break  # it finished before the next kill could land
        stats = server.stats()
    assert run is not None
    return _counts(run, stats, sent, finished, knobs, n, landed, fallback)


def _counts(run: Path, stats: dict[str, Any], sent: list[Counter[str]], finished: list[set[str]], knobs: Any, n: int,
            landed: int, fallback: str) -> dict[str, Any]:
    from judge_engine.fake.answers import prompt_key
    from judge_engine.rundir.store import iter_transcript

    outcomes = Counter(line["task_id"] for line in _lines(run / "outcomes.jsonl"))
    attempts = list(iter_transcript(run))
    results = Counter((a.batch["id"], a.batch["custom_id"]) for a in attempts if getattr(a, "batch", None))  # type: ignore[union-attr]
    prompts = {prompt_key(a.request["messages"]): a.task_id for a in attempts}  # type: ignore[union-attr]
    online: Counter[str] = Counter()
    with_cause = without_cause = 0
    for session in range(1, len(sent)):
        delta = sent[session].copy()
        delta.subtract(sent[session - 1])
        for key, count in (+delta).items():
            task = prompts.get(key, key)
            if task in finished[session - 1]:  # its outcome was written before this session began
                without_cause += count
            elif online[task]:  # sent before, and killed in flight (no outcome at the kill)
                with_cause += 1
                without_cause += count - 1
            else:
                without_cause += count - 1  # no transport faults: one request per carry
            online[task] += count
    submitted = {f"b2:{task}": k for task, k in stats["batch_submissions"].items()}
    expected_rounds = 1 if fallback == "online" else 3
    rounds_off = sum(1 for task in outcomes if submitted.get(task) != _rounds(task, knobs, expected_rounds))
    return {
        "fallback": fallback, "tasks": n, "sessions": len(sent) - 1, "kills": landed,
        "outcome_lines": sum(outcomes.values()), "tasks_with_an_outcome": len(outcomes),
        "tasks_with_two_outcomes": sum(1 for k in outcomes.values() if k > 1),
        "batch_results_recorded_twice": sum(1 for k in results.values() if k > 1),
        "tasks_submitted_other_than_needed": rounds_off,
        "online_requests": sum(online.values()), "tasks_sent_online": len(online),
        "tasks_sent_online_twice": sum(1 for k in online.values() if k > 1),
        "sent_again_with_cause": with_cause, "sent_again_without_cause": without_cause,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3_000)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--fallback", default="online,batch")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--engine-path", type=Path, help="run the engine from this checkout (PYTHONPATH)")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="judge-batch-kills-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    ok = True
    for fallback in args.fallback.split(","):
        figures = soak(args.n, args.kills, fallback, work, args.seed, args.engine_path)
        print(json.dumps(figures), flush=True)
        ok = ok and figures["tasks_with_an_outcome"] == args.n and figures["tasks_with_two_outcomes"] == 0 and (
            figures["batch_results_recorded_twice"] == 0 and figures["sent_again_without_cause"] == 0
            and figures["tasks_submitted_other_than_needed"] == 0)
    print("PASS" if ok else "FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
