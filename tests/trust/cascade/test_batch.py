"""A cascade in batch mode: a later stage's batches are submitted as the earlier stage's results
come in (not once it has finished everything), each task is submitted once (the fake batch
API's own count per task), and a kill mid-cascade resumes to the same answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.rundir.records import BATCHES
from tests.harness import TEST_KEY, TEST_KEY_ENV
from tests.trust.cascade.conftest import (
    MODELS,
    CascadeJob,
    cascade_job,
    decisions,
    expected,
    latest,
    lines,
)

REPO = Path(__file__).resolve().parents[3]
THRESHOLDS = {"cheap": 0.95, "mid": 0.9, "strong": 0.8}
BATCH = {"mode": "batch", "batch": {"poll_interval_s": 0.05, "max_requests_per_file": 24}}
"""Four items a batch: the first stage's results come in batch by batch."""


@pytest.fixture
def batch_server() -> Iterator[FakeServer]:
    # Batches created a tenth of a second apart, each done 0.4 s later: results arrive staggered.
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=0.4, create_delay_s=0.1))) as server:
        yield server


def batch_lines(run: Path) -> list[dict[str, Any]]:
    path = run / BATCHES
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1] if line]


def _check_the_cascade(job: CascadeJob, run: Path, server: FakeServer) -> None:
    final = lines(run)
    assert set(Counter(o["task_id"] for o in final).values()) == {1}, "every task's outcome once"
    cascade = latest(run, "cascade")
    assert len(cascade) == 24
    submitted = server.stats()["batch_submissions"]
    assert set(submitted.values()) == {1}, "every task submitted once"
    asked = Counter(o["judge"] for o in final)
    assert len(submitted) == sum(asked[stage] for stage in MODELS), "nothing submitted without an outcome"
    assert main(["run", str(job.config), "--no-cascade", "--no-live"]) == 0  # online, from the cache mostly
    full = decisions(next(p for p in job.run_dirs() if p != run))
    for item, (stage, prediction, stages) in expected(full, THRESHOLDS, sorted(cascade)).items():
        verdict = cascade[item].verdict or {}
        assert (verdict["stage"], verdict["prediction"]) == (stage, prediction)
        for later in MODELS:
            assert (item in latest(run, f"{later}:item")) == (later in stages), (item, later)


@pytest.mark.slow
def test_a_later_stage_is_submitted_while_the_earlier_stages_results_come_in(
        tmp_path: Path, batch_server: FakeServer) -> None:
    # mid's batches hold up to 1,000 requests: nothing fills one, so only the timer (a poll
    # interval without a new escalation) sends them before cheap has finished
    job = cascade_job(tmp_path, batch_server, thresholds=THRESHOLDS, judge=BATCH,
                      judges={"mid": {"batch": {"poll_interval_s": 0.05, "max_requests_per_file": 1000}}})
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    events = batch_lines(run)
    cheap_collected = [n for n, e in enumerate(events) if e["judge"] == "cheap" and e["event"] == "collected"]
    mid_intents = [n for n, e in enumerate(events) if e["judge"] == "mid" and e["event"] == "intent"]
    assert len(cheap_collected) == 6 and mid_intents
    assert mid_intents[0] < cheap_collected[-1], "mid's first batch went out before cheap's last was collected"
    _check_the_cascade(job, run, batch_server)


@pytest.mark.slow
def test_a_batch_mode_cascade_killed_mid_way_resumes_with_nothing_submitted_twice(
        tmp_path: Path, batch_server: FakeServer) -> None:
    job = cascade_job(tmp_path, batch_server, thresholds=THRESHOLDS, judge=BATCH)
    env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", "run", str(job.config), "--no-live"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        runs = job.run_dirs()
        if runs and any(e["judge"] == "mid" and e["event"] == "intent" for e in batch_lines(runs[0])):
            break
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before the kill"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    run = job.only_run()
    events = batch_lines(run)
    assert sum(e["judge"] == "cheap" and e["event"] == "collected" for e in events) < 6, "killed mid-way"
    assert main(["resume", str(run), "--no-live"]) == 0
    _check_the_cascade(job, run, batch_server)
