"""The provider's batch ids in ``status`` and ``run.json``, and ``judge-engine cancel``: a stopped
run's open batches cancelled at the fake server (OpenAI's and Anthropic's cancel endpoints), the
cancellation recorded, and a later resume that keeps what the batches answered and carries the
rest per ``batch.fallback``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.config import FakeBatchConfig
from judge_engine.rundir.records import BATCHES
from judge_engine.rundir.store import iter_transcript
from judge_engine.running import session
from judge_engine.running.cancel import CANCELLED_HERE
from tests.harness import TEST_KEY, TEST_KEY_ENV, read_lines
from tests.running.batch.conftest import batch_job

REPO = Path(__file__).resolve().parents[3]


def _events(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / BATCHES).read_bytes().split(b"\n")[:-1] if line]


def _fewest_processed(run: Path) -> int:
    """Requests answered by the batch of the two that had answered fewer, when last polled."""
    last = {e["chunk"]: int(e.get("counts", {}).get("completed", 0)) for e in _events(run)  # type: ignore[union-attr]
            if e["event"] == "state"}
    return min(last.values()) if len(last) == 2 else 0


def _wait(condition, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _started(job_runs, submitted: int, timeout: float = 60) -> Path:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = job_runs()
        if runs and (runs[0] / BATCHES).exists() and sum(e["event"] == "submitted" for e in _events(runs[0])) == submitted:
            return runs[0]  # type: ignore[no-any-return]
        time.sleep(0.01)
    raise AssertionError("the batches were not submitted in time")


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("anthropic", "fallback"), [(False, "online"), (True, "batch")])
def test_a_stopped_runs_batches_are_named_cancelled_and_resumed(
        anthropic: bool, fallback: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two batches half processed when the run is stopped: ``status`` names their provider ids,
    ``cancel`` cancels both (refused while the process holds the run), and the resume keeps the
    answers they hold and sends the rest again: in round 2, or online."""
    monkeypatch.setenv("COLUMNS", "80")
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=20.0))) as server:
        job = batch_job(tmp_path, server, items=20, anthropic=anthropic,
                        batch={"max_requests_per_file": 10, "fallback": fallback})
        env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}
        process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", "run", str(job.config), "--no-live"],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        run = _started(job.run_dirs, submitted=2)
        assert main(["cancel", str(run)]) == 2  # its process holds it: that process would send them again
        assert "stop it first" in capsys.readouterr().err
        _wait(lambda: _fewest_processed(run) >= 2)  # a few requests of each batch processed, most not
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
        ids = [str(e["batch_id"]) for e in _events(run) if e["event"] == "submitted"]
        assert all(i.startswith("msgbatch_" if anthropic else "batch_") for i in ids)

        capsys.readouterr()
        assert main(["status", str(run)]) == 0
        out = capsys.readouterr().out
        assert all(i in out for i in ids) and all(len(line) <= 80 for line in out.splitlines() if str(run) not in line)
        manifest = json.loads((run / "run.json").read_text())
        assert sorted(manifest["batches"]["mqm"].values()) == sorted(ids)

        assert main(["cancel", str(run)]) == 0
        out = capsys.readouterr().out
        assert "2 of 2 open batches cancelled" in out and all(i in out for i in ids) and "judge-engine resume" in out
        assert all(len(line) <= 80 for line in out.splitlines() if str(run) not in line)
        cancels = [e for e in _events(run) if e["event"] == "state" and e.get("reason") == CANCELLED_HERE]
        assert sorted(str(e["batch_id"]) for e in cancels) == sorted(ids)
        assert {e["status"] for e in cancels} <= ({"canceling", "ended"} if anthropic else {"cancelling", "cancelled"})
        assert main(["cancel", str(run)]) == 0  # again: nothing open is left to cancel, nothing fails
        capsys.readouterr()

        server.update(batch={"processing_s": 0.2})  # the batches sent from here end at once
        result = session.resume(run)
        assert result.status == "completed" and result.counts.scored == 20
        outcomes = read_lines(run / "outcomes.jsonl")
        assert Counter(o["task_id"] for o in outcomes) == Counter({o["task_id"]: 1 for o in outcomes})
        results = {a.task_id: a for a in iter_transcript(run) if getattr(a, "batch", None) and a.batch["id"] in ids}
        answered = {t for t, a in results.items() if a.response is not None}  # type: ignore[union-attr]
        cancelled = {t for t, a in results.items() if a.response is None}  # type: ignore[union-attr]
        assert len(results) == 20 and answered and cancelled  # partial results: kept, and the rest
        submitted = {f"b2:{t}": n for t, n in server.stats()["batch_submissions"].items()}
        if fallback == "batch":
            assert submitted == {t: 1 if t in answered else 2 for t in results}  # the rest in round 2
            assert server.stats()["requests_total"] == 0
        else:
            assert set(submitted.values()) == {1}
            assert server.stats()["requests_total"] == len(cancelled)  # the rest online
        by_task = {o["task_id"]: o for o in outcomes}
        assert all(by_task[t]["attempts"] == 2 for t in cancelled)  # the cancelled request, then its answer


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cancel_finds_a_batch_created_but_never_recorded_and_cancels_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Killed while the create call was being answered, the run never learnt its batch's id:
    ``cancel`` finds the batch by the run and chunk in its metadata, records it and cancels it."""
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=30.0, create_delay_s=1.0))) as server:
        job = batch_job(tmp_path, server, items=6)
        env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO)}
        process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", "run", str(job.config), "--no-live"],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait(lambda: bool(job.run_dirs()) and (job.only_run() / BATCHES).exists()
              and any(e["event"] == "uploaded" for e in _events(job.only_run())))
        _wait(lambda: server.stats()["batch_requests"] == 6)  # created: its answer comes 1 s later
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        run = job.only_run()
        assert not any(e["event"] == "submitted" for e in _events(run))
        assert main(["cancel", str(run), "--judge", "nobody"]) == 2
        assert "no such judge" in capsys.readouterr().err
        assert main(["cancel", str(run)]) == 0
        assert "1 of 1 open batches cancelled" in capsys.readouterr().out
        found = [e for e in _events(run) if e["event"] == "submitted"]
        assert len(found) == 1 and found[0]["found"] and str(found[0]["batch_id"]).startswith("batch_")
        assert [e["reason"] for e in _events(run) if e["event"] == "state"] == [CANCELLED_HERE]
        server.update(batch={"processing_s": 0.2, "create_delay_s": 0.0})
        assert session.resume(run).counts.scored == 6
        assert Counter(o["task_id"] for o in read_lines(run / "outcomes.jsonl")).most_common(1)[0][1] == 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_status_after_a_killed_runs_batch_is_cancelled_says_it_is_not_running_and_holds_only_its_answers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's overnight flow (issue 34): the run killed (-9) once its batch is submitted,
    its batch cancelled. ``status`` then said "running", "20 in batches" and held the whole
    batch "for open batches". The run is not running; no batch is open: the cancelled one
    waits to be collected, and what it holds against the budget is the requests it answered
    (charged), the rest to be sent again; what is left of the budget shows what was used."""
    with FakeServer(FakeConfig(batch=FakeBatchConfig(processing_s=20.0))) as server:
        job = batch_job(tmp_path, server, items=20, judge={"budget": {"max_cost_usd": 5.0}})
        env = {**os.environ, TEST_KEY_ENV: TEST_KEY, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
        process = subprocess.Popen([sys.executable, "-m", "judge_engine.cli", "run", str(job.config), "--no-live"],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        run = _started(job.run_dirs, submitted=1)
        _wait(lambda: _answered(run) >= 3)  # some requests answered, most not
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        assert main(["cancel", str(run)]) == 0
        capsys.readouterr()
        assert main(["status", str(run)]) == 0
        out = " ".join(capsys.readouterr().out.split())
    answered = _answered(run)
    assert 3 <= answered < 20
    assert ": running ·" not in out and "not running (its process ended without closing it" in out
    assert "0 in batches" in out and "20 in ended batches, to collect" in out
    assert "held for open batches" not in out
    owed = re.search(r"~\$([0-9.]+) for answers in ended batches, not collected yet", out)
    left = re.search(r"budget \$5: \$([0-9.]+) left", out)
    assert owed is not None and left is not None, out
    assert float(left.group(1)) < 5 and float(left.group(1)) + float(owed.group(1)) == pytest.approx(5, abs=1e-5)


def _answered(run: Path) -> int:
    """Requests the run's one batch had answered when last polled (or cancelled)."""
    states = [e for e in _events(run) if e["event"] == "state"]
    return int(states[-1].get("counts", {}).get("completed", 0)) if states else 0  # type: ignore[union-attr]
