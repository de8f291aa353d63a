"""Crash safety of batch mode: the engine is a child process, killed with SIGKILL at ten moments
across submit, poll and collect (including after the fake server accepted a batch and before the
engine recorded its id), and resumed each time. The fake server counts every request submitted
per task, so "never twice" is checked at the provider, not in the engine's own files."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.rundir.records import BATCHES
from tests.harness import TEST_KEY, TEST_KEY_ENV, read_lines
from tests.running.batch.conftest import batch_job, rounds_needed

pytestmark = pytest.mark.slow  # see tests/conftest.py: python -m pytest --all runs it

REPO = Path(__file__).resolve().parents[3]
PHASES = ["create", "poll", "create", "collect", "create", "poll", "collect", "create", "poll", "collect"]
"""Where each kill is aimed (the moments within each phase are drawn from a seeded generator)."""


def _spawn(*argv: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}
    # --allow-unscored: a task whose request fails in all three rounds (~0.03^3 each) ends
    # transport_exhausted, which is not what this test is about.
    return subprocess.Popen([sys.executable, "-m", "judge_engine.cli", *argv, "--no-live", "--allow-unscored"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _lines(run: Path | None, start: int) -> list[dict[str, object]]:
    """Complete lines of the run's batches.jsonl from byte ``start``."""
    if run is None or not (run / BATCHES).exists():
        return []
    data = (run / BATCHES).read_bytes()[start:]
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line]


def _aim(phase: str, lines: list[dict[str, object]], seen: set[str]) -> bool:
    """Whether the lines written since the launch show the moment ``phase`` is aimed at."""
    if phase == "create":  # a file was uploaded: the create call follows, answered 0.4 s late
        return any(line["event"] == "uploaded" and line["chunk"] not in seen for line in lines)
    if phase == "poll":
        return any(line["event"] == "state" and line.get("status") == "in_progress" for line in lines)
    ended = {line["chunk"] for line in lines if line["event"] == "state" and line.get("status") in ("completed", "expired")}
    collected = {line["chunk"] for line in lines if line["event"] == "collected"}
    return bool(ended - collected)


@pytest.mark.timeout(600)
def test_ten_sigkills_across_submit_poll_and_collect_submit_no_task_twice(tmp_path: Path) -> None:
    rng = random.Random(17)
    knobs = FakeBatchConfig(processing_s=2.0, failure_rate=0.02, expire_rate=0.01, create_delay_s=0.4)
    with FakeServer(FakeConfig(batch=knobs)) as server:
        job = batch_job(tmp_path, server, items=2_000, batch={"max_requests_per_file": 100},
                        judge={"limits": {"concurrency": 4}})
        process = _spawn("run", str(job.config))
        run: Path | None = None
        kills: list[tuple[str, int]] = []
        for phase in PHASES:
            start = (run / BATCHES).stat().st_size if run is not None and (run / BATCHES).exists() else 0
            seen = {str(line["chunk"]) for line in _lines(run, 0) if line["event"] == "uploaded"}
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and process.poll() is None:
                if run is None and job.run_dirs():
                    run = job.only_run()
                if _aim(phase, _lines(run, start), seen):
                    break
                time.sleep(0.01)
            time.sleep({"create": rng.uniform(0.05, 0.3), "poll": rng.uniform(0.0, 0.5),
                        "collect": rng.uniform(0.0, 0.05)}[phase])
            if process.poll() is not None:
                break  # it finished before this kill could land
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)
            kills.append((phase, len(_lines(run, 0))))
            assert run is not None
            process = _spawn("resume", str(run))
        assert process.wait(timeout=300) == 0, process.stderr.read().decode() if process.stderr else ""
        assert run is not None and len(kills) == 10, kills

        outcomes = read_lines(run / "outcomes.jsonl")
        tasks = Counter(o["task_id"] for o in outcomes)
        assert len(tasks) == 2_000 and max(tasks.values()) == 1  # every task exactly once
        assert all(o["status"] == "scored" or o["reason_code"] == "transport_exhausted" for o in outcomes)
        # At the provider: each task submitted once per round its results asked for, never more.
        expected = {task: rounds_needed(task, knobs, max_rounds=3) for task in tasks}
        submitted = {f"b2:{t}": n for t, n in server.stats()["batch_submissions"].items()}
        assert submitted == expected
        assert sum(expected.values()) > 2_000  # failed and expired requests were sent again
        # No chunk holds two batches that ran, though kills fell between create and its record.
        listed = _list_batches(server)
        running = Counter(b["metadata"]["judge_engine_chunk"] for b in listed if b["status"] != "failed")
        assert max(running.values()) == 1
        found = [line for line in _lines(run, 0) if line["event"] == "submitted" and line.get("found")]
        assert found, "no kill landed between a batch's creation and its record"


def _list_batches(server: FakeServer) -> list[dict[str, object]]:
    batches: list[dict[str, object]] = []
    after = ""
    while True:
        url = f"{server.base_url}/batches?limit=100" + (f"&after={after}" if after else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            page = json.loads(response.read())
        batches += page["data"]
        if not page["has_more"]:
            return batches
        after = page["last_id"]
